"""Multi-axis RoPE (M-RoPE, Qwen2-VL): one position per axis, a share of the pairs each.

A token of an image or video has a position on several axes (time t, height h,
width w); text tokens carry the same position on every axis. M-RoPE (Wang et al.
2024, Qwen2-VL §2.1) gives each axis a share of the head's frequency pairs, its
``mrope_section`` (e.g. ``[16, 24, 24]`` pairs for t, h, w with head_dim 128), and
rotates pair i by p_{a(i)} · θ_i, where a(i) is the axis pair i belongs to and
θ_i = base^(−2i/d) as in RoPE. Because each pair sees one axis only, the score of a
query and a key depends on the offsets p_a(t) − p_a(s) per axis, not on the
positions themselves.

Two layouts assign pairs to axes (:data:`MROPE_LAYOUTS`):

* ``"chunked"`` (Qwen2-VL, Qwen2.5-VL): the first section[0] pairs to axis 0, the
  next section[1] to axis 1, … — so the time axis gets the fastest frequencies and
  width the slowest;
* ``"interleaved"`` (Qwen3-VL): pair i goes to axis 1 if i ≡ 1 (mod 3) and
  i < 3·section[1], to axis 2 if i ≡ 2 (mod 3) and i < 3·section[2], to axis 0
  otherwise — each axis gets frequencies from the whole spectrum.

Rotate-half layout (pair i holds dims i and i + d/2), as both models ship it. This
module imports only torch and the rotation kernel of
:mod:`~posenc_lib.encodings.rope`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from posenc_lib.encodings.rope import _inverse_frequencies, rotate_pairs

MROPE_LAYOUTS: tuple[str, ...] = ("chunked", "interleaved")
"""How pairs are assigned to axes: Qwen2-VL's contiguous chunks, Qwen3-VL's stride 3."""


def mrope_pair_axes(section: Sequence[int], layout: str = "chunked") -> Tensor:
    """The axis a(i) of every frequency pair i.

    Args:
        section: pairs per axis, positive integers (``mrope_section``); their sum is
            head_dim/2. ``"interleaved"`` needs exactly 3 axes.
        layout: one of :data:`MROPE_LAYOUTS`.

    Returns:
        ``[sum(section)]`` int64, values in 0 … len(section) − 1.

    Raises:
        ValueError: for a layout not in :data:`MROPE_LAYOUTS`, an empty section or
            one with entries < 1, or an interleaved section that is not 3 axes whose
            shares fit (3·section[a] ≤ sum(section) + a for a = 1, 2).

    Example:
        >>> mrope_pair_axes([2, 1, 1])
        tensor([0, 0, 1, 2])
        >>> mrope_pair_axes([2, 1, 1], "interleaved")
        tensor([0, 1, 2, 0])
    """
    if layout not in MROPE_LAYOUTS:
        raise ValueError(f"layout must be one of {MROPE_LAYOUTS}, got layout={layout!r}")
    section = list(section)
    if not section or any(isinstance(n, bool) or not isinstance(n, int) or n < 1
                          for n in section):
        raise ValueError("section must be a non-empty list of integers >= 1 (pairs per "
                         f"axis), got section={section!r}")
    pairs = sum(section)
    if layout == "chunked":
        return torch.repeat_interleave(torch.arange(len(section)), torch.tensor(section))
    if len(section) != 3:
        raise ValueError("the interleaved layout has 3 axes (t, h, w), got "
                         f"section={section!r}")
    axes = torch.zeros(pairs, dtype=torch.int64)
    for axis in (1, 2):
        members = torch.arange(axis, 3 * section[axis], 3)
        if members.numel() and int(members[-1]) >= pairs:
            raise ValueError(f"interleaved section={section!r}: axis {axis} would need "
                             f"pair {int(members[-1])}, beyond the {pairs} pairs")
        axes[members] = axis
    if int(torch.bincount(axes, minlength=3)[0]) != section[0]:
        raise ValueError(f"interleaved section={section!r} leaves "
                         f"{int((axes == 0).sum())} pairs to axis 0, not {section[0]}")
    return axes


def mrope_angles(positions: Tensor, head_dim: int, base: float = 10000.0,
                 section: Sequence[int] = (16, 24, 24), layout: str = "chunked",
                 dtype: torch.dtype = torch.float32) -> Tensor:
    """The angle p_{a(i)} · θ_i of every token and pair.

    Args:
        positions: integer ``[axes, seq]`` or ``[axes, batch, seq]`` (axes first, as
            transformers' ``position_ids`` for Qwen2-VL).
        head_dim: d; sum(section) must equal d/2.
        base: θ_i = base^(−2i/d).
        section, layout: see :func:`mrope_pair_axes`.
        dtype: of θ_i and the product: float32 (as the models) or float64 (a
            reference).

    Returns:
        ``[seq, d/2]`` or ``[batch, seq, d/2]`` in ``dtype``, radians.

    Raises:
        ValueError: for non-integer positions, a first dimension that is not the
            number of axes, or sum(section) ≠ head_dim/2 (and as
            :func:`mrope_pair_axes`).
    """
    axes = mrope_pair_axes(section, layout)
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer tensor, got {positions.dtype}")
    if positions.dim() not in (2, 3) or positions.shape[0] != len(section):
        raise ValueError(f"positions must be [axes={len(section)}, seq] or [axes, batch, "
                         f"seq], got shape {tuple(positions.shape)}")
    if axes.numel() * 2 != head_dim:
        raise ValueError(f"sum(section)={axes.numel()} must equal head_dim/2 = "
                         f"{head_dim // 2} (head_dim={head_dim})")
    theta = _inverse_frequencies(head_dim, base, dtype).to(positions.device)  # (d/2,)
    per_pair = positions.to(dtype)[axes.to(positions.device)]  # (d/2, [B,] T)
    return per_pair.movedim(0, -1) * theta  # ([B,] T, d/2)


def apply_mrope(x: Tensor, positions: Tensor, *, base: float = 10000.0,
                section: Sequence[int] = (16, 24, 24),
                layout: str = "chunked") -> Tensor:
    """Rotate q or k ``[batch, heads, seq, head_dim]`` by multi-axis positions.

    Pair i (dims i and i + d/2) turns by p_{a(i)} · θ_i; the rotation is RoPE's kernel
    (:func:`~posenc_lib.encodings.rope.rotate_pairs`), angles in float32.

    Args:
        x: ``[batch, heads, seq, head_dim]``, any float dtype.
        positions: integer ``[axes, seq]`` or ``[axes, batch, seq]``.
        base, section, layout: see :func:`mrope_angles`.

    Returns:
        x's shape and dtype.

    Raises:
        ValueError: for x that is not 4-D or whose seq/batch disagree with
            ``positions`` (and as :func:`mrope_angles`).

    Example:
        >>> q = torch.randn(1, 2, 5, 8)
        >>> apply_mrope(q, torch.zeros(3, 5, dtype=torch.long), section=[2, 1, 1]).shape
        torch.Size([1, 2, 5, 8])
    """
    if x.dim() != 4:
        raise ValueError(f"x must be [batch, heads, seq, head_dim], got {tuple(x.shape)}")
    angles = mrope_angles(positions, x.shape[-1], base, section, layout)
    if angles.shape[-2] != x.shape[-2]:
        raise ValueError(f"positions have seq={angles.shape[-2]}, x has seq={x.shape[-2]}")
    if angles.dim() == 3:
        if angles.shape[0] != x.shape[0]:
            raise ValueError(f"positions have batch={angles.shape[0]}, x has "
                             f"batch={x.shape[0]}")
        angles = angles[:, None]  # (B, 1, T, d/2): shared by the heads
    return rotate_pairs(x, angles.cos(), angles.sin(), interleaved=False)
