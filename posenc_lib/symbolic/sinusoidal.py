"""Exact, symbolic objects for the sinusoidal chapter (Vaswani et al. 2017, §3.5).

Each pair of the table is ``[sin(p ω_i), cos(p ω_i)]`` with ω_i = base^(−2i/d_model). The
functions here build those pairs, the matrix that shifts a pair by k positions, and the dot
product of two rows, as SymPy expressions; the chapter and the tests prove the identities with
:func:`posenc_lib.symbolic.is_zero`. Imports no torch.
"""

from __future__ import annotations

import sympy as sp

from posenc_lib.symbolic import rotation_matrix


def sinusoidal_frequency(i: int | sp.Expr, d_model: int | sp.Expr, base: int | sp.Expr = 10000) -> sp.Expr:
    """ω_i = base^(−2i/d_model), the angle per position of pair i (Vaswani et al. 2017, §3.5).

    Args:
        i: pair index, 0 ≤ i < d_model/2 (an integer or a symbol).
        d_model: model width (an integer or a symbol).
        base: the wavelength base; the wavelength of pair i is 2π/ω_i = 2π·base^(2i/d_model).

    Returns:
        An exact SymPy expression (a rational power when all arguments are integers).
    """
    return sp.sympify(base) ** (-2 * sp.sympify(i) / sp.sympify(d_model))


def sinusoidal_pair(position: sp.Expr, omega: sp.Expr) -> sp.Matrix:
    """One pair of the table as a column vector ``[sin(p ω), cos(p ω)]`` (columns 2i, 2i+1).

    Args:
        position: the position p (a symbol or a number).
        omega: the pair's frequency ω_i.

    Returns:
        ``Matrix 2 × 1``.
    """
    return sp.Matrix([sp.sin(position * omega), sp.cos(position * omega)])


def shift_matrix(offset: sp.Expr, omega: sp.Expr) -> sp.Matrix:
    """M_k, the 2 × 2 matrix with ``sinusoidal_pair(p + k, ω) = M_k · sinusoidal_pair(p, ω)``.

    By the angle-addition formulas, M_k = [[cos kω, sin kω], [−sin kω, cos kω]]: a rotation by
    −kω in the (sin, cos) plane. It contains k and ω but not p, which is the sense of
    Vaswani et al.'s remark (§3.5) that PE(p+k) is a linear function of PE(p).

    Args:
        offset: the offset k (a symbol or a number).
        omega: the pair's frequency ω_i.

    Returns:
        ``Matrix 2 × 2``.
    """
    return rotation_matrix(-offset * omega)


def row_dot_product(p: sp.Expr, q: sp.Expr, omegas: list[sp.Expr]) -> sp.Expr:
    """PE(p) · PE(q) = Σ_i [sin(p ω_i) sin(q ω_i) + cos(p ω_i) cos(q ω_i)], unsimplified.

    Args:
        p, q: two positions (symbols or numbers).
        omegas: the frequencies ω_0 … ω_{d_model/2 − 1}, one per pair.

    Returns:
        The sum as written, so that a proof has something to simplify.

    Raises:
        ValueError: if ``omegas`` is empty.
    """
    if not omegas:
        raise ValueError("omegas must hold at least one frequency, got an empty list")
    return sp.Add(*[(sinusoidal_pair(p, w).T * sinusoidal_pair(q, w))[0, 0] for w in omegas])


def offset_kernel(offset: sp.Expr, omegas: list[sp.Expr]) -> sp.Expr:
    """Σ_i cos(k ω_i): what :func:`row_dot_product` of PE(p) and PE(p + k) equals.

    Args:
        offset: the offset k.
        omegas: the frequencies, one per pair.

    Returns:
        The closed form, a function of k only.

    Raises:
        ValueError: if ``omegas`` is empty.
    """
    if not omegas:
        raise ValueError("omegas must hold at least one frequency, got an empty list")
    return sp.Add(*[sp.cos(offset * w) for w in omegas])


def pair_score(t: sp.Expr, s: sp.Expr, omega: sp.Expr, block: sp.Matrix) -> sp.Expr:
    """One pair's share of an attention score between positional vectors, unsimplified.

    A head scores query position t against key position s through the matrix W_Q W_Kᵀ
    (Vaswani et al. 2017, eq. 1, with the inputs' positional part alone). Restricted to the
    columns 2i, 2i+1 of one frequency, that matrix is a 2 × 2 ``block`` B, and the score is
    ``sinusoidal_pair(t, ω)ᵀ · B · sinusoidal_pair(s, ω)``. With B = I it is the dot product
    of :func:`row_dot_product`; a general B need not be symmetric in t − s.

    Args:
        t: the query position (a symbol or a number).
        s: the key position.
        omega: the pair's frequency ω_i.
        block: the 2 × 2 block of W_Q W_Kᵀ that this pair sees.

    Returns:
        The bilinear form as written, so that a proof has something to simplify.

    Raises:
        ValueError: if ``block`` is not 2 × 2.
    """
    if block.shape != (2, 2):
        raise ValueError(f"block must be a 2 x 2 matrix, got shape {block.shape}")
    return (sinusoidal_pair(t, omega).T * block * sinusoidal_pair(s, omega))[0, 0]


def symmetric_form_system(directions: list[sp.Expr] | tuple[sp.Expr, ...]) -> sp.Matrix:
    """The linear system that fixes a symmetric 2 × 2 form from its values at three directions.

    A symmetric form S = [[a, b], [b, c]] takes the value uᵀ S u = a cos²φ + 2b cos φ sin φ
    + c sin²φ at the unit vector u = (cos φ, sin φ). Row j of the result holds the
    coefficients of a, b, c in that value at direction φ_j, so the three values determine S
    exactly when the determinant is non-zero, i.e. (the chapter proves) when no two of the
    directions differ by a multiple of π.

    Args:
        directions: three angles φ_1, φ_2, φ_3 (symbols or numbers).

    Returns:
        ``Matrix 3 × 3``, columns in the order a, b, c.

    Raises:
        ValueError: if ``directions`` does not hold exactly three angles.
    """
    if len(directions) != 3:
        raise ValueError(f"directions must hold three angles, got {len(directions)}")
    a, b, c = sp.symbols("a b c", real=True)
    form = sp.Matrix([[a, b], [b, c]])
    rows = []
    for phi in directions:
        u = sp.Matrix([sp.cos(phi), sp.sin(phi)])
        value = (u.T * form * u)[0, 0]
        rows.append([sp.diff(value, x) for x in (a, b, c)])
    return sp.Matrix(rows)


def pair_score_parts(t: sp.Expr, s: sp.Expr, omega: sp.Expr, block: sp.Matrix) -> sp.Expr:
    """:func:`pair_score` written as its three parts: even and odd in t − s, and in t + s.

    For the block B = [[α, β], [γ, δ]] the product-to-sum formulas give

        (α + δ)/2 · cos((t − s)ω) + (β − γ)/2 · sin((t − s)ω)
        + (δ − α)/2 · cos((t + s)ω) + (β + γ)/2 · sin((t + s)ω):

    the symmetric part of B sees the offset through an even function, the antisymmetric
    part through an odd one (it tells a key before the query from one after it), and the
    rest depends on the absolute positions. The chapter proves it equal to
    :func:`pair_score`.

    Args:
        t: the query position.
        s: the key position.
        omega: the pair's frequency ω_i.
        block: the 2 × 2 block of W_Q W_Kᵀ.

    Returns:
        The sum of the four terms, as written above.

    Raises:
        ValueError: if ``block`` is not 2 × 2.
    """
    if block.shape != (2, 2):
        raise ValueError(f"block must be a 2 x 2 matrix, got shape {block.shape}")
    (alpha, beta), (gamma, delta) = block.tolist()
    r = t - s
    return ((alpha + delta) / 2 * sp.cos(r * omega) + (beta - gamma) / 2 * sp.sin(r * omega)
            + (delta - alpha) / 2 * sp.cos((t + s) * omega)
            + (beta + gamma) / 2 * sp.sin((t + s) * omega))
