"""Stored results of larger runs (``results/NAME/*.json``), read the same way everywhere.

Sweeps too slow to run live in a notebook are run once with ``python -m posenc_lib.experiments``
and committed under ``results/NAME`` with their provenance. Chapters show them through
:func:`load_stored_results`, labelled as stored, never as if they had been computed live.

Where they are found: in a clone of the repository, ``results/`` next to the package; where
posenc_lib was installed from a wheel (Colab, ``pip install git+…``), the same files inside
the package, ``posenc_lib/results/`` (pyproject.toml ships ``results/`` as package data).
"""

from __future__ import annotations

from pathlib import Path

from posenc_lib.experiments import load_results

REPOSITORY_RESULTS = Path(__file__).resolve().parents[1] / "results"
"""``results/`` of the checkout that holds this package (present in a git clone)."""

PACKAGE_RESULTS = Path(__file__).resolve().parent / "results"
"""The same files as package data, where posenc_lib was installed from a wheel."""


def stored_results_dir(name: str) -> Path:
    """The folder of stored results called ``name`` (e.g. ``"book"``).

    A clone's ``results/NAME`` comes first; else the copy installed with the package.

    Raises:
        ValueError: for a name that is empty or contains a path separator.
        FileNotFoundError: if no such folder exists, with what to do about it.
    """
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"name must be a plain folder name such as 'book', got name={name!r}")
    places = (REPOSITORY_RESULTS / name, PACKAGE_RESULTS / name)
    for directory in places:
        if directory.is_dir():
            return directory
    raise FileNotFoundError(
        f"no stored results {name!r} at {places[0]} (a clone of the book's repository) or "
        f"{places[1]} (an installed wheel of posenc_lib, which carries results/ as package "
        f"data): install posenc_lib at the book's version, or produce them with "
        f"`python -m posenc_lib.experiments sweep --config {name} --out results/{name}`"
    )


def load_stored_results(name: str) -> list[dict]:
    """Every run result stored under ``results/NAME`` (one dict per JSON file, sorted by name).

    Raises:
        ValueError, FileNotFoundError: as :func:`stored_results_dir`.
    """
    return load_results(stored_results_dir(name))
