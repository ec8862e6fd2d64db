"""tools/: the notebook executor's marker conversion (no kernel is started here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("execute_notebook",
                                              ROOT / "tools" / "execute_notebook.py")
execute_notebook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(execute_notebook)


def test_nbval_comments_become_cell_tags() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\nprint(1)"),
        nbformat.v4.new_code_cell("  # NBVAL_RAISES_EXCEPTION\nraise ValueError"),
        nbformat.v4.new_code_cell("x = 1  # NBVAL_SKIP is only a marker on its own line"),
        nbformat.v4.new_markdown_cell("# NBVAL_SKIP"),
    ]
    assert execute_notebook.markers_to_tags(nb) == 2
    assert nb.cells[0].source == "print(1)"
    assert nb.cells[0].metadata["tags"] == ["nbval-ignore-output"]
    assert nb.cells[1].metadata["tags"] == ["raises-exception"]
    assert "tags" not in nb.cells[2].metadata and nb.cells[3].source == "# NBVAL_SKIP"
