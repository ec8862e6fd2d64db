"""posenc_lib.stored: stored sweep results are found, and a missing folder fails in words."""

import shutil

import pytest

import posenc_lib.stored as stored
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


def test_an_installed_wheel_finds_its_package_data(tmp_path, monkeypatch) -> None:
    """Without a clone's results/, the copy inside the package (a wheel) is read."""
    package_results = tmp_path / "posenc_lib" / "results"
    shutil.copytree(stored.REPOSITORY_RESULTS / "book", package_results / "book")
    monkeypatch.setattr(stored, "REPOSITORY_RESULTS", tmp_path / "no-clone" / "results")
    monkeypatch.setattr(stored, "PACKAGE_RESULTS", package_results)
    assert stored_results_dir("book") == package_results / "book"
    assert len(load_stored_results("book")) == 18
    with pytest.raises(FileNotFoundError, match="installed wheel"):
        stored_results_dir("gpu")
