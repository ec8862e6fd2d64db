"""Perplexity by position of a pretrained model over one long text, per RoPE method: the
command line of :mod:`posenc_lib.pretrained.long_context`.

    PYTHONPATH=. python tools/runs/long_context.py run --tokens 16384 --block 2048 \\
        --out results/pretrained/smollm2-persuasion-16384
    PYTHONPATH=. python tools/runs/long_context.py table \\
        --out results/pretrained/smollm2-persuasion-16384
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from posenc_lib.pretrained.long_context import (
    DTYPES,
    METHODS,
    format_block_table,
    load_long_context_results,
    plan,
    run_long_context,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python tools/runs/long_context.py",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="score a long text once per method; "
                         "resumes from finished methods")
    run.add_argument("--tokens", type=int, default=16384,
                     help="tokens scored from the start of the text")
    run.add_argument("--block", type=int, default=2048,
                     help="positions per reported block")
    run.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    run.add_argument("--factor", type=float, default=None,
                     help="κ (default: tokens / 8192, at least 1)")
    run.add_argument("--book", default="persuasion",
                     help="an Austen novel shipped with posenc_lib")
    run.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    run.add_argument("--device", default=None,
                     help="cpu, cuda, … (default: CUDA when present)")
    run.add_argument("--out", required=True, help="results directory")
    run.add_argument("--overwrite", action="store_true",
                     help="rerun methods that already have a file")
    run.add_argument("--no-progress", action="store_true")
    table = sub.add_parser("table", help="print perplexity per block of stored results")
    table.add_argument("--out", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python tools/runs/long_context.py``; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "table":
        print(format_block_table(load_long_context_results(args.out)))
        return 0
    runs = plan(args.methods, args.tokens, args.block, args.factor, args.book,
                args.dtype)
    start = time.perf_counter()
    results = run_long_context(runs, args.out, device=args.device,
                               overwrite=args.overwrite, progress=not args.no_progress)
    print(format_block_table(results))
    wall = time.perf_counter() - start
    print(f"\n{len(results)} methods in {args.out} ({wall:.0f} s wall in this call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
