"""Context extension on the book's trained RoPE models: perplexity under other frequency
rules without retraining, and what the last layer's attention does under them.

Chapter 11 (``11_context_extension``) uses both on the ``ci`` sweep's RoPE models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
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


def _require(condition: bool, what: object) -> None:
    if not condition:
        raise AssertionError(what)


def check_stretched_wavelengths(waves: pd.DataFrame, labels: Mapping[str, str],
                                context_length: int, critical_pair: int,
                                rel: float = 1e-6) -> list[float]:
    """Check the four methods' stretched wavelengths λ'_i against their rules.

    For every stretch κ in ``waves``: PI gives κ·λ_i to every pair; dynamic NTK, YaRN and
    Llama 3 keep pair 0 and give the slowest pair κ·λ_{d/2−1}; every λ'_i lies between
    λ_i and κ·λ_i; PI, YaRN and Llama 3 leave every pair from i_c on without a full turn
    within κ·L_train, NTK every pair after i_c; NTK is λ_i·κ^(2i/(d−2)). For κ > 1, on the
    trained arc (θ'_i/θ_i ≤ 1/κ) are: PI every pair, YaRN and Llama 3 the pairs from i_c
    on, NTK the slowest pair only.

    Args:
        waves: λ'_i in positions, index ``(label, κ)``, one column per pair; the row
            ``("RoPE", 1.0)`` holds the unscaled λ_i (``context_extension_player``'s
            ``table``).
        labels: ``"linear"``, ``"dynamic"``, ``"yarn"``, ``"llama3"`` → their row label.
        context_length: L_train (positions).
        critical_pair: i_c, the first pair without a full turn within L_train.
        rel: the relative tolerance (θ'_i is rounded once to float32).

    Returns:
        The stretches κ at which NTK's pair i_c completes a full turn within κ·L_train.

    Raises:
        ValueError: if ``labels`` misses one of the four methods.
        AssertionError: naming the method and κ of the first rule broken.
    """
    methods = ("linear", "dynamic", "yarn", "llama3")
    if missing := [m for m in methods if m not in labels]:
        raise ValueError(f"labels must name {list(methods)}, missing {missing}")
    plain = waves.loc[("RoPE", 1.0)].to_numpy()
    pairs = len(plain)
    exponent = 2 * np.arange(pairs) / (2 * pairs - 2)  # NTK: λ_i κ^(2i/(d−2))
    turning = []
    for kappa in waves.loc[labels["linear"]].index:
        lam = {m: waves.loc[(labels[m], kappa)].to_numpy() for m in methods}
        _require(abs(lam["linear"] / (kappa * plain) - 1).max() < rel, ("linear", kappa))
        for m in ("dynamic", "yarn", "llama3"):  # pair 0 kept, the slowest κ λ_{d/2−1}
            _require(abs(lam[m][0] / plain[0] - 1) < rel and abs(
                lam[m][-1] / (kappa * plain[-1]) - 1) < rel, (m, kappa))
        for m, values in lam.items():  # between λ_i and κ λ_i
            _require((values > plain * (1 - rel)).all() and (
                values < kappa * plain * (1 + rel)).all(), (m, kappa))
        window = kappa * context_length  # a full turn within it: λ'_i <= κ L_train − 1
        for m in ("linear", "yarn", "llama3"):  # no full turn from i_c on
            _require((lam[m][critical_pair:] > window).all(), (m, kappa))
        if lam["dynamic"][critical_pair] <= window - 1:
            turning.append(kappa)
        _require((lam["dynamic"][critical_pair + 1:] > window).all(), ("dynamic", kappa))
        _require(abs(lam["dynamic"] / (plain * kappa**exponent) - 1).max() < rel,
                 ("dynamic", kappa))
        if kappa > 1:  # on the trained arc: θ'_i/θ_i <= 1/κ
            on_arc = {m: kappa * plain / values <= 1 + rel for m, values in lam.items()}
            _require(on_arc["linear"].all(), ("linear", kappa))
            for m in ("yarn", "llama3"):  # from i_c on, and no faster pair
                _require(on_arc[m].tolist() == [i >= critical_pair for i in range(pairs)],
                         (m, kappa))
            _require(on_arc["dynamic"].tolist() == [i == pairs - 1 for i in range(pairs)],
                     ("dynamic", kappa))
    return turning


def check_untuned_extension(p: pd.Series, rows: Mapping[str, str], train_length: int,
                            multiples: Iterable[int], *, margin: bool,
                            alibi: str = "ALiBi") -> None:
    """Check chapter 11's claims on RoPE's methods without fine-tuning, on one table.

    At L_train all five rows are the same model (within 1e-4); no scaling more than
    triples its perplexity by 16 L_train; at every longer length PI is worse than no
    scaling, and dynamic NTK, YaRN and Llama 3 better (by 0.7 at 16 L_train), yet all
    above twice the L_train value; ALiBi stays within 3 % from L_train to 16 L_train;
    YaRN beats ALiBi at 2 L_train. With ``margin`` (means over seeds) PI is ≥ 1.2× no
    scaling, the other three ≤ 0.97×, YaRN ≤ 0.95× ALiBi; without (one seed), bare order.

    Args:
        p: perplexity indexed ``(model, L)``.
        rows: ``"none"``, ``"linear"``, ``"dynamic"``, ``"yarn"``, ``"llama3"`` → the
            model name of the RoPE model under that method.
        train_length: L_train; p holds L = k·L_train for k in 1, ``multiples`` and 16.
        multiples: the multiples k > 1 of L_train compared.
        margin: whether the order must hold with the margins above.
        alibi: ALiBi's model name.

    Raises:
        ValueError: if ``rows`` misses a method.
        AssertionError: naming the claim (and method, length) that fails.
    """
    methods = ("none", "linear", "dynamic", "yarn", "llama3")
    if missing := [m for m in methods if m not in rows]:
        raise ValueError(f"rows must name {list(methods)}, missing {missing}")
    def at(model: str, k: int) -> float:
        return p[model, k * train_length]

    first = [at(rows[m], 1) for m in methods]
    _require(max(first) - min(first) < 1e-4 * min(first), "κ = 1: the same model")
    _require(at(rows["none"], 16) > 3 * at(rows["none"], 1), "none at 16 L_train")
    for k in multiples:
        _require(at(rows["linear"], k) > (1.2 if margin else 1) * at(rows["none"], k),
                 ("linear", k))
        for m in ("dynamic", "yarn", "llama3"):
            _require(at(rows[m], k) < (0.97 if margin else 1) * at(rows["none"], k),
                     (m, k))
    for m in ("dynamic", "yarn", "llama3"):
        _require(at(rows[m], 16) < 0.7 * at(rows["none"], 16), (m, 16))
    _require(min(at(rows[m], 16) for m in methods) > 2 * at(rows["none"], 1),
             "all above twice L_train's at 16 L_train")
    _require(abs(at(alibi, 16) / at(alibi, 1) - 1) < 0.03, alibi)
    _require(at(rows["yarn"], 2) < (0.95 if margin else 1) * at(alibi, 2), ("yarn", 2))
