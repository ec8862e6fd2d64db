"""Three interchangeable ways to run ALiBi attention (Press, Smith & Lewis 2022, §3).

All three compute softmax(q kᵀ/√D − m_h·|i − j| + mask) v with the queries aligned to the end
of the keys (query i sits at key position i + S − T):

* ``"explicit"``: scores, bias and mask as ordinary tensors, then ``softmax`` — the equation
  written out; it holds the ``[B, H, T, S]`` scores and the ``[H, T, S]`` bias.
* ``"sdpa"``: :func:`torch.nn.functional.scaled_dot_product_attention` with the bias and the
  causal mask in one float ``attn_mask`` (as the model's :func:`~posenc_lib.model.attention.attend`);
  the ``[H, T, S]`` bias is built, the scores stay inside the kernel.
* ``"flex"``: FlexAttention with a ``score_mod`` that adds −m_h·(i − j) to each score as it is
  computed, and a block mask for causality. Compiled (on CUDA by default) it never builds
  the bias or the scores; run eagerly (the CPU default: compiling costs tens of seconds) it
  evaluates the ``score_mod`` over the full ``[B, H, T, S]`` score matrix.

:func:`alibi_attention` picks one by name; :data:`DEFAULT_IMPLEMENTATION` records which the
library uses on each device type, chosen from the measurements in the ALiBi chapter.

Shapes: B batch, H heads, T queries, S keys, D = head_dim.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from posenc_lib.model.attention import causal_mask
from posenc_lib.encodings.alibi import alibi_bias, alibi_slopes

ALIBI_IMPLEMENTATIONS: tuple[str, ...] = ("explicit", "sdpa", "flex")
"""The names :func:`alibi_attention` accepts."""

DEFAULT_IMPLEMENTATION: dict[str, str] = {"cpu": "sdpa", "cuda": "flex"}
"""Which implementation :func:`alibi_attention` runs when none is named, by device type
(others fall back to ``"sdpa"``). CPU: SDPA was the fastest and used the least memory of the
three in the chapter's measurement. CUDA: compiled FlexAttention, which never builds the
``[H, T, S]`` bias that SDPA needs."""


def _check(q: Tensor, k: Tensor, v: Tensor, slopes: Tensor | None, causal: bool) -> Tensor:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be [batch, heads, seq, head_dim], got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    heads, t, s = q.shape[1], q.shape[2], k.shape[2]
    if causal and t > s:
        raise ValueError(f"with causal=True the queries must not outnumber the keys, got T={t}, S={s}")
    slopes = alibi_slopes(heads) if slopes is None else slopes
    if slopes.shape != (heads,):
        raise ValueError(f"slopes must be [heads={heads}], got shape {tuple(slopes.shape)}")
    return slopes.to(device=q.device, dtype=torch.float32)


def alibi_attention_explicit(q: Tensor, k: Tensor, v: Tensor, slopes: Tensor | None = None, *,
                             causal: bool = True) -> Tensor:
    """ALiBi attention written out: softmax(q kᵀ/√D + bias + mask) v (Press et al. 2022, eq. in §3).

    Args:
        q: ``[B, H, T, D]``; k, v: ``[B, H, S, D]`` (T ≤ S when ``causal``).
        slopes: ``[H]`` slopes m_h; default :func:`~posenc_lib.encodings.alibi.alibi_slopes` (H).
        causal: mask keys after each query; ``False`` gives the symmetric encoder form
            −m_h·|i − j|.

    Returns:
        ``[B, H, T, D]``, q's dtype.

    Raises:
        ValueError: for ranks other than 4, T > S with ``causal``, or slopes not ``[H]``.
    """
    slopes = _check(q, k, v, slopes, causal)
    t, s = q.shape[2], k.shape[2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, S)
    scores = scores + alibi_bias(q.shape[1], t, s, device=q.device, slopes=slopes).to(q.dtype)
    if causal:
        scores = scores + causal_mask(t, s, device=q.device, dtype=q.dtype)
    return scores.softmax(dim=-1) @ v  # (B, H, T, D)


def alibi_attention_sdpa(q: Tensor, k: Tensor, v: Tensor, slopes: Tensor | None = None, *,
                         causal: bool = True) -> Tensor:
    """ALiBi attention through SDPA: the bias (plus the causal mask) as a float ``attn_mask``.

    Same arguments, result and errors as :func:`alibi_attention_explicit`. Unlike
    :func:`~posenc_lib.model.attention.attend`, which adds a separate causal mask to the bias, the
    mask is written into the bias tensor in place, so only one ``[H, T, S]`` tensor is built.
    """
    slopes = _check(q, k, v, slopes, causal)
    t, s = q.shape[2], k.shape[2]
    mask = alibi_bias(q.shape[1], t, s, device=q.device, slopes=slopes)  # (H, T, S)
    if causal:
        future = torch.ones(t, s, dtype=torch.bool, device=q.device).triu_(s - t + 1)  # key j after query i
        mask.masked_fill_(future, float("-inf"))
    # A 4-D mask [1, H, T, S]: PyTorch's CPU flash kernel takes it, while a 3-D [H, T, S] one
    # sends SDPA to its math path, which builds the full scores (measured in the ALiBi chapter).
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype)[None])


@lru_cache(maxsize=1)
def _compiled_flex() -> Callable[..., Tensor]:
    return torch.compile(flex_attention, dynamic=False)


def alibi_attention_flex(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    slopes: Tensor | None = None,
    *,
    causal: bool = True,
    compile: bool | None = None,
) -> Tensor:
    """ALiBi attention through FlexAttention: a ``score_mod`` adds −m_h·|i − j| to each score.

    Causality is a block mask (compiled kernels skip the blocks above the diagonal). Eager
    FlexAttention evaluates the ``score_mod`` over the full score matrix — PyTorch warns that
    it "materializes the full scores matrix"; that warning is silenced here because the
    docstring and the chapter say it.

    Args:
        q, k, v, slopes, causal: as :func:`alibi_attention_explicit`.
        compile: run ``torch.compile(flex_attention)``; default: only on CUDA.

    Returns:
        ``[B, H, T, D]``, q's dtype.

    Raises:
        ValueError: as :func:`alibi_attention_explicit`.
    """
    slopes = _check(q, k, v, slopes, causal)
    t, s = q.shape[2], k.shape[2]
    offset = s - t  # query i sits at key position i + offset

    def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return score - slopes[h] * (q_idx + offset - kv_idx).abs()

    def causal_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return q_idx + offset >= kv_idx

    block_mask = create_block_mask(causal_mod, None, None, t, s, device=q.device) if causal else None
    compile = q.device.type == "cuda" if compile is None else compile
    run = _compiled_flex() if compile else flex_attention
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        return run(q, k, v, score_mod=score_mod, block_mask=block_mask)


_BY_NAME: dict[str, Callable[..., Tensor]] = {
    "explicit": alibi_attention_explicit,
    "sdpa": alibi_attention_sdpa,
    "flex": alibi_attention_flex,
}


def alibi_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    slopes: Tensor | None = None,
    *,
    causal: bool = True,
    implementation: str | None = None,
) -> Tensor:
    """ALiBi attention by one of :data:`ALIBI_IMPLEMENTATIONS`; all three give the same output.

    Args:
        q, k, v, slopes, causal: as :func:`alibi_attention_explicit`.
        implementation: ``"explicit"``, ``"sdpa"`` or ``"flex"``; default
            :data:`DEFAULT_IMPLEMENTATION` for q's device type.

    Returns:
        ``[B, H, T, D]``, q's dtype.

    Raises:
        ValueError: for an unknown implementation, or as :func:`alibi_attention_explicit`.

    Example:
        >>> q = k = v = torch.randn(1, 6, 5, 8)
        >>> alibi_attention(q, k, v, implementation="explicit").shape
        torch.Size([1, 6, 5, 8])
    """
    name = implementation or DEFAULT_IMPLEMENTATION.get(q.device.type, "sdpa")
    if name not in _BY_NAME:
        raise ValueError(f"implementation must be one of {ALIBI_IMPLEMENTATIONS}, "
                         f"got implementation={implementation!r}")
    return _BY_NAME[name](q, k, v, slopes, causal=causal)
