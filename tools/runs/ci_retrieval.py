"""Make the runs stored in results/ci-retrieval/: passkey retrieval and copy gain of the ci models,
plain and trained with passkey windows in the mixture (issue 25).

Run from the repository root, one thread, CPU, e.g.

    PYTHONPATH=. POSENC_DEVICE=cpu OMP_NUM_THREADS=1 \\
        python tools/runs/ci_retrieval.py --fraction 0.25 --steps 300 --seeds 0 1

``--fraction 0`` with the ci budget (300 steps) evaluates the plain ci models (loaded
with train_cached: a fraction-0 mixture run is the plain run exactly). ``--quick``
measures passkey accuracy at L_train only (the recipe search); without it every run is
measured at L = 1, 2, 4, 8, 16 × L_train, five key depths, and the copy gain against r.
Each run writes one JSON file (configuration, results, provenance); finished runs are
skipped unless a full run replaces a quick one.
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

from posenc_lib import get_scale, load_corpus, train_cached
from posenc_lib.training.store import passkey_mix_cache_key, passkey_mix_cached
from posenc_lib.training.evaluate import evaluate_perplexity
from posenc_lib.records import provenance, write_json_atomic
from posenc_lib.model.transformer import SCHEMES
from posenc_lib.tasks.retrieval import (
    MARKED_TEMPLATE,
    PasskeyMixConfig,
    PasskeyTemplate,
    byte_encode,
    copy_gain,
    passkey_accuracy,
)

OUT = Path(__file__).resolve().parents[2] / "results" / "ci-retrieval"
CI = get_scale("ci")
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
TRIALS = 32  # passkey windows per (L, depth) and seed
SPAN = 32  # copied span, bytes
DISTANCES = (32, 64, 96, 224, 480, 992, 2016)  # r, start to start
COPY_WINDOWS = 32
TEMPLATES = {"text": PasskeyTemplate(), "marked": MARKED_TEMPLATE}


def run(scheme: str, seed: int, args: argparse.Namespace) -> dict:
    fraction, steps, quick = args.fraction, args.steps, args.quick
    base = dataclasses.replace(CI.train_config(scheme, seed), steps=steps)
    if args.learned_init != "normal" and scheme == "learned":
        model = dataclasses.replace(base.model, learned_init=args.learned_init)
        base = dataclasses.replace(base, model=model)
    config = PasskeyMixConfig(base, fraction, template=TEMPLATES[args.template],
                              answer_weight=args.answer_weight,
                              repeat_fraction=args.repeat_fraction)
    test = load_corpus(base.corpus).test
    start = time.perf_counter()
    if fraction == 0:  # the plain ci model (a fraction-0 mixture run is the same run)
        model, record = train_cached(base, "cpu", progress=False)
    else:
        model, record = passkey_mix_cached(config, "cpu", progress=False)
    train_wall = time.perf_counter() - start
    lengths = (CI.seq_len,) if quick else CI.eval_lengths
    start = time.perf_counter()
    passkey = passkey_accuracy(model, byte_encode, lengths, DEPTHS, trials=TRIALS,
                               seed=seed, filler=test, template=config.template)
    copies = [] if quick else copy_gain(model, test, lengths, DISTANCES, span=SPAN,
                                        windows=COPY_WINDOWS, seed=seed)
    ppl = evaluate_perplexity(model, test, CI.seq_len, max_tokens=CI.sweep_eval_tokens)
    eval_wall = time.perf_counter() - start
    return {
        "format": 1,
        "name": name(scheme, seed, args),
        "recipe": config.to_dict(),
        "model_cache_key": passkey_mix_cache_key(config, "cpu") if fraction else None,
        "quick": quick,
        "passkey_protocol": {
            "filler": "test split (Persuasion), a fresh random offset per window",
            "depths": list(DEPTHS), "trials_per_cell": TRIALS, "key_digits": 5,
            "scoring": "exact match of all 5 key bytes under greedy decoding",
            "draw_seed": seed,
        },
        "copy_protocol": None if quick else {
            "stream": "test split (Persuasion)", "span": SPAN,
            "distances": list(DISTANCES), "windows": COPY_WINDOWS,
            "scored": "predictions of span bytes 1 .. span-1 (nats per byte)",
            "control": "nll_unseen: the repeat scored with the first occurrence replaced "
                       "by other test text",
            "draw_seed": seed,
        },
        "passkey": passkey,
        "copy_gain": copies,
        "test_nll_at_L_train": {"nll": ppl.nll, "tokens_scored": ppl.tokens_scored,
                                "protocol": "non-overlapping, first 16384 test bytes"},
        "train": {"final_loss": record.losses[-1],
                  "mean_loss_last_20": sum(record.losses[-20:]) / 20,
                  "num_parameters": record.num_parameters,
                  "train_tokens": steps * base.batch_size * base.seq_len},
        "timing": {"train_or_load_wall_s": train_wall, "eval_wall_s": eval_wall,
                   "recorded_train_wall_s": record.wall_time_s},
        "provenance": provenance("cpu"),
    }


def name(scheme: str, seed: int, args: argparse.Namespace) -> str:
    if args.fraction == 0:
        return f"{scheme}-plain-steps{args.steps}-seed{seed}"
    init = "" if args.learned_init == "normal" else f"-init{args.learned_init[:3]}"
    return (f"{scheme}{init}-{args.template}-mix{args.fraction:g}"
            f"-rep{args.repeat_fraction:g}-w{args.answer_weight:g}-steps{args.steps}"
            f"-seed{seed}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fraction", type=float, required=True)
    parser.add_argument("--steps", type=int, default=CI.steps)
    parser.add_argument("--schemes", nargs="+", default=list(SCHEMES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--template", choices=sorted(TEMPLATES), default="text")
    parser.add_argument("--answer-weight", type=float, default=0.0)
    parser.add_argument("--repeat-fraction", type=float, default=0.0)
    parser.add_argument("--learned-init", choices=("normal", "sinusoidal"), default="normal",
                        help="start of the learned table (learned scheme only)")
    args = parser.parse_args()
    for seed in args.seeds:
        for scheme in args.schemes:
            path = OUT / f"{name(scheme, seed, args)}.json"
            if path.exists():
                old = json.loads(path.read_text())
                if args.quick or not old["quick"]:
                    continue
            result = run(scheme, seed, args)
            write_json_atomic(path, result)
            at_train = [r["accuracy"] for r in result["passkey"] if r["length"] == CI.seq_len]
            print(path.name, "passkey@L_train", at_train,
                  "train s", round(result["timing"]["train_or_load_wall_s"]), flush=True)


if __name__ == "__main__":
    main()
