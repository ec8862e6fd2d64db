"""SymPy helpers for the book's proofs. Imports no torch: these are exact, symbolic objects.

One submodule per chapter (``symbolic.sinusoidal``, ``symbolic.rope``, ``symbolic.alibi``); the
shared pieces live here.
"""

from __future__ import annotations

import sympy as sp


def rotation_matrix(angle: sp.Expr) -> sp.Matrix:
    """The 2 × 2 counter-clockwise rotation by ``angle``: [[cos a, −sin a], [sin a, cos a]]."""
    return sp.Matrix([[sp.cos(angle), -sp.sin(angle)], [sp.sin(angle), sp.cos(angle)]])


def is_zero(expr: sp.Expr | sp.Matrix) -> bool:
    """True when SymPy proves ``expr`` (or every entry of a matrix) identically zero.

    Uses ``simplify`` and, for trigonometric sums, ``expand_trig``; returns False (never raises)
    when it cannot decide, so an assertion on it fails rather than passes by accident.
    """
    entries = list(expr) if isinstance(expr, sp.MatrixBase) else [expr]
    for entry in entries:
        if sp.simplify(entry) == 0:
            continue
        if sp.simplify(sp.expand_trig(sp.expand(entry))) == 0:
            continue
        return False
    return True


def typeset(expr: sp.Expr | sp.Matrix) -> str:
    """LaTeX for ``expr`` that fits a page: a long sum one term per line, a large matrix smaller.

    Args:
        expr: a SymPy expression or matrix.

    Returns:
        The LaTeX string: a sum whose LaTeX is longer than 120 characters becomes an
        ``aligned`` block with one term per line (each line after the first starting with
        its sign); a matrix of more than 2 rows is wrapped in ``{\\small …}``; anything else
        is ``sympy.latex(expr)``.

    Example:
        >>> typeset(sp.Symbol("x") ** 2)
        'x^{2}'
    """
    if isinstance(expr, sp.Add) and len(sp.latex(expr)) > 120:
        terms = [sp.latex(term) for term in expr.args]
        lines = [terms[0]] + [x if x.startswith("-") else "+ " + x for x in terms[1:]]
        return r"\begin{aligned}&" + r" \\ &".join(lines) + r"\end{aligned}"
    if isinstance(expr, sp.MatrixBase) and expr.rows > 2:
        return r"{\small " + sp.latex(expr) + "}"
    return sp.latex(expr)


def proved(lhs: sp.Expr | sp.Matrix, rhs: sp.Expr | sp.Matrix, name: str | None = None):
    """Check that SymPy proves ``lhs = rhs`` (:func:`is_zero` of the difference) and
    typeset the identity for a notebook.

    Args:
        lhs, rhs: SymPy expressions, or matrices of one shape.
        name: LaTeX for the left side (e.g. ``r"R(t\\theta)^\\top R(s\\theta)"``); None
            typesets ``lhs`` itself with :func:`typeset`.

    Returns:
        ``IPython.display.Math`` of ``"{name} = {typeset(rhs)}"``.

    Raises:
        AssertionError: if SymPy cannot prove the difference zero (an unproved identity is
            never displayed).
    """
    from IPython.display import Math  # late: only notebooks display

    if isinstance(lhs, sp.MatrixBase) or isinstance(rhs, sp.MatrixBase):
        difference = sp.Matrix(lhs) - sp.Matrix(rhs)
    else:
        difference = lhs - rhs
    if not is_zero(difference):
        raise AssertionError(f"SymPy does not prove {name or sp.sstr(lhs)} = {sp.sstr(rhs)}")
    return Math(f"{name or typeset(lhs)} = {typeset(rhs)}")


def reflection_matrix(angle: sp.Expr) -> sp.Matrix:
    """The 2 × 2 reflection [[cos a, sin a], [sin a, −cos a]]: orthogonal, determinant −1.

    It mirrors the plane in the line at angle ``a``/2; applied twice it is the identity, so the
    orbit of a point under it has at most two points (the sinusoidal chapter's converse proof:
    a map with period 2 cannot make a position code).

    Args:
        angle: the angle a (a symbol or a number).

    Returns:
        ``Matrix 2 × 2``.
    """
    return sp.Matrix([[sp.cos(angle), sp.sin(angle)], [sp.sin(angle), -sp.cos(angle)]])
