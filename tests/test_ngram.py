"""ngram: the counted model matches a direct count, is a probability, and learns a pattern."""

import math

import pytest
import torch

from posenc_lib.analysis.ngram import ngram_bits_per_byte, ngram_cross_entropy


def direct(train: list[int], test: list[int], order: int, alpha: float) -> float:
    """The same cross-entropy with Python loops (the reference)."""
    total = 0.0
    for i in range(order - 1, len(test)):
        ctx = tuple(test[i - order + 1 : i])
        joint = sum(1 for j in range(order - 1, len(train))
                    if tuple(train[j - order + 1 : j]) == ctx and train[j] == test[i])
        context = sum(1 for j in range(order - 1, len(train)) if tuple(train[j - order + 1 : j]) == ctx)
        total -= math.log((joint + alpha) / (context + 256 * alpha))
    return total / (len(test) - order + 1)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_matches_a_direct_count(order: int) -> None:
    train = torch.randint(0, 5, (300,))
    test = torch.randint(0, 6, (40,))  # byte 5 never occurs in train
    expected = direct(train.tolist(), test.tolist(), order, 0.5)
    assert ngram_cross_entropy(train, test, order, alpha=0.5) == pytest.approx(expected, rel=1e-9)


def test_probabilities_sum_to_one() -> None:
    train = torch.randint(0, 256, (2000,))
    context = [7, 9]
    log_probs = [-ngram_cross_entropy(train, torch.tensor(context + [x]), 3, alpha=0.3) for x in range(256)]
    assert sum(math.exp(lp) for lp in log_probs) == pytest.approx(1.0)


def test_a_longer_context_learns_a_pattern() -> None:
    pattern = torch.tensor([1, 2, 1, 3] * 200)  # after "1", the byte before it decides
    test = pattern[:400]
    assert ngram_cross_entropy(pattern, test, 2) > 0.3  # half the bytes follow "1": ln 2 each
    assert ngram_cross_entropy(pattern, test, 3, alpha=1e-3) < 0.01  # exact with little smoothing
    assert ngram_bits_per_byte(pattern, test, 3) == pytest.approx(ngram_cross_entropy(pattern, test, 3) / math.log(2))


def test_errors_name_the_argument() -> None:
    stream = torch.randint(0, 256, (50,))
    with pytest.raises(ValueError, match="order must lie in 1"):
        ngram_cross_entropy(stream, stream, 0)
    with pytest.raises(ValueError, match="order must lie in 1"):
        ngram_cross_entropy(stream, stream, 8)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        ngram_cross_entropy(stream, stream, 2, alpha=0.0)
    with pytest.raises(ValueError, match="test must be a 1-D stream"):
        ngram_cross_entropy(stream, stream[:2], 3)
    with pytest.raises(ValueError, match="train must hold integer byte values"):
        ngram_cross_entropy(torch.tensor([0, 300, 2]), stream, 2)
