"""Guards that nbval alone does not give.

nbval passes a notebook whose code cells were never executed (nothing stored, nothing compared),
so these tests fail when: a code cell has no stored execution or the cells were not run top to
bottom in one go; notebooks and _toc.yml disagree; an output carries something that changes
from run to run (memory addresses, tqdm rates, timings) without an nbval marker; or a notebook
installs posenc_lib from another address than the one in _config.yml. They also check that
.ci/run runs the README's test command.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MARKERS = ("# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP", "# NBVAL_RAISES_EXCEPTION")
NOISY = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "a memory address"),
    (re.compile(r"\d+(\.\d+)?\s*(it/s|s/it)"), "a tqdm rate"),
    (re.compile(r"\[\d\d:\d\d<"), "a tqdm timer"),
    (re.compile(r"\b\d+(\.\d+)?\s*(ms|µs|us|seconds|sec)\b"), "a timing"),
]


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


TAGS = ("nbval-ignore-output", "nbval-skip", "raises-exception")


def has_marker(cell: dict) -> bool:
    if any(tag in TAGS for tag in cell.get("metadata", {}).get("tags", [])):
        return True
    lines = [line.strip() for line in "".join(cell["source"]).splitlines()]
    return any(line in MARKERS for line in lines)


def output_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/"):
                parts.append("".join(value))
        parts.append("".join(out.get("traceback", [])))
    return "\n".join(parts)


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_code_cell_executed_in_order(path: Path) -> None:
    cells = code_cells(load(path))
    counts = [c.get("execution_count") for c in cells]
    assert None not in counts, f"{path.name}: code cell {counts.index(None)} has no stored execution"
    assert counts == list(range(1, len(counts) + 1)), f"{path.name}: run it top to bottom in a fresh kernel (counts {counts})"
    assert any(c.get("outputs") for c in cells), f"{path.name}: no outputs at all"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_unmarked_nondeterministic_output(path: Path) -> None:
    for i, cell in enumerate(code_cells(load(path))):
        if has_marker(cell):
            continue
        text = output_text(cell)
        for pattern, what in NOISY:
            match = pattern.search(text)
            assert match is None, f"{path.name}, code cell {i}: output shows {what} ({match.group(0)!r}) without an nbval marker"


def toc_files(node) -> list[str]:
    found = []
    if isinstance(node, dict):
        if "file" in node:
            found.append(node["file"])
        if "root" in node:
            found.append(node["root"])
        for value in node.values():
            found += toc_files(value)
    elif isinstance(node, list):
        for item in node:
            found += toc_files(item)
    return found


def test_toc_and_notebooks_agree() -> None:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = toc_files(toc)
    listed_notebooks = {f for f in listed if f.startswith("notebooks/")}
    on_disk = {f"notebooks/{p.stem}" for p in NOTEBOOKS}
    assert listed_notebooks == on_disk, f"only in _toc.yml: {listed_notebooks - on_disk}; only on disk: {on_disk - listed_notebooks}"
    for entry in listed:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".md", ".ipynb")), f"_toc.yml lists missing {entry}"


def test_notebook_names_are_in_reading_order() -> None:
    for path in NOTEBOOKS:
        assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), f"{path.name}: name notebooks NN_topic.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_install_cell_uses_the_configured_repository(path: Path) -> None:
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    first = "".join(code_cells(load(path))[0]["source"])
    assert "import posenc_lib" in first and f"git+{url}" in first, f"{path.name}: the first code cell must install posenc_lib from {url}"


def test_ci_runs_the_readme_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "<!-- test command -->" in script and 'bash -c "$test_command"' in script
    extracted = subprocess.run(
        ["awk", "/<!-- test command -->/{found=1; next} found && /^```/ && !open {open=1; next} open {print; exit}", "README.md"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert "pytest" in extracted and "jupyter-book build . -W" in extracted
