"""rope_scaled_frequencies and RotaryEmbedding(rope_scaling=...) against Hugging Face.

The reference is transformers==5.23.0 (pinned, test-only, in requirements.txt): its RoPE
initialisation functions (``ROPE_INIT_FUNCTIONS`` and
``compute_default_rope_parameters``) and ``LlamaRotaryEmbedding`` with its dynamic-NTK
update, each built from a small ``LlamaConfig`` (no download).

Tolerance. transformers computes θ′_i in float32: the exponent 2i/d is rounded (relative
error ≤ eps/2), and base^x turns an exponent error δ into a relative error ln(base)·δ, so
θ′_i may differ from our float64-then-rounded value by ln(base)/2·eps plus a few
roundings of its own (pow, division, the blend). We allow (ln(base′)/2 + 4)·eps
relative, base′ the base actually used (dynamic NTK enlarges it); the largest ratio
measured over the grid below was 3.9 eps. Rotated vectors may then differ by that
relative error times the angle p·θ′_i ≤ p, plus the 2·eps·(p + 1) of two float32
rotations (see test_rope_vs_transformers.py).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from posenc_lib import RotaryEmbedding, rope_cos_sin, rope_scaled_frequencies
from posenc_lib.encodings.rope_scaling import dynamic_ntk_base

transformers = pytest.importorskip(
    "transformers",
    reason="transformers (test-only, pinned in requirements.txt) is not installed",
)
from transformers import LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.llama.modeling_llama import (  # noqa: E402
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)

EPS = torch.finfo(torch.float32).eps
L0 = "original_max_position_embeddings"
HEAD_DIMS = (16, 64, 128)
BASES = (10000.0, 100000.0, 500000.0)
ORIGINAL_LENGTHS = (128, 2048, 8192)
FACTORS = (1.5, 2.0, 4.0, 16.0)


def methods(factor: float, original_length: int) -> list[tuple[dict, int | None]]:
    """(our dictionary, seq_len) for every method; dynamic both below and above L0."""
    l0 = {L0: original_length}
    bands = {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
    return [
        ({"rope_type": "default"}, None),
        ({"rope_type": "linear", "factor": factor}, None),
        ({"rope_type": "dynamic", "factor": factor, **l0}, original_length // 2),
        ({"rope_type": "dynamic", "factor": factor, **l0}, 3 * original_length),
        ({"rope_type": "dynamic", "factor": factor, **l0}, 16 * original_length + 5),
        ({"rope_type": "yarn", "factor": factor, **l0}, None),
        ({"rope_type": "yarn", "factor": factor, "beta_fast": 16, "beta_slow": 2, **l0},
         None),
        ({"rope_type": "llama3", "factor": factor, **bands, **l0}, None),
    ]


def hugging_face_config(head_dim: int, base: float, params: dict) -> LlamaConfig:
    """A LlamaConfig whose rope_parameters say what ``params`` says."""
    rope_parameters = {**params, "rope_theta": base}
    max_positions = int(params.get(L0, 4096) * params.get("factor", 1.0))
    if params["rope_type"] == "dynamic":
        # transformers' dynamic NTK reads L0 from max_position_embeddings.
        max_positions = rope_parameters.pop(L0)
    return LlamaConfig(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim,
                       max_position_embeddings=max_positions,
                       rope_parameters=rope_parameters)


def hugging_face_frequencies(head_dim: int, base: float, params: dict,
                             seq_len: int | None):
    config = hugging_face_config(head_dim, base, params)
    if params["rope_type"] == "default":
        return LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[params["rope_type"]](config, "cpu", seq_len=seq_len)


def effective_base(base: float, head_dim: int, params: dict,
                   seq_len: int | None) -> float:
    if params["rope_type"] != "dynamic" or seq_len is None:
        return base
    return dynamic_ntk_base(base, head_dim, params["factor"], seq_len, params[L0])


@pytest.mark.parametrize("head_dim,base", list(itertools.product(HEAD_DIMS, BASES)))
def test_frequencies_and_attention_factor_match_transformers(head_dim: int,
                                                             base: float) -> None:
    for original_length, factor in itertools.product(ORIGINAL_LENGTHS, FACTORS):
        for params, seq_len in methods(factor, original_length):
            ours, our_factor = rope_scaled_frequencies(head_dim, base, params, seq_len)
            theirs, their_factor = hugging_face_frequencies(head_dim, base, params,
                                                            seq_len)
            assert ours.dtype == theirs.dtype == torch.float32
            assert ours.shape == theirs.shape
            used = effective_base(base, head_dim, params, seq_len)
            tolerance = (math.log(used) / 2 + 4) * EPS
            relative = ((ours.double() - theirs.double()).abs() / theirs.double()).max()
            assert relative <= tolerance, (params, seq_len, relative / EPS)
            assert math.isclose(our_factor, their_factor, rel_tol=1e-12), params


def rotate_with_hugging_face(rotary: LlamaRotaryEmbedding, x: torch.Tensor,
                             positions: torch.Tensor) -> torch.Tensor:
    cos, sin = rotary(x, positions[None])  # (1, T, D) each, attention factor included
    rotated, _ = apply_rotary_pos_emb(x, x, cos, sin)
    return rotated


def output_bound(x: torch.Tensor, positions: torch.Tensor, base: float,
                 factor: float) -> torch.Tensor:
    """Per element: (angle error + rotation rounding) × pair norm × attention factor."""
    half = x.shape[-1] // 2
    pair_norm = x.unflatten(-1, (2, half)).norm(dim=-2).repeat(1, 1, 1, 2)  # (B, H, T, D)
    p = positions.to(x.dtype)[:, None] + 1
    return ((math.log(base) / 2 + 6) * EPS * p) * pair_norm * factor


@pytest.mark.parametrize(
    "params",
    [
        {"rope_type": "linear", "factor": 4.0},
        {"rope_type": "yarn", "factor": 4.0, L0: 256},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, L0: 256},
    ],
)
def test_rotated_vectors_match_transformers(params: dict) -> None:
    head_dim, base = 64, 100000.0
    ours = RotaryEmbedding(head_dim, base, rope_scaling=params)
    theirs = LlamaRotaryEmbedding(hugging_face_config(head_dim, base, params))
    x, positions = torch.randn(1, 3, 1024, head_dim), torch.arange(1024)
    expected = rotate_with_hugging_face(theirs, x, positions)
    bound = output_bound(x, positions, base, ours.attention_factor)
    assert ((ours(x, positions) - expected).abs() <= bound).all()


def test_dynamic_module_across_a_long_then_a_short_input_matches_transformers() -> None:
    """Long (4 L0) then short (L0/2): both recompute for the long input and return to
    the unscaled frequencies for the short one. Then a medium input (2 L0) after the
    long one: transformers 5.23 keeps the long input's frequencies until an input
    shorter than L0 arrives (it recomputes only when the length grows, for speed;
    huggingface/transformers PR 27227), while ours depends on the current input only,
    as a fresh transformers module does."""
    head_dim, base, l0 = 64, 10000.0, 256
    params = {"rope_type": "dynamic", "factor": 2.0, L0: l0}
    ours = RotaryEmbedding(head_dim, base, rope_scaling=params)
    theirs = LlamaRotaryEmbedding(hugging_face_config(head_dim, base, params))
    x = torch.randn(1, 2, 4 * l0, head_dim)
    for length in (4 * l0, l0 // 2):
        positions = torch.arange(length)
        xs = x[:, :, :length]
        bound = output_bound(xs, positions, effective_base(base, head_dim, params, length),
                             1.0)
        expected = rotate_with_hugging_face(theirs, xs, positions)
        assert ((ours(xs, positions) - expected).abs() <= bound).all()
    short, short_positions = x[:, :, : l0 // 2], torch.arange(l0 // 2)
    plain = RotaryEmbedding(head_dim, base)(short, short_positions)
    assert torch.equal(ours(short, short_positions), plain)

    theirs(x, torch.arange(4 * l0)[None])  # transformers now holds the 4·L0 frequencies
    medium, positions = x[:, :, : 2 * l0], torch.arange(2 * l0)
    fresh = LlamaRotaryEmbedding(hugging_face_config(head_dim, base, params))
    expected = rotate_with_hugging_face(fresh, medium, positions)
    used = effective_base(base, head_dim, params, 2 * l0)
    bound = output_bound(medium, positions, used, 1.0)
    assert ((ours(medium, positions) - expected).abs() <= bound).all()
    sticky = rotate_with_hugging_face(theirs, medium, positions)
    assert not ((sticky - expected).abs() <= bound).all()  # history-dependent in 5.23


@pytest.mark.parametrize(
    "params",
    [
        {"rope_type": "default"},
        {"rope_type": "linear", "factor": 4.0},
        {"rope_type": "yarn", "factor": 4.0, L0: 256},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, L0: 256},
    ],
)
def test_cos_sin_table_matches_transformers(params: dict) -> None:
    """rope_cos_sin in Hugging Face's layout (halves repeated) against the cos and sin
    that LlamaRotaryEmbedding returns, attention factor included; the bound is the angle
    error of output_bound (float32 θ′_i times p) times the factor."""
    head_dim, base, length = 64, 100000.0, 1024
    theirs = LlamaRotaryEmbedding(hugging_face_config(head_dim, base, params))
    positions = torch.arange(length)
    their_cos, their_sin = theirs(torch.zeros(1, 1, length, head_dim), positions[None])
    cos, sin = rope_cos_sin(positions, head_dim, base, rope_scaling=params)
    _, factor = rope_scaled_frequencies(head_dim, base, params)
    bound = ((math.log(base) / 2 + 6) * EPS * (positions[:, None] + 1)) * factor
    for ours, reference in ((cos, their_cos[0]), (sin, their_sin[0])):
        assert ((torch.cat([ours, ours], dim=-1) - reference).abs() <= bound).all()


def test_longrope_matches_transformers_phi3() -> None:
    """Phi-3-style LongRoPE (head_dim 96, base 1e4, L0 4096, κ 32; factor lists from a
    fixed seed): transformers' ``_compute_longrope_parameters`` below and above L0,
    and Phi3RotaryEmbedding's rotation (its length switch included) at 300 and 6000
    positions. Largest relative θ′ difference measured 2.5 eps (tolerance
    (ln(base)/2 + 4)·eps as above); attention factor: difference measured 0.0;
    rotated vectors within output_bound."""
    from transformers import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    head_dim, base, l0 = 96, 10000.0, 4096
    generator = torch.Generator().manual_seed(0)
    short = (1 + torch.rand(head_dim // 2, generator=generator)).tolist()
    long = (1 + 30 * torch.rand(head_dim // 2, generator=generator)).tolist()
    params = {"rope_type": "longrope", "factor": 32.0, L0: l0,
              "short_factor": short, "long_factor": long}
    config = Phi3Config(hidden_size=2 * head_dim, num_attention_heads=2,
                        max_position_embeddings=32 * l0,
                        rope_parameters={**params, "rope_theta": base})
    for seq_len in (None, l0, l0 + 1, 8 * l0):
        ours, our_factor = rope_scaled_frequencies(head_dim, base, params, seq_len)
        theirs, their_factor = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu",
                                                              seq_len=seq_len)
        relative = ((ours.double() - theirs.double()).abs() / theirs.double()).max()
        assert relative <= (math.log(base) / 2 + 4) * EPS, (seq_len, relative / EPS)
        assert math.isclose(our_factor, their_factor, rel_tol=1e-12)
    ours = RotaryEmbedding(head_dim, base, rope_scaling=params)
    theirs = Phi3RotaryEmbedding(config)
    torch.manual_seed(0)
    x = torch.randn(1, 2, 6000, head_dim)
    for length in (300, 6000, 300):
        xs, positions = x[:, :, :length], torch.arange(length)
        expected = rotate_with_hugging_face(theirs, xs, positions)
        bound = output_bound(xs, positions, base, ours.attention_factor)
        assert ((ours(xs, positions) - expected).abs() <= bound).all(), length
