"""Write the trained RoPE recipe model (seed 0) into models/, so that chapter 12 can
check it live without training: its state dict, and a JSON with its recipe, the file's
SHA-256 and the model-cache key it was trained under.

    PYTHONPATH=. POSENC_DEVICE=cpu OMP_NUM_THREADS=1 python tools/runs/ci_retrieval_ship_model.py

The model comes from the model cache (``passkey_mix_cached``: trained there if absent).
"""

import dataclasses
import hashlib
import json
from pathlib import Path

import torch

from posenc_lib import get_scale
from posenc_lib.training.store import passkey_mix_cache_key, passkey_mix_cached
from posenc_lib.records import provenance
from posenc_lib.tasks.retrieval import MARKED_TEMPLATE, PasskeyMixConfig

MODELS = Path(__file__).resolve().parents[2] / "results" / "ci-retrieval" / "models"
NAME = "rope-marked-mix0.25-rep0.25-w1-steps1800-seed0"


def main() -> None:
    base = dataclasses.replace(get_scale("ci").train_config("rope", 0), steps=1800)
    config = PasskeyMixConfig(base, 0.25, template=MARKED_TEMPLATE, answer_weight=1.0,
                              repeat_fraction=0.25)
    model, record = passkey_mix_cached(config, "cpu", progress=False)
    MODELS.mkdir(exist_ok=True)
    weights = MODELS / f"{NAME}.pt"
    torch.save(model.state_dict(), weights)
    (MODELS / f"{NAME}.json").write_text(json.dumps({
        "weights": weights.name,
        "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "recipe": config.to_dict(),
        "model_cache_key": passkey_mix_cache_key(config, "cpu"),
        "num_parameters": record.num_parameters,
        "final_loss": record.losses[-1],
        "provenance": provenance("cpu"),
    }, indent=1) + "\n")
    print(weights, weights.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
