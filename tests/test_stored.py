"""posenc_book.stored: stored sweep results are found, and a missing folder fails in words."""

import shutil

import pytest

import posenc_book.stored as stored
from posenc_book.stored import load_stored_results, stored_results_dir


def test_book_results_are_stored_with_provenance() -> None:
    results = load_stored_results("book")
    assert len(results) == 18
    assert all("provenance" in r and "evaluations" in r for r in results)


def test_missing_results_say_what_to_do() -> None:
    with pytest.raises(FileNotFoundError, match="python tools/runs/sweep.py sweep --config nonexistent"):
        stored_results_dir("nonexistent")


@pytest.mark.parametrize("name", ["", "../book", ".hidden"])
def test_bad_names(name: str) -> None:
    with pytest.raises(ValueError, match="plain folder name"):
        stored_results_dir(name)


def test_an_installed_wheel_finds_its_package_data(tmp_path, monkeypatch) -> None:
    """Without a clone's results/, the copy inside the package (a wheel) is read."""
    package_results = tmp_path / "posenc_book" / "results"
    shutil.copytree(stored.REPOSITORY_RESULTS / "book", package_results / "book")
    monkeypatch.setattr(stored, "REPOSITORY_RESULTS", tmp_path / "no-clone" / "results")
    monkeypatch.setattr(stored, "PACKAGE_RESULTS", package_results)
    assert stored_results_dir("book") == package_results / "book"
    assert len(load_stored_results("book")) == 18
    with pytest.raises(FileNotFoundError, match="installed wheel"):
        stored_results_dir("gpu")


def test_reading_stored_results_needs_no_torch() -> None:
    """What the book's build imports works in a Python where torch cannot be imported."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = """
import sys
sys.modules["torch"] = None  # import torch now raises ModuleNotFoundError
sys.path.insert(0, "book/_ext")
import posenc_sphinx  # the book's Sphinx extension
import posenc_book
from posenc_book.interactive import Player
from posenc_book.plotting import plot_perplexity_vs_length
from posenc_book.schemes import SCHEMES, scheme_label
from posenc_book.stored import load_stored_results, provenance_label, summarize
from posenc_book.tables import table_html
results = load_stored_results("book")
assert len(results) == 18 and "rope" in summarize(results)["sliding"]
assert provenance_label(results).startswith("18 runs of scale book")
try:
    import posenc_lib  # the library itself needs torch
except ModuleNotFoundError as error:
    assert error.name == "torch", error
else:
    raise AssertionError("posenc_lib imported without torch")
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_the_website_build_needs_no_pandas() -> None:
    """The README's build command installs requirements-book.txt, which has no pandas (and
    no torch): the modules the book's Sphinx extension imports must load without it (a
    top-level ``import pandas`` in posenc_book.stored once broke that build)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = """
import sys
sys.modules["torch"] = None
sys.modules["pandas"] = None  # import pandas now raises ModuleNotFoundError
sys.path.insert(0, "book/_ext")
import posenc_sphinx
from posenc_book.plotting import plot_perplexity_vs_length
from posenc_book.stored import load_stored_results, provenance_label, summarize
results = load_stored_results("book")
assert len(results) == 18 and "rope" in summarize(results)["sliding"]
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_first_run_times_cover_every_chapter() -> None:
    """The first-run times the landing page and the execution status page name (stored by
    tools/cold_times.py) exist, name one file, and time every chapter in _toc.yml."""
    import re
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "book" / "_ext"))
    import posenc_sphinx

    named = {re.search(r"^:first-run: (\S+)$", (root / "book" / page).read_text(), re.M).group(1)
             for page in ("intro.md", "execution_status.md")}
    assert len(named) == 1, f"the two pages name different first-run files: {named}"
    record = posenc_sphinx.first_runs(root, named.pop())
    chapters = [d for d in posenc_sphinx.toc_files(root) if (root / f"{d}.ipynb").exists()]
    assert sorted(record["chapters"]) == sorted(chapters)
    assert all(entry["wall_s"] > 0 for entry in record["chapters"].values())
    with pytest.raises(ValueError, match="tools/cold_times.py"):
        posenc_sphinx.first_runs(root, "results/run-times/missing.json")


def test_nll_by_seed_reads_each_run_at_its_training_length() -> None:
    from posenc_book.stored import evaluation_nll, nll_by_seed

    runs = load_stored_results("book")
    nll = nll_by_seed(runs)
    assert len(nll) == len(runs)
    run = runs[0]
    key = (run["run"]["scheme"], run["run"]["seed"])
    expected = [e["nll"] for e in run["evaluations"] if e["protocol"] == "nonoverlapping"
                and e["eval_length"] == run["run"]["train_length"]]
    assert [nll[key]] == expected == [evaluation_nll(run, run["run"]["train_length"])]
    assert evaluation_nll(run, run["run"]["train_length"], "sliding") != expected[0]
    with pytest.raises(KeyError, match="length=3"):
        evaluation_nll(run, 3)


def test_seed_mean_and_gaps() -> None:
    from posenc_book.stored import seed_gaps, seed_mean

    values = {("none", 0): 2.0, ("none", 1): 2.5, ("alibi", 0): 1.5, ("alibi", 1): 1.75}
    assert seed_mean(values, "none") == 2.25
    gaps = seed_gaps(values, "alibi")
    assert gaps.to_dict() == {0: 0.5, 1: 0.75} and gaps.dtype == float
    with pytest.raises(KeyError, match="rope"):
        seed_mean(values, "rope")
    with pytest.raises(KeyError, match="rope"):
        seed_gaps(values, "rope")
    with pytest.raises(KeyError):
        seed_gaps({("alibi", 2): 1.0}, "alibi")  # no reference value for seed 2


def test_mean_and_half_range() -> None:
    from posenc_book.stored import mean_and_half_range

    assert mean_and_half_range([7.0, 8.0, 10.0]) == (25 / 3, 1.5)
    assert mean_and_half_range(iter([2.0])) == (2.0, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        mean_and_half_range([])


def test_token_start_label_reads_the_run_configuration() -> None:
    from posenc_book.stored import token_start_label

    def run(std: float, scaled: bool) -> dict:
        return {"train_config": {"model": {"token_init_std": std, "scale_token_embedding": scaled,
                                           "d_model": 64}}}

    assert token_start_label(run(1.0, False)) == "std 1"
    assert token_start_label(run(0.02, False)) == "std 0.02"
    assert token_start_label(run(0.125, True)) == "std 0.125, ×√64"
    with pytest.raises(KeyError):
        token_start_label({"train_config": {"model": {}}})


def test_budget_runs_frame_one_row_per_run() -> None:
    from posenc_book.stored import budget_runs_frame

    def run(scheme, steps, seed, nll):
        return {"run": {"scheme": scheme, "seed": seed}, "train": {"steps": steps},
                "evaluations": [{"protocol": "nonoverlapping", "eval_length": L,
                                 "nll": nll + L / 1000} for L in (8, 128)],
                "extra": {"nll_by_position_range": {"32-8": nll},
                          "swap_cost": {"8": 0.1, "64": 0.2}}}

    frame = budget_runs_frame([run("none", 600, 1, 2.0), run("alibi", 300, 0, 1.5)], 8)
    assert list(frame.index) == [("alibi", 300, 0), ("none", 600, 1)]
    assert frame.loc[("none", 600, 1), "at 16 L_train"] == pytest.approx(2.128)
    assert list(frame.columns) == ["at L_train", "at 16 L_train", "late", "swap, t=8",
                                   "swap, t=64"]
    with pytest.raises(KeyError):
        budget_runs_frame([run("none", 600, 1, 2.0)], 16)
    with pytest.raises(ValueError, match="train_length"):
        budget_runs_frame([], 0)


def _variant_run(variant: str, seed: int, perplexities: dict[int, float], **extra) -> dict:
    return {"variant": variant, "seed": seed, "kind": "trained",
            "evaluations": [{"eval_length": L, "perplexity": p}
                            for L, p in perplexities.items()],
            "provenance": {"device": "cpu", "torch_version": "2.13.0+cpu",
                           "git_commit": f"{seed}abcdef0123", "date_utc": f"2026-12-0{seed + 1}T05"},
            **extra}


def test_variant_runs_pool_seeds_tabulate_and_describe() -> None:
    from posenc_book.stored import VariantRuns

    runs = VariantRuns([
        _variant_run("rope", 0, {128: 5.0, 512: 9.0}, train_config={"seq_len": 128}),
        _variant_run("rope", 1, {128: 7.0, 512: 11.0}),
        _variant_run("nope", 1, {128: 8.0, 512: 8.5}),
    ])
    assert runs.lengths == [128, 512]
    assert runs.perplexity("rope", 128) == 6.0 and runs.perplexity("rope", 512, 1) == 11.0
    assert runs.seeds("rope") == [0, 1] and runs.seeds("rope", "nope") == [1]
    assert runs.known({"nope": "NoPE", "alibi": "ALiBi"}) == {"nope": "NoPE"}
    assert runs.train_config("rope") == {"seq_len": 128}
    assert runs.curves({"rope": "RoPE", "alibi": "ALiBi"}) == {"RoPE": {128: 6.0, 512: 10.0}}
    table = runs.table({"nope": "NoPE", "rope": "RoPE", "alibi": "ALiBi"}, lengths=(128,))
    assert list(table.index) == ["NoPE", "RoPE"]
    assert list(table.columns) == ["PPL, L = 128", "seeds"]
    assert list(table["PPL, L = 128"]) == ["8.00", "6.00 (5.00–7.00)"]
    assert list(table["seeds"]) == [1, 2]
    assert runs.describe() == ("3 stored runs, 2 variants, seeds [0, 1]; lengths [128, 512]\n"
                               "run on cpu, torch 2.13.0+cpu, commit 0abcdef/1abcdef, "
                               "2026-12-01 to 2026-12-02")


def test_variant_runs_reject_what_they_cannot_read() -> None:
    from posenc_book.stored import VariantRuns

    with pytest.raises(ValueError, match="at least one"):
        VariantRuns([])
    with pytest.raises(ValueError, match=r"runs \[0\]"):
        VariantRuns([{"run": {"scheme": "rope"}, "evaluations": []}])
    runs = VariantRuns([_variant_run("nope", 0, {128: 8.0})])
    with pytest.raises(ValueError, match="'alibi'"):
        runs.perplexity("alibi", 128)
    with pytest.raises(ValueError, match="'alibi'"):
        runs.seeds("nope", "alibi")
    with pytest.raises(ValueError, match="at least one variant"):
        runs.seeds()
    with pytest.raises(ValueError, match="train_config"):
        runs.train_config("nope")


def _recall_run(position: str, seed: int) -> dict:
    model = {"position": position, "rope_base": 10000.0}
    rows = [{"task": "4k2d", "draw": 0, "length": 128, "depth": 0.5, "queries": 4, "correct": 3,
             "distractor_answers": 1},
            {"task": "4k2d", "draw": 0, "length": 256, "depth": 0.5, "queries": 4, "correct": None,
             "distractor_answers": None}]
    return {"recipe": {"base": {"model": model, "seed": seed}}, "recall": rows,
            "test_nll": {"128": {"nll": 1.5}, "256": {"nll": 2.5}}}


def test_recall_cells_and_nll_read_one_row_per_measured_cell() -> None:
    runs = {"a": _recall_run("rope", 0), "b": _recall_run("alibi", 1)}
    cells = stored.recall_cells(runs)
    assert list(cells.run) == ["a", "b"]  # the cell that was not run is left out
    assert cells.accuracy.tolist() == [0.75, 0.75] and cells.scheme.tolist() == ["rope", "alibi"]
    assert cells.distractor_answers.tolist() == [1, 1] and cells.seed.tolist() == [0, 1]
    nll = stored.recall_nll(runs)
    assert nll.L.tolist() == [128, 256, 128, 256] and nll.nll.tolist() == [1.5, 2.5, 1.5, 2.5]
