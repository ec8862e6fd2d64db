"""SymPy objects for the ALiBi chapter: exact slopes, the three bias forms, softmax.

Press, Smith & Lewis 2022, §3: the causal bias −m·(i − j); BLOOM's key-only form m·j
(BigScience 2022; it relies on softmax ignoring a constant added to a row); the symmetric
encoder form −m·|i − j|. Imports no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import sympy as sp

from posenc_lib.symbolic import is_zero

BiasForm = Literal["distance", "key", "symmetric"]
BIAS_FORMS: tuple[str, ...] = ("distance", "key", "symmetric")


def exact_slopes(num_heads: int) -> list[sp.Expr]:
    """The paper's slopes as exact powers of two.

    A power of two n: 2^(−8k/n), k = 1 … n. Otherwise the slopes of the closest lower power
    of two c, then every other slope of the 2c sequence (the authors' reference code).

    Raises:
        ValueError: if ``num_heads`` < 1.
    """
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got num_heads={num_heads}")
    if num_heads & (num_heads - 1) == 0:
        return plain_slopes(num_heads)
    closest = 1 << (num_heads.bit_length() - 1)
    return plain_slopes(closest) + exact_slopes(2 * closest)[0::2][: num_heads - closest]


def plain_slopes(num_heads: int) -> list[sp.Expr]:
    """The plain geometric sequence 2^(−8k/n), k = 1 … n, for any n (not the paper's rule
    unless n is a power of two).

    Raises:
        ValueError: if ``num_heads`` < 1.
    """
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got num_heads={num_heads}")
    return [sp.Integer(2) ** sp.Rational(-8 * k, num_heads) for k in range(1, num_heads + 1)]


def bias(form: BiasForm, i: sp.Expr, j: sp.Expr, m: sp.Expr) -> sp.Expr:
    """The bias query i adds to key j's score: ``"distance"`` −m(i − j), ``"key"`` m·j,
    ``"symmetric"`` −m|i − j|.

    Raises:
        ValueError: for an unknown form.
    """
    if form == "distance":
        return -m * (i - j)
    if form == "key":
        return m * j
    if form == "symmetric":
        return -m * sp.Abs(i - j)
    raise ValueError(f"form must be one of {BIAS_FORMS}, got form={form!r}")


def softmax(row: Sequence[sp.Expr]) -> list[sp.Expr]:
    """softmax(x)_j = exp(x_j) / Σ_k exp(x_k), entry by entry."""
    exps = [sp.exp(x) for x in row]
    total = sp.Add(*exps)
    return [e / total for e in exps]


def same_attention(form_a: BiasForm, form_b: BiasForm, size: int, *, causal: bool) -> bool:
    """Whether two bias forms give the same attention for *every* score matrix and slope.

    Builds a ``size × size`` matrix of free symbols s_ij, adds each bias with a symbolic slope
    m > 0, takes the softmax of every row over the keys it may see (j ≤ i when ``causal``,
    all j otherwise), and asks SymPy to prove each difference zero (False when it cannot).
    """
    m = sp.Symbol("m", positive=True)
    for i in range(size):
        keys = range(i + 1) if causal else range(size)
        scores = [sp.Symbol(f"s_{i}_{j}", real=True) for j in keys]
        row_a = softmax([s + bias(form_a, i, j, m) for s, j in zip(scores, keys)])
        row_b = softmax([s + bias(form_b, i, j, m) for s, j in zip(scores, keys)])
        # exp(s + c) = exp(s)·exp(c) lets SymPy cancel a constant shared by a row
        if not is_zero(sp.Matrix([sp.powsimp(sp.expand(a - b, power_exp=True)) for a, b in zip(row_a, row_b)])):
            return False
    return True


def row_shift(form_a: BiasForm, form_b: BiasForm, *, causal: bool) -> sp.Expr:
    """bias_a − bias_b for a general query i and key j (integers, j ≤ i when ``causal``),
    simplified: an expression free of j means the two forms differ by a constant per row."""
    i = sp.Symbol("i", integer=True, nonnegative=True)
    m = sp.Symbol("m", positive=True)
    if causal:  # j = i − d with d ≥ 0 keys back
        d = sp.Symbol("d", integer=True, nonnegative=True)
        return sp.simplify(bias(form_a, i, i - d, m) - bias(form_b, i, i - d, m)).subs(d, i - sp.Symbol("j", integer=True))
    j = sp.Symbol("j", integer=True, nonnegative=True)
    return sp.simplify(bias(form_a, i, j, m) - bias(form_b, i, j, m))
