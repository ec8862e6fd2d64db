"""posenc_lib.pretrained.kv_cache: cache size from a config, re-rotating cached keys, and cached
decoding against recomputation (plain RoPE and dynamic NTK).

The decoding tests use a tiny randomly initialised ``LlamaForCausalLM`` (transformers
5.23, pinned, test-only; nothing downloaded). SmolLM2-135M's shapes are typed in from
its GGUF metadata (read with ``AutoConfig.from_pretrained(..., gguf_file=...)``: 30
layers, 9 query heads, 3 key/value heads, head_dim 64, hidden size 576); reading the
file takes about 10 s, so the unit tests do not.
"""

from __future__ import annotations

import pytest
import torch

from posenc_lib import apply_rope
from posenc_lib.pretrained.kv_cache import (
    KVCacheSize,
    cached_decode_logits,
    kv_cache_bytes_per_token,
    recomputed_logits,
    rerotate_keys,
)

EPS = torch.finfo(torch.float32).eps

# ---------------------------------------------------------------- cache size


def test_bytes_per_token_from_a_mapping_by_hand() -> None:
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
           "hidden_size": 256}
    size = kv_cache_bytes_per_token(cfg, torch.float32)
    assert isinstance(size, KVCacheSize) and size.head_dim == 32
    assert size.bytes_per_token == 2 * 2 * 2 * 32 * 4  # k and v, layers, kv heads, d, B
    assert size.mha_bytes_per_token == 2 * 2 * 8 * 32 * 4
    assert size.gqa_factor == 4 and size.saved_fraction == 0.75
    assert kv_cache_bytes_per_token(cfg, "bfloat16").bytes_per_token == 512
    assert kv_cache_bytes_per_token(cfg, 1).bytes_per_token == 256


transformers = pytest.importorskip(
    "transformers", reason="transformers (test-only, pinned) is not installed"
)
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402


def smollm2_config() -> LlamaConfig:
    """SmolLM2-135M's attention shapes (from its GGUF metadata), no weights."""
    return LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                       num_hidden_layers=30, num_attention_heads=9,
                       num_key_value_heads=3, head_dim=64,
                       max_position_embeddings=8192)


def test_smollm2_cache_per_token_and_the_gqa_saving() -> None:
    size = kv_cache_bytes_per_token(smollm2_config(), torch.float32)
    assert size.bytes_per_token == 2 * 30 * 3 * 64 * 4 == 46_080
    assert size.mha_bytes_per_token == 2 * 30 * 9 * 64 * 4 == 138_240
    assert size.gqa_factor == 3 and size.saved_fraction == pytest.approx(2 / 3)
    assert kv_cache_bytes_per_token(smollm2_config(), torch.bfloat16).bytes_per_token \
        == 23_040
    # 8192 tokens (its trained context) in bfloat16: 180 MiB
    assert 8192 * 23_040 == 180 * 2**20


def test_llama_config_defaults_and_its_dtype() -> None:
    mha = LlamaConfig(hidden_size=128, num_attention_heads=4, num_hidden_layers=3,
                      num_key_value_heads=None)  # transformers: None means MHA
    size = kv_cache_bytes_per_token(mha, torch.float16)
    assert (size.kv_heads, size.head_dim) == (4, 32) and size.saved_fraction == 0.0
    typed = LlamaConfig(hidden_size=128, num_attention_heads=4, num_hidden_layers=3,
                        num_key_value_heads=1, dtype="bfloat16")
    assert kv_cache_bytes_per_token(typed).bytes_per_token == 2 * 3 * 1 * 32 * 2


def test_bad_configs_are_refused() -> None:
    good = {"num_hidden_layers": 2, "num_attention_heads": 6, "head_dim": 8}
    with pytest.raises(ValueError, match="dtype"):
        kv_cache_bytes_per_token(good)
    with pytest.raises(ValueError, match="multiple"):
        kv_cache_bytes_per_token({**good, "num_key_value_heads": 4}, torch.float32)
    with pytest.raises(ValueError, match="num_hidden_layers"):
        kv_cache_bytes_per_token({"num_attention_heads": 6}, torch.float32)
    with pytest.raises(ValueError, match="positive"):
        kv_cache_bytes_per_token({**good, "head_dim": 0}, torch.float32)
    with pytest.raises(ValueError, match="dtype name"):
        kv_cache_bytes_per_token(good, "float8")
    with pytest.raises(TypeError):
        kv_cache_bytes_per_token(good, 2.0)
    older = {**good, "torch_dtype": "float16"}  # an older config.json's key
    assert kv_cache_bytes_per_token(older).element_bytes == 2


def test_docstring_examples_run_as_shown() -> None:
    import doctest

    import posenc_lib.pretrained.kv_cache as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------- re-rotation


def rounding_bound(k: torch.Tensor, old: torch.Tensor, new: torch.Tensor,
                   interleaved: bool) -> torch.Tensor:
    """eps·(|old| + |new − old| + |new| + 2)·‖pair‖ per element of k [B, H, T, d].

    Three float32 angles are rounded (old, the offset, new; about eps·p radians each),
    plus the rounding of the rotated values. Measured: the largest ratio of the
    difference to this bound is 0.21 (offsets 5 … 10^6, base 10 000, d = 64).
    """
    if interleaved:  # pairs (2i, 2i+1)
        pair_norm = k.unflatten(-1, (-1, 2)).norm(dim=-1).repeat_interleave(2, dim=-1)
    else:  # pairs (i, i + d/2)
        pair_norm = k.unflatten(-1, (2, -1)).norm(dim=-2).repeat(1, 1, 1, 2)
    positions = (old.abs() + (new - old).abs() + new.abs() + 2).to(k.dtype)
    return EPS * positions[:, None] * pair_norm


@pytest.mark.parametrize("old0,new0", [(0, 5), (0, 100_000), (50_000, 3),
                                       (1000, 1_000_000)])
@pytest.mark.parametrize("interleaved", [False, True])
def test_rerotated_keys_equal_keys_rotated_at_the_new_positions(
        old0: int, new0: int, interleaved: bool) -> None:
    torch.manual_seed(0)
    k = torch.randn(2, 3, 16, 64)
    old, new = torch.arange(16) + old0, torch.arange(16) + new0
    cached = apply_rope(k, old, base=1e4, interleaved=interleaved)
    moved = rerotate_keys(cached, old, new, base=1e4, interleaved=interleaved)
    fresh = apply_rope(k, new, base=1e4, interleaved=interleaved)
    bound = rounding_bound(k, old, new, interleaved)
    assert ((moved - fresh).abs() <= bound).all()
    # both float32 paths round their angles: the re-rotated key is as close to the
    # float64 reference as the bound says (measured ratio 0.20 at most)
    exact = apply_rope(k.double(), new, base=1e4, interleaved=interleaved,
                       angle_dtype=torch.float64)
    assert ((moved.double() - exact).abs() <= bound.double()).all()
    # and the move is not a no-op: the positions did change the keys
    assert (moved - cached).abs().max() > 0.1


def test_rerotation_per_sequence_and_back() -> None:
    torch.manual_seed(1)
    k = torch.randn(2, 2, 5, 8, dtype=torch.float64)
    old = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    new = old - old[:, :1]  # each sequence moved to start at 0 (evicted prefix)
    moved = rerotate_keys(apply_rope(k, old), old, new)
    assert torch.allclose(moved, apply_rope(k, new), atol=1e-12)
    back = rerotate_keys(moved, new, old)
    assert torch.allclose(back, apply_rope(k, old), atol=1e-12)


def test_rerotate_refuses_mismatched_positions() -> None:
    k = torch.randn(1, 1, 4, 8)
    with pytest.raises(ValueError, match="same shape"):
        rerotate_keys(k, torch.arange(4), torch.arange(5))
    with pytest.raises(ValueError, match="integer"):
        rerotate_keys(k, torch.arange(4.0), torch.arange(4))
    with pytest.raises(TypeError):
        rerotate_keys(k, [0, 1, 2, 3], torch.arange(4))


# ---------------------------------------------------------------- decoding

L0 = 16  # the tiny model's max_position_embeddings: dynamic NTK's L0


def tiny_llama(rope: dict) -> LlamaForCausalLM:
    """2 layers, 4 query heads sharing 2 key/value heads, head_dim 16, L0 = 16."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, max_position_embeddings=L0,
                         rope_parameters=rope)
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    return torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(0))


def test_keys_are_cached_after_rotation(tokens) -> None:
    model = tiny_llama({"rope_type": "default", "rope_theta": 1e4})
    with torch.no_grad():
        cache = model(tokens[:, :10], use_cache=True).past_key_values
        layer = model.model.layers[0]
        hidden = layer.input_layernorm(model.model.embed_tokens(tokens[:, :10]))
        raw = layer.self_attn.k_proj(hidden).view(2, 10, 2, 16).transpose(1, 2)
    cached = cache.layers[0].keys  # [batch, kv_heads, seq, head_dim]
    # two float32 RoPEs (transformers' and the library's): measured 3.0e-8
    assert (cached - apply_rope(raw, torch.arange(10), base=1e4)).abs().max() < 1e-6
    assert (cached - raw).abs().max() > 0.1


def test_cached_decoding_equals_a_full_forward(tokens) -> None:
    from posenc_lib.pretrained.loading import use_posenc_rope

    model = tiny_llama({"rope_type": "default", "rope_theta": 1e4})
    with torch.no_grad():
        full = model(tokens).logits
    # different matmul shapes sum in another order: float32 rounding, measured 2.1e-7
    for prefill in (1, 7):
        assert (cached_decode_logits(model, tokens, prefill) - full).abs().max() < 1e-6
    assert (recomputed_logits(model, tokens) - full).abs().max() < 1e-6
    use_posenc_rope(model)  # the library's RoPE rotates q and k, the cache unchanged
    with torch.no_grad():
        full = model(tokens).logits
    assert (cached_decode_logits(model, tokens) - full).abs().max() < 1e-6


def test_dynamic_ntk_cache_is_inconsistent_past_l0_only(tokens) -> None:
    plain = tiny_llama({"rope_type": "default", "rope_theta": 1e4})
    dynamic = tiny_llama({"rope_type": "dynamic", "rope_theta": 1e4, "factor": 4.0})
    cached = cached_decode_logits(dynamic, tokens)
    recomputed = recomputed_logits(dynamic, tokens)
    gap = (cached - recomputed).abs().amax(dim=(0, 2))  # [seq]: max over batch, vocab
    # lengths L = t + 1 <= L0: the base is unchanged, the cache agrees to rounding
    assert gap[:L0].max() < 1e-6
    assert torch.equal(cached[:, :L0], cached_decode_logits(plain, tokens)[:, :L0])
    # past L0 every step's keys were rotated under smaller bases than a recomputation
    # uses: measured 2.0e-4 at the first step past L0 (t = 16), at most 1.1e-3 over
    # t = 16 … 39, with logits of at most 0.56 in size (this tiny random model)
    assert gap[L0:].min() > 1e-5 and gap[L0:].max() > 5e-4


def test_dynamic_ntk_with_the_librarys_rope_has_the_same_inconsistency(tokens) -> None:
    from posenc_lib.pretrained.loading import use_posenc_rope

    model = tiny_llama({"rope_type": "default", "rope_theta": 1e4})
    use_posenc_rope(model, {"rope_type": "dynamic", "factor": 4.0,
                            "original_max_position_embeddings": L0})
    reference = tiny_llama({"rope_type": "dynamic", "rope_theta": 1e4, "factor": 4.0})
    cached = cached_decode_logits(model, tokens)
    recomputed = recomputed_logits(model, tokens)
    gap = (cached - recomputed).abs().amax(dim=(0, 2))
    assert gap[:L0].max() < 1e-6 and gap[L0:].min() > 1e-5
    # and it is transformers' dynamic NTK, step for step (two float32 RoPEs)
    assert (cached - cached_decode_logits(reference, tokens)).abs().max() < 1e-5
    assert (recomputed - recomputed_logits(reference, tokens)).abs().max() < 1e-5


def test_decoding_refuses_bad_arguments(tokens) -> None:
    model = tiny_llama({"rope_type": "default", "rope_theta": 1e4})
    with pytest.raises(ValueError, match="prefill"):
        cached_decode_logits(model, tokens, prefill=0)
    with pytest.raises(ValueError, match=r"\[batch, seq\]"):
        recomputed_logits(model, tokens[0])


def test_rerotation_error_on_a_tiny_model(tokens) -> None:
    from posenc_lib.pretrained.kv_cache import rerotation_error
    from posenc_lib.pretrained.loading import use_posenc_rope

    model = tiny_llama({"rope_type": "default", "rope_theta": 1e4})
    use_posenc_rope(model)
    assert rerotation_error(model, tokens[:, :8], 100) < 1e-4
    assert rerotation_error(model, tokens[:, :8], 0) == 0.0  # nothing moved
    # the wrong base moves the keys to the wrong angles
    assert rerotation_error(model, tokens[:, :8], 100, base=5e3) > 1e-2
    with pytest.raises(ValueError, match="offset must be"):
        rerotation_error(model, tokens[:, :8], -1)
