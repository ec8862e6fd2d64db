"""Linear probes: how much of a quantity can be read off a layer's hidden states by a linear map.

A probe is a ridge regression from the hidden state ``h ∈ R^C`` of one layer at one position to
a target ``y`` (for the NoPE chapter: the position t, or log(t + 1)). It is fit on some windows
of text and scored on held-out ones; if a *linear* map predicts the target well on text it never
saw, the layer carries that information in a linearly readable form (Alain & Bengio 2017).
Haviv et al. (2022, §5) probe position this way in language models without positional
encodings.

Shapes: B batch, T sequence, C = d_model, N = number of (window, position) samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from posenc_lib.model.transformer import TransformerLM


@torch.no_grad()
def hidden_states(model: TransformerLM, tokens: Tensor, **forward_kwargs) -> list[Tensor]:
    """The residual stream of every layer of ``model`` for ``tokens``.

    Read with forward hooks, so the forward pass is exactly the model's own.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` (any positional scheme).
        tokens: integer ``[B, T]``.
        **forward_kwargs: passed on to ``model(tokens, ...)``.

    Returns:
        ``num_layers + 1`` float tensors ``[B, T, C]``: entry 0 is the input of the first block
        (token embeddings, plus the positional vectors of an absolute scheme), entry ``l`` the
        output of block ``l`` (before the final LayerNorm).

    Raises:
        ValueError: whatever the model's forward raises for bad tokens.

    Example:
        >>> from posenc_lib import ModelConfig
        >>> model = TransformerLM(ModelConfig(position="none", d_model=8, num_heads=2))
        >>> [tuple(h.shape) for h in hidden_states(model, torch.zeros(1, 5, dtype=torch.long))]
        [(1, 5, 8), (1, 5, 8), (1, 5, 8)]
    """
    states: list[Tensor] = []
    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: states.append(args[0]))]
    for block in model.blocks:
        handles.append(block.register_forward_hook(lambda module, args, out: states.append(out)))
    try:
        model(tokens, **forward_kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return [s.detach().float() for s in states]  # num_layers + 1 × (B, T, C)


def r_squared(targets: Tensor, predictions: Tensor) -> float:
    """Coefficient of determination, 1 − Σ(y − ŷ)² / Σ(y − ȳ)².

    1 is a perfect prediction, 0 is no better than predicting the mean of ``targets``, and it
    is negative for a prediction worse than that mean (a probe scored on held-out data can be).

    Args:
        targets: ``[N]`` true values (not all equal).
        predictions: ``[N]`` predicted values.

    Returns:
        R² as a Python float (computed in float64).

    Raises:
        ValueError: for shapes that differ or are not 1-D with N ≥ 2, or constant targets.
    """
    if targets.dim() != 1 or targets.shape != predictions.shape or targets.numel() < 2:
        raise ValueError(
            f"targets and predictions must both be [N] with N >= 2, got {tuple(targets.shape)} and "
            f"{tuple(predictions.shape)}"
        )
    y, p = targets.double(), predictions.double()
    total = ((y - y.mean()) ** 2).sum()
    if total == 0:
        raise ValueError("targets are all equal: R² is undefined")
    return float(1 - ((y - p) ** 2).sum() / total)


@dataclass(frozen=True)
class RidgeProbe:
    """A linear map ``ŷ = ((h − mean) / scale) · weight + bias`` fit by ridge regression.

    Features are standardised with the training set's mean and standard deviation, so the
    penalty ``l2`` treats every hidden unit alike. Build one with :meth:`fit`.

    Attributes:
        mean, scale: ``[C]`` float64 feature statistics of the training set.
        weight: ``[C]`` float64 coefficients on the standardised features.
        bias: the intercept (the training targets' mean).
    """

    mean: Tensor
    scale: Tensor
    weight: Tensor
    bias: float

    @classmethod
    def fit(cls, features: Tensor, targets: Tensor, *, l2: float = 1e-3) -> "RidgeProbe":
        """Fit ``targets ≈ probe(features)`` by ridge regression (Hoerl & Kennard 1970).

        Solves ``(ZᵀZ + l2 · N · I) w = Zᵀ(y − ȳ)`` in float64 for the standardised features
        ``Z``; ``l2`` is per sample, so it means the same for any N.

        Args:
            features: ``[N, C]`` hidden states, one row per (window, position).
            targets: ``[N]`` values to predict.
            l2: ridge penalty ≥ 0 (0 is least squares).

        Returns:
            The fitted :class:`RidgeProbe`.

        Raises:
            ValueError: for shapes that do not match, N < 2, or a negative ``l2``.
        """
        if features.dim() != 2 or targets.dim() != 1 or features.shape[0] != targets.shape[0]:
            raise ValueError(
                f"features must be [N, C] and targets [N], got {tuple(features.shape)} and {tuple(targets.shape)}"
            )
        if features.shape[0] < 2:
            raise ValueError(f"need at least 2 samples, got N={features.shape[0]}")
        if l2 < 0:
            raise ValueError(f"l2 must be >= 0, got l2={l2}")
        x, y = features.double(), targets.double()
        mean = x.mean(0)
        scale = x.std(0).clamp_min(1e-8)  # a constant feature stays 0 after standardising
        z = (x - mean) / scale  # (N, C)
        n, c = z.shape
        gram = z.T @ z + l2 * n * torch.eye(c, dtype=torch.float64)  # (C, C)
        weight = torch.linalg.solve(gram, z.T @ (y - y.mean()))  # (C,)
        return cls(mean=mean, scale=scale, weight=weight, bias=float(y.mean()))

    def predict(self, features: Tensor) -> Tensor:
        """Predictions ``[N]`` (float64) for features ``[N, C]``.

        Raises:
            ValueError: if the features do not have the width the probe was fit on.
        """
        if features.dim() != 2 or features.shape[1] != self.mean.shape[0]:
            raise ValueError(f"features must be [N, {self.mean.shape[0]}], got {tuple(features.shape)}")
        return ((features.double() - self.mean) / self.scale) @ self.weight + self.bias

    def score(self, features: Tensor, targets: Tensor) -> float:
        """R² of the probe's predictions on ``features`` ``[N, C]`` against ``targets`` ``[N]``."""
        return r_squared(targets, self.predict(features))


def quartiles_by_range(positions: Tensor, predictions: Tensor, edges: Sequence[int]) -> pd.DataFrame:
    """A probe's predictions summed up by range of the true position: the median position and
    the quartiles of the predictions in each range ``[edges[j], edges[j + 1])``.

    Args:
        positions: ``[N]`` true positions t (integers).
        predictions: ``[N]`` predicted values, e.g. a probe's t̂ for the same samples.
        edges: increasing positions; samples outside ``[edges[0], edges[-1])`` are left out.

    Returns:
        one row per range that holds samples, labelled ``"lo ≤ t < hi"``; columns ``"t"``
        (median true position in the range), ``"25%"``, ``"50%"``, ``"75%"`` (quartiles of
        the predictions, linearly interpolated, as ``pandas.Series.describe``).

    Raises:
        ValueError: if positions and predictions are not two ``[N]`` tensors of one length, or
            the edges are not increasing.
    """
    if positions.dim() != 1 or positions.shape != predictions.shape:
        raise ValueError(f"positions and predictions must be [N] each, got {tuple(positions.shape)} "
                         f"and {tuple(predictions.shape)}")
    if any(hi <= lo for lo, hi in zip(edges[:-1], edges[1:])):
        raise ValueError(f"edges must be strictly increasing, got edges={list(edges)}")
    frame = pd.DataFrame({"t": positions.numpy(), "predicted": predictions.numpy()})
    groups = frame.groupby(pd.cut(frame["t"], edges, right=False), observed=True)
    table = groups["predicted"].describe()[["25%", "50%", "75%"]]
    table.insert(0, "t", groups["t"].median())
    table.index = pd.Index([f"{r.left} ≤ t < {r.right}" for r in table.index])
    return table
