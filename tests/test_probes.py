"""probes: hidden states are the model's own residual stream; the ridge probe recovers a known
linear map, and R² means what it says."""

import pytest
import torch

from posenc_lib import ModelConfig, TransformerLM, sinusoidal_encoding
from posenc_lib.analysis.probes import RidgeProbe, hidden_states, r_squared


@pytest.mark.parametrize("scheme", ["none", "sinusoidal", "rope"])
def test_hidden_states_are_the_residual_stream(scheme: str) -> None:
    model = TransformerLM(ModelConfig(position=scheme, d_model=16, num_layers=3, num_heads=2)).eval()
    tokens = torch.randint(0, 256, (2, 9))
    states = hidden_states(model, tokens)
    assert len(states) == 4 and all(s.shape == (2, 9, 16) for s in states)
    embedding = model.token_embedding(tokens)
    if scheme == "sinusoidal":
        embedding = embedding + sinusoidal_encoding(9, 16)
    assert torch.allclose(states[0], embedding, atol=1e-6)
    for block, before, after in zip(model.blocks, states[:-1], states[1:]):
        assert torch.allclose(block(before, None), after, atol=1e-5)
    with torch.no_grad():
        logits = model.lm_head(model.final_norm(states[-1]))
        assert torch.allclose(logits, model(tokens), atol=1e-5)
    assert not any(b._forward_hooks or b._forward_pre_hooks for b in model.blocks)  # hooks removed


def test_probe_recovers_a_linear_map() -> None:
    features = torch.randn(500, 6) * torch.tensor([1.0, 10.0, 0.1, 3.0, 1.0, 2.0]) + 5.0
    weight = torch.tensor([0.5, -0.2, 4.0, 0.0, 1.0, -1.5])
    targets = features @ weight + 3.0
    probe = RidgeProbe.fit(features, targets, l2=0.0)
    held_out = torch.randn(100, 6) + 5.0
    assert torch.allclose(probe.predict(held_out), (held_out @ weight + 3.0).double(), atol=1e-6)
    assert probe.score(held_out, held_out @ weight + 3.0) == pytest.approx(1.0, abs=1e-9)


def test_a_strong_penalty_predicts_the_mean() -> None:
    features, targets = torch.randn(200, 4), torch.randn(200)
    probe = RidgeProbe.fit(features, targets, l2=1e9)
    mean = torch.full((200,), targets.double().mean().item(), dtype=torch.float64)
    assert torch.allclose(probe.predict(features), mean, atol=1e-6)


def test_unrelated_features_give_no_held_out_r_squared() -> None:
    features, targets = torch.randn(4000, 8), torch.randn(4000)
    probe = RidgeProbe.fit(features[:2000], targets[:2000])
    assert abs(probe.score(features[2000:], targets[2000:])) < 0.02


def test_r_squared_values() -> None:
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert r_squared(y, y) == 1.0
    assert r_squared(y, torch.full((4,), 2.5)) == 0.0
    assert r_squared(y, y.flip(0)) == pytest.approx(-3.0)  # worse than the mean


def test_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="all equal"):
        r_squared(torch.ones(3), torch.zeros(3))
    with pytest.raises(ValueError, match=r"\[N\]"):
        r_squared(torch.ones(3), torch.zeros(4))
    with pytest.raises(ValueError, match="l2 must be >= 0"):
        RidgeProbe.fit(torch.randn(5, 2), torch.randn(5), l2=-1.0)
    with pytest.raises(ValueError, match=r"\[N, C\]"):
        RidgeProbe.fit(torch.randn(5, 2), torch.randn(4))
    probe = RidgeProbe.fit(torch.randn(5, 2), torch.randn(5))
    with pytest.raises(ValueError, match=r"\[N, 2\]"):
        probe.predict(torch.randn(5, 3))


def test_quartiles_by_range() -> None:
    from posenc_lib import quartiles_by_range

    positions = torch.arange(16).repeat(2)  # t = 0 … 15, twice
    predictions = positions.double() * 2  # t̂ = 2 t
    table = quartiles_by_range(positions, predictions, [1, 4, 16])
    assert list(table.index) == ["1 ≤ t < 4", "4 ≤ t < 16"]  # t = 0 is outside the edges
    assert list(table.columns) == ["t", "25%", "50%", "75%"]
    # t̂ = 2, 2, 4, 4, 6, 6: quartiles interpolated between neighbours
    assert table.loc["1 ≤ t < 4"].tolist() == [2.0, 2.5, 4.0, 5.5]
    assert table.loc["4 ≤ t < 16", "t"] == 9.5 and table.loc["4 ≤ t < 16", "50%"] == 19.0
    with pytest.raises(ValueError, match="edges"):
        quartiles_by_range(positions, predictions, [4, 1])
    with pytest.raises(ValueError, match="positions and predictions"):
        quartiles_by_range(positions, predictions[:3], [1, 4])
