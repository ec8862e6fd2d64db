"""posenc_lib.analysis.context_extension: perplexity under other RoPE frequency rules and
the last layer's attention, on tiny untrained models (chapter 11 runs them on trained ones)."""

import math

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
