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


def test_typeset_breaks_long_sums_and_shrinks_large_matrices() -> None:
    from posenc_lib.symbolic import typeset

    xs = sp.symbols("x_0:12", real=True)
    long_sum = sum(sp.cos(x) * sp.sin(x) for x in xs) - sp.Symbol("z")
    text = typeset(long_sum)
    assert text.startswith(r"\begin{aligned}&") and text.count(r"\\") == len(long_sum.args) - 1
    lines = text.removeprefix(r"\begin{aligned}&").removesuffix(r"\end{aligned}").split(r" \\ &")
    assert lines[0] == "- z" and all(line.startswith("+ ") for line in lines[1:])
    assert typeset(sp.eye(3)) == r"{\small " + sp.latex(sp.eye(3)) + "}"
    assert typeset(sp.eye(2)) == sp.latex(sp.eye(2))


def test_proved_displays_only_what_sympy_proves() -> None:
    from posenc_lib.symbolic import proved

    a, b = sp.symbols("a b", real=True)
    shown = proved(rotation_matrix(a).T * rotation_matrix(b), rotation_matrix(b - a), name="R")
    assert shown.data.startswith("R = ") and sp.latex(rotation_matrix(b - a)) in shown.data
    assert proved(sp.sin(a) ** 2 + sp.cos(a) ** 2, sp.Integer(1)).data.endswith("= 1")
    import pytest

    with pytest.raises(AssertionError, match="does not prove"):
        proved(sp.sin(a), sp.cos(a))


def test_reflection_matrix_is_an_orthogonal_involution_with_determinant_minus_one() -> None:
    from posenc_lib.symbolic import reflection_matrix

    a = sp.Symbol("a", real=True)
    R = reflection_matrix(a)
    assert is_zero(R.T * R - sp.eye(2))
    assert is_zero(R * R - sp.eye(2))
    assert sp.simplify(R.det()) == -1
    # it fixes the direction at half its angle
    assert is_zero(R * sp.Matrix([sp.cos(a / 2), sp.sin(a / 2)]) - sp.Matrix([sp.cos(a / 2), sp.sin(a / 2)]))
