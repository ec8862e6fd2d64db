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
