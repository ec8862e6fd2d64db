"""TransformerLM: every scheme runs, is causal, and bad input fails in words."""

import pytest
import torch

from posenc_lib import SCHEMES, ModelConfig, TransformerLM


def small(position: str, **kw) -> TransformerLM:
    return TransformerLM(ModelConfig(position=position, d_model=32, num_layers=2, num_heads=4, max_positions=16, **kw))


@pytest.mark.parametrize("position", SCHEMES)
def test_shapes_and_causality(position: str) -> None:
    model = small(position).eval()
    tokens = torch.randint(0, 256, (2, 12))
    logits = model(tokens)
    assert logits.shape == (2, 12, 256)
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 256  # a change in the future …
    assert torch.allclose(model(changed)[:, :8], logits[:, :8], atol=1e-5)  # … leaves the past alone


def test_nope_is_blind_to_order_only_through_the_mask() -> None:
    # Sanity check of "none": the first token's output ignores everything after it.
    model = small("none").eval()
    a = model(torch.tensor([[5, 6, 7]]))[0, 0]
    b = model(torch.tensor([[5, 9, 9]]))[0, 0]
    assert torch.allclose(a, b, atol=1e-6)


def test_learned_too_long() -> None:
    with pytest.raises(ValueError, match=r"17 exceeds max_positions=16"):
        small("learned")(torch.zeros(1, 17, dtype=torch.long))


def test_bad_inputs() -> None:
    model = small("rope")
    with pytest.raises(ValueError, match="vocab_size"):
        model(torch.tensor([[0, 256]]))
    with pytest.raises(ValueError, match="integer tensor"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="position must be one of"):
        ModelConfig(position="xpos")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="num_heads"):
        ModelConfig(num_heads=0)


def test_learned_sinusoidal_init() -> None:
    from posenc_lib import sinusoidal_encoding

    model = small("learned", learned_init="sinusoidal")
    assert torch.allclose(model.learned.table.weight, sinusoidal_encoding(16, 32))


@pytest.mark.parametrize("position", SCHEMES)
def test_left_padded_row_equals_the_unpadded_run(position: str) -> None:
    # A batch with a left-padded row: its real tokens must get the logits they get alone.
    model = small(position).eval()
    short = torch.tensor([[7, 8, 9]])
    padded = torch.tensor([[0, 0, 7, 8, 9], [1, 2, 3, 4, 5]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    alone = model(short)[0]
    batched = model(padded, attention_mask=mask)
    assert torch.isfinite(batched).all()
    assert torch.allclose(batched[0, 2:], alone, atol=1e-5), (batched[0, 2:] - alone).abs().max()
    assert torch.allclose(batched[1], model(padded[1:])[0], atol=1e-5)  # the full row is untouched


@pytest.mark.parametrize("position", SCHEMES)
def test_explicit_positions_equal_the_defaults(position: str) -> None:
    model = small(position).eval()
    tokens = torch.randint(0, 256, (2, 6))
    default = model(tokens)
    assert torch.allclose(model(tokens, positions=torch.arange(6)), default, atol=1e-6)
    assert torch.allclose(model(tokens, positions=torch.arange(6).expand(2, 6)), default, atol=1e-6)


@pytest.mark.parametrize("position", ["rope", "alibi", "t5"])
def test_relative_schemes_ignore_a_shift_of_every_position(position: str) -> None:
    # Only p_t − p_s enters RoPE, ALiBi and T5: shifting all positions changes nothing.
    model = small(position).eval()
    tokens = torch.randint(0, 256, (1, 6))
    shifted = model(tokens, positions=torch.arange(6) + 40)
    assert torch.allclose(shifted, model(tokens), atol=1e-4)


@pytest.mark.parametrize("position", ["sinusoidal", "learned"])
def test_absolute_schemes_see_a_shift(position: str) -> None:
    model = small(position).eval()
    tokens = torch.randint(0, 256, (1, 6))
    assert not torch.allclose(model(tokens, positions=torch.arange(6) + 5), model(tokens), atol=1e-4)


def test_bad_positions_and_masks_fail_in_words() -> None:
    model = small("learned")
    tokens = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="positions must be an integer"):
        model(tokens, positions=torch.zeros(4))
    with pytest.raises(ValueError, match=r"positions must be \[seq=4\]"):
        model(tokens, positions=torch.arange(5))
    with pytest.raises(ValueError, match="positions must be >= 0"):
        model(tokens, positions=torch.arange(4) - 1)
    with pytest.raises(ValueError, match=r"0 … 15"):
        model(tokens, positions=torch.arange(4) + 13)
    with pytest.raises(ValueError, match=r"attention_mask must be \[batch=2, seq=4\]"):
        model(tokens, attention_mask=torch.ones(2, 5))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"position": "sinusoidal", "d_model": 33, "num_heads": 3}, "even d_model"),
        ({"position": "rope", "d_model": 36, "num_heads": 4}, "even head_dim"),
        ({"num_layers": 0}, "num_layers must be >= 1"),
        ({"position": "learned", "max_positions": 0}, "max_positions must be >= 1"),
        ({"learned_init_std": 0.0}, "learned_init_std must be > 0"),
        ({"rope_base": -1.0}, "rope_base must be > 0"),
    ],
)
def test_a_config_that_cannot_run_fails_when_built(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kwargs)


def test_learned_table_starts_small_by_default() -> None:
    # N(0, 0.02²), Hugging Face's initializer_range for GPT-2/BERT; 1.0 gives PyTorch's N(0, 1).
    torch.manual_seed(0)
    std = small("learned").learned.table.weight.std().item()
    assert 0.015 < std < 0.025
    std_unit = small("learned", learned_init_std=1.0).learned.table.weight.std().item()
    assert 0.8 < std_unit < 1.2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"token_init_std": 0.0}, "token_init_std must be a finite number > 0"),
        ({"token_init_std": -0.02}, "token_init_std must be a finite number > 0"),
        ({"token_init_std": float("inf")}, "token_init_std must be a finite number > 0"),
        ({"token_init_std": float("nan")}, "token_init_std must be a finite number > 0"),
        ({"token_init_std": "0.02"}, "token_init_std must be a finite number > 0"),
        ({"token_init_std": True}, "token_init_std must be a finite number > 0"),
        ({"scale_token_embedding": 1}, "scale_token_embedding must be True or False"),
        ({"scale_token_embedding": "yes"}, "scale_token_embedding must be True or False"),
    ],
)
def test_bad_token_embedding_settings_name_the_argument(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kwargs)


def test_token_embedding_defaults_are_pytorchs() -> None:
    # default: nn.Embedding's N(0, 1), no multiplier: the same draw as a bare nn.Embedding
    config = ModelConfig()
    assert config.token_init_std == 1.0 and config.scale_token_embedding is False
    torch.manual_seed(0)
    model = small("rope")
    torch.manual_seed(0)
    assert torch.equal(model.token_embedding.weight, torch.nn.Embedding(256, 32).weight)
    assert model.embedding_multiplier is None


@pytest.mark.parametrize("position", ["sinusoidal", "rope"])
def test_token_init_std_rescales_the_same_draw_and_nothing_else(position: str) -> None:
    torch.manual_seed(0)
    unit = small(position)
    torch.manual_seed(0)
    scaled = small(position, token_init_std=0.02)
    assert torch.allclose(scaled.token_embedding.weight,
                          0.02 * unit.token_embedding.weight, rtol=1e-6, atol=0)
    assert 0.015 < scaled.token_embedding.weight.std().item() < 0.025
    for (name, a), (_, b) in zip(unit.state_dict().items(), scaled.state_dict().items()):
        if name != "token_embedding.weight":
            assert torch.equal(a, b), name  # every other weight starts the same


def test_scale_token_embedding_multiplies_by_sqrt_d_model_before_the_position() -> None:
    # Vaswani et al. 2017 §3.4 with the original Transformer's init N(0, 1/d_model):
    # the scaled embedding starts at unit scale, and PE(p) is added after the multiplier
    torch.manual_seed(0)
    config = ModelConfig(position="sinusoidal", d_model=32, num_heads=4,
                         token_init_std=32 ** -0.5, scale_token_embedding=True)
    model = TransformerLM(config).eval()
    assert model.embedding_multiplier == pytest.approx(32 ** 0.5)
    effective = model.token_embedding.weight * model.embedding_multiplier
    assert 0.8 < effective.std().item() < 1.2
    captured = {}
    model.blocks[0].norm1.register_forward_hook(
        lambda module, inputs, output: captured.setdefault("x", inputs[0]))
    tokens = torch.randint(0, 256, (2, 10))
    model(tokens)
    expected = model.token_embedding(tokens) * 32 ** 0.5 + model._sinusoidal(
        torch.arange(10), tokens.device, torch.float32)
    assert torch.allclose(captured["x"], expected, atol=1e-6, rtol=0)


def _bias_per_layer_forward(model: TransformerLM, tokens: torch.Tensor) -> torch.Tensor:
    """The path before the score mask was folded once per forward: each layer adds the
    bias and the causal mask on its own (relative schemes, default positions)."""
    x = model.token_embedding(tokens)
    bias = model.attention_bias(tokens.shape[1], tokens.device)
    for block in model.blocks:
        x = block(x, bias)
    return model.lm_head(model.final_norm(x))


@pytest.mark.parametrize("position", ["alibi", "t5"])
def test_folded_score_mask_equals_the_bias_added_per_layer(position: str) -> None:
    torch.manual_seed(0)
    config = ModelConfig(position=position, d_model=32, num_heads=4, num_layers=3)
    model = TransformerLM(config)
    if position == "t5":
        torch.nn.init.normal_(model.t5_bias.bias.weight)  # the table starts at zero
    tokens = torch.randint(0, 256, (2, 40))
    per_layer = _bias_per_layer_forward(model, tokens)
    assert torch.allclose(model(tokens), per_layer, atol=1e-6, rtol=0)
    model(tokens).logsumexp(-1).mean().backward()
    if position == "t5":  # the learned bias gets its gradient through the folded mask
        assert model.t5_bias.bias.weight.grad.abs().sum() > 0


def test_alibi_mask_is_built_once_per_length() -> None:
    from posenc_lib.measure import attention_bias_bytes, memory_traffic

    heads, seq = 4, 512
    config = ModelConfig(position="alibi", d_model=16, num_heads=heads, num_layers=2)
    model = TransformerLM(config)
    cpu = torch.device("cpu")
    mask = model.score_mask(seq, cpu, torch.float32)
    assert mask.shape == (1, heads, seq, seq)
    assert model.score_mask(seq, cpu, torch.float32) is mask  # reused, not rebuilt
    assert model.score_mask(seq // 2, cpu, torch.float32).shape[-1] == seq // 2
    tokens = torch.randint(0, 256, (1, seq))
    with torch.no_grad():
        first = memory_traffic(lambda: model(tokens))  # a new length: the mask is built
        again = memory_traffic(lambda: model(tokens))  # the same length: none built
    mask_bytes = attention_bias_bytes(heads, seq, seq)  # 4 MiB, > all activations
    assert first.bytes_allocated > mask_bytes > again.bytes_allocated


def test_t5_mask_lookup_equals_bias_plus_causal_mask() -> None:
    from posenc_lib.model.attention import score_mask

    torch.manual_seed(0)
    config = ModelConfig(position="t5", d_model=16, num_heads=4, num_layers=1)
    model = TransformerLM(config)
    torch.nn.init.normal_(model.t5_bias.bias.weight)
    cpu = torch.device("cpu")
    for seq in (5, 300):  # 300 > max_distance 128: the last bucket is shared
        lookup = model.score_mask(seq, cpu, torch.float32)
        assert torch.equal(lookup, score_mask(model.attention_bias(seq, cpu), seq, seq))
    weight = model.t5_bias.bias.weight
    lookup = model.score_mask(300, cpu, torch.float32)
    (grad_lookup,) = torch.autograd.grad(lookup.exp().sum(), weight)
    bias = model.attention_bias(300, cpu)
    (grad_bias,) = torch.autograd.grad(bias.tril().exp().sum(), weight)
    assert torch.allclose(grad_lookup, grad_bias)


# RoPE scaling (issue 10): a trained RoPE model evaluated with another frequency rule.
L0 = "original_max_position_embeddings"
YARN_4X = {"rope_type": "yarn", "factor": 4.0, L0: 16}


def test_rope_scaling_config_is_normalised_and_checked() -> None:
    linear = {"type": "linear", "factor": 2}
    config = ModelConfig(position="rope", d_model=32, num_heads=2, rope_scaling=linear)
    assert config.rope_scaling == {"rope_type": "linear", "factor": 2.0}
    yarn = ModelConfig(position="rope", rope_scaling=YARN_4X)
    assert yarn.rope_scaling["beta_fast"] == 32.0
    with pytest.raises(ValueError, match="position='rope' only"):
        ModelConfig(position="alibi", rope_scaling=YARN_4X)
    with pytest.raises(ValueError, match="'factor'"):
        ModelConfig(position="rope", rope_scaling={**YARN_4X, "factor": 0.5})
    with pytest.raises(ValueError, match="rope_theta"):
        ModelConfig(position="rope", rope_base=10000.0,
                    rope_scaling={"rope_type": "default", "rope_theta": 5.0})


def test_with_rope_scaling_keeps_the_weights_and_changes_the_logits() -> None:
    from posenc_lib import with_rope_scaling

    model = small("rope").eval()
    tokens = torch.randint(0, 256, (1, 64))
    plain = with_rope_scaling(model, None)
    assert torch.equal(plain(tokens), model(tokens))  # default: the same, bit for bit
    yarn = with_rope_scaling(model, YARN_4X)
    assert yarn.config.rope_scaling["rope_type"] == "yarn"
    assert model.config.rope_scaling is None
    weights = zip(yarn.state_dict().values(), model.state_dict().values())
    assert all(torch.equal(a, b) for a, b in weights)
    assert not torch.allclose(yarn(tokens), model(tokens), atol=1e-4)
    dynamic = {"rope_type": "dynamic", "factor": 4.0, L0: 64}
    # dynamic NTK is plain RoPE up to L0
    assert torch.equal(with_rope_scaling(model, dynamic)(tokens), model(tokens))
    with pytest.raises(ValueError, match="RoPE model"):
        with_rope_scaling(small("alibi"), YARN_4X)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_tokens_of_a_small_integer_dtype_fail_in_words(dtype: torch.dtype) -> None:
    model = small("rope")
    with pytest.raises(ValueError, match=rf"tokens must be int64 or int32.*got dtype {dtype}.*tokens.long\(\)"):
        model(torch.tensor([[1, 2, 3]], dtype=dtype))
    assert model(torch.tensor([[1, 2, 3]], dtype=torch.int32)).shape == (1, 3, 256)


def test_lists_instead_of_tensors_fail_in_words() -> None:
    model = small("alibi")
    tokens = torch.tensor([[1, 2, 3]])
    with pytest.raises(TypeError, match=r"tokens must be a torch.Tensor .*got list"):
        model([[1, 2, 3]])
    with pytest.raises(TypeError, match=r"positions must be a torch.Tensor .*got list"):
        model(tokens, positions=[0, 1, 2])
    with pytest.raises(TypeError, match=r"attention_mask must be a torch.Tensor .*got list"):
        model(tokens, attention_mask=[[1, 1, 1]])


# --- RoPE as models ship it: layer patterns, per-layer-type bases, partial rotation,
# logit scaling (posenc_lib.model.transformer's new ModelConfig fields) ---------------------------

from posenc_lib import every_kth_layer  # noqa: E402


def _seeded(config: ModelConfig) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(config).eval()


def test_explicit_defaults_give_the_same_model_bit_for_bit() -> None:
    """Spelling out every new field at its default builds the same model and gives
    the same logits bit for bit (the path existing chapters' models take)."""
    tokens = torch.randint(0, 256, (2, 40))
    for position in SCHEMES:
        extra = {"max_positions": 64} if position == "learned" else {}
        plain = _seeded(ModelConfig(position=position, d_model=32, num_heads=4, **extra))
        spelled = _seeded(ModelConfig(position=position, d_model=32, num_heads=4,
                                      rope_fraction=1.0, rope_fraction_form="neox",
                                      layer_types=["full_attention"] * 2,
                                      sliding_window=None, nope_layers=[],
                                      logit_scaling=None, **extra))
        with torch.no_grad():
            assert torch.equal(plain(tokens), spelled(tokens)), position


def test_every_kth_layer_is_smollm3s_pattern() -> None:
    """transformers 5.23's SmolLM3Config(no_rope_layer_interval=4) marks layer i as
    NoPE (0) where (i + 1) % 4 == 0: the same indices."""
    pytest.importorskip("transformers")
    from transformers import SmolLM3Config

    config = SmolLM3Config(num_hidden_layers=12, no_rope_layer_interval=4)
    nope = tuple(i for i, rope in enumerate(config.no_rope_layers) if not rope)
    assert every_kth_layer(12, 4) == nope == (3, 7, 11)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        every_kth_layer(12, 0)


def test_nope_layers_rotate_nothing() -> None:
    """A RoPE model whose every layer is NoPE is the NoPE model, bit for bit; with
    one NoPE layer, that layer has no rotary and the others share one."""
    tokens = torch.randint(0, 256, (2, 30))
    all_nope = _seeded(ModelConfig(position="rope", d_model=32, nope_layers=(0, 1)))
    nope = _seeded(ModelConfig(position="none", d_model=32))
    with torch.no_grad():
        assert torch.equal(all_nope(tokens), nope(tokens))
    mixed = _seeded(ModelConfig(position="rope", d_model=32, num_layers=4,
                                nope_layers=every_kth_layer(4, 2)))
    rotaries = [block.attn.rotary for block in mixed.blocks]
    assert rotaries[1] is None and rotaries[3] is None
    assert rotaries[0] is rotaries[2] is not None


def test_sliding_window_layers_see_only_the_window() -> None:
    """Two sliding layers of window W: the logits at t depend on tokens
    t − 2(W − 1) … t only (largest change from an earlier token measured: 0.0),
    and a window as long as the input gives the full-attention model (largest
    difference measured 0.0 on one draw; allowed 1e-5, since a float mask and SDPA's
    is_causal may round differently)."""
    window, seq = 3, 24
    config = ModelConfig(position="rope", d_model=32,
                         layer_types=("sliding_attention",) * 2, sliding_window=window)
    model = _seeded(config)
    tokens = torch.randint(0, 256, (1, seq))
    changed = tokens.clone()
    t, reach = 20, 2 * (window - 1)
    changed[0, t - reach - 1] = (changed[0, t - reach - 1] + 1) % 256
    inside = tokens.clone()
    inside[0, t - reach] = (inside[0, t - reach] + 1) % 256
    with torch.no_grad():
        base = model(tokens)[0, t]
        assert (model(changed)[0, t] - base).abs().max().item() == 0.0
        assert (model(inside)[0, t] - base).abs().max().item() > 1e-4
        wide = _seeded(ModelConfig(position="rope", d_model=32,
                                   layer_types=("sliding_attention",) * 2,
                                   sliding_window=seq))
        full = _seeded(ModelConfig(position="rope", d_model=32))
        assert (wide(tokens) - full(tokens)).abs().max().item() < 1e-5
        mask = torch.ones(1, seq, dtype=torch.bool)
        mask[0, :3] = False  # padding: still finite, still windowed
        assert torch.isfinite(model(tokens, attention_mask=mask)).all()


def test_gemma3_bases_per_layer_type_match_transformers() -> None:
    """Gemma 3's layout: 5 sliding layers (base 1e4) per global layer (base 1e6,
    linear ×8), from transformers v5's nested rope_parameters. Each layer's θ_i
    against Gemma3RotaryEmbedding's per-layer-type inv_freq: largest relative
    difference measured 0.99 eps (tolerance (ln(base)/2 + 4)·eps as in
    test_rope_scaling_vs_transformers.py)."""
    pytest.importorskip("transformers")
    import math

    from transformers import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    nested = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
              "full_attention": {"rope_type": "linear", "factor": 8.0,
                                 "rope_theta": 1000000.0}}
    layer_types = ("sliding_attention",) * 5 + ("full_attention",)
    config = ModelConfig(position="rope", d_model=64, num_heads=2, num_layers=6,
                         layer_types=layer_types, sliding_window=4, rope_scaling=nested)
    model = TransformerLM(config)
    theirs = Gemma3RotaryEmbedding(Gemma3TextConfig(
        hidden_size=64, num_attention_heads=2, head_dim=32, num_hidden_layers=6,
        layer_types=list(layer_types), sliding_window=4, rope_parameters=nested))
    eps = torch.finfo(torch.float32).eps
    for block, layer_type in zip(model.blocks, layer_types):
        expected = getattr(theirs, f"{layer_type}_inv_freq")
        ours = block.attn.rotary.inv_freq
        relative = ((ours.double() - expected.double()) / expected.double()).abs().max()
        base = nested[layer_type]["rope_theta"]
        assert relative <= (math.log(base) / 2 + 4) * eps
        assert block.attn.sliding_window == (4 if layer_type == "sliding_attention"
                                             else None)
    assert model.blocks[0].attn.rotary is model.blocks[4].attn.rotary
    assert model.blocks[5].attn.rotary.base == 1e6
    tokens = torch.randint(0, 256, (1, 10))
    assert model(tokens).shape == (1, 10, 256)


def test_partial_rotation_and_logit_scaling_reach_the_layers() -> None:
    neox = TransformerLM(ModelConfig(position="rope", d_model=64, num_heads=2,
                                     rope_fraction=0.25))
    assert neox.blocks[0].attn.rotary.rotary_dim == 8
    p_rope = TransformerLM(ModelConfig(position="rope", d_model=64, num_heads=2,
                                       rope_fraction=0.25, rope_fraction_form="p_rope"))
    assert p_rope.blocks[0].attn.rotary.p_rope_pairs == 4
    assert int((p_rope.blocks[0].attn.rotary.inv_freq > 0).sum()) == 4
    irope = TransformerLM(ModelConfig(
        position="rope", d_model=32, num_layers=4, nope_layers=every_kth_layer(4, 4),
        layer_types=("sliding_attention",) * 3 + ("full_attention",), sliding_window=8,
        logit_scaling={"kind": "llama4_temperature", "floor_scale": 4}))
    kinds = [block.attn.logit_scaling for block in irope.blocks]
    assert kinds[:3] == [None] * 3 and kinds[3]["kind"] == "llama4_temperature"
    qwen = TransformerLM(ModelConfig(position="rope", d_model=32, logit_scaling={
        "kind": "log_length", "original_max_position_embeddings": 16}))
    assert all(block.attn.logit_scaling is not None for block in qwen.blocks)
    tokens = torch.randint(0, 256, (1, 40))
    for model in (neox, p_rope, irope, qwen):
        assert torch.isfinite(model(tokens)).all()


@pytest.mark.parametrize(("kw", "message"), [
    ({"rope_fraction": 0.0}, "rope_fraction must be a number in \\(0, 1\\]"),
    ({"rope_fraction": 0.5, "position": "alibi"}, "rope_fraction applies to position='rope'"),
    ({"rope_fraction_form": "gptj"}, "rope_fraction_form must be one of \\('neox', 'p_rope'\\)"),
    ({"rope_fraction": 0.1}, "rotary_dim=0"),
    ({"layer_types": ("full_attention",)}, "one type per layer \\(num_layers=2\\)"),
    ({"layer_types": ("full_attention", "chunked_attention")},
     "entries must be one of \\('full_attention', 'sliding_attention'\\)"),
    ({"layer_types": ("sliding_attention",) * 2}, "sliding_window must be an integer >= 1"),
    ({"sliding_window": 8}, "sliding_window is only used by 'sliding_attention'"),
    ({"nope_layers": (2,)}, "distinct layer indices in 0 … 1"),
    ({"nope_layers": (0, 0)}, "distinct layer indices"),
    ({"nope_layers": 1}, "nope_layers must be a list of layer indices"),
    ({"nope_layers": (0,), "position": "alibi"}, "nope_layers applies to position='rope'"),
    ({"logit_scaling": {"kind": "temperature"}}, "logit_scaling\\['kind'\\] must be one of"),
    ({"rope_scaling": {"sliding_attention": {"rope_type": "default"}}},
     "no entry for the layer type\\(s\\) \\['full_attention'\\]"),
])
def test_new_fields_are_checked_by_name(kw: dict, message: str) -> None:
    kw = {"position": "rope", "d_model": 32, "num_heads": 4, **kw}
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kw)


def test_new_fields_survive_a_train_config_round_trip() -> None:
    from posenc_lib.training.train import TrainConfig

    config = TrainConfig(model=ModelConfig(
        position="rope", d_model=32, layer_types=["sliding_attention", "full_attention"],
        sliding_window=4, nope_layers=[1], rope_fraction=0.5,
        logit_scaling={"kind": "log_length", "original_max_position_embeddings": 8}))
    import json
    again = TrainConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config


def test_use_sinusoidal_table_adds_the_given_rows_and_never_regrows() -> None:
    from posenc_lib import sinusoidal_encoding

    torch.manual_seed(0)
    config = ModelConfig(position="sinusoidal", d_model=16, num_layers=1, num_heads=2,
                         max_positions=32)
    model, twin = TransformerLM(config).eval(), TransformerLM(config).eval()
    twin.load_state_dict(model.state_dict())
    twin.use_sinusoidal_table(sinusoidal_encoding(8, 16, config.sinusoidal_base))
    tokens = torch.randint(0, 256, (1, 8))
    with torch.no_grad():
        assert torch.allclose(twin(tokens), model(tokens))  # the same table: same logits
        twin.use_sinusoidal_table(torch.zeros(8, 16))
        assert not torch.allclose(twin(tokens), model(tokens))
        with pytest.raises(ValueError, match="8 rows"):
            twin(torch.randint(0, 256, (1, 9)))
    with pytest.raises(ValueError, match="d_model"):
        twin.use_sinusoidal_table(torch.zeros(8, 4))
    with pytest.raises(ValueError, match="sinusoidal model"):
        TransformerLM(ModelConfig(position="rope", d_model=16, num_layers=1, num_heads=2)).use_sinusoidal_table(
            torch.zeros(8, 16))
