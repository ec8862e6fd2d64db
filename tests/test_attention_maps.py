"""attention_maps: the recomputed probabilities reproduce the layer's own output."""

import pytest
import torch

from posenc_lib import ModelConfig, TransformerLM
from posenc_lib.attention_maps import attention_probabilities, mean_attention_distance


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


def test_errors() -> None:
    model = TransformerLM(ModelConfig(position="alibi", d_model=16, num_layers=1, num_heads=2))
    with pytest.raises(ValueError, match="layer must lie in 0"):
        attention_probabilities(model, torch.zeros(1, 3, dtype=torch.long), 1)
    with pytest.raises(ValueError, match="batch, heads, seq, seq"):
        mean_attention_distance(torch.zeros(2, 3, 3))
    with pytest.raises(ValueError, match="skip_first"):
        mean_attention_distance(torch.zeros(1, 1, 3, 3), skip_first=3)
