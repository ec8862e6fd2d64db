"""SymPy objects for the ALiBi chapter: exact slopes, the three bias forms, softmax.

Query position t, key position s, distance r = t − s (the book's notation; Press et
al. write i, j). Press, Smith & Lewis 2022, §3: the causal bias −m·(t − s); BLOOM's
key-only form m·s (BigScience 2022; it relies on softmax ignoring a constant added to
a row); the symmetric encoder form −m·|t − s|. Imports no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import sympy as sp

from posenc_lib.symbolic import is_zero

BiasForm = Literal["distance", "key", "symmetric"]
BIAS_FORMS: tuple[str, ...] = ("distance", "key", "symmetric")


def exact_slopes(num_heads: int) -> list[sp.Expr]:
    """The paper's slopes m_1 … m_H as exact powers of two.

    H a power of two: m_h = 2^(−8h/H), h = 1 … H. Otherwise the slopes of the
    closest lower power of two c, then every other slope of the 2c sequence (Press et
    al. 2022, §3, and the authors' reference code).

    Args:
        num_heads: H ≥ 1.

    Returns:
        H SymPy powers of two, in head order.

    Raises:
        ValueError: if ``num_heads`` < 1.

    Example:
        >>> exact_slopes(6)
        [1/4, 1/16, 1/64, 1/256, 1/2, 1/8]
    """
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got num_heads={num_heads}")
    if num_heads & (num_heads - 1) == 0:
        return plain_slopes(num_heads)
    closest = 1 << (num_heads.bit_length() - 1)
    every_other = exact_slopes(2 * closest)[0::2]
    return plain_slopes(closest) + every_other[: num_heads - closest]


def plain_slopes(num_heads: int) -> list[sp.Expr]:
    """The plain geometric sequence 2^(−8h/H), h = 1 … H, for any H (the paper's rule
    only when H is a power of two).

    Raises:
        ValueError: if ``num_heads`` < 1.
    """
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got num_heads={num_heads}")
    heads = range(1, num_heads + 1)
    return [sp.Integer(2) ** sp.Rational(-8 * h, num_heads) for h in heads]


def bias(form: BiasForm, t: sp.Expr, s: sp.Expr, m: sp.Expr) -> sp.Expr:
    """The bias query t adds to key s's score.

    ``"distance"``: −m(t − s) (Press et al.); ``"key"``: m·s (BLOOM);
    ``"symmetric"``: −m|t − s| (the encoder form).

    Raises:
        ValueError: for an unknown form.
    """
    if form == "distance":
        return -m * (t - s)
    if form == "key":
        return m * s
    if form == "symmetric":
        return -m * sp.Abs(t - s)
    raise ValueError(f"form must be one of {BIAS_FORMS}, got form={form!r}")


def softmax(row: Sequence[sp.Expr]) -> list[sp.Expr]:
    """softmax(x)_s = exp(x_s) / Σ_s' exp(x_s'), entry by entry."""
    exps = [sp.exp(x) for x in row]
    total = sp.Add(*exps)
    return [e / total for e in exps]


def same_attention(
    form_a: BiasForm, form_b: BiasForm, size: int, *, causal: bool
) -> bool:
    """Whether two bias forms give the same attention for every score matrix and slope.

    Builds a ``size × size`` matrix of free symbols x_ts, adds each bias with a
    symbolic slope m > 0, takes the softmax of every row over the keys it may see
    (s ≤ t when ``causal``, all s otherwise), and asks SymPy to prove each difference
    zero (False when it cannot).
    """
    m = sp.Symbol("m", positive=True)
    for t in range(size):
        keys = range(t + 1) if causal else range(size)
        scores = [sp.Symbol(f"x_{t}_{s}", real=True) for s in keys]
        row_a = softmax([x + bias(form_a, t, s, m) for x, s in zip(scores, keys)])
        row_b = softmax([x + bias(form_b, t, s, m) for x, s in zip(scores, keys)])
        # exp(x + c) = exp(x)·exp(c) lets SymPy cancel a constant shared by a row
        gaps = [
            sp.powsimp(sp.expand(a - b, power_exp=True)) for a, b in zip(row_a, row_b)
        ]
        if not is_zero(sp.Matrix(gaps)):
            return False
    return True


def row_shift(form_a: BiasForm, form_b: BiasForm, *, causal: bool) -> sp.Expr:
    """bias_a − bias_b for a general query t and key s, simplified.

    Integers t, s ≥ 0, with s ≤ t when ``causal`` (written s = t − r, r ≥ 0, then
    put back). A result free of s means the two forms differ by a constant per row,
    which the softmax ignores.
    """
    t = sp.Symbol("t", integer=True, nonnegative=True)
    m = sp.Symbol("m", positive=True)
    s = sp.Symbol("s", integer=True, nonnegative=True)
    if causal:  # the key lies r ≥ 0 positions back
        r = sp.Symbol("r", integer=True, nonnegative=True)
        shift = sp.simplify(bias(form_a, t, t - r, m) - bias(form_b, t, t - r, m))
        return shift.subs(r, t - s)
    return sp.simplify(bias(form_a, t, s, m) - bias(form_b, t, s, m))


def slope_exponents(slopes: Sequence[sp.Expr]) -> list[sp.Expr]:
    """The exponents e of slopes written as 2^e, as exact rationals (2^(−4/3) → −4/3).

    Raises:
        ValueError: if a slope is not positive.
    """
    if any(not (m > 0) for m in slopes):
        raise ValueError(f"slopes must be positive, got {list(slopes)}")
    return [sp.nsimplify(sp.log(m, 2)) for m in slopes]


def ladder_heads(num_heads: int) -> int:
    """2c, twice the closest power of two c ≤ H: the head count whose plain slopes
    2^(−8h/2c) hold every slope the paper's rule gives H heads (:func:`exact_slopes`).

    Raises:
        ValueError: if ``num_heads`` < 1.
    """
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got {num_heads}")
    return 2 * 2 ** (num_heads.bit_length() - 1)


def off_ladder(slopes: Sequence[sp.Expr], num_heads: int) -> int:
    """How many of ``slopes`` are not on the ladder of :func:`ladder_heads` (H) heads.

    0 for the rule's slopes of H heads, more for the plain sequence 2^(−8h/H) when H is not a
    power of two.

    Raises:
        ValueError: if ``num_heads`` < 1.
    """
    ladder = set(plain_slopes(ladder_heads(num_heads)))
    return sum(m not in ladder for m in slopes)
