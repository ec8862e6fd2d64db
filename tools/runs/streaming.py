"""SmolLM2 over one novel with each streaming cache (StreamingLLM), and with its whole
context: the command line of :func:`posenc_lib.pretrained.streaming.run_pretrained_streaming`.

    PYTHONPATH=. python tools/runs/streaming.py --out FILE [--tokens N --cache C --sinks S --block B --book NAME]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from posenc_lib.pretrained.streaming import run_pretrained_streaming


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python tools/runs/streaming.py``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python tools/runs/streaming.py",
                                     description=run_pretrained_streaming.__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--cache", type=int, default=1024)
    parser.add_argument("--sinks", type=int, default=4)
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--book", default="persuasion")
    args = parser.parse_args(argv)
    run_pretrained_streaming(args.out, num_tokens=args.tokens, cache=args.cache,
                             sinks=args.sinks, block=args.block, book=args.book)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
