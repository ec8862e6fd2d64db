"""``python -m tools.benchmarks {rope,attention,model,all}``: run suites, print tables, save
JSON."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import torch

from tools.benchmarks.common import Rounds, finish_record, save, show, start_record
from posenc_lib.training.device import pick_device

SUITES = {  # suite name -> (module in tools/benchmarks/, title of its table)
    "rope": (
        "rope",
        "RoPE application: time, achieved bandwidth, fraction of memory bandwidth",
    ),
    "attention": ("attention", "attention per scheme: time and peak memory against L"),
    "model": (
        "throughput",
        "the book's model: tokens/s per scheme, training and evaluation",
    ),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.benchmarks",
        description="What each positional encoding costs, measured side by side.",
    )
    parser.add_argument("suite", choices=[*SUITES, "all"], help="which suite to run")
    parser.add_argument(
        "--device", default=None, help="cpu, cuda, … (default: CUDA if present)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed rounds per variant (default 7; 3 with --quick)",
    )
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    parser.add_argument(
        "--quick", action="store_true", help="fewer sizes, for a smoke test"
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="leave out torch.compile (RoPE) and FlexAttention (attention)",
    )
    parser.add_argument(
        "--out", default="results/benchmarks", help="folder for the JSON"
    )
    parser.add_argument(
        "--no-save", action="store_true", help="print only, write no JSON"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "--label",
        default=None,
        help="a note stored with the results (e.g. which library version)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the chosen suites; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    device = torch.device(args.device) if args.device else pick_device()
    repeats = args.repeats or (3 if args.quick else 7)
    rounds = Rounds(device, repeats, args.warmup, quick=args.quick, progress=not args.no_progress)
    for name in SUITES if args.suite == "all" else [args.suite]:
        module_name, title = SUITES[name]
        module = importlib.import_module(f"tools.benchmarks.{module_name}")
        extra = {}
        if name == "rope":
            extra["compile_kernel"] = not args.no_compile
        if name == "attention":
            extra["flex"] = not args.no_compile
        record = start_record(name, device, {}, argv)
        config, rows = module.run(rounds, **extra)
        record["config"] = config
        record["label"] = args.label
        finish_record(record, rows)
        print(show(rows, module.COLUMNS, f"{title} ({device.type})"))
        if not args.no_save:
            print(f"saved {save(record, Path(args.out))}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
