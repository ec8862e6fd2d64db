"""Perplexity and bits per byte on held-out text, at any evaluation length.

Two protocols (Press et al. 2022, §4 and Appendix B):

* **non-overlapping** (``stride=None``): cut the text into windows of L tokens and score every
  token of every window. Early tokens of each window see little context ("early-token curse").
* **sliding** (``stride=S < L``): windows of L tokens every S tokens; only each window's last
  S tokens are scored (all L in the first window), so every scored token has ≥ L − S context.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class EvalResult:
    """Mean negative log-likelihood (nats/token), perplexity, bits per byte, tokens scored."""

    eval_length: int
    stride: int | None
    nll: float
    perplexity: float
    bits_per_byte: float
    tokens_scored: int

    def to_dict(self) -> dict:
        return asdict(self)


def _windows(num_tokens: int, length: int, stride: int | None) -> list[tuple[int, int]]:
    """(start, first scored offset within the window) for each window of ``length`` inputs."""
    if stride is None:
        return [(start, 0) for start in range(0, num_tokens - length, length)]
    windows = [(0, 0)]
    for start in range(stride, num_tokens - length, stride):
        windows.append((start, length - stride))
    return windows


@torch.no_grad()

def _evaluation_setup(model: nn.Module, tokens: Tensor, eval_length: int, max_tokens: int | None,
                      batch_size: int | None, device) -> tuple[Tensor, torch.device, int]:
    """Check ``eval_length`` against the model and the stream; return the tokens (cut to
    ``max_tokens``, int64), the device and the batch size (default 16 384 tokens a batch)."""
    if eval_length < 1:
        raise ValueError(f"eval_length must be >= 1, got {eval_length}")
    max_length = getattr(model, "max_length", None)
    if max_length is not None and eval_length > max_length:
        raise ValueError(f"eval_length={eval_length} exceeds the model's max_length={max_length}")
    if max_tokens is not None:
        tokens = tokens[:max_tokens]
    if tokens.numel() < eval_length + 1:
        raise ValueError(f"need at least eval_length + 1 = {eval_length + 1} tokens, got {tokens.numel()}")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    return tokens.long(), device, batch_size or max(1, 16384 // eval_length)

def evaluate_perplexity(
    model: nn.Module,
    tokens: Tensor,
    eval_length: int,
    *,
    stride: int | None = None,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
) -> EvalResult:
    """Score a byte stream with windows of ``eval_length`` tokens.

    Args:
        model: maps ``[B, L]`` int64 tokens to ``[B, L, V]`` logits.
        tokens: ``[N]`` integer token stream (uint8 bytes are fine).
        eval_length: L, the window length (inputs; targets are the next tokens).
        stride: None for non-overlapping windows, else S with 1 ≤ S ≤ L (sliding window).
        max_tokens: use only the first ``max_tokens`` tokens (the same span for every L).
        batch_size: windows per forward pass; default about 16 384 tokens per batch.
        device: defaults to the model's.

    Returns:
        :class:`EvalResult`; perplexity = exp(nll), bits per byte = nll / ln 2 (one token is one byte).

    Raises:
        ValueError: if L < 1, the stride is outside [1, L], the stream is shorter than L + 1,
            or the model refuses L (a learned table shorter than L).
    """
    if stride is not None and eval_length >= 1 and not 1 <= stride <= eval_length:
        raise ValueError(f"stride must be in [1, eval_length={eval_length}], got stride={stride}")
    tokens, device, batch_size = _evaluation_setup(model, tokens, eval_length, max_tokens,
                                                   batch_size, device)
    windows = _windows(tokens.numel(), eval_length, stride)
    offsets = torch.arange(eval_length + 1)
    total_nll, total_scored = 0.0, 0
    was_training = model.training
    model.eval()
    for i in range(0, len(windows), batch_size):
        chunk = windows[i : i + batch_size]
        starts = torch.tensor([s for s, _ in chunk])
        batch = tokens[starts[:, None] + offsets[None, :]].to(device)  # (B, L+1)
        logits = model(batch[:, :-1]).float()  # (B, L, V)
        nll = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")  # (B, L)
        for row, (_, first_scored) in enumerate(chunk):
            total_nll += nll[row, first_scored:].double().sum().item()
            total_scored += eval_length - first_scored
    model.train(was_training)
    mean = total_nll / total_scored
    return EvalResult(eval_length, stride, mean, math.exp(mean), mean / math.log(2), total_scored)


@dataclass(frozen=True)
class HeldOutPerplexity:
    """Perplexity of a model on one fixed span of held-out text, at any window length.

    The helper chapters write as ``perplexity(model, length)``: every length scores the
    same first ``max_tokens`` tokens of ``tokens`` with :func:`evaluate_perplexity`, so
    the ratio of two lengths compares the same bytes.

    Attributes:
        tokens: ``[N]`` integer token stream (a corpus's test split).
        max_tokens: score only the first ``max_tokens`` tokens (None: all).

    Example:
        >>> perplexity = HeldOutPerplexity(corpus.test, 4097)  # doctest: +SKIP
        >>> perplexity(model, 128), perplexity.ratio(model, 2048, 128)  # doctest: +SKIP
    """

    tokens: Tensor
    max_tokens: int | None = None

    def __call__(self, model: nn.Module, length: int, *, sliding_divisor: int | None = None,
                 **options) -> float:
        """Perplexity with windows of ``length`` tokens: non-overlapping, or sliding with
        stride ``length // sliding_divisor``; ``options`` go to :func:`evaluate_perplexity`.

        Raises:
            ValueError: if ``sliding_divisor`` is < 1, or as :func:`evaluate_perplexity`.
        """
        if sliding_divisor is not None and sliding_divisor < 1:
            raise ValueError(f"sliding_divisor must be >= 1, got sliding_divisor={sliding_divisor}")
        stride = length // sliding_divisor if sliding_divisor else None
        return evaluate_perplexity(model, self.tokens, length, stride=stride,
                                   max_tokens=self.max_tokens, **options).perplexity

    def ratio(self, model: nn.Module, long: int, short: int, **options) -> float:
        """PPL(long) / PPL(short), the same model under the same protocol (``options``
        as for calling the object)."""
        return self(model, long, **options) / self(model, short, **options)


@torch.no_grad()
def per_position_nll(
    model: nn.Module,
    tokens: Tensor,
    eval_length: int,
    *,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """Mean negative log-likelihood at each position of a window, over non-overlapping windows.

    The windows are exactly those of ``evaluate_perplexity(..., stride=None)``, so the mean of
    the returned curve is that function's ``nll``: the curve says *where in the window* a
    perplexity comes from.

    Args:
        model: maps ``[B, L]`` int64 tokens to ``[B, L, V]`` logits.
        tokens: ``[N]`` integer token stream.
        eval_length: L, the window length.
        max_tokens: use only the first ``max_tokens`` tokens.
        batch_size: windows per forward pass; default about 16 384 tokens per batch.
        device: defaults to the model's.

    Returns:
        float64 ``[L]``: entry t is the mean NLL (nats) of the byte predicted at position t,
        i.e. the next byte, predicted from the t + 1 bytes at positions 0 … t of the window.

    Raises:
        ValueError: as :func:`evaluate_perplexity`.
    """
    tokens, device, batch_size = _evaluation_setup(model, tokens, eval_length, max_tokens,
                                                   batch_size, device)
    starts = torch.tensor([start for start, _ in _windows(tokens.numel(), eval_length, None)])
    offsets = torch.arange(eval_length + 1)
    total = torch.zeros(eval_length, dtype=torch.float64)
    was_training = model.training
    model.eval()
    for i in range(0, len(starts), batch_size):
        batch = tokens[starts[i : i + batch_size, None] + offsets[None, :]].to(device)  # (B, L+1)
        logits = model(batch[:, :-1]).float()  # (B, L, V)
        nll = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")  # (B, L)
        total += nll.double().sum(0).cpu()
    model.train(was_training)
    return total / len(starts)  # (L,)


@torch.no_grad()
def swap_cost(model: nn.Module, inputs: Tensor, targets: Tensor, t: int, *, lag: int = 1) -> float:
    """How much a model's loss at position t rises when two earlier tokens change places.

    The tokens at positions ``t - lag`` and ``t - lag - 1`` are swapped; the cost is the mean,
    over the batch, of NLL(next token at t | swapped window) − NLL(… | original window). A
    model that reads its input as a bag of tokens pays nothing (chapter 08 uses it on NoPE);
    one that uses their order pays more.

    Args:
        model: maps ``[B, L]`` int64 tokens to ``[B, L, V]`` logits.
        inputs: ``[B, L]`` int64 windows (e.g. from :func:`~posenc_lib.training.data.sample_batch`).
        targets: ``[B, L]`` next tokens of ``inputs``.
        t: the position whose prediction is scored; only positions 0 … t are fed to the model.
        lag: how far before t the swapped pair lies (1: the two tokens just before t).

    Returns:
        The mean rise of the NLL, in nats (negative when the swap helps).

    Raises:
        ValueError: if ``lag < 1``, ``t - lag - 1 < 0``, ``t`` is not a position of
            ``inputs``, or the two tensors differ in shape.
    """
    if inputs.shape != targets.shape or inputs.dim() != 2:
        raise ValueError(f"inputs and targets must both be [B, L], got {tuple(inputs.shape)} "
                         f"and {tuple(targets.shape)}")
    if lag < 1:
        raise ValueError(f"lag must be >= 1, got lag={lag}")
    if not lag + 1 <= t < inputs.shape[1]:
        raise ValueError(f"t must satisfy lag + 1 <= t < {inputs.shape[1]} (the window length), "
                         f"got t={t}, lag={lag}")
    window, scored = inputs[:, : t + 1], targets[:, t]
    swapped = window.clone()
    a, b = t - lag - 1, t - lag
    swapped[:, [a, b]] = window[:, [b, a]]
    before = F.cross_entropy(model(window)[:, t], scored, reduction="none")
    after = F.cross_entropy(model(swapped)[:, t], scored, reduction="none")
    return (after - before).mean().item()
