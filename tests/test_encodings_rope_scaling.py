"""rope_scaled_frequencies and RotaryEmbedding(rope_scaling=...): each method's
definition, the default left bit-identical, dynamic NTK's return to unscaled
frequencies, errors.

Golden values are the papers' formulas evaluated here in float64 (Chen et al. 2023 for
linear; bloc97's and emozilla's base change for dynamic; Peng et al. 2023 for YaRN;
Llama 3.1's released rule). The comparison with transformers is in
``test_rope_scaling_vs_transformers.py``.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc_lib import (
    RotaryEmbedding,
    rope_inverse_frequencies,
    rope_scaled_frequencies,
)
from posenc_lib.encodings.rope import rotate_pairs
from posenc_lib.encodings.rope_scaling import (
    dynamic_ntk_base,
    method_scaling,
    normalize_rope_scaling,
    static_ntk_base,
    stretch_scaling,
    yarn_correction_pair,
)

L0 = 128
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": L0}
LLAMA3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": L0}
DYNAMIC = {"rope_type": "dynamic", "factor": 4.0,
           "original_max_position_embeddings": L0}
LINEAR = {"rope_type": "linear", "factor": 4.0}
EPS32 = torch.finfo(torch.float32).eps


def theta64(d: int, base: float) -> torch.Tensor:
    values = [base ** (-2 * i / d) for i in range(d // 2)]
    return torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize(
    "d,base", [(2, 10.0), (16, 10000.0), (64, 100000.0), (128, 500000.0)]
)
def test_default_is_bit_identical_to_the_plain_frequencies(d: int, base: float) -> None:
    v5 = {"rope_type": "default", "rope_theta": base}
    for scaling in (None, {"rope_type": "default"}, v5):
        inv_freq, factor = rope_scaled_frequencies(d, base, scaling)
        assert torch.equal(inv_freq, rope_inverse_frequencies(d, base))
        assert factor == 1.0
        assert inv_freq.dtype == torch.float32


def test_default_module_is_bit_identical_to_the_unscaled_cache() -> None:
    # What RotaryEmbedding computed before rope_scaling existed: float32 angles p·θ_i.
    x, positions = torch.randn(2, 3, 50, 16), torch.arange(50)
    theta = rope_inverse_frequencies(16, 10000.0)
    angles = torch.arange(50, dtype=torch.float32)[:, None] * theta
    before = rotate_pairs(x, angles.cos(), angles.sin(), interleaved=False)
    for module in (RotaryEmbedding(16), RotaryEmbedding(16, 10000.0, rope_scaling=None),
                   RotaryEmbedding(16, rope_scaling={"rope_type": "default"})):
        assert torch.equal(module(x, positions), before)


def test_linear_divides_every_frequency() -> None:
    inv_freq, factor = rope_scaled_frequencies(16, 10000.0, LINEAR)
    assert torch.allclose(inv_freq.double(), theta64(16, 10000.0) / 4, rtol=2 * EPS32)
    assert factor == 1.0


def test_linear_position_kappa_q_is_plain_position_q() -> None:
    x = torch.randn(1, 2, 8, 16, dtype=torch.float64)
    q = torch.arange(8)
    scaled = RotaryEmbedding(16, rope_scaling=LINEAR)(x, 4 * q)
    plain = RotaryEmbedding(16)(x, q)
    assert torch.allclose(scaled, plain, atol=1e-5)  # float32 angles, positions < 32


def test_dynamic_is_unscaled_up_to_L0_and_stretches_the_slowest_pair_past_it() -> None:
    d, base = 16, 10000.0
    for seq_len in (None, 1, L0 // 2, L0):
        inv_freq, _ = rope_scaled_frequencies(d, base, DYNAMIC, seq_len)
        assert torch.equal(inv_freq, rope_inverse_frequencies(d, base))
    for seq_len in (L0 + 1, 2 * L0, 16 * L0):
        inv_freq, factor = rope_scaled_frequencies(d, base, DYNAMIC, seq_len)
        stretch = 4.0 * seq_len / L0 - 3.0
        assert factor == 1.0
        assert inv_freq[0] == 1.0  # the fastest pair stays put
        expected = theta64(d, base)[-1].item() / stretch
        assert math.isclose(inv_freq[-1].item(), expected, rel_tol=4 * EPS32)
        ntk_base = dynamic_ntk_base(base, d, 4.0, seq_len, L0)
        assert torch.allclose(inv_freq.double(), theta64(d, ntk_base), rtol=2 * EPS32)


def test_dynamic_module_returns_to_unscaled_after_a_long_input() -> None:
    """The known bug: a base that grows for a long input and 'sticks' afterwards."""
    plain, dynamic = RotaryEmbedding(16), RotaryEmbedding(16, rope_scaling=DYNAMIC)
    x_short = torch.randn(1, 2, L0, 16)
    x_long = torch.randn(1, 2, 4 * L0, 16)
    first = dynamic(x_short, torch.arange(L0))
    assert torch.equal(first, plain(x_short, torch.arange(L0)))
    long = dynamic(x_long, torch.arange(4 * L0))
    assert not torch.allclose(long, plain(x_long, torch.arange(4 * L0)), atol=1e-3)
    assert torch.equal(dynamic(x_short, torch.arange(L0)), first)  # unscaled again
    # A medium input after a long one gets its own length's frequencies.
    x_mid = x_long[:, :, : 2 * L0]
    fresh = RotaryEmbedding(16, rope_scaling=DYNAMIC)(x_mid, torch.arange(2 * L0))
    assert torch.equal(dynamic(x_mid, torch.arange(2 * L0)), fresh)


def test_yarn_keeps_fast_pairs_divides_slow_pairs_and_scales_q_and_k() -> None:
    d, base, l0 = 64, 10000.0, 2048  # with L0 = 2048 all three regions occur
    yarn = {**YARN, "original_max_position_embeddings": l0}
    inv_freq, factor = rope_scaled_frequencies(d, base, yarn)
    theta = theta64(d, base)
    low = math.floor(yarn_correction_pair(32, d, base, l0))
    high = math.ceil(yarn_correction_pair(1, d, base, l0))
    assert 0 < low < high < d // 2
    kept = inv_freq[: low + 1].double()
    assert torch.allclose(kept, theta[: low + 1], rtol=2 * EPS32)
    assert torch.allclose(inv_freq[high:].double(), theta[high:] / 4, rtol=2 * EPS32)
    assert math.isclose(factor, 0.1 * math.log(4.0) + 1)
    # Peng et al.: pair i completes L0/λ_i turns within L0; the ramp runs from
    # beta_slow = 1 turn (interpolate) to beta_fast = 32 turns (keep).
    turns = l0 * theta / (2 * math.pi)
    assert (turns[: low + 1] >= 32).all() and (turns[high:] <= 1).all()
    middle = inv_freq[low + 1 : high].double() / theta[low + 1 : high]
    assert ((middle < 1) & (middle > 1 / 4)).all() and (middle.diff() < 0).all()
    x = torch.randn(1, 1, 10, d)
    out = RotaryEmbedding(d, rope_scaling=yarn)(x, torch.arange(10))
    assert torch.allclose(out.norm(dim=-1), factor * x.norm(dim=-1), rtol=1e-5)


def test_yarn_attention_factor_given_or_from_mscale() -> None:
    given = {**YARN, "attention_factor": 1.5}
    assert rope_scaled_frequencies(16, 10000.0, given)[1] == 1.5
    deepseek = {**YARN, "mscale": 1.0, "mscale_all_dim": 1.0}
    _, ratio = rope_scaled_frequencies(16, 10000.0, deepseek)
    assert ratio == 1.0


def test_llama3_bands() -> None:
    d, base = 16, 10000.0
    inv_freq, factor = rope_scaled_frequencies(d, base, LLAMA3)
    theta = theta64(d, base)
    wavelength = 2 * math.pi / theta
    short, long = wavelength < L0 / 4, wavelength > L0 / 1
    assert short.any() and long.any() and (~short & ~long).any()  # all three bands
    assert torch.allclose(inv_freq[short].double(), theta[short], rtol=2 * EPS32)
    assert torch.allclose(inv_freq[long].double(), theta[long] / 4, rtol=2 * EPS32)
    middle = ~short & ~long
    blended = inv_freq[middle].double()
    between = (blended < theta[middle]) & (blended > theta[middle] / 4)
    assert between.all() and factor == 1.0


@settings(max_examples=60, deadline=None)
@given(
    half=st.integers(2, 64),
    log_base=st.floats(2.0, 14.0),
    factor=st.floats(1.0, 64.0),
    log_l0=st.integers(4, 15),
    method=st.sampled_from(["linear", "dynamic", "yarn", "llama3"]),
)
def test_every_method_slows_pairs_by_at_most_its_stretch(
    half: int, log_base: float, factor: float, log_l0: int, method: str
) -> None:
    """θ′_i never exceeds θ_i and never falls below θ_i divided by the stretch."""
    d, base, l0 = 2 * half, math.exp(log_base), 2**log_l0
    params = {"rope_type": method, "factor": factor,
              "original_max_position_embeddings": l0,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    keep = {"linear": ("rope_type", "factor"), "llama3": tuple(params)}.get(
        method, ("rope_type", "factor", "original_max_position_embeddings"))
    params = {k: v for k, v in params.items() if k in keep}
    seq_len = 3 * l0
    inv_freq, _ = rope_scaled_frequencies(d, base, params, seq_len)
    theta = rope_inverse_frequencies(d, base).double()
    stretch = factor * seq_len / l0 - (factor - 1) if method == "dynamic" else factor
    ratio = inv_freq.double() / theta
    assert (ratio <= 1 + 4 * EPS32).all()
    assert (ratio >= 1 / stretch - 4 * EPS32).all()


def test_spellings_of_hugging_face_v4_and_v5() -> None:
    v4_old = {"type": "linear", "factor": 2}
    v5 = {"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}
    assert normalize_rope_scaling(v4_old) == {"rope_type": "linear", "factor": 2.0}
    inv_v5, _ = rope_scaled_frequencies(32, None, v5)
    linear = {"rope_type": "linear", "factor": 2}
    inv_base, _ = rope_scaled_frequencies(32, 500000.0, linear)
    assert torch.equal(inv_v5, inv_base)
    assert RotaryEmbedding(32, rope_scaling=v5).base == 500000.0
    assert RotaryEmbedding(32).base == 10000.0


@pytest.mark.parametrize(
    "scaling,message",
    [
        ({"rope_type": "ntk-by-parts", "factor": 2.0}, "rope_type"),
        ({"rope_type": "linear"}, "'factor'"),
        ({"rope_type": "linear", "factor": 0.5}, "'factor'"),
        ({"rope_type": "linear", "factor": "2"}, "'factor'"),
        ({"rope_type": "dynamic", "factor": 2.0}, "original_max_position_embeddings"),
        ({"rope_type": "yarn", "factor": 2.0}, "original_max_position_embeddings"),
        ({**YARN, "original_max_position_embeddings": 0}, "original_max_position"),
        ({**YARN, "beta_fast": 1, "beta_slow": 32}, "beta_slow"),
        ({k: v for k, v in LLAMA3.items() if k != "low_freq_factor"}, "low_freq"),
        ({**LLAMA3, "low_freq_factor": 4.0}, "low_freq_factor < high_freq_factor"),
        ({**LINEAR, "factr": 2}, "factr"),
        ({"type": "linear", "rope_type": "yarn", "factor": 2}, "type"),
        ("linear", "dict"),
    ],
)
def test_bad_scaling_names_the_key(scaling, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rope_scaled_frequencies(16, 10000.0, scaling)
    with pytest.raises(ValueError, match=message):
        RotaryEmbedding(16, rope_scaling=scaling)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="head_dim"):
        rope_scaled_frequencies(15, 10000.0, LINEAR)
    with pytest.raises(ValueError, match="head_dim"):
        rope_scaled_frequencies(2, 10000.0, DYNAMIC, 4 * L0)  # d/(d−2) needs d >= 4
    with pytest.raises(ValueError, match="seq_len"):
        rope_scaled_frequencies(16, 10000.0, DYNAMIC, 0)
    with pytest.raises(ValueError, match="rope_theta"):
        v5 = {"rope_type": "default", "rope_theta": 500000.0}
        rope_scaled_frequencies(16, 10000.0, v5)
    with pytest.raises(ValueError, match="base"):
        rope_scaled_frequencies(16, -1.0, None)


def test_static_ntk_is_bloc97s_base_change() -> None:
    """θ′_i = (base·κ^(d/(d−2)))^(−2i/d) in float64, rounded once: equal bit for bit;
    the fastest pair keeps θ_0 = 1, the slowest is divided by exactly κ (to 2.2e-16
    relative in float64, measured)."""
    d, base, factor = 64, 10000.0, 4.0
    ours, attention_factor = rope_scaled_frequencies(d, base, {"rope_type": "ntk",
                                                               "factor": factor})
    new_base = base * factor ** (d / (d - 2))
    assert static_ntk_base(base, d, factor) == new_base
    expected = new_base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)
    assert torch.equal(ours, expected.float())
    assert attention_factor == 1.0
    plain = base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)
    assert expected[0] == 1.0
    assert abs(plain[-1] / expected[-1] / factor - 1) < 1e-15
    with pytest.raises(ValueError, match="head_dim must be an even integer >= 4"):
        rope_scaled_frequencies(2, base, {"rope_type": "ntk", "factor": 2.0})


LONGROPE = {"rope_type": "longrope", "factor": 16.0,
            "original_max_position_embeddings": 64,
            "short_factor": [1.0, 1.0, 1.5, 2.0], "long_factor": [1.0, 2.0, 4.0, 8.0]}


def test_longrope_short_up_to_L0_long_past_it() -> None:
    """θ′_i = θ_i / short_factor[i] for L ≤ L0 and θ_i / long_factor[i] past it (in
    float64, rounded once: bit-identical), and the attention factor
    √(1 + ln κ / ln L0) for both (Ding et al. 2024; Phi-3's code)."""
    theta = 1e4 ** -(torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    for seq_len, key in ((None, "short_factor"), (64, "short_factor"),
                         (65, "long_factor"), (10_000, "long_factor")):
        ours, factor = rope_scaled_frequencies(8, 1e4, LONGROPE, seq_len)
        assert torch.equal(ours, (theta / torch.tensor(LONGROPE[key],
                                                       dtype=torch.float64)).float())
        assert factor == math.sqrt(1 + math.log(16.0) / math.log(64))
    given_factor = {**LONGROPE, "attention_factor": 1.25}
    assert rope_scaled_frequencies(8, 1e4, given_factor)[1] == 1.25
    assert rope_scaled_frequencies(8, 1e4, {**LONGROPE, "factor": 1.0})[1] == 1.0


def test_longrope_module_switches_with_the_current_length() -> None:
    rope = RotaryEmbedding(8, 1e4, rope_scaling=LONGROPE)
    x = torch.randn(1, 1, 200, 8)
    factor = math.sqrt(1 + math.log(16.0) / math.log(64))

    def expected(length: int) -> torch.Tensor:
        seq_len = length if length > 64 else None
        inv_freq, _ = rope_scaled_frequencies(8, 1e4, LONGROPE, seq_len)
        angles = torch.arange(length, dtype=torch.float32)[:, None] * inv_freq
        cos, sin = angles.cos() * factor, angles.sin() * factor
        return rotate_pairs(x[:, :, :length], cos, sin, interleaved=False)

    for length in (40, 200, 64, 65, 40):  # short, long, back to short
        assert torch.equal(rope(x[:, :, :length], torch.arange(length)), expected(length))


@pytest.mark.parametrize(("scaling", "message"), [
    ({**LONGROPE, "short_factor": []}, "'short_factor'.*non-empty list"),
    ({**LONGROPE, "long_factor": [1.0, 0.0, 1.0, 1.0]}, "'long_factor'.*> 0"),
    ({**LONGROPE, "long_factor": "1,2"}, "'long_factor'.*non-empty list"),
    ({k: v for k, v in LONGROPE.items() if k != "short_factor"},
     "needs the key\\(s\\) \\['short_factor'\\]"),
    ({"rope_type": "ntk"}, "needs the key\\(s\\) \\['factor'\\]"),
    ({"rope_type": "ntk", "factor": 2.0, "beta_fast": 3}, "does not take"),
])
def test_bad_new_types_name_the_key(scaling, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalize_rope_scaling(scaling)


def test_longrope_factor_lists_must_fit_the_head() -> None:
    with pytest.raises(ValueError, match="one entry per frequency pair \\(head_dim/2 = 8\\)"):
        rope_scaled_frequencies(16, 1e4, LONGROPE)


def test_nested_per_layer_type_parameters() -> None:
    """transformers v5's nested form (Gemma 3's layout) is read, entry by entry."""
    from posenc_lib.encodings.rope_scaling import (
        is_per_layer_type,
        normalize_rope_parameters,
    )

    gemma3 = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
              "full_attention": {"rope_type": "linear", "factor": 8, "rope_theta": 1e6}}
    out = normalize_rope_parameters(gemma3)
    assert list(out) == ["full_attention", "sliding_attention"]
    assert out["full_attention"] == {"rope_type": "linear", "rope_theta": 1e6,
                                     "factor": 8.0}
    assert is_per_layer_type(out) and not is_per_layer_type({"rope_type": "default"})
    assert normalize_rope_parameters({"type": "linear", "factor": 2}) == \
        normalize_rope_scaling({"type": "linear", "factor": 2})
    with pytest.raises(ValueError, match="not in the allowed layer types "
                                         "\\('full_attention', 'sliding_attention'\\)"):
        normalize_rope_parameters({"chunked_attention": {"rope_type": "default"}})
    with pytest.raises(ValueError, match="rope_parameters\\['full_attention'\\]: "
                                         "rope_scaling with rope_type='linear' needs"):
        normalize_rope_parameters({"full_attention": {"rope_type": "linear"}})
    with pytest.raises(ValueError, match="mixes per-layer-type dictionaries"):
        normalize_rope_parameters({"rope_type": "default",
                                   "full_attention": {"rope_type": "default"}})


def test_partial_rotary_factor_computes_over_the_rotated_width() -> None:
    """partial_rotary_factor f: the frequencies of a head of width ⌊f·d⌋, for every
    type but proportional; f = 1.0 (as Phi-3's config writes it) changes nothing."""
    for scaling in (LINEAR, YARN, LLAMA3, DYNAMIC, {"rope_type": "default"}):
        partial = {**scaling, "partial_rotary_factor": 0.25}
        full = {**scaling, "partial_rotary_factor": 1.0}
        for seq_len in (None, 4 * L0):
            assert torch.equal(rope_scaled_frequencies(64, 1e4, partial, seq_len)[0],
                               rope_scaled_frequencies(16, 1e4, scaling, seq_len)[0])
            assert torch.equal(rope_scaled_frequencies(64, 1e4, full, seq_len)[0],
                               rope_scaled_frequencies(64, 1e4, scaling, seq_len)[0])


def test_proportional_keeps_the_fastest_pairs_and_divides_by_factor() -> None:
    params = {"rope_type": "proportional", "partial_rotary_factor": 0.5, "factor": 2.0}
    inv_freq, factor = rope_scaled_frequencies(16, 1e4, params, dtype=torch.float64)
    expected = theta64(16, 1e4) / 2.0
    expected[4:] = 0.0
    assert torch.equal(inv_freq, expected) and factor == 1.0
    plain = rope_scaled_frequencies(16, 1e4, {"rope_type": "proportional"})[0]
    assert torch.equal(plain, rope_scaled_frequencies(16, 1e4, None)[0])


def test_what_transformers_derives_from_max_position_embeddings() -> None:
    """LongRoPE's factor = max_position_embeddings / L0; a missing L0 =
    max_position_embeddings; None values dropped; the result normalises to itself."""
    longrope = {"rope_type": "longrope", "short_factor": [1.0] * 4,
                "long_factor": [2.0] * 4, "original_max_position_embeddings": 64,
                "factor": None, "attention_factor": None}
    with pytest.raises(ValueError, match="max_position_embeddings="):
        normalize_rope_scaling(longrope)
    out = normalize_rope_scaling(longrope, max_position_embeddings=1024)
    assert out["factor"] == 16.0 and "attention_factor" not in out
    assert normalize_rope_scaling(out) == out
    _, attention = rope_scaled_frequencies(8, 1e4, out)
    assert math.isclose(attention, math.sqrt(1 + math.log(16) / math.log(64)))
    dynamic = normalize_rope_scaling({"type": "dynamic", "factor": 2.0},
                                     max_position_embeddings=L0)
    assert dynamic == {"rope_type": "dynamic", "factor": 2.0,
                       "original_max_position_embeddings": L0}
    with pytest.raises(ValueError, match="below 1"):
        normalize_rope_scaling(longrope, max_position_embeddings=32)
    with pytest.raises(ValueError, match="max_position_embeddings must be"):
        normalize_rope_scaling(LINEAR, max_position_embeddings=0)


def test_yarn_zeros_read_as_absent() -> None:
    zeros = {**YARN, "mscale": 0, "mscale_all_dim": 0.0, "beta_fast": 0, "beta_slow": 0}
    out = normalize_rope_scaling(zeros)
    assert (out["beta_fast"], out["beta_slow"]) == (32.0, 1.0)
    for mscale, all_dim in ((0.707, 0), (0, 0.707), (0, 0)):
        params = {**YARN, "mscale": mscale, "mscale_all_dim": all_dim}
        assert rope_scaled_frequencies(16, 1e4, params)[1] == 0.1 * math.log(4.0) + 1
    with pytest.raises(ValueError, match="'mscale_all_dim'.*>= 0"):
        normalize_rope_scaling({**YARN, "mscale_all_dim": -1.0})


def test_mrope_keys_are_kept_and_checked() -> None:
    qwen2 = {"type": "mrope", "mrope_section": [16, 24, 24], "rope_theta": 1e6,
             "rope_type": "default"}  # as transformers 5.23 holds Qwen2-VL's
    assert normalize_rope_scaling(qwen2) == {"rope_type": "default", "rope_theta": 1e6,
                                             "mrope_section": [16, 24, 24]}
    yarn = normalize_rope_scaling({**YARN, "mrope_section": [2, 3, 3],
                                   "mrope_interleaved": True})
    assert yarn["mrope_section"] == [2, 3, 3] and yarn["mrope_interleaved"] is True


@pytest.mark.parametrize(("scaling", "message"), [
    ({**LINEAR, "partial_rotary_factor": 0}, "'partial_rotary_factor'.*> 0"),
    ({**LINEAR, "partial_rotary_factor": 1.5}, "'partial_rotary_factor'.*\\(0, 1\\]"),
    ({**LINEAR, "mrope_section": [16, 0]}, "'mrope_section'.*integers >= 1"),
    ({**LINEAR, "mrope_section": "16,24,24"}, "'mrope_section'"),
    ({**LINEAR, "mrope_interleaved": "yes"}, "'mrope_interleaved'.*True or False"),
    ({"rope_type": "proportional", "factor": 0.5}, "'factor'"),
    ({"rope_type": "proportional", "beta_fast": 2}, "does not take"),
])
def test_bad_shipped_keys_name_the_key(scaling, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalize_rope_scaling(scaling)


def test_partial_rotary_width_errors() -> None:
    with pytest.raises(ValueError, match="rotary_dim=3"):
        rope_scaled_frequencies(12, 1e4, {"partial_rotary_factor": 0.25})  # odd width
    with pytest.raises(ValueError, match="rotates 2 dimensions"):
        rope_scaled_frequencies(8, 1e4, {**DYNAMIC, "partial_rotary_factor": 0.25})
    with pytest.raises(ValueError, match="dtype"):
        rope_scaled_frequencies(8, 1e4, None, dtype=torch.float16)

def test_method_scaling() -> None:
    assert method_scaling("none", 2.0, 8192) is None
    assert method_scaling("linear", 2.0, 8192) == {"rope_type": "linear", "factor": 2.0}
    yarn = method_scaling("yarn", 4.0, 8192)
    assert yarn["original_max_position_embeddings"] == 8192 and yarn["beta_fast"] == 32
    assert method_scaling("llama3", 2.0, 8192)["high_freq_factor"] == 4.0
    with pytest.raises(ValueError, match="method"):
        method_scaling("ntk", 2.0, 8192)
    with pytest.raises(ValueError, match="factor"):
        method_scaling("linear", 0.5, 8192)


def test_stretch_scaling_sets_kappa_and_dynamic_factor_one() -> None:
    for method in ("linear", "yarn", "llama3"):
        assert stretch_scaling(method, 4, 128) == method_scaling(method, 4.0, 128)
    assert stretch_scaling("dynamic", 4, 128) == method_scaling("dynamic", 1.0, 128)
    assert stretch_scaling("none", 4, 128) is None
    # dynamic NTK at factor 1: unchanged at L0, NTK-aware with κ = L / L0 past it
    inside, _ = rope_scaled_frequencies(16, 1e4, stretch_scaling("dynamic", 4, 128), seq_len=128)
    assert torch.equal(inside, rope_scaled_frequencies(16, 1e4, None)[0])
    with pytest.raises(ValueError, match="kappa"):
        stretch_scaling("yarn", 0.5, 128)
    with pytest.raises(ValueError, match="method"):
        stretch_scaling("ntk", 2.0, 128)


def test_dynamic_stretch_is_one_inside_and_the_running_rule_past_l0() -> None:
    from posenc_lib.encodings.rope_scaling import dynamic_stretch

    assert dynamic_stretch(2.0, 8192, 8192) == 1.0
    assert dynamic_stretch(2.0, 16384, 8192) == 3.0 and dynamic_stretch(1.0, 16384, 8192) == 2.0
    assert dynamic_ntk_base(1e4, 16, 1.0, 512, 128) == 1e4 * 4.0 ** (16 / 14)


def test_critical_pair_index_is_the_first_pair_without_a_full_turn() -> None:
    from posenc_lib.encodings.rope_scaling import critical_pair_index

    theta = rope_inverse_frequencies(16, 1e4)
    i_c = critical_pair_index(theta, 128)  # the book's ci model: pairs 0-2 turn
    assert i_c == 3 and 127 * theta[2].item() >= 2 * math.pi > 127 * theta[3].item()
    assert critical_pair_index(rope_inverse_frequencies(64, 1e5), 8192) == 20  # SmolLM2
    with pytest.raises(ValueError, match="no critical"):
        critical_pair_index(rope_inverse_frequencies(4, 10.0), 10_000)


def test_pair_stretch_and_unseen_distances() -> None:
    """θ_i/θ'_i per pair; the share of keys past L_train; the last unseen distance."""
    from posenc_lib import last_unseen_distances, pair_stretch, unseen_distance_share

    stretch = pair_stretch(method_scaling("linear", 2.0, 8192), 64, 1e5, 16_384)
    assert stretch.shape == (32,) and torch.allclose(stretch, torch.full((32,), 2.0))
    assert torch.allclose(pair_stretch(None, 64, 1e5, 16_384), torch.ones(32))
    assert unseen_distance_share(10, 8) == 3 / 11 and unseen_distance_share(5, 8) == 0
    with pytest.raises(ValueError, match="position=-1"):
        unseen_distance_share(-1, 8)
    last = last_unseen_distances(rope_inverse_frequencies(64, 1e5), 8192, 16_383)
    assert min(last) == 20 and last[20] == 8378 and last[31] == 16_383


def test_ntk_turn_margin_and_full_turn_stretch() -> None:
    """NTK's pair i_c of the book's ci model turns fully within κ L_train from κ ≈ 2.2."""
    from posenc_lib import ntk_full_turn_stretch, ntk_turn_margin

    wavelength = 2 * math.pi / rope_inverse_frequencies(16, 10_000.0).double()[3].item()
    def margin(kappa: float) -> float:
        return ntk_turn_margin(kappa, wavelength, 3, 16, 128)

    assert margin(1.0) == wavelength - 127 > 0 > margin(3.0)
    assert ntk_turn_margin(5.0, 100.0, 7, 16, 128) == 100.0 * 5.0 - (5 * 128 - 1)
    kappa_c = ntk_full_turn_stretch(wavelength, 3, 16, 128, 2.0, 3.0)
    assert 2 < kappa_c < 3 and abs(margin(kappa_c)) < 1e-9
    with pytest.raises(ValueError, match="kappa=0.5"):
        ntk_turn_margin(0.5, wavelength, 3, 16, 128)
    with pytest.raises(ValueError, match="pair=8"):
        ntk_turn_margin(2.0, wavelength, 8, 16, 128)
    with pytest.raises(ValueError, match="low=3.0"):
        ntk_full_turn_stretch(wavelength, 3, 16, 128, 3.0, 4.0)


def test_yarn_part_scaling() -> None:
    """The ramp without temperature, the temperature alone, the paper's ramp."""
    from posenc_lib import yarn_part_scaling

    ramp = yarn_part_scaling("ramp", 4.0, 128)
    assert ramp == {**method_scaling("yarn", 4.0, 128), "attention_factor": 1.0}
    _, factor = rope_scaled_frequencies(32, 10_000.0, ramp, seq_len=512)
    assert factor == 1.0
    heat = yarn_part_scaling("temperature", 4.0, 128)
    theta, factor = rope_scaled_frequencies(32, 10_000.0, heat, seq_len=512)
    assert math.isclose(factor, 0.1 * math.log(4) + 1)
    assert torch.allclose(theta, rope_inverse_frequencies(32, 10_000.0))
    paper = yarn_part_scaling("paper ramp", 4.0, 128)
    assert paper["rope_type"] == "llama3" and paper["high_freq_factor"] == 32.0
    with pytest.raises(ValueError, match="part='both'"):
        yarn_part_scaling("both", 4.0, 128)
    with pytest.raises(ValueError, match="kappa=0.5"):
        yarn_part_scaling("ramp", 0.5, 128)
