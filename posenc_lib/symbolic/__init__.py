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
