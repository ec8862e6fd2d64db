"""Training is seeded and learns; evaluation scores every token exactly once (non-overlapping)
or the last `stride` tokens of each window (sliding)."""

import math

import pytest
import torch

from posenc_lib import ModelConfig, TrainConfig, TransformerLM, evaluate_perplexity, train
from posenc_lib.evaluate import _windows

TINY = TrainConfig(model=ModelConfig(position="rope", d_model=32, num_layers=1, num_heads=2), seq_len=32, batch_size=8, steps=12, warmup_steps=2)


def test_training_is_deterministic_and_learns() -> None:
    model_a, rec_a = train(TINY, progress=False)
    model_b, rec_b = train(TINY, progress=False)
    assert rec_a.losses == rec_b.losses
    assert rec_a.losses[-1] < rec_a.losses[0] - 0.5  # from ~ln 256 = 5.5 down
    for pa, pb in zip(model_a.parameters(), model_b.parameters()):
        assert torch.equal(pa, pb)


def test_windows_cover_every_target_once() -> None:
    n, length = 103, 10
    starts = _windows(n, length, None)
    scored = [s + o + 1 for s, first in starts for o in range(first, length)]
    assert scored == list(range(1, 1 + len(scored))) and len(scored) == 100
    starts = _windows(n, length, 4)
    scored = [s + o + 1 for s, first in starts for o in range(first, length)]
    assert scored == list(range(1, 1 + len(scored)))  # contiguous, no target twice


class Uniform(torch.nn.Module):
    """Predicts every byte with probability 1/256: perplexity 256, 8 bits per byte."""

    def __init__(self) -> None:
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, tokens):
        return torch.zeros(*tokens.shape, 256)


@pytest.mark.parametrize("stride", [None, 3])
def test_uniform_model_scores_256(stride) -> None:
    result = evaluate_perplexity(Uniform(), torch.randint(0, 256, (200,)), 16, stride=stride)
    assert result.perplexity == pytest.approx(256.0)
    assert result.bits_per_byte == pytest.approx(8.0)
    assert result.nll == pytest.approx(math.log(256))


def test_evaluation_errors() -> None:
    model, _ = train(TINY, progress=False)
    tokens = torch.randint(0, 256, (500,))
    with pytest.raises(ValueError, match="stride"):
        evaluate_perplexity(model, tokens, 16, stride=17)
    with pytest.raises(ValueError, match="at least"):
        evaluate_perplexity(model, tokens[:10], 16)
    learned = TrainConfig(model=ModelConfig(position="learned", d_model=32, num_layers=1, num_heads=2, max_positions=32), seq_len=32, batch_size=4, steps=1)
    with pytest.raises(ValueError, match="max_length=32"):
        evaluate_perplexity(train(learned, progress=False)[0], tokens, 64)
    with pytest.raises(ValueError, match="max_positions=16 is shorter than seq_len=32"):
        TrainConfig(model=ModelConfig(position="learned", max_positions=16), seq_len=32)


def test_per_position_nll_decomposes_the_perplexity() -> None:
    from posenc_lib.evaluate import per_position_nll

    model = TransformerLM(ModelConfig(position="none", d_model=16, num_layers=1, num_heads=2)).eval()
    tokens = torch.randint(0, 256, (300,))
    curve = per_position_nll(model, tokens, 16, max_tokens=200, batch_size=3)
    assert curve.shape == (16,) and curve.dtype == torch.float64
    whole = evaluate_perplexity(model, tokens, 16, max_tokens=200)
    assert curve.mean().item() == pytest.approx(whole.nll, rel=1e-6)  # same windows, same bytes
    assert torch.allclose(per_position_nll(Uniform(), tokens, 8), torch.full((8,), math.log(256), dtype=torch.float64))
    with pytest.raises(ValueError, match="at least"):
        per_position_nll(model, tokens[:10], 16)
    with pytest.raises(ValueError, match="eval_length"):
        per_position_nll(model, tokens, 0)
