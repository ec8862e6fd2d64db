"""ALiBi: attention with linear biases (Press, Smith & Lewis 2022, §3)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from posenc_lib.encodings.positions import positions_from_mask


def _slopes_power_of_two(n: int) -> list[float]:
    # Geometric sequence that starts at 2^(-8/n) and has that same ratio (Press et al. §3).
    start = 2.0 ** (-8.0 / n)
    return [start ** (k + 1) for k in range(n)]


def _slopes(n: int) -> list[float]:
    if n & (n - 1) == 0:  # a power of two
        return _slopes_power_of_two(n)
    closest = 2 ** math.floor(math.log2(n))
    # The paper's rule: the closest lower power of two, then every other slope of 2×closest.
    return _slopes_power_of_two(closest) + _slopes(2 * closest)[0::2][: n - closest]


def alibi_slopes(num_heads: int) -> Tensor:
    """The per-head ALiBi slopes m_h, in the paper's head order.

    For n a power of two: m_h = 2^(−8h/n), h = 1 … n (a geometric sequence whose first term
    and ratio are both 2^(−8/n)). Otherwise the slopes of the closest lower power of two, c,
    followed by every other slope of the 2c sequence until there are n (Press et al. 2022,
    §3 and their reference code ``get_slopes``).

    Args:
        num_heads: number of attention heads n ≥ 1.

    Returns:
        Tensor ``[num_heads]``, float32, computed in float64 then rounded.

    Raises:
        ValueError: if ``num_heads`` < 1.

    Example:
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
    """
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be an integer >= 1, got num_heads={num_heads!r}")
    return torch.tensor(_slopes(num_heads), dtype=torch.float64).to(torch.float32)


def alibi_bias(
    num_heads: int,
    q_len: int,
    k_len: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    slopes: Tensor | None = None,
) -> Tensor:
    """The ALiBi bias added to attention scores: bias[h, i, j] = −m_h · |(i + k_len − q_len) − j|.

    Queries are aligned to the end of the keys (query i sits at key position
    i + k_len − q_len), as when decoding with a KV cache. The causal mask is *not* included:
    combine it separately. Press et al. 2022, §3 (the causal form −m·(i − j) for j ≤ i).

    Args:
        num_heads: heads n ≥ 1 (slopes from :func:`alibi_slopes`).
        q_len: number of queries, 1 ≤ q_len ≤ k_len.
        k_len: number of keys ≥ 1.
        device, dtype: of the returned tensor.
        slopes: ``[num_heads]`` slopes to use instead of the paper's (e.g. a sign-flipped
            demonstration); default :func:`alibi_slopes` (num_heads).

    Returns:
        Tensor ``[num_heads, q_len, k_len]``, zero where a query meets its own position
        (≤ 0 for non-negative slopes).

    Raises:
        ValueError: for num_heads < 1, q_len < 1, q_len > k_len, or slopes not ``[num_heads]``.

    Example:
        >>> alibi_bias(1, 3, 3)[0]
        tensor([[ 0.0000, -0.0039, -0.0078],
                [-0.0039,  0.0000, -0.0039],
                [-0.0078, -0.0039,  0.0000]])
    """
    if slopes is None:
        slopes = alibi_slopes(num_heads)
    elif slopes.shape != (num_heads,):
        raise ValueError(f"slopes must be [num_heads={num_heads}], got shape {tuple(slopes.shape)}")
    if q_len < 1 or k_len < 1:
        raise ValueError(f"q_len and k_len must be >= 1, got q_len={q_len}, k_len={k_len}")
    if q_len > k_len:
        raise ValueError("q_len must be <= k_len (queries are aligned to the end of the keys), "
                         f"got q_len={q_len}, k_len={k_len}")
    if k_len > 2**24:
        raise ValueError(f"k_len must be <= 2**24 (positions are float32), got k_len={k_len}")
    # float32 positions: exact for integers below 2^24, and half the memory of int64 for the
    # (q, k) distance matrix, the largest tensor here
    query_positions = torch.arange(q_len, device=device, dtype=torch.float32) + (k_len - q_len)  # (q,)
    key_positions = torch.arange(k_len, device=device, dtype=torch.float32)  # (k,)
    distance = (query_positions[:, None] - key_positions[None, :]).abs()  # (q, k)
    return (-slopes.to(device)[:, None, None] * distance[None]).to(dtype)  # (h, q, k)


def alibi_bias_from_mask(
    num_heads: int,
    attention_mask: Tensor,
    q_len: int | None = None,
    *,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Padding-aware ALiBi bias: bias[b, h, i, j] = −m_h · |p_b(i) − p_b(j)|, p from the mask.

    Positions ``p_b`` come from :func:`positions_from_mask`, so a left-padded sequence gets
    the same bias over its real tokens as it would alone (Press et al. 2022, §3; Hugging Face's
    BLOOM builds its key positions the same way). Pads are *not* masked here: combine the
    bias with the padding and causal masks.

    Args:
        num_heads: heads n ≥ 1 (slopes from :func:`alibi_slopes`).
        attention_mask: ``[batch, k_len]``, 1/True for real tokens.
        q_len: number of queries, aligned to the end of the keys; default ``k_len``.
        dtype: of the returned tensor (on the mask's device).

    Returns:
        Tensor ``[batch, num_heads, q_len, k_len]``.

    Raises:
        ValueError: for a bad mask, num_heads < 1, or q_len outside 1 … k_len.

    Example:
        >>> alibi_bias_from_mask(1, torch.tensor([[0, 1, 1]]))[0, 0]
        tensor([[ 0.0000,  0.0000, -0.0039],
                [ 0.0000,  0.0000, -0.0039],
                [-0.0039, -0.0039,  0.0000]])
    """
    slopes = alibi_slopes(num_heads).to(attention_mask.device)
    positions = positions_from_mask(attention_mask)  # (B, S)
    k_len = positions.shape[1]
    q_len = k_len if q_len is None else q_len
    if q_len < 1 or q_len > k_len:
        raise ValueError(f"q_len must lie in 1 … k_len={k_len}, got q_len={q_len}")
    query_positions = positions[:, k_len - q_len :]  # (B, T): queries are the last q_len tokens
    distance = (query_positions[:, :, None] - positions[:, None, :]).abs()  # (B, T, S)
    return (-slopes[None, :, None, None] * distance[:, None]).to(dtype)  # (B, H, T, S)
