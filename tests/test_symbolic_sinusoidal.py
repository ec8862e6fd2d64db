"""posenc_lib.symbolic.sinusoidal: the shift matrix and the offset-only dot product, proved."""

import math

import pytest
import sympy as sp

from posenc_lib import sinusoidal_encoding
from posenc_lib.symbolic import is_zero, rotation_matrix
from posenc_lib.symbolic.sinusoidal import (
    offset_kernel,
    pair_score,
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


def test_pair_score_with_identity_is_the_dot_product() -> None:
    t, s = sp.symbols("t s", real=True)
    assert is_zero(pair_score(t, s, w, sp.eye(2)) - sp.cos((t - s) * w))


def test_pair_score_splits_into_even_odd_and_absolute_parts() -> None:
    # B = [[a, b], [c, d]]: (a+d)/2 cos(rω) + (b−c)/2 sin(rω)
    #                       + (d−a)/2 cos((t+s)ω)
    #                       + (b+c)/2 sin((t+s)ω), with r = t − s
    t, s, a, b, c, d = sp.symbols("t s a b c d", real=True)
    r, total = t - s, t + s
    expected = ((a + d) * sp.cos(r * w) + (b - c) * sp.sin(r * w)
                + (d - a) * sp.cos(total * w) + (b + c) * sp.sin(total * w)) / 2
    assert is_zero(pair_score(t, s, w, sp.Matrix([[a, b], [c, d]])) - expected)


def test_antisymmetric_block_flips_sign_with_the_offset() -> None:
    t, k = sp.symbols("t k", real=True)
    J = sp.Matrix([[0, 1], [-1, 0]])
    assert is_zero(pair_score(t, t - k, w, J) + pair_score(t, t + k, w, J))
    assert not is_zero(pair_score(t, t - k, w, J))


def test_pair_score_needs_a_2x2_block() -> None:
    with pytest.raises(ValueError, match="2 x 2"):
        pair_score(p, k, w, sp.eye(3))


def test_symmetric_form_system_gives_the_form_values() -> None:
    from posenc_lib.symbolic.sinusoidal import symmetric_form_system

    phis = sp.symbols("phi_1:4", real=True)
    a, b, c = sp.symbols("a b c", real=True)
    values = symmetric_form_system(phis) * sp.Matrix([a, b, c])
    for phi, value in zip(phis, values):
        u = sp.Matrix([sp.cos(phi), sp.sin(phi)])
        assert is_zero(value - (u.T * sp.Matrix([[a, b], [b, c]]) * u)[0, 0])
    # two parallel directions: the values cannot fix the form
    assert is_zero(symmetric_form_system([phis[0], phis[0] + sp.pi, phis[2]]).det())
    assert symmetric_form_system([0, sp.pi / 3, 2 * sp.pi / 3]).det() != 0
    with pytest.raises(ValueError, match="three angles"):
        symmetric_form_system(phis[:2])


def test_pair_score_parts_equal_the_score() -> None:
    from posenc_lib.symbolic.sinusoidal import pair_score_parts

    t, s = sp.symbols("t s", real=True)
    B = sp.Matrix(2, 2, sp.symbols("alpha beta gamma delta", real=True))
    assert is_zero(pair_score(t, s, w, B) - pair_score_parts(t, s, w, B))
    # the identity block leaves only the even part cos((t − s)ω)
    assert is_zero(pair_score_parts(t, s, w, sp.eye(2)) - sp.cos((t - s) * w))
    with pytest.raises(ValueError, match="2 x 2"):
        pair_score_parts(t, s, w, sp.eye(3))
