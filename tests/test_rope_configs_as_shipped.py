"""Hugging Face configs as models ship them, read unchanged, against transformers 5.23.

Each case builds the transformers config class with the values a released model ships
(its config.json on the Hugging Face Hub, cited per case; no download), hands
``config.rope_parameters`` as transformers holds it to posenc_lib unchanged (with
``max_position_embeddings`` for what transformers derives from it), and compares with
transformers' own computation: the model's rotary embedding module (its
``inv_freq`` and ``attention_scaling``, which is ``compute_default_rope_parameters``
or ``ROPE_INIT_FUNCTIONS[rope_type]``), or ``ROPE_INIT_FUNCTIONS[rope_type]`` directly
where a length is involved.

Tolerances are those of test_rope_scaling_vs_transformers.py, derived there:
transformers computes θ′_i in float32, so the relative difference from our
float64-then-rounded θ′_i may reach ln(base)/2·eps plus a few roundings; we allow
(ln(base)/2 + 4)·eps relative (a θ′_i of exactly 0, p-RoPE's switched-off pairs, must be
0 in both). Attention factors agree to 1e-12 relative (both are float64 formulas). A
cos/sin table may then differ by that relative error times the angle p·θ′_i ≤ p, plus
the float32 rounding of the product, cos and sin: (ln(base)/2 + 6)·eps·(p + 1), times the
attention factor.
"""

from __future__ import annotations

import math

import pytest
import torch

from posenc_lib import RotaryEmbedding, normalize_rope_scaling, rope_scaled_frequencies
from posenc_lib.encodings.mrope import mrope_angles
from posenc_lib.encodings.rope_partial import dimension_frequencies

transformers = pytest.importorskip(
    "transformers",
    reason="transformers (test-only, pinned in requirements.txt) is not installed",
)
from transformers import LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

EPS = torch.finfo(torch.float32).eps
L0 = "original_max_position_embeddings"

# microsoft/Phi-3.5-mini-instruct, config.json: rope_scaling {"type": "longrope", ...}
# with no "factor"; max_position_embeddings 131072, original_max_position_embeddings 4096.
PHI35_LONG = [
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601,
    1.5899999141693115, 1.600000023841858, 1.6200000047683716, 2.620000123977661,
    3.2300000190734863, 3.2300000190734863, 4.789999961853027, 7.400000095367432,
    7.700000286102295, 9.09000015258789, 12.199999809265137, 17.670000076293945,
    24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992,
    50.340003967285156, 50.45000457763672, 57.55000305175781, 57.93000411987305,
    58.21000289916992, 60.1400032043457, 62.61000442504883, 62.62000274658203,
    62.71000289916992, 63.1400032043457, 63.1400032043457, 63.77000427246094,
    63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
    64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938,
    64.4800033569336, 64.51000213623047, 64.52999877929688, 64.83999633789062,
]
PHI35_SHORT = [
    1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842,
    1.0499999523162842, 1.0699999332427979, 1.0999999046325684, 1.1099998950958252,
    1.1599998474121094, 1.1599998474121094, 1.1699998378753662, 1.2899998426437378,
    1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083,
    1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903,
    1.9899996519088745, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713,
    2.5899994373321533, 2.729999542236328, 2.749999523162842, 2.8399994373321533,
]


def gpt_neox_20b():
    """EleutherAI/gpt-neox-20b: hidden 6144, 64 heads (head_dim 96), rotary_pct 0.25,
    rotary_emb_base 10000 (v4 names; GPTNeoXConfig moves them into rope_parameters)."""
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
    config = GPTNeoXConfig(hidden_size=6144, num_attention_heads=64, num_hidden_layers=1,
                           intermediate_size=64, rotary_pct=0.25, rotary_emb_base=10000,
                           max_position_embeddings=2048)
    return config, GPTNeoXRotaryEmbedding, 96


def phi_2():
    """microsoft/phi-2: hidden 2560, 32 heads (head_dim 80), partial_rotary_factor 0.4,
    rope_theta 10000."""
    from transformers import PhiConfig
    from transformers.models.phi.modeling_phi import PhiRotaryEmbedding
    config = PhiConfig(hidden_size=2560, num_attention_heads=32, num_hidden_layers=1,
                       intermediate_size=64, partial_rotary_factor=0.4, rope_theta=10000.0,
                       max_position_embeddings=2048)
    return config, PhiRotaryEmbedding, 80


def stablelm_3b():
    """stabilityai/stablelm-3b-4e1t: hidden 2560, 32 heads (head_dim 80),
    partial_rotary_factor 0.25, rope_theta 10000."""
    from transformers import StableLmConfig
    from transformers.models.stablelm.modeling_stablelm import StableLmRotaryEmbedding
    config = StableLmConfig(hidden_size=2560, num_attention_heads=32, num_hidden_layers=1,
                            intermediate_size=64, partial_rotary_factor=0.25,
                            rope_theta=10000.0, max_position_embeddings=4096)
    return config, StableLmRotaryEmbedding, 80


def phi_3_mini_4k():
    """microsoft/Phi-3-mini-4k-instruct: hidden 3072, 32 heads (head_dim 96), rope_theta
    10000, no rope_scaling; Phi3Config writes partial_rotary_factor 1.0 into
    rope_parameters."""
    from transformers import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding
    config = Phi3Config(hidden_size=3072, num_attention_heads=32, num_hidden_layers=1,
                        intermediate_size=64, rope_theta=10000.0, rope_scaling=None,
                        max_position_embeddings=4096, original_max_position_embeddings=4096)
    return config, Phi3RotaryEmbedding, 96


def phi_35_mini_128k():
    """microsoft/Phi-3.5-mini-instruct (128k): LongRoPE without "factor"."""
    from transformers import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding
    config = Phi3Config(hidden_size=3072, num_attention_heads=32, num_hidden_layers=1,
                        intermediate_size=64, rope_theta=10000.0,
                        max_position_embeddings=131072, original_max_position_embeddings=4096,
                        rope_scaling={"type": "longrope", "long_factor": PHI35_LONG,
                                      "short_factor": PHI35_SHORT})
    return config, Phi3RotaryEmbedding, 96


def qwen3_next():
    """Qwen/Qwen3-Next-80B-A3B-Instruct: head_dim 256, partial_rotary_factor 0.25,
    rope_theta 10 000 000, max_position_embeddings 262144."""
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextRotaryEmbedding
    config = Qwen3NextConfig(hidden_size=2048, num_attention_heads=16, head_dim=256,
                             num_hidden_layers=1, partial_rotary_factor=0.25,
                             rope_theta=10000000.0, max_position_embeddings=262144)
    return config, Qwen3NextRotaryEmbedding, 256


def glm_4():
    """THUDM/GLM-4-9B-0414: head_dim 128, partial_rotary_factor 0.5, rope_theta 10000,
    max_position_embeddings 32768."""
    from transformers import Glm4Config
    from transformers.models.glm4.modeling_glm4 import Glm4RotaryEmbedding
    config = Glm4Config(hidden_size=4096, num_attention_heads=32, head_dim=128,
                        num_hidden_layers=1, partial_rotary_factor=0.5, rope_theta=10000.0,
                        max_position_embeddings=32768)
    return config, Glm4RotaryEmbedding, 128


SHIPPED = {"gpt-neox-20b": gpt_neox_20b, "phi-2": phi_2, "stablelm-3b-4e1t": stablelm_3b,
           "Phi-3-mini-4k": phi_3_mini_4k, "Phi-3.5-mini-128k": phi_35_mini_128k,
           "Qwen3-Next-80B": qwen3_next, "GLM-4-9B-0414": glm_4}


def assert_frequencies_close(ours: torch.Tensor, theirs: torch.Tensor, base: float,
                             what: object) -> None:
    assert ours.dtype == theirs.dtype == torch.float32, what
    assert ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
    off = theirs == 0
    assert torch.equal(ours == 0, off), what  # p-RoPE's switched-off pairs
    relative = ((ours.double() - theirs.double()).abs() / theirs.double())[~off].max()
    assert relative <= (math.log(base) / 2 + 4) * EPS, (what, relative / EPS)


@pytest.mark.parametrize("name", list(SHIPPED))
def test_shipped_rope_parameters_match_the_models_rotary_embedding(name: str) -> None:
    """config.rope_parameters, unchanged, give the module's inv_freq and attention
    scaling (partial rotary: the first int(head_dim·f)/2 frequencies only)."""
    config, rotary_class, head_dim = SHIPPED[name]()
    shipped = config.rope_parameters
    module = rotary_class(config)
    ours, factor = rope_scaled_frequencies(
        head_dim, None, shipped, max_position_embeddings=config.max_position_embeddings)
    assert_frequencies_close(ours, module.inv_freq, shipped["rope_theta"], name)
    assert math.isclose(factor, module.attention_scaling, rel_tol=1e-12), name
    assert config.rope_parameters == shipped  # read, not changed


@pytest.mark.parametrize("name", ["gpt-neox-20b", "Qwen3-Next-80B", "GLM-4-9B-0414"])
def test_partial_rotary_is_rope_partials_neox_form(name: str) -> None:
    """The rotated width and its frequencies are rope_partial's GPT-NeoX form: the
    non-zero entries of dimension_frequencies(head_dim, base, f, "neox")."""
    config, _, head_dim = SHIPPED[name]()
    params = config.rope_parameters
    ours, _ = rope_scaled_frequencies(head_dim, None, params, dtype=torch.float64)
    spread = dimension_frequencies(head_dim, params["rope_theta"],
                                   params["partial_rotary_factor"], "neox")
    assert torch.equal(ours, spread[: ours.numel()])
    assert not spread[2 * ours.numel():].any()


def test_phi35_longrope_without_factor_matches_transformers_on_both_sides_of_L0() -> None:
    """Phi-3.5-mini's LongRoPE dictionary has no "factor": transformers takes
    max_position_embeddings / L0 = 32; so do we when given max_position_embeddings, and
    without it the dictionary is refused, naming what to pass."""
    config, _, head_dim = phi_35_mini_128k()
    shipped = config.rope_parameters
    assert "factor" not in shipped
    with pytest.raises(ValueError, match="max_position_embeddings="):
        rope_scaled_frequencies(head_dim, None, shipped)
    maximum = config.max_position_embeddings
    assert normalize_rope_scaling(shipped, max_position_embeddings=maximum)["factor"] == 32
    for seq_len in (None, 4096, 4097, 131072):
        ours, factor = rope_scaled_frequencies(head_dim, None, shipped, seq_len,
                                               max_position_embeddings=maximum)
        theirs, their_factor = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu",
                                                              seq_len=seq_len)
        assert_frequencies_close(ours, theirs, 10000.0, seq_len)
        assert math.isclose(factor, their_factor, rel_tol=1e-12)
        assert math.isclose(factor, math.sqrt(1 + math.log(32) / math.log(4096)))


def test_phi35_factor_lists_with_partial_rotary_match_transformers() -> None:
    """LongRoPE with partial_rotary_factor (as Phi-4-mini ships it: head_dim 128,
    f = 0.75, 48 pairs; Phi-3.5's lists stand in for its own): the lists cover the
    rotated pairs."""
    from transformers import Phi3Config
    config = Phi3Config(hidden_size=3072, num_attention_heads=24, num_hidden_layers=1,
                        intermediate_size=64, rope_theta=10000.0, partial_rotary_factor=0.75,
                        max_position_embeddings=131072, original_max_position_embeddings=4096,
                        rope_scaling={"type": "longrope", "long_factor": PHI35_LONG,
                                      "short_factor": PHI35_SHORT})
    for seq_len in (None, 8192):
        ours, factor = rope_scaled_frequencies(
            128, None, config.rope_parameters, seq_len,
            max_position_embeddings=config.max_position_embeddings)
        theirs, their_factor = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu",
                                                              seq_len=seq_len)
        assert_frequencies_close(ours, theirs, 10000.0, seq_len)
        assert math.isclose(factor, their_factor, rel_tol=1e-12)


def llama(head_dim: int, rope_parameters: dict, max_positions: int = 32768) -> LlamaConfig:
    return LlamaConfig(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim,
                       num_hidden_layers=1, max_position_embeddings=max_positions,
                       rope_parameters=rope_parameters)


@pytest.mark.parametrize("rope_type", ["linear", "dynamic", "yarn", "llama3", "longrope",
                                       "proportional"])
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.75, 1.0])
def test_every_init_function_with_partial_rotary(rope_type: str, fraction: float) -> None:
    """Every ROPE_INIT_FUNCTIONS entry of transformers 5.23 with partial_rotary_factor
    (proportional reads it as p-RoPE's share of kept pairs), below and above L0."""
    head_dim, base, l0 = 128, 500000.0, 4096
    pairs = int(head_dim * fraction) // 2
    extra = {
        "linear": {"factor": 4.0},
        "dynamic": {"factor": 4.0},
        "yarn": {"factor": 4.0, L0: l0},
        "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, L0: l0},
        "longrope": {"factor": 16.0, L0: l0,
                     "short_factor": [1.0 + i / pairs for i in range(pairs)],
                     "long_factor": [1.0 + 30 * i / pairs for i in range(pairs)]},
        "proportional": {"factor": 2.0},
    }[rope_type]
    shipped = {"rope_type": rope_type, "rope_theta": base, "partial_rotary_factor": fraction,
               **extra}
    config = llama(head_dim, dict(shipped), max_positions=l0 if rope_type == "dynamic"
                   else 16 * l0)
    for seq_len in (None, l0 // 2, 3 * l0):
        ours, factor = rope_scaled_frequencies(
            head_dim, None, shipped, seq_len,
            max_position_embeddings=config.max_position_embeddings)
        theirs, their_factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu",
                                                             seq_len=seq_len)
        used = base
        if rope_type == "dynamic" and seq_len is not None and seq_len > l0:
            used = base * (4.0 * seq_len / l0 - 3.0) ** (2 * pairs / (2 * pairs - 2))
        assert_frequencies_close(ours, theirs, used, (rope_type, fraction, seq_len))
        assert math.isclose(factor, their_factor, rel_tol=1e-12)


def test_proportional_is_rope_partials_p_rope_form() -> None:
    """proportional: d/2 frequencies, p_rope's kept pairs as dimension_frequencies
    gives them, the rest 0, all divided by factor."""
    params = {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25,
              "factor": 2.0}
    ours, _ = rope_scaled_frequencies(256, None, params, dtype=torch.float64)
    spread = dimension_frequencies(256, 1e6, 0.25, "p_rope")[:128]
    assert torch.equal(ours, spread / 2.0)
    assert int((ours > 0).sum()) == 32


@pytest.mark.parametrize("mscale,mscale_all_dim", [(0.707, 0), (0, 0.707), (0, 0),
                                                   (1.0, 1.0), (0.707, 0.707)])
def test_yarn_zero_mscale_reads_as_absent(mscale: float, mscale_all_dim: float) -> None:
    """transformers tests mscale and mscale_all_dim for truth, so 0 means absent; the
    attention factor is then 0.1·ln κ + 1."""
    shipped = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, L0: 4096,
               "beta_fast": 32, "beta_slow": 1, "mscale": mscale,
               "mscale_all_dim": mscale_all_dim}
    config = llama(64, dict(shipped), max_positions=163840)
    ours, factor = rope_scaled_frequencies(64, None, shipped)
    theirs, their_factor = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    assert_frequencies_close(ours, theirs, 10000.0, shipped)
    assert math.isclose(factor, their_factor, rel_tol=1e-12)
    if not (mscale and mscale_all_dim):
        assert math.isclose(factor, 0.1 * math.log(40.0) + 1)


def qwen2_vl(rope_scaling: dict):
    """Qwen/Qwen2-VL-7B-Instruct text model: hidden 3584, 28 heads (head_dim 128),
    rope_theta 1e6, rope_scaling {"type": "mrope", "mrope_section": [16, 24, 24]}."""
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding
    config = Qwen2VLTextConfig(hidden_size=3584, num_attention_heads=28, num_hidden_layers=1,
                               num_key_value_heads=4, intermediate_size=64,
                               rope_theta=1000000.0, max_position_embeddings=32768,
                               rope_scaling=dict(rope_scaling))
    return config, Qwen2VLRotaryEmbedding(config), 128


def qwen2_5_vl(rope_scaling: dict):
    """Qwen/Qwen2.5-VL-7B-Instruct text model (head_dim 128, rope_theta 1e6,
    mrope_section [16, 24, 24]); its model card's YaRN for long inputs adds
    {"type": "yarn", "factor": 4, "original_max_position_embeddings": 32768}."""
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLTextConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLRotaryEmbedding
    config = Qwen2_5_VLTextConfig(hidden_size=3584, num_attention_heads=28,
                                  num_hidden_layers=1, num_key_value_heads=4,
                                  intermediate_size=64, rope_theta=1000000.0,
                                  max_position_embeddings=128000,
                                  rope_scaling=dict(rope_scaling))
    return config, Qwen2_5_VLRotaryEmbedding(config), 128


def qwen3_vl(rope_scaling: dict):
    """Qwen/Qwen3-VL-8B-Instruct text model: head_dim 128, rope_theta 5e6,
    {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": true},
    max_position_embeddings 262144; its model card's YaRN to 1M tokens sets
    {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 262144}."""
    from transformers import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding
    config = Qwen3VLTextConfig(hidden_size=4096, num_attention_heads=32, head_dim=128,
                               num_hidden_layers=1, num_key_value_heads=8,
                               intermediate_size=64, max_position_embeddings=262144,
                               rope_parameters={"rope_theta": 5000000.0,
                                                **rope_scaling})
    return config, Qwen3VLTextRotaryEmbedding(config), 128


QWEN2_SECTION = {"mrope_section": [16, 24, 24]}
QWEN3_SECTION = {"mrope_section": [24, 20, 20], "mrope_interleaved": True}
MROPE_CASES = [
    (qwen2_vl, {"type": "mrope", **QWEN2_SECTION}),
    (qwen2_vl, {"type": "dynamic", "factor": 2.0, **QWEN2_SECTION}),
    (qwen2_5_vl, {"type": "mrope", **QWEN2_SECTION}),
    (qwen2_5_vl, {"type": "yarn", "factor": 4, L0: 32768, **QWEN2_SECTION}),
    (qwen2_5_vl, {"type": "linear", "factor": 4.0, **QWEN2_SECTION}),
    (qwen3_vl, {"rope_type": "default", **QWEN3_SECTION}),
    (qwen3_vl, {"rope_type": "yarn", "factor": 3.0, L0: 262144, **QWEN3_SECTION}),
    (qwen3_vl, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, L0: 32768, **QWEN3_SECTION}),
]


@pytest.mark.parametrize("build,rope_scaling", MROPE_CASES,
                         ids=[f"{b.__name__}-{s.get('type', s.get('rope_type'))}"
                              for b, s in MROPE_CASES])
def test_mrope_with_scaling_matches_the_vl_rotary_embedding(build, rope_scaling) -> None:
    """M-RoPE with a method, from the dictionary alone (section, layout, base and
    method): the module's inv_freq and attention scaling, and its sectioned cos/sin
    for image-like 3-axis positions (and, dynamic, past max_position_embeddings)."""
    config, module, head_dim = build(rope_scaling)
    shipped = config.rope_parameters
    base = shipped["rope_theta"]
    maximum = config.max_position_embeddings
    ours, factor = rope_scaled_frequencies(head_dim, None, shipped,
                                           max_position_embeddings=maximum)
    assert_frequencies_close(ours, module.inv_freq, base, rope_scaling)
    assert math.isclose(factor, module.attention_scaling, rel_tol=1e-12)

    generator = torch.Generator().manual_seed(0)
    longest = 2 * config.max_position_embeddings if "dynamic" in str(rope_scaling) \
        else 4000
    text = torch.arange(longest - 64, longest)
    grid = torch.randint(0, longest - 64, (3, 64), generator=generator)
    positions = torch.cat([grid, text.expand(3, -1)], dim=-1)[:, None]  # (3, 1, 128)
    their_cos, their_sin = module(torch.zeros(1, 1, positions.shape[-1], head_dim),
                                  positions)
    angles = mrope_angles(positions, head_dim, rope_scaling=shipped,
                          max_position_embeddings=maximum)  # (1, T, d/2)
    used = base
    if "dynamic" in str(rope_scaling):  # the NTK base at L = longest
        used = base * (2.0 * longest / config.max_position_embeddings - 1) ** (
            head_dim / (head_dim - 2))
    p = positions.amax(dim=0)[..., None].to(torch.float64) + 1  # (1, T, 1)
    bound = (math.log(used) / 2 + 6) * EPS * p * factor
    for table, reference in ((angles.cos(), their_cos), (angles.sin(), their_sin)):
        table = torch.cat([table, table], dim=-1) * factor
        assert ((table.double() - reference.double()).abs() <= bound).all(), rope_scaling


# How each model applies its partial rotation (transformers 5.23): GPT-NeoX, Qwen3-Next and
# GLM-4 slice q[..., :rotary_dim] inside apply_rotary_pos_emb (GLM-4 pairs (2i, 2i+1)
# there, repeating cos[..., :r/2] pair by pair); Phi and StableLM slice in the attention
# layer and call apply_rotary_pos_emb on the rotated part.
PARTIAL = {"gpt-neox-20b": ("gpt_neox", True, False), "phi-2": ("phi", False, False),
           "stablelm-3b-4e1t": ("stablelm", False, False),
           "Qwen3-Next-80B": ("qwen3_next", True, False),
           "GLM-4-9B-0414": ("glm4", True, True)}


@pytest.mark.parametrize("name", list(PARTIAL))
def test_rotary_embedding_from_shipped_partial_config_matches_the_model(name: str) -> None:
    """RotaryEmbedding(head_dim, rope_scaling=config.rope_parameters) rotates only the
    first int(head_dim·f) dimensions, as the model does, and leaves the rest bitwise
    unchanged; the rotated ones agree to the cos/sin bound of the module docstring
    (times the pair's norm, plus the rounding of the products)."""
    import importlib

    config, rotary_class, head_dim = SHIPPED[name]()
    module_name, slices_inside, interleaved = PARTIAL[name]
    modeling = importlib.import_module(
        f"transformers.models.{module_name}.modeling_{module_name}")
    shipped = config.rope_parameters
    fraction = shipped["partial_rotary_factor"]
    rotary_dim = int(head_dim * fraction)
    assert fraction < 1 and rotary_dim < head_dim

    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 16, head_dim, generator=generator)
    positions = torch.randint(0, 4096, (2, 16), generator=generator)
    cos, sin = rotary_class(config)(q, positions)  # (2, 16, rotary_dim) each
    assert cos.shape[-1] == rotary_dim
    if slices_inside:
        theirs, _ = modeling.apply_rotary_pos_emb(q, q, cos, sin)
    else:
        rotated, _ = modeling.apply_rotary_pos_emb(q[..., :rotary_dim], q[..., :rotary_dim],
                                                   cos, sin)
        theirs = torch.cat([rotated, q[..., rotary_dim:]], dim=-1)

    rope = RotaryEmbedding(head_dim, rope_scaling=shipped, interleaved=interleaved)
    assert rope.rotary_dim == rotary_dim
    ours = rope(q, positions)
    assert torch.equal(ours[..., rotary_dim:], q[..., rotary_dim:])
    assert torch.equal(theirs[..., rotary_dim:], q[..., rotary_dim:])
    part = q[..., :rotary_dim]
    pairs = part.unflatten(-1, (-1, 2)) if interleaved \
        else part.unflatten(-1, (2, -1)).transpose(-1, -2)
    pair_norm = pairs.norm(dim=-1)  # (2, 3, 16, r/2)
    pair_norm = pair_norm.repeat_interleave(2, dim=-1) if interleaved \
        else torch.cat([pair_norm, pair_norm], dim=-1)
    p = positions[:, None, :, None].double()
    table = (math.log(shipped["rope_theta"]) / 2 + 6) * EPS * (p + 1)
    bound = 2 * (table + 2 * EPS) * pair_norm.double()
    error = (ours[..., :rotary_dim] - theirs[..., :rotary_dim]).abs().double()
    assert (error <= bound).all(), (name, (error / bound).max())
    # the whole head would be a different rotation: the pass-through dims matter
    assert not torch.allclose(ours, RotaryEmbedding(head_dim, shipped["rope_theta"],
                                                    interleaved=interleaved)(q, positions))
