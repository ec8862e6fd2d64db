"""Logit scaling: one mechanism for three ways shipped models sharpen attention.

Each rule multiplies the attention logits q·k/√d, either by one constant (a softmax
scale) or by a factor per query position (applied to q), and is described by a small
dictionary:

* ``{"kind": "deepseek_yarn", "factor": κ, "mscale_all_dim": m}``: DeepSeek-V2/V3
  under YaRN multiply the softmax scale 1/√d by mscale(κ, m)², with
  mscale(κ, m) = 0.1·m·ln κ + 1 for κ > 1, else 1 (DeepSeek-AI 2024, the released
  code; transformers' ``yarn_apply_mscale``). The rotary's own factor
  mscale(κ, mscale)/mscale(κ, mscale_all_dim) stays in
  :func:`~posenc_lib.encodings.rope_scaling.yarn_attention_factor`.
* ``{"kind": "log_length", "original_max_position_embeddings": L0}``: Qwen(-1)'s
  log-n scaling (Bai et al. 2023, §2.3 "LogN-Scaling"; their released code): the query
  at position p is multiplied by log_{L0}(p + 1) when p + 1 > L0, by 1 otherwise.
* ``{"kind": "llama4_temperature", "floor_scale": 8192, "attn_scale": 0.1}``:
  Llama 4's attention temperature tuning: the query at position p is multiplied by
  1 + attn_scale · ln(1 + ⌊(p + 1)/floor_scale⌋), in its NoPE layers only
  (Meta's released code; transformers' ``Llama4TextAttention``).

This module is a leaf: it imports only torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor

from posenc_lib.encodings.positions import require_number

LOGIT_SCALING_KINDS: tuple[str, ...] = ("deepseek_yarn", "log_length",
                                        "llama4_temperature")
"""The ``kind`` values :func:`normalize_logit_scaling` accepts."""

_L0 = "original_max_position_embeddings"
_KEYS: dict[str, tuple[tuple[str, ...], dict]] = {  # (required, optional with default)
    "deepseek_yarn": (("factor", "mscale_all_dim"), {}),
    "log_length": ((_L0,), {}),
    "llama4_temperature": ((), {"floor_scale": 8192, "attn_scale": 0.1}),
}


def _number(params: Mapping, key: str, *, above: float | None = None,
            at_least: float | None = None) -> float:
    where = f"logit_scaling[{key!r}] (kind={params['kind']!r})"
    return require_number(params[key], where, finite=True, above=above, at_least=at_least)


def normalize_logit_scaling(logit_scaling: Mapping | None) -> dict | None:
    """Check a logit-scaling dictionary; return it with defaults filled in.

    Returns:
        None for None, else a new dict with ``kind`` and every key the rule uses.

    Raises:
        ValueError: for a ``kind`` not in :data:`LOGIT_SCALING_KINDS`, a missing or
            unknown key (the message lists the allowed ones), or a value out of range
            (``factor`` ≥ 1, ``mscale_all_dim`` ≥ 0, L0 an integer ≥ 2 — log base 1
            is undefined —, ``floor_scale`` > 0, ``attn_scale`` ≥ 0).

    Example:
        >>> normalize_logit_scaling({"kind": "llama4_temperature"})
        {'kind': 'llama4_temperature', 'floor_scale': 8192.0, 'attn_scale': 0.1}
    """
    if logit_scaling is None:
        return None
    if not isinstance(logit_scaling, Mapping):
        raise ValueError("logit_scaling must be a dict or None, got "
                         f"{type(logit_scaling).__name__}")
    params = dict(logit_scaling)
    kind = params.get("kind")
    if kind not in LOGIT_SCALING_KINDS:
        raise ValueError(f"logit_scaling['kind'] must be one of {LOGIT_SCALING_KINDS}, "
                         f"got {kind!r}")
    required, optional = _KEYS[kind]
    missing = [key for key in required if key not in params]
    if missing:
        raise ValueError(f"logit_scaling with kind={kind!r} needs the key(s) {missing}")
    allowed = {"kind", *required, *optional}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"logit_scaling with kind={kind!r} does not take the key(s) "
                         f"{unknown}; allowed: {sorted(allowed)}")
    params = {**optional, **params}
    out: dict = {"kind": kind}
    if kind == "deepseek_yarn":
        out["factor"] = _number(params, "factor", at_least=1)
        out["mscale_all_dim"] = _number(params, "mscale_all_dim", at_least=0)
    elif kind == "log_length":
        length = params[_L0]
        if isinstance(length, bool) or not isinstance(length, int) or length < 2:
            raise ValueError(f"logit_scaling[{_L0!r}] (kind='log_length') must be an "
                             f"integer >= 2 (the training length L0), got {length!r}")
        out[_L0] = length
    else:
        out["floor_scale"] = _number(params, "floor_scale", above=0)
        out["attn_scale"] = _number(params, "attn_scale", at_least=0)
    return out


def yarn_mscale(factor: float, m: float = 1.0) -> float:
    """mscale(κ, m) = 0.1·m·ln κ + 1 for κ > 1, else 1 (Peng et al. 2023's √(1/t),
    with DeepSeek's multiplier m)."""
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def softmax_scale_multiplier(params: Mapping | None) -> float:
    """The constant that multiplies the softmax scale 1/√d: mscale(κ, m)² for
    ``deepseek_yarn`` (1 when m = 0, as DeepSeek's code skips it), else 1."""
    if params is None or params["kind"] != "deepseek_yarn":
        return 1.0
    if not params["mscale_all_dim"]:
        return 1.0
    mscale = yarn_mscale(params["factor"], params["mscale_all_dim"])
    return mscale * mscale


def applies_to_layer(params: Mapping | None, uses_rope: bool) -> bool:
    """Whether the rule acts in a layer: Llama 4's temperature only in NoPE layers,
    the other rules in every layer."""
    if params is None:
        return False
    return not uses_rope if params["kind"] == "llama4_temperature" else True


def query_scale(params: Mapping | None, positions: Tensor) -> Tensor | None:
    """The multiplier of the query at each position, or None when there is none.

    Args:
        params: a normalised dictionary (:func:`normalize_logit_scaling`) or None.
        positions: integer positions p ≥ 0, any shape.

    Returns:
        float32 of ``positions``' shape (computed in float64, rounded once):
        ``log_length``: log(p + 1)/log(L0) where p + 1 > L0, else 1;
        ``llama4_temperature``: 1 + attn_scale · ln(1 + ⌊(p + 1)/floor_scale⌋);
        None for ``deepseek_yarn`` and None.

    Raises:
        ValueError: for positions that are not integers.
    """
    if params is None or params["kind"] == "deepseek_yarn":
        return None
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer tensor, got {positions.dtype}")
    length = positions.to(torch.float64) + 1  # 1-based, as both codes count
    if params["kind"] == "log_length":
        original = params[_L0]
        scale = torch.where(length > original, length.log() / math.log(original),
                            torch.ones_like(length))
    else:
        steps = torch.floor(length / params["floor_scale"])
        scale = 1 + params["attn_scale"] * torch.log1p(steps)
    return scale.to(torch.float32)
