"""Count-based n-gram baselines: what the previous n − 1 bytes alone, in order, predict.

An n-gram model predicts each byte from the n − 1 bytes before it, with probabilities counted
on a training stream and add-α (Lidstone) smoothing (Jurafsky & Martin, *Speech and Language
Processing*, ch. 3). A bigram (n = 2) sees only the current byte; a trigram (n = 3) sees the
previous two bytes *in order*. Their test cross-entropies are reference levels for a language
model's loss: a model that cannot tell the order of the bytes before the current one cannot use
what a trigram uses.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

VOCAB = 256
MAX_ORDER = 7  # 256**7 = 2**56 context-and-byte keys still fit in int64


def _keys(tokens: Tensor, order: int) -> Tensor:
    """Key of each n-gram of ``tokens`` [N] as an int64 [N − order + 1]: bytes in base 256."""
    n = tokens.numel() - order + 1
    key = torch.zeros(n, dtype=torch.int64)
    for k in range(order):  # oldest byte first
        key = key * VOCAB + tokens[k : k + n]
    return key


def _counts(keys: Tensor, queries: Tensor) -> Tensor:
    """How often each query key occurs among ``keys`` (0 for unseen ones)."""
    unique, counts = torch.unique(keys, return_counts=True)  # sorted
    index = torch.searchsorted(unique, queries).clamp(max=unique.numel() - 1)
    return torch.where(unique[index] == queries, counts[index], torch.zeros_like(queries))


def ngram_cross_entropy(train: Tensor, test: Tensor, order: int, *, alpha: float = 0.1) -> float:
    """Mean negative log-likelihood (nats per byte) of ``test`` under an n-gram model of ``train``.

    ``p(x | c) = (count(c, x) + α) / (count(c) + 256 α)`` for the ``order − 1`` bytes ``c`` before
    ``x``; every byte of ``test`` from position ``order − 1`` on is scored.

    Args:
        train: ``[N]`` integer byte stream (values 0 … 255) to count on.
        test: ``[M]`` byte stream to score, M ≥ order.
        order: n, from 1 (unigram) to 7.
        alpha: smoothing pseudo-count α > 0 added to every byte of every context.

    Returns:
        The cross-entropy in nats per byte (divide by ln 2 for bits per byte).

    Raises:
        ValueError: for an order outside 1 … 7, α ≤ 0, streams that are not 1-D, hold values
            outside 0 … 255, or are shorter than ``order``.

    Example:
        >>> ngram_cross_entropy(torch.tensor([1, 2] * 50), torch.tensor([1, 2, 1, 2]), 2) < 0.01
        True
    """
    if not 1 <= order <= MAX_ORDER:
        raise ValueError(f"order must lie in 1 … {MAX_ORDER}, got order={order}")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got alpha={alpha}")
    for name, stream in (("train", train), ("test", test)):
        if stream.dim() != 1 or stream.numel() < order:
            raise ValueError(f"{name} must be a 1-D stream of at least order={order} bytes, got {tuple(stream.shape)}")
        if stream.dtype.is_floating_point or int(stream.min()) < 0 or int(stream.max()) >= VOCAB:
            raise ValueError(f"{name} must hold integer byte values 0 … 255")
    train, test = train.long(), test.long()
    joint = _counts(_keys(train, order), _keys(test, order)).double()  # count(c, x) per test byte
    if order == 1:
        context = torch.full_like(joint, float(train.numel()))
    else:
        # count(c) over the contexts that are followed by a byte in train
        context = _counts(_keys(train[:-1], order - 1), _keys(test[:-1], order - 1)[: joint.numel()]).double()
    probability = (joint + alpha) / (context + VOCAB * alpha)
    return float(-probability.log().mean())


def ngram_bits_per_byte(train: Tensor, test: Tensor, order: int, *, alpha: float = 0.1) -> float:
    """:func:`ngram_cross_entropy` in bits per byte."""
    return ngram_cross_entropy(train, test, order, alpha=alpha) / math.log(2)
