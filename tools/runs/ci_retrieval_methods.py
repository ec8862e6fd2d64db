"""Passkey accuracy and test NLL of the RoPE recipe model (passkey 0.25, repeat 0.25,
marked template, answer weight 1, 1800 steps; seed 0) under chapter 11's context-
extension methods, applied without fine-tuning: κ = L / L_train for PI, YaRN and
Llama 3; dynamic NTK with factor 1 (κ = L / L_train at inference), as chapter 11 does.
Then each method is fine-tuned as chapter 11 fine-tunes (κ = 4 at 4 L_train, 5 % of the
base run's steps, the same bytes per step, peak lr / 5, one warm-up step), but on the
recipe's mixture at 4 L_train (a quarter passkey windows, a quarter repeat windows, answer
weight 1): fine-tuning on plain text would test whether the model forgets the task, not
whether the method extends it. Each fine-tuned model is scored as the untuned ones.

    PYTHONPATH=. POSENC_DEVICE=cpu OMP_NUM_THREADS=1 \\
        python tools/runs/ci_retrieval_methods.py

Writes rope-methods-marked-mix0.25-rep0.25-w1-steps1800-seed0.json in results/ci-retrieval/.
"""

import dataclasses
import random
import time
from pathlib import Path

import torch

from posenc_lib import (FineTuneConfig, TransformerLM, get_scale, load_corpus, stretched_fine_tune,
                        with_rope_scaling)
from posenc_lib.training.store import passkey_mix_cache_key, passkey_mix_cached
from posenc_lib.training.evaluate import evaluate_perplexity
from posenc_lib.records import provenance, write_json_atomic
from posenc_lib.encodings.rope_scaling import stretch_scaling
from posenc_lib.tasks.retrieval import (
    MARKED_TEMPLATE,
    PasskeyMixConfig,
    byte_encode,
    passkey_accuracy,
    passkey_mix_batches,
)
from posenc_lib.training.train import fit

OUT = Path(__file__).resolve().parents[2] / "results" / "ci-retrieval"
CI = get_scale("ci")
L_TRAIN = CI.seq_len
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
TRIALS = 32
SEED = 0
LENGTHS = (128, 256, 512, 1024, 2048)
METHODS = ("none", "linear", "dynamic", "yarn", "llama3")
NLL_TOKENS = 16_384  # the first 16 384 test bytes at every L, non-overlapping windows


def scaling_at(method: str, length: int) -> dict | None:
    """Chapter 11's rule: κ = L / L_train (dynamic NTK: factor 1, κ set by L)."""
    return stretch_scaling(method, max(1.0, length / L_TRAIN), L_TRAIN)


FT_LENGTH = 4 * L_TRAIN


def fine_tune_config(base, method: str) -> FineTuneConfig:
    """Chapter 11's fine-tune, for the 1800-step recipe model."""
    return stretched_fine_tune(base, method, FT_LENGTH / L_TRAIN)


def mixture_fine_tune(model, recipe: PasskeyMixConfig, config: FineTuneConfig):
    """train.fine_tune, with the recipe's passkey and repeat rows at seq_len."""
    torch.manual_seed(config.base.seed)
    tuned = TransformerLM(config.model)
    tuned.load_state_dict(model.state_dict())
    long_recipe = dataclasses.replace(recipe, base=dataclasses.replace(
        recipe.base, seq_len=config.seq_len, batch_size=config.batch_size))
    rows, repeats = long_recipe.passkey_rows(), long_recipe.repeat_rows()
    tokens = load_corpus(config.base.corpus).train
    batches = passkey_mix_batches(long_recipe, tokens,
                                  torch.Generator().manual_seed(config.base.seed + 1),
                                  random.Random(f"passkey-fine-tune-{config.base.seed}"))
    record = fit(tuned, batches, config, progress=False)
    return tuned, {"passkey_rows": rows, "repeat_rows": repeats, "losses": record.losses}


def score(model, test, template, length: int) -> tuple[list[dict], float]:
    passkey = passkey_accuracy(model, byte_encode, (length,), DEPTHS, trials=TRIALS,
                               seed=SEED, filler=test, template=template)
    return passkey, evaluate_perplexity(model, test, length, max_tokens=NLL_TOKENS).nll


def main() -> None:
    base = dataclasses.replace(CI.train_config("rope", SEED), steps=1800)
    config = PasskeyMixConfig(base, 0.25, template=MARKED_TEMPLATE, answer_weight=1.0,
                              repeat_fraction=0.25)
    model, _ = passkey_mix_cached(config, "cpu", progress=False)
    test = load_corpus(base.corpus).test
    rows = []
    start = time.perf_counter()
    for method in METHODS:
        for length in LENGTHS:
            stretched = with_rope_scaling(model, scaling_at(method, length))
            passkey, nll = score(stretched, test, config.template, length)
            rows.append({"method": method, "length": length,
                         "rope_scaling": scaling_at(method, length),
                         "passkey": passkey, "test_nll": nll})
            print(method, length, [r["correct"] for r in passkey], round(nll, 3),
                  flush=True)
    untuned_wall = time.perf_counter() - start
    tuned_rows = []
    for method in METHODS[1:]:
        ft = fine_tune_config(base, method)
        begin = time.perf_counter()
        tuned, record = mixture_fine_tune(model, config, ft)
        ft_wall = time.perf_counter() - begin
        for length in LENGTHS:
            passkey, nll = score(tuned, test, config.template, length)
            tuned_rows.append({"method": method, "length": length,
                               "fine_tune": ft.to_dict(), "passkey": passkey,
                               "test_nll": nll, "fine_tune_wall_s": ft_wall,
                               "fine_tune_mixture": {k: v for k, v in record.items()
                                                     if k != "losses"},
                               "fine_tune_final_loss": record["losses"][-1]})
            print("tuned", method, length, [r["correct"] for r in passkey],
                  round(nll, 3), flush=True)
    write_json_atomic(OUT / "rope-methods-marked-mix0.25-rep0.25-w1-steps1800-seed0.json", {
        "format": 1,
        "recipe": config.to_dict(),
        "model_cache_key": passkey_mix_cache_key(config, "cpu"),
        "fine_tuned": "rows: no; fine_tuned_rows: yes",
        "passkey_protocol": {"filler": "test split (Persuasion), a fresh random offset "
                             "per window", "depths": list(DEPTHS),
                             "trials_per_cell": TRIALS, "key_digits": 5,
                             "scoring": "exact match of all 5 key bytes, greedy",
                             "draw_seed": SEED},
        "nll_protocol": f"non-overlapping windows of L, the first {NLL_TOKENS} test "
                        "bytes, nats per byte",
        "rows": rows,
        "fine_tuned_rows": tuned_rows,
        "fine_tune_protocol": "chapter 11's fine-tune (kappa 4 at 4 L_train, 5 % of the "
                              "base steps, same bytes per step, lr / 5, 1 warm-up step) "
                              "on the recipe's mixture at 4 L_train, answer weight 1",
        "eval_wall_s": untuned_wall,
        "total_wall_s": time.perf_counter() - start,
        "provenance": provenance("cpu"),
    })


if __name__ == "__main__":
    main()
