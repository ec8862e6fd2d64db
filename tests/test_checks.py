"""posenc_book.checks: a stored output shows the checked bound, never the noise under it."""

import math

import pytest
import torch

from posenc_book.checks import assert_above, assert_below, format_bound


@pytest.mark.parametrize(
    ("bound", "text"),
    [(1e-6, "1e-6"), (1e-5, "1e-5"), (5e-4, "5e-4"), (1e-3, "1e-3"), (0.01, "0.01"),
     (0.05, "0.05"), (0.5, "0.5"), (2, "2"), (1000.0, "1000")],
)
def test_format_bound_writes_bounds_as_readers_do(bound, text):
    assert format_bound(bound) == text


@pytest.mark.parametrize("noise", [5.7e-8, 1.9e-6, 4.2e-7, 0.0])
def test_below_hides_the_digits_of_the_noise(noise):
    assert assert_below(noise, 1e-5) == "< 1e-5"


def test_two_machines_noise_prints_the_same():
    # The five values of issue 23, as stored on one CPU and as computed on another.
    for stored, elsewhere, bound in [(3.3e-6, 1.9e-6, 1e-4), (7e-8, 2e-7, 1e-6),
                                     (7e-7, 6e-7, 1e-5), (5.4e-7, 4.2e-7, 1e-5)]:
        assert assert_below(stored, bound) == assert_below(elsewhere, bound)


def test_below_accepts_a_zero_dim_tensor():
    assert assert_below(torch.tensor(3e-8), 1e-6) == "< 1e-6"


def test_below_fails_when_the_value_is_not_below():
    with pytest.raises(AssertionError, match=r"padding gap = 0\.002 is not below 1e-4"):
        assert_below(0.002, 1e-4, what="padding gap")
    with pytest.raises(AssertionError):
        assert_below(1e-4, 1e-4)  # equal is not below
    with pytest.raises(AssertionError):
        assert_below(math.nan, 1e-4)


def test_above_checks_a_real_difference():
    assert assert_above(0.389, 1e-3) == "> 1e-3"
    assert assert_above(1.2, 0.1) == "> 0.1"
    with pytest.raises(AssertionError, match="is not above 0.1"):
        assert_above(0.05, 0.1)
    with pytest.raises(AssertionError):
        assert_above(math.nan, 0.1)


@pytest.mark.parametrize("bound", [0, -1e-6, math.inf, math.nan])
def test_a_bound_must_be_positive_and_finite(bound):
    with pytest.raises(ValueError, match="bound must be a positive finite number"):
        assert_below(0.0, bound)
    with pytest.raises(ValueError, match="bound must be a positive finite number"):
        assert_above(1.0, bound)


def test_a_bound_must_be_a_number():
    with pytest.raises(TypeError, match="bound must be a positive finite number"):
        format_bound("1e-6")
    with pytest.raises(TypeError, match="bound must be a positive finite number"):
        format_bound(True)


def test_decade_bounds_name_the_power_of_ten_interval():
    from posenc_book.checks import decade_bounds

    assert decade_bounds(0.0035) == "> 1e-3, < 0.01"
    assert decade_bounds(2.5) == "> 1, < 10"
    assert decade_bounds(math.inf) == decade_bounds(math.nan) == "not finite"
    with pytest.raises(ValueError, match="value must be positive"):
        decade_bounds(0.0)
