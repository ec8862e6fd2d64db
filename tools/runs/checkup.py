"""A positional check-up of a checkpoint: the command line of :mod:`posenc_lib.pretrained.checkup`.

    PYTHONPATH=. python tools/runs/checkup.py --gguf shipped --out results/pretrained/smollm2-checkup.json \\
        --stored-extension results/pretrained/smollm2-persuasion-16384 \\
        results/pretrained/smollm2-persuasion-16384-dynamic-factor1
    PYTHONPATH=. python tools/runs/checkup.py --hf-dir PATH/TO/MODEL --context-length 4096
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from posenc_lib.pretrained.checkup import checkup, load_model, rope_settings, stored_extension, trained_context
from posenc_lib.pretrained.loading import text_tokens
from posenc_lib.records import provenance, write_json_atomic
from posenc_lib.training.data import read_austen_book


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python tools/runs/checkup.py",
                                     description="A positional check-up of a model.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--gguf", help="a .gguf file, or 'shipped' (the book's SmolLM2)")
    source.add_argument("--hf-dir", help="a Hugging Face model folder")
    parser.add_argument("--out", help="write the report here (JSON)")
    parser.add_argument("--context-length", type=int, default=None)
    parser.add_argument("--book", default="persuasion", help="an Austen novel")
    parser.add_argument("--usage-tokens", type=int, default=256)
    parser.add_argument("--stored-extension", nargs="+", default=None,
                        help="folders of chapter 11's stored runs to report from (a "
                             "later folder's method replaces an earlier one's)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python tools/runs/checkup.py``; returns the exit status."""
    args = _parser().parse_args(argv)
    started = provenance("cpu")
    clock = time.perf_counter()
    model, tokenizer = load_model(gguf=args.gguf, hf_dir=args.hf_dir)
    load_s = time.perf_counter() - clock
    text = text_tokens(tokenizer, read_austen_book(args.book).decode(),
                       args.usage_tokens)
    settings = rope_settings(model)
    context = trained_context(settings, args.context_length)
    extension = (stored_extension(args.stored_extension, context)
                 if args.stored_extension else None)
    report = checkup(model, text, context_length=context,
                     usage_tokens=args.usage_tokens, extension=extension)
    report["seconds"]["load"] = load_s
    report["source"] = {"gguf": args.gguf, "hf_dir": args.hf_dir, "book": args.book,
                        "stored_extension": args.stored_extension}
    report["provenance"] = started
    for key, value in report["layout"]["differences"].items():
        print(f"layout probe, {key}: relative difference {value:.2g}")
    print(f"layout in use: {report['layout']['layout']}; posenc_lib's RoPE "
          f"reproduces the logits to {report['layout']['logit_difference']:.2g}")
    print(f"critical pair i_c = {report['critical_pair']['pair']}, "
          f"positional heads: {len(report['pairs']['positional_heads'])}")
    if args.out:
        write_json_atomic(Path(args.out), report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
