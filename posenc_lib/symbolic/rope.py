"""RoPE in SymPy: the rotation matrix R_{Θ,p}, its elementwise and complex forms, exactly.

Everything follows Su et al. 2021 (RoFormer): the 2-D rotation of eq. 13, the block-diagonal
matrix R_{Θ,p} of eq. 15 (pairs (2i, 2i+1), the *interleaved* layout), the elementwise form of
eq. 34. The rotate-half layout (GPT-NeoX, Hugging Face Llama) is the same matrix with its rows
and columns permuted (:func:`half_permutation_matrix`). Imports no torch.

Notation as in the book (``book/notation.md``): query position t, key position s, frequency
pairs counted from 0 (θ_0 … θ_{d/2−1}). RoFormer writes the positions m, n and counts the
pairs from 1.
"""

from __future__ import annotations

import sympy as sp

from posenc_lib.symbolic import is_zero, rotation_matrix


def _check_dim(d: int) -> None:
    if d < 2 or d % 2 != 0:
        raise ValueError(f"d must be even and >= 2 (RoPE rotates pairs), got d={d}")


def theta_symbols(d: int) -> list[sp.Symbol]:
    """The d/2 frequencies θ_0 … θ_{d/2−1} as positive real symbols (0-based, as in the code).

    RoFormer (eq. 15) numbers the same frequencies θ_1 … θ_{d/2}.

    Raises:
        ValueError: if ``d`` is odd or < 2.

    Example:
        >>> theta_symbols(4)
        [theta_0, theta_1]
    """
    _check_dim(d)
    return list(sp.symbols(f"theta_0:{d // 2}", positive=True))


def theta_values(d: int, base: float = 10000) -> list[sp.Expr]:
    """The frequencies θ_i = base^(−2i/d), i = 0 … d/2 − 1, as exact SymPy numbers.

    The same values as :func:`posenc_lib.encodings.rope.rope_inverse_frequencies`, but exact
    (not rounded to float32), for building :func:`rope_matrix` at numeric frequencies.
    Su et al. 2021, eq. 15 (counted from 1 there).

    Raises:
        ValueError: if ``d`` is odd or < 2, or ``base`` ≤ 0.

    Example:
        >>> theta_values(4, base=100)
        [1, 1/10]
    """
    _check_dim(d)
    if base <= 0:
        raise ValueError(f"base must be > 0, got base={base}")
    exact_base = sp.nsimplify(base)
    return [exact_base ** sp.Rational(-2 * i, d) for i in range(d // 2)]


def rope_matrix(position: sp.Expr, thetas: list[sp.Expr]) -> sp.Matrix:
    """R_{Θ,p}: the ``d × d`` block-diagonal rotation, block i = R(p·θ_i) (RoFormer eq. 15).

    Args:
        position: p, a symbol or a number.
        thetas: θ_0 … θ_{d/2−1} (symbols or numbers); ``d = 2 · len(thetas)``.

    Returns:
        A ``d × d`` :class:`sympy.Matrix` acting on the interleaved layout (pairs (2i, 2i+1)).

    Example:
        >>> rope_matrix(sp.Symbol("t"), theta_symbols(4)).shape
        (4, 4)
    """
    if not thetas:
        raise ValueError("thetas must hold at least one frequency")
    return sp.diag(*[rotation_matrix(position * theta) for theta in thetas])


def swap_pair(x: sp.Matrix) -> sp.Matrix:
    """(x_1, x_2, x_3, x_4, …) → (−x_2, x_1, −x_4, x_3, …): the second vector of RoFormer eq. 34."""
    _check_dim(len(x))
    return sp.Matrix([(-x[i + 1] if i % 2 == 0 else x[i - 1]) for i in range(len(x))])


def elementwise_rope(x: sp.Matrix, position: sp.Expr, thetas: list[sp.Expr]) -> sp.Matrix:
    """R_{Θ,p} x without the matrix: x ⊙ cos(pθ) + swap_pair(x) ⊙ sin(pθ) (RoFormer eq. 34).

    Args:
        x: a column of length d = 2 · len(thetas).
        position, thetas: as in :func:`rope_matrix`.

    Returns:
        A ``d × 1`` :class:`sympy.Matrix`.

    Raises:
        ValueError: if ``len(x) != 2 · len(thetas)``.
    """
    if len(x) != 2 * len(thetas):
        raise ValueError(f"x has length {len(x)} but thetas give d={2 * len(thetas)}")
    cos = sp.Matrix([sp.cos(position * thetas[i // 2]) for i in range(len(x))])
    sin = sp.Matrix([sp.sin(position * thetas[i // 2]) for i in range(len(x))])
    return x.multiply_elementwise(cos) + swap_pair(x).multiply_elementwise(sin)


def half_permutation_matrix(d: int) -> sp.Matrix:
    """P with (P x)_j = x_{perm[j]}, perm = (0, 2, 4, …, 1, 3, 5, …): interleaved → rotate-half.

    The rotate-half rotation is then P R_{Θ,p} Pᵀ.
    """
    _check_dim(d)
    perm = list(range(0, d, 2)) + list(range(1, d, 2))
    return sp.Matrix(d, d, lambda row, col: 1 if perm[row] == col else 0)


def complex_score_2d(
    q: sp.Matrix, k: sp.Matrix, t: sp.Expr, s: sp.Expr, theta: sp.Expr
) -> sp.Expr:
    """Re[(q e^{itθ}) · conj(k e^{isθ})] with the pairs read as complex numbers q_1 + i q_2.

    RoFormer eq. 12–13 (positions m, n there): the 2-D rotation is multiplication by e^{ipθ}.

    Args:
        q, k: 2 × 1 real columns (query and key).
        t, s: query and key positions (symbols or numbers).
        theta: the frequency.

    Returns:
        The real part, expanded into sines and cosines.
    """
    qc, kc = q[0] + sp.I * q[1], k[0] + sp.I * k[1]
    product = qc * sp.exp(sp.I * t * theta) * sp.conjugate(kc * sp.exp(sp.I * s * theta))
    return sp.re(sp.expand_complex(sp.expand(product)))


def depends_only_on_difference(expr: sp.Expr, t: sp.Symbol, s: sp.Symbol) -> bool:
    """True when SymPy proves that ``expr(t, s)`` is a function of t − s alone.

    Substitutes s = t − r for a fresh symbol r and checks that the derivative in t vanishes
    identically: then moving both positions by the same amount leaves ``expr`` unchanged,
    which is RoFormer's requirement ⟨f(q, t), f(k, s)⟩ = g(q, k, t − s) (§3.1, eq. 11).
    Returns False, never raises, when SymPy cannot decide (see
    :func:`~posenc_lib.symbolic.is_zero`).

    Args:
        expr: a SymPy expression in ``t``, ``s`` and anything else.
        t, s: the two position symbols.

    Example:
        >>> t, s = sp.symbols("t s", real=True)
        >>> depends_only_on_difference(sp.cos(t - s), t, s)
        True
        >>> depends_only_on_difference(t * s, t, s)
        False
    """
    r = sp.Dummy("r", real=True)
    return is_zero(sp.diff(expr.subs(s, t - r), t))


def block_product_lemma(num_blocks: int) -> tuple[sp.MatrixExpr, sp.MatrixExpr]:
    """(diag(A_i))ᵀ diag(B_i) and diag(A_iᵀ B_i) for generic 2 × 2 matrix symbols A_i, B_i.

    With :func:`sympy.block_collapse` the first becomes the second: the product of
    block-diagonal matrices is taken block by block, whatever the blocks are. That is the step
    from the 2-D identity to any d.
    """
    if num_blocks < 1:
        raise ValueError(f"num_blocks must be >= 1, got num_blocks={num_blocks}")
    a = [sp.MatrixSymbol(f"A_{i}", 2, 2) for i in range(1, num_blocks + 1)]
    b = [sp.MatrixSymbol(f"B_{i}", 2, 2) for i in range(1, num_blocks + 1)]
    lhs = sp.BlockDiagMatrix(*a).T * sp.BlockDiagMatrix(*b)
    rhs = sp.BlockDiagMatrix(*[ai.T * bi for ai, bi in zip(a, b)])
    return lhs, rhs
