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
