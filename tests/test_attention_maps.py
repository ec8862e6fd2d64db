"""attention_maps: the recomputed probabilities reproduce the layer's own output."""

import math

import pytest
import torch

from posenc_lib import ModelConfig, TransformerLM
from posenc_lib.attention_maps import (
    attention_by_distance,
    attention_entropy,
    attention_mass_beyond,
    attention_probabilities,
    mean_attention_distance,
)


@pytest.mark.parametrize("scheme", ["alibi", "rope", "t5", "none"])
def test_probabilities_reproduce_the_attention_output(scheme: str) -> None:
    model = TransformerLM(ModelConfig(position=scheme, d_model=32, num_layers=2, num_heads=4)).eval()
    tokens = torch.randint(0, 256, (2, 11))
    layer = 1
    attn = model.blocks[layer].attn
    seen = {}
    handle = attn.register_forward_hook(lambda mod, args, out: seen.update(x=args[0], out=out))
    logits = model(tokens)
    handle.remove()
    probs = attention_probabilities(model, tokens, layer)
    assert probs.shape == (2, 4, 11, 11)
    assert torch.allclose(probs.sum(-1), torch.ones(2, 4, 11), atol=1e-6)
    assert torch.equal(probs.triu(1), torch.zeros_like(probs))  # causal
    x = seen["x"]
    v = attn.qkv(x).split(32, dim=-1)[2].view(2, 11, 4, 8).transpose(1, 2)  # (B, H, T, D)
    out = attn.out((probs @ v).transpose(1, 2).reshape(2, 11, 32))
    assert torch.allclose(out, seen["out"], atol=1e-5)
    assert torch.equal(model(tokens), logits)  # the hook left the model unchanged


def test_mean_distance() -> None:
    t = 6
    previous = torch.zeros(1, 2, t, t)
    previous[0, 0] = torch.eye(t)  # head 0 attends to itself: distance 0
    previous[0, 1, 0, 0] = 1.0
    previous[0, 1, 1:, :-1] = torch.eye(t - 1)  # head 1 attends one token back
    distance = mean_attention_distance(previous, skip_first=1)
    assert torch.allclose(distance, torch.tensor([0.0, 1.0]))


def _previous_token_and_uniform(t: int) -> torch.Tensor:
    """Head 0 attends one token back (itself at t = 0); head 1 spreads evenly over 0 … t."""
    probs = torch.zeros(1, 2, t, t)
    probs[0, 0, 0, 0] = 1.0
    probs[0, 0, 1:, :-1] = torch.eye(t - 1)
    probs[0, 1] = torch.ones(t, t).tril() / torch.arange(1, t + 1)[:, None]
    return probs


def test_entropy() -> None:
    t = 8
    entropy = attention_entropy(_previous_token_and_uniform(t), skip_first=t - 1)
    # one key: 0 nats; t keys equally: ln t (the golden value of a uniform distribution)
    assert torch.allclose(entropy, torch.tensor([0.0, math.log(t)]), atol=1e-6)
    all_queries = attention_entropy(_previous_token_and_uniform(t))
    expected = sum(math.log(n) for n in range(1, t + 1)) / t
    assert torch.allclose(all_queries[1], torch.tensor(expected), atol=1e-6)


def test_entropy_of_a_trained_shape() -> None:
    # rows of a real model's probabilities sum to 1, so the entropy lies in [0, ln(t + 1)]
    model = TransformerLM(ModelConfig(position="rope", d_model=16, num_layers=1, num_heads=2))
    probs = attention_probabilities(model.eval(), torch.randint(0, 256, (2, 9)), 0)
    entropy = attention_entropy(probs, skip_first=8)
    assert entropy.shape == (2,) and bool((entropy >= 0).all() and (entropy <= math.log(9)).all())


def test_mass_beyond() -> None:
    t = 8
    probs = _previous_token_and_uniform(t)
    assert torch.allclose(attention_mass_beyond(probs, 0), torch.ones(2))
    # query 7: head 0 puts everything at distance 1; head 1 puts 6/8 at distances >= 2
    last = attention_mass_beyond(probs, 2, skip_first=t - 1)
    assert torch.allclose(last, torch.tensor([0.0, 6 / 8]))
    assert torch.allclose(attention_mass_beyond(probs, 1, skip_first=1)[0], torch.tensor(1.0))


def test_by_distance() -> None:
    t = 6
    profile = attention_by_distance(_previous_token_and_uniform(t), skip_first=1)
    assert profile.shape == (2, t)
    assert torch.allclose(profile[0], torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0]))
    # head 1, distance r: mean of 1/(q + 1) over queries q = max(1, r) … t − 1
    for r in range(t):
        queries = range(max(1, r), t)
        expected = sum(1 / (q + 1) for q in queries) / len(queries)
        assert math.isclose(profile[1, r].item(), expected, rel_tol=1e-6)
    # the profile agrees with the mean distance it summarises (one query, weights sum to 1)
    last = attention_by_distance(_previous_token_and_uniform(t), skip_first=t - 1)
    mean = mean_attention_distance(_previous_token_and_uniform(t), skip_first=t - 1)
    assert torch.allclose((last * torch.arange(t)).sum(-1), mean)


def test_errors() -> None:
    model = TransformerLM(ModelConfig(position="alibi", d_model=16, num_layers=1, num_heads=2))
    with pytest.raises(ValueError, match="layer must lie in 0"):
        attention_probabilities(model, torch.zeros(1, 3, dtype=torch.long), 1)
    with pytest.raises(ValueError, match="batch, heads, seq, seq"):
        mean_attention_distance(torch.zeros(2, 3, 3))
    with pytest.raises(ValueError, match="skip_first"):
        mean_attention_distance(torch.zeros(1, 1, 3, 3), skip_first=3)
    for summary in (attention_entropy, attention_by_distance):
        with pytest.raises(ValueError, match="batch, heads, seq, seq"):
            summary(torch.zeros(1, 2, 3, 4))
        with pytest.raises(ValueError, match="skip_first"):
            summary(torch.zeros(1, 1, 3, 3), skip_first=-1)
    with pytest.raises(ValueError, match="distance must be >= 0"):
        attention_mass_beyond(torch.zeros(1, 1, 3, 3), -1)
