"""symbolic.alibi: exact slopes; which bias forms give the same attention (SymPy)."""

import pytest
import sympy as sp
import torch

from posenc_lib import alibi_slopes
from posenc_lib.symbolic.alibi import (
    bias,
    exact_slopes,
    plain_slopes,
    row_shift,
    same_attention,
)


@pytest.mark.parametrize("n", range(1, 33))
def test_exact_slopes_match_the_library(n: int) -> None:
    exact = torch.tensor([float(s) for s in exact_slopes(n)], dtype=torch.float64)
    assert torch.allclose(alibi_slopes(n).double(), exact, rtol=1e-7, atol=0)


def test_plain_sequence_agrees_only_for_powers_of_two() -> None:
    differ = [n for n in range(1, 17) if exact_slopes(n) != plain_slopes(n)]
    assert differ == [3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15]


def test_equivalences() -> None:
    assert same_attention("distance", "key", 4, causal=True)
    assert same_attention("symmetric", "distance", 4, causal=True)
    assert not same_attention("symmetric", "key", 3, causal=False)
    t = sp.Symbol("t", integer=True, nonnegative=True)
    s = sp.Symbol("s", integer=True, nonnegative=True)
    m = sp.Symbol("m", positive=True)
    # causal: a constant per row (no key position s); encoder: depends on s
    assert row_shift("distance", "key", causal=True) == -m * t
    assert row_shift("symmetric", "key", causal=True) == -m * t
    assert s in row_shift("symmetric", "key", causal=False).free_symbols


def test_bias_forms_in_the_books_notation() -> None:
    t, s, m = sp.symbols("t s m")
    assert bias("distance", t, s, m) == -m * (t - s)
    assert bias("key", t, s, m) == m * s
    assert bias("symmetric", 5, 7, m) == -2 * m


def test_errors() -> None:
    with pytest.raises(ValueError, match="num_heads"):
        exact_slopes(0)
    with pytest.raises(ValueError, match="form"):
        bias("cubic", 1, 0, 1)  # type: ignore[arg-type]


def test_slope_exponents_and_the_ladder() -> None:
    import sympy as sp

    from posenc_lib.symbolic.alibi import exact_slopes, ladder_heads, off_ladder, plain_slopes, slope_exponents

    assert slope_exponents(exact_slopes(4)) == [-2, -4, -6, -8]
    assert slope_exponents(plain_slopes(6))[0] == sp.Rational(-4, 3)
    assert [ladder_heads(h) for h in (1, 2, 3, 6, 8, 12)] == [2, 4, 4, 8, 16, 16]
    assert off_ladder(exact_slopes(6), 6) == 0 < off_ladder(plain_slopes(6), 6)
    with pytest.raises(ValueError, match="positive"):
        slope_exponents([sp.Integer(0)])
    with pytest.raises(ValueError, match="num_heads"):
        ladder_heads(0)
