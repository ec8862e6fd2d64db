"""Stretching RoPE past its training length: position interpolation, NTK, YaRN, Llama 3.

Every method here changes only the rotation frequencies θ_i (and, for YaRN, a scale on q and
k); the rotation itself is RoPE's. They are described by a dictionary in Hugging Face's
vocabulary, so a real model's config maps onto it unchanged:

* ``{"rope_type": "default"}``: θ_i = base^(−2i/d), no change (Su et al. 2021, eq. 15);
* ``{"rope_type": "linear", "factor": κ}``: position interpolation, every θ_i divided by κ
  (Chen et al. 2023, eq. 2; Hugging Face calls the factor ``factor``);
* ``{"rope_type": "dynamic", "factor": κ, "original_max_position_embeddings": L0}``: the
  NTK-aware base change base′ = base · (κ·L/L0 − (κ − 1))^(d/(d−2)), applied only while the
  current length L exceeds L0 (bloc97 2023 for the base change, emozilla 2023 for the dynamic
  rule; as in transformers' ``_compute_dynamic_ntk_parameters``);
* ``{"rope_type": "yarn", "factor": κ, "original_max_position_embeddings": L0,
  "beta_fast": 32, "beta_slow": 1}``: YaRN (Peng et al. 2023, eqs. 17–22), a per-pair blend
  of θ_i and θ_i/κ by how many turns pair i completes within L0, and the attention factor
  0.1·ln κ + 1 that multiplies q and k (so the logits by its square);
* ``{"rope_type": "llama3", "factor": κ, "low_freq_factor": 1, "high_freq_factor": 4,
  "original_max_position_embeddings": L0}``: Llama 3.1's bands (Grattafiori et al. 2024; the
  rule as released in Meta's code and transformers): pairs whose wavelength is shorter than
  L0/high_freq_factor keep θ_i, longer than L0/low_freq_factor get θ_i/κ, a linear blend
  between.

transformers v5 calls this dictionary ``rope_parameters`` and keeps the base in it as
``rope_theta``; v4 called it ``rope_scaling`` and sometimes wrote ``type`` for ``rope_type``.
All three spellings are accepted. This module is a leaf: it imports only torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor

ROPE_TYPES: tuple[str, ...] = ("default", "linear", "dynamic", "yarn", "llama3")
"""The ``rope_type`` values this module implements."""

DEFAULT_BASE = 10000.0
"""RoFormer's base, used when neither ``base`` nor the dictionary's ``rope_theta`` is given."""

_REQUIRED: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor", "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}
_OPTIONAL: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": (),
    "dynamic": (),
    "yarn": ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
    "llama3": (),
}
_ALWAYS_ALLOWED = ("rope_type", "rope_theta")


def _number(params: Mapping, key: str, rope_type: str, *, minimum: float, strict: bool = False) -> float:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"rope_scaling[{key!r}] must be a number for rope_type={rope_type!r}, got {value!r}")
    if value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ValueError(f"rope_scaling[{key!r}] must be {bound} for rope_type={rope_type!r}, got {value!r}")
    return float(value)


def normalize_rope_scaling(rope_scaling: Mapping | None) -> dict:
    """Check a scaling dictionary and return it in one spelling, with defaults filled in.

    Accepts transformers v5's ``rope_parameters`` (with ``rope_theta`` inside), v4's
    ``rope_scaling`` and its older ``type`` key. ``None`` means ``{"rope_type": "default"}``.

    Args:
        rope_scaling: the dictionary (see the module docstring for each ``rope_type``).

    Returns:
        A new dict with ``rope_type`` and every key the method uses (YaRN's ``beta_fast`` 32,
        ``beta_slow`` 1 and ``truncate`` True are filled in when missing); ``rope_theta`` is
        kept if it was given.

    Raises:
        ValueError: for an unknown ``rope_type``, a missing or unknown key (named in the
            message), a ``factor`` below 1, a non-positive ``original_max_position_embeddings``,
            or ``low_freq_factor`` ≥ ``high_freq_factor``.

    Example:
        >>> normalize_rope_scaling({"type": "linear", "factor": 4})
        {'rope_type': 'linear', 'factor': 4.0}
    """
    if rope_scaling is None:
        return {"rope_type": "default"}
    if not isinstance(rope_scaling, Mapping):
        raise ValueError(f"rope_scaling must be a dict or None, got {type(rope_scaling).__name__}")
    params = dict(rope_scaling)
    if "type" in params:  # transformers v4's older spelling
        legacy = params.pop("type")
        if params.setdefault("rope_type", legacy) != legacy:
            raise ValueError(f"rope_scaling has type={legacy!r} and rope_type={params['rope_type']!r}; give one")
    rope_type = params.setdefault("rope_type", "default")
    if rope_type not in ROPE_TYPES:
        raise ValueError(f"rope_scaling['rope_type'] must be one of {ROPE_TYPES}, got {rope_type!r}")
    missing = [key for key in _REQUIRED[rope_type] if key not in params]
    if missing:
        raise ValueError(f"rope_scaling with rope_type={rope_type!r} needs the key(s) {missing}")
    allowed = set(_ALWAYS_ALLOWED) | set(_REQUIRED[rope_type]) | set(_OPTIONAL[rope_type])
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"rope_scaling with rope_type={rope_type!r} does not take the key(s) {unknown}; "
                         f"allowed: {sorted(allowed)}")
    out: dict = {"rope_type": rope_type}
    if "rope_theta" in params:
        out["rope_theta"] = _number(params, "rope_theta", rope_type, minimum=0.0, strict=True)
    if "factor" in params:
        out["factor"] = _number(params, "factor", rope_type, minimum=1.0)
    if "original_max_position_embeddings" in params:
        length = params["original_max_position_embeddings"]
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ValueError("rope_scaling['original_max_position_embeddings'] must be an integer >= 1 "
                             f"(the training length L0), got {length!r}")
        out["original_max_position_embeddings"] = length
    if rope_type == "yarn":
        out["beta_fast"] = _number({"beta_fast": params.get("beta_fast", 32)}, "beta_fast", rope_type,
                                   minimum=0.0, strict=True)
        out["beta_slow"] = _number({"beta_slow": params.get("beta_slow", 1)}, "beta_slow", rope_type,
                                   minimum=0.0, strict=True)
        if out["beta_slow"] > out["beta_fast"]:
            raise ValueError(f"rope_scaling needs beta_slow <= beta_fast (turns within L0), got "
                             f"beta_slow={out['beta_slow']}, beta_fast={out['beta_fast']}")
        out["truncate"] = bool(params.get("truncate", True))
        for key in ("attention_factor", "mscale", "mscale_all_dim"):
            if params.get(key) is not None:
                out[key] = _number(params, key, rope_type, minimum=0.0, strict=True)
    if rope_type == "llama3":
        low = _number(params, "low_freq_factor", rope_type, minimum=0.0, strict=True)
        high = _number(params, "high_freq_factor", rope_type, minimum=0.0, strict=True)
        if low >= high:
            raise ValueError(f"rope_scaling needs low_freq_factor < high_freq_factor, got {low} and {high}")
        out["low_freq_factor"], out["high_freq_factor"] = low, high
    return out


def resolve_base(base: float | None, rope_scaling: Mapping | None) -> float:
    """The RoPE base: ``base`` if given, else the dictionary's ``rope_theta``, else 10 000.

    Raises:
        ValueError: if both are given and differ, or the base is not > 0.
    """
    theta = None if rope_scaling is None else rope_scaling.get("rope_theta")
    if base is not None and theta is not None and float(base) != float(theta):
        raise ValueError(f"base={base} disagrees with rope_scaling['rope_theta']={theta}; give one of them")
    value = float(base if base is not None else theta if theta is not None else DEFAULT_BASE)
    if not value > 0:
        raise ValueError(f"base must be > 0, got base={value}")
    return value


def _base_frequencies(head_dim: int, base: float) -> Tensor:
    """θ_i = base^(−2i/d) in float64, ``[head_dim // 2]`` (the same expression as rope.py's)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return base ** -exponents


def dynamic_ntk_base(base: float, head_dim: int, factor: float, seq_len: int, original_length: int) -> float:
    """The NTK-aware base for the current length: base·(κ·L/L0 − (κ − 1))^(d/(d−2)) if L > L0.

    At L = L0 this is ``base``; it grows with L. The exponent d/(d−2) keeps the slowest
    pair's wavelength stretched by the bracket while the fastest pair (θ_0 = 1) stays put
    (bloc97 2023; emozilla 2023 for making the bracket depend on L).

    Returns:
        The base to use (``base`` itself when ``seq_len <= original_length``).
    """
    if seq_len <= original_length:
        return base
    stretch = factor * seq_len / original_length - (factor - 1)
    return base * stretch ** (head_dim / (head_dim - 2))


def yarn_correction_pair(turns: float, head_dim: int, base: float, original_length: int) -> float:
    """The (fractional) pair index i whose wavelength fits ``turns`` times in L0.

    Solves L0 / λ_i = turns with λ_i = 2π·base^(2i/d):
    i = d·ln(L0 / (2π·turns)) / (2·ln base) (Peng et al. 2023, eq. 19 inverted).
    """
    return head_dim * math.log(original_length / (turns * 2 * math.pi)) / (2 * math.log(base))


def yarn_attention_factor(params: Mapping) -> float:
    """YaRN's q/k scale: ``attention_factor`` if given, else 0.1·ln κ + 1 (Peng et al. 2023,
    eq. 22; with DeepSeek's ``mscale``/``mscale_all_dim`` the ratio of two such terms)."""
    if params.get("attention_factor") is not None:
        return float(params["attention_factor"])
    factor = params["factor"]

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if params.get("mscale") and params.get("mscale_all_dim"):
        return mscale(factor, params["mscale"]) / mscale(factor, params["mscale_all_dim"])
    return mscale(factor)


def rope_scaled_frequencies(
    head_dim: int,
    base: float | None = None,
    rope_scaling: Mapping | None = None,
    seq_len: int | None = None,
) -> tuple[Tensor, float]:
    """RoPE's frequencies θ′_i after a context-extension method, and its attention factor.

    Computed in float64 and rounded once to float32, so ``{"rope_type": "default"}`` gives
    exactly :func:`~posenc_lib.encodings.rope.rope_inverse_frequencies`.

    Args:
        head_dim: the rotated width d (``rotary_dim`` for partial rotary); even, ≥ 4 for
            ``dynamic`` (its exponent d/(d−2)), ≥ 2 otherwise.
        base: θ_i = base^(−2i/d); ``None`` takes ``rope_scaling["rope_theta"]`` or 10 000.
        rope_scaling: a dictionary as in the module docstring (Hugging Face's vocabulary), or
            None for the default.
        seq_len: the current input length L (max position + 1); only ``dynamic`` uses it,
            and only when L > ``original_max_position_embeddings``. ``None`` = unscaled.

    Returns:
        ``(inv_freq, attention_factor)``: ``[head_dim // 2]`` float32 radians per position,
        and a float that multiplies cos and sin (so q and k; the logits get its square):
        1.0 for every method but YaRN.

    Raises:
        ValueError: as :func:`normalize_rope_scaling`; for an odd or too small ``head_dim``,
            a base ≤ 0 or one that disagrees with ``rope_theta``, or ``seq_len`` < 1.

    Example:
        >>> inv_freq, scale = rope_scaled_frequencies(4, 100.0, {"rope_type": "linear", "factor": 2})
        >>> inv_freq, scale
        (tensor([0.5000, 0.0500]), 1.0)
    """
    params = normalize_rope_scaling(rope_scaling)
    rope_type = params["rope_type"]
    minimum = 4 if rope_type == "dynamic" else 2
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < minimum or head_dim % 2:
        raise ValueError(f"head_dim must be an even integer >= {minimum} for rope_type={rope_type!r}, "
                         f"got head_dim={head_dim}")
    if seq_len is not None and (isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1):
        raise ValueError(f"seq_len must be an integer >= 1 or None, got seq_len={seq_len!r}")
    base = resolve_base(base, params)
    theta = _base_frequencies(head_dim, base)  # (d/2,) float64
    attention_factor = 1.0
    if rope_type == "linear":
        theta = theta / params["factor"]
    elif rope_type == "dynamic":
        if seq_len is not None:
            ntk_base = dynamic_ntk_base(base, head_dim, params["factor"], seq_len,
                                        params["original_max_position_embeddings"])
            theta = _base_frequencies(head_dim, ntk_base)
    elif rope_type == "yarn":
        theta, attention_factor = _yarn(theta, head_dim, base, params), yarn_attention_factor(params)
    elif rope_type == "llama3":
        theta = _llama3(theta, params)
    return theta.to(torch.float32), attention_factor


def _yarn(theta: Tensor, head_dim: int, base: float, params: Mapping) -> Tensor:
    """Blend θ_i (pairs that turn often within L0) with θ_i/κ (pairs that turn rarely)."""
    original_length = params["original_max_position_embeddings"]
    low = yarn_correction_pair(params["beta_fast"], head_dim, base, original_length)
    high = yarn_correction_pair(params["beta_slow"], head_dim, base, original_length)
    if params["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    # Clamp as transformers does (its upper clamp is head_dim − 1, not the last pair index).
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # a step instead of a ramp; avoids dividing by zero
    pairs = torch.arange(head_dim // 2, dtype=torch.float64)
    interpolate = ((pairs - low) / (high - low)).clamp(0, 1)  # 0 up to pair `low`, 1 from `high`
    return theta / params["factor"] * interpolate + theta * (1 - interpolate)


def _llama3(theta: Tensor, params: Mapping) -> Tensor:
    """Keep short wavelengths, divide long ones by κ, blend linearly in between."""
    factor, original_length = params["factor"], params["original_max_position_embeddings"]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    wavelength = 2 * math.pi / theta
    long_band = wavelength > original_length / low  # rarely or never turns within L0
    short_band = wavelength < original_length / high  # turns many times within L0
    smooth = (original_length / wavelength - low) / (high - low)  # 0 at the long edge, 1 at the short
    blended = (1 - smooth) * theta / factor + smooth * theta
    return torch.where(long_band, theta / factor, torch.where(short_band, theta, blended))
