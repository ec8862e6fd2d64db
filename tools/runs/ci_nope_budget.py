"""Make the runs stored in results/ci-nope-budget/: NoPE and ALiBi at the ci scale, 1x, 3x and 6x the
ci training steps, seeds 0 and 1 (chapter 08, "A longer training budget").

Run from the repository root, one thread, CPU:

    PYTHONPATH=. POSENC_DEVICE=cpu OMP_NUM_THREADS=1 \
        python tools/runs/ci_nope_budget.py

Each run trains through posenc_lib.train_cached (so chapter 08 loads the same models from
the cache), is evaluated by posenc_lib.tasks.sweep.run_one at L = 128 ... 2048 with both
protocols over the chapter's 65 536 test bytes, and gets an "extra" block with chapter
08's two measurements of where the loss comes from: the mean loss over ranges of
positions t (per_position_nll) and the cost of swapping the two bytes before t.
Finished runs are skipped, so the script resumes.
"""

import dataclasses
import json
from pathlib import Path

import torch

from posenc_lib import get_scale, load_corpus, sample_batch, train_cached
from posenc_lib.training.evaluate import per_position_nll, swap_cost
from posenc_lib.records import write_json_atomic
from posenc_lib.tasks.sweep import RunSpec, run_one

OUT = Path(__file__).resolve().parents[2] / "results" / "ci-nope-budget"
CI = get_scale("ci")
MULTIPLES = (1, 3, 6)  # of the ci budget, 300 steps
SEEDS = (0, 1)
SCHEMES = ("none", "alibi")
SWAP_POSITIONS = (8, 64, CI.seq_len - 1)


def budget_scale(multiple: int):
    steps = multiple * CI.steps  # warm-up and every other setting unchanged
    return dataclasses.replace(CI, name=f"ci-steps{steps}", steps=steps, sweep_eval_tokens=None)


def extra(model, scale):
    corpus = load_corpus(scale.corpus)
    span = corpus.test[: scale.eval_tokens + 1]  # chapter 2's and chapter 8's test span
    L = scale.seq_len
    short = per_position_nll(model, span, L)
    long = per_position_nll(model, span, 16 * L)
    edges = [0, 8, 32, L, 4 * L, 16 * L]
    ranges = {}
    for lo, hi in zip(edges[:-1], edges[1:]):
        curve = short if hi <= L else long  # windows of L_train inside it, long ones past
        ranges[f"{lo}-{hi}"] = curve[lo:hi].mean().item()
    generator = torch.Generator().manual_seed(0)
    inputs, targets = sample_batch(corpus.test, 256, L, generator)
    return {
        "test_span_bytes": scale.eval_tokens,
        "nll_by_position_range": ranges,
        "nll_by_position_range_note": (
            "mean NLL (nats/byte) over positions lo <= t < hi; ranges below L_train from "
            "non-overlapping windows of L_train, ranges past it from windows of 16 L_train"
        ),
        "swap_cost": {str(t): swap_cost(model, inputs, targets, t) for t in SWAP_POSITIONS},
        "swap_cost_note": (
            "mean rise of the NLL (nats) of the byte after t when bytes t-1 and t-2 are "
            "swapped; 256 test windows of L_train drawn with torch.Generator().manual_seed(0)"
        ),
    }


def main():
    for multiple in MULTIPLES:
        scale = budget_scale(multiple)
        for seed in SEEDS:
            for scheme in SCHEMES:
                spec = RunSpec(scale, scheme, seed, scale.seq_len)
                path = OUT / f"{scheme}-steps{scale.steps}-seed{seed}.json"
                if path.exists():
                    continue
                result = run_one(spec, "cpu", progress=False)
                model, _ = train_cached(spec.train_config(), "cpu", progress=False)
                result["extra"] = extra(model, scale)
                write_json_atomic(path, result)
                print(path.name, json.dumps(result["extra"]["nll_by_position_range"]),
                      flush=True)


if __name__ == "__main__":
    main()
