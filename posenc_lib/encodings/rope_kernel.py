"""RoPE's rotation as a cache-blocked CPU kernel: opt-in, measured in the cost chapter.

:func:`rotate_pairs_blocked` and :func:`apply_rope_blocked` compute what
:func:`~posenc_lib.encodings.rope.rotate_pairs` and
:func:`~posenc_lib.encodings.rope.apply_rope` compute, forward bitwise the same, with
less memory traffic: one read of x and one write of the result, block by block in the
cache for a large x (:data:`BLOCK_BYTES`, :data:`BLOCKED_FROM`), an ``out=`` argument that
writes into an existing tensor (or x itself), and a backward pass that is the inverse
rotation by the same kernel. :class:`~posenc_lib.encodings.rope.RotaryEmbedding`, the
model's path, runs it; the textbook form's gradient (autograd's sum of two products) can
differ from this backward in the last bit, and every cached model was trained with this one.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from posenc_lib.encodings.rope import _angles, _pairs, rotate_pairs

BLOCK_BYTES = 256 * 1024
"""Bytes of float32 x per block and thread in ``_rotate``: a block of x and of the
result (512 KiB together) stay in one core's 1 MiB L2 cache on the book's machine."""

BLOCKED_FROM = 4 * 1024 * 1024
"""x with at least this many float32 bytes is rotated block by block (below it, x and
the result fit in the caches anyway and one call per pass costs less)."""


def rotate_passes(
    x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, interleaved: bool, sign: float
) -> None:
    """The four elementwise passes, written into ``out`` (x's shape, float32 or
    float64, not overlapping x): two products fill the halves, two fused multiply-adds
    (``addcmul_``, in place) add the sine terms."""
    x_a, x_b = _pairs(x, interleaved)  # (..., seq, d/2) views
    out_a, out_b = _pairs(out, interleaved)
    torch.mul(x_a, cos, out=out_a)
    torch.mul(x_b, cos, out=out_b)
    out_a.addcmul_(x_b, sin, value=-sign)  # x_a cos − x_b sin
    out_b.addcmul_(x_a, sin, value=sign)  # x_b cos + x_a sin


def _blocks(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, rows: int):
    """Matching pieces (x, cos, sin, out) of about ``rows`` rows of ``head_dim`` each.

    x and out are contiguous ``[*lead, seq, d]``; cos and sin broadcast against x. When
    every leading index shares one table (positions ``[seq]``), whole ``[seq, d]``
    slices are grouped until a block is full; otherwise each slice is cut along seq.
    """
    seq, d = x.shape[-2], x.shape[-1]
    n = x.numel() // (seq * d) if seq * d else 0
    xv, ov = x.view(n, seq, d), out.view(n, seq, d)
    if math.prod(cos.shape[:-2]) == 1 and math.prod(sin.shape[:-2]) == 1:
        cos2, sin2 = cos.reshape(cos.shape[-2:]), sin.reshape(sin.shape[-2:])
        if seq < rows:  # several whole slices per block, one table for all
            k = rows // seq
            for i in range(0, n, k):
                yield xv[i : i + k], cos2, sin2, ov[i : i + k]
            return
        tables = [(cos2, sin2)] * n
    else:  # a table per leading index (positions [batch, seq])
        lead = x.shape[:-2]
        cos_e = cos.expand(*lead, *cos.shape[-2:])
        sin_e = sin.expand(*lead, *sin.shape[-2:])
        index = [torch.unravel_index(torch.tensor(i), lead) for i in range(n)]
        tables = [
            (cos_e[tuple(int(j) for j in ij)], sin_e[tuple(int(j) for j in ij)])
            for ij in index
        ]
    for i, (c, s) in enumerate(tables):
        for j in range(0, seq, rows):
            yield xv[i, j : j + rows], c[j : j + rows], s[j : j + rows], ov[i, j : j + rows]


def _rotate(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    interleaved: bool,
    inverse: bool,
    out: Tensor | None = None,
) -> Tensor:
    """The rotation kernel: arithmetic in float32 (float64 for float64 x), one pass
    over x and one over the result in memory.

    Why this form. Rotating pairs is elementwise: every output element needs one element
    of x, its partner, and one cos and one sin. The least memory traffic is one read of
    x and one write of the result (cos and sin are ``[seq, d/2]``, shared by every head,
    and stay in cache). On a CPU such an operation is limited by memory bandwidth, so
    its cost is the bytes it moves. The textbook form ``x * cos + cat(-x2, x1) * sin``
    allocates five temporaries the size of x (or half of it) and moves about 10 × x's
    bytes. Eager PyTorch has no single operation that pairs element i with i + d/2, so
    the rotation takes four passes (:func:`rotate_passes`: 3 reads and 2 writes of x's
    size). For a large x they run block by block: each block of x (256 KiB of float32
    per thread) is read from memory once, the four passes work on it in the cache, and
    its result is written once. bfloat16/float16 x is upcast block by block into a
    float32 scratch block and the result rounded once into the output, so no
    float32 copy of the whole x exists. Every element gets the same operations in the
    same order as in one pass over the whole tensor, so the result is bitwise the same.

    ``out`` (x's shape and dtype, contiguous; may be x itself) receives the result
    instead of a new tensor: fresh memory costs the operating system a page fault and
    a zeroing per page the first time it is written, which a preallocated buffer does
    not pay again.
    """
    compute_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    sign = -1.0 if inverse else 1.0  # the inverse rotation (by −angle) negates sin
    cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    compute_bytes = x.numel() * torch.finfo(compute_dtype).bits // 8
    blocked = (
        x.device.type == "cpu"
        and compute_bytes >= BLOCKED_FROM
        and x.is_contiguous()
        and out.is_contiguous()
    )
    if not blocked:
        x_c = x.to(compute_dtype)  # no copy when x is already float32
        direct = out.dtype == compute_dtype and not _overlaps(out, x_c)
        result = out if direct else torch.empty_like(x_c)
        rotate_passes(x_c, cos, sin, result, interleaved, sign)
        if not direct:
            out.copy_(result)  # the one rounding to x's dtype, or the in-place write
        return out
    rows = max(1, BLOCK_BYTES * torch.get_num_threads() // (x.shape[-1] * 4))
    direct = x.dtype == compute_dtype and not _overlaps(out, x)
    scratch_in = scratch_out = None
    for xb, cb, sb, ob in _blocks(x, cos, sin, out, rows):
        if direct:
            rotate_passes(xb, cb, sb, ob, interleaved, sign)
            continue
        if scratch_out is None:  # one scratch block, reused (it stays in cache)
            scratch_out = torch.empty(xb.numel(), dtype=compute_dtype, device=x.device)
            if x.dtype != compute_dtype:
                scratch_in = torch.empty_like(scratch_out)
        result = scratch_out[: xb.numel()].view(xb.shape)
        if scratch_in is None:
            source = xb
        else:
            source = scratch_in[: xb.numel()].view(xb.shape)
            source.copy_(xb)  # upcast the block
        rotate_passes(source, cb, sb, result, interleaved, sign)
        ob.copy_(result)  # one rounding to x's dtype (or the write back, in place)
    return out


def _overlaps(a: Tensor, b: Tensor) -> bool:
    """Whether two tensors share storage (then a result must not be written into the
    other's memory before the passes that read it are done)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


class _Rotation(torch.autograd.Function):
    """Autograd for :func:`_rotate`: a rotation's gradient is the rotation by −angle.

    R is orthogonal, so for y = R x the gradient is ∂L/∂x = Rᵀ ∂L/∂y = R(−angle) ∂L/∂y:
    the backward pass is the same kernel with sin negated, as cheap as the forward.
    cos and sin are constants here (see :func:`rotate_pairs_blocked`).
    """

    @staticmethod
    def forward(ctx, x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
        ctx.save_for_backward(cos, sin)
        ctx.interleaved = interleaved
        return _rotate(x, cos, sin, interleaved, inverse=False)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None]:
        cos, sin = ctx.saved_tensors
        return _rotate(grad, cos, sin, ctx.interleaved, inverse=True), None, None, None


def rotate_pairs_blocked(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    interleaved: bool,
    out: Tensor | None = None,
) -> Tensor:
    """Rotate each pair of ``x``'s last dimension by the angle whose cos/sin are given.

    :func:`~posenc_lib.encodings.rope.rotate_pairs` (same pairs, same arithmetic in
    float32, or float64 for float64 x), as a kernel that allocates the result once and
    moves no temporaries (see ``_rotate``); its forward is bitwise
    :func:`~posenc_lib.encodings.rope.rotate_pairs`'s. Its backward pass is the inverse
    rotation, by the same kernel. cos and sin are treated as constants unless one of
    them requires grad, in which case :func:`~posenc_lib.encodings.rope.rotate_pairs`
    (plain autograd) is used.

    Args:
        x: ``[..., seq, d]`` with d even.
        cos, sin: ``[..., seq, d/2]``, broadcastable against x's leading dims.
        interleaved: the pairing convention (see above).
        out: a contiguous tensor of x's shape, dtype and device to write the result
            into (x itself rotates in place), or None for a new tensor. Like PyTorch's
            ``out=`` arguments it does not record gradients.

    Returns:
        Tensor with x's shape and dtype (``out`` when given).

    Raises:
        ValueError: for an ``out`` of another shape, dtype or device, or not
            contiguous, or given while gradients of x, cos or sin are recorded.
    """
    if out is not None:
        _check_out(out, x)
        if torch.is_grad_enabled() and (
            x.requires_grad or cos.requires_grad or sin.requires_grad
        ):
            raise ValueError(
                "out= does not record gradients: call without out, or under "
                "torch.no_grad()"
            )
        return _rotate(x, cos, sin, interleaved, inverse=False, out=out)
    if cos.requires_grad or sin.requires_grad:  # learned angles: autograd sees it all
        return rotate_pairs(x, cos, sin, interleaved=interleaved)
    return _Rotation.apply(x, cos, sin, interleaved)


def _check_out(out: Tensor, x: Tensor) -> None:
    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(
            f"out must have x's shape {tuple(x.shape)}, dtype {x.dtype} and device "
            f"{x.device}, got {tuple(out.shape)}, {out.dtype}, {out.device}"
        )
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")


def apply_rope_blocked(
    x: Tensor,
    positions: Tensor,
    *,
    base: float = 10000.0,
    interleaved: bool = False,
    angle_dtype: torch.dtype = torch.float32,
    out: Tensor | None = None,
) -> Tensor:
    """:func:`~posenc_lib.encodings.rope.apply_rope` through the kernel, with ``out=``.

    Same arguments, checks and result as
    :func:`~posenc_lib.encodings.rope.apply_rope` (forward bitwise equal); the rotation
    runs in :func:`rotate_pairs_blocked`.

    Args:
        x, positions, base, interleaved, angle_dtype: as
            :func:`~posenc_lib.encodings.rope.apply_rope`.
        out: a preallocated contiguous tensor of x's shape, dtype and device for the
            result (x itself rotates in place), or None for a new tensor; no gradients
            are recorded through it.

    Returns:
        Tensor with x's shape and dtype (``out`` when given).

    Raises:
        TypeError, ValueError: as :func:`~posenc_lib.encodings.rope.apply_rope`, and
            for an ``out`` that does not fit (see :func:`rotate_pairs_blocked`).

    Example:
        >>> x = torch.randn(1, 2, 5, 8)
        >>> apply_rope_blocked(x, torch.arange(5), out=x) is x
        True
    """
    cos, sin = _angles(x, positions, base, angle_dtype)
    return rotate_pairs_blocked(x, cos, sin, interleaved=interleaved, out=out)
