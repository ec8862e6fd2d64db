"""The shared SymPy helpers: a rotation composes by adding angles; is_zero cannot be fooled."""

import sympy as sp

from posenc_lib.symbolic import is_zero, rotation_matrix


def test_rotations_compose() -> None:
    a, b = sp.symbols("a b", real=True)
    assert is_zero(rotation_matrix(a) * rotation_matrix(b) - rotation_matrix(a + b))
    assert is_zero(rotation_matrix(a).T - rotation_matrix(-a))


def test_is_zero_rejects_nonzero() -> None:
    a = sp.symbols("a", real=True)
    assert not is_zero(sp.sin(a) - sp.cos(a))
    assert not is_zero(rotation_matrix(a) - rotation_matrix(2 * a))
