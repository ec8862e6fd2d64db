"""How far do the book's trained models move when PyTorch's CPU kernels change?

PyTorch picks vectorised CPU kernels by the processor's instruction set (AVX-512, AVX2, or
plain C); the environment variable ``ATEN_CPU_CAPABILITY`` forces one, which changes the
rounding of every sum and so simulates another CPU on one machine. Train the same models under
two capabilities (each into its own model cache, e.g. by running the notebooks), measure each
cache under the capability that trained it, then compare:

    ATEN_CPU_CAPABILITY=avx512  python tools/capability_drift.py measure CACHE_A a.json
    ATEN_CPU_CAPABILITY=default python tools/capability_drift.py measure CACHE_B b.json
    python tools/capability_drift.py compare a.json b.json

``measure`` reads every model in a cache (``posenc_lib.training.store``), and records, at full
precision: the last training loss, the mean training loss over the last 10 % of steps and,
for plainly trained models (not fine-tunes), the validation perplexity at L_train and at
16 L_train (non-overlapping windows over the first 16 384 bytes). ``compare`` prints, for the
models both caches hold, the relative change |b − a| / a of each number, and its largest value.
The book prints trained-model numbers at a precision this change does not flip
(``book/how_to_run.md``).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch

from posenc_lib import TrainConfig, TransformerLM, evaluate_perplexity, load_corpus

EVAL_TOKENS = 16_384  # the same span of validation bytes at every length
LENGTH_FACTORS = (1, 16)  # L_train and 16 L_train


def _measure_one(path: Path) -> dict:
    saved = torch.load(path, map_location="cpu", weights_only=True)
    config = json.loads(saved["config"])
    losses = json.loads(saved["record"])["losses"]
    tail = losses[-max(1, len(losses) // 10):]
    row = {"last_loss": losses[-1], "tail_mean_loss": sum(tail) / len(tail)}
    if "base" not in config:  # a plainly trained model: evaluate it too
        train_config = TrainConfig.from_dict(config)
        model = TransformerLM(train_config.model)
        model.load_state_dict(saved["state_dict"])
        model.eval()
        validation = load_corpus(train_config.corpus).validation
        for factor in LENGTH_FACTORS:
            length = factor * train_config.seq_len
            if train_config.model.position == "learned" and length > train_config.model.max_positions:
                continue  # a learned table has no rows past its length
            result = evaluate_perplexity(model, validation, length, max_tokens=EVAL_TOKENS)
            row[f"ppl_{factor}x"] = result.perplexity
    return row


def measure(cache: Path, out: Path) -> None:
    """Measure every model in ``cache``; write them with the capability to ``out`` (JSON)."""
    files = sorted(cache.glob("*.pt"))
    if not files:
        raise SystemExit(f"no models (*.pt) in {cache}")
    if out.exists():
        raise SystemExit(f"{out} exists; choose another name (results are never overwritten)")
    rows = {}
    for i, path in enumerate(files, 1):
        rows[path.stem] = _measure_one(path)
        print(f"[{i}/{len(files)}] {path.stem}", file=sys.stderr)
    record = {
        "capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "processor": platform.processor() or platform.machine(),
        "cache": str(cache),
        "models": rows,
    }
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{len(rows)} models measured under {record['capability']} -> {out}")


def relative_changes(a: dict, b: dict) -> dict[str, dict[str, float]]:
    """{model: {metric: |b − a| / |a|}} over the models and metrics both records hold."""
    changes = {}
    for name in sorted(set(a["models"]) & set(b["models"])):
        ma, mb = a["models"][name], b["models"][name]
        changes[name] = {metric: abs(mb[metric] - ma[metric]) / abs(ma[metric])
                         for metric in ma if metric in mb and ma[metric] != 0}
    return changes


def compare(path_a: Path, path_b: Path) -> None:
    a, b = json.loads(path_a.read_text()), json.loads(path_b.read_text())
    changes = relative_changes(a, b)
    if not changes:
        raise SystemExit("the two records share no model")
    print(f"{a['capability']} ({path_a.name}) against {b['capability']} ({path_b.name}): "
          f"{len(changes)} models in both")
    metrics = sorted({m for row in changes.values() for m in row})
    print(f"{'model':<32}" + "".join(f"{m:>16}" for m in metrics))
    for name, row in changes.items():
        print(f"{name:<32}" + "".join(f"{row[m]:>16.1e}" if m in row else f"{'—':>16}"
                                      for m in metrics))
    for m in metrics:
        values = [row[m] for row in changes.values() if m in row]
        print(f"largest relative change of {m}: {max(values):.1e} ({len(values)} models)")
    largest = max(v for row in changes.values() for v in row.values())
    print(f"largest relative change of any number: {largest:.1e}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="measure every model in a cache")
    m.add_argument("cache", type=Path)
    m.add_argument("out", type=Path)
    c = sub.add_parser("compare", help="relative changes between two measurements")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "measure":
        measure(args.cache, args.out)
    else:
        compare(args.a, args.b)


if __name__ == "__main__":
    main()
