"""What a trained model does with T5's last bucket: the weight on it, and removing it.

T5's bias (:mod:`posenc_lib.encodings.t5_bias`) gives every distance past the last
bucket's start one learned number per head. At lengths beyond training most keys of a late
query fall there, so how much attention that bucket draws, and what happens without it,
says how a T5-biased model extrapolates.

Shapes: H heads, T sequence.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

from posenc_lib.analysis.attention_maps import attention_probabilities
from posenc_lib.encodings.t5_bias import t5_relative_position_bucket
from posenc_lib.model.attention import causal_mask
from posenc_lib.model.transformer import TransformerLM


def _t5_table(model: TransformerLM, bucket: int) -> Tensor:
    """The model's bias table ``[N_b, H]``, after checking ``bucket`` against it."""
    t5_bias = getattr(model, "t5_bias", None)
    if t5_bias is None:
        raise ValueError("model has no T5 bias (train it with scheme 't5')")
    if not 0 <= bucket < t5_bias.num_buckets:
        raise ValueError(f"bucket must lie in 0 … {t5_bias.num_buckets - 1}, got bucket={bucket}")
    return t5_bias.bias.weight


def t5_bucket_weight(model: TransformerLM, tokens: Tensor, bucket: int, *,
                     queries: int = 64) -> dict[str, float]:
    """Percentage of attention weight the last ``queries`` queries put on keys in ``bucket``.

    The keys counted are those whose causal distance falls in ``bucket`` of the model's
    bias. ``"bias alone"`` is the softmax of the bias and the causal mask with every
    q · k = 0 (what the bias would do by itself); ``"layer 1"``, ``"layer 2"``, … are the
    model's own attention probabilities (:func:`attention_probabilities`) for ``tokens``.
    Each is the mean over heads and queries of the weight summed over those keys.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` with T5's bias.
        tokens: integer ``[1, T]`` on the model's device.
        bucket: the bucket, 0 … N_b − 1.
        queries: how many of the last queries to average over, 1 … T.

    Returns:
        ``{"bias alone": %, "layer 1": %, …}``, percentages (0 … 100) as Python floats.

    Raises:
        ValueError: for a model without T5's bias, a bucket out of range, ``tokens`` not
            ``[1, T]``, or ``queries`` outside 1 … T.
    """
    _t5_table(model, bucket)
    if tokens.dim() != 2 or tokens.shape[0] != 1:
        raise ValueError(f"tokens must be [1, T], got shape {tuple(tokens.shape)}")
    length = tokens.shape[1]
    if not 1 <= queries <= length:
        raise ValueError(f"queries must lie in 1 … {length}, got queries={queries}")
    t5_bias = model.t5_bias
    positions = torch.arange(length)
    buckets = t5_relative_position_bucket(positions[None, :] - positions[:, None],
                                          num_buckets=t5_bias.num_buckets,
                                          max_distance=t5_bias.max_distance)
    last = slice(length - queries, length)
    in_bucket = (buckets == bucket)[last]  # (queries, T)
    bias_alone = t5_bias(length, length).detach().cpu()[:, last]  # (H, queries, T)
    weights = (bias_alone + causal_mask(length, length)[last]).softmax(-1)  # q · k = 0
    shares = {"bias alone": 100 * (weights * in_bucket).sum(-1).mean().item()}
    for layer in range(len(model.blocks)):
        p = attention_probabilities(model, tokens, layer).cpu()[0, :, last]  # (H, queries, T)
        shares[f"layer {layer + 1}"] = 100 * (p * in_bucket).sum(-1).mean().item()
    return shares


@contextmanager
def removed_t5_bucket(model: TransformerLM, bucket: int) -> Iterator[TransformerLM]:
    """Inside the ``with`` block, no key in ``bucket`` gets any attention weight.

    The bucket's row of the bias table is set to −inf (every head), so softmax gives those
    keys weight 0; the trained row is put back when the block ends, also on an error.
    A query whose keys all lie in the bucket would have no key left: the model then
    returns NaN for it.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` with T5's bias.
        bucket: the bucket, 0 … N_b − 1.

    Yields:
        The model, changed in place.

    Raises:
        ValueError: for a model without T5's bias or a bucket out of range.
    """
    table = _t5_table(model, bucket)
    trained = table.detach()[bucket].clone()
    with torch.no_grad():
        table[bucket] = float("-inf")
    try:
        yield model
    finally:
        with torch.no_grad():
            table[bucket] = trained
