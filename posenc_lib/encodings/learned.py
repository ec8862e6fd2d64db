"""Learned absolute positional embedding: one trainable vector per position (GPT-2 style)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class LearnedPositionalEmbedding(nn.Module):
    """A trainable table of ``max_positions`` vectors, added to the token embeddings.

    ``forward(x) = x + table[:seq]``. The table is an ``nn.Embedding`` initialised as PyTorch
    does, N(0, 1). Positions beyond ``max_positions`` have no vector at all, so a longer
    sequence is an error, not an extrapolation.

    Args:
        max_positions: rows of the table (the longest sequence the model can take), ≥ 1.
        d_model: width of each vector, ≥ 1.

    Raises:
        ValueError: at construction for a non-positive size; in ``forward`` when ``x`` is not
            ``[batch, seq, d_model]`` or when seq > max_positions (never an IndexError).

    Example:
        >>> emb = LearnedPositionalEmbedding(16, 8)
        >>> emb(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(self, max_positions: int, d_model: int) -> None:
        super().__init__()
        if max_positions < 1:
            raise ValueError(f"max_positions must be >= 1, got max_positions={max_positions}")
        if d_model < 1:
            raise ValueError(f"d_model must be >= 1, got d_model={d_model}")
        self.max_positions = max_positions
        self.d_model = d_model
        self.table = nn.Embedding(max_positions, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """Add the first ``seq`` rows of the table.

        Args:
            x: ``[batch, seq, d_model]``, any float dtype.

        Returns:
            ``[batch, seq, d_model]``, x's dtype.
        """
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must be [batch, seq, d_model={self.d_model}], got shape {tuple(x.shape)}"
            )
        seq = x.shape[1]
        if seq > self.max_positions:
            raise ValueError(
                f"sequence length {seq} exceeds the learned table's max_positions="
                f"{self.max_positions}: a learned absolute embedding has no vector for "
                f"positions >= {self.max_positions}"
            )
        positions = torch.arange(seq, device=x.device)
        return x + self.table(positions).to(x.dtype)  # (seq, d) broadcasts over batch
