"""Multi-head self-attention (causal by default) with a pluggable positional scheme.

Shapes: B batch, H heads, T sequence (queries), S keys, D = head_dim, C = d_model.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from posenc_lib.encodings.positions import require_int
from posenc_lib.encodings.logit_scaling import (
    normalize_logit_scaling,
    query_scale,
    softmax_scale_multiplier,
)
from posenc_lib.encodings.forget_gate import ForgetGate, forget_gate_bias
from posenc_lib.encodings.rope import RotaryEmbedding


def causal_mask(q_len: int, k_len: int, *, device: torch.device | str | None = None,
                dtype: torch.dtype = torch.float32) -> Tensor:
    """Additive causal mask ``[q_len, k_len]``: 0 where key j ≤ query i's position, −inf above.

    Queries are aligned to the end of the keys (query i sits at key position i + k_len − q_len),
    which is what decoding with a KV cache needs. ``q_len`` must not exceed ``k_len``.

    Raises:
        TypeError: if ``q_len`` or ``k_len`` is not an integer.
        ValueError: if either is negative, or ``q_len > k_len``.
    """
    require_int(q_len, "q_len")
    require_int(k_len, "k_len")
    if q_len > k_len:
        raise ValueError(f"q_len must be <= k_len, got q_len={q_len}, k_len={k_len}")
    query_positions = torch.arange(q_len, device=device)[:, None] + (k_len - q_len)
    key_positions = torch.arange(k_len, device=device)[None, :]
    mask = torch.zeros(q_len, k_len, device=device, dtype=dtype)
    return mask.masked_fill(key_positions > query_positions, float("-inf"))


def window_band(query_positions: Tensor, key_positions: Tensor, window: int, *,
                causal: bool = True) -> Tensor:
    """Which keys a query sees under a sliding window: the one rule of the library.

    True where the distance r = i − j (query position i, key position j) is below
    ``window``, and, with ``causal``, not negative: each query sees itself and the
    ``window`` − 1 keys before it (Mistral's and Gemma's ``sliding_window``;
    transformers' ``kv_idx > q_idx − sliding_window``). Without ``causal`` the keys after
    the query are left visible, for a mask added to a causal one.

    Args:
        query_positions, key_positions: int positions that broadcast against each other,
            e.g. ``[T, 1]`` and ``[1, S]``.
        window: keys per query, ≥ 1.
        causal: also hide the keys after the query.

    Returns:
        A bool tensor of the broadcast shape.

    Raises:
        ValueError: if ``window`` is not an integer ≥ 1.
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an integer >= 1, got window={window!r}")
    distance = query_positions - key_positions
    inside = distance < window
    return inside & (distance >= 0) if causal else inside


def sliding_window_mask(q_len: int, k_len: int, window: int, *,
                        device: torch.device | str | None = None,
                        dtype: torch.dtype = torch.float32) -> Tensor:
    """Additive causal sliding-window mask ``[q_len, k_len]``: 0 where the key j
    satisfies i − window < j ≤ i (query i's position, end-aligned as in
    :func:`causal_mask`), −inf elsewhere.

    Each query sees itself and the ``window`` − 1 keys before it, the convention of
    Mistral's and Gemma's ``sliding_window`` (transformers' ``sliding_window_overlay``:
    ``kv_idx > q_idx − sliding_window``). Positions are indices in the sequence.

    Raises:
        ValueError: if ``window`` is not an integer ≥ 1, or q_len > k_len.
    """
    if q_len > k_len:
        raise ValueError(f"q_len must be <= k_len, got q_len={q_len}, k_len={k_len}")
    query_positions = torch.arange(q_len, device=device)[:, None] + (k_len - q_len)
    key_positions = torch.arange(k_len, device=device)[None, :]
    seen = window_band(query_positions, key_positions, window)
    return torch.zeros(q_len, k_len, device=device, dtype=dtype).masked_fill(~seen, float("-inf"))


def local_mask(mask: Tensor | None, seq: int, window: int, dtype: torch.dtype,
               device: torch.device | str | None = None) -> Tensor:
    """A finished :func:`score_mask` (or None: plain causal) restricted to a sliding
    window, ``[B | 1, H | 1, T, T]`` in ``dtype``."""
    band = sliding_window_mask(seq, seq, window, device=device, dtype=dtype)
    return band[None, None] if mask is None else mask + band


CAUSAL_BLOCK = 512
"""Queries per block when :func:`attend` runs a causal float mask block by block (the
CPU kernel splits keys into blocks of 512 too, so the blocks change no rounding
there)."""


def score_mask(
    bias: Tensor | None,
    q_len: int,
    k_len: int,
    *,
    causal: bool = True,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor | None:
    """The one additive mask SDPA adds to the scores: the bias, with −inf where a query
    must not look (keys after it, when ``causal``).

    Press et al. (2022) keep ALiBi as cheap as a plain causal model this way: the bias
    is folded into the causal mask that is added to the scores anyway, once, instead of
    being added on its own in every layer. :class:`~posenc_lib.model.transformer.TransformerLM`
    builds this mask once per forward pass (for ALiBi once per length, device and dtype)
    and hands it to every layer through ``attend(..., mask=...)``.

    Args:
        bias: additive scores ``[H, T, S]`` or ``[B, H, T, S]`` (ALiBi, T5, padding),
            or None.
        q_len, k_len: T and S; with ``causal`` the queries are aligned to the end of
            the keys.
        causal: add −inf above the (end-aligned) diagonal.
        device, dtype: of the mask (dtype must be the dtype of q in attention).

    Returns:
        ``[B | 1, H | 1, T, S]`` (4-D: CPU SDPA keeps its fused kernel only for a 4-D
        mask), or None when there is nothing to add beyond what SDPA's
        ``is_causal=True`` does (no bias, and T = S or no causal mask).

    Raises:
        ValueError: for a bias whose last two sizes are not (T, S) or whose rank is not
            3 or 4.
    """
    if bias is None and (q_len == k_len or not causal):
        return None
    if causal:
        mask = causal_mask(q_len, k_len, device=device, dtype=dtype)
    else:
        mask = torch.zeros(q_len, k_len, device=device, dtype=dtype)
    if bias is not None:
        if bias.shape[-2:] != (q_len, k_len) or bias.dim() not in (3, 4):
            raise ValueError(
                f"bias must be [heads, {q_len}, {k_len}] or "
                f"[batch, heads, {q_len}, {k_len}], "
                f"got {tuple(bias.shape)}"
            )
        mask = bias.to(dtype) + mask  # (…, H, T, S)
    # A 4-D mask keeps CPU SDPA on its fused kernel; with a 2-D or 3-D one it falls back
    # to the slower "math" path that materialises the full score matrix.
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # (B|1, H|1, T, S)


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor | None = None,
    *,
    causal: bool = True,
    mask: Tensor | None = None,
    scale: float | None = None,
) -> Tensor:
    """Scaled dot-product attention, softmax(q kᵀ/√D + bias + mask) v (Vaswani et al. 2017, eq. 1).

    Runs on :func:`torch.nn.functional.scaled_dot_product_attention`. Without a bias it
    uses ``is_causal=True`` (PyTorch's fused kernels); with one, the bias and the causal
    mask are summed into one float ``attn_mask`` by :func:`score_mask` — on CPU this is
    SDPA's fast path. A caller that attends many times with the same bias (every layer
    of a model) builds that mask once and passes it as ``mask``. A causal float mask
    longer than :data:`CAUSAL_BLOCK` queries runs block by block, so that the kernel
    skips most of the scores above the diagonal, as ``is_causal=True`` does.

    Args:
        q: ``[B, H, T, D]``; k, v: ``[B, H, S, D]`` (with ``causal``, T ≤ S and the queries
            are aligned to the end of the keys).
        bias: additive scores ``[H, T, S]`` or ``[B, H, T, S]`` (ALiBi, T5), or None.
        causal: mask keys after each query (a language model); ``False`` lets every query see
            every key (an encoder).
        mask: a finished mask from :func:`score_mask` (bias, and with ``causal`` the
            −inf above the diagonal, already in it), in q's dtype; then ``bias`` must be
            None.
        scale: the softmax scale that replaces 1/√D (DeepSeek's YaRN multiplies it,
            :mod:`~posenc_lib.encodings.logit_scaling`); None (default): 1/√D,
            bit-identical to not passing it.

    Returns:
        ``[B, H, T, D]``, q's dtype.

    Raises:
        ValueError: when the ranks or sizes disagree, or both ``bias`` and ``mask`` are
            given.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be [batch, heads, seq, head_dim], got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if mask is not None and bias is not None:
        raise ValueError("give either bias or a finished mask, not both")
    t, s = q.shape[-2], k.shape[-2]
    if mask is None:
        mask = score_mask(bias, t, s, causal=causal, device=q.device, dtype=q.dtype)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    if not causal or t <= CAUSAL_BLOCK:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    # A float mask hides the causal structure from the kernel, so it would compute every
    # score, also the half above the diagonal that the mask then discards
    # (is_causal=True skips those). Cutting the queries into blocks gives that saving
    # back: the block of queries up to position t needs only the keys up to t.
    offset = s - t  # query i sits at key position i + offset
    blocks = []
    for start in range(0, t, CAUSAL_BLOCK):
        stop = min(t, start + CAUSAL_BLOCK)
        keys = stop + offset  # keys 0 … keys − 1 are the only ones these queries see
        blocks.append(F.scaled_dot_product_attention(
            q[:, :, start:stop], k[:, :, :keys], v[:, :, :keys],
            attn_mask=mask[..., start:stop, :keys], scale=scale,
        ))  # (B, H, block, D)
    return torch.cat(blocks, dim=2)  # (B, H, T, D)


class SelfAttention(nn.Module):
    """Multi-head self-attention; RoPE rotates q and k, ALiBi/T5 arrive as a bias.

    Args:
        d_model: model width C, divisible by ``num_heads``.
        num_heads: H ≥ 1.
        rotary: a :class:`RotaryEmbedding` to apply to q and k, or None.
        causal: mask future keys (default, a language model) or not (an encoder).
        logit_scaling: a rule of :mod:`~posenc_lib.encodings.logit_scaling` that acts
            in this layer (a constant on the softmax scale, or a factor on each query
            by its position), or None (default: no change, bit-identical).
        sliding_window: local attention: each query sees itself and the
            ``sliding_window`` − 1 keys before it (:func:`sliding_window_mask`); None
            (default): every earlier key. Causal layers only.
        forget_gate: add the Forgetting Transformer's learned recency bias
            D_ij = Σ_{k=j+1..i} log f_k (:mod:`~posenc_lib.encodings.forget_gate`; Lin et
            al. 2025) to the scores; False (default): no gate, no extra parameters.

    ``forward(x [B, T, C], bias=None, positions=None, mask=None) -> [B, T, C]``;
    ``positions`` (integer ``[T]`` or ``[B, T]``) defaults to 0 … T−1 and is only used
    by RoPE; ``mask`` is a finished :func:`score_mask` (then ``bias`` is None), as the
    model passes to every layer.
    """

    def __init__(self, d_model: int, num_heads: int, *, rotary: RotaryEmbedding | None = None, causal: bool = True,
                 logit_scaling: dict | None = None, sliding_window: int | None = None,
                 forget_gate: bool = False) -> None:
        super().__init__()
        if num_heads < 1:
            raise ValueError(f"num_heads must be >= 1, got num_heads={num_heads}")
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.rotary = rotary
        self.causal = causal
        if sliding_window is not None:
            if not causal:
                raise ValueError("sliding_window needs a causal layer, got causal=False")
            sliding_window_mask(1, 1, sliding_window)  # names a bad window
        self.sliding_window = sliding_window
        self.forget_gate = ForgetGate(d_model, num_heads) if forget_gate else None
        self.logit_scaling = normalize_logit_scaling(logit_scaling)
        multiplier = softmax_scale_multiplier(self.logit_scaling)
        # None: SDPA's own 1/√D, exactly as without logit scaling
        self.scale = None if multiplier == 1.0 else multiplier / math.sqrt(self.head_dim)

    def heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values ``[B, H, T, D]`` for ``x`` ``[B, T, C]``, before RoPE: the
        one place the book's model splits its fused projection into heads."""
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)  # 3 × (B, T, C)
        # (B, T, C) -> (B, H, T, D)
        return tuple(z.view(b, t, self.num_heads, self.head_dim).transpose(1, 2) for z in (q, k, v))

    def project(self, x: Tensor, positions: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values ``[B, H, T, D]`` for ``x`` ``[B, T, C]``, with RoPE applied to q, k."""
        t = x.shape[1]
        q, k, v = self.heads(x)
        if self.rotary is not None:  # positions None: 0 … T−1, cos/sin rows as a view
            q, k = self.rotary(q, positions), self.rotary(k, positions)
        if self.logit_scaling is not None:
            p = torch.arange(t, device=x.device) if positions is None else positions
            factor = query_scale(self.logit_scaling, p.to(x.device))  # ([B,] T) or None
            if factor is not None:
                factor = factor[:, None, :, None] if factor.dim() == 2 else factor[:, None]
                q = (q * factor).to(q.dtype)  # (B, H, T, D)
        return q, k, v

    def probabilities(self, x: Tensor, bias: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        """The attention weights softmax(q kᵀ/√D + bias + mask), float32 ``[B, H, T, T]``.

        SDPA never returns them, so this recomputes the scores explicitly from the same
        projections as :meth:`forward` — for inspecting a trained layer, not for training.
        """
        q, k, _ = self.project(x, positions)
        t = q.shape[-2]
        scores = q.float() @ k.float().transpose(-2, -1)  # (B, H, T, T)
        if self.scale is None:
            scores = scores / math.sqrt(self.head_dim)
        else:
            scores = scores * self.scale
        if bias is not None:
            scores = scores + bias.float()
        if self.forget_gate is not None:
            scores = scores + forget_gate_bias(self.forget_gate(x))
        if self.sliding_window is not None:
            scores = scores + sliding_window_mask(t, t, self.sliding_window, device=x.device)
        elif self.causal:
            scores = scores + causal_mask(t, t, device=x.device)
        return scores.softmax(dim=-1)

    def forward(
        self,
        x: Tensor,
        bias: Tensor | None = None,
        positions: Tensor | None = None,
        mask: Tensor | None = None,
    ) -> Tensor:
        b, t, c = x.shape
        q, k, v = self.project(x, positions)  # 3 × (B, H, T, D)
        if self.sliding_window is not None and mask is None:
            mask = local_mask(score_mask(bias, t, t, device=x.device, dtype=q.dtype),
                              t, self.sliding_window, q.dtype, x.device)
            bias = None
        if self.forget_gate is not None:  # a bias of its own per sequence: (B, H, T, T)
            gate = forget_gate_bias(self.forget_gate(x)).to(q.dtype)
            if mask is None:
                mask = score_mask(gate if bias is None else bias + gate, t, t,
                                  causal=self.causal, device=x.device, dtype=q.dtype)
                bias = None
            else:
                mask = mask + gate
        y = attend(q, k, v, bias, causal=self.causal, mask=mask, scale=self.scale)  # (B, H, T, D)
        return self.out(y.transpose(1, 2).reshape(b, t, c))  # (B, T, C)


@torch.no_grad()
def load_interleaved_as_half(target: SelfAttention, source: SelfAttention) -> None:
    """Copy an interleaved-RoPE attention layer's weights into a rotate-half one, so that
    both compute the same outputs.

    Inside each head the output rows of the q and k projections are permuted by
    :func:`~posenc_lib.encodings.rope.interleaved_to_half_permutation` (pairs (2i, 2i+1)
    land at (i, i + head_dim/2)); the v rows and the output projection are copied as they
    are. This is what Hugging Face's Llama conversion script does to Meta's checkpoints.

    Args:
        target: the rotate-half layer (``rotary.interleaved`` False), written in place.
        source: the interleaved layer, of the same ``d_model`` and heads.

    Raises:
        ValueError: if the layers' shapes or heads differ.
    """
    from posenc_lib.encodings.rope import interleaved_to_half_permutation

    if (target.qkv.weight.shape != source.qkv.weight.shape
            or target.num_heads != source.num_heads):
        raise ValueError("target and source must have one d_model and one number of heads, "
                         f"got {tuple(target.qkv.weight.shape)}, {target.num_heads} heads and "
                         f"{tuple(source.qkv.weight.shape)}, {source.num_heads} heads")
    d_model, head_dim = target.out.weight.shape[0], target.head_dim
    perm = interleaved_to_half_permutation(head_dim)
    head_perm = torch.cat([h * head_dim + perm for h in range(target.num_heads)])
    # rows of the fused qkv projection: q and k permuted, v not
    rows = torch.cat([head_perm, d_model + head_perm, 2 * d_model + torch.arange(d_model)])
    target.qkv.weight.copy_(source.qkv.weight[rows.to(source.qkv.weight.device)])
    target.qkv.bias.copy_(source.qkv.bias[rows.to(source.qkv.bias.device)])
    target.out.load_state_dict(source.out.state_dict())
