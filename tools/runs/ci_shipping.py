"""The runs of chapter 14, "RoPE as models ship it" (issue 26, part 2).

Run from the repository root, one thread, CPU:

    PYTHONPATH=. POSENC_DEVICE=cpu OMP_NUM_THREADS=1 \
        python tools/runs/ci_shipping.py

Every variant is the ci model (d_model 64, 4 heads, head_dim 16, L_train 128, 300
steps, Austen) with 4 layers instead of 2, so that a "every 4th layer" pattern has a
layer to act on. Each is trained through posenc_lib.train_cached and scored with
non-overlapping windows (nats per byte; the same test bytes for every variant) at
L = 128 … 2048. The core comparisons run first for every seed, then the intermediate
rotated fractions (0.5, 0.75), so that a cut run still holds whole comparisons.

Three kinds of run, one JSON file each (never overwritten: finished runs are skipped,
so the script resumes where it stopped):

* "trained": a variant trained from scratch (partial rotation, NoPE layers, sliding
  windows, per-layer-type bases);
* "eval-only": a trained model read with another rule, no parameter changed (static
  NTK and a raised base zero-shot; the logit scalings);
* "fine-tuned": the trained RoPE model fine-tuned at 4 L_train with chapter 11's budget
  (15 steps of 8 windows of 512 bytes: 5 % of the pretraining bytes, peak lr 1e-3)
  under PI, YaRN, dynamic NTK (chapter 11's fine_tune_config) or a raised base (ABF).
"""

import dataclasses
import sys
import time
from pathlib import Path

from posenc_lib import (
    FineTuneConfig,
    TransformerLM,
    every_kth_layer,
    evaluate_perplexity,
    fine_tune_cached,
    get_scale,
    load_corpus,
    stretched_fine_tune,
    train_cached,
    with_rope_scaling,
)
from posenc_lib.records import provenance, write_json_atomic

OUT = Path(__file__).resolve().parents[2] / "results" / "ci-shipping"
CI = dataclasses.replace(get_scale("ci"), name="ci-4layers", num_layers=4)
SEEDS = tuple(int(s) for s in sys.argv[1:]) or (0, 1)
LENGTHS = (128, 256, 512, 1024, 2048)
WINDOW = 32  # sliding window of the local layers: L_train / 4
SLIDING = ("sliding_attention",) * 3 + ("full_attention",)
NOPE_4TH = every_kth_layer(4, 4)  # layer 3: SmolLM3's pattern at this depth
FT_LENGTH = 4 * CI.seq_len
KAPPA = FT_LENGTH / CI.seq_len
ABF_BASE = 500000.0  # Xiong et al. 2023 raise Llama 2's base 10 000 to 500 000

# name -> (position, ModelConfig overrides); the core comparisons first
VARIANTS = {
    "rope": ("rope", {}),
    "nope": ("none", {}),
    "neox-0.25": ("rope", {"rope_fraction": 0.25}),
    "p_rope-0.25": ("rope", {"rope_fraction": 0.25, "rope_fraction_form": "p_rope"}),
    "smollm3-nope-every-4th": ("rope", {"nope_layers": NOPE_4TH}),
    # iRoPE / RNoPE-SWA: local RoPE layers, a global NoPE layer
    "irope": ("rope", {"nope_layers": NOPE_4TH, "layer_types": SLIDING,
                       "sliding_window": WINDOW}),
    # Gemma 3: local layers base 1e4, the global layer base 1e6
    "gemma3-bases": ("rope", {"layer_types": SLIDING, "sliding_window": WINDOW,
                              "rope_scaling": {
                                  "sliding_attention": {"rope_theta": 10000.0},
                                  "full_attention": {"rope_theta": 1000000.0}}}),
    # the intermediate fractions come last: the first to cut if time runs short
    "neox-0.5": ("rope", {"rope_fraction": 0.5}),
    "p_rope-0.5": ("rope", {"rope_fraction": 0.5, "rope_fraction_form": "p_rope"}),
    "neox-0.75": ("rope", {"rope_fraction": 0.75}),
    "p_rope-0.75": ("rope", {"rope_fraction": 0.75, "rope_fraction_form": "p_rope"}),
    # the control for chapter 10's critical pair: keeps pairs 0-2 (those that complete a
    # turn within L_train), so it differs from p_rope-0.5 in pair 3 alone
    "p_rope-0.375": ("rope", {"rope_fraction": 0.375, "rope_fraction_form": "p_rope"}),
}
LATER = ["neox-0.5", "p_rope-0.5", "neox-0.75", "p_rope-0.75", "p_rope-0.375"]

# a raised base, written as a per-layer-type entry (every layer is full attention):
# ModelConfig.rope_base stays 10 000 and the entry's rope_theta overrides it
ABF = {"full_attention": {"rope_type": "default", "rope_theta": ABF_BASE}}

# evaluation only: name -> (trained variant, rope_scaling or None, logit_scaling or None)
EVAL_ONLY = {
    "rope+static-ntk": ("rope", {"rope_type": "ntk", "factor": KAPPA}, None),
    "rope+abf-zero-shot": ("rope", ABF, None),
    "rope+qwen-logn": ("rope", None, {"kind": "log_length",
                                      "original_max_position_embeddings": CI.seq_len}),
    "smollm3+llama4-temperature": ("smollm3-nope-every-4th", None,
                                   {"kind": "llama4_temperature",
                                    "floor_scale": CI.seq_len, "attn_scale": 0.1}),
}


def fine_tune_config(seed: int, method: str) -> FineTuneConfig:
    """Chapter 11's fine-tuning budget and methods; "abf" raises the base instead."""
    config = stretched_fine_tune(CI.train_config("rope", seed),
                                 "none" if method == "abf" else method, FT_LENGTH / CI.seq_len)
    return dataclasses.replace(config, rope_scaling=ABF) if method == "abf" else config


FINE_TUNES = ("abf", "linear", "yarn", "dynamic")


def evaluate(model, test) -> list[dict]:
    return [evaluate_perplexity(model, test, L, max_tokens=CI.sweep_eval_tokens).to_dict()
            for L in LENGTHS]


def write(path: Path, record: dict, started: float) -> None:
    record["wall_s"] = round(time.perf_counter() - started, 1)
    record["provenance"] = provenance("cpu")
    write_json_atomic(path, record)
    print(f"{time.strftime('%H:%M:%S')} {path.name} {record['wall_s']} s", flush=True)


def fine_tunes(seed: int, test) -> None:
    for method in FINE_TUNES:
        path = OUT / f"rope+ft-{method}-seed{seed}.json"
        if path.exists():
            continue
        started = time.perf_counter()
        ft = fine_tune_config(seed, method)
        tuned, record = fine_tune_cached(ft, "cpu", progress=False)
        write(path, {"kind": "fine-tuned", "variant": f"rope+ft-{method}",
                     "method": method, "seed": seed, "scale": CI.name,
                     "fine_tune_config": ft.to_dict(), "final_loss": record.losses[-1],
                     "evaluations": evaluate(tuned, test)}, started)


def eval_only(trained: str, base: TransformerLM, seed: int, test) -> None:
    for name, (source, rope_scaling, logit_scaling) in EVAL_ONLY.items():
        path = OUT / f"{name}-seed{seed}.json"
        if source != trained or path.exists():
            continue
        started = time.perf_counter()
        if rope_scaling is not None:
            model = with_rope_scaling(base, rope_scaling)
        else:
            config = dataclasses.replace(base.config, logit_scaling=logit_scaling)
            model = TransformerLM(config)
            model.load_state_dict(base.state_dict())  # no parameters are added
        write(path, {"kind": "eval-only", "variant": name, "seed": seed,
                     "scale": CI.name, "trained_variant": trained,
                     "model_config": model.config.to_dict(),
                     "evaluations": evaluate(model.eval(), test)}, started)


def main() -> None:
    test = load_corpus(CI.corpus).test
    core = [name for name in VARIANTS if name not in LATER]
    for names in (core, LATER):  # every seed of the core runs, then the rest
        for seed, name in [(seed, name) for seed in SEEDS for name in names]:
            position, overrides = VARIANTS[name]
            path = OUT / f"{name}-seed{seed}.json"
            started = time.perf_counter()
            config = CI.train_config(position, seed, **overrides)
            model, record = train_cached(config, "cpu", progress=False)
            if not path.exists():
                write(path, {"kind": "trained", "variant": name, "seed": seed,
                             "scale": CI.name, "train_config": config.to_dict(),
                             "final_loss": record.losses[-1],
                             "train_wall_time_s": record.wall_time_s,
                             "evaluations": evaluate(model, test)}, started)
            eval_only(name, model, seed, test)
            if name == "rope":
                fine_tunes(seed, test)


if __name__ == "__main__":
    main()
