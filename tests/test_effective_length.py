"""posenc_book.stored.effective_length: RULER's effective length, relative to the model's
own short-context score."""

from __future__ import annotations

import pytest

from posenc_book.stored import effective_length


def test_longest_length_before_the_first_failure() -> None:
    assert effective_length({1024: 0.8, 2048: 0.7, 4096: 0.68, 8192: 0.5}) == 4096  # bar 0.68
    assert effective_length({1024: 0.8, 2048: 0.6, 4096: 0.8}) == 1024  # a dip is not skipped
    assert effective_length({1024: 1.0, 2048: 1.0}) == 2048
    assert effective_length({8192: 0.4, 1024: 0.4}) == 8192  # keys in any order
    assert effective_length({1024: 0.5, 2048: 0.3}, fraction=0.5) == 2048


def test_no_short_context_score_gives_none() -> None:
    assert effective_length({1024: 0.0, 2048: 0.5}) is None


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match="at least one length"):
        effective_length({})
    with pytest.raises(ValueError, match="fraction"):
        effective_length({1: 0.5}, fraction=0)
    with pytest.raises(ValueError, match="accuracy values"):
        effective_length({1: 1.5})
