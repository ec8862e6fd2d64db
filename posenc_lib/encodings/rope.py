"""Rotary position embedding, RoPE (Su et al. 2021, RoFormer §3.2–3.4).

:func:`apply_rope` is the function, :class:`RotaryEmbedding` the module with a float32 cos/sin
cache that attention layers use; both rotate with the elementwise form (eq. 34), never a
``head_dim × head_dim`` matrix. :func:`rotate_pairs` is that form as a reader writes it;
the module runs the cache-blocked kernel of :mod:`~posenc_lib.encodings.rope_kernel`,
whose forward is bitwise the same. :func:`rope_rotate_half_naive` and :func:`rope_complex`
are two other ways to write it, to compare with. :func:`positions_from_mask` and
:func:`interleaved_to_half_permutation` serve batching and checkpoint conversion.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import torch
from torch import Tensor, nn

from posenc_lib.encodings.rope_partial import neox_rotary_dim
from posenc_lib.encodings.rope_scaling import (
    normalize_rope_scaling,
    resolve_base,
    rope_scaled_frequencies,
)


def _check_head_dim(head_dim: int, name: str = "head_dim") -> None:
    if head_dim < 2 or head_dim % 2 != 0:
        raise ValueError(f"{name} must be even and >= 2 (RoPE rotates pairs), got {name}={head_dim}")


def rope_inverse_frequencies(head_dim: int, base: float = 10000.0) -> Tensor:
    """The rotation frequencies θ_i = base^(−2i/head_dim), i = 0 … head_dim/2 − 1.

    Source: Su et al. 2021 (RoFormer), eq. 15, with base 10 000 as in the paper.

    Args:
        head_dim: the per-head width d; must be even and ≥ 2.
        base: the frequency base (10 000 in RoFormer, 500 000 in Llama 3); must be > 0.

    Returns:
        Tensor ``[head_dim // 2]``, float32, radians per position, decreasing from 1.

    Raises:
        ValueError: if ``head_dim`` is odd or < 2, or ``base`` ≤ 0.

    Example:
        >>> rope_inverse_frequencies(4, base=100.0)
        tensor([1.0000, 0.1000])
    """
    return _inverse_frequencies(head_dim, base, torch.float32)


def _inverse_frequencies(head_dim: int, base: float, dtype: torch.dtype) -> Tensor:
    """θ_i computed in float64 and rounded once to ``dtype``."""
    _check_head_dim(head_dim)
    if base <= 0:
        raise ValueError(f"base must be > 0, got base={base}")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return (base ** -exponents).to(dtype)


ANGLE_DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)
"""Dtypes :func:`apply_rope` accepts for its angles (float32 is the default and the library's choice)."""

FLOAT16_MAX_POSITION = int(torch.finfo(torch.float16).max)
"""65 504, float16's largest finite number: the largest |position| :func:`apply_rope`
accepts with ``angle_dtype=torch.float16`` (a larger one becomes inf or rounds to it, and
its angles to NaN)."""


def _check_x(x: Tensor) -> None:
    """x must be a floating-point tensor: integers would be rotated and truncated."""
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor [..., seq, head_dim], got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise ValueError("x must be a floating-point tensor (float16, bfloat16, float32 or "
                         f"float64): a rotated integer tensor would be truncated; got dtype {x.dtype}")


def _check_positions(positions: Tensor, x: Tensor, seq_dim: int = -2) -> None:
    """Integer positions ``[seq]`` or ``[batch, seq]`` that match ``x`` ``[..., seq, head_dim]``
    (x with its sequence dimension already moved to −2; ``seq_dim`` is the caller's, for
    the message)."""
    if not isinstance(positions, Tensor):
        raise TypeError("positions must be an integer torch.Tensor [seq] or [batch, seq] "
                        f"(e.g. torch.arange(seq)), got {type(positions).__name__}")
    if x.dim() < 2:
        raise ValueError(f"x must be [..., seq, head_dim], got shape {tuple(x.shape)}")
    seq = x.shape[-2]
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
    if positions.dim() not in (1, 2) or positions.shape[-1] != seq:
        raise ValueError(f"positions must be [seq={seq}] or [batch, seq={seq}], got shape "
                         f"{tuple(positions.shape)}: seq is the length of x's dimension "
                         f"seq_dim={seq_dim} (x of shape {tuple(x.shape)} with that "
                         "dimension moved to -2); for x [batch, seq, heads, head_dim] pass "
                         "seq_dim=1")
    if positions.dim() == 2:
        if x.dim() < 3:
            raise ValueError("positions of shape [batch, seq] need x with at least 3 dims [batch, ..., seq, head_dim]")
        if positions.shape[0] != x.shape[0]:
            raise ValueError(f"positions [batch, seq] has batch={positions.shape[0]} but x has batch={x.shape[0]}")


def _broadcast_to_heads(table: Tensor, positions: Tensor, x_dim: int) -> Tensor:
    """``[batch, seq, r]`` -> ``[batch, 1, …, 1, seq, r]``: one singleton per head-like dim of x."""
    if positions.dim() == 1:
        return table
    return table.reshape(table.shape[0], *([1] * (x_dim - 3)), *table.shape[1:])


def _seq_to_minus_2(x: Tensor, seq_dim: int, batched: bool) -> int:
    """Check ``seq_dim`` for x; return it as a non-negative index (x.dim() − 2 is the
    default layout ``[..., seq, head_dim]``, which needs no move)."""
    if isinstance(seq_dim, bool) or not isinstance(seq_dim, int):
        raise TypeError(f"seq_dim must be an int, got {type(seq_dim).__name__}")
    if x.dim() < 2 or not -x.dim() <= seq_dim < x.dim() - 1 or seq_dim == -1:
        raise ValueError(f"seq_dim must name a dimension of x other than head_dim (0 … "
                         f"{x.dim() - 2} or -{x.dim()} … -2), got seq_dim={seq_dim} for x "
                         f"of shape {tuple(x.shape)}")
    dim = seq_dim % x.dim()
    if batched and dim == 0:
        raise ValueError("positions [batch, seq] need x's batch in dimension 0, so seq_dim "
                         "cannot be 0")
    return dim


def _check_tables(x: Tensor, cos: Tensor, sin: Tensor) -> None:
    """cos and sin ``[..., seq, d/2]`` for x ``[..., seq, d]``, with Hugging Face's
    full-width tables named in the message."""
    if not isinstance(x, Tensor) or not isinstance(cos, Tensor) or not isinstance(sin, Tensor):
        raise TypeError("x, cos and sin must be torch.Tensor")
    if x.dim() < 2:
        raise ValueError(f"x must be [..., seq, head_dim], got shape {tuple(x.shape)}")
    d, seq = x.shape[-1], x.shape[-2]
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} and "
                         f"{tuple(sin.shape)}")
    if cos.dim() < 2 or cos.shape[-1] != d // 2:
        hint = ""
        if cos.dim() >= 1 and cos.shape[-1] == d:
            hint = (f". These look like Hugging Face's tables [seq, head_dim] (each angle "
                    f"twice: cos = cat(freqs, freqs).cos()); pass cos[..., :{d // 2}] and "
                    f"sin[..., :{d // 2}] (its interleaved models, e.g. GLM, also take the "
                    f"first half). Tables written pair by pair (repeat_interleave) need "
                    f"cos[..., 0::2] instead")
        raise ValueError(f"cos and sin must be [..., seq, head_dim/2] = [..., {seq}, "
                         f"{d // 2}] (one angle per pair) for x of shape {tuple(x.shape)}, "
                         f"got cos of shape {tuple(cos.shape)}{hint}")
    if cos.shape[-2] not in (seq, 1):
        raise ValueError(f"cos and sin have {cos.shape[-2]} rows (positions) but x has "
                         f"seq={seq} in dimension -2 (x of shape {tuple(x.shape)}); x must be "
                         "[..., seq, head_dim]: move its sequence dimension there first "
                         "(e.g. x.transpose(1, 2) for [batch, seq, heads, head_dim])")
    try:
        shape = torch.broadcast_shapes(cos.shape, (*x.shape[:-1], d // 2))
    except RuntimeError:
        shape = None
    if shape != (*x.shape[:-1], d // 2):
        raise ValueError(f"cos and sin of shape {tuple(cos.shape)} do not broadcast against "
                         f"x of shape {tuple(x.shape)}: they must be [..., seq, head_dim/2] "
                         "with leading dimensions of size 1 or x's")


def _pairs(t: Tensor, interleaved: bool) -> tuple[Tensor, Tensor]:
    """The two members of every pair of ``t``'s last dimension, as views (no copy)."""
    if interleaved:
        return t[..., 0::2], t[..., 1::2]  # (2i, 2i+1)
    half = t.shape[-1] // 2
    return t[..., :half], t[..., half:]  # (i, i + d/2)


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor, *, interleaved: bool) -> Tensor:
    """Rotate each pair of ``x``'s last dimension by the angle whose cos/sin are given.

    Pairs are (i, i + d/2) when ``interleaved=False`` (rotate-half) and (2i, 2i+1) when
    ``interleaved=True``; each pair (x_a, x_b) becomes
    (x_a cos − x_b sin, x_b cos + x_a sin) — Su et al. 2021, eq. 34 (the elementwise
    form). The arithmetic is done in float32 (float64 if x is float64) and the result
    is rounded once to x's dtype. Plain autograd: gradients flow to x and, when they
    require grad, to cos and sin.

    ``torch.addcmul(a, b, c, value=v)`` is a + v·b·c: on a CPU with fused multiply-add
    the second product and the sum are rounded once, as in the cache-blocked kernel
    :func:`~posenc_lib.encodings.rope_kernel.rotate_pairs_blocked`, so the result is
    bitwise the kernel's (its gradient, summed by autograd from unfused products, may
    differ from the kernel's in the last bit).

    Args:
        x: ``[..., seq, d]`` with d even, any float dtype; the sequence is dimension −2
            (for ``[batch, seq, heads, d]`` pass ``x.transpose(1, 2)``).
        cos, sin: ``[..., seq, d/2]`` (one angle per pair, ``seq`` rows or 1), any float
            dtype, broadcastable against x's leading dims. Hugging Face's tables are
            ``[..., seq, d]`` with every angle twice (``cat(freqs, freqs)``); pass
            ``cos[..., :d // 2]``. Only the last two dimensions are checked against x:
            a Hugging Face table of a partial rotation (width rotary_dim) that happens
            to be d/2 wide cannot be told apart.
        interleaved: the pairing convention (see above).

    Returns:
        Tensor with x's shape and dtype.

    Raises:
        TypeError: if x, cos or sin is not a tensor.
        ValueError: if cos and sin differ in shape, their last dimension is not d/2
            (Hugging Face's full-width layout is named, with the conversion), their
            row count is neither x's seq nor 1, or they do not broadcast against x.

    Example:
        >>> x = torch.tensor([[1.0, 0.0]])
        >>> rotate_pairs(x, torch.tensor([[0.0]]), torch.tensor([[1.0]]), interleaved=False)
        tensor([[0., 1.]])
    """
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    xc, cos, sin = x.to(compute), cos.to(compute), sin.to(compute)
    if interleaved:  # pairs (2i, 2i+1)
        x_a, x_b = xc[..., 0::2], xc[..., 1::2]
    else:  # pairs (i, i + d/2)
        x_a, x_b = xc.chunk(2, dim=-1)
    out_a = torch.addcmul(x_a * cos, x_b, sin, value=-1.0)  # x_a cos − x_b sin
    out_b = torch.addcmul(x_b * cos, x_a, sin)  # x_b cos + x_a sin
    if interleaved:  # back to a_0, b_0, a_1, b_1, …
        out = torch.stack([out_a, out_b], dim=-1).flatten(-2)
    else:
        out = torch.cat([out_a, out_b], dim=-1)
    return out.to(x.dtype)


def _with_table_checks(rotate):
    """``rotate`` with :func:`_check_tables` first. The checks stay out of the
    textbook body, which Chapter 5 prints (``inspect.getsource`` follows
    ``__wrapped__`` to it)."""

    @functools.wraps(rotate)
    def checked(x: Tensor, cos: Tensor, sin: Tensor, *, interleaved: bool) -> Tensor:
        _check_tables(x, cos, sin)
        return rotate(x, cos, sin, interleaved=interleaved)

    return checked


rotate_pairs = _with_table_checks(rotate_pairs)


def _angles(
    x: Tensor, positions: Tensor, base: float, angle_dtype: torch.dtype, seq_dim: int = -2
) -> tuple[Tensor, Tensor]:
    """:func:`apply_rope`'s checks, then cos and sin of p·θ_i in ``angle_dtype``:
    ``[seq, d/2]``, or ``[batch, 1, …, 1, seq, d/2]`` for positions ``[batch, seq]``
    (x already ``[..., seq, head_dim]``; ``seq_dim`` is the caller's, for messages)."""
    _check_x(x)
    _check_positions(positions, x, seq_dim)
    _check_head_dim(x.shape[-1])
    if angle_dtype not in ANGLE_DTYPES:
        raise ValueError(f"angle_dtype must be one of {ANGLE_DTYPES}, got angle_dtype={angle_dtype}")
    if angle_dtype == torch.float16 and positions.numel():
        largest = int(positions.abs().max())
        if largest > FLOAT16_MAX_POSITION:
            raise ValueError(f"angle_dtype=torch.float16 holds positions up to "
                             f"{FLOAT16_MAX_POSITION} (its largest finite number); got "
                             f"|position| {largest}, whose angles would be NaN. Use "
                             "angle_dtype=torch.float32 (the default)")
    if angle_dtype == torch.float64:  # the reference: θ_i not rounded to float32 either
        inv_freq = _inverse_frequencies(x.shape[-1], base, torch.float64)
    else:
        inv_freq = rope_inverse_frequencies(x.shape[-1], base)
    positions, inv_freq = positions.to(x.device), inv_freq.to(x.device, angle_dtype)
    angles = positions.to(angle_dtype)[..., None] * inv_freq  # (..., seq, d/2)
    angles = _broadcast_to_heads(angles, positions, x.dim())
    return angles.cos(), angles.sin()


def apply_rope(
    x: Tensor,
    positions: Tensor,
    *,
    base: float = 10000.0,
    interleaved: bool = False,
    angle_dtype: torch.dtype = torch.float32,
    seq_dim: int = -2,
) -> Tensor:
    """Rotate queries or keys by their positions: RoPE(x, p) = R_{Θ,p} x.

    Each pair (x_a, x_b) of the head dimension is rotated by the angle p·θ_i:
    ``(x_a cos pθ_i − x_b sin pθ_i,  x_b cos pθ_i + x_a sin pθ_i)`` — Su et al. 2021,
    eqs. 13–15 and the elementwise form eq. 34. Then ⟨RoPE(q, m), RoPE(k, n)⟩ depends on
    q, k and n − m only.

    Args:
        x: ``[..., seq, head_dim]`` (typically ``[batch, heads, seq, head_dim]``), any float
            dtype; the sequence is dimension ``seq_dim``.
        positions: integer positions, ``[seq]`` (shared by the batch, e.g. ``arange(t0, t0+seq)``
            for a KV cache offset) or ``[batch, seq]`` (per sequence, e.g. from a left-padded mask).
            Their length must be that of x's dimension ``seq_dim``.
        base: θ_i = base^(−2i/head_dim).
        interleaved: ``False`` pairs dimension i with i + head_dim/2 (rotate-half: GPT-NeoX,
            Hugging Face Llama); ``True`` pairs 2i with 2i+1 (GPT-J, Meta's complex form).
        angle_dtype: dtype in which the angles p·θ_i and their cos/sin are computed. Keep the
            default float32 (what the library and production code use); float64 gives a
            reference, and bfloat16/float16 show what goes wrong at long positions. The
            angles are formed in this dtype, not formed in float32 and cast (that would
            hide what it shows); float16 cannot hold a position above 65 504
            (:data:`FLOAT16_MAX_POSITION`), so such positions are refused.
        seq_dim: the dimension of x that holds the sequence; −2 (default) for
            ``[..., seq, head_dim]``, 1 for ``[batch, seq, heads, head_dim]``. A layout
            that does not match is caught only when its lengths differ: with as many
            heads as positions, x ``[batch, seq, heads, head_dim]`` passed with the
            default would be rotated along the heads.

    Returns:
        Tensor with x's shape and dtype. The rotation itself is done in float32 (float64 when
        x is float64) whatever x's dtype.

    Raises:
        TypeError: if x or positions is not a tensor (e.g. a Python list), or seq_dim is
            not an int.
        ValueError: if x is not floating point, head_dim is odd, positions are not
            integers, their shape does not match the length of x's dimension
            ``seq_dim`` (and ``batch``), ``seq_dim`` is the last dimension, out of
            range, or 0 with positions ``[batch, seq]``, ``angle_dtype`` is not one of
            ``ANGLE_DTYPES``, or it is float16 and a |position| exceeds 65 504.

    Example:
        >>> q = torch.randn(1, 2, 5, 8)
        >>> apply_rope(q, torch.arange(5)).shape
        torch.Size([1, 2, 5, 8])
        >>> apply_rope(q.transpose(1, 2), torch.arange(5), seq_dim=1).shape  # [b, s, h, d]
        torch.Size([1, 5, 2, 8])
    """
    _check_x(x)
    dim = _seq_to_minus_2(x, seq_dim, isinstance(positions, Tensor) and positions.dim() == 2)
    moved = dim != x.dim() - 2
    if moved:
        x = x.movedim(dim, -2)
    cos, sin = _angles(x, positions, base, angle_dtype, seq_dim)
    out = rotate_pairs(x, cos, sin, interleaved=interleaved)
    return out.movedim(-2, dim) if moved else out


def _neox_fraction(params: Mapping) -> float | None:
    """A normalised dictionary's GPT-NeoX ``partial_rotary_factor`` below 1, or None
    (none, 1.0, or ``proportional``, which reads it as p-RoPE's share)."""
    fraction = params.get("partial_rotary_factor", 1.0)
    if params["rope_type"] == "proportional" or fraction == 1.0:
        return None
    return fraction


class RotaryEmbedding(nn.Module):
    """RoPE as a module with a float32 cos/sin cache, for attention layers.

    ``forward(x, positions)`` has :func:`apply_rope`'s shapes and semantics. The cache of
    cos(p·θ_i) and sin(p·θ_i) is kept in float32 even after ``module.to(torch.bfloat16)``
    (it is not a buffer, so ``.to(dtype)`` does not touch it), follows x's device, and grows
    when a position beyond it arrives. With ``rotary_dim < head_dim`` only the first
    ``rotary_dim`` dimensions are rotated and the rest pass through (partial rotary, as
    GPT-NeoX and GPT-J use).

    A context-extension method (:mod:`~posenc_lib.encodings.rope_scaling`) changes
    only the frequencies and the cache: ``rope_scaling={"rope_type": "yarn",
    "factor": 4, "original_max_position_embeddings": 128}`` gives YaRN's θ′_i and
    multiplies the cached cos/sin by its attention factor. ``"dynamic"`` recomputes
    θ′_i from the current length L = max(positions) + 1 at every call, so a short
    input after a long one gets the unscaled frequencies back (the frequencies are a
    function of the current input only); ``"longrope"`` likewise switches from its
    short to its long factors while L exceeds L0.

    Two forms of partial rotation (:mod:`~posenc_lib.encodings.rope_partial`):
    ``rotary_dim`` rotates the leading dimensions with frequencies spread over that
    width (GPT-NeoX's ``rotary_pct``); ``p_rope_pairs=k`` keeps the k
    highest-frequency pairs of the full head at θ_i = base^(−2i/head_dim) and sets
    θ_i = 0 for the others, which then pass through unrotated (p-RoPE, Barbero et
    al. 2025).

    Args:
        head_dim: per-head width; even.
        base: θ_i = base^(−2i/rotary_dim); None takes ``rope_scaling["rope_theta"]``
            or 10 000.
        interleaved: pairing convention, see :func:`apply_rope`.
        rotary_dim: how many leading dimensions to rotate (even, ≤ head_dim); default all,
            or ``int(head_dim * partial_rotary_factor)`` when ``rope_scaling`` has one.
        rope_scaling: a scaling dictionary in Hugging Face's vocabulary
            (``rope_scaling`` or v5's ``rope_parameters``), or None for plain RoPE
            (bit-identical to no argument). Its ``partial_rotary_factor`` f < 1 (not
            with ``"proportional"``, which reads f as p-RoPE's share) rotates the first
            r = int(head_dim · f) dimensions with the frequencies of a head r wide and
            passes the rest through, as transformers' GPT-NeoX, Phi, StableLM,
            Qwen3-Next and GLM-4 do.
        p_rope_pairs: p-RoPE: how many pairs keep their frequency (1 … rotary_dim/2);
            None (default) keeps all, bit-identical to no argument.

    Raises:
        ValueError: for odd ``head_dim``/``rotary_dim``, ``rotary_dim > head_dim``, a
            ``rotary_dim`` that disagrees with ``partial_rotary_factor`` (or a factor
            whose int(head_dim · f) is odd or 0),
            ``p_rope_pairs`` outside 1 … rotary_dim/2, a bad ``rope_scaling`` (see
            :func:`~posenc_lib.encodings.rope_scaling.normalize_rope_scaling`), or x
            whose last dimension is not ``head_dim``; in ``forward``, as
            :func:`apply_rope` for positions and ``seq_dim``.

    Example:
        >>> rope = RotaryEmbedding(8)
        >>> rope(torch.randn(1, 2, 5, 8), torch.arange(5)).shape
        torch.Size([1, 2, 5, 8])
    """

    def __init__(
        self,
        head_dim: int,
        base: float | None = None,
        *,
        interleaved: bool = False,
        rotary_dim: int | None = None,
        rope_scaling: Mapping | None = None,
        p_rope_pairs: int | None = None,
    ) -> None:
        super().__init__()
        _check_head_dim(head_dim)
        self.rope_scaling = normalize_rope_scaling(rope_scaling)
        partial = _neox_fraction(self.rope_scaling)
        if partial is not None:  # Hugging Face's partial_rotary_factor: r = int(d·f)
            implied = neox_rotary_dim(head_dim, partial)
            if rotary_dim is not None and rotary_dim != implied:
                raise ValueError(f"rotary_dim={rotary_dim} disagrees with rope_scaling's "
                                 f"partial_rotary_factor={partial}, which rotates "
                                 f"int(head_dim * factor) = {implied} of head_dim={head_dim}; "
                                 "give one of them")
            rotary_dim = implied
        rotary_dim = head_dim if rotary_dim is None else rotary_dim
        _check_head_dim(rotary_dim, "rotary_dim")
        if rotary_dim > head_dim:
            raise ValueError(f"rotary_dim must be <= head_dim={head_dim}, got rotary_dim={rotary_dim}")
        self.head_dim, self.rotary_dim = head_dim, rotary_dim
        self.base, self.interleaved = resolve_base(base, self.rope_scaling), interleaved
        # float32 θ′_i (not a buffer) and YaRN's q/k scale (1.0 for the other methods)
        self.inv_freq, self.attention_factor = self._frequencies(None)
        self.p_rope_pairs = p_rope_pairs
        if p_rope_pairs is not None:
            pairs = rotary_dim // 2
            if isinstance(p_rope_pairs, bool) or not isinstance(p_rope_pairs, int) \
                    or not 1 <= p_rope_pairs <= pairs:
                raise ValueError(f"p_rope_pairs must be an integer in 1 … {pairs} "
                                 f"(rotary_dim/2), got p_rope_pairs={p_rope_pairs!r}")
            self.inv_freq = self._keep_fastest(self.inv_freq)
        self._cos = torch.empty(0, rotary_dim // 2)
        self._sin = torch.empty(0, rotary_dim // 2)
        self._cache_seq_len: int | None = None  # length whose dynamic θ′_i are cached

    def _frequencies(self, seq_len: int | None) -> tuple[Tensor, float]:
        """θ′_i for the rotated width, and the attention factor. With
        ``partial_rotary_factor`` in the dictionary, rope_scaled_frequencies takes the
        full head_dim and narrows it to rotary_dim itself."""
        width = self.head_dim if _neox_fraction(self.rope_scaling) is not None \
            else self.rotary_dim
        return rope_scaled_frequencies(width, self.base, self.rope_scaling, seq_len)

    def _keep_fastest(self, inv_freq: Tensor) -> Tensor:
        """p-RoPE: θ_i unchanged for the first ``p_rope_pairs`` pairs, 0 after them."""
        if self.p_rope_pairs is None:
            return inv_freq
        inv_freq = inv_freq.clone()
        inv_freq[self.p_rope_pairs:] = 0.0
        return inv_freq

    def _dynamic_seq_len(self, length: int) -> int | None:
        """The length that sets a length-dependent θ′_i (dynamic NTK, LongRoPE's
        long factors), or None: unscaled, or not length-dependent."""
        params = self.rope_scaling
        if params["rope_type"] not in ("dynamic", "longrope"):
            return None
        original_length = params["original_max_position_embeddings"]
        if length <= original_length:
            return None
        # LongRoPE has one long set for every L > L0: one cache for all of them
        return original_length + 1 if params["rope_type"] == "longrope" else length

    def _extend_cache(self, length: int, device: torch.device) -> None:
        seq_len = self._dynamic_seq_len(length)
        same_frequencies = seq_len == self._cache_seq_len
        cached = self._cos.shape[0] >= length and self._cos.device == device
        if cached and same_frequencies:
            return
        inv_freq = self.inv_freq
        if seq_len is not None:  # dynamic NTK past L0: θ′_i for this length
            inv_freq, _ = self._frequencies(seq_len)
            inv_freq = self._keep_fastest(inv_freq)
        if same_frequencies:  # grow geometrically, not by one each step
            length = max(length, 2 * self._cos.shape[0])
        positions = torch.arange(length, device=device, dtype=torch.float32)
        angles = positions[:, None] * inv_freq.to(device)
        self._cos, self._sin = angles.cos(), angles.sin()  # (length, rotary_dim/2) float32
        if self.attention_factor != 1.0:  # YaRN: q, k scaled (logits by its square)
            self._cos = self._cos * self.attention_factor
            self._sin = self._sin * self.attention_factor
        self._cache_seq_len = seq_len

    def forward(self, x: Tensor, positions: Tensor | None = None, *,
                seq_dim: int = -2) -> Tensor:
        """Rotate ``x`` ``[..., seq, head_dim]`` by integer ``positions`` ``[seq]`` or ``[batch, seq]``.

        Positions may be offsets (a KV cache: the token at step t alone,
        ``positions=[t]``, gets exactly row t of the full pass) or per-sequence ids
        (left padding, see :func:`positions_from_mask`). Negative positions rotate
        backwards, as in :func:`apply_rope` (cos is even, sin is odd), so both give the
        same result. ``positions=None`` means 0 … seq − 1: the first rows of the cache,
        taken as a view (no lookup), which is what a model without padding or offsets
        needs.

        ``seq_dim`` names x's sequence dimension, as in :func:`apply_rope`: −2
        (default) for ``[..., seq, head_dim]``, 1 for ``[batch, seq, heads, head_dim]``.
        Positions whose length is not that dimension's raise ValueError; with
        ``positions=None`` nothing can be checked, and x ``[batch, seq, heads,
        head_dim]`` passed with the default is rotated along the heads.
        """
        _check_x(x)
        if x.dim() < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"x must be [..., seq, head_dim={self.head_dim}], got shape {tuple(x.shape)}")
        dim = _seq_to_minus_2(x, seq_dim, isinstance(positions, Tensor) and positions.dim() == 2)
        if dim != x.dim() - 2:
            return self(x.movedim(dim, -2), positions).movedim(-2, dim)
        if positions is None:
            seq = x.shape[-2]
            self._extend_cache(seq, x.device)
            cos, sin = self._cos[:seq], self._sin[:seq]  # (seq, r/2) float32 views
        else:
            _check_positions(positions, x, seq_dim)
            positions = positions.to(x.device)
            distance = positions.abs()
            longest = int(distance.max()) + 1 if distance.numel() else 0
            self._extend_cache(longest, x.device)
            cos = self._cos[distance]  # (..., seq, r/2) float32
            sin = self._sin[distance]
            sin = torch.where(positions[..., None] < 0, -sin, sin)  # sin(−a) = −sin a
            cos = _broadcast_to_heads(cos, positions, x.dim())
            sin = _broadcast_to_heads(sin, positions, x.dim())
        # the model's path: the cache-blocked kernel with its own backward (bitwise the
        # forward of rotate_pairs; the gradient every cached model was trained with)
        from posenc_lib.encodings.rope_kernel import rotate_pairs_blocked  # rope_kernel imports this module

        rotated = rotate_pairs_blocked(x[..., : self.rotary_dim], cos, sin, interleaved=self.interleaved)
        if self.rotary_dim == self.head_dim:
            return rotated
        return torch.cat([rotated, x[..., self.rotary_dim :]], dim=-1)  # pass-through dims unchanged

    @property
    def cache(self) -> tuple[Tensor, Tensor]:
        """The cached tables ``(cos, sin)``: cos(p·θ′_i) and sin(p·θ′_i) for p = 0 …
        length − 1, each ``[length, rotary_dim/2]`` float32 on the device of the last
        call (times YaRN's attention factor); empty ``[0, rotary_dim/2]`` before the
        first call. Read-only views of the module's cache: do not write into them."""
        return self._cos, self._sin

    def extra_repr(self) -> str:
        scaling = ""
        if self.rope_scaling["rope_type"] != "default":
            scaling = f", rope_scaling={self.rope_scaling}"
        if self.p_rope_pairs is not None:
            scaling += f", p_rope_pairs={self.p_rope_pairs}"
        return (f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, "
                f"base={self.base}, interleaved={self.interleaved}{scaling}")


def interleaved_to_half_permutation(head_dim: int) -> Tensor:
    """Indices that turn the interleaved layout into the rotate-half layout.

    Interleaved RoPE (GPT-J, Meta's Llama code) rotates pairs (2i, 2i+1); rotate-half (GPT-NeoX,
    Hugging Face Llama) rotates pairs (i, i + head_dim/2). With ``perm`` from this function,
    ``rope_half(x[..., perm]) == rope_interleaved(x)[..., perm]``. Applied to the output rows of
    the q and k projection weights of each head, it converts a checkpoint from one convention to
    the other with identical attention scores (Hugging Face's Llama conversion script does this).

    Args:
        head_dim: even, ≥ 2.

    Returns:
        ``[head_dim]`` int64: ``[0, 2, 4, …, 1, 3, 5, …]``; its inverse is ``perm.argsort()``.

    Raises:
        ValueError: if ``head_dim`` is odd or < 2.

    Example:
        >>> interleaved_to_half_permutation(6)
        tensor([0, 2, 4, 1, 3, 5])
    """
    _check_head_dim(head_dim)
    return torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])


def rope_cos_sin(
    positions: Tensor,
    head_dim: int,
    base: float | None = None,
    *,
    rope_scaling: Mapping | None = None,
) -> tuple[Tensor, Tensor]:
    """RoPE's cos/sin table for ``positions``: cos(p·θ′_i) and sin(p·θ′_i), float32.

    The table :class:`RotaryEmbedding` caches and :func:`apply_rope` computes, for code
    that rotates its own q and k: ``rotate_pairs(x, cos, sin, interleaved=False)`` gives
    the same result as ``RotaryEmbedding(head_dim, base, rope_scaling=...)(x,
    positions)``. Angles are formed in float32 as there (positions in float32 times
    float32 θ′_i). With YaRN the table is multiplied by its attention factor, as Hugging
    Face's is; ``dynamic`` takes θ′_i for L = max |p| + 1. Hugging Face's layout (rotate-half,
    ``[..., seq, head_dim]``) is ``torch.cat([cos, cos], dim=-1)``.

    Args:
        positions: integer tensor ``[seq]`` or ``[batch, seq]``; negative positions rotate
            backwards.
        head_dim: the rotated width d (``rotary_dim`` for partial rotary); even, ≥ 2.
            With ``partial_rotary_factor`` f in ``rope_scaling`` pass the full head
            width instead: the table is then that of r = int(head_dim · f), as
            :class:`RotaryEmbedding` with the same dictionary.
        base: θ_i = base^(−2i/head_dim); None takes ``rope_scaling["rope_theta"]`` or
            10 000.
        rope_scaling: a context-extension method in Hugging Face's vocabulary (see
            :mod:`~posenc_lib.encodings.rope_scaling`), or None for plain RoPE.

    Returns:
        ``(cos, sin)``, each ``[..., seq, head_dim // 2]`` (``r // 2`` with
        ``partial_rotary_factor``) float32 on positions' device.

    Raises:
        TypeError: if positions is not a tensor.
        ValueError: for positions that are not integers or not 1-D/2-D, and as
            :func:`~posenc_lib.encodings.rope_scaling.rope_scaled_frequencies`.

    Example:
        >>> cos, sin = rope_cos_sin(torch.arange(3), 4, base=100.0)
        >>> cos
        tensor([[ 1.0000,  1.0000],
                [ 0.5403,  0.9950],
                [-0.4161,  0.9801]])
    """
    if not isinstance(positions, Tensor):
        raise TypeError("positions must be an integer torch.Tensor [seq] or [batch, seq] "
                        f"(e.g. torch.arange(seq)), got {type(positions).__name__}")
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
    if positions.dim() not in (1, 2):
        raise ValueError("positions must be [seq] or [batch, seq], got shape "
                         f"{tuple(positions.shape)}")
    params = normalize_rope_scaling(rope_scaling)
    base = resolve_base(base, params)
    longest = int(positions.abs().max()) + 1 if positions.numel() else None
    inv_freq, attention_factor = rope_scaled_frequencies(head_dim, base, params, longest)
    angles = positions.to(torch.float32)[..., None] * inv_freq.to(positions.device)
    cos, sin = angles.cos(), angles.sin()  # (..., seq, head_dim/2) float32
    if attention_factor != 1.0:  # YaRN: q and k scaled (the logits by its square)
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


# ------------------------------------------------------------------------------------
# Other ways to write it, to compare with


def rope_rotate_half_naive(x: Tensor, cos_full: Tensor, sin_full: Tensor) -> Tensor:
    """RoPE as many tutorials write it: ``x · cos + rotate_half(x) · sin``.

    ``rotate_half(x) = cat(−x₂, x₁)`` for the halves x₁, x₂ of the last dimension; cos
    and sin are stored full width (each angle twice), as in Hugging Face's Llama. Equal
    to :func:`~posenc_lib.encodings.rope.apply_rope` (rotate-half convention) up to
    rounding, but it creates five temporaries: the negation, the concatenation, two
    products, the sum.

    Args:
        x: ``[..., seq, d]``, float.
        cos_full, sin_full: ``[seq, d]`` (``cat(cos, cos)``), broadcastable against x.

    Returns:
        Tensor with x's shape; float arithmetic in the promoted dtype of x and the
        tables.
    """
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos_full + rotated * sin_full


def rope_complex(x: Tensor, rotations: Tensor) -> Tensor:
    """RoPE as a complex multiplication (Su et al. 2021, eq. 34; Meta's Llama code).

    Adjacent pairs (2i, 2i+1) of x are read as complex numbers x_{2i} + i·x_{2i+1} and
    multiplied by e^{i p θ_i}: one elementwise product, one read of x and one write.
    This is the *interleaved* convention: it equals ``apply_rope(x, positions,
    interleaved=True)``.

    Args:
        x: ``[..., seq, d]``, float32 or float64, with a contiguous last dimension.
        rotations: complex ``[seq, d/2]`` (``torch.polar(ones, angles)``).

    Returns:
        Tensor with x's shape and dtype.
    """
    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)))  # (..., seq, d/2) complex
    rotated = torch.view_as_real(pairs * rotations)  # (..., seq, d/2, 2)
    return rotated.flatten(-2)  # (..., seq, d)
