"""PLAN, NOT YET RUN: the runs for a chapter on RoPE as models ship it (issue 26, part 2).

Nothing in this folder has been measured. This script is the plan for the chapter's
runs, written with the library of part 1; run it, read what it stores, then write the
prose around the numbers it produced.

Run from the repository root, one thread, CPU:

    PYTHONPATH=. POSENC_DEVICE=cpu OMP_NUM_THREADS=1 \
        python results/ci-shipping/make_runs.py

Every variant is the ci model (d_model 64, 4 heads, head_dim 16, L_train 128, 300
steps, Austen) with 4 layers instead of 2, so that a "every 4th layer" pattern has a
layer to act on; seeds 0 and 1. Each is trained through posenc_lib.train_cached and
scored with non-overlapping windows (nats per byte; the same test bytes for every
variant) at L = 128 … 2048. The logit-scaling rules are applied at evaluation only,
to the trained RoPE / SmolLM3-style weights (no retraining), as chapter 11 does with
the context-extension methods. Finished runs are skipped, so the script resumes.
"""

import dataclasses
import json
from pathlib import Path

from posenc_lib import (
    TransformerLM,
    every_kth_layer,
    evaluate_perplexity,
    get_scale,
    load_corpus,
    train_cached,
)
from posenc_lib.experiments import write_json_atomic

OUT = Path(__file__).resolve().parent
CI = dataclasses.replace(get_scale("ci"), name="ci-4layers", num_layers=4)
SEEDS = (0, 1)
LENGTHS = (128, 256, 512, 1024, 2048)
WINDOW = 32  # sliding window of the local layers: L_train / 4
SLIDING = ("sliding_attention",) * 3 + ("full_attention",)
NOPE_4TH = every_kth_layer(4, 4)  # layer 3: SmolLM3's pattern at this depth

# name -> (position, ModelConfig overrides)
VARIANTS = {
    "rope": ("rope", {}),
    "nope": ("none", {}),
    "neox-0.25": ("rope", {"rope_fraction": 0.25}),
    "p_rope-0.25": ("rope", {"rope_fraction": 0.25, "rope_fraction_form": "p_rope"}),
    "p_rope-0.75": ("rope", {"rope_fraction": 0.75, "rope_fraction_form": "p_rope"}),
    "smollm3-nope-every-4th": ("rope", {"nope_layers": NOPE_4TH}),
    # iRoPE / RNoPE-SWA: local RoPE layers, a global NoPE layer
    "irope": ("rope", {"nope_layers": NOPE_4TH, "layer_types": SLIDING,
                       "sliding_window": WINDOW}),
    # Gemma 3: local layers base 1e4, the global layer base 1e6
    "gemma3-bases": ("rope", {"layer_types": SLIDING, "sliding_window": WINDOW,
                              "rope_scaling": {
                                  "sliding_attention": {"rope_theta": 10000.0},
                                  "full_attention": {"rope_theta": 1000000.0}}}),
}

# evaluation-only logit scaling: (trained variant, rule)
LOGIT_RULES = {
    "rope+qwen-logn": ("rope", {"kind": "log_length",
                                "original_max_position_embeddings": CI.seq_len}),
    "smollm3+llama4-temperature": ("smollm3-nope-every-4th",
                                   {"kind": "llama4_temperature",
                                    "floor_scale": CI.seq_len, "attn_scale": 0.1}),
}


def evaluate(model, test) -> list[dict]:
    return [evaluate_perplexity(model, test, L, max_tokens=CI.sweep_eval_tokens).to_dict()
            for L in LENGTHS]


def main() -> None:
    test = load_corpus(CI.corpus).test
    models = {}
    for seed in SEEDS:
        for name, (position, overrides) in VARIANTS.items():
            config = CI.train_config(position, seed, **overrides)
            model, record = train_cached(config, "cpu", progress=False)
            models[name, seed] = model
            path = OUT / f"{name}-seed{seed}.json"
            if path.exists():
                continue
            write_json_atomic(path, {"variant": name, "seed": seed,
                                     "train_config": config.to_dict(),
                                     "final_loss": record.losses[-1],
                                     "evaluations": evaluate(model, test)})
            print(path.name, flush=True)
        for name, (trained, rule) in LOGIT_RULES.items():
            path = OUT / f"{name}-seed{seed}.json"
            if path.exists():
                continue
            base = models[trained, seed]
            config = dataclasses.replace(base.config, logit_scaling=rule)
            scaled = TransformerLM(config)
            scaled.load_state_dict(base.state_dict())  # no parameters are added
            write_json_atomic(path, {"variant": name, "seed": seed,
                                     "model_config": config.to_dict(),
                                     "evaluations": evaluate(scaled.eval(), test)})
            print(path.name, json.dumps(rule), flush=True)


if __name__ == "__main__":
    main()
