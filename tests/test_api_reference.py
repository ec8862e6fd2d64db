"""The API reference (``book/api.md``), as the site shows it: every name of the flat
public API documented where it is defined, package by package, and nothing private.

The page is generated from the docstrings by sphinx-autoapi (``_config.yml``), which lists
only names that have a docstring: a new public name without one, or one the generator
misses, fails here. The site is built as in ``tests/test_site.py`` (``-W``: a docstring
whose markup Sphinx cannot read fails the build).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_site import ROOT, site  # noqa: F401  (the built site, a fixture)

API_PAGE = "book/api.html"


def public_api() -> list[str]:
    """``posenc_lib.__all__``, read from the source (no import)."""
    tree = ast.parse((ROOT / "posenc_lib" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError("posenc_lib/__init__.py assigns no __all__")


def modules_on_disk() -> set[str]:
    """Every module of posenc_lib and posenc_book whose name is public, dotted."""
    found = set()
    for package in ("posenc_lib", "posenc_book"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if not any(part.startswith("_") for part in parts):
                found.add(".".join(parts))
    return found


@pytest.fixture(scope="module")
def page(site: Path):  # noqa: F811  (the fixture imported above)
    from bs4 import BeautifulSoup

    path = site / API_PAGE
    assert path.exists(), f"{API_PAGE} was not built: is book/api in _toc.yml?"
    return BeautifulSoup(path.read_text(), "html.parser")


def documented(page) -> dict[str, object]:
    """Each object on the page (``<dt id="posenc_lib.x.name">``), by its dotted name."""
    return {dt["id"]: dt for dt in page.select("dl.py > dt[id]")}


def test_every_public_name_is_on_the_page_with_its_docstring(page) -> None:
    objects = documented(page)
    by_name: dict[str, list[str]] = {}
    for dotted in objects:
        by_name.setdefault(dotted.rsplit(".", 1)[-1], []).append(dotted)
    names = public_api()
    assert len(names) > 100, "posenc_lib.__all__ read wrongly"
    missing = [name for name in names if name not in by_name]
    assert not missing, (
        "public names (posenc_lib.__all__) not on the API reference, so without a "
        f"docstring (sphinx-autoapi lists documented names only): {missing}"
    )
    empty = []
    for name in names:
        for dotted in by_name[name]:
            body = objects[dotted].find_next_sibling("dd")
            if body is None or len(body.get_text(" ", strip=True).split()) < 3:
                empty.append(dotted)
    assert not empty, f"listed without a docstring to read: {empty}"


def test_the_page_is_organised_as_the_code_and_lists_nothing_private(page) -> None:
    sections = {
        tag["id"].removeprefix("module-")
        for tag in page.find_all(id=True)
        if tag["id"].startswith("module-")
    }
    missing = modules_on_disk() - sections
    assert not missing, f"modules without a section on the API reference: {sorted(missing)}"
    private = [
        dotted
        for dotted in documented(page)
        if any(part.startswith("_") and not part.endswith("__") for part in dotted.split("."))
    ]
    assert not private, f"private names on the API reference: {private}"


def test_a_function_shows_its_signature_and_its_sections(page) -> None:
    """apply_rope, as a reader meets every function: signature with its parameters, then
    the docstring's Args, Returns and Raises as Parameters, Returns and Raises."""
    entry = page.find("dt", id="posenc_lib.encodings.rope.apply_rope")
    assert entry is not None, "apply_rope is not where it is defined"
    signature = entry.get_text(" ", strip=True)
    assert "apply_rope" in signature and "positions" in signature
    body = entry.find_next_sibling("dd")
    fields = {dt.get_text(strip=True).rstrip(":").strip() for dt in body.select("dl.field-list > dt")}
    assert {"Parameters", "Returns", "Raises"} <= fields, fields
