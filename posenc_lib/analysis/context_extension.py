"""Context extension on the book's trained RoPE models: perplexity under other frequency
rules without retraining, and what the last layer's attention does under them.

Chapter 11 (``11_context_extension``) uses both on the ``ci`` sweep's RoPE models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import pandas as pd
from torch import Tensor

from posenc_lib.analysis.attention_maps import (
    attention_entropy,
    attention_mass_beyond,
    attention_probabilities,
)
from posenc_lib.model.transformer import TransformerLM, with_rope_scaling


def stretched_perplexities(
    models: Mapping[int, TransformerLM],
    rules: Mapping[str, Callable[[float], dict | None]],
    settings: Iterable[tuple[float, int]],
    evaluate: Callable[[TransformerLM, int], float],
) -> pd.DataFrame:
    """Perplexity of trained RoPE models under several frequency rules, nothing retrained.

    Args:
        models: seed → a trained ``"rope"`` :class:`TransformerLM`.
        rules: name → a function of κ that returns a Hugging Face ``rope_scaling``
            dictionary (e.g. ``lambda k: method_scaling("yarn", k, L_train)``) or None.
        settings: ``(κ, L)`` pairs: each rule set to κ (as a float) and evaluated on
            windows of L tokens.
        evaluate: ``(model, L) → perplexity`` (e.g. non-overlapping windows of the test
            text, :func:`~posenc_lib.training.train.evaluate_perplexity`).

    Returns:
        One row per (seed, rule, setting), in that order, with columns ``model`` (the
        rule's name), ``seed``, ``κ`` (float), ``L`` and ``PPL``.

    Raises:
        ValueError: if ``models``, ``rules`` or ``settings`` is empty (and whatever
            :func:`with_rope_scaling` raises for a model that is not a RoPE model).
    """
    settings = list(settings)
    if not models or not rules or not settings:
        raise ValueError(f"need models, rules and settings, got {len(models)} models, "
                         f"{len(rules)} rules, {len(settings)} settings")
    rows = []
    for seed, model in models.items():
        for name, rule in rules.items():
            for kappa, length in settings:
                stretched = with_rope_scaling(model, rule(float(kappa)))
                rows.append({"model": name, "seed": seed, "κ": float(kappa), "L": length,
                             "PPL": evaluate(stretched, length)})
    return pd.DataFrame(rows)


def last_layer_attention(model: TransformerLM, windows: Tensor, last_queries: int
                         ) -> dict[str, float]:
    """What the last layer's attention does for the last queries of each window.

    Args:
        model: a trained :class:`TransformerLM` (any frequency rule).
        windows: integer ``[B, T]`` token windows.
        last_queries: how many of the last queries of each window are kept (1 … T).

    Returns:
        ``{"share on r ≤ 1": …, "entropy (nats)": …}``: the mean over windows, heads and
        kept queries of the weight on the current and the previous token, and of the
        entropy of the rows (:func:`~posenc_lib.analysis.attention_maps.attention_entropy`).

    Raises:
        ValueError: if ``last_queries`` is not in 1 … T.
    """
    length = windows.shape[-1]
    if not 1 <= last_queries <= length:
        raise ValueError(f"last_queries must be in 1 … {length}, got {last_queries}")
    probs = attention_probabilities(model, windows, len(model.blocks) - 1)
    skip = length - last_queries
    return {"share on r ≤ 1": 1 - attention_mass_beyond(probs, 2, skip_first=skip)
            .mean().item(),
            "entropy (nats)": attention_entropy(probs, skip_first=skip).mean().item()}
