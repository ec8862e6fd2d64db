"""Partial rotation: two ways to leave part of each head without positions.

Both rotate some dimensions of q and k and pass the others through unchanged, but
they choose different dimensions and give them different frequencies:

* **GPT-NeoX's** ``rotary_pct`` (Black et al. 2022; Hugging Face's
  ``partial_rotary_factor``, 0.25 in GPT-NeoX-20B and Qwen3-Next): the first
  r = ⌊fraction · d⌋ dimensions are rotated as a RoPE of width r, so their
  frequencies are spread over the rotated width, θ_j = base^(−2j/r),
  j = 0 … r/2 − 1. They run from 1 down to base^(−(r−2)/r) (near 1/base when r is
  large, e.g. base^(−62/64) for r = 64): fewer frequencies over almost the same range,
  so the low end is kept.
* **p-RoPE** (Barbero et al. 2025, "Round and Round We Go!", §6; transformers'
  ``"proportional"`` rope type): the full-width frequencies θ_i = base^(−2i/d) are
  kept for the k = ⌊fraction · d/2⌋ fastest pairs i < k, and the rest are set to 0.
  The slowest kept pair turns at base^(−2(k−1)/d): the *lowest* frequencies are the
  ones removed.

In the rotate-half layout pair i of a width-w rotation holds dimensions (i, i + w/2).
So GPT-NeoX leaves the trailing d − r dimensions untouched, p-RoPE the dimensions
{i, i + d/2 : i ≥ k}. :func:`dimension_frequencies` returns, for every dimension of
the head, the frequency at which it turns under either form, which makes the
difference explicit. A :class:`~posenc_lib.encodings.rope.RotaryEmbedding` does the
first with ``rotary_dim=r`` (or ``rope_scaling={"partial_rotary_factor": f}``) and
the second with ``p_rope_pairs=k``; a Hugging Face
``rope_parameters`` dictionary names them ``partial_rotary_factor`` and
``{"rope_type": "proportional", "partial_rotary_factor": p}``, and
:func:`~posenc_lib.encodings.rope_scaling.rope_scaled_frequencies` reads both through
:func:`neox_rotary_dim` and :func:`p_rope_kept_pairs` (their one home). This module is
a leaf: it imports only torch.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

PARTIAL_FORMS: tuple[str, ...] = ("neox", "p_rope")
"""The two forms: ``"neox"`` (leading dimensions) and ``"p_rope"`` (fastest pairs)."""


def _check(head_dim: int, fraction: float) -> None:
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 2 \
            or head_dim % 2:
        raise ValueError(f"head_dim must be an even integer >= 2, got head_dim={head_dim!r}")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
            or not 0 < fraction <= 1:
        raise ValueError(f"fraction must be a number in (0, 1], got fraction={fraction!r}")


def neox_rotary_dim(head_dim: int, fraction: float) -> int:
    """GPT-NeoX's rotated width r = ⌊fraction · head_dim⌋ (as transformers'
    ``int(head_dim * partial_rotary_factor)``).

    Raises:
        ValueError: for an odd or too small head_dim, a fraction outside (0, 1], or
            an r that is odd or 0 (RoPE rotates pairs).

    Example:
        >>> neox_rotary_dim(256, 0.25)
        64
    """
    _check(head_dim, fraction)
    rotary_dim = int(head_dim * fraction)
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"fraction={fraction} of head_dim={head_dim} gives "
                         f"rotary_dim={rotary_dim}; it must be even and >= 2")
    return rotary_dim


def p_rope_kept_pairs(head_dim: int, fraction: float) -> int:
    """p-RoPE's number of kept (fastest) pairs k = ⌊fraction · head_dim / 2⌋, as
    transformers' ``int(partial_rotary_factor * head_dim // 2)``.

    Raises:
        ValueError: for an odd or too small head_dim, a fraction outside (0, 1], or
            k = 0.

    Example:
        >>> p_rope_kept_pairs(64, 0.75)
        24
    """
    _check(head_dim, fraction)
    kept = int(fraction * head_dim // 2)
    if kept < 1:
        raise ValueError(f"fraction={fraction} of head_dim={head_dim} keeps no pair; "
                         "p-RoPE needs at least one")
    return kept


def dimension_frequencies(head_dim: int, base: float, fraction: float,
                          form: str) -> Tensor:
    """The frequency (radians per position) at which each dimension of a head turns.

    Rotate-half layout; 0 for a dimension that is passed through. float64, so it
    serves as the reference for the float32 modules.

    Args:
        head_dim: d, even.
        base: RoPE's base, > 0.
        fraction: GPT-NeoX's ``rotary_pct`` or p-RoPE's p, in (0, 1].
        form: one of :data:`PARTIAL_FORMS`.

    Returns:
        ``[head_dim]`` float64. ``"neox"``: dims j and j + r/2 turn at
        base^(−2j/r) for j < r/2, dims ≥ r at 0. ``"p_rope"``: dims i and i + d/2 turn
        at base^(−2i/d) for i < k, 0 for i ≥ k. fraction = 1 gives plain RoPE in both.

    Raises:
        ValueError: for a form not in :data:`PARTIAL_FORMS`, a base ≤ 0, and as
            :func:`neox_rotary_dim` / :func:`p_rope_kept_pairs`.

    Example:
        Half of an 8-wide head, base 16: GPT-NeoX spreads two pairs over dims 0–3
        (θ = 1 and 16^(−2/4) = 1/4); p-RoPE keeps the head's two fastest pairs
        (θ = 1 and 16^(−2/8) = 1/2) in dims 0, 1 and 4, 5.

        >>> dimension_frequencies(8, 16.0, 0.5, "neox").tolist()
        [1.0, 0.25, 1.0, 0.25, 0.0, 0.0, 0.0, 0.0]
        >>> dimension_frequencies(8, 16.0, 0.5, "p_rope").tolist()
        [1.0, 0.5, 0.0, 0.0, 1.0, 0.5, 0.0, 0.0]
    """
    if form not in PARTIAL_FORMS:
        raise ValueError(f"form must be one of {PARTIAL_FORMS}, got form={form!r}")
    if isinstance(base, bool) or not isinstance(base, (int, float)) \
            or not 0 < base < math.inf:
        raise ValueError(f"base must be a finite number > 0, got base={base!r}")
    out = torch.zeros(head_dim, dtype=torch.float64)
    if form == "neox":
        width = neox_rotary_dim(head_dim, fraction)
        pairs = width // 2
        theta = float(base) ** -(torch.arange(pairs, dtype=torch.float64) * 2 / width)
        out[:pairs], out[pairs:width] = theta, theta
        return out
    kept = p_rope_kept_pairs(head_dim, fraction)
    theta = float(base) ** -(torch.arange(kept, dtype=torch.float64) * 2 / head_dim)
    half = head_dim // 2
    out[:kept], out[half:half + kept] = theta, theta
    return out


def pair_turns(head_dim: int, base: float, fraction: float, form: str,
               context_length: int) -> dict[str, int | float]:
    """How many of the rotating pairs complete a full turn within a context (chapter 14).

    Pair i turns through (L − 1)·θ_i radians across a window of L positions; it completes
    a turn when (L − 1)·θ_i ≥ 2π. A pair that never does is one whose angles past L were
    never seen (chapter 10's critical pair is the fastest of them).

    Args:
        head_dim, base, fraction, form: as :func:`dimension_frequencies`.
        context_length: L, the window (positions), ≥ 2.

    Returns:
        ``{"rotating pairs": n, "complete a turn": k, "never do": n − k,
        "slowest θ": min θ_i}`` (radians per position): three ints and a float.

    Raises:
        ValueError: for a context_length below 2, and as :func:`dimension_frequencies`.

    Example:
        A quarter of a 16-wide head, base 1e4, over 128 positions: GPT-NeoX's two pairs
        turn at θ = 1 and 1e4^(−1/2) = 0.01, and only the first completes a turn.

        >>> pair_turns(16, 10000.0, 0.25, "neox", 128)
        {'rotating pairs': 2, 'complete a turn': 1, 'never do': 1, 'slowest θ': 0.01}
    """
    if isinstance(context_length, bool) or not isinstance(context_length, int) \
            or context_length < 2:
        raise ValueError(f"context_length must be an integer >= 2, got "
                         f"context_length={context_length!r}")
    freqs = dimension_frequencies(head_dim, base, fraction, form)
    theta = freqs[freqs > 0].unique()  # one frequency per rotating pair
    full_turn = (context_length - 1) * theta >= 2 * math.pi
    return {"rotating pairs": len(theta), "complete a turn": int(full_turn.sum()),
            "never do": int((~full_turn).sum()),
            "slowest θ": theta.min().item()}
