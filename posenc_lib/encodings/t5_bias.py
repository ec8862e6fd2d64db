"""T5's bucketed relative position bias (Raffel et al. 2020, §2.1)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def t5_relative_position_bucket(
    relative_position: Tensor,
    *,
    bidirectional: bool = False,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    """Map key − query offsets to T5's buckets.

    Half of the buckets (per direction) hold the exact small distances 0 … max_exact − 1;
    the rest cover max_exact … max_distance logarithmically, and every farther distance
    shares the last bucket. So T5's bias is *constant* beyond ``max_distance``.
    Raffel et al. 2020, §2.1 ("we use 32 embeddings … with ranges that increase in size
    logarithmically up to an offset of 128").

    Args:
        relative_position: integer tensor of any shape holding ``key_pos − query_pos``.
        bidirectional: ``False`` for causal attention (future offsets map to bucket 0);
            ``True`` spends half the buckets on each direction (the encoder).
        num_buckets: total buckets ≥ 2 (≥ 4 if bidirectional).
        max_distance: the distance from which all offsets share one bucket; > the exact range.

    Returns:
        int64 tensor, relative_position's shape, values in [0, num_buckets).

    Raises:
        ValueError: for too few buckets or a max_distance inside the exact range.
    """
    buckets = num_buckets // 2 if bidirectional else num_buckets
    max_exact = buckets // 2
    if max_exact < 1:
        raise ValueError(f"num_buckets too small: got num_buckets={num_buckets} (bidirectional={bidirectional})")
    if max_distance <= max_exact:
        raise ValueError(f"max_distance must exceed the exact range {max_exact}, got max_distance={max_distance}")
    relative_position = relative_position.long()
    offset = torch.zeros_like(relative_position)
    if bidirectional:
        offset = (relative_position > 0).long() * buckets  # keys after the query: the upper half
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # how far back the key is; future keys → 0
    # log-spaced buckets for max_exact ≤ distance < max_distance
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (log_ratio * (buckets - max_exact)).long()).clamp(max=buckets - 1)
    return offset + torch.where(distance < max_exact, distance, large)


class T5RelativePositionBias(nn.Module):
    """A learned scalar bias per (bucket, head), added to the attention scores.

    ``forward(q_len, k_len)`` returns ``[num_heads, q_len, k_len]`` with the queries aligned to
    the end of the keys (as :func:`~posenc_lib.encodings.alibi.alibi_bias`). The table starts
    at zero, so an untrained model sees no positional signal. One instance is shared by all
    layers, as in T5 (Raffel et al. 2020, §2.1).

    Args:
        num_heads: heads ≥ 1.
        num_buckets, max_distance, bidirectional: see :func:`t5_relative_position_bucket`.
    """

    def __init__(self, num_heads: int, *, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = False) -> None:
        super().__init__()
        if num_heads < 1:
            raise ValueError(f"num_heads must be >= 1, got num_heads={num_heads}")
        self.num_heads, self.num_buckets = num_heads, num_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        t5_relative_position_bucket(torch.zeros(1), bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
        self.bias = nn.Embedding(num_buckets, num_heads)
        nn.init.zeros_(self.bias.weight)

    def forward(self, q_len: int, k_len: int) -> Tensor:
        """Bias ``[num_heads, q_len, k_len]`` in the table's dtype, on its device."""
        if q_len < 1 or q_len > k_len:
            raise ValueError(f"need 1 <= q_len <= k_len, got q_len={q_len}, k_len={k_len}")
        device = self.bias.weight.device
        query_positions = torch.arange(q_len, device=device) + (k_len - q_len)
        key_positions = torch.arange(k_len, device=device)
        relative = key_positions[None, :] - query_positions[:, None]  # (q, k): key − query
        buckets = t5_relative_position_bucket(
            relative, bidirectional=self.bidirectional, num_buckets=self.num_buckets, max_distance=self.max_distance
        )
        return self.bias(buckets).permute(2, 0, 1)  # (q, k, h) -> (h, q, k)

    def for_positions(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """Bias for explicit positions, e.g. per-sequence positions of a left-padded batch.

        Args:
            query_positions: integer ``[batch, q_len]``.
            key_positions: integer ``[batch, k_len]``.

        Returns:
            ``[batch, num_heads, q_len, k_len]``: the bias of offset key − query, in the table's
            dtype, on its device.

        Raises:
            ValueError: for positions that are not integer ``[batch, len]`` tensors with equal batch.
        """
        for name, p in (("query_positions", query_positions), ("key_positions", key_positions)):
            if p.dim() != 2 or p.dtype.is_floating_point or p.dtype == torch.bool:
                raise ValueError(f"{name} must be an integer tensor [batch, len], got {p.dtype} {tuple(p.shape)}")
        if query_positions.shape[0] != key_positions.shape[0]:
            raise ValueError(f"batch sizes differ: {query_positions.shape[0]} queries vs {key_positions.shape[0]} keys")
        device = self.bias.weight.device
        relative = key_positions.to(device)[:, None, :] - query_positions.to(device)[:, :, None]  # (B, q, k)
        buckets = t5_relative_position_bucket(
            relative, bidirectional=self.bidirectional, num_buckets=self.num_buckets, max_distance=self.max_distance
        )
        return self.bias(buckets).permute(0, 3, 1, 2)  # (B, q, k, h) -> (B, h, q, k)
