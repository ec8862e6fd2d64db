"""posenc_lib.stored: stored sweep results are found, and a missing folder fails in words."""

import pytest

from posenc_lib.stored import load_stored_results, stored_results_dir


def test_book_results_are_stored_with_provenance() -> None:
    results = load_stored_results("book")
    assert len(results) == 18
    assert all("provenance" in r and "evaluations" in r for r in results)


def test_missing_results_say_what_to_do() -> None:
    with pytest.raises(FileNotFoundError, match="experiments sweep --config nonexistent"):
        stored_results_dir("nonexistent")


@pytest.mark.parametrize("name", ["", "../book", ".hidden"])
def test_bad_names(name: str) -> None:
    with pytest.raises(ValueError, match="plain folder name"):
        stored_results_dir(name)
