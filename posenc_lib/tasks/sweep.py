"""Train short, test long, at scale: a resumable sweep over schemes × seeds × L_train.

Each *run* trains one model (one scheme, one seed, one L_train) and evaluates it at every length
of its scale's grid under two protocols (Press et al. 2022, §4 and Appendix B):

* ``nonoverlapping``: windows of L tokens side by side, every token scored;
* ``sliding``: windows of L tokens every S = L / ``scale.sliding_divisor`` tokens, only the last
  S of each scored (the first window scores all of its tokens), so every scored token after
  the first window sees at least L − S tokens of context.

A run writes one JSON file, atomically (a temporary file, then :func:`os.replace`), holding its
configuration, its results and its provenance (git commit, torch version, device, dtype, wall
time, tokens per second, peak memory). A sweep that is interrupted resumes: finished runs are
found on disk and skipped. A file that exists but came from a different configuration is never
overwritten unless ``overwrite=True`` (``--overwrite``).

Command line::

    python tools/runs/sweep.py sweep --config ci --out results/ci
    python tools/runs/sweep.py table --out results/ci

A controlled variant of a scale changes one :class:`~posenc_lib.model.transformer.ModelConfig` field
for every run with ``--model FIELD=VALUE`` (stored in the runs' ``scale.model_extra``, so
the result files say which variant they hold); give each variant its own ``--out``::

    python tools/runs/sweep.py sweep --config ci --schemes sinusoidal rope \\
        --seeds 0 1 --model token_init_std=0.02 --out results/ci-token-std0.02

Scale-out. The runs are independent, so a sweep splits into shards that run anywhere at
once: ``--shard K/N`` (1 ≤ K ≤ N) takes runs K−1, K−1+N, K−1+2N, … of the plan, so the N
shards together hold every run exactly once (:func:`shard_runs`). Any scheduler that
starts N copies of a command — a Slurm job array, a Kubernetes indexed Job, a CI matrix,
one process per GPU — runs one shard each into a shared results folder; the atomic
writes, the resumption and the refusal to overwrite a different configuration make that
safe. A Slurm array of four GPU jobs, then the table once they are done::

    #!/bin/bash
    #SBATCH --array=1-4
    #SBATCH --gres=gpu:1
    python tools/runs/sweep.py sweep --config gpu --out results/gpu \\
        --shard ${SLURM_ARRAY_TASK_ID}/4 --no-progress

    python tools/runs/sweep.py table --out results/gpu
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from posenc_lib.training.store import cached_model_path, train_cached
from posenc_lib.training.data import load_corpus
from posenc_lib.training.device import pick_device
from posenc_lib.training.evaluate import evaluate_perplexity
from posenc_lib.records import RESULT_FORMAT, ResultFiles, peak_memory, provenance
from posenc_lib.model.transformer import SCHEMES
from posenc_lib.training.progress import progress_bar
# reading stored results needs no torch: they live in posenc_book.stored (the book's build
# imports them without torch) and are re-exported here, where they were first defined
from posenc_book.stored import load_results, provenance_label, summarize  # noqa: F401
from posenc_book.cited import PRESS2022_PERPLEXITY, WT103_BYTES_PER_TOKEN, press_ratios
from posenc_book.tables import mean_spread_table
from posenc_lib.training.scales import Scale, get_scale  # noqa: F401  (get_scale: the doctests use it)
from posenc_lib.training.train import TrainConfig, train

PROTOCOLS: tuple[str, ...] = ("nonoverlapping", "sliding")
"""The two evaluation protocols, in the order results are written."""

@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: a scale, a scheme, a seed and a training length L_train.

    Attributes:
        scale: the :class:`~posenc_lib.training.scales.Scale` (model size, budget, evaluation grid).
        scheme: a positional scheme from :data:`~posenc_lib.model.transformer.SCHEMES`.
        seed: the training seed.
        train_length: L_train in bytes; the evaluation grid is the scale's, multiplied by
            ``train_length / scale.seq_len`` (so it always runs from L_train to 16 × L_train for
            the built-in scales).
    """

    scale: Scale
    scheme: str
    seed: int
    train_length: int

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got scheme={self.scheme!r}")
        if self.train_length < 1:
            raise ValueError(f"train_length must be >= 1, got train_length={self.train_length}")

    @property
    def name(self) -> str:
        """File stem of the run's result, e.g. ``"rope-Ltrain128-seed0"``."""
        return f"{self.scheme}-Ltrain{self.train_length}-seed{self.seed}"

    def sized_scale(self) -> Scale:
        """The scale with L_train replaced by ``train_length`` and the grid scaled with it."""
        if self.train_length == self.scale.seq_len:
            return self.scale
        lengths = tuple(L * self.train_length // self.scale.seq_len for L in self.scale.eval_lengths)
        return dataclasses.replace(self.scale, seq_len=self.train_length, eval_lengths=lengths)

    def train_config(self) -> TrainConfig:
        return self.sized_scale().train_config(self.scheme, self.seed)

    def eval_plan(self) -> list[tuple[str, int, int | None]]:
        """(protocol, L, stride) for every evaluation of this run; stride None = non-overlapping."""
        scale = self.sized_scale()
        plan = []
        for L in scale.eval_lengths:
            plan.append(("nonoverlapping", L, None))
            plan.append(("sliding", L, max(1, L // scale.sliding_divisor)))
        return plan

    def to_dict(self) -> dict:
        """JSON-ready (tuples become lists), so it compares equal to a record read back from disk."""
        record = {"scale": dataclasses.asdict(self.scale), "scheme": self.scheme, "seed": self.seed,
                  "train_length": self.train_length}
        return json.loads(json.dumps(record))


def plan_sweep(
    scale: Scale,
    *,
    schemes: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    train_lengths: Sequence[int] | None = None,
) -> list[RunSpec]:
    """Every run of a sweep, L_train outermost, then seed, then scheme (so the first finished
    runs already compare all schemes).

    Args:
        scale: the experiment size.
        schemes: defaults to all of :data:`~posenc_lib.model.transformer.SCHEMES`.
        seeds: defaults to ``scale.seeds``.
        train_lengths: defaults to ``(scale.seq_len,)``.

    Raises:
        ValueError: for an unknown scheme or a non-positive L_train.
    """
    schemes = tuple(schemes or SCHEMES)
    seeds = tuple(scale.seeds if seeds is None else seeds)
    train_lengths = tuple(train_lengths or (scale.seq_len,))
    return [RunSpec(scale, scheme, seed, L) for L in train_lengths for seed in seeds for scheme in schemes]


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` → ``(K, N)``: shard K (1-based) of N.

    Raises:
        ValueError: unless ``text`` is two integers ``K/N`` with 1 ≤ K ≤ N.
    """
    try:
        shard, num_shards = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"shard must look like K/N (e.g. 2/4), got {text!r}") from None
    if not 1 <= shard <= num_shards:
        raise ValueError(f"shard K/N needs 1 <= K <= N, got {text!r}")
    return shard, num_shards


def shard_runs(runs: Sequence[RunSpec], shard: int, num_shards: int) -> list[RunSpec]:
    """The runs of shard K = ``shard`` of N = ``num_shards``: runs K − 1, K − 1 + N, …

    Round robin over the plan's order (L_train, then seed, then scheme), so shard sizes
    differ by at most one run, and the same plan always gives the same split: shards
    1 … N together hold every run exactly once.

    Args:
        runs: the plan, from :func:`plan_sweep`.
        shard: K, 1 ≤ K ≤ N.
        num_shards: N ≥ 1.

    Raises:
        ValueError: unless 1 ≤ ``shard`` ≤ ``num_shards``.

    Example:
        >>> [r.name for r in shard_runs(plan_sweep(get_scale("ci"), seeds=[0]), 2, 4)]
        ['sinusoidal-Ltrain128-seed0', 't5-Ltrain128-seed0']
    """
    if not 1 <= shard <= num_shards:
        raise ValueError(
            f"need 1 <= shard <= num_shards, got shard={shard}, num_shards={num_shards}"
        )
    return list(runs)[shard - 1 :: num_shards]


def run_one(spec: RunSpec, device: torch.device | str, *, use_cache: bool = True, progress: bool = True) -> dict:
    """Train (or load from the model cache) and evaluate one run; returns its result record.

    Returns:
        A JSON-ready dict: ``run`` (the spec), ``train_config``, ``provenance``, ``timing``
        (train and evaluation wall seconds, tokens per second, peak memory), ``train`` (final
        loss, parameters) and ``evaluations``: one entry per (protocol, L) with nll (nats per
        byte), perplexity, bits per byte, stride and tokens scored.
    """
    device = torch.device(device)
    config = spec.train_config()
    scale = spec.sized_scale()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    was_cached = use_cache and cached_model_path(config, device).exists()
    start = time.perf_counter()
    trainer = train_cached if use_cache else train
    model, record = trainer(config, device, progress=progress)
    train_wall = time.perf_counter() - start
    test = load_corpus(config.corpus).test
    use_autocast = config.autocast_dtype == "bfloat16" and device.type == "cuda"
    evaluations = []
    start = time.perf_counter()
    plan = spec.eval_plan()
    for protocol, L, stride in progress_bar(plan, desc=f"eval {spec.name}", enabled=progress, leave=False):
        if model.max_length is not None and L > model.max_length:
            # A learned table has no row past L_train: there is no perplexity to report.
            evaluations.append({"protocol": protocol, "eval_length": L, "stride": stride, "nll": None,
                                "perplexity": None, "bits_per_byte": None, "tokens_scored": 0,
                                "skipped": f"learned table has {model.max_length} rows"})
            continue
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_autocast):
            result = evaluate_perplexity(model, test, L, stride=stride,
                                         max_tokens=scale.sweep_eval_tokens or scale.eval_tokens)
        evaluations.append({"protocol": protocol, **result.to_dict()})
    eval_wall = time.perf_counter() - start
    eval_tokens = sum(e["tokens_scored"] for e in evaluations)
    return {
        "format": RESULT_FORMAT,
        "run": spec.to_dict(),
        "name": spec.name,
        "train_config": config.to_dict(),
        "provenance": provenance(device),
        "timing": {
            "model_was_cached": was_cached,  # if so, train_wall_s is from the run that trained it
            "train_wall_s": record.wall_time_s,
            "train_tokens_per_second": record.tokens_per_second,
            "train_device": record.device,
            "load_or_train_wall_s": train_wall,
            "eval_wall_s": eval_wall,
            "eval_tokens_scored": eval_tokens,
            "eval_tokens_per_second": eval_tokens / eval_wall if eval_wall > 0 else None,
            "dtype": config.autocast_dtype,
            **peak_memory(device),
        },
        "train": {"final_loss": record.losses[-1], "num_parameters": record.num_parameters,
                  "steps": len(record.losses)},
        "evaluations": evaluations,
    }


def run_sweep(
    runs: Iterable[RunSpec],
    out: Path | str,
    *,
    device: torch.device | str | None = None,
    overwrite: bool = False,
    use_cache: bool = True,
    progress: bool = True,
) -> list[dict]:
    """Run every planned run that has no result in ``out`` yet; return all their results.

    Args:
        runs: from :func:`plan_sweep`.
        out: directory for the result files (``<run name>.json``), created if missing.
        device: defaults to :func:`~posenc_lib.training.device.pick_device` (CUDA when present).
        overwrite: rerun and replace runs whose files already exist.
        use_cache: load trained models from (and store them in) the model cache.
        progress: tqdm bars for runs, training steps and evaluations (stderr).

    Returns:
        One result dict per run, in plan order (finished ones read back from disk).

    Raises:
        FileExistsError: if a result file exists for a run's name but records a different
            configuration, and ``overwrite`` is False (nothing is overwritten silently).
    """
    device = torch.device(device) if device is not None else pick_device()
    files = ResultFiles(runs, out, overwrite=overwrite)
    bar = progress_bar(files.todo, desc=f"runs ({files.done})", enabled=progress)
    for spec in bar:
        bar.set_postfix(run=spec.name)
        files.store(spec, run_one(spec, device, use_cache=use_cache, progress=progress))
    return files.in_plan_order()


def format_table(summary: dict[str, dict[str, dict[int, tuple[float, float, int]]]], digits: int = 2) -> str:
    """A plain-text table, one block per protocol: scheme × L, ``mean ± std (n seeds)``."""
    lines = []
    for protocol, by_scheme in summary.items():
        lengths = sorted({L for curve in by_scheme.values() for L in curve})
        lines.append(f"{protocol}: perplexity (mean ± std over seeds)")
        lines.append("scheme".ljust(11) + "".join(f"L={L}".rjust(17) for L in lengths) + "   n")
        for scheme, curve in by_scheme.items():
            cells = "".join((f"{curve[L][0]:.{digits}f} ± {curve[L][1]:.{digits}f}" if L in curve else "—").rjust(17)
                            for L in lengths)
            n = max(c[2] for c in curve.values())
            lines.append(scheme.ljust(11) + cells + f"   {n}")
        lines.append("")
    return "\n".join(lines).rstrip()



# --- Seed statistics as tables: per-run ratios, their spread, summarize() as a table

FRAME_COLUMNS: tuple[str, ...] = (
    "scheme",
    "seed",
    "train_length",
    "protocol",
    "eval_length",
    "multiple",
    "perplexity",
    "bits_per_byte",
    "ratio",
)
"""Columns of :func:`results_frame`, in order."""


def results_frame(results: Iterable[dict]) -> pd.DataFrame:
    """Every evaluation of every run as one row, with its ratio to the run at L_train.

    The ratio PPL(L) / PPL(L_train) is taken *within* one run (one trained model, one
    protocol) before any averaging over seeds, so it measures how the model's perplexity
    changes with L, free of the seed-to-seed differences in its level (Press et al. 2022
    compare shapes the same way, Table 2).

    Args:
        results: result records of :func:`run_one` (or read back by
            :func:`load_results`).

    Returns:
        A DataFrame with the columns of :data:`FRAME_COLUMNS`: ``scheme`` (a name of
        :data:`~posenc_lib.model.transformer.SCHEMES`), ``seed``, ``train_length`` and
        ``eval_length`` (L_train and L, bytes), ``protocol``, ``multiple`` (L / L_train,
        a float), ``perplexity`` (no unit), ``bits_per_byte`` and ``ratio`` (no unit;
        1.0 at L_train). Rows are sorted by protocol, the book's scheme order, seed and
        L. Evaluations a model cannot make (a learned table shorter than L) are left
        out.

    Raises:
        ValueError: if a run has an evaluation past L_train but none at L_train under
            the same protocol (there is nothing to divide by), or if ``results`` is
            empty.
    """
    rows = []
    for result in results:
        run = result["run"]
        train_length = run["train_length"]
        by_protocol: dict[str, dict[int, dict]] = {}
        for e in result["evaluations"]:
            if e["perplexity"] is not None:
                by_protocol.setdefault(e["protocol"], {})[e["eval_length"]] = e
        for protocol, by_length in by_protocol.items():
            if train_length not in by_length:
                raise ValueError(
                    f"run {result.get('name', run)!r} has no {protocol} evaluation at "
                    f"L_train={train_length}, so no ratio can be formed"
                )
            base = by_length[train_length]["perplexity"]
            for L, e in by_length.items():
                rows.append(
                    (
                        run["scheme"],
                        run["seed"],
                        train_length,
                        protocol,
                        L,
                        L / train_length,
                        e["perplexity"],
                        e["bits_per_byte"],
                        e["perplexity"] / base,
                    )
                )
    if not rows:
        raise ValueError("results_frame needs at least one result with an evaluation")
    frame = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
    order = {s: i for i, s in enumerate(SCHEMES)}
    protocol_order = {p: i for i, p in enumerate(PROTOCOLS)}
    frame = frame.sort_values(
        ["protocol", "scheme", "seed", "eval_length"],
        key=lambda col: (
            col.map(order)
            if col.name == "scheme"
            else col.map(protocol_order) if col.name == "protocol" else col
        ),
    )
    return frame.reset_index(drop=True)


def ratio_spread(results: Iterable[dict]) -> pd.DataFrame:
    """Spread over seeds of each run's ratio PPL(L) / PPL(L_train), per protocol and L.

    Seed-to-seed differences in a scheme's *level* of perplexity mostly cancel in the
    ratio, because both of its terms come from the same model; so a ratio can be far
    from 1 compared with its own spread even where the levels of two seeds differ by
    more than that distance.

    Args:
        results: result records (several seeds of the same schemes).

    Returns:
        A DataFrame indexed by (``protocol``, ``scheme``, ``multiple``), where
        ``multiple`` = L / L_train > 1, with columns ``mean``, ``std`` (sample standard
        deviation, n − 1; NaN for one seed), ``min``, ``max`` of the per-seed ratio,
        and ``n`` (seeds). Schemes without an evaluation past L_train (the learned
        table) have no rows.

    Raises:
        ValueError: as :func:`results_frame`.
    """
    frame = results_frame(results)
    past = frame[frame["multiple"] > 1]
    grouped = past.groupby(["protocol", "scheme", "multiple"], sort=False)["ratio"]
    return grouped.agg(["mean", "std", "min", "max", "count"]).rename(
        columns={"count": "n"}
    )


def summary_table(
    results: Iterable[dict],
    protocol: str,
    *,
    value: str = "perplexity",
    digits: int = 2,
) -> pd.DataFrame:
    """:func:`summarize` as a DataFrame for display: schemes × lengths, "mean ± std".

    Args:
        results: result records.
        protocol: ``"nonoverlapping"`` or ``"sliding"`` (:data:`PROTOCOLS`).
        value: ``"perplexity"``: mean ± std over seeds of the perplexity at each L (the
            numbers of :func:`summarize`), one column per L in bytes; or ``"ratio"``:
            mean ± std over seeds of each run's PPL(L) / PPL(L_train) (the numbers of
            :func:`ratio_spread`), one column per multiple L / L_train > 1.
        digits: decimals shown.

    Returns:
        A DataFrame of strings indexed by the schemes' display names
        (:func:`~posenc_book.plotting.scheme_label`); "—" where a model has no value
        (the learned table past L_train). A ``"ratio"`` table leaves out schemes with no
        value past L_train. The std shows as 0 for a single seed.

    Raises:
        ValueError: for an unknown ``protocol`` or ``value``, or as
            :func:`results_frame`.
    """
    from posenc_book.plotting import (
        scheme_label,
    )  # plotting imports matplotlib: only here

    if protocol not in PROTOCOLS:
        raise ValueError(
            f"protocol must be one of {PROTOCOLS}, got protocol={protocol!r}"
        )
    if value not in ("perplexity", "ratio"):
        raise ValueError(f"value must be 'perplexity' or 'ratio', got value={value!r}")
    frame = results_frame(results)
    frame = frame[frame["protocol"] == protocol]
    column, column_name = "eval_length", "L (bytes)"
    if value == "ratio":
        frame = frame[frame["multiple"] > 1]
        column, column_name = "multiple", "L / L_train"
    table = mean_spread_table(frame, "scheme", column, value,
                              number=f"{{:.{digits}f}}".format)
    if value == "ratio":
        table.columns = [int(k) if float(k).is_integer() else k for k in table.columns]
    table.index = [scheme_label(s) for s in table.index]
    table.index.name = "scheme"
    table.columns.name = column_name
    return table


def parse_model_setting(text: str) -> tuple[str, object]:
    """``"FIELD=VALUE"`` → ``(FIELD, VALUE)`` for one :class:`~posenc_lib.model.transformer.ModelConfig`
    field; VALUE is read as JSON (``0.02``, ``true``, ``"rope"``), else kept as text.

    Raises:
        ValueError: unless ``text`` is ``FIELD=VALUE`` with FIELD a ModelConfig field
            that a scale does not set itself (the scheme and the model's size).

    Example:
        >>> parse_model_setting("token_init_std=0.02")
        ('token_init_std', 0.02)
    """
    from posenc_lib.model.transformer import ModelConfig

    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise ValueError(f"a model setting must look like FIELD=VALUE, got {text!r}")
    fixed = {"position", "d_model", "num_layers", "num_heads", "max_positions"}
    allowed = sorted(f.name for f in dataclasses.fields(ModelConfig) if f.name not in fixed)
    if name not in allowed:
        raise ValueError(f"FIELD must be one of {allowed} (the scale sets the scheme and "
                         f"the size), got {name!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name, value


# --- Per-seed statistics and tables of the sweep chapter (chapter 09)

PROTOCOL_LABELS: dict[str, str] = {"nonoverlapping": "non-overlapping", "sliding": "sliding"}
"""Display name of each evaluation protocol of :data:`PROTOCOLS`."""


def protocol_tables(results: Iterable[dict], value: str = "perplexity", *, digits: int = 2) -> pd.DataFrame:
    """:func:`summary_table` of both protocols, one above the other.

    Args:
        results: result records (several seeds of the same schemes).
        value: ``"perplexity"`` or ``"ratio"``, as in :func:`summary_table`.
        digits: decimals shown.

    Returns:
        A DataFrame of ``"mean ± std"`` strings indexed by (``protocol``, ``scheme``): the
        protocols' display names (:data:`PROTOCOL_LABELS`) and the schemes'.

    Raises:
        ValueError: as :func:`summary_table`.
    """
    results = list(results)
    return pd.concat(
        {PROTOCOL_LABELS[p]: summary_table(results, p, value=value, digits=digits) for p in PROTOCOLS},
        names=["protocol", "scheme"],
    )


def seed_values(
    results: Iterable[dict], protocol: str, scheme: str, multiple: float = 1, *, value: str = "perplexity"
) -> pd.Series:
    """One number per seed: a scheme's perplexity (or ratio) at L = ``multiple`` × L_train.

    Args:
        results: result records.
        protocol: ``"nonoverlapping"`` or ``"sliding"``.
        scheme: a scheme name of :data:`~posenc_lib.model.transformer.SCHEMES`.
        multiple: L / L_train (1 is L_train itself).
        value: a numeric column of :func:`results_frame`: ``"perplexity"`` (no unit),
            ``"bits_per_byte"`` or ``"ratio"`` (PPL(L) / PPL(L_train) of the same run).

    Returns:
        A float Series indexed by ``seed`` (ascending), named ``value``.

    Raises:
        ValueError: for an unknown ``value``, or if no run of ``scheme`` has an
            evaluation under ``protocol`` at that multiple (e.g. the learned table past
            L_train); as :func:`results_frame`.
    """
    if value not in ("perplexity", "bits_per_byte", "ratio"):
        raise ValueError(f"value must be 'perplexity', 'bits_per_byte' or 'ratio', got value={value!r}")
    frame = results_frame(results)
    rows = frame[(frame.protocol == protocol) & (frame.scheme == scheme) & (frame.multiple == multiple)]
    if rows.empty:
        raise ValueError(
            f"no {protocol!r} evaluation of scheme={scheme!r} at multiple={multiple} in these results"
        )
    return rows.set_index("seed")[value]


def level_spread(results: Iterable[dict], protocol: str, scheme: str) -> float:
    """Relative spread over seeds of a scheme's perplexity at L_train: std / mean.

    The sample standard deviation (n − 1) divided by the mean, no unit; NaN for one seed.

    Raises:
        ValueError: as :func:`seed_values`.
    """
    levels = seed_values(results, protocol, scheme)
    return levels.std() / levels.mean()


def protocol_gap(results: Iterable[dict], scheme: str, multiple: float = 1) -> pd.Series:
    """Per seed: PPL(sliding) / PPL(non-overlapping) − 1 at L = ``multiple`` × L_train.

    Negative where sliding windows (more context for every scored byte) score lower.

    Returns:
        A float Series indexed by ``seed``, no unit (0.01 is 1 %).

    Raises:
        ValueError: as :func:`seed_values` (for either protocol).
    """
    results = list(results)
    sliding = seed_values(results, "sliding", scheme, multiple)
    return sliding / seed_values(results, "nonoverlapping", scheme, multiple) - 1


def relative_gain(results: Iterable[dict], protocol: str, scheme: str,
                  reference: str = "none") -> pd.Series:
    """Per seed: 1 − PPL(scheme) / PPL(reference) at L = L_train, under one protocol.

    Positive where ``scheme`` scores lower than ``reference`` with the same seed (the same
    data order).

    Returns:
        A float Series indexed by ``seed``, no unit (0.01 is 1 %).

    Raises:
        ValueError: as :func:`seed_values` (for either scheme).
    """
    results = list(results)
    return 1 - (seed_values(results, protocol, scheme)
                / seed_values(results, protocol, reference))


def ratio_spread_table(results: Iterable[dict], multiple: float) -> pd.DataFrame:
    """How noisy a ratio is: per protocol and scheme, the spread over seeds of each run's
    PPL(L) / PPL(L_train) at L = ``multiple`` × L_train, beside the relative spread of
    the level at L_train (:func:`level_spread`).

    Returns:
        A DataFrame indexed by (``protocol``, ``scheme``) display names, with columns
        ``ratio at k×: mean``, ``…: std``, ``…: min``, ``…: max`` (k = ``multiple``) and
        ``level at L_train: std / mean``. Schemes with no evaluation at that multiple
        (the learned table) are left out.

    Raises:
        ValueError: as :func:`results_frame`; a KeyError if no run reaches ``multiple``.
    """
    from posenc_book.schemes import scheme_label

    results = list(results)
    spread = ratio_spread(results).xs(float(multiple), level="multiple")
    frame = results_frame(results)
    base = frame[frame.multiple == 1].groupby(["protocol", "scheme"], sort=False)["perplexity"]
    relative = (base.std() / base.mean()).rename("level at L_train: std / mean")
    k = int(multiple) if float(multiple).is_integer() else multiple
    table = spread[["mean", "std", "min", "max"]].add_prefix(f"ratio at {k}×: ").join(relative)
    table.index = table.index.set_names(["protocol", "scheme"]).map(
        lambda key: (PROTOCOL_LABELS[key[0]], scheme_label(key[1]))
    )
    return table


def per_byte(ratio_per_token: float, bytes_per_token: float = WT103_BYTES_PER_TOKEN) -> float:
    """A perplexity ratio per token as the same rise of the loss spread over its bytes.

    Perplexity is exp(mean loss per token), so a ratio ρ per token of ``b`` bytes is
    ρ^(1/b) per byte: exp(ln ρ / b).

    Args:
        ratio_per_token: ρ > 0, no unit.
        bytes_per_token: b > 0 (default :data:`WT103_BYTES_PER_TOKEN`).

    Raises:
        ValueError: unless both are positive.
    """
    if not ratio_per_token > 0:
        raise ValueError(f"ratio_per_token must be > 0, got ratio_per_token={ratio_per_token}")
    if not bytes_per_token > 0:
        raise ValueError(f"bytes_per_token must be > 0, got bytes_per_token={bytes_per_token}")
    return ratio_per_token ** (1 / bytes_per_token)


def press_table(results: Iterable[dict], label: str) -> pd.DataFrame:
    """Press et al.'s ratios beside a sweep's: per protocol and scheme, at about 2× and 4×
    L_train, their PPL(L) / PPL(L_train) per word (:func:`press_ratios`) and per byte
    (:func:`per_byte`, b = :data:`WT103_BYTES_PER_TOKEN`), and the sweep's mean ratio over
    seeds at L = 2 and 4 × L_train (:func:`ratio_spread`).

    Args:
        results: result records with evaluations at 2 and 4 × L_train.
        label: column name of the sweep's ratios (e.g. its scale's name).

    Returns:
        A float DataFrame indexed by (protocol, scheme) display names, with columns
        (``"2×"`` or ``"4×"``, ``"Press, per word"`` / ``"Press, per byte"`` / ``label``);
        NaN where Press et al. report no value (RoPE with sliding windows).

    Raises:
        ValueError: as :func:`results_frame`; a KeyError if a scheme of
            :data:`PRESS2022_PERPLEXITY` has no evaluation at 2 or 4 × L_train.
    """
    from posenc_book.schemes import scheme_label

    spread = ratio_spread(results)
    press = press_ratios()
    rows = {}
    for p in PROTOCOLS:
        for s in PRESS2022_PERPLEXITY["nonoverlapping"]:
            theirs = press[p].get(s, (float("nan"), float("nan")))
            row = {}
            for i, k in enumerate((2, 4)):
                row[(f"{k}×", "Press, per word")] = theirs[i]
                row[(f"{k}×", "Press, per byte")] = per_byte(theirs[i]) if theirs[i] > 0 else float("nan")
                row[(f"{k}×", label)] = spread.loc[(p, s, float(k)), "mean"]
            rows[(PROTOCOL_LABELS[p], scheme_label(s))] = row
    table = pd.DataFrame(rows).T
    table.index.names = ["protocol", "PPL(L) / PPL(L_train)"]
    return table


def seed_table(frame: pd.DataFrame, multiple: float, values: str = "ratio",
               protocol: str = "nonoverlapping", *, index: str | list[str] = "scheme",
               order=None) -> pd.DataFrame:
    """One value per scheme and seed at one evaluation length, from :func:`results_frame`.

    Args:
        frame: :func:`results_frame` of some runs (with any columns added, e.g. the
            token-embedding start of each run).
        multiple: L / L_train of the evaluation (1 for L_train, 16 for 16 L_train).
        values: the column to show: ``"ratio"``, ``"perplexity"`` or ``"bits_per_byte"``.
        protocol: ``"nonoverlapping"`` or ``"sliding"``.
        index: the column, or columns, naming a row: ``"scheme"``, or e.g.
            ``["scheme", "start"]``.
        order: the row keys to show, in this order (a list, or a ``pandas.MultiIndex``
            for several index columns; a key with no run gives a row of NaN); by
            default every key, sorted.

    Returns:
        A DataFrame indexed by ``index``, one column per ``seed`` (sorted).

    Raises:
        ValueError: for an unknown ``values`` column, or no row at ``multiple`` under
            ``protocol``.
        KeyError: for an ``index`` column the frame does not have.
    """
    if values not in ("ratio", "perplexity", "bits_per_byte"):
        raise ValueError(f"values must be 'ratio', 'perplexity' or 'bits_per_byte', "
                         f"got values={values!r}")
    rows = frame[(frame["protocol"] == protocol) & (frame["multiple"] == multiple)]
    if rows.empty:
        raise ValueError(f"no evaluation at multiple={multiple} under "
                         f"protocol={protocol!r}")
    table = rows.pivot_table(index=index, columns="seed", values=values)
    return table if order is None else table.reindex(order)
