"""Training is seeded and learns; evaluation scores every token exactly once (non-overlapping)
or the last `stride` tokens of each window (sliding)."""

import math
from dataclasses import replace

import pytest
import torch

from posenc_lib import (
    ModelConfig,
    TrainConfig,
    TransformerLM,
    evaluate_perplexity,
    train,
)
from posenc_lib.training.evaluate import _windows
from posenc_lib.training.train import AnswerLoss, fit, learning_rate, make_optimizer, weight_decay_factor

TINY = TrainConfig(model=ModelConfig(position="rope", d_model=32, num_layers=1, num_heads=2), seq_len=32, batch_size=8,
                   steps=12, warmup_steps=2)


def test_training_is_deterministic_and_learns() -> None:
    model_a, rec_a = train(TINY, progress=False)
    model_b, rec_b = train(TINY, progress=False)
    assert rec_a.losses == rec_b.losses
    assert rec_a.losses[-1] < rec_a.losses[0] - 0.5  # from ~ln 256 = 5.5 down
    for pa, pb in zip(model_a.parameters(), model_b.parameters()):
        assert torch.equal(pa, pb)


def test_fit_checks_its_batches_and_the_answer_term() -> None:
    torch.manual_seed(0)
    model = TransformerLM(TINY.model)
    inputs = torch.randint(0, 256, (2, TINY.seq_len))
    few = [(inputs, inputs, None)] * (TINY.steps - 1)
    with pytest.raises(ValueError, match=f"batches ended after {TINY.steps - 1} of steps={TINY.steps}"):
        fit(model, few, TINY, progress=False)
    for bad in ({"rows": 0, "tokens": 5, "weight": 1.0}, {"rows": 1, "tokens": 0, "weight": 1.0},
                {"rows": 1, "tokens": 5, "weight": -1.0}):
        with pytest.raises(ValueError, match="AnswerLoss needs"):
            AnswerLoss(**bad)
    with pytest.raises(ValueError, match="mask must be bool"):
        AnswerLoss(rows=2, tokens=1, weight=1.0, mask=torch.ones(3, 8, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be bool"):
        AnswerLoss(rows=2, tokens=1, weight=1.0, mask=torch.ones(2, 8))


def test_answer_term_by_mask_equals_the_tail_term_on_the_same_targets() -> None:
    """A mask marking the last k targets of the first rows gives the tail term exactly; an
    empty mask adds nothing."""
    nll = torch.rand(4, 10, generator=torch.Generator().manual_seed(0))
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[:, -3:] = True
    tail = AnswerLoss(rows=2, tokens=3, weight=0.5).term(nll)
    assert torch.equal(AnswerLoss(rows=2, tokens=1, weight=0.5, mask=mask).term(nll), tail)
    assert torch.equal(tail, 0.5 * nll[:2, -3:].mean())
    empty = AnswerLoss(rows=2, tokens=1, weight=0.5, mask=torch.zeros(2, 10, dtype=torch.bool))
    assert empty.term(nll).item() == 0.0


def test_answer_term_adds_to_the_gradient_not_to_the_reported_loss() -> None:
    """With the answer term the step reports the same next-byte loss (the one before the
    update) but moves the weights differently."""
    inputs = torch.randint(0, 256, (2, TINY.seq_len + 1), generator=torch.Generator().manual_seed(0))
    batches = {"plain": None, "answer": AnswerLoss(rows=1, tokens=4, weight=1.0)}
    records, models = {}, {}
    for name, answer in batches.items():
        torch.manual_seed(0)
        models[name] = TransformerLM(TINY.model)
        one_step = replace(TINY, steps=1)
        records[name] = fit(models[name], [(inputs[:, :-1], inputs[:, 1:], answer)], one_step, progress=False)
    assert records["plain"].losses == pytest.approx(records["answer"].losses, abs=1e-6)
    moved = [not torch.equal(a, b) for a, b in zip(models["plain"].parameters(), models["answer"].parameters())]
    assert any(moved)


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
    learned = TrainConfig(model=ModelConfig(position="learned", d_model=32, num_layers=1, num_heads=2,
                                            max_positions=32),
                          seq_len=32, batch_size=4, steps=1)
    with pytest.raises(ValueError, match="max_length=32"):
        evaluate_perplexity(train(learned, progress=False)[0], tokens, 64)
    with pytest.raises(ValueError, match="max_positions=16 is shorter than seq_len=32"):
        TrainConfig(model=ModelConfig(position="learned", max_positions=16), seq_len=32)


# Weight decay of the learned position table, and what decay alone would do to a weight.

LEARNED = TrainConfig(
    model=ModelConfig(
        position="learned", d_model=16, num_layers=1, num_heads=2, max_positions=8
    ),
    seq_len=8, batch_size=2, steps=40, warmup_steps=4, lr=1e-2, weight_decay=0.5,
)


def decay_only(config: TrainConfig) -> TransformerLM:
    """The library's optimizer and schedule with every gradient zero: only decay acts."""
    torch.manual_seed(0)
    model = TransformerLM(config.model)
    optimizer = make_optimizer(model, config, config.position_weight_decay)
    for step in range(config.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config)
        for param in model.parameters():
            param.grad = torch.zeros_like(param)
        optimizer.step()
    return model


def test_weight_decay_factor_is_what_decay_alone_does() -> None:
    torch.manual_seed(0)
    before = TransformerLM(LEARNED.model)
    after = decay_only(LEARNED)
    factor = weight_decay_factor(LEARNED)
    assert 0 < factor < 0.9  # λ = 0.5 at lr 1e-2 over 40 steps shrinks noticeably
    for name in ("learned.table.weight", "token_embedding.weight", "lm_head.weight"):
        ratio = after.get_parameter(name) / before.get_parameter(name)
        assert torch.allclose(ratio, torch.full_like(ratio, factor), rtol=1e-4), name
    ln = after.get_parameter("final_norm.weight")
    assert torch.equal(ln, before.get_parameter("final_norm.weight"))  # gains never decay


def test_position_weight_decay_exempts_only_the_table() -> None:
    torch.manual_seed(0)
    before = TransformerLM(LEARNED.model)
    after = decay_only(replace(LEARNED, position_weight_decay=0.0))
    assert torch.equal(after.learned.table.weight, before.learned.table.weight)
    ratio = after.token_embedding.weight / before.token_embedding.weight
    expected = torch.full_like(ratio, weight_decay_factor(LEARNED))
    assert torch.allclose(ratio, expected, rtol=1e-4)
    half = decay_only(replace(LEARNED, position_weight_decay=0.25))
    ratio = half.learned.table.weight / before.learned.table.weight
    expected = torch.full_like(ratio, weight_decay_factor(LEARNED, 0.25))
    assert torch.allclose(ratio, expected, rtol=1e-4)


def test_position_weight_decay_errors() -> None:
    with pytest.raises(ValueError, match="position_weight_decay must be >= 0"):
        replace(LEARNED, position_weight_decay=-0.1)
    with pytest.raises(ValueError, match="learned table only"):
        TrainConfig(model=ModelConfig(position="rope"), position_weight_decay=0.0)
    with pytest.raises(ValueError, match="weight_decay must be >= 0"):
        weight_decay_factor(LEARNED, -1.0)


def test_per_position_nll_decomposes_the_perplexity() -> None:
    from posenc_lib.training.evaluate import per_position_nll

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


def test_fine_tune_copies_the_weights_and_checks_its_config() -> None:
    from posenc_lib import FineTuneConfig, fine_tune

    model = ModelConfig(position="rope", d_model=32, num_layers=1, num_heads=2)
    base_config = TrainConfig(model=model, seq_len=32, batch_size=4, steps=3)
    base, _ = train(base_config, progress=False)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    config = FineTuneConfig(base=base_config, seq_len=64, steps=3, batch_size=2,
                            lr=1e-3, rope_scaling={"type": "linear", "factor": 2})
    assert config.rope_scaling == {"rope_type": "linear", "factor": 2.0}  # normalised
    tuned, record = fine_tune(base, config, progress=False)
    again, record_again = fine_tune(base, config, progress=False)
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())
    assert record.losses == record_again.losses  # deterministic
    assert len(record.losses) == 3
    assert not torch.equal(tuned.lm_head.weight, base.lm_head.weight)
    assert tuned.config.rope_scaling["rope_type"] == "linear" and not tuned.training
    with pytest.raises(ValueError, match="RoPE base"):
        alibi = TrainConfig(model=ModelConfig(position="alibi"))
        FineTuneConfig(base=alibi, seq_len=256, steps=1, batch_size=1, lr=1e-3)
    with pytest.raises(ValueError, match="seq_len must exceed"):
        FineTuneConfig(base=base_config, seq_len=32, steps=1, batch_size=1, lr=1e-3)
    with pytest.raises(ValueError, match="'factor'"):
        FineTuneConfig(base=base_config, seq_len=64, steps=1, batch_size=1, lr=1e-3,
                       rope_scaling={"rope_type": "linear", "factor": 0.5})


def test_swap_cost_is_zero_without_order_and_matches_a_hand_swap() -> None:
    from posenc_lib.training.evaluate import swap_cost

    inputs = torch.randint(0, 256, (8, 16))
    targets = torch.randint(0, 256, (8, 16))
    model = TransformerLM(ModelConfig(position="rope", d_model=32, num_layers=1,
                                      num_heads=2)).eval()
    # by hand: swap positions 5 and 6, score position 7
    window = inputs[:, :8].clone()
    swapped = window.clone()
    swapped[:, [5, 6]] = window[:, [6, 5]]
    with torch.no_grad():
        def nll(x):
            return torch.nn.functional.cross_entropy(model(x)[:, 7], targets[:, 7], reduction="none")
        expected = (nll(swapped) - nll(window)).mean().item()
    assert swap_cost(model, inputs, targets, 7) == pytest.approx(expected, abs=1e-6)
    assert swap_cost(model, inputs, targets, 7) != 0  # RoPE sees the order
    # lag moves the pair: lag 3 swaps positions 3 and 4
    swapped = window.clone()
    swapped[:, [3, 4]] = window[:, [4, 3]]
    with torch.no_grad():
        expected = (nll(swapped) - nll(window)).mean().item()
    assert swap_cost(model, inputs, targets, 7, lag=3) == pytest.approx(expected, abs=1e-6)
    # a model without positions and one layer: the last query's keys are a set, so a swap
    # of two earlier tokens changes nothing but rounding
    bag = TransformerLM(ModelConfig(position="none", d_model=32, num_layers=1,
                                    num_heads=2)).eval()
    assert abs(swap_cost(bag, inputs, targets, 7)) < 1e-5


def test_swap_cost_names_a_bad_argument() -> None:
    from posenc_lib.training.evaluate import swap_cost

    model = TransformerLM(ModelConfig(position="none", d_model=32, num_layers=1, num_heads=2))
    x = torch.randint(0, 256, (2, 8))
    with pytest.raises(ValueError, match="lag must be >= 1"):
        swap_cost(model, x, x, 5, lag=0)
    with pytest.raises(ValueError, match="t must satisfy"):
        swap_cost(model, x, x, 1)
    with pytest.raises(ValueError, match="t must satisfy"):
        swap_cost(model, x, x, 8)
    with pytest.raises(ValueError, match=r"must both be \[B, L\]"):
        swap_cost(model, x, x[:, :4], 5)


def test_smoothed_losses() -> None:
    from posenc_lib import smoothed_losses

    curve = smoothed_losses([4.0, 2.0, 3.0, 1.0], window=2)
    assert curve.tolist() == [3.0, 2.5, 2.0] and curve.dtype == torch.float32
    assert smoothed_losses([1.0, 2.0], window=2).tolist() == [1.5]
    with pytest.raises(ValueError, match="window"):
        smoothed_losses([1.0, 2.0], window=3)

def test_stretched_fine_tune_is_chapter_11s_recipe() -> None:
    from posenc_lib import get_scale, stretch_scaling, stretched_fine_tune

    base = get_scale("ci").train_config("rope", 0)
    config = stretched_fine_tune(base, "dynamic", 4)
    assert (config.seq_len, config.steps, config.warmup_steps) == (512, 15, 1)
    assert config.batch_size * config.seq_len == base.batch_size * base.seq_len
    assert config.lr == base.lr / 5 and config.base == base
    assert config.rope_scaling == stretch_scaling("dynamic", 4, 128)  # factor 1
    with pytest.raises(ValueError, match="kappa"):
        stretched_fine_tune(base, "yarn", 1.0)


def test_held_out_perplexity_scores_one_span_at_every_length() -> None:
    from posenc_lib import HeldOutPerplexity

    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(position="rope", d_model=32, num_layers=1, num_heads=2))
    tokens = torch.randint(0, 256, (400,), dtype=torch.uint8)
    perplexity = HeldOutPerplexity(tokens, 257)
    direct = evaluate_perplexity(model, tokens, 32, max_tokens=257).perplexity
    assert perplexity(model, 32) == direct
    sliding = evaluate_perplexity(model, tokens, 32, stride=16, max_tokens=257).perplexity
    assert perplexity(model, 32, sliding_divisor=2) == sliding
    assert perplexity.ratio(model, 64, 32) == perplexity(model, 64) / direct
    with pytest.raises(ValueError, match="sliding_divisor"):
        perplexity(model, 32, sliding_divisor=0)


def test_train_is_train_fresh_on_text_batches() -> None:
    """train() is train_fresh() with text_batches: the same weights and losses, bit for bit."""
    from posenc_lib.training.train import text_batches, train, train_fresh

    config = replace(TINY, steps=3)
    model_a, rec_a = train(config, progress=False)
    model_b, rec_b = train_fresh(config, lambda tokens, generator: text_batches(
        tokens, config.batch_size, config.seq_len, generator), desc="text", progress=False)
    assert rec_a.losses == rec_b.losses
    assert all(torch.equal(a, b) for a, b in zip(model_a.parameters(), model_b.parameters()))
