"""Logit scaling (posenc_lib.encodings.logit_scaling): DeepSeek's YaRN softmax scale
against transformers 5.23's ``yarn_apply_mscale``; Qwen's log-n and Llama 4's
temperature against their formulas in float64 (Qwen's code is not in transformers;
Llama 4's is, written in float32, and is evaluated here on the same positions)."""

from __future__ import annotations

import math

import pytest
import torch

from posenc_lib.encodings.logit_scaling import (
    LOGIT_SCALING_KINDS,
    applies_to_layer,
    normalize_logit_scaling,
    query_scale,
    softmax_scale_multiplier,
    yarn_mscale,
)

L0 = "original_max_position_embeddings"


@pytest.mark.parametrize(("params", "message"), [
    ([1, 2], "logit_scaling must be a dict or None"),
    ({"kind": "qwen"}, "must be one of \\('deepseek_yarn', 'log_length'"),
    ({"kind": "deepseek_yarn", "factor": 4.0}, "needs the key\\(s\\) \\['mscale_all_dim'\\]"),
    ({"kind": "log_length", L0: 8, "base": 2}, "does not take the key\\(s\\) \\['base'\\]"),
    ({"kind": "deepseek_yarn", "factor": 0.5, "mscale_all_dim": 1}, "'factor'.*>= 1"),
    ({"kind": "log_length", L0: 1}, "integer >= 2"),
    ({"kind": "log_length", L0: 8.0}, "integer >= 2"),
    ({"kind": "llama4_temperature", "floor_scale": 0}, "'floor_scale'.*> 0"),
    ({"kind": "llama4_temperature", "attn_scale": True}, "'attn_scale'.*finite number"),
])
def test_bad_dictionaries_are_named(params, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalize_logit_scaling(params)


def test_defaults_are_filled_in() -> None:
    assert normalize_logit_scaling(None) is None
    assert normalize_logit_scaling({"kind": "llama4_temperature"}) == {
        "kind": "llama4_temperature", "floor_scale": 8192.0, "attn_scale": 0.1}
    assert set(LOGIT_SCALING_KINDS) == {"deepseek_yarn", "log_length",
                                        "llama4_temperature"}


@pytest.mark.parametrize(("factor", "m"), [(1.0, 1.0), (4.0, 0.707), (40.0, 1.0),
                                           (40.0, 0.0), (16.0, 0.5)])
def test_deepseek_softmax_scale_matches_transformers(factor: float, m: float) -> None:
    """transformers' DeepSeek-V3 ``yarn_apply_mscale`` on the same rope_parameters;
    both are Python floats; largest difference measured 2.8e-17 (we divide by √d,
    transformers multiplies by d^−0.5)."""
    pytest.importorskip("transformers")
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    params = normalize_logit_scaling({"kind": "deepseek_yarn", "factor": factor,
                                      "mscale_all_dim": m})
    head_dim = 192  # DeepSeek-V3's qk_head_dim
    ours = softmax_scale_multiplier(params) / math.sqrt(head_dim)
    theirs = yarn_apply_mscale({"rope_type": "yarn", "factor": factor,
                                "mscale_all_dim": m}, head_dim ** -0.5)
    assert abs(ours - theirs) <= 1e-15 * theirs
    assert yarn_mscale(40.0, 1.0) == 0.1 * math.log(40.0) + 1.0


def test_log_length_is_qwens_formula() -> None:
    """Qwen's logn_list: log(i)/log(L0) for the 1-based index i > L0, else 1
    (evaluated in float64 with math.log, as Qwen's code does). Largest relative
    difference measured: 5.8e-08 (our float32 rounding)."""
    params = normalize_logit_scaling({"kind": "log_length", L0: 2048})
    positions = torch.arange(0, 32768, 7)
    got = query_scale(params, positions)
    expected = torch.tensor([math.log(p + 1, 2048) if p + 1 > 2048 else 1.0
                             for p in positions.tolist()], dtype=torch.float64)
    relative = ((got.double() - expected) / expected).abs().max().item()
    assert relative <= torch.finfo(torch.float32).eps / 2
    assert torch.equal(got[positions < 2048], torch.ones(int((positions < 2048).sum())))
    assert got.dtype == torch.float32


def test_llama4_temperature_matches_its_code() -> None:
    """Llama 4's float32 expression (transformers' Llama4TextAttention:
    log1p(floor((p + 1)/floor_scale))·attn_scale + 1) on positions 0 … 10⁶, against
    ours (float64 then rounded). Largest difference measured: 1.2e-07."""
    params = normalize_logit_scaling({"kind": "llama4_temperature"})
    positions = torch.arange(0, 1_000_000, 13)
    got = query_scale(params, positions)
    theirs = torch.log1p(torch.floor((positions.float() + 1.0) / 8192)) * 0.1 + 1.0
    error = (got - theirs).abs().max().item()
    assert error <= 2 * torch.finfo(torch.float32).eps
    assert torch.equal(got[positions < 8191], torch.ones(int((positions < 8191).sum())))


def test_which_layers_and_errors() -> None:
    llama4 = normalize_logit_scaling({"kind": "llama4_temperature"})
    qwen = normalize_logit_scaling({"kind": "log_length", L0: 16})
    assert applies_to_layer(llama4, uses_rope=False)
    assert not applies_to_layer(llama4, uses_rope=True)
    assert applies_to_layer(qwen, uses_rope=True) and applies_to_layer(qwen, False)
    assert not applies_to_layer(None, uses_rope=False)
    assert query_scale(None, torch.arange(3)) is None
    with pytest.raises(ValueError, match="positions must be an integer tensor"):
        query_scale(qwen, torch.arange(3.0))
