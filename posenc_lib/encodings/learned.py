"""Learned absolute positional embedding: one trainable vector per position (GPT-2 style)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from posenc_lib.encodings.positions import check_positions

DEFAULT_INIT_STD = 0.02
"""Standard deviation of the table's initial values: 0.02, Hugging Face's ``initializer_range``
for GPT-2 and BERT (Devlin et al. 2019 use a truncated normal of the same width; OpenAI's GPT-2
code initialises its position table with 0.01)."""


class LearnedPositionalEmbedding(nn.Module):
    """A trainable table of ``max_positions`` vectors, added to the token embeddings.

    ``forward(x, positions) = x + table[positions]``, with positions 0 … seq−1 by default. The
    table starts as N(0, init_std²), 0.02 by default (see :data:`DEFAULT_INIT_STD`); PyTorch's
    own ``nn.Embedding`` default, N(0, 1), is ``init_std=1.0``. Positions at or beyond
    ``max_positions`` have no vector at all, so asking for one is an error, not an
    extrapolation.

    Args:
        max_positions: rows of the table (the largest position is max_positions − 1), ≥ 1.
        d_model: width of each vector, ≥ 1.
        init_std: standard deviation of the initial values, > 0.

    Raises:
        ValueError: at construction for a non-positive size or std; in ``forward`` when ``x`` is
            not ``[batch, seq, d_model]``, when ``positions`` has the wrong shape or dtype, or
            when a position lies outside 0 … max_positions − 1 (never an IndexError).

    Example:
        >>> emb = LearnedPositionalEmbedding(16, 8)
        >>> emb(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(self, max_positions: int, d_model: int, *, init_std: float = DEFAULT_INIT_STD) -> None:
        super().__init__()
        if max_positions < 1:
            raise ValueError(f"max_positions must be >= 1, got max_positions={max_positions}")
        if d_model < 1:
            raise ValueError(f"d_model must be >= 1, got d_model={d_model}")
        if not init_std > 0:
            raise ValueError(f"init_std must be > 0, got init_std={init_std}")
        self.max_positions = max_positions
        self.d_model = d_model
        self.table = nn.Embedding(max_positions, d_model)
        nn.init.normal_(self.table.weight, mean=0.0, std=init_std)

    def forward(self, x: Tensor, positions: Tensor | None = None) -> Tensor:
        """Add the table's row of each token's position.

        Args:
            x: ``[batch, seq, d_model]``, any float dtype.
            positions: integer ``[seq]`` (shared by the batch) or ``[batch, seq]`` (per
                sequence, e.g. from a left-padded mask via
                :func:`~posenc_lib.encodings.positions.positions_from_mask`); default
                0 … seq − 1.

        Returns:
            ``[batch, seq, d_model]``, x's dtype.
        """
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must be [batch, seq, d_model={self.d_model}], got shape {tuple(x.shape)}"
            )
        seq = x.shape[1]
        if positions is None:
            if seq > self.max_positions:
                raise ValueError(
                    f"sequence length {seq} exceeds the learned table's max_positions="
                    f"{self.max_positions}: a learned absolute embedding has no vector for "
                    f"positions >= {self.max_positions}"
                )
            positions = torch.arange(seq, device=x.device)
        else:
            check_positions(positions, x.shape[0], seq)
            if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= self.max_positions):
                raise ValueError(
                    f"positions must lie in 0 … {self.max_positions - 1} (the learned table's "
                    f"max_positions={self.max_positions}), got min {int(positions.min())}, "
                    f"max {int(positions.max())}"
                )
        return x + self.table(positions.to(x.device)).to(x.dtype)  # (seq | batch×seq, d) broadcasts

