"""Stored results of larger runs (``results/NAME/*.json``), read the same way everywhere.

Sweeps too slow to run live in a notebook are run once with ``python tools/runs/sweep.py``
and committed under ``results/NAME`` with their provenance. Chapters show them through
:func:`load_stored_results`, labelled as stored, never as if they had been computed live.

Where they are found: in a clone of the repository, ``results/`` next to the package; where
posenc_lib was installed from a wheel (Colab, ``pip install git+…``), the same files inside
the package, ``posenc_book/results/`` (pyproject.toml ships ``results/`` as package data).

This module imports neither torch nor the rest of posenc_lib: the book's Sphinx extension
(``book/_ext/``) reads the stored results with it, and the website is built without torch
(``requirements-book.txt``). :mod:`posenc_lib.tasks.sweep` re-exports :func:`load_results`,
:func:`summarize` and :func:`provenance_label`.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from posenc_book.schemes import SCHEMES, scheme_label

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


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
        f"`python tools/runs/sweep.py sweep --config {name} --out results/{name}`"
    )


def load_stored_results(name: str) -> list[dict]:
    """Every run result stored under ``results/NAME`` (one dict per JSON file, sorted by name).

    Raises:
        ValueError, FileNotFoundError: as :func:`stored_results_dir`.
    """
    return load_results(stored_results_dir(name))


def load_results(out: Path | str) -> list[dict]:
    """Every result file in ``out`` (sorted by name), ignoring unfinished temporary files.

    Raises:
        FileNotFoundError: if ``out`` does not exist.
    """
    out = Path(out)
    if not out.is_dir():
        raise FileNotFoundError(f"no results directory {out}")
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


def summarize(results: Iterable[dict]) -> dict[str, dict[str, dict[int, tuple[float, float, int]]]]:
    """Mean and standard deviation of perplexity over seeds.

    Returns:
        ``{protocol: {scheme: {L: (mean, std, n)}}}``; std is the sample standard deviation
        (n − 1 in the denominator; 0.0 when n = 1); lengths a model cannot read are left out.
    """
    values: dict[str, dict[str, dict[int, list[float]]]] = {}
    for result in results:
        scheme = result["run"]["scheme"]
        for e in result["evaluations"]:
            if e["perplexity"] is None:
                continue
            lengths = values.setdefault(e["protocol"], {}).setdefault(scheme, {})
            lengths.setdefault(e["eval_length"], []).append(e["perplexity"])
    order = {s: i for i, s in enumerate(SCHEMES)}
    return {
        protocol: {
            scheme: {L: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v))
                     for L, v in sorted(by_length.items())}
            for scheme, by_length in sorted(by_scheme.items(), key=lambda kv: order.get(kv[0], len(order)))
        }
        for protocol, by_scheme in values.items()
    }


def provenance_label(results: Sequence[dict]) -> str:
    """One line saying where stored results came from: runs, scale, device, torch, dtype, commit,
    dates (UTC), e.g. ``"18 runs of scale book on cpu, torch 2.13.0+cpu, float32, commit 1c74c9d, 2026-11-30"``.

    Raises:
        ValueError: for an empty list.
    """
    if not results:
        raise ValueError("provenance_label needs at least one result")

    def joined(values: Iterable) -> str:
        return "/".join(sorted({str(v) for v in values}))

    prov = [r["provenance"] for r in results]
    dates = sorted(p["date_utc"][:10] for p in prov)
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    dirty = " (with uncommitted changes)" if any(p["git_dirty"] for p in prov) else ""
    return (
        f"{len(results)} run{'s' if len(results) != 1 else ''} of scale "
        f"{joined(r['run']['scale']['name'] for r in results)} on {joined(p['device'] for p in prov)}, "
        f"torch {joined(p['torch_version'] for p in prov)}, {joined(r['timing']['dtype'] for r in results)}, "
        f"commit {joined(str(p['git_commit'])[:7] for p in prov)}{dirty}, {when}"
    )


def evaluation_nll(run: dict, length: int, protocol: str = "nonoverlapping") -> float:
    """A stored run's mean NLL (nats per token) at one evaluation length and protocol.

    Args:
        run: one stored result (a dict of :func:`load_stored_results`).
        length: the evaluation length L (tokens).
        protocol: ``"nonoverlapping"`` or ``"sliding"``.

    Raises:
        KeyError: if the run holds no evaluation at that length and protocol.
    """
    for e in run["evaluations"]:
        if e["protocol"] == protocol and e["eval_length"] == length:
            return e["nll"]
    raise KeyError(f"run {run.get('name', run['run']['scheme'])!r} has no "
                   f"{protocol} evaluation at length={length}")


def nll_by_seed(runs: Iterable[dict], protocol: str = "nonoverlapping") -> dict[tuple[str, int], float]:
    """Each stored run's NLL at its own training length, keyed ``(scheme, seed)``.

    Raises:
        KeyError: as :func:`evaluation_nll`.
    """
    return {(r["run"]["scheme"], r["run"]["seed"]): evaluation_nll(r, r["run"]["train_length"], protocol)
            for r in runs}


def seed_mean(values: dict[tuple[str, int], float], scheme: str) -> float:
    """Mean over seeds of ``values`` keyed ``(scheme, seed)``, for one scheme.

    The plain mean, summed in the order of ``values`` (as ``numpy.mean`` sums a few values).

    Raises:
        KeyError: if ``values`` holds no seed of ``scheme``.
    """
    picked = [v for (s, _), v in values.items() if s == scheme]
    if not picked:
        raise KeyError(f"no value for scheme={scheme!r}")
    return sum(picked) / len(picked)


def seed_gaps(values: dict[tuple[str, int], float], scheme: str, reference: str = "none") -> "pd.Series":
    """Per seed, ``values[reference, seed] - values[scheme, seed]`` (e.g. NLL of NoPE minus a scheme's).

    Returns:
        float64 Series indexed by seed, for every seed of ``scheme``, in the order of ``values``.

    Raises:
        KeyError: if a seed of ``scheme`` has no value for ``reference``, or ``scheme`` has none.
    """
    import pandas as pd  # here, not at the top: the website's build reads this module without pandas

    gaps = {seed: values[reference, seed] - v for (s, seed), v in values.items() if s == scheme}
    if not gaps:
        raise KeyError(f"no value for scheme={scheme!r}")
    return pd.Series(gaps, dtype=float)


def mean_and_half_range(values: Iterable[float]) -> tuple[float, float]:
    """The mean of a few values (e.g. one number per seed) and their half-range, (max − min) / 2.

    The half-range is the spread the chapters quote beside a mean of two or three seeds.

    Raises:
        ValueError: if ``values`` is empty.
    """
    values = list(values)
    if not values:
        raise ValueError("mean_and_half_range needs at least one value")
    return statistics.mean(values), (max(values) - min(values)) / 2


def token_start_label(run: dict) -> str:
    """The token embedding's start of a stored run, read from the run's own configuration.

    ``"std 1"`` for ``token_init_std`` 1.0, ``"std 0.02, ×√64"`` when the token vectors are
    also multiplied by √d_model (``scale_token_embedding``, Vaswani et al.'s start).

    Raises:
        KeyError: if the run's ``train_config["model"]`` lacks ``token_init_std``,
            ``scale_token_embedding`` or ``d_model``.
    """
    model = run["train_config"]["model"]
    label = f"std {model['token_init_std']:g}"
    return label + (f", ×√{model['d_model']}" if model["scale_token_embedding"] else "")

# ------------------------------------------------------------------ passkey runs


def load_passkey_runs(folder: Path | str, pattern: str = "*.json") -> dict[str, dict]:
    """The stored runs in ``folder`` (``results/ci-retrieval``, ``results/ci-recall``), by
    file stem.

    Args:
        folder: the results folder.
        pattern: a glob for the files to read (e.g. ``"rope-*-seed*.json"``).

    Returns:
        ``{stem: run}``, sorted by name; each run as its script wrote it
        (``tools/runs/ci_retrieval.py``: ``recipe``, ``passkey``, ``copy_gain``, ``train``, …;
        ``tools/runs/ci_recall.py``: ``recipe``, ``recall``, ``test_nll``, …).

    Raises:
        FileNotFoundError: if no file matches (the folder and pattern named).
    """
    paths = sorted(Path(folder).glob(pattern))
    if not paths:
        raise FileNotFoundError(f"no stored run matches {pattern!r} in {folder}")
    return {path.stem: json.loads(path.read_text()) for path in paths}


def passkey_cells(runs: dict[str, dict]) -> pd.DataFrame:
    """Stored passkey runs as one long table: one row per (run, length, depth).

    Args:
        runs: ``{name: run}`` (:func:`load_passkey_runs`); each run's ``passkey`` rows
            hold ``length``, ``depth``, ``correct``, ``trials``, ``needle_starts`` and
            ``answer_start``.

    Returns:
        A DataFrame with columns ``run`` (the name), ``scheme`` (the base model's
        position), ``seed``, ``L`` (bytes), ``depth``, ``correct``, ``trials`` and
        ``needle_to_answer`` (positions from the needle's start to the answer's, the
        mean over the trials). Cells that were not run (``correct`` None) are left out.
    """
    rows = [{"run": name, "scheme": run["recipe"]["base"]["model"]["position"],
             "seed": run["recipe"]["base"]["seed"], "L": r["length"], "depth": r["depth"],
             "correct": r["correct"], "trials": r["trials"],
             "needle_to_answer": statistics.fmean(r["answer_start"] - n
                                                  for n in r["needle_starts"])}
            for name, run in runs.items() for r in run["passkey"] if r["correct"] is not None]
    columns = ["run", "scheme", "seed", "L", "depth", "correct", "trials", "needle_to_answer"]
    import pandas as pd  # here, not at the top: the website's build reads this module without pandas

    return pd.DataFrame(rows, columns=columns)


def recall_cells(runs: Mapping[str, dict]) -> pd.DataFrame:
    """Stored multi-key recall runs (``results/ci-recall``, read with
    :func:`load_passkey_runs`) as one long table: one row per (run, task, draw, L, depth).

    Args:
        runs: ``{name: run}``; each run's ``recall`` rows hold ``task``, ``draw``,
            ``length``, ``depth``, ``queries``, ``correct`` and ``distractor_answers``.

    Returns:
        A DataFrame with columns ``run``, ``scheme`` (the base model's position),
        ``variant`` (the run's ``variant``, e.g. a hybrid's name or ``"fox"``; the scheme
        for runs that name none), ``rope_base``, ``seed``, ``task`` (e.g. ``"4k2d"``: 4 keys, 2 near-miss distractors
        per queried key; ``"2k0dc2"``: a chain of 2), ``draw``, ``L`` (bytes), ``depth``,
        ``correct``, ``queries``, ``accuracy`` (their ratio) and ``distractor_answers``
        (queries answered with exactly a distractor's value). Cells that were not run
        (``correct`` None) are left out.
    """
    rows = [{"run": name, "scheme": run["recipe"]["base"]["model"]["position"],
             "variant": run.get("variant", run["recipe"]["base"]["model"]["position"]),
             "rope_base": run["recipe"]["base"]["model"]["rope_base"],
             "seed": run["recipe"]["base"]["seed"], "task": r["task"], "draw": r["draw"],
             "L": r["length"], "depth": r["depth"], "correct": r["correct"],
             "queries": r["queries"], "accuracy": r["correct"] / r["queries"],
             "distractor_answers": r["distractor_answers"]}
            for name, run in runs.items() for r in run["recall"] if r["correct"] is not None]
    columns = ["run", "scheme", "variant", "rope_base", "seed", "task", "draw", "L", "depth", "correct",
               "queries", "accuracy", "distractor_answers"]
    import pandas as pd  # here, not at the top: the website's build reads this module without pandas

    return pd.DataFrame(rows, columns=columns)


def recall_nll(runs: Mapping[str, dict]) -> pd.DataFrame:
    """The test NLL of stored recall runs by evaluation length: one row per (run, L).

    Returns:
        A DataFrame with columns ``run``, ``scheme``, ``variant`` (as in
        :func:`recall_cells`), ``rope_base``, ``seed``, ``L`` (bytes) and ``nll`` (nats
        per byte, the run's ``nll_protocol``); lengths a run could not score (``nll``
        None, past a learned table) are left out.
    """
    rows = [{"run": name, "scheme": run["recipe"]["base"]["model"]["position"],
             "variant": run.get("variant", run["recipe"]["base"]["model"]["position"]),
             "rope_base": run["recipe"]["base"]["model"]["rope_base"],
             "seed": run["recipe"]["base"]["seed"], "L": int(length), "nll": value["nll"]}
            for name, run in runs.items() for length, value in run["test_nll"].items()
            if value["nll"] is not None]  # None: a length past a learned table
    import pandas as pd  # here, not at the top: the website's build reads this module without pandas

    return pd.DataFrame(rows, columns=["run", "scheme", "variant", "rope_base", "seed", "L", "nll"])


def effective_length(accuracy: Mapping[int, float], fraction: float = 0.85) -> int | None:
    """The longest length whose accuracy, and every shorter length's, is at least
    ``fraction`` of the accuracy at the shortest length (the short-context score).

    RULER (Hsieh et al. 2024, cited) calls the longest length above a threshold a model's
    effective length; here the threshold is relative to the model's own short-context
    score, so a model that never does well is measured against itself. A length past one
    that fails does not count even if it passes again (a dip is not skipped).

    Args:
        accuracy: ``{length: accuracy}``, accuracies in [0, 1], ≥ 1 length.
        fraction: of the short-context score, in (0, 1].

    Returns:
        A length of ``accuracy`` (at least the shortest), or None when the short-context
        score is 0 (there is nothing to keep).

    Raises:
        ValueError: for no lengths, an accuracy outside [0, 1] or ``fraction`` outside (0, 1].
    """
    if not accuracy:
        raise ValueError("accuracy must hold at least one length, got none")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got fraction={fraction}")
    if any(not 0.0 <= a <= 1.0 for a in accuracy.values()):
        raise ValueError(f"accuracy values must be in [0, 1], got {dict(accuracy)}")
    lengths = sorted(accuracy)
    bar = fraction * accuracy[lengths[0]]
    if bar == 0:
        return None
    kept = lengths[0]
    for length in lengths[1:]:
        if accuracy[length] < bar:
            break
        kept = length
    return kept


def ablation_cells(runs: Mapping[str, dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stored ablation read-outs (``NAME-ablate.json`` of ``tools/runs/ci_recall.py
    --ablate``): both metrics with one layer's attention zeroed.

    Returns:
        ``(recall, nll)``: the tables of :func:`recall_cells` and :func:`recall_nll` with
        one more column, ``ablated_layer`` (int).
    """
    recall, nll = [], []
    for name, run in runs.items():
        for layer, measured in run["ablated_layer"].items():
            one = {name: {**run, "recall": measured["recall"], "test_nll": measured["test_nll"]}}
            recall.append(recall_cells(one).assign(ablated_layer=int(layer)))
            nll.append(recall_nll(one).assign(ablated_layer=int(layer)))
    import pandas as pd  # here, not at the top: the website's build reads this module without pandas

    return pd.concat(recall, ignore_index=True), pd.concat(nll, ignore_index=True)


def passkey_run_shares(cells: pd.DataFrame, train_length: int,
                       bar: float = 0.9) -> pd.DataFrame:
    """Each run's share of keys retrieved at L_train, and whether it counts as retrieving.

    A run *meets the bar* when it retrieves at least ``bar`` of its keys at L_train. The
    book pools, per scheme, the runs that meet it; a scheme none of whose runs meets it
    keeps all of them (chapters 12 and 16).

    Args:
        cells: :func:`passkey_cells` (columns ``scheme``, ``seed``, ``L``, ``correct``,
            ``trials``).
        train_length: L_train (bytes).
        bar: the share in [0, 1].

    Returns:
        A DataFrame indexed by (``scheme``, ``seed``) with columns ``share`` (at
        L_train), ``meets`` and ``kept`` (pooled).

    Raises:
        ValueError: for a bar outside [0, 1] or no cell at ``train_length``.
    """
    if not 0 <= bar <= 1:
        raise ValueError(f"bar must be a share in [0, 1], got bar={bar}")
    at_train = cells[cells.L == train_length].groupby(["scheme", "seed"])[
        ["correct", "trials"]].sum()
    if at_train.empty:
        raise ValueError(f"no passkey cell at train_length={train_length}")
    runs = (at_train.correct / at_train.trials).to_frame("share")
    runs["meets"] = runs.share >= bar
    scheme_meets = runs.groupby(level="scheme").meets.transform("any")
    runs["kept"] = runs.meets | ~scheme_meets
    return runs


def pooled_passkey_accuracy(cells: pd.DataFrame, train_length: int, bar: float = 0.9,
                            by: Sequence[str] = ("L", "depth"),
                            means: Sequence[str] = ()) -> pd.DataFrame:
    """Keys retrieved, pooled over the runs of each scheme that meet the bar at L_train.

    Args:
        cells: :func:`passkey_cells`.
        train_length: L_train (bytes).
        bar: as :func:`passkey_run_shares`.
        by: the columns to pool within, after ``scheme``.
        means: further numeric columns of ``cells`` to average over the same pooled
            cells (e.g. a key's distance back from the question, in bytes).

    Returns:
        A DataFrame indexed by (``scheme``, ``*by``) with columns ``correct``, ``trials``,
        ``accuracy`` (their ratio) and one column per entry of ``means`` (the mean).

    Raises:
        ValueError: as :func:`passkey_run_shares`, or for a column of ``means`` that
            ``cells`` lacks.
    """
    missing = [column for column in means if column not in cells]
    if missing:
        raise ValueError(f"means names columns the cells lack: {missing}")
    kept = passkey_run_shares(cells, train_length, bar).kept
    rows = [kept.get((s, d), False) for s, d in zip(cells.scheme, cells.seed)]
    groups = cells[rows].groupby(["scheme", *by])
    pooled = groups[["correct", "trials"]].sum()
    pooled["accuracy"] = pooled.correct / pooled.trials
    for column in means:
        pooled[column] = groups[column].mean()
    return pooled


def passkey_share_map(frame: pd.DataFrame, depths: Sequence[float],
                      lengths: Sequence[int]) -> "np.ndarray":
    """One model's (or scheme's) passkey cells as a map of shares retrieved, key depth ×
    window length, for :func:`~posenc_book.plotting.plot_passkey_maps`.

    Args:
        frame: cells with columns ``correct`` and ``trials`` and the window length ``L``
            and key ``depth`` as columns or index levels (a scheme's rows of
            :func:`pooled_passkey_accuracy`, or a model's rows of
            :func:`stretched_passkey_cells`); cells of one (depth, L) are summed.
        depths: the map's rows, in order (depths in [0, 1]).
        lengths: its columns, in order (L in tokens or bytes).

    Returns:
        A float64 array ``[len(depths), len(lengths)]`` of correct / trials, NaN where
        ``frame`` has no cell.

    Raises:
        ValueError: if ``frame`` lacks one of the columns.
    """
    flat = frame if "L" in frame.columns else frame.reset_index()
    missing = [c for c in ("L", "depth", "correct", "trials") if c not in flat.columns]
    if missing:
        raise ValueError(f"frame lacks the columns {missing}")
    summed = flat.groupby(["depth", "L"])[["correct", "trials"]].sum()
    shares = (summed.correct / summed.trials).unstack("L")
    return shares.reindex(index=list(depths), columns=list(lengths)).to_numpy(dtype=float)


def passkey_runs_overview(runs: dict[str, dict], train_length: int) -> pd.DataFrame:
    """Every stored passkey run in one table: its training recipe, its keys right at
    L_train and its test loss there (chapter 12's table of runs).

    Args:
        runs: ``{name: run}`` (:func:`load_passkey_runs`); each run with ``recipe``
            (``fraction``, ``repeat_fraction`` and ``base``'s ``model``, ``seed`` and
            ``steps``), ``passkey`` rows and ``test_nll_at_L_train``.
        train_length: L_train (bytes).

    Returns:
        A DataFrame indexed by (``steps``, ``passkey share``, ``repeat share``,
        ``scheme``, ``seed``), sorted by steps, passkey share, scheme and seed, with the
        text columns ``right at L_train`` (``"correct/trials"``, every depth) and
        ``test NLL at L_train (nats/byte)`` (two decimals). A learned table started from
        sinusoids (``learned_init``) is named "… (sinusoidal start)".

    Raises:
        ValueError: if a run has no passkey row at ``train_length``.
    """
    import pandas as pd

    rows = []
    for name, run in runs.items():
        recipe, base = run["recipe"], run["recipe"]["base"]
        at_train = [r for r in run["passkey"] if r["length"] == train_length]
        if not at_train:
            raise ValueError(f"run {name!r} has no passkey row at "
                             f"train_length={train_length}")
        start = base["model"].get("learned_init", "normal")
        rows.append({
            "scheme": scheme_label(base["model"]["position"])
            + (" (sinusoidal start)" if start != "normal" else ""),
            "seed": base["seed"], "passkey share": recipe["fraction"],
            "repeat share": recipe["repeat_fraction"], "steps": base["steps"],
            "right at L_train": f"{sum(r['correct'] for r in at_train)}"
                                f"/{sum(r['trials'] for r in at_train)}",
            "test NLL at L_train (nats/byte)": f"{run['test_nll_at_L_train']['nll']:.2f}"})
    return pd.DataFrame(rows).sort_values(["steps", "passkey share", "scheme", "seed"]
                                          ).set_index(["steps", "passkey share",
                                                       "repeat share", "scheme", "seed"])


def copy_gain_cells(runs: Mapping[object, dict]) -> pd.DataFrame:
    """The copy-gain draws of stored passkey runs as one long table, one row per draw.

    Args:
        runs: ``{name: run}`` (any hashable name, e.g. ``(scheme, seed)``); each run's
            ``copy_gain`` rows hold ``length``, ``distance``, ``gain``,
            ``gain_vs_unseen``, ``nll_first`` and ``nll_unseen`` (None where not
            measured).

    Returns:
        A DataFrame with columns ``run`` (the name), ``scheme``, ``seed``, ``L`` (bytes),
        ``r`` (the distance, bytes), ``gain``, ``gain_vs_unseen``, ``nll_first`` and
        ``nll_unseen`` (nats/byte; NaN where not measured), the runs' rows in order.
    """
    import pandas as pd

    columns = ["run", "scheme", "seed", "L", "r", "gain", "gain_vs_unseen", "nll_first",
               "nll_unseen"]
    rows = [{"run": name, "scheme": run["recipe"]["base"]["model"]["position"],
             "seed": run["recipe"]["base"]["seed"], "L": r["length"], "r": r["distance"],
             "gain": r["gain"], "gain_vs_unseen": r["gain_vs_unseen"],
             "nll_first": r["nll_first"], "nll_unseen": r["nll_unseen"]}
            for name, run in runs.items() for r in run.get("copy_gain", [])]
    frame = pd.DataFrame(rows, columns=columns)
    numeric = ["gain", "gain_vs_unseen", "nll_first", "nll_unseen"]
    frame[numeric] = frame[numeric].astype(float)
    return frame


def budget_runs_frame(runs: Iterable[dict], train_length: int) -> "pd.DataFrame":
    """Stored runs of one model at several training budgets, one row per run: NLL at
    L_train and at 16 L_train (non-overlapping windows), the late-window NLL and the swap
    cost at t = 8 and 64, as ``tools/runs`` stores them in ``extra``.

    Args:
        runs: result records with evaluations at ``train_length`` and 16 × it, and
            ``extra["nll_by_position_range"]["32-{train_length}"]`` and
            ``extra["swap_cost"]["8"]``, ``["64"]``.
        train_length: L_train (bytes).

    Returns:
        A float DataFrame indexed by (scheme, steps, seed), sorted, with the columns
        ``"at L_train"``, ``"at 16 L_train"``, ``"late"``, ``"swap, t=8"``, ``"swap, t=64"``
        (nats per byte; the swap costs in nats).

    Raises:
        KeyError: if a run lacks one of those values (:func:`evaluation_nll` for a length).
    """
    import pandas as pd

    if train_length < 1:
        raise ValueError(f"train_length must be positive, got train_length={train_length}")
    return pd.DataFrame({
        "scheme": r["run"]["scheme"], "seed": r["run"]["seed"],
        "steps": r["train"]["steps"], "at L_train": evaluation_nll(r, train_length),
        "at 16 L_train": evaluation_nll(r, 16 * train_length),
        "late": r["extra"]["nll_by_position_range"][f"32-{train_length}"],
        "swap, t=8": r["extra"]["swap_cost"]["8"],
        "swap, t=64": r["extra"]["swap_cost"]["64"],
    } for r in runs).set_index(["scheme", "steps", "seed"]).sort_index()


def stretched_passkey_share(run: dict, method: str, length: int, *,
                            fine_tuned: bool = False) -> float:
    """Share of keys retrieved by a stretched RoPE model of a stored methods run.

    Args:
        run: a stored ``rope-methods-*.json`` of ``results/ci-retrieval`` (its ``rows``:
            untuned, its ``fine_tuned_rows``: after the fine-tune), each row one method at
            one length with its ``passkey`` cells (``correct`` of ``trials``).
        method: ``"none"``, ``"linear"``, ``"dynamic"``, ``"yarn"`` or ``"llama3"``.
        length: the window length in tokens (bytes).
        fine_tuned: read the fine-tuned rows.

    Returns:
        Keys retrieved over keys tried, pooled over the depths, in [0, 1].

    Raises:
        ValueError: if the run has not exactly one row for ``method`` at ``length``.
    """
    rows = run["fine_tuned_rows" if fine_tuned else "rows"]
    found = [r for r in rows if r["method"] == method and r["length"] == length]
    if len(found) != 1:
        raise ValueError(f"{len(found)} rows for method={method!r}, length={length} "
                         f"(fine_tuned={fine_tuned}); expected one")
    cells = found[0]["passkey"]
    return sum(c["correct"] for c in cells) / sum(c["trials"] for c in cells)


def stretched_passkey_cells(run: dict) -> "pd.DataFrame":
    """A stored methods run's passkey cells as one long table: one row per (untuned or
    fine-tuned, method, length, depth).

    Args:
        run: a stored ``rope-methods-*.json`` (as :func:`stretched_passkey_share`).

    Returns:
        A DataFrame with columns ``method`` (``"none"``, ``"linear"``, …), ``fine-tune``
        (``"untuned"`` or ``"fine-tuned"``), ``L``, ``depth``, ``correct``, ``trials`` and
        ``nll`` (the row's test NLL, nats/byte), the untuned rows first, in stored order.

    Raises:
        KeyError: if the run lacks ``rows`` or ``fine_tuned_rows``.
    """
    import pandas as pd

    return pd.DataFrame([
        {"method": row["method"], "fine-tune": tuned, "L": row["length"],
         "depth": r["depth"], "correct": r["correct"], "trials": r["trials"],
         "nll": row["test_nll"]}
        for key, tuned in (("rows", "untuned"), ("fine_tuned_rows", "fine-tuned"))
        for row in run[key] for r in row["passkey"]],
        columns=["method", "fine-tune", "L", "depth", "correct", "trials", "nll"])


def kept_seeds(shares: "pd.DataFrame") -> dict[str, list[int]]:
    """The seeds each scheme pools, from :func:`passkey_run_shares`.

    Args:
        shares: :func:`passkey_run_shares` (indexed by ``scheme``, ``seed``; column
            ``kept``).

    Returns:
        ``{scheme: [seed, …]}``, every scheme of ``shares`` in its order, seeds sorted.

    Raises:
        ValueError: if ``shares`` has no ``kept`` column.
    """
    if "kept" not in shares:
        raise ValueError("shares must be passkey_run_shares(...): no 'kept' column")
    kept: dict[str, list[int]] = {}
    for (scheme, seed), keep in shares.kept.items():
        kept.setdefault(scheme, [])
        if keep:
            kept[scheme].append(int(seed))
    return {scheme: sorted(seeds) for scheme, seeds in kept.items()}


def end_of_window_loss(run: dict) -> "pd.Series":
    """A passkey run's end-of-window loss on other text (``nll_unseen``, nats/byte), the
    mean over its stored draws at each length L (chapters 12 and 16).

    Args:
        run: one stored passkey run (:func:`load_passkey_runs`), with ``copy_gain`` rows.

    Returns:
        A Series indexed by ``L`` (bytes), sorted; draws without a value are left out.

    Raises:
        ValueError: if the run has no ``copy_gain`` row with a value.
    """
    import pandas as pd

    draws = pd.DataFrame([{"L": r["length"], "nll": r["nll_unseen"]}
                          for r in run.get("copy_gain", [])
                          if r["nll_unseen"] is not None], columns=["L", "nll"])
    if draws.empty:
        raise ValueError("the run has no copy_gain draw with an nll_unseen value")
    return draws.groupby("L").nll.mean()


class VariantRuns:
    """Stored runs of named model variants, each run with one or more seeds and scored at
    several lengths (``results/ci-shipping``, chapter 14): the perplexity of a variant at a
    length (mean over its seeds, or one seed's), the seeds variants share, their table and
    their curves.

    Args:
        runs: the stored runs (:func:`load_stored_results`), each with ``variant``,
            ``seed``, ``evaluations`` (``eval_length`` in bytes, ``perplexity``) and
            ``provenance`` (``device``, ``torch_version``, ``git_commit``, ``date_utc``);
            trained runs also hold their ``train_config``.

    Attributes:
        runs: the runs, as a list.
        frame: one row per run and length: ``variant``, ``seed``, ``L`` (bytes), ``PPL``.
        lengths: the evaluation lengths (bytes), sorted.

    Raises:
        ValueError: for no runs, or a run without ``variant`` or ``seed`` (named by its
            place in ``runs``).

    Example:
        >>> run = {"variant": "rope", "seed": 0, "provenance": {},
        ...        "evaluations": [{"eval_length": 128, "perplexity": 5.0}]}
        >>> runs = VariantRuns([run, {**run, "seed": 1, "evaluations": [
        ...     {"eval_length": 128, "perplexity": 7.0}]}])
        >>> runs.perplexity("rope", 128), runs.perplexity("rope", 128, seed=1)
        (6.0, 7.0)
    """

    def __init__(self, runs: Iterable[dict]) -> None:
        import pandas as pd  # here, not at the top: the website's build reads this module

        self.runs = list(runs)
        if not self.runs:
            raise ValueError("runs must hold at least one stored run, got none")
        bad = [i for i, r in enumerate(self.runs) if "variant" not in r or "seed" not in r]
        if bad:
            raise ValueError(f"runs {bad} have no 'variant' or 'seed': not variant runs")
        self.frame = pd.DataFrame([{"variant": r["variant"], "seed": r["seed"],
                                    "L": e["eval_length"], "PPL": e["perplexity"]}
                                   for r in self.runs for e in r["evaluations"]])
        self.lengths = sorted(int(L) for L in self.frame["L"].unique())
        self._mean = self.frame.groupby(["variant", "L"])["PPL"].mean()
        self._by_seed = self.frame.set_index(["variant", "seed", "L"])["PPL"]
        self._seed_counts = self.frame.groupby("variant")["seed"].nunique()

    def _check(self, variants: Iterable[str]) -> None:
        unknown = [v for v in variants if v not in self._seed_counts]
        if unknown:
            raise ValueError(f"no stored runs of variant(s) {unknown}; stored: "
                             f"{sorted(self._seed_counts.index)}")

    def perplexity(self, variant: str, length: int, seed: int | None = None) -> float:
        """The perplexity of ``variant`` at ``length`` bytes: the mean over its seeds, or
        the run of ``seed``.

        Raises:
            ValueError: for a variant without runs; a KeyError for a length or seed that
                was not run.
        """
        self._check([variant])
        if seed is None:
            return float(self._mean[variant, length])
        return float(self._by_seed[variant, seed, length])

    def seeds(self, *variants: str) -> list[int]:
        """The seeds every one of ``variants`` was run with, sorted.

        Raises:
            ValueError: for no variant, or a variant without runs.
        """
        if not variants:
            raise ValueError("seeds needs at least one variant")
        self._check(variants)
        have = [set(self.frame.loc[self.frame["variant"] == v, "seed"]) for v in variants]
        return sorted(int(s) for s in set.intersection(*have))

    def known(self, names: Mapping[str, str]) -> dict[str, str]:
        """The entries of ``names`` (variant → display name) whose variant has runs."""
        return {v: name for v, name in names.items() if v in self._seed_counts}

    def train_config(self, variant: str) -> dict:
        """The ``train_config`` of the first stored run of ``variant``.

        Raises:
            ValueError: if no run of ``variant`` holds a ``train_config``.
        """
        for run in self.runs:
            if run["variant"] == variant and "train_config" in run:
                return run["train_config"]
        raise ValueError(f"no stored run of variant={variant!r} has a train_config")

    def curves(self, names: Mapping[str, str]) -> dict[str, dict[int, float]]:
        """Mean perplexity by length, for :func:`~posenc_book.plotting.plot_perplexity_vs_length`.

        Args:
            names: variant → display name; variants without runs are left out.

        Returns:
            ``{display name: {L: mean perplexity over the seeds}}``, every length of
            ``lengths``, in the order of ``names``.
        """
        return {name: {L: float(self._mean[v, L]) for L in self.lengths}
                for v, name in self.known(names).items()}

    def table(self, names: Mapping[str, str],
              lengths: Sequence[int] = (128, 512, 2048)) -> "pd.DataFrame":
        """Mean perplexity and, over several seeds, their range, with 3 significant digits
        (:func:`~posenc_book.tables.mean_spread_table`), and the number of seeds.

        Args:
            names: variant → display name (the rows, in this order); variants without
                runs are left out.
            lengths: the evaluation lengths shown (bytes), one column each
                (``"PPL, L = 128"``).

        Returns:
            A DataFrame of strings indexed by display name, and a ``seeds`` column.
        """
        from posenc_book.tables import mean_spread_table

        names = self.known(names)
        out = mean_spread_table(self.frame[self.frame.L.isin(lengths)], "variant", "L",
                                "PPL", spread="range",
                                number=lambda x: f"{x:#.3g}".rstrip("."), order=names,
                                labels=names, column_label="PPL, L = {}")
        out["seeds"] = [self._seed_counts[v] for v in names]
        return out

    def describe(self) -> str:
        """Two lines: how many runs, variants, seeds and lengths; where, with which torch,
        at which commits and between which dates (UTC) they ran."""
        def joined(values: Iterable) -> str:
            return "/".join(sorted({str(v) for v in values}))

        prov = [r["provenance"] for r in self.runs]
        dates = sorted(p["date_utc"][:10] for p in prov)
        seeds = sorted(int(s) for s in self.frame["seed"].unique())
        return (f"{len(self.runs)} stored runs, {self.frame['variant'].nunique()} variants, "
                f"seeds {seeds}; lengths {self.lengths}\n"
                f"run on {joined(p['device'] for p in prov)}, "
                f"torch {joined(p['torch_version'] for p in prov)}, "
                f"commit {joined(p['git_commit'][:7] for p in prov)}, "
                f"{dates[0]} to {dates[-1]}")
