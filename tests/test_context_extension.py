"""posenc_lib.analysis.context_extension: perplexity under other RoPE frequency rules and
the last layer's attention, on tiny untrained models (chapter 11 runs them on trained ones)."""

import math

import pandas as pd
import pytest
import torch

from posenc_lib import ModelConfig, TransformerLM, method_scaling
from posenc_lib.analysis.context_extension import (
    last_layer_attention,
    stretched_perplexities,
)


def tiny() -> TransformerLM:
    torch.manual_seed(0)
    config = ModelConfig(position="rope", d_model=32, num_layers=2, num_heads=4)
    return TransformerLM(config).eval()


def test_stretched_perplexities_rows_and_rules() -> None:
    """One row per (seed, rule, setting), each rule set to κ; κ = 1 is the plain model."""
    seen = []

    def evaluate(model: TransformerLM, length: int) -> float:
        seen.append((model.config.rope_scaling, length))
        return float(length)

    rules = {"PI": lambda k: method_scaling("linear", k, 16), "plain": lambda k: None}
    frame = stretched_perplexities({0: tiny(), 1: tiny()}, rules, [(1, 16), (4, 64)],
                                   evaluate)
    assert frame.columns.tolist() == ["model", "seed", "κ", "L", "PPL"]
    assert len(frame) == 8 and frame.model.tolist()[:4] == ["PI", "PI", "plain", "plain"]
    assert frame.κ.tolist()[:2] == [1.0, 4.0] and frame.PPL.tolist()[:2] == [16.0, 64.0]
    assert seen[1] == (method_scaling("linear", 4.0, 16), 64)
    with pytest.raises(ValueError, match="0 rules"):
        stretched_perplexities({0: tiny()}, {}, [(1, 16)], evaluate)


def test_last_layer_attention() -> None:
    """The share on r ≤ 1 is 1 for a window of two tokens; entropy ≤ ln T; bad counts fail."""
    windows = torch.randint(0, 256, (2, 16))
    stats = last_layer_attention(tiny(), windows, 4)
    assert 0 < stats["share on r ≤ 1"] < 1
    assert 0 < stats["entropy (nats)"] <= math.log(16)
    short = last_layer_attention(tiny(), windows[:, :2], 2)
    assert abs(short["share on r ≤ 1"] - 1) < 1e-6
    with pytest.raises(ValueError, match="last_queries"):
        last_layer_attention(tiny(), windows, 0)


def _waves(kappas=(1.0, 2.0, 3.0, 4.0)) -> pd.DataFrame:
    """λ'_i as context_extension_player's table holds them, d = 16, base 10^4, L = 128."""
    from posenc_lib import context_extension_player, method_label

    labels = {m: method_label(m) for m in ("linear", "dynamic", "yarn", "llama3")}
    colors = dict.fromkeys(labels, "black")
    return context_extension_player(16, 10_000.0, 128, kappas, labels, colors).table


def test_check_stretched_wavelengths() -> None:
    """The four methods pass their rules; NTK's pair i_c turns from κ = 3; a bad row fails."""
    from posenc_lib import check_stretched_wavelengths, method_label

    waves = _waves()
    labels = {m: method_label(m) for m in ("linear", "dynamic", "yarn", "llama3")}
    assert check_stretched_wavelengths(waves, labels, 128, 3) == [3.0, 4.0]
    broken = waves.copy()
    broken.loc[(labels["linear"], 2.0)] *= 1.01
    with pytest.raises(AssertionError, match="linear"):
        check_stretched_wavelengths(broken, labels, 128, 3)
    with pytest.raises(ValueError, match="missing"):
        check_stretched_wavelengths(waves, {"linear": labels["linear"]}, 128, 3)


def test_check_untuned_extension() -> None:
    """A table that meets every claim passes; PI better than no scaling fails."""
    from posenc_lib import check_untuned_extension

    rows = {m: m for m in ("none", "linear", "dynamic", "yarn", "llama3")}
    values = {"none": [5, 8, 12, 16, 20], "linear": [5, 10, 15, 20, 25],
              "dynamic": [5, 7, 9, 11, 13], "yarn": [5, 6, 9, 11, 12],
              "llama3": [5, 7, 9, 11, 13], "ALiBi": [6, 6.5, 6, 6, 6]}
    p = pd.Series({(m, k * 4): v for m, vs in values.items()
                   for k, v in zip((1, 2, 4, 8, 16), vs)})
    check_untuned_extension(p, rows, 4, (2, 4, 8, 16), margin=True)
    p["linear", 8] = 7
    with pytest.raises(AssertionError, match="linear"):
        check_untuned_extension(p, rows, 4, (2, 4, 8, 16), margin=False)
    with pytest.raises(ValueError, match="missing"):
        check_untuned_extension(p, {"none": "none"}, 4, (2,), margin=False)
