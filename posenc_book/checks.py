"""Show an agreement at the tolerance it is checked to, never the rounding noise under it.

Two float32 computations of the same quantity usually differ by a few units in the last place,
and *which* few units depends on the CPU's vector kernels (AVX-512, AVX2, plain C), the GPU,
the thread count and the summation order. A stored output that prints such a difference
(``5.7e-08``) cannot be reproduced anywhere else, so a reader's nbval run fails on a digit that
carries no information. The book prints the verdict instead: the bound the value was checked
against (``< 1e-6``), after checking it.

    >>> assert_below(5.7e-08, 1e-6)
    '< 1e-6'
    >>> assert_above(0.389, 1e-3)
    '> 1e-3'
"""

from __future__ import annotations

import math


def _check_bound(bound: float) -> None:
    if not isinstance(bound, (int, float)) or isinstance(bound, bool):
        raise TypeError(f"bound must be a positive finite number, got {type(bound).__name__}")
    if not math.isfinite(bound) or bound <= 0:
        raise ValueError(f"bound must be a positive finite number, got {bound!r}")


def format_bound(bound: float) -> str:
    """A bound as readers write it: ``1e-6``, ``5e-4``, ``0.05``, ``2``.

    Numbers below 0.01 use a one-digit mantissa and a plain exponent (``1e-6``, not ``1e-06``);
    larger ones print with :func:`format`'s ``g`` (``0.05``, ``2``, ``1000``). Raises
    ``ValueError`` for a bound that is not positive and finite.
    """
    _check_bound(bound)
    if bound < 0.01:
        mantissa, exponent = f"{bound:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{bound:g}"


def assert_below(value: float, bound: float, *, what: str = "value") -> str:
    """Check ``value < bound`` and return ``"< bound"``, the text a stored output shows.

    Args:
        value: the measured quantity, e.g. a largest absolute difference (any real number; a
            0-dim tensor is accepted through ``float``).
        bound: the tolerance, positive and finite, e.g. ``1e-6`` for float32 agreement.
        what: a name for the quantity, used in the error message.

    Returns:
        ``"< " + format_bound(bound)``.

    Raises:
        AssertionError: if ``value`` is not below ``bound`` (or is NaN): the check failed, and
            the message gives the value.
        ValueError: if ``bound`` is not positive and finite.
    """
    _check_bound(bound)
    value = float(value)
    if not value < bound:
        raise AssertionError(f"{what} = {value:.3g} is not below {format_bound(bound)}")
    return f"< {format_bound(bound)}"


def assert_above(value: float, bound: float, *, what: str = "value") -> str:
    """Check ``value > bound`` and return ``"> bound"``: a difference that must be real.

    The counterpart of :func:`below`, for a check that two things *differ* by more than
    rounding (e.g. the padding error of positions taken from the columns). Raises
    ``AssertionError`` if ``value`` is not above ``bound`` (or is NaN), ``ValueError`` for a
    bound that is not positive and finite.
    """
    _check_bound(bound)
    value = float(value)
    if not value > bound:
        raise AssertionError(f"{what} = {value:.3g} is not above {format_bound(bound)}")
    return f"> {format_bound(bound)}"


def decade_bounds(value: float) -> str:
    """The power-of-ten interval a positive error lies in, each side checked: ``"> 1e-3,
    < 0.01"``; ``"not finite"`` for an infinite or NaN value.

    An error that only needs its order of magnitude (and whose digits differ between CPU
    kernels) is shown this way: :func:`assert_above` of a tenth of the next power of ten up,
    :func:`assert_below` of that power.

    Raises:
        ValueError: for a value that is zero or negative (it lies in no decade).
    """
    value = float(value)
    if not math.isfinite(value):
        return "not finite"
    if value <= 0:
        raise ValueError(f"value must be positive to lie in a decade, got {value!r}")
    upper = 10.0 ** math.ceil(math.log10(value))
    return assert_above(value, upper / 10) + ", " + assert_below(value, upper)
