"""posenc_lib.symbolic.rope: the RoPE identities hold exactly, and the helpers match the library."""

import pytest
import sympy as sp
import torch

from posenc_lib import apply_rope
from posenc_lib.symbolic import is_zero, rotation_matrix
from posenc_lib.symbolic.rope import (
    block_product_lemma,
    complex_score_2d,
    depends_only_on_difference,
    elementwise_rope,
    half_permutation_matrix,
    rope_matrix,
    swap_pair,
    theta_symbols,
    theta_values,
)
from posenc_lib.encodings.rope import rope_inverse_frequencies

M, N = sp.symbols("m n", integer=True)


def test_theta_symbols_count_from_zero() -> None:
    # book/notation.md: pairs i = 0 … d/2 − 1 (RoFormer counts from 1)
    assert [str(theta) for theta in theta_symbols(6)] == ["theta_0", "theta_1", "theta_2"]


def test_depends_only_on_difference() -> None:
    t, s = sp.symbols("t s", real=True)
    theta = sp.Symbol("theta", positive=True)
    q, k = sp.Matrix(sp.symbols("q1:3", real=True)), sp.Matrix(sp.symbols("k1:3", real=True))
    assert depends_only_on_difference(complex_score_2d(q, k, t, s, theta), t, s)
    assert depends_only_on_difference(sp.exp(-(t - s) ** 2), t, s)
    # an absolute term, or a norm that grows with position, breaks it
    assert not depends_only_on_difference(sp.cos(t * theta) * sp.cos(s * theta), t, s)
    assert not depends_only_on_difference(2**t * 2**s * sp.cos((t - s) * theta), t, s)


@pytest.mark.parametrize("d", [2, 4, 6])
def test_relative_identity(d: int) -> None:
    thetas = theta_symbols(d)
    assert is_zero(rope_matrix(M, thetas).T * rope_matrix(N, thetas) - rope_matrix(N - M, thetas))
    # the other sign is the transpose, not the same matrix
    assert not is_zero(rope_matrix(M, thetas).T * rope_matrix(N, thetas) - rope_matrix(M - N, thetas))


def test_elementwise_form_equals_matrix() -> None:
    thetas = theta_symbols(4)
    x = sp.Matrix(sp.symbols("x1:5", real=True))
    assert is_zero(elementwise_rope(x, M, thetas) - rope_matrix(M, thetas) * x)
    assert swap_pair(sp.Matrix([1, 2, 3, 4])) == sp.Matrix([-2, 1, -4, 3])


def test_complex_form_equals_rotation() -> None:
    q, k = sp.Matrix(sp.symbols("q1:3", real=True)), sp.Matrix(sp.symbols("k1:3", real=True))
    theta = sp.Symbol("theta", positive=True)
    real_form = ((rotation_matrix(M * theta) * q).T * (rotation_matrix(N * theta) * k))[0]
    assert is_zero(complex_score_2d(q, k, M, N, theta) - real_form)


def test_block_lemma() -> None:
    lhs, rhs = block_product_lemma(3)
    assert sp.block_collapse(lhs) == rhs


@pytest.mark.parametrize("interleaved", [True, False])
def test_matrix_matches_library(interleaved: bool) -> None:
    # the symbolic matrix, evaluated at the library's frequencies, is what apply_rope computes
    d, position, base = 6, 7, 10000.0
    thetas = theta_values(d, base)
    rotation = rope_matrix(position, thetas)
    if not interleaved:
        permutation = half_permutation_matrix(d)
        rotation = permutation * rotation * permutation.T
    matrix = torch.tensor(sp.matrix2numpy(rotation.evalf(), dtype=float))
    x = torch.randn(1, d, dtype=torch.float64)
    out = apply_rope(x, torch.tensor([position]), base=base, interleaved=interleaved, angle_dtype=torch.float64)
    assert torch.allclose(out[0], matrix @ x[0], atol=1e-12)


@pytest.mark.parametrize("base", [10000, 500000.0, 2.5])
def test_theta_values_match_the_library(base: float) -> None:
    exact = torch.tensor([float(theta) for theta in theta_values(16, base)], dtype=torch.float64)
    assert torch.allclose(rope_inverse_frequencies(16, base).double(), exact, rtol=1e-7)


def test_errors() -> None:
    with pytest.raises(ValueError, match="base must be > 0"):
        theta_values(4, 0)
    with pytest.raises(ValueError, match="d must be even"):
        theta_symbols(3)
    with pytest.raises(ValueError, match="length"):
        elementwise_rope(sp.Matrix([1, 2]), M, theta_symbols(4))
