"""Train short, test long, at scale: the command line of :mod:`posenc_lib.tasks.sweep`.

    PYTHONPATH=. python tools/runs/sweep.py sweep --config ci --out results/ci
    PYTHONPATH=. python tools/runs/sweep.py table --out results/ci

A controlled variant of a scale changes one ModelConfig field for every run with
``--model FIELD=VALUE`` (stored in the runs' ``scale.model_extra``); give each variant
its own ``--out``::

    PYTHONPATH=. python tools/runs/sweep.py sweep --config ci --schemes sinusoidal rope \\
        --seeds 0 1 --model token_init_std=0.02 --out results/ci-token-std0.02

``--shard K/N`` runs one shard of the plan (:func:`posenc_lib.tasks.sweep.shard_runs`),
e.g. one per task of a Slurm array, into a shared results folder; the module's docstring
says why that is safe.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Sequence

from posenc_book.stored import load_results, summarize
from posenc_lib.model.transformer import SCHEMES
from posenc_lib.tasks.sweep import format_table, parse_model_setting, parse_shard, plan_sweep, run_sweep, shard_runs
from posenc_lib.training.scales import get_scale


def _model_setting_argument(text: str) -> tuple[str, object]:
    try:
        return parse_model_setting(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _shard_argument(text: str) -> tuple[int, int]:
    try:
        return parse_shard(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python tools/runs/sweep.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sweep = sub.add_parser("sweep",
                           help="train and evaluate schemes × seeds × L_train; resumes from finished runs")
    sweep.add_argument("--config", default="ci",
                       help="scale: ci (2 CPU cores, minutes), book (CPU, <= 30 min), gpu (one GPU)")
    sweep.add_argument("--out", default=None, help="results directory (default results/<config>)")
    sweep.add_argument("--schemes", nargs="+", choices=SCHEMES, default=None, help="default: all six")
    sweep.add_argument("--seeds", nargs="+", type=int, default=None, help="default: the scale's seeds")
    sweep.add_argument("--train-lengths", nargs="+", type=int, default=None,
                       help="L_train values (default: the scale's)")
    sweep.add_argument("--device", default=None, help="cpu, cuda, … (default: CUDA when present)")
    sweep.add_argument("--overwrite", action="store_true",
                       help="rerun and replace runs that already have a result file")
    sweep.add_argument("--no-cache", action="store_true", help="always train (do not use the model cache)")
    sweep.add_argument("--no-progress", action="store_true", help="no progress bars")
    sweep.add_argument(
        "--shard", type=_shard_argument, default=None, metavar="K/N",
        help="run only shard K of N (1 <= K <= N): runs K-1, K-1+N, ... of the plan; "
        "N workers with K = 1 ... N run every run once (e.g. a Slurm array)",
    )
    sweep.add_argument(
        "--model", type=_model_setting_argument, action="append", default=[],
        metavar="FIELD=VALUE",
        help="set a ModelConfig field for every run (repeatable), e.g. "
        "token_init_std=0.02; stored in the runs' scale.model_extra",
    )
    table = sub.add_parser("table", help="print mean ± std perplexity of the results in a directory")
    table.add_argument("--out", required=True, help="results directory")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python tools/runs/sweep.py``; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "table":
        print(format_table(summarize(load_results(args.out))))
        return 0
    scale = get_scale(args.config)
    if args.model:
        extra = {**scale.model_extra, **dict(args.model)}
        scale.train_config(SCHEMES[0], **extra)  # a bad value fails here, naming its field
        scale = dataclasses.replace(scale, model_extra=extra)
    runs = plan_sweep(scale, schemes=args.schemes, seeds=args.seeds, train_lengths=args.train_lengths)
    if args.shard is not None:
        runs = shard_runs(runs, *args.shard)
    out = args.out or os.path.join("results", args.config)
    start = time.perf_counter()
    results = run_sweep(runs, out, device=args.device, overwrite=args.overwrite, use_cache=not args.no_cache,
                        progress=not args.no_progress)
    print(format_table(summarize(results)))
    print(f"\n{len(results)} runs in {out} ({time.perf_counter() - start:.0f} s wall for this invocation)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
