"""posenc_lib.symbolic.sinusoidal: the shift matrix and the offset-only dot product, proved."""

import math

import pytest
import sympy as sp

from posenc_lib import sinusoidal_encoding
from posenc_lib.symbolic import is_zero, rotation_matrix
from posenc_lib.symbolic.sinusoidal import (
    offset_kernel,
    row_dot_product,
    shift_matrix,
    sinusoidal_frequency,
    sinusoidal_pair,
)

p, k, w = sp.symbols("p k omega", real=True)


def test_shift_matrix_moves_a_pair_by_k() -> None:
    assert is_zero(sinusoidal_pair(p + k, w) - shift_matrix(k, w) * sinusoidal_pair(p, w))
    assert p not in shift_matrix(k, w).free_symbols


def test_shift_matrix_is_not_the_counter_clockwise_rotation() -> None:
    # guards the sign: in (sin, cos) order the shift turns clockwise
    assert not is_zero(sinusoidal_pair(p + k, w) - rotation_matrix(k * w) * sinusoidal_pair(p, w))


def test_dot_product_depends_on_offset_only() -> None:
    omegas = list(sp.symbols("omega0:3", positive=True))
    dot = row_dot_product(p, p + k, omegas)
    assert is_zero(dot - offset_kernel(k, omegas))
    assert is_zero(offset_kernel(k, omegas) - offset_kernel(-k, omegas))


def test_frequency_and_pairs_match_the_library_table() -> None:
    d_model, base = 8, 100
    table = sinusoidal_encoding(5, d_model, float(base)).double()
    for i in range(d_model // 2):
        omega = sinusoidal_frequency(i, d_model, base)
        for pos in (0, 3, 4):
            pair = [float(v) for v in sinusoidal_pair(pos, omega)]
            assert table[pos, 2 * i : 2 * i + 2].tolist() == pytest.approx(pair, abs=1e-6)
    assert float(sinusoidal_frequency(1, 4, 10000)) == pytest.approx(1 / 100)


def test_numeric_dot_product_matches_kernel() -> None:
    table = sinusoidal_encoding(40, 16).double()
    omegas = [sinusoidal_frequency(i, 16) for i in range(8)]
    for pos, off in ((3, 5), (30, 7), (10, 0)):
        assert float(table[pos] @ table[pos + off]) == pytest.approx(float(offset_kernel(off, omegas)), abs=1e-5)
    assert math.isclose(float(offset_kernel(0, omegas)), 8.0)


def test_empty_frequencies_raise() -> None:
    with pytest.raises(ValueError, match="omegas"):
        row_dot_product(p, k, [])
    with pytest.raises(ValueError, match="omegas"):
        offset_kernel(k, [])
