"""attention_maps: the recomputed probabilities reproduce the layer's own output."""

import math

import pytest
import torch

from posenc_lib import ModelConfig, RotaryEmbedding, SelfAttention, TransformerLM
from posenc_lib.analysis.attention_maps import (
    attention_by_distance,
    attention_entropy,
    attention_mass_beyond,
    attention_probabilities,
    mean_attention_distance,
    rope_pair_dims,
    rope_score_by_pair,
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


def test_pair_dims_in_both_layouts() -> None:
    half = SelfAttention(16, 2, rotary=RotaryEmbedding(8))
    interleaved = SelfAttention(16, 2, rotary=RotaryEmbedding(8, interleaved=True))
    assert rope_pair_dims(half, [1, 3]).tolist() == [1, 3, 5, 7]
    assert rope_pair_dims(interleaved, [1, 3]).tolist() == [2, 3, 6, 7]


@pytest.mark.parametrize("interleaved", [False, True])
def test_score_by_pair_sums_to_the_score(interleaved: bool) -> None:
    attn = SelfAttention(16, 2, rotary=RotaryEmbedding(8, interleaved=interleaved))
    x = torch.randn(3, 12, 16)
    distances = [0, 1, 5, 11]
    by_pair = rope_score_by_pair(attn, x, distances)
    assert by_pair.shape == (2, 4, 4)  # heads, pairs, distances
    q, k, _ = attn.project(x)
    scores = q @ k.transpose(-2, -1) / 8**0.5  # (B, H, T, T)
    for j, r in enumerate(distances):
        at_r = scores.diagonal(offset=-r, dim1=-2, dim2=-1)  # (B, H, T − r): s = t − r
        assert torch.allclose(by_pair[:, :, j].sum(1), at_r.mean(dim=(0, 2)), atol=1e-5)


def test_score_by_pair_follows_the_rotation() -> None:
    # one pair, q = k = (1, 0) everywhere: the score at distance r is cos(r θ_i) / √D
    attn = SelfAttention(4, 1, rotary=RotaryEmbedding(4, base=100.0))
    with torch.no_grad():
        attn.qkv.weight.zero_()
        attn.qkv.bias.zero_()
        attn.qkv.bias[[0, 4]] = 1.0  # q and k dimension 0: pair 0's first dimension
    by_pair = rope_score_by_pair(attn, torch.zeros(1, 10, 4), [0, 3, 9])
    expected = torch.cos(torch.tensor([0.0, 3.0, 9.0])) / 2  # θ_0 = 1, √D = 2
    assert torch.allclose(by_pair[0, 0], expected, atol=1e-6)
    assert torch.equal(by_pair[0, 1], torch.zeros(3))


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
    plain = SelfAttention(16, 2)
    with pytest.raises(ValueError, match="rotary=None"):
        rope_pair_dims(plain, [0])
    with pytest.raises(ValueError, match="rotary=None"):
        rope_score_by_pair(plain, torch.randn(1, 4, 16), [0])
    rotary = SelfAttention(16, 2, rotary=RotaryEmbedding(8))
    with pytest.raises(ValueError, match="pairs must lie in 0"):
        rope_pair_dims(rotary, [4])
    with pytest.raises(ValueError, match="distances must lie in 0"):
        rope_score_by_pair(rotary, torch.randn(1, 4, 16), [4])


def test_attention_input_is_what_the_layer_receives() -> None:
    from posenc_lib.analysis.attention_maps import attention_input

    model = TransformerLM(ModelConfig(position="rope", d_model=32, num_layers=2, num_heads=4)).eval()
    tokens = torch.randint(0, 256, (2, 9))
    seen = {}
    handle = model.blocks[1].attn.register_forward_hook(lambda mod, args, out: seen.update(x=args[0]))
    model(tokens)
    handle.remove()
    assert torch.equal(attention_input(model, tokens, 1), seen["x"])
    with pytest.raises(ValueError, match="layer must lie in"):
        attention_input(model, tokens, 2)


def test_mean_pair_prediction_is_exact_for_constant_queries_and_keys() -> None:
    # every position has the same input, so each pair's query and key are their own means:
    # the measured mean term at each distance is exactly the prediction
    from posenc_lib import rope_inverse_frequencies
    from posenc_lib.analysis.attention_maps import rope_mean_pair_prediction

    torch.manual_seed(0)
    attn = SelfAttention(32, 4, rotary=RotaryEmbedding(8)).eval()
    x = torch.randn(1, 1, 32).expand(2, 12, 32)
    measured = rope_score_by_pair(attn, x, range(10)).double().mean(0)  # (P, R)
    theta = rope_inverse_frequencies(8, 10000.0)
    predicted = rope_mean_pair_prediction(attn, x, range(10), theta)
    assert predicted.shape == (4, 10) and predicted.dtype == torch.float64
    assert torch.allclose(predicted, measured, atol=1e-5)
    with pytest.raises(ValueError, match="inverse_frequencies must have shape"):
        rope_mean_pair_prediction(attn, x, range(10), theta[:3])


def test_excess_over_range_and_effective_share() -> None:
    from posenc_lib.analysis.attention_maps import effective_share, excess_over_range

    curve = torch.tensor([0.0, 1.0, 0.5, 3.0, -1.0])
    assert excess_over_range(curve, 3) == pytest.approx(2.0)  # 3 is 2 above a range of 1
    assert excess_over_range(torch.tensor([0.0, 1.0, 0.5, 0.2]), 2) == 0.0
    assert effective_share(torch.ones(8)) == pytest.approx(1.0)
    assert effective_share(torch.tensor([0.0, 5.0, 0.0, 0.0])) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="split"):
        excess_over_range(curve, 5)
    with pytest.raises(ValueError, match="positive sum"):
        effective_share(torch.zeros(3))


def test_last_queries_attention_summarises_the_last_queries() -> None:
    from posenc_lib.analysis.attention_maps import last_queries_attention

    model = TransformerLM(ModelConfig(position="alibi", d_model=32, num_layers=1, num_heads=4)).eval()
    tokens = torch.randint(0, 256, (2, 16))
    seen = last_queries_attention(model, tokens, 0, last_queries=4, beyond=8, near=2)
    probs = attention_probabilities(model, tokens, 0)
    assert seen["entropy"] == pytest.approx(attention_entropy(probs, skip_first=12).mean().item())
    assert seen["beyond"] == pytest.approx(attention_mass_beyond(probs, 8, skip_first=12).mean().item())
    assert seen["near"] == pytest.approx(1 - attention_mass_beyond(probs, 2, skip_first=12).mean().item())
    assert torch.equal(seen["profile"], attention_by_distance(probs, skip_first=12))


def test_far_weight_follows_score() -> None:
    from posenc_lib.analysis.attention_maps import far_weight_follows_score

    # one head, one pair, 6 distances; L_train = 3: the score at r = 4 is above the range
    score = torch.tensor([[[1.0, 0.5, 0.2, 0.1, 2.0, 0.0]]])
    weight = torch.exp(score[0].sum(0, keepdim=True))  # log weight = score: correlation 1
    follows = far_weight_follows_score(score, weight, 3)
    assert follows["corr"].tolist() == pytest.approx([1.0])
    assert follows["above"].tolist() == [1]
    far = weight[0, 3:]
    assert follows["share"].tolist() == pytest.approx([(far[1] / far.sum()).item()])
    with pytest.raises(ValueError, match="train_length"):
        far_weight_follows_score(score, weight, 6)


def test_alibi_bias_attention_is_the_softmax_of_the_bias_alone():
    from posenc_lib import alibi_bias, alibi_bias_attention, causal_mask

    weights = alibi_bias_attention(4, 10)
    assert weights.shape == (4, 10, 10)
    assert torch.allclose(weights.sum(-1), torch.ones(4, 10))
    assert (weights.triu(1) == 0).all()  # nothing after the query
    # head 1 (slope 1/4): key t gets e^0, key t−1 e^(−1/4), … normalised over 0 … t
    row = torch.exp(-0.25 * torch.arange(9, -1, -1, dtype=torch.float32))
    assert torch.allclose(weights[0, 9], row / row.sum(), atol=1e-6)
    assert torch.equal(weights, (alibi_bias(4, 10, 10) + causal_mask(10, 10)).softmax(-1))
    with pytest.raises(ValueError, match="length"):
        alibi_bias_attention(4, 0)


def test_alibi_padding_error_zero_for_mask_bias_not_for_arange_with_a_gap():
    from posenc_lib import alibi_bias, alibi_bias_from_mask, alibi_padding_error

    torch.manual_seed(0)
    left = torch.tensor([[0, 0, 1, 1, 1]])
    gap = torch.tensor([[1, 1, 0, 0, 1]])
    for mask in (left, gap):
        assert alibi_padding_error(mask, alibi_bias_from_mask(4, mask)[0]) < 1e-6
    assert alibi_padding_error(left, alibi_bias(4, 5, 5)) < 1e-6  # pads on the left: same
    assert alibi_padding_error(gap, alibi_bias(4, 5, 5)) > 1e-3  # a gap shifts distances
    with pytest.raises(ValueError, match="attention_mask"):
        alibi_padding_error(torch.zeros(1, 5), alibi_bias(4, 5, 5))
    with pytest.raises(ValueError, match="bias"):
        alibi_padding_error(left, alibi_bias(4, 4, 4))


def test_head_table_spreads_layers_into_columns():
    from posenc_lib import head_table

    table = head_table({"alone": torch.tensor([1.0, 2.0]),
                        "layer {}": torch.tensor([[3.0, 4.0], [5.0, 6.0]])}, name="what")
    assert list(table.columns) == ["alone", "layer 1", "layer 2"]
    assert list(table.index) == [1, 2] and table.index.name == "head h"
    assert table.columns.name == "what"
    assert table.loc[2, "layer 2"] == 6.0 and table.loc[1, "alone"] == 1.0
    with pytest.raises(ValueError, match="heads"):
        head_table({"a": torch.zeros(2), "b": torch.zeros(3)})
    with pytest.raises(ValueError, match="columns"):
        head_table({})
    with pytest.raises(ValueError, match="must be"):
        head_table({"a": torch.zeros(1, 2, 3)})


def test_left_padding_gaps_mask_positions_match_the_prompt_alone() -> None:
    from posenc_lib import left_padding_gaps

    torch.manual_seed(0)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1] * 6])
    tokens = torch.randint(0, 256, (2, 6))
    model = TransformerLM(ModelConfig(position="sinusoidal", d_model=32, num_layers=1,
                                      num_heads=2)).eval()
    from_mask, by_column = left_padding_gaps(model, tokens, mask)
    assert from_mask < 1e-4 < 1e-2 < by_column
    with pytest.raises(ValueError, match="pads"):
        left_padding_gaps(model, tokens, torch.tensor([[1, 0, 1, 1, 1, 1], [1] * 6]))
    with pytest.raises(ValueError, match="shape"):
        left_padding_gaps(model, tokens[:, :4], mask)
