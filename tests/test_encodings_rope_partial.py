"""Partial rotation (posenc_lib.encodings.rope_partial) and its two forms in
RotaryEmbedding, against transformers 5.23 (GPT-NeoX's partial rotary; the
``"proportional"`` rope type, transformers' p-RoPE) and the float64 formula."""

from __future__ import annotations

import math

import pytest
import torch

from posenc_lib.encodings.rope import RotaryEmbedding
from posenc_lib.encodings.rope_partial import (
    PARTIAL_FORMS,
    dimension_frequencies,
    neox_rotary_dim,
    p_rope_kept_pairs,
    pair_turns,
)

EPS = torch.finfo(torch.float32).eps


def test_sizes_follow_transformers_rounding() -> None:
    # transformers: int(head_dim * partial_rotary_factor), int(p * head_dim // 2)
    assert neox_rotary_dim(256, 0.25) == 64  # Qwen3-Next, GPT-NeoX-20B
    assert neox_rotary_dim(64, 1.0) == 64
    assert p_rope_kept_pairs(64, 0.75) == 24
    assert p_rope_kept_pairs(128, 0.25) == 16
    assert p_rope_kept_pairs(10, 0.3) == int(0.3 * 10 // 2) == 1


@pytest.mark.parametrize(("call", "message"), [
    (lambda: neox_rotary_dim(64, 0.0), "fraction must be a number in \\(0, 1\\]"),
    (lambda: neox_rotary_dim(64, 1.5), "fraction must be a number in \\(0, 1\\]"),
    (lambda: neox_rotary_dim(63, 0.5), "head_dim must be an even integer"),
    (lambda: neox_rotary_dim(12, 0.25), "rotary_dim=3; it must be even"),
    (lambda: p_rope_kept_pairs(8, 0.1), "keeps no pair"),
    (lambda: dimension_frequencies(8, 1e4, 0.5, "rotary_pct"), "form must be one of"),
    (lambda: dimension_frequencies(8, 0.0, 0.5, "neox"), "base must be a finite"),
])
def test_errors_name_the_argument(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_full_fraction_is_plain_rope_in_both_forms() -> None:
    theta = 1e4 ** -(torch.arange(32, dtype=torch.float64) * 2 / 64)
    for form in PARTIAL_FORMS:
        assert torch.equal(dimension_frequencies(64, 1e4, 1.0, form),
                           torch.cat([theta, theta]))


def test_the_two_forms_remove_different_frequencies() -> None:
    """Same fraction, same number of rotated dims: GPT-NeoX keeps a frequency near
    1/base at the slow end, p-RoPE's slowest kept pair is much faster."""
    d, base, fraction = 64, 1e4, 0.25
    neox = dimension_frequencies(d, base, fraction, "neox")
    p_rope = dimension_frequencies(d, base, fraction, "p_rope")
    assert int((neox > 0).sum()) == int((p_rope > 0).sum()) == 16
    assert torch.equal(neox[:8], base ** -(torch.arange(8, dtype=torch.float64) / 8))
    assert torch.equal(p_rope[:8], base ** -(torch.arange(8, dtype=torch.float64) / 32))
    assert neox[neox > 0].min() == base ** -(14 / 16)
    assert p_rope[p_rope > 0].min() == base ** -(14 / 64)
    assert (neox[neox > 0].min() < p_rope[p_rope > 0].min()).item()
    # and they leave different dimensions alone
    assert torch.equal((neox == 0).nonzero().flatten(), torch.arange(16, 64))
    kept = torch.cat([torch.arange(8), torch.arange(32, 40)])
    assert torch.equal((p_rope > 0).nonzero().flatten(), kept)


@pytest.mark.parametrize("form", PARTIAL_FORMS)
def test_module_matches_the_float64_formula(form: str) -> None:
    """RotaryEmbedding(rotary_dim=r) and RotaryEmbedding(p_rope_pairs=k) against a
    float64 rotation by the angles of :func:`dimension_frequencies`. Positions up to
    300, d = 32: largest difference measured 1.1e-05 (``"neox"``) and 2.0e-05
    (``"p_rope"``): the float32 angle's rounding, ≤ p·eps, times |x|."""
    torch.manual_seed(0)
    d, base, fraction = 32, 1e4, 0.5
    x = torch.randn(2, 3, 301, d)
    positions = torch.arange(301)
    if form == "neox":
        width = neox_rotary_dim(d, fraction)
        rope = RotaryEmbedding(d, base, rotary_dim=width)
    else:
        width = d
        rope = RotaryEmbedding(d, base, p_rope_pairs=p_rope_kept_pairs(d, fraction))
    got = rope(x, positions)
    freq = dimension_frequencies(d, base, fraction, form)[: width // 2]  # per pair
    angles = positions.double()[:, None] * freq  # (T, w/2)
    xd = x.double()
    a, b = xd[..., : width // 2], xd[..., width // 2: width]
    rotated = torch.cat([a * angles.cos() - b * angles.sin(),
                         b * angles.cos() + a * angles.sin()], dim=-1)
    expected = torch.cat([rotated, xd[..., width:]], dim=-1)
    error = (got.double() - expected).abs().max().item()
    assert error < 300 * 4 * EPS * 4  # p·eps·|x| with |x| ≤ 4, a factor 4 of margin
    unrotated = dimension_frequencies(d, base, fraction, form) == 0
    assert torch.equal(got[..., unrotated], x[..., unrotated])  # exactly untouched


def test_neox_partial_matches_transformers_gpt_neox() -> None:
    """GPTNeoXRotaryEmbedding + GPT-NeoX's apply_rotary_pos_emb (rotary_pct 0.25,
    head_dim 64, positions 0 … 999). Largest difference measured: 1.4e-05.
    transformers rounds θ_i computed in float32 (relative error up to
    (ln(base)/2 + 4)·eps, see test_rope_scaling_vs_transformers.py), we round the
    float64 value once, so the angles differ by up to that times p; the bound adds
    the 2·eps·(p + 1) of two float32 rotations."""
    pytest.importorskip("transformers")
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import (
        GPTNeoXRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    torch.manual_seed(0)
    d, heads = 64, 2
    config = GPTNeoXConfig(hidden_size=d * heads, num_attention_heads=heads,
                           rotary_pct=0.25, rotary_emb_base=10000)
    assert config.rope_parameters["partial_rotary_factor"] == 0.25
    q = torch.randn(1, heads, 1000, d)
    positions = torch.arange(1000)
    cos, sin = GPTNeoXRotaryEmbedding(config)(q, positions[None])
    expected, _ = apply_rotary_pos_emb(q, q, cos, sin)
    rope = RotaryEmbedding(d, 10000.0, rotary_dim=neox_rotary_dim(d, 0.25))
    error = (rope(q, positions) - expected).abs().max().item()
    bound = (math.log(1e4) / 2 + 6) * EPS * 1000 * q.abs().max().item()
    assert error < bound


def test_p_rope_matches_transformers_proportional() -> None:
    """transformers' ``"proportional"`` initialisation (p = 0.25, head_dim 64, base
    1e4) gives the same θ_i to float32 rounding (largest relative difference
    measured 6.3e-08) and the same zeros; the rotation by those angles, with Llama's
    apply_rotary_pos_emb, matches RotaryEmbedding(p_rope_pairs=8) to 5.3e-05 (largest
    difference measured) over positions 0 … 999."""
    pytest.importorskip("transformers")
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    d = 64
    config = LlamaConfig(hidden_size=2 * d, num_attention_heads=2, head_dim=d,
                         rope_parameters={"rope_type": "proportional", "rope_theta": 1e4,
                                          "partial_rotary_factor": 0.25})
    inv_freq, factor = ROPE_INIT_FUNCTIONS["proportional"](config, "cpu")
    rope = RotaryEmbedding(d, 1e4, p_rope_pairs=p_rope_kept_pairs(d, 0.25))
    assert factor == 1.0
    assert torch.equal(inv_freq == 0, rope.inv_freq == 0)
    kept = inv_freq > 0
    relative = ((rope.inv_freq[kept] - inv_freq[kept]) / inv_freq[kept]).abs().max()
    assert relative.item() < 8 * EPS
    reference = dimension_frequencies(d, 1e4, 0.25, "p_rope")[: d // 2]
    assert torch.equal(rope.inv_freq, reference.float())
    torch.manual_seed(0)
    q = torch.randn(1, 2, 1000, d)
    positions = torch.arange(1000)
    angles = positions.float()[:, None] * inv_freq
    emb = torch.cat([angles, angles], dim=-1)[None]
    expected, _ = apply_rotary_pos_emb(q, q, emb.cos(), emb.sin())
    error = (rope(q, positions) - expected).abs().max().item()
    # θ_i differ by ≤ 8 eps relative, so angles by ≤ 8 eps · p ≤ 8e3 eps
    assert error < 1000 * 8 * EPS * 5
    assert math.isfinite(error)


def test_p_rope_pairs_is_checked_and_default_is_unchanged() -> None:
    with pytest.raises(ValueError, match="p_rope_pairs must be an integer in 1 … 4"):
        RotaryEmbedding(8, p_rope_pairs=5)
    with pytest.raises(ValueError, match="p_rope_pairs"):
        RotaryEmbedding(8, p_rope_pairs=0)
    x = torch.randn(1, 1, 7, 8)
    full = RotaryEmbedding(8, p_rope_pairs=4)(x, torch.arange(7))
    assert torch.equal(full, RotaryEmbedding(8)(x, torch.arange(7)))


def test_pair_turns_counts_the_pairs_that_complete_a_turn() -> None:
    """(L − 1)·θ_i ≥ 2π, against the float64 formula θ_i = base^(−2i/w)."""
    head_dim, base, length = 16, 10000.0, 128
    full = pair_turns(head_dim, base, 1.0, "neox", length)
    theta = [base ** (-2 * i / head_dim) for i in range(head_dim // 2)]
    turning = sum((length - 1) * t >= 2 * math.pi for t in theta)
    assert full == {"rotating pairs": 8, "complete a turn": turning,
                    "never do": 8 - turning, "slowest θ": pytest.approx(min(theta))}
    assert turning == 3
    # p-RoPE keeps the fastest pairs: at 3 of 8, all complete a turn; GPT-NeoX's 3
    # spread over the same range, and the slower two do not.
    assert pair_turns(head_dim, base, 0.375, "p_rope", length)["never do"] == 0
    assert pair_turns(head_dim, base, 0.375, "neox", length)["never do"] == 2
    assert pair_turns(head_dim, base, 0.125, "neox", length)["never do"] == 0  # θ = 1


@pytest.mark.parametrize("length", [1, 0, 2.5, True])
def test_pair_turns_rejects_a_bad_context_length(length) -> None:
    with pytest.raises(ValueError, match="context_length"):
        pair_turns(16, 10000.0, 0.5, "neox", length)
