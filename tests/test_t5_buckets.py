"""analysis.t5_buckets: the weight on one T5 bucket, and removing a bucket."""

import pytest
import torch

from posenc_lib import (
    ModelConfig, TransformerLM, attention_probabilities, evaluate_perplexity, removed_t5_bucket,
    t5_bucket_weight, t5_relative_position_bucket,
)


def t5_model() -> TransformerLM:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(position="t5", d_model=16, num_layers=2, num_heads=2)).eval()
    with torch.no_grad():
        model.t5_bias.bias.weight.normal_()
    return model


def test_weight_on_a_bucket_matches_the_attention_probabilities() -> None:
    model, tokens = t5_model(), torch.randint(0, 256, (1, 200))
    shares = t5_bucket_weight(model, tokens, 31, queries=10)
    assert list(shares) == ["bias alone", "layer 1", "layer 2"]
    t = torch.arange(200)
    in_last = t5_relative_position_bucket(t[None, :] - t[:, None]) == 31  # (T, S)
    for layer in range(2):
        p = attention_probabilities(model, tokens, layer)[0, :, -10:]  # (H, 10, T)
        expected = 100 * (p * in_last[-10:]).sum(-1).mean().item()
        assert shares[f"layer {layer + 1}"] == pytest.approx(expected, rel=1e-6)
    assert all(0 <= v <= 100 for v in shares.values())
    # every key of the last query within the first 113 distances: no weight on bucket 31
    assert t5_bucket_weight(model, tokens[:, :100], 31, queries=5) == {
        "bias alone": 0.0, "layer 1": 0.0, "layer 2": 0.0}


def test_removing_a_bucket_is_undone_afterwards() -> None:
    model = t5_model()
    trained = model.t5_bias.bias.weight.detach().clone()
    tokens = torch.randint(0, 256, (1, 300))
    with removed_t5_bucket(model, 31) as changed:
        assert changed is model and torch.isinf(model.t5_bias.bias.weight[31]).all()
        assert t5_bucket_weight(model, tokens, 31, queries=20)["layer 1"] == 0.0
        cut = evaluate_perplexity(model, tokens[0], 256).perplexity
    assert torch.equal(model.t5_bias.bias.weight, trained)
    assert cut != evaluate_perplexity(model, tokens[0], 256).perplexity
    with pytest.raises(RuntimeError), removed_t5_bucket(model, 0):
        raise RuntimeError("inside")
    assert torch.equal(model.t5_bias.bias.weight, trained)  # restored after an error


def test_errors() -> None:
    model, tokens = t5_model(), torch.randint(0, 256, (1, 50))
    with pytest.raises(ValueError, match="bucket"):
        t5_bucket_weight(model, tokens, 32)
    with pytest.raises(ValueError, match="queries"):
        t5_bucket_weight(model, tokens, 31, queries=51)
    with pytest.raises(ValueError, match=r"\[1, T\]"):
        t5_bucket_weight(model, tokens[0], 31)
    with pytest.raises(ValueError, match="bucket"), removed_t5_bucket(model, -1):
        pass
    rope = TransformerLM(ModelConfig(position="rope", d_model=16, num_layers=1, num_heads=2))
    with pytest.raises(ValueError, match="no T5 bias"):
        t5_bucket_weight(rope, tokens, 31)
