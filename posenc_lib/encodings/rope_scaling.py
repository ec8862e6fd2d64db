"""Stretching RoPE past its training length: interpolation, NTK, YaRN, Llama 3, LongRoPE.

Every method here changes only the rotation frequencies θ_i (and, for YaRN, a scale
on q and k); the rotation itself is RoPE's. A method is described by a dictionary in
Hugging Face's vocabulary, so a real model's config maps onto it unchanged:

* ``{"rope_type": "default"}``: θ_i = base^(−2i/d), no change (Su et al. 2021, eq. 15);
* ``{"rope_type": "linear", "factor": κ}``: position interpolation, every θ_i divided
  by κ (Chen et al. 2023);
* ``{"rope_type": "dynamic", "factor": κ, "original_max_position_embeddings": L0}``:
  the NTK-aware base change base′ = base · (κ·L/L0 − (κ − 1))^(d/(d−2)), applied only
  while the current length L exceeds L0 (bloc97 2023 for the base change, emozilla
  2023 for the dynamic rule; as transformers' ``_compute_dynamic_ntk_parameters``);
* ``{"rope_type": "yarn", "factor": κ, "original_max_position_embeddings": L0,
  "beta_fast": 32, "beta_slow": 1}``: YaRN (Peng et al. 2023), a per-pair
  blend of θ_i and θ_i/κ by how many turns pair i completes within L0, and the
  attention factor 0.1·ln κ + 1 that multiplies q and k (so the logits by its square);
* ``{"rope_type": "llama3", "factor": κ, "low_freq_factor": 1, "high_freq_factor": 4,
  "original_max_position_embeddings": L0}``: Llama 3.1's bands (Dubey et al. 2024;
  the rule as released in Meta's code and in transformers): pairs whose
  wavelength is shorter than L0/high_freq_factor keep θ_i, those longer than
  L0/low_freq_factor get θ_i/κ, with a linear blend in between;
* ``{"rope_type": "ntk", "factor": κ}``: static NTK-aware scaling, the base raised
  once to base′ = base · κ^(d/(d−2)) (bloc97 2023), whatever the input length;
* ``{"rope_type": "longrope", "short_factor": [...], "long_factor": [...],
  "factor": κ, "original_max_position_embeddings": L0}``: LongRoPE (Ding et al.
  2024, as Phi-3 ships it): θ′_i = θ_i / short_factor[i] while the current length
  L = max(position) + 1 is at most L0, θ_i / long_factor[i] past it, and cos and
  sin multiplied by the attention factor √(1 + ln κ / ln L0) (κ > 1; else 1) unless
  ``attention_factor`` is given.

* ``{"rope_type": "proportional", "partial_rotary_factor": p, "factor": κ}``:
  p-RoPE (Barbero et al. 2025; transformers' ``_compute_proportional_rope_parameters``,
  Gemma 4): the full-width θ_i for the k = ⌊p·d/2⌋ fastest pairs, 0 for the others
  (:func:`~posenc_lib.encodings.rope_partial.p_rope_kept_pairs`), all divided by κ
  (default 1); d/2 frequencies, the zeros included.

Keys every type takes (transformers 5.23's ``RopeParameters``):

* ``partial_rotary_factor`` f in (0, 1]: GPT-NeoX's partial rotary (GPT-NeoX, Phi,
  Phi-3 with f = 1.0, StableLM, Qwen3-Next, GLM-4): every type but ``proportional``
  computes its frequencies over the rotated width r = ⌊f·d⌋
  (:func:`~posenc_lib.encodings.rope_partial.neox_rotary_dim`, transformers'
  ``int(head_dim * partial_rotary_factor)``) as if the head were r wide, so it returns
  r/2 of them; ``proportional`` reads f as p above;
* ``mrope_section`` (pairs per axis) and ``mrope_interleaved`` (Qwen2-VL, Qwen3-VL):
  kept for :func:`~posenc_lib.encodings.mrope.apply_mrope`, which sections the
  frequencies of whichever method the dictionary names; ignored by the frequencies
  themselves. Qwen2-VL's ``{"type": "mrope"}`` (which transformers reads as
  ``"default"``) is read as ``{"rope_type": "default"}``.

What transformers derives from the rest of the config is derived here from
``max_position_embeddings`` when it is passed (:func:`normalize_rope_scaling`):
LongRoPE's ``factor`` = max_position_embeddings / L0 when absent (Phi-3 ships none),
and a missing ``original_max_position_embeddings`` = max_position_embeddings (as
transformers' ``standardize_rope_params``; its dynamic type always reads it from
there). A value of None counts as absent, and YaRN's ``mscale``, ``mscale_all_dim``,
``beta_fast`` and ``beta_slow`` at 0 do too (transformers tests them for truth).
``"axial"`` (the vision towers' 2-D RoPE) is not implemented.

A per-layer-type dictionary, transformers v5's nested ``rope_parameters`` (Gemma 3:
``{"sliding_attention": {...}, "full_attention": {...}}``), is read by
:func:`normalize_rope_parameters`, which checks each entry as above.

transformers v5 calls this dictionary ``rope_parameters`` and keeps the base in it as
``rope_theta``; v4 called it ``rope_scaling`` and sometimes wrote ``type`` for
``rope_type``. All three spellings are accepted. This module imports only torch and
the leaf :mod:`~posenc_lib.encodings.rope_partial` (where the rotated width of partial
rotary has its one home); :func:`pair_stretch` imports RoPE's θ_i from
:mod:`~posenc_lib.encodings.rope` when called (rope imports this module).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor

from posenc_lib.encodings.positions import require_number
from posenc_lib.encodings.rope_partial import neox_rotary_dim, p_rope_kept_pairs

ROPE_TYPES: tuple[str, ...] = ("default", "linear", "dynamic", "yarn", "llama3", "ntk",
                               "longrope", "proportional")
"""The ``rope_type`` values this module implements: transformers 5.23's
``ROPE_INIT_FUNCTIONS`` and ``"default"``, and the static ``"ntk"``."""

DEFAULT_BASE = 10000.0
"""RoFormer's base: used when neither ``base`` nor ``rope_theta`` is given."""

_L0 = "original_max_position_embeddings"
_REQUIRED: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor", _L0),
    "yarn": ("factor", _L0),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", _L0),
    "ntk": ("factor",),
    "longrope": ("short_factor", "long_factor", _L0),
    "proportional": (),
}
_OPTIONAL: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": (),
    "dynamic": (),
    "yarn": ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim",
             "truncate"),
    "llama3": (),
    "ntk": (),
    "longrope": ("factor", "attention_factor"),
    "proportional": ("factor",),
}
_ALWAYS_ALLOWED = ("rope_type", "rope_theta", "partial_rotary_factor", "mrope_section",
                   "mrope_interleaved")
_DERIVED_L0 = ("dynamic", "yarn", "llama3", "longrope")  # L0 from max_position_embeddings


def _number(value: object, key: str, rope_type: str, *, above: float | None = None,
            at_least: float | None = None) -> float:
    """``value`` as a float, checked to be > ``above`` or ≥ ``at_least``."""
    return require_number(value, f"rope_scaling[{key!r}] (rope_type={rope_type!r})",
                          above=above, at_least=at_least)


def normalize_rope_scaling(rope_scaling: Mapping | None, *,
                           max_position_embeddings: int | None = None) -> dict:
    """Check a scaling dictionary; return it in one spelling, defaults filled in.

    Accepts transformers v5's ``rope_parameters`` (with ``rope_theta`` inside) as a
    v5 config holds it, v4's ``rope_scaling`` and its older ``type`` key. ``None``
    means the default. Idempotent: the result normalises to itself.

    Args:
        rope_scaling: the dictionary (see the module docstring for each type).
        max_position_embeddings: the config's ``max_position_embeddings``, for what
            transformers derives from it: LongRoPE's missing ``factor`` (= this / L0,
            Phi-3) and a missing ``original_max_position_embeddings`` (= this, for
            ``dynamic``, ``yarn``, ``llama3`` and ``longrope``). None: nothing is
            derived, and a dictionary that needs it is refused, naming the key.

    Returns:
        A new dict with ``rope_type`` and every key the method uses (YaRN's
        ``beta_fast`` 32, ``beta_slow`` 1 and ``truncate`` True are filled in when
        missing; LongRoPE's ``factor`` when derived); ``rope_theta``,
        ``partial_rotary_factor``, ``mrope_section`` and ``mrope_interleaved`` are
        kept if given. Keys whose value is None are dropped.

    Raises:
        ValueError: for an unknown ``rope_type``, a missing or unknown key (named in
            the message), a ``factor`` below 1, an ``original_max_position_embeddings``
            or ``max_position_embeddings`` that is not a positive integer,
            ``low_freq_factor`` ≥ ``high_freq_factor``, a ``partial_rotary_factor``
            outside (0, 1], or an ``mrope_section`` that is not a list of integers ≥ 1.

    Example:
        >>> normalize_rope_scaling({"type": "linear", "factor": 4})
        {'rope_type': 'linear', 'factor': 4.0}
        >>> normalize_rope_scaling({"rope_type": "longrope", "short_factor": [1.0],
        ...     "long_factor": [2.0], "original_max_position_embeddings": 4096},
        ...     max_position_embeddings=131072)["factor"]
        32.0
    """
    if rope_scaling is None:
        return {"rope_type": "default"}
    if not isinstance(rope_scaling, Mapping):
        kind = type(rope_scaling).__name__
        raise ValueError(f"rope_scaling must be a dict or None, got {kind}")
    if max_position_embeddings is not None and (
            isinstance(max_position_embeddings, bool)
            or not isinstance(max_position_embeddings, int) or max_position_embeddings < 1):
        raise ValueError("max_position_embeddings must be an integer >= 1 or None, got "
                         f"max_position_embeddings={max_position_embeddings!r}")
    # transformers reads a key set to None as absent (``dict.get``), so do we.
    params = {key: value for key, value in rope_scaling.items() if value is not None}
    for key in ("type", "rope_type"):  # Qwen2-VL's "mrope": default RoPE, sectioned
        if params.get(key) == "mrope":
            params[key] = "default"
    if "type" in params:  # transformers v4's older spelling
        legacy = params.pop("type")
        if params.setdefault("rope_type", legacy) != legacy:
            raise ValueError(f"rope_scaling has type={legacy!r} and "
                             f"rope_type={params['rope_type']!r}; give one")
    rope_type = params.setdefault("rope_type", "default")
    if rope_type not in ROPE_TYPES:
        raise ValueError(f"rope_scaling['rope_type'] must be one of {ROPE_TYPES}, "
                         f"got {rope_type!r}")
    if max_position_embeddings is not None and rope_type in _DERIVED_L0:
        params.setdefault(_L0, max_position_embeddings)
    missing = [key for key in _REQUIRED[rope_type] if key not in params]
    if missing:
        hint = ""
        if _L0 in missing:
            hint = f" ({_L0} = the training length L0; transformers' dynamic type " \
                   "reads it from config.max_position_embeddings: pass " \
                   "max_position_embeddings=)"
        raise ValueError(f"rope_scaling with rope_type={rope_type!r} needs the "
                         f"key(s) {missing}{hint}")
    allowed = {*_ALWAYS_ALLOWED, *_REQUIRED[rope_type], *_OPTIONAL[rope_type]}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"rope_scaling with rope_type={rope_type!r} does not take the "
                         f"key(s) {unknown}; allowed: {sorted(allowed)}")
    out: dict = {"rope_type": rope_type}
    if "rope_theta" in params:
        theta = params["rope_theta"]
        out["rope_theta"] = _number(theta, "rope_theta", rope_type, above=0)
    if "partial_rotary_factor" in params:
        fraction = _number(params["partial_rotary_factor"], "partial_rotary_factor",
                           rope_type, above=0)
        if fraction > 1:
            raise ValueError(f"rope_scaling['partial_rotary_factor'] (rope_type="
                             f"{rope_type!r}) must be in (0, 1], got {fraction!r}")
        out["partial_rotary_factor"] = fraction
    if "factor" in params:
        out["factor"] = _number(params["factor"], "factor", rope_type, at_least=1)
    if _L0 in params:
        length = params[_L0]
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ValueError(f"rope_scaling[{_L0!r}] must be an integer >= 1 (the "
                             f"training length L0), got {length!r}")
        out[_L0] = length
    if rope_type == "yarn":
        out.update(_yarn_options(params))
    if rope_type == "llama3":
        low, high = (_number(params[key], key, rope_type, above=0)
                     for key in ("low_freq_factor", "high_freq_factor"))
        if low >= high:
            raise ValueError("rope_scaling needs low_freq_factor < high_freq_factor, "
                             f"got {low} and {high}")
        out["low_freq_factor"], out["high_freq_factor"] = low, high
    if rope_type == "longrope":
        if "factor" not in out:
            out["factor"] = _derived_longrope_factor(out[_L0], max_position_embeddings)
        for key in ("short_factor", "long_factor"):
            out[key] = _factor_list(params[key], key)
        if params.get("attention_factor") is not None:
            out["attention_factor"] = _number(params["attention_factor"],
                                              "attention_factor", rope_type, above=0)
    out.update(_mrope_keys(params, rope_type))
    return out


def _derived_longrope_factor(original_length: int,
                             max_position_embeddings: int | None) -> float:
    """Phi-3's κ = max_position_embeddings / L0 (transformers'
    ``_compute_longrope_parameters`` when ``factor`` is absent)."""
    if max_position_embeddings is None:
        raise ValueError("rope_scaling with rope_type='longrope' and no 'factor' needs "
                         "max_position_embeddings= (transformers derives factor = "
                         f"max_position_embeddings / {_L0}, as Phi-3 ships it)")
    factor = max_position_embeddings / original_length
    if factor < 1:
        raise ValueError(f"LongRoPE's derived factor max_position_embeddings / {_L0} = "
                         f"{max_position_embeddings} / {original_length} is below 1")
    return factor


def _mrope_keys(params: Mapping, rope_type: str) -> dict:
    """M-RoPE's ``mrope_section`` (integers ≥ 1) and ``mrope_interleaved`` (bool)."""
    out: dict = {}
    if "mrope_section" in params:
        section = params["mrope_section"]
        if isinstance(section, (str, bytes, Mapping)) or not hasattr(section, "__len__") \
                or len(section) == 0 or any(isinstance(n, bool) or not isinstance(n, int)
                                            or n < 1 for n in section):
            raise ValueError(f"rope_scaling['mrope_section'] (rope_type={rope_type!r}) "
                             "must be a non-empty list of integers >= 1 (pairs per "
                             f"axis), got {section!r}")
        out["mrope_section"] = list(section)
    if "mrope_interleaved" in params:
        if not isinstance(params["mrope_interleaved"], bool):
            raise ValueError(f"rope_scaling['mrope_interleaved'] (rope_type="
                             f"{rope_type!r}) must be True or False, got "
                             f"{params['mrope_interleaved']!r}")
        out["mrope_interleaved"] = params["mrope_interleaved"]
    return out


def _factor_list(values: object, key: str) -> list[float]:
    """LongRoPE's per-pair divisors: a non-empty list of numbers > 0."""
    where = f"rope_scaling[{key!r}] (rope_type='longrope')"
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__") \
            or len(values) == 0:
        raise ValueError(f"{where} must be a non-empty list of numbers > 0 (one per "
                         f"frequency pair), got {values!r}")
    return [_number(v, key, "longrope", above=0) for v in values]


LAYER_TYPES: tuple[str, ...] = ("full_attention", "sliding_attention")
"""Layer types a nested ``rope_parameters`` may name (transformers' ``layer_types``)."""


def is_per_layer_type(rope_parameters: Mapping | None) -> bool:
    """True for transformers v5's nested form: every value is itself a dictionary."""
    return (isinstance(rope_parameters, Mapping) and len(rope_parameters) > 0
            and all(isinstance(v, Mapping) for v in rope_parameters.values()))


def normalize_rope_parameters(rope_parameters: Mapping | None, *,
                              max_position_embeddings: int | None = None) -> dict:
    """:func:`normalize_rope_scaling`, also for the nested per-layer-type form.

    ``max_position_embeddings`` is passed to it for each entry (see there).

    transformers v5 keys ``rope_parameters`` by layer type when layer types differ
    (Gemma 3: ``{"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}``).

    Returns:
        The flat form normalised, or ``{layer_type: normalised entry}`` with the
        layer types in :data:`LAYER_TYPES` order.

    Raises:
        ValueError: for a layer type not in :data:`LAYER_TYPES` (the message lists
            them), a mix of dictionaries and plain values, or a bad entry (as
            :func:`normalize_rope_scaling`, naming the layer type).

    Example:
        >>> normalize_rope_parameters({"sliding_attention": {"rope_theta": 1e4}})
        {'sliding_attention': {'rope_type': 'default', 'rope_theta': 10000.0}}
    """
    if not is_per_layer_type(rope_parameters):
        if isinstance(rope_parameters, Mapping) and any(
                isinstance(v, Mapping) for v in rope_parameters.values()):
            raise ValueError("rope_parameters mixes per-layer-type dictionaries with "
                             f"plain keys; got keys {sorted(rope_parameters)}")
        return normalize_rope_scaling(rope_parameters,
                                      max_position_embeddings=max_position_embeddings)
    unknown = sorted(set(rope_parameters) - set(LAYER_TYPES))
    if unknown:
        raise ValueError(f"rope_parameters is keyed by layer type; {unknown} not in "
                         f"the allowed layer types {LAYER_TYPES}")
    out = {}
    for layer_type in LAYER_TYPES:
        if layer_type in rope_parameters:
            try:
                out[layer_type] = normalize_rope_scaling(
                    rope_parameters[layer_type],
                    max_position_embeddings=max_position_embeddings)
            except ValueError as error:
                raise ValueError(f"rope_parameters[{layer_type!r}]: {error}") from None
    return out


def _yarn_options(params: Mapping) -> dict:
    """YaRN's optional keys, checked, with the paper's defaults (β = 32, α = 1).

    ``beta_fast``/``beta_slow`` at 0 take the defaults and ``mscale``/``mscale_all_dim``
    at 0 count as absent, as in transformers' ``_compute_yarn_parameters`` (``or 32``,
    ``if mscale and mscale_all_dim``); DeepSeek-style configs ship such zeros."""
    out = {
        "beta_fast": _number(params.get("beta_fast") or 32, "beta_fast", "yarn", above=0),
        "beta_slow": _number(params.get("beta_slow") or 1, "beta_slow", "yarn", above=0),
        "truncate": bool(params.get("truncate", True)),
    }
    if out["beta_slow"] > out["beta_fast"]:
        raise ValueError("rope_scaling needs beta_slow <= beta_fast (turns within L0), "
                         f"got beta_slow={out['beta_slow']}, "
                         f"beta_fast={out['beta_fast']}")
    if params.get("attention_factor") is not None:
        out["attention_factor"] = _number(params["attention_factor"], "attention_factor",
                                          "yarn", above=0)
    for key in ("mscale", "mscale_all_dim"):
        if params.get(key) is not None:  # 0 is kept, and read as absent
            out[key] = _number(params[key], key, "yarn", at_least=0)
    return out


def resolve_base(base: float | None, rope_scaling: Mapping | None) -> float:
    """The RoPE base: ``base`` if given, else ``rope_theta`` in the dict, else 10 000.

    Raises:
        ValueError: if both are given and differ, or the base is not > 0.
    """
    theta = None if rope_scaling is None else rope_scaling.get("rope_theta")
    if base is not None and theta is not None and float(base) != float(theta):
        raise ValueError(f"base={base} disagrees with "
                         f"rope_scaling['rope_theta']={theta}; give one of them")
    value = base if base is not None else theta if theta is not None else DEFAULT_BASE
    if not float(value) > 0:
        raise ValueError(f"base must be > 0, got base={value}")
    return float(value)


def _base_frequencies(head_dim: int, base: float) -> Tensor:
    """θ_i = base^(−2i/d) in float64, ``[head_dim // 2]`` (rope.py's expression)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return base ** -exponents


def dynamic_ntk_base(base: float, head_dim: int, factor: float, seq_len: int,
                     original_length: int) -> float:
    """The NTK-aware base at length L: base·(f·L/L0 − (f − 1))^(d/(d−2)) if L > L0.

    f is ``factor`` (Hugging Face's ``rope_scaling["factor"]``): not the stretch itself, but
    the coefficient of the running stretch L/L0; f = 1 stretches by exactly L/L0. At L = L0
    this is ``base``, and it grows with L. The exponent d/(d−2) stretches
    the slowest pair's wavelength by exactly the bracket while the fastest pair
    (θ_0 = 1) stays put (bloc97 2023; emozilla 2023 made the bracket depend on L).

    Returns:
        The base to use (``base`` itself when ``seq_len <= original_length``).
    """
    if seq_len <= original_length:
        return base
    return base * dynamic_stretch(factor, seq_len, original_length) ** (head_dim / (head_dim - 2))


def dynamic_stretch(factor: float, seq_len: int, original_length: int) -> float:
    """Dynamic NTK's stretch κ at length L: f·L/L0 − (f − 1) past L0, 1 within it.

    transformers' dynamic rule (emozilla 2023), with f its ``factor``: inside the
    trained context RoPE is unchanged; f = 1 stretches by exactly L/L0. This is the
    stretch of the slowest pair's wavelength under :func:`dynamic_ntk_base`.

    Args:
        factor: f ≥ 1.
        seq_len: L, the current length (positions).
        original_length: L0, the trained context (positions).

    Returns:
        κ ≥ 1 (a float).

    Example:
        >>> dynamic_stretch(2.0, 16384, 8192)
        3.0
    """
    if seq_len <= original_length:
        return 1.0
    return factor * seq_len / original_length - (factor - 1)


def yarn_correction_pair(turns: float, head_dim: int, base: float,
                         original_length: int) -> float:
    """The (fractional) pair index i whose wavelength fits ``turns`` times in L0.

    Solves L0 / λ_i = turns with λ_i = 2π·base^(2i/d):
    i = d·ln(L0 / (2π·turns)) / (2·ln base): Peng et al. 2023's ramp bounds, in pairs.
    """
    fits = original_length / (turns * 2 * math.pi)
    return head_dim * math.log(fits) / (2 * math.log(base))


def static_ntk_base(base: float, head_dim: int, factor: float) -> float:
    """The static NTK-aware base, base · κ^(d/(d−2)) (bloc97 2023).

    The slowest pair's wavelength grows by exactly κ, the fastest pair (θ_0 = 1)
    keeps its frequency, and the pairs between interpolate geometrically.
    """
    return base * factor ** (head_dim / (head_dim - 2))


def longrope_attention_factor(params: Mapping) -> float:
    """LongRoPE's cos/sin scale: ``attention_factor`` if given, else
    √(1 + ln κ / ln L0) for κ > 1 and 1 otherwise (Ding et al. 2024; as Phi-3's code
    and transformers' ``_compute_longrope_parameters``)."""
    if params.get("attention_factor") is not None:
        return float(params["attention_factor"])
    factor, original_length = params["factor"], params[_L0]
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(factor) / math.log(original_length))


def yarn_attention_factor(params: Mapping) -> float:
    """YaRN's q/k scale: ``attention_factor`` if given, else 0.1·ln κ + 1.

    Peng et al. 2023 (their √(1/t)); with DeepSeek's ``mscale`` and
    ``mscale_all_dim`` it is the ratio of two such terms, as in transformers.
    """
    if params.get("attention_factor") is not None:
        return float(params["attention_factor"])
    factor = params["factor"]

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if params.get("mscale") and params.get("mscale_all_dim"):
        top, bottom = params["mscale"], params["mscale_all_dim"]
        return mscale(factor, top) / mscale(factor, bottom)
    return mscale(factor)


def rope_scaled_frequencies(
    head_dim: int,
    base: float | None = None,
    rope_scaling: Mapping | None = None,
    seq_len: int | None = None,
    *,
    max_position_embeddings: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, float]:
    """RoPE's frequencies θ′_i after a context-extension method, and its q/k scale.

    Computed in float64 and rounded once to ``dtype``, so ``{"rope_type": "default"}``
    gives exactly :func:`~posenc_lib.encodings.rope.rope_inverse_frequencies`. For a
    dictionary as a transformers 5.23 config holds it this is what
    ``ROPE_INIT_FUNCTIONS[rope_type](config, device, seq_len)`` (or the model's
    ``compute_default_rope_parameters``) returns, up to float32 rounding.

    Args:
        head_dim: the head width d, even; ≥ 4 for ``dynamic`` and ``ntk`` (their
            exponent d/(d−2)), ≥ 2 otherwise. With ``partial_rotary_factor`` f in
            ``rope_scaling`` the frequencies are those of a head of width
            r = ⌊f·d⌋ (:func:`~posenc_lib.encodings.rope_partial.neox_rotary_dim`), as
            transformers' ``dim = int(head_dim * partial_rotary_factor)``; without it,
            pass the rotated width (``rotary_dim``) here.
        base: θ_i = base^(−2i/d); ``None`` takes ``rope_scaling["rope_theta"]`` or
            10 000.
        rope_scaling: a dictionary as in the module docstring, or None (default).
        seq_len: the current input length L (largest position + 1); only ``dynamic``
            and ``longrope`` use it, and only when L > ``original_max_position_embeddings``
            (``longrope`` then takes ``long_factor``; None or L ≤ L0: ``short_factor``).
        max_position_embeddings: passed to :func:`normalize_rope_scaling` (LongRoPE's
            derived ``factor``, a missing L0).
        dtype: float32 (as the models) or float64 (a reference).

    Returns:
        ``(inv_freq, attention_factor)``: ``[r // 2]`` (``[head_dim // 2]`` without
        ``partial_rotary_factor`` and for ``proportional``) in ``dtype``, radians per
        position; and a float that multiplies cos and sin (so q and k; the logits get
        its square): 1.0 for every method but YaRN and LongRoPE.

    Raises:
        ValueError: as :func:`normalize_rope_scaling`; for an odd or too small
            ``head_dim`` or rotated width, a base ≤ 0 or one that disagrees with
            ``rope_theta``, or ``seq_len`` < 1, or (``longrope``) factor lists whose
            length is not the number of rotated pairs.

    Example:
        >>> rope_scaled_frequencies(4, 100.0, {"rope_type": "linear", "factor": 2})
        (tensor([0.5000, 0.0500]), 1.0)
        >>> rope_scaled_frequencies(8, 16.0, {"partial_rotary_factor": 0.5})[0]
        tensor([1.0000, 0.2500])
    """
    params = normalize_rope_scaling(rope_scaling,
                                    max_position_embeddings=max_position_embeddings)
    rope_type = params["rope_type"]
    smallest = 4 if rope_type in ("dynamic", "ntk") else 2
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) \
            or head_dim < smallest or head_dim % 2:
        raise ValueError(f"head_dim must be an even integer >= {smallest} for "
                         f"rope_type={rope_type!r}, got head_dim={head_dim}")
    if seq_len is not None and (isinstance(seq_len, bool)
                                or not isinstance(seq_len, int) or seq_len < 1):
        raise ValueError("seq_len must be an integer >= 1 or None, "
                         f"got seq_len={seq_len!r}")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    base = resolve_base(base, params)
    fraction = params.get("partial_rotary_factor", 1.0)
    if rope_type != "proportional" and fraction != 1.0:
        head_dim = neox_rotary_dim(head_dim, fraction)  # the rotated width r
        if head_dim < smallest:
            raise ValueError(f"partial_rotary_factor={fraction} rotates {head_dim} "
                             f"dimensions; rope_type={rope_type!r} needs >= {smallest}")
    theta = _base_frequencies(head_dim, base)  # (d/2,) float64
    attention_factor = 1.0
    if rope_type == "linear":
        theta = theta / params["factor"]
    elif rope_type == "dynamic" and seq_len is not None:
        factor, original_length = params["factor"], params[_L0]
        ntk_base = dynamic_ntk_base(base, head_dim, factor, seq_len, original_length)
        theta = _base_frequencies(head_dim, ntk_base)
    elif rope_type == "yarn":
        theta = _yarn(theta, head_dim, base, params)
        attention_factor = yarn_attention_factor(params)
    elif rope_type == "llama3":
        theta = _llama3(theta, params)
    elif rope_type == "ntk":
        theta = _base_frequencies(head_dim, static_ntk_base(base, head_dim,
                                                            params["factor"]))
    elif rope_type == "longrope":
        long = seq_len is not None and seq_len > params[_L0]
        key = "long_factor" if long else "short_factor"
        divisors = params[key]
        if len(divisors) != head_dim // 2:
            raise ValueError(f"rope_scaling[{key!r}] needs one entry per frequency pair "
                             f"(head_dim/2 = {head_dim // 2}), got {len(divisors)}")
        theta = theta / torch.tensor(divisors, dtype=torch.float64)
        attention_factor = longrope_attention_factor(params)
    elif rope_type == "proportional":
        theta[p_rope_kept_pairs(head_dim, fraction):] = 0.0  # p-RoPE: slow pairs off
        theta = theta / params.get("factor", 1.0)
    return theta.to(dtype), attention_factor


def _yarn(theta: Tensor, head_dim: int, base: float, params: Mapping) -> Tensor:
    """θ_i for pairs that turn often within L0, θ_i/κ for those that turn rarely."""
    low = yarn_correction_pair(params["beta_fast"], head_dim, base, params[_L0])
    high = yarn_correction_pair(params["beta_slow"], head_dim, base, params[_L0])
    if params["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    # Clamped as transformers does (its upper clamp is head_dim − 1, not the last pair).
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # a step instead of a ramp; avoids dividing by zero
    pairs = torch.arange(head_dim // 2, dtype=torch.float64)
    # 0 up to pair `low` (keep θ_i), 1 from pair `high` on (θ_i/κ), a ramp between
    interpolate = ((pairs - low) / (high - low)).clamp(0, 1)
    return theta / params["factor"] * interpolate + theta * (1 - interpolate)


def _llama3(theta: Tensor, params: Mapping) -> Tensor:
    """Keep short wavelengths, divide long ones by κ, blend linearly in between."""
    factor, original_length = params["factor"], params[_L0]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    wavelength = 2 * math.pi / theta
    long_band = wavelength > original_length / low  # rarely or never turns within L0
    short_band = wavelength < original_length / high  # turns many times within L0
    smooth = (original_length / wavelength - low) / (high - low)  # 0 long edge, 1 short
    blended = (1 - smooth) * theta / factor + smooth * theta
    kept_or_blended = torch.where(short_band, theta, blended)
    return torch.where(long_band, theta / factor, kept_or_blended)


# ------------------------------------------------------------- the book's methods

STRETCH_METHODS: tuple[str, ...] = ("none", "linear", "dynamic", "yarn", "llama3")
"""The context-extension methods the book compares, in its order (``none``: plain RoPE)."""


def method_scaling(method: str, factor: float, original_length: int) -> dict | None:
    """The ``rope_scaling`` dictionary of a method with Hugging Face's ``factor``.

    ``factor`` is the stretch κ for ``linear``, ``yarn`` and ``llama3``; for ``dynamic``
    it is Hugging Face's coefficient of the running stretch, factor · L / L0 −
    (factor − 1) at length L > L0 (see :func:`dynamic_ntk_base`). To set a method for a
    stretch κ, use :func:`stretch_scaling`.

    ``llama3`` uses Llama 3.1's bands (low_freq_factor 1, high_freq_factor 4); ``yarn``
    the paper's β = 32, α = 1 (Peng et al. 2023); ``dynamic`` acts past L0 only.

    Args:
        method: one of :data:`STRETCH_METHODS`.
        factor: ≥ 1 (see above).
        original_length: L0, the trained context (positions).

    Returns:
        The normalised dictionary (:func:`normalize_rope_scaling`), or None for ``none``.

    Raises:
        ValueError: for an unknown method or a factor below 1.

    Example:
        >>> method_scaling("linear", 2, 128)
        {'rope_type': 'linear', 'factor': 2.0}
    """
    if method not in STRETCH_METHODS:
        raise ValueError(f"method must be one of {STRETCH_METHODS}, got method={method!r}")
    if not factor >= 1:
        raise ValueError(f"factor must be >= 1 (a stretch of the context), "
                         f"got factor={factor}")
    l0 = {_L0: original_length}
    scaling = {
        "none": None,
        "linear": {"rope_type": "linear", "factor": factor},
        "dynamic": {"rope_type": "dynamic", "factor": factor, **l0},
        "yarn": {"rope_type": "yarn", "factor": factor, "beta_fast": 32,
                 "beta_slow": 1, **l0},
        "llama3": {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, **l0},
    }[method]
    return None if scaling is None else normalize_rope_scaling(scaling)


def stretch_scaling(method: str, kappa: float, original_length: int) -> dict | None:
    """A method set for a window of κ · L0: the book's rule (chapter 11).

    PI, YaRN and Llama 3 take ``factor`` κ. Dynamic NTK takes ``factor`` 1 whatever κ:
    its stretch is then L / L0 at length L, so κ at length κ · L0, and it leaves RoPE
    unchanged inside the trained context (emozilla 2023; transformers' dynamic rule).

    Args:
        method: one of :data:`STRETCH_METHODS`.
        kappa: the stretch κ ≥ 1 (e.g. ``max(1, L / L0)`` for evaluation at length L).
        original_length: L0, the trained context (positions).

    Returns:
        :func:`method_scaling`'s dictionary, or None for ``none``.

    Raises:
        ValueError: for an unknown method or κ below 1.

    Example:
        >>> stretch_scaling("dynamic", 4, 128)["factor"]
        1.0
    """
    if not kappa >= 1:
        raise ValueError(f"kappa must be >= 1 (a stretch of the context), got kappa={kappa}")
    return method_scaling(method, 1.0 if method == "dynamic" else float(kappa), original_length)


def critical_pair_index(inverse_frequencies: Tensor, context_length: int) -> int:
    """The critical pair i_c: the first pair that completes no full turn in training.

    Pair i turns through (L_train − 1)·θ_i radians across a training window; i_c is the
    first pair with (L_train − 1)·θ_i < 2π (chapter 10). Distances r ≥ L_train give it
    angles r·θ_{i_c} it never saw (up to r = λ_{i_c}, where it comes round). The pairs
    are taken in the order given (fastest first for RoPE's θ_i = base^(−2i/d)).

    Args:
        inverse_frequencies: ``[d/2]`` θ_i in radians per position (any float dtype; the
            turns are computed in float64), e.g. ``rope_inverse_frequencies(d, base)``.
        context_length: L_train (positions).

    Returns:
        i_c, an index into ``inverse_frequencies``.

    Raises:
        ValueError: if every pair completes a turn (no critical pair).

    Example:
        >>> critical_pair_index(torch.tensor([1.0, 0.1, 0.001]), 128)
        2
    """
    turns = (context_length - 1) * inverse_frequencies.double() / (2 * math.pi)
    short = (turns < 1).nonzero()
    if not len(short):
        raise ValueError("every pair completes a turn within the context: no critical "
                         f"pair (context_length={context_length})")
    return int(short[0])


def pair_stretch(rope_scaling: dict | None, head_dim: int, base: float, seq_len: int
                 ) -> torch.Tensor:
    """How much a scaling stretches each pair's wavelength at length ``seq_len``.

    Args:
        rope_scaling: a Hugging Face dictionary (:func:`method_scaling`), or None.
        head_dim: the head width d (even).
        base: the RoPE base.
        seq_len: the length of the pass (dynamic NTK takes its stretch from it).

    Returns:
        float32 ``[d/2]``: θ_i / θ'_i (1: pair kept; κ: stretched by κ).

    Raises:
        ValueError: from :func:`rope_scaled_frequencies`, naming a bad argument.
    """
    from posenc_lib.encodings.rope import rope_inverse_frequencies  # rope imports us

    scaled, _ = rope_scaled_frequencies(head_dim, base, rope_scaling, seq_len=seq_len)
    return rope_inverse_frequencies(head_dim, base) / scaled


def unseen_distance_share(position: int, context_length: int) -> float:
    """Share of a query's keys s ≤ t at distances t − s ≥ L_train (never seen in training).

    Args:
        position: the query's position t ≥ 0.
        context_length: L_train, the trained context.

    Raises:
        ValueError: for a negative position or a context length below 1.
    """
    if position < 0 or context_length < 1:
        raise ValueError(f"need position >= 0 and context_length >= 1, got "
                         f"position={position}, context_length={context_length}")
    return max(0, position - context_length + 1) / (position + 1)


def last_unseen_distances(inverse_frequencies: torch.Tensor, context_length: int,
                          longest: int) -> dict[int, int]:
    """For each pair that never turned fully in training, the last unseen distance.

    A pair i from the critical pair on saw the angles r θ_i for r < L_train only, an arc
    short of a turn; a distance r ≥ L_train gives an angle outside it while r < λ_i
    (past λ_i it comes round to the arc). Cut at ``longest``, the longest distance
    scored.

    Args:
        inverse_frequencies: θ_i, ``[d/2]``.
        context_length: L_train.
        longest: the longest distance in the text (its length − 1).

    Returns:
        ``{i: min(⌈λ_i⌉ − 1, longest)}`` for every pair i from the critical pair on.
    """
    theta = inverse_frequencies.double()
    first = critical_pair_index(theta, context_length)
    return {i: min(math.ceil(2 * math.pi / theta[i].item()) - 1, longest)
            for i in range(first, len(theta))}


def ntk_turn_margin(kappa: float, wavelength: float, pair: int, head_dim: int,
                    context_length: int) -> float:
    """How far NTK-aware scaling at κ keeps pair i from a full turn within κ·L_train.

    NTK-aware scaling stretches pair i's wavelength to λ'_i = λ_i·κ^(2i/(d−2)) (the
    fastest pair kept, the slowest stretched by κ; :func:`dynamic_ntk_base`). The pair
    completes a full turn within a window of κ·L_train positions when λ'_i ≤ κ·L_train − 1.

    Args:
        kappa: the stretch κ ≥ 1.
        wavelength: λ_i, the unscaled wavelength in positions.
        pair: i, from 0 (fastest) to d/2 − 1.
        head_dim: d (even).
        context_length: L_train (positions).

    Returns:
        λ'_i − (κ·L_train − 1) in positions: > 0 while the pair completes no full turn.

    Raises:
        ValueError: for κ < 1 or a pair outside 0 … d/2 − 1 (named in the message).
    """
    if kappa < 1:
        raise ValueError(f"kappa must be >= 1, got kappa={kappa}")
    if not 0 <= pair < head_dim // 2:
        raise ValueError(f"pair must lie in 0 … {head_dim // 2 - 1}, got pair={pair}")
    return wavelength * kappa ** (2 * pair / (head_dim - 2)) - (kappa * context_length - 1)


def ntk_full_turn_stretch(wavelength: float, pair: int, head_dim: int,
                          context_length: int, low: float, high: float) -> float:
    """The stretch κ from which NTK-aware scaling's pair i turns fully within κ·L_train.

    Bisection (60 halvings) of :func:`ntk_turn_margin` between ``low`` and ``high``.

    Args:
        wavelength, pair, head_dim, context_length: as in :func:`ntk_turn_margin`.
        low, high: stretches on either side of the change: no full turn at ``low``
            (margin > 0), a full turn at ``high`` (margin ≤ 0).

    Returns:
        κ_c, the middle of the last bracket (within 2^−60·(high − low) of the change).

    Raises:
        ValueError: if the margin does not change sign between ``low`` and ``high``.
    """
    def margin(kappa: float) -> float:
        return ntk_turn_margin(kappa, wavelength, pair, head_dim, context_length)

    if not margin(low) > 0 >= margin(high):
        raise ValueError(f"need no full turn at low and one at high, got low={low}, "
                         f"high={high} (margins {margin(low):g}, {margin(high):g})")
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if margin(middle) > 0 else (low, middle)
    return (low + high) / 2


YARN_PARTS = ("ramp", "temperature", "paper ramp")
"""The parts of YaRN that :func:`yarn_part_scaling` sets apart."""


def yarn_part_scaling(part: str, kappa: float, original_length: int) -> dict:
    """A ``rope_scaling`` dictionary with one part of YaRN at stretch κ (chapter 11).

    ``"ramp"``: YaRN's frequencies (the code's ramp, linear in the pair index) without
    its q/k factor (``attention_factor`` 1). ``"temperature"``: the q/k factor
    0.1·ln κ + 1 with the frequencies unchanged (factor 1). ``"paper ramp"``: Peng et
    al.'s ramp, linear in the turn count r_i = L_train/λ_i between 1 and 32 turns, as
    Llama 3's band rule with ``low_freq_factor`` 1 and ``high_freq_factor`` 32, no q/k
    factor.

    Args:
        part: one of :data:`YARN_PARTS`.
        kappa: the stretch κ ≥ 1.
        original_length: L_train (positions).

    Raises:
        ValueError: for an unknown part or κ < 1 (named in the message).
    """
    if part not in YARN_PARTS:
        raise ValueError(f"part must be one of {YARN_PARTS}, got part={part!r}")
    if not kappa >= 1:
        raise ValueError(f"kappa must be >= 1, got kappa={kappa}")
    if part == "ramp":
        return {**method_scaling("yarn", kappa, original_length), "attention_factor": 1.0}
    if part == "temperature":
        return {**method_scaling("yarn", 1.0, original_length),
                "attention_factor": 0.1 * math.log(kappa) + 1}
    return {**method_scaling("llama3", kappa, original_length),
            "low_freq_factor": 1.0, "high_freq_factor": 32.0}
