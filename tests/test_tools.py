"""tools/: the notebook executor's marker conversion (no kernel is started here), and the
measurement of how far trained models move between CPU capabilities."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import nbformat
import pytest

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


capability_spec = importlib.util.spec_from_file_location(
    "capability_drift", ROOT / "tools" / "capability_drift.py")
capability_drift = importlib.util.module_from_spec(capability_spec)
capability_spec.loader.exec_module(capability_drift)


def test_capability_drift_measures_a_cache_and_compares(tmp_path, monkeypatch, capsys) -> None:
    from posenc_lib import ModelConfig, TrainConfig, train_cached

    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    tiny = TrainConfig(model=ModelConfig(position="rope", d_model=32, num_layers=1,
                                         num_heads=2), seq_len=16, batch_size=4, steps=3)
    train_cached(tiny, progress=False)
    a = tmp_path / "a.json"
    capability_drift.main(["measure", str(tmp_path / "cache"), str(a)])
    record = json.loads(a.read_text())
    (row,) = record["models"].values()
    assert set(row) == {"last_loss", "tail_mean_loss", "ppl_1x", "ppl_16x"}
    assert row["ppl_1x"] > 1 and math.isfinite(row["ppl_16x"])
    with pytest.raises(SystemExit, match="never overwritten"):
        capability_drift.main(["measure", str(tmp_path / "cache"), str(a)])

    # a second record whose perplexity at L_train is 1 % higher
    b = tmp_path / "b.json"
    other = json.loads(a.read_text())
    (name,) = other["models"]
    other["models"][name]["ppl_1x"] *= 1.01
    b.write_text(json.dumps(other))
    changes = capability_drift.relative_changes(record, other)
    assert changes[name]["ppl_1x"] == pytest.approx(0.01)
    assert changes[name]["last_loss"] == 0
    capsys.readouterr()
    capability_drift.main(["compare", str(a), str(b)])
    out = capsys.readouterr().out
    assert "largest relative change of ppl_1x: 1.0e-02" in out
    assert "largest relative change of any number: 1.0e-02" in out


def test_capability_drift_refuses_an_empty_cache(tmp_path) -> None:
    with pytest.raises(SystemExit, match="no models"):
        capability_drift.main(["measure", str(tmp_path), str(tmp_path / "a.json")])


ci_times_spec = importlib.util.spec_from_file_location(
    "ci_times", ROOT / "tools" / "ci_times.py")
ci_times = importlib.util.module_from_spec(ci_times_spec)
ci_times_spec.loader.exec_module(ci_times)


def test_ci_times_adds_up_cells_per_notebook(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<?xml version="1.0"?><testsuites><testsuite timestamp="2026-12-02T04:21:33"'
        ' hostname="vm" tests="5">'
        '<testcase classname="notebooks.05_rope.ipynb" name="Cell 0" time="1.5"/>'
        '<testcase classname="notebooks.05_rope.ipynb" name="Cell 1" time="2.25"/>'
        '<testcase classname="notebooks.13_cost.ipynb" name="Cell 0" time="4">'
        "<failure/></testcase>"
        '<testcase classname="notebooks.13_cost.ipynb" name="Cell 1" time="1"/>'
        '<testcase classname="tests.test_data" name="test_x" time="9"/>'
        "</testsuite></testsuites>")
    totals, run = ci_times.notebook_times(junit)
    assert totals["05_rope"] == {"cells": 2, "seconds": 3.75, "failed": 0, "skipped": 0}
    assert totals["13_cost"]["failed"] == 1 and run["tests"] == 5
    block = ci_times.table(totals, run, "junit.xml", ["01_why_position", "05_rope",
                                                       "13_cost"])
    assert "| 3.8 | passed |" in block and "| 5.0 | 1 failed |" in block
    assert "not in this run" in block and "2 of 3 chapters" in block
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{ci_times.START}\nold\n{ci_times.END}\nend\n")
    ci_times.write_block(page, block)
    text = page.read_text()
    assert "old" not in text and text.startswith("intro") and text.endswith("end\n")
    assert ci_times.toc_chapters()[0] == "01_why_position"


def test_ci_times_adds_up_other_test_files(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest" timestamp="2026-12-02T05:00:00" hostname="h">'
        '<testcase classname="tests.test_model" name="test_a" time="1.5"/>'
        '<testcase classname="tests.test_model.TestX" name="test_b" time="0.5"/>'
        '<testcase classname="tests.test_cache" name="test_c" time="3.0"/>'
        '<testcase classname="notebooks.05_rope.ipynb" name="Cell 1" time="9.0"/>'
        "</testsuite></testsuites>")
    files = ci_times.test_file_times(junit)
    assert files == {"tests/test_model.py": {"tests": 2, "seconds": 2.0},
                     "tests/test_cache.py": {"tests": 1, "seconds": 3.0}}
    block = ci_times.file_table(files)
    assert block.index("test_cache.py") < block.index("test_model.py")  # slowest first
    assert "5.0 s between them" in block


cold_spec = importlib.util.spec_from_file_location("cold_times", ROOT / "tools" / "cold_times.py")
cold_times = importlib.util.module_from_spec(cold_spec)
cold_spec.loader.exec_module(cold_times)


def test_cold_times_runs_a_notebook_with_an_empty_cache(tmp_path, monkeypatch) -> None:
    """The kernel sees a new, empty model cache (not the caller's), trains into it, and the
    caller's environment is restored; the results file is never overwritten."""
    outer = tmp_path / "outer-cache"
    monkeypatch.setenv("POSENC_CACHE_DIR", str(outer))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\n"
        "from posenc_lib import ModelConfig, TrainConfig, train_cached\n"
        f"assert os.environ['POSENC_CACHE_DIR'] != {str(outer)!r}\n"
        "assert not os.listdir(os.environ['POSENC_CACHE_DIR'])\n"
        "tiny = TrainConfig(model=ModelConfig(position='rope', d_model=32, num_layers=1,\n"
        "                                     num_heads=2), seq_len=16, batch_size=4, steps=2)\n"
        "train_cached(tiny, progress=False)")]
    path = tmp_path / "tiny_chapter.ipynb"
    nbformat.write(nb, path)
    out = tmp_path / "times.json"
    assert cold_times.main([str(path), "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    entry = record["chapters"]["tiny_chapter"]
    assert entry["wall_s"] > 0 and entry["model_cache_mb"] > 0
    assert {"commit", "git_dirty", "cpu_count", "torch", "torch_threads", "threads",
            "load_average_start", "load_average_end", "end_utc"} <= set(record)
    import os
    assert os.environ["POSENC_CACHE_DIR"] == str(outer) and not outer.exists()
    with pytest.raises(SystemExit):
        cold_times.main([str(path), "--out", str(out)])


def test_a_cell_marked_to_raise_may_raise(tmp_path) -> None:
    """The markers become tags before the kernel runs, so nbclient lets a marked cell raise
    (and the cells after it still run); an unmarked cell that raises stops the run."""
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("# NBVAL_RAISES_EXCEPTION\nraise ValueError('shown')"),
                nbformat.v4.new_code_cell("print('after')")]
    path = tmp_path / "marked.ipynb"
    nbformat.write(nb, path)
    done, wall, converted = execute_notebook.run_cells(path)
    assert converted == 1 and wall > 0
    assert done.cells[1].outputs[0]["text"] == "after\n"
    nb.cells[0].source = "raise ValueError('not marked')"
    nbformat.write(nb, path)
    with pytest.raises(CellExecutionError):
        execute_notebook.run_cells(path)


def test_ci_recall_reads_task_codes_plans_and_its_stored_tables(capsys) -> None:
    """The recall runs' script: task codes and curricula parse to the library's configs,
    a bad code is refused with the expected form, and --table reads the stored runs."""
    import argparse

    from posenc_lib.tasks.recall import RecallConfig
    from tools.runs import ci_recall

    assert ci_recall.task("4k2d") == RecallConfig(num_keys=4, distractors=2)
    assert ci_recall.task("2k0dc2") == RecallConfig(num_keys=2, chain_length=2)
    with pytest.raises(ValueError, match="KkDd"):
        ci_recall.task("4keys")
    stages = ci_recall.plan(ci_recall.DEFAULT_PLAN)
    assert [s.steps for s in stages] == [1000, 1000, 1000]
    args = argparse.Namespace(plan=ci_recall.DEFAULT_PLAN, fraction=0.375, repeat_fraction=0.375,
                              answer_weight=1.0, rope_base=100.0)
    assert ci_recall.name("rope", 1, args).startswith("rope-base100-1k0dx1000-")
    assert ci_recall.config_for("rope", 1, args).base.steps == 3000
    ci_recall.tables(ci_recall.OUT)
    printed = capsys.readouterr().out
    assert "rope base 100, 4k2d" in printed and "alibi" in printed and "logn" not in printed


def test_ci_recall_variants_are_the_hybrids_and_fox_they_name() -> None:
    """The hybrids and FoX of ci_recall.py build the models their names promise, and the
    stored runs' cache keys still match their configs."""
    import argparse
    import json

    from posenc_lib import TransformerLM
    from posenc_lib.training.store import recall_mix_cache_key
    from tools.runs import ci_recall

    args = argparse.Namespace(plan=ci_recall.DEFAULT_PLAN, fraction=0.375, repeat_fraction=0.375,
                              answer_weight=1.0, rope_base=None, position_range=None)
    irope = TransformerLM(ci_recall.config_for("irope", 0, args).model)
    assert [b.attn.rotary is not None for b in irope.blocks] == [True, False]
    assert [b.attn.sliding_window for b in irope.blocks] == [32, None]
    gemma = TransformerLM(ci_recall.config_for("gemma3-bases", 0, args).model)
    assert [b.attn.rotary.base for b in gemma.blocks] == [1e4, 1e6]
    fox = ci_recall.config_for("fox-alibi-init", 0, args).model
    assert fox.position == "none" and fox.forget_gate and fox.forget_gate_init == "alibi"
    for name, kept in (("neox-0.25", 2), ("p_rope-0.25", 2), ("p_rope-0.5", 4)):  # of 8 pairs
        model = TransformerLM(ci_recall.config_for(name, 0, args).model)
        rotated = model.blocks[0].attn.rotary.inv_freq
        assert int((rotated > 0).sum()) == kept, name
    stored = ci_recall.OUT.parent / "ci-recall-hybrids" / f"{ci_recall.name('irope', 0, args)}.json"
    key = json.loads(stored.read_text())["model_cache_key"]
    assert key == recall_mix_cache_key(ci_recall.config_for("irope", 0, args), "cpu")
