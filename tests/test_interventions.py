"""interventions: each change to attention does what it says, and nothing else."""

import pytest
import torch

from posenc_lib import ModelConfig, TransformerLM
from posenc_lib.analysis.attention_maps import attention_probabilities
from posenc_lib.analysis.interventions import (
    band_bias,
    clamped_rope_distances,
    clamped_rope_scores,
    shifted_positions,
    sliding_window,
)


def tiny(scheme: str, layers: int = 1) -> TransformerLM:
    config = ModelConfig(position=scheme, d_model=32, num_layers=layers, num_heads=4)
    return TransformerLM(config).eval()


@pytest.mark.parametrize("scheme", ["none", "sinusoidal", "learned", "rope", "alibi", "t5"])
def test_shifted_positions_are_explicit_positions(scheme: str) -> None:
    model, tokens = tiny(scheme), torch.randint(0, 256, (2, 10))
    explicit = model(tokens, positions=torch.arange(5, 15))
    with shifted_positions(model, 5):
        shifted = model(tokens)
        assert torch.equal(model(tokens, torch.arange(10)), explicit)  # positional call
    assert torch.equal(shifted, explicit)
    assert torch.equal(model(tokens), model(tokens, positions=torch.arange(10)))  # removed


def test_shifting_moves_absolute_schemes_only() -> None:
    tokens = torch.randint(0, 256, (2, 10))
    for scheme, moves in (("none", False), ("rope", False), ("alibi", False), ("sinusoidal", True)):
        model = tiny(scheme)
        with shifted_positions(model, 1000):
            shifted = model(tokens)
        assert torch.allclose(shifted, model(tokens), atol=1e-4) != moves, scheme


def test_shifted_positions_keep_the_mask() -> None:
    model = tiny("sinusoidal")
    tokens, mask = torch.randint(0, 256, (1, 6)), torch.tensor([[0, 0, 1, 1, 1, 1]])
    with shifted_positions(model, 7):
        padded = model(tokens, attention_mask=mask)
    alone = model(tokens[:, 2:], positions=torch.arange(7, 11))
    assert torch.allclose(padded[:, 2:], alone, atol=1e-5)


def test_band_bias() -> None:
    band = band_bias(5, 2)
    allowed = band == 0
    t, s = torch.arange(5)[:, None], torch.arange(5)[None, :]
    assert torch.equal(allowed, (t - s) < 2)
    assert torch.isinf(band[~allowed]).all()


@pytest.mark.parametrize("scheme", ["none", "sinusoidal", "rope", "alibi", "t5"])
def test_a_window_as_long_as_the_input_changes_nothing(scheme: str) -> None:
    model, tokens = tiny(scheme, layers=2), torch.randint(0, 256, (2, 12))
    plain = model(tokens)
    with sliding_window(model, 12):
        windowed = model(tokens)
    assert torch.allclose(windowed, plain, atol=1e-5)
    assert torch.equal(model(tokens), plain)  # hooks removed


@pytest.mark.parametrize("scheme", ["rope", "alibi", "none"])
def test_window_equals_running_the_last_keys_alone(scheme: str) -> None:
    # one layer, relative (or no) positions: query t with a window of w sees exactly what the
    # model sees when it is run on tokens t − w + 1 … t alone
    model, tokens, w = tiny(scheme), torch.randint(0, 256, (2, 16)), 5
    with sliding_window(model, w):
        windowed = model(tokens)
    for t in (w - 1, 9, 15):
        alone = model(tokens[:, t - w + 1 : t + 1])[:, -1]
        assert torch.allclose(windowed[:, t], alone, atol=1e-5)
    assert not torch.allclose(model(tokens)[:, 15], windowed[:, 15], atol=1e-3)


def test_window_reaches_attention_probabilities() -> None:
    model, tokens = tiny("rope", layers=2), torch.randint(0, 256, (1, 10))
    with sliding_window(model, 3):
        probs = attention_probabilities(model, tokens, 1)
    t, s = torch.arange(10)[:, None], torch.arange(10)[None, :]
    assert torch.equal(probs[..., (t - s) >= 3], torch.zeros_like(probs[..., (t - s) >= 3]))
    assert torch.allclose(probs.sum(-1), torch.ones(1, 4, 10), atol=1e-6)


def test_clamp_beyond_the_input_changes_nothing() -> None:
    model, tokens = tiny("rope", layers=2), torch.randint(0, 256, (2, 12))
    plain = model(tokens)
    with clamped_rope_distances(model, 11):
        clamped = model(tokens)
    assert torch.allclose(clamped, plain, atol=1e-5)
    assert torch.equal(model(tokens), plain)  # hooks removed


def test_clamped_far_keys_lose_their_order() -> None:
    # with distances clamped to w, the last query scores every key at distance >= w alike,
    # so shuffling the tokens among those positions leaves its output unchanged
    model, w = tiny("rope"), 4
    tokens = torch.randint(0, 256, (1, 16))
    shuffled = tokens.clone()
    far = torch.arange(0, 16 - w)  # keys at distance >= w from query 15
    shuffled[0, far] = tokens[0, far[torch.randperm(len(far))]]
    with clamped_rope_distances(model, w):
        same = model(tokens)[:, -1], model(shuffled)[:, -1]
    assert torch.allclose(*same, atol=1e-5)
    assert not torch.allclose(model(tokens)[:, -1], model(shuffled)[:, -1], atol=1e-4)


def test_clamped_scores_are_the_scores_at_distance_w() -> None:
    model, w = tiny("rope"), 3
    attn = model.blocks[0].attn
    x = torch.randn(1, 8, 32)
    clamped = clamped_rope_scores(attn, x, w)
    plain = clamped_rope_scores(attn, x, 7)  # nothing clamped
    q, k, _ = attn.project(x)
    assert torch.allclose(plain, q @ k.transpose(-2, -1) / 8**0.5, atol=1e-5)
    # key 0 seen from query 7 (distance 7) scores like key 0 seen from query 3 (distance 3),
    # once the query's content is the same: compare against the layer at query 3 with x[7]
    x_moved = x.clone()
    x_moved[:, 3] = x[:, 7]
    moved = clamped_rope_scores(attn, x_moved, 7)
    assert torch.allclose(clamped[..., 7, 0], moved[..., 3, 0], atol=1e-5)


def test_clamping_some_pairs() -> None:
    model, w = tiny("rope"), 3  # head_dim 8: pairs 0 … 3
    attn = model.blocks[0].attn
    x = torch.randn(1, 10, 32)
    every = clamped_rope_scores(attn, x, w)
    assert torch.allclose(clamped_rope_scores(attn, x, w, pairs=range(4)), every, atol=1e-6)
    none = clamped_rope_scores(attn, x, w, pairs=[])
    assert torch.allclose(none, clamped_rope_scores(attn, x, 9), atol=1e-6)  # no clamp
    # the score is a sum over pairs: slow pairs clamped + fast pairs clamped = all clamped
    # + nothing clamped
    slow, fast = clamped_rope_scores(attn, x, w, pairs=[2, 3]), clamped_rope_scores(
        attn, x, w, pairs=[0, 1])
    assert torch.allclose(slow + fast, every + none, atol=1e-5)
    assert not torch.allclose(slow, every, atol=1e-4)
    tokens = torch.randint(0, 256, (1, 10))
    with clamped_rope_distances(model, w, pairs=[]):
        assert torch.allclose(model(tokens), tiny_copy_logits(model, tokens), atol=1e-5)


def tiny_copy_logits(model: TransformerLM, tokens: torch.Tensor) -> torch.Tensor:
    # the model's own logits computed outside any hook (hooks are removed on exit)
    copy = TransformerLM(model.config).eval()
    copy.load_state_dict(model.state_dict())
    return copy(tokens)


@pytest.mark.parametrize("scheme", ["rope", "alibi"])
def test_interventions_keep_the_padding_mask(scheme: str) -> None:
    # a left-padded row gives the logits of the unpadded sequence, also inside the hooks
    model = tiny(scheme, layers=2)
    tokens, mask = torch.randint(0, 256, (2, 9)), torch.tensor([[0, 0] + [1] * 7, [1] * 9])
    hooks = [lambda: sliding_window(model, 4)]
    if scheme == "rope":
        hooks.append(lambda: clamped_rope_distances(model, 3))
    for hook in hooks:
        with hook():
            padded = model(tokens, attention_mask=mask)[:1, 2:]
            alone = model(tokens[:1, 2:])
        assert torch.allclose(padded, alone, atol=1e-5)


def test_errors() -> None:
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        band_bias(3, 0)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        with shifted_positions(tiny("rope"), -1):
            pass
    with pytest.raises(ValueError, match="window must be >= 1"):
        with sliding_window(tiny("rope"), 0):
            pass
    with pytest.raises(ValueError, match="need a RoPE model"):
        with clamped_rope_distances(tiny("alibi"), 4):
            pass
    with pytest.raises(ValueError, match="max_distance must be >= 0"):
        with clamped_rope_distances(tiny("rope"), -1):
            pass
    attn = tiny("none").blocks[0].attn
    with pytest.raises(ValueError, match="rotary=None"):
        clamped_rope_scores(attn, torch.randn(1, 3, 32), 1)
    with pytest.raises(ValueError, match="pairs must lie in 0"):
        with clamped_rope_distances(tiny("rope"), 2, pairs=[4]):
            pass


def test_long_window_conditions_are_the_interventions() -> None:
    from posenc_lib.analysis.interventions import long_window_conditions

    model = tiny("rope")
    tokens = torch.randint(0, 256, (2, 16))

    def score(m, length, batch_size=None):  # mean logit of the first `length` tokens
        return m(tokens[:, :length]).mean().item()

    got = long_window_conditions(model, score, 4, (2, 4), clamp_distances=True)
    assert list(got) == ["shifted positions", "sliding attention", "clamped distances"]
    with shifted_positions(model, 4):
        assert got["shifted positions"][2] == score(model, 4)
    with sliding_window(model, 4):
        assert got["sliding attention"][4] == score(model, 16)
    with clamped_rope_distances(model, 3):
        assert got["clamped distances"][2] == score(model, 8)
    assert list(long_window_conditions(tiny("alibi"), score, 4, (2,))) == [
        "shifted positions", "sliding attention"]


def test_drawn_positions_are_sorted_draws_from_the_range_and_reproducible() -> None:
    from posenc_lib import drawn_positions, randomized_positions

    model = tiny("rope", layers=2)
    tokens = torch.randint(0, 256, (3, 16))
    with torch.no_grad(), drawn_positions(model, 100, seed=5):
        a = model(tokens)
    with torch.no_grad(), drawn_positions(model, 100, seed=5):
        b = model(tokens)
    torch.testing.assert_close(a, b)
    positions = randomized_positions(3, 16, 100, torch.Generator().manual_seed(5))
    assert positions.shape == (3, 16) and bool((positions.diff(dim=1) > 0).all())
    assert int(positions.max()) < 100
    with torch.no_grad():
        torch.testing.assert_close(a, model(tokens, positions=positions))
        assert not torch.allclose(a, model(tokens))
    with pytest.raises(ValueError, match="tokens only"), drawn_positions(model, 100):
        model(tokens, positions=torch.arange(16))
    with pytest.raises(ValueError, match="position_range"):
        randomized_positions(1, 16, 8)


def test_ablated_attention_zeroes_a_layer_or_heads() -> None:
    from posenc_lib import ablated_attention

    model = tiny("rope", layers=2)
    tokens = torch.randint(0, 256, (2, 12))
    with torch.no_grad():
        full = model(tokens)
        with ablated_attention(model, [0, 1]):
            none = model(tokens)
        with ablated_attention(model, [1], heads=[0]):
            some = model(tokens)
        again = model(tokens)
        x = torch.randn(2, 12, model.config.d_model)
        block = model.blocks[1]
        with ablated_attention(model, [1]):
            assert float(block.attn(x).sub(block.attn.out.bias).abs().max()) == 0.0
    torch.testing.assert_close(full, again)  # the hooks are gone
    assert not torch.allclose(full, none) and not torch.allclose(full, some)
    with pytest.raises(ValueError, match="layers"):
        with ablated_attention(model, [2]):
            pass
    with pytest.raises(ValueError, match="heads"):
        with ablated_attention(model, [0], heads=[9]):
            pass


def test_head_log_scaling_with_qwen_slopes_is_log_n() -> None:
    import dataclasses
    import math

    from posenc_lib import head_log_scaling

    model = tiny("rope", layers=2)
    qwen = TransformerLM(dataclasses.replace(model.config, logit_scaling={
        "kind": "log_length", "original_max_position_embeddings": 8})).eval()
    qwen.load_state_dict(model.state_dict())
    tokens = torch.randint(0, 256, (2, 40))
    slopes = torch.full((2, 4), 1 / math.log(8))
    with torch.no_grad():
        with head_log_scaling(model, slopes, 8):
            ours = model(tokens)
        torch.testing.assert_close(ours, qwen(tokens), atol=1e-4, rtol=1e-4)
        plain = model(tokens)
        with head_log_scaling(model, torch.zeros(2, 4), 8):
            torch.testing.assert_close(model(tokens), plain)  # α = 0: no change
    with pytest.raises(ValueError, match="slopes"), head_log_scaling(model, torch.zeros(3, 4), 8):
        pass


def test_fit_head_log_scaling_lowers_the_loss_it_fits() -> None:
    from posenc_lib import fit_head_log_scaling, head_log_scaling

    torch.manual_seed(0)
    model = tiny("rope", layers=2)
    stream = torch.randint(0, 256, (5000,))
    slopes = fit_head_log_scaling(model, stream, 64, 16, steps=15, windows=4, lr=0.1)
    assert slopes.shape == (2, 4) and not slopes.requires_grad
    assert all(p.requires_grad for p in model.parameters())  # unfrozen again
    batch = stream[:65][None]
    with torch.no_grad():
        plain = torch.nn.functional.cross_entropy(model(batch[:, :-1])[0], batch[0, 1:])
        with head_log_scaling(model, slopes, 16):
            fitted = torch.nn.functional.cross_entropy(model(batch[:, :-1])[0], batch[0, 1:])
    assert float(fitted) < float(plain)
    with pytest.raises(ValueError, match="length"):
        fit_head_log_scaling(model, stream, 16, 16)


def test_sliding_window_on_chosen_layers_only() -> None:
    model = tiny("rope", layers=2)
    tokens = torch.randint(0, 256, (1, 20))
    with torch.no_grad():
        full = model(tokens)
        with sliding_window(model, 4, layers=[1]):
            last_only = model(tokens)
        with sliding_window(model, 4):
            both = model(tokens)
    assert not torch.allclose(full[:, 5:], last_only[:, 5:])
    assert not torch.allclose(both[:, 5:], last_only[:, 5:])
    torch.testing.assert_close(full[:, :4], last_only[:, :4])  # the first 4 queries see all keys
    with pytest.raises(ValueError, match="layers"), sliding_window(model, 4, layers=[2]):
        pass
