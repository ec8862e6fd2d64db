"""T5's bucketed relative position bias (Raffel et al. 2020, §2.1).

T5 gives attention no position vectors. Each head adds a learned scalar to every
score, and the scalar depends only on the *bucket* of the offset between key and
query: one bucket per offset for short distances, logarithmically wider buckets up
to ``max_distance``, and one bucket for everything farther. The table of scalars,
``[num_buckets, num_heads]``, is shared by all layers. The bucket function follows
Mesh TensorFlow's ``_relative_position_bucket``, which Hugging Face's T5 ports
(``T5Attention._relative_position_bucket``); the tests compare the two.

Shapes: H heads, T queries, S keys.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def _check_buckets(num_buckets: int, max_distance: int, bidirectional: bool) -> int:
    """Check the bucket settings; return the exact range e (one offset per bucket)."""
    if not isinstance(num_buckets, int) or not isinstance(max_distance, int):
        raise ValueError(
            "num_buckets and max_distance must be integers, got "
            f"num_buckets={num_buckets!r}, max_distance={max_distance!r}"
        )
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_direction // 2
    if max_exact < 1:
        least = 4 if bidirectional else 2
        raise ValueError(
            f"num_buckets must be >= {least} (bidirectional={bidirectional}), "
            f"got num_buckets={num_buckets}"
        )
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must exceed the exact range {max_exact} "
            f"(num_buckets={num_buckets}, bidirectional={bidirectional}), "
            f"got max_distance={max_distance}"
        )
    return max_exact


def t5_relative_position_bucket(
    relative_position: Tensor,
    *,
    bidirectional: bool = False,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    """Map key − query offsets to T5's buckets.

    With n buckets per direction (n = ``num_buckets``, or half of it when
    ``bidirectional``), the exact range e = n // 2 and M = ``max_distance``, a
    distance r ≥ 0 goes to

        bucket(r) = r                                            if r < e,
        bucket(r) = min(n − 1, e + ⌊ln(r/e) / ln(M/e) · (n − e)⌋)  otherwise.

    Distances 0 … e − 1 have a bucket each, the next buckets are spaced
    logarithmically, and the last one holds every distance from about M on (from 113
    on for the defaults, where the logarithm first reaches n − 1). T5's bias is
    therefore *constant* beyond M. Raffel et al. 2020, §2.1; the formula is Mesh
    TensorFlow's ``_relative_position_bucket``, and the result equals Hugging Face's
    ``T5Attention._relative_position_bucket`` (checked in the tests).

    Causal (``bidirectional=False``, T5's decoder): r = max(query − key, 0), so keys
    at or after the query share bucket 0. Bidirectional (T5's encoder):
    r = |key − query|, and keys after the query take the upper n buckets
    (n + bucket(r)).

    Args:
        relative_position: integer tensor of any shape holding
            ``key_position − query_position`` (negative for keys before the query).
        bidirectional: ``False`` for causal attention, ``True`` for an encoder.
        num_buckets: total number of buckets, ≥ 2 (≥ 4 when ``bidirectional``).
        max_distance: M, from which all distances share the last bucket; must
            exceed the exact range e.

    Returns:
        int64 tensor of ``relative_position``'s shape, values in [0, num_buckets).

    Raises:
        ValueError: for a floating-point ``relative_position``, non-integer
            settings, too few buckets, or ``max_distance`` ≤ e.

    Example:
        >>> t5_relative_position_bucket(-torch.tensor([0, 1, 15, 16, 112, 113, 5000]))
        tensor([ 0,  1, 15, 16, 30, 31, 31])
    """
    max_exact = _check_buckets(num_buckets, max_distance, bidirectional)
    if relative_position.dtype.is_floating_point or relative_position.dtype.is_complex:
        raise ValueError(
            "relative_position must be an integer tensor (key − query offsets), "
            f"got dtype {relative_position.dtype}"
        )
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    relative_position = relative_position.long()
    if bidirectional:
        # keys after the query take the upper half of the buckets
        offset = (relative_position > 0).long() * per_direction
        distance = relative_position.abs()
    else:
        offset = torch.zeros_like(relative_position)
        distance = (-relative_position).clamp(min=0)  # how far back; later keys: 0
    # log-spaced buckets from max_exact on; clamp(min=1) only avoids log(0), whose
    # result torch.where discards (distance 0 is in the exact range)
    log_distance = torch.log(distance.float().clamp(min=1) / max_exact)
    log_ratio = log_distance / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (per_direction - max_exact)).long()
    large = large.clamp(max=per_direction - 1)  # from about max_distance on: the last
    return offset + torch.where(distance < max_exact, distance, large)


class T5RelativePositionBias(nn.Module):
    """A learned scalar bias per (bucket, head), added to the attention scores.

    score[h, t, s] += table[bucket(s − t), h] (Raffel et al. 2020, §2.1). One
    instance is shared by all layers, as in T5. The table starts at zero, so an
    untrained model sees no positional signal (Hugging Face initialises T5's table
    from N(0, 1/d_model) instead).

    Args:
        num_heads: heads H ≥ 1.
        num_buckets, max_distance, bidirectional: see
            :func:`t5_relative_position_bucket`.

    Raises:
        ValueError: for num_heads < 1, or bucket settings that
            :func:`t5_relative_position_bucket` rejects.

    Example:
        >>> bias = T5RelativePositionBias(4)
        >>> bias.bias.weight.shape  # the table: [num_buckets, num_heads]
        torch.Size([32, 4])
        >>> bias(3, 5).shape  # [H, T, S]
        torch.Size([4, 3, 5])
    """

    def __init__(
        self,
        num_heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(
                f"num_heads must be an integer >= 1, got num_heads={num_heads!r}"
            )
        _check_buckets(num_buckets, max_distance, bidirectional)
        self.num_heads, self.num_buckets = num_heads, num_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        self.bias = nn.Embedding(num_buckets, num_heads)  # table[bucket, head]
        nn.init.zeros_(self.bias.weight)

    def forward(self, q_len: int, k_len: int) -> Tensor:
        """The bias for ``q_len`` queries aligned to the end of ``k_len`` keys.

        Query t sits at key position t + k_len − q_len (as when decoding with a KV
        cache, and as in :func:`~posenc_lib.encodings.alibi.alibi_bias`).

        Args:
            q_len: number of queries T, 1 ≤ T ≤ S.
            k_len: number of keys S.

        Returns:
            ``[H, T, S]`` in the table's dtype, on its device.

        Raises:
            ValueError: unless 1 ≤ q_len ≤ k_len.
        """
        if q_len < 1 or q_len > k_len:
            raise ValueError(
                f"need 1 <= q_len <= k_len, got q_len={q_len}, k_len={k_len}"
            )
        device = self.bias.weight.device
        query_positions = torch.arange(q_len, device=device) + (k_len - q_len)  # (T,)
        key_positions = torch.arange(k_len, device=device)  # (S,)
        relative = key_positions[None, :] - query_positions[:, None]  # (T, S): s − t
        buckets = t5_relative_position_bucket(
            relative,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )  # (T, S)
        return self.bias(buckets).permute(2, 0, 1)  # (T, S, H) -> (H, T, S)

    def for_positions(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """The bias for explicit positions, e.g. the per-sequence positions of a
        left-padded batch (from :func:`~posenc_lib.encodings.positions_from_mask`).

        Args:
            query_positions: integer ``[batch, q_len]``.
            key_positions: integer ``[batch, k_len]``.

        Returns:
            ``[batch, H, q_len, k_len]``: the bias of offset key − query, in the table's
            dtype, on its device.

        Raises:
            ValueError: for positions that are not integer ``[batch, len]`` tensors with
                the same batch size.
        """
        named = (("query_positions", query_positions), ("key_positions", key_positions))
        for name, p in named:
            if p.dim() != 2 or p.dtype.is_floating_point or p.dtype == torch.bool:
                raise ValueError(
                    f"{name} must be an integer tensor [batch, len], "
                    f"got {p.dtype} {tuple(p.shape)}"
                )
        if query_positions.shape[0] != key_positions.shape[0]:
            raise ValueError(
                f"batch sizes differ: {query_positions.shape[0]} queries vs "
                f"{key_positions.shape[0]} keys"
            )
        device = self.bias.weight.device
        queries = query_positions.to(device)[:, :, None]  # (B, T, 1)
        keys = key_positions.to(device)[:, None, :]  # (B, 1, S)
        buckets = t5_relative_position_bucket(
            keys - queries,  # (B, T, S): s − t
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        return self.bias(buckets).permute(0, 3, 1, 2)  # (B, T, S, H) -> (B, H, T, S)


def t5_bucket_starts(num_buckets: int = 32, max_distance: int = 128) -> Tensor:
    """The smallest causal distance r = t − s ≥ 0 in each of T5's buckets.

    Bucket b holds the distances ``starts[b]`` … ``starts[b + 1] − 1``; the last bucket
    holds every r ≥ ``starts[-1]`` (unbounded). The bucket of r never decreases as r
    grows, so the starts are non-decreasing; a bucket that no distance reaches (possible
    with many buckets and a small ``max_distance``) gets the start of the next one, so it
    holds no distance.

    Args:
        num_buckets: N_b, as in :func:`t5_relative_position_bucket` (causal).
        max_distance: r_max, as there.

    Returns:
        int64 ``[num_buckets]``, on the CPU.

    Raises:
        ValueError: for settings :func:`t5_relative_position_bucket` rejects.
    """
    _check_buckets(num_buckets, max_distance, False)
    distances = torch.arange(max_distance + 1)  # the last bucket starts by r_max
    buckets = t5_relative_position_bucket(-distances, num_buckets=num_buckets, max_distance=max_distance)
    return torch.searchsorted(buckets, torch.arange(num_buckets))


def t5_bucket_pair_counts(length: int, num_buckets: int = 32, max_distance: int = 128) -> Tensor:
    """How many (query, key) pairs of one causal window fall in each of T5's buckets.

    A window of ``length`` tokens has ``length − r`` pairs at distance r = t − s
    (0 ≤ r < length), ``length · (length + 1) / 2`` in all; each distance's pairs are
    counted in its causal bucket.

    Args:
        length: the window length T ≥ 1 (tokens).
        num_buckets: N_b, as in :func:`t5_relative_position_bucket` (causal).
        max_distance: r_max, as there.

    Returns:
        int64 ``[num_buckets]``, on the CPU; it sums to ``length · (length + 1) / 2``.

    Raises:
        ValueError: for ``length`` < 1, or settings :func:`t5_relative_position_bucket`
            rejects.
    """
    if not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be an integer >= 1, got length={length!r}")
    distances = torch.arange(length)
    buckets = t5_relative_position_bucket(-distances, num_buckets=num_buckets, max_distance=max_distance)
    return torch.zeros(num_buckets, dtype=torch.int64).index_add_(0, buckets, length - distances)
