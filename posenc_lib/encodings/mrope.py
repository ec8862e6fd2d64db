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

A context-extension method combines with either layout as Qwen2.5-VL and Qwen3-VL
ship it (their ``rope_parameters`` carry ``mrope_section`` next to e.g.
``"rope_type": "yarn"``; transformers' ``Qwen3VLTextRotaryEmbedding``, vLLM PR 25384,
SGLang PR 13313): the method scales θ_i first
(:func:`~posenc_lib.encodings.rope_scaling.rope_scaled_frequencies`), the sections then
assign the scaled pairs to axes, and the method's attention factor multiplies cos and
sin. Such a dictionary also supplies ``mrope_section``, ``mrope_interleaved`` (the
layout) and ``rope_theta``.

Rotate-half layout (pair i holds dims i and i + d/2), as both models ship it. This
module imports only torch, :mod:`~posenc_lib.encodings.rope_scaling` and the rotation
kernel of :mod:`~posenc_lib.encodings.rope`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from posenc_lib.encodings.rope import rotate_pairs
from posenc_lib.encodings.rope_scaling import normalize_rope_scaling, rope_scaled_frequencies

DEFAULT_SECTION: tuple[int, ...] = (16, 24, 24)
"""Qwen2-VL's ``mrope_section`` (head_dim 128): used when neither ``section`` nor the
dictionary gives one."""

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


def mrope_section_and_layout(section: Sequence[int] | None, layout: str | None,
                             rope_scaling: Mapping | None) -> tuple[list[int], str]:
    """The section and layout to use: the arguments, else the dictionary's.

    ``rope_scaling["mrope_section"]`` stands in for ``section=None`` (else
    :data:`DEFAULT_SECTION`), ``rope_scaling["mrope_interleaved"]`` for ``layout=None``
    (True: ``"interleaved"``; absent or False: ``"chunked"``).

    Raises:
        ValueError: if an argument disagrees with the dictionary (and as
            :func:`~posenc_lib.encodings.rope_scaling.normalize_rope_scaling`).
    """
    params = normalize_rope_scaling(rope_scaling)
    given = params.get("mrope_section")
    if section is not None and given is not None and list(section) != given:
        raise ValueError(f"section={list(section)!r} disagrees with "
                         f"rope_scaling['mrope_section']={given!r}; give one of them")
    section = list(section) if section is not None else given or list(DEFAULT_SECTION)
    interleaved = params.get("mrope_interleaved")
    if layout is not None and interleaved is not None \
            and (layout == "interleaved") != interleaved:
        raise ValueError(f"layout={layout!r} disagrees with "
                         f"rope_scaling['mrope_interleaved']={interleaved!r}")
    if layout is None:
        layout = "interleaved" if interleaved else "chunked"
    return section, layout


def _angles_and_factor(positions: Tensor, head_dim: int, base: float | None,
                       section: Sequence[int] | None, layout: str | None,
                       dtype: torch.dtype, rope_scaling: Mapping | None,
                       max_position_embeddings: int | None) -> tuple[Tensor, float]:
    """mrope_angles' angles and the method's attention factor."""
    params = normalize_rope_scaling(rope_scaling,
                                    max_position_embeddings=max_position_embeddings)
    section, layout = mrope_section_and_layout(section, layout, params)
    axes = mrope_pair_axes(section, layout)
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer tensor, got {positions.dtype}")
    if positions.dim() not in (2, 3) or positions.shape[0] != len(section):
        raise ValueError(f"positions must be [axes={len(section)}, seq] or [axes, batch, "
                         f"seq], got shape {tuple(positions.shape)}")
    if axes.numel() * 2 != head_dim:
        raise ValueError(f"sum(section)={axes.numel()} must equal head_dim/2 = "
                         f"{head_dim // 2} (head_dim={head_dim})")
    # dynamic and longrope read the current length, largest |position| + 1 on any axis
    longest = int(positions.abs().max()) + 1 if positions.numel() else None
    theta, factor = rope_scaled_frequencies(head_dim, base, params, longest, dtype=dtype)
    if theta.numel() != axes.numel():
        raise ValueError(f"rope_scaling gives {theta.numel()} frequencies (partial "
                         f"rotary?), the sections {section!r} cover {axes.numel()} pairs")
    theta = theta.to(positions.device)  # (d/2,)
    per_pair = positions.to(dtype)[axes.to(positions.device)]  # (d/2, [B,] T)
    return per_pair.movedim(0, -1) * theta, factor  # ([B,] T, d/2)


def mrope_angles(positions: Tensor, head_dim: int, base: float | None = None,
                 section: Sequence[int] | None = None, layout: str | None = None,
                 dtype: torch.dtype = torch.float32, *,
                 rope_scaling: Mapping | None = None,
                 max_position_embeddings: int | None = None) -> Tensor:
    """The angle p_{a(i)} · θ′_i of every token and pair.

    Args:
        positions: integer ``[axes, seq]`` or ``[axes, batch, seq]`` (axes first, as
            transformers' ``position_ids`` for Qwen2-VL).
        head_dim: d; sum(section) must equal d/2.
        base: θ_i = base^(−2i/d); None takes ``rope_scaling["rope_theta"]`` or 10 000.
        section, layout: see :func:`mrope_pair_axes`; None takes the dictionary's
            (:func:`mrope_section_and_layout`), else ``(16, 24, 24)`` and ``"chunked"``.
        dtype: of θ′_i and the product: float32 (as the models) or float64 (a
            reference).
        rope_scaling: a context-extension method in Hugging Face's vocabulary
            (:mod:`~posenc_lib.encodings.rope_scaling`), or None: θ′_i is
            :func:`~posenc_lib.encodings.rope_scaling.rope_scaled_frequencies` for the
            current length L = max |p| + 1 over every axis (``dynamic``,
            ``longrope``), before the sections assign pairs to axes.
        max_position_embeddings: for what transformers derives from it (LongRoPE's
            ``factor``); see :func:`~posenc_lib.encodings.rope_scaling.normalize_rope_scaling`.

    Returns:
        ``[seq, d/2]`` or ``[batch, seq, d/2]`` in ``dtype``, radians.

    Raises:
        ValueError: for non-integer positions, a first dimension that is not the
            number of axes, sum(section) ≠ head_dim/2 (or ≠ the number of frequencies
            the method gives), and as :func:`mrope_pair_axes`,
            :func:`mrope_section_and_layout` and ``rope_scaled_frequencies``.
    """
    angles, _ = _angles_and_factor(positions, head_dim, base, section, layout, dtype,
                                   rope_scaling, max_position_embeddings)
    return angles


def apply_mrope(x: Tensor, positions: Tensor, *, base: float | None = None,
                section: Sequence[int] | None = None, layout: str | None = None,
                rope_scaling: Mapping | None = None,
                max_position_embeddings: int | None = None) -> Tensor:
    """Rotate q or k ``[batch, heads, seq, head_dim]`` by multi-axis positions.

    Pair i (dims i and i + d/2) turns by p_{a(i)} · θ′_i; the rotation is RoPE's kernel
    (:func:`~posenc_lib.encodings.rope.rotate_pairs`), angles in float32. With a
    ``rope_scaling`` θ′_i are the method's frequencies and cos and sin are multiplied
    by its attention factor (YaRN, LongRoPE), as transformers'
    ``Qwen2VLRotaryEmbedding`` and ``Qwen3VLTextRotaryEmbedding``.

    Args:
        x: ``[batch, heads, seq, head_dim]``, any float dtype.
        positions: integer ``[axes, seq]`` or ``[axes, batch, seq]``.
        base, section, layout, rope_scaling, max_position_embeddings: see
            :func:`mrope_angles`.

    Returns:
        x's shape and dtype.

    Raises:
        ValueError: for x that is not 4-D or whose seq/batch disagree with
            ``positions`` (and as :func:`mrope_angles`).

    Example:
        >>> q = torch.randn(1, 2, 5, 8)
        >>> apply_mrope(q, torch.zeros(3, 5, dtype=torch.long), section=[2, 1, 1]).shape
        torch.Size([1, 2, 5, 8])
        >>> yarn = {"rope_type": "yarn", "factor": 4.0, "mrope_section": [2, 1, 1],
        ...         "original_max_position_embeddings": 64}
        >>> apply_mrope(q, torch.zeros(3, 5, dtype=torch.long), rope_scaling=yarn).shape
        torch.Size([1, 2, 5, 8])
    """
    if x.dim() != 4:
        raise ValueError(f"x must be [batch, heads, seq, head_dim], got {tuple(x.shape)}")
    angles, factor = _angles_and_factor(positions, x.shape[-1], base, section, layout,
                                        torch.float32, rope_scaling,
                                        max_position_embeddings)
    if angles.shape[-2] != x.shape[-2]:
        raise ValueError(f"positions have seq={angles.shape[-2]}, x has seq={x.shape[-2]}")
    if angles.dim() == 3:
        if angles.shape[0] != x.shape[0]:
            raise ValueError(f"positions have batch={angles.shape[0]}, x has "
                             f"batch={x.shape[0]}")
        angles = angles[:, None]  # (B, 1, T, d/2): shared by the heads
    cos, sin = angles.cos(), angles.sin()
    if factor != 1.0:
        cos, sin = cos * factor, sin * factor
    return rotate_pairs(x, cos, sin, interleaved=False)


def mrope_scores(q: Tensor, k: Tensor, positions: Tensor, **options) -> Tensor:
    """Attention scores of M-RoPE-rotated queries and keys, q′ · k′ (not divided by √d).

    Each pair sees one axis, so the scores depend on the offsets p_a(t) − p_a(s) per axis:
    shifting every token by the same amount on each axis leaves them unchanged (up to
    float32 rounding), and text positions (the same on every axis) give RoPE's scores.

    Args:
        q, k: ``[batch, heads, seq, head_dim]``, any float dtype.
        positions: integer ``[axes, seq]`` or ``[axes, batch, seq]``, shared by q and k.
        **options: ``base``, ``section``, ``layout``, ``rope_scaling``,
            ``max_position_embeddings``, as :func:`apply_mrope`.

    Returns:
        ``[batch, heads, seq, seq]``: entry (t, s) is q′_t · k′_s.

    Raises:
        ValueError: as :func:`apply_mrope`.

    Example:
        >>> q, k = torch.randn(2, 1, 1, 3, 8).unbind(0)
        >>> p = torch.tensor([[0, 1, 2], [0, 0, 1], [0, 1, 0]])
        >>> gap = mrope_scores(q, k, p, section=[2, 1, 1]) - mrope_scores(
        ...     q, k, p + torch.tensor([[5], [2], [7]]), section=[2, 1, 1])
        >>> bool(gap.abs().max() < 1e-5)
        True
    """
    return (apply_mrope(q, positions, **options)
            @ apply_mrope(k, positions, **options).transpose(-1, -2))
