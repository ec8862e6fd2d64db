"""Sinusoidal absolute positional encoding (Vaswani et al. 2017, §3.5)."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from posenc_lib.encodings.positions import require_int

SinusoidalLayout = Literal["interleaved", "concatenated"]


ANGLE_DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)
"""Dtypes in which :func:`sinusoidal_encoding` can form its angles (float64 is the library's)."""


def sinusoidal_frequencies(
    d_model: int,
    base: float = 10000.0,
    *,
    layout: SinusoidalLayout = "interleaved",
) -> Tensor:
    """The angle per position of each (sin, cos) pair, in radians.

    ``layout="interleaved"`` gives the paper's ω_i = base^(−2i/d_model) (Vaswani et al. 2017,
    §3.5); ``layout="concatenated"`` gives tensor2tensor's and fairseq's
    ω_i = base^(−i/(d_model/2 − 1)), whose slowest pair has a wavelength of exactly
    2π·base. In both, i = 0 … d_model/2 − 1 and ω_0 = 1.

    Args:
        d_model: model width; must be even and ≥ 2 (≥ 4 for ``"concatenated"``).
        base: the wavelength base; must be > 0.
        layout: ``"interleaved"`` (the paper) or ``"concatenated"`` (tensor2tensor/fairseq).

    Returns:
        Tensor ``[d_model // 2]``, float64, radians per position, decreasing from 1 (for
        base > 1). The wavelengths are λ_i = 2π/ω_i positions.

    Raises:
        ValueError: if ``d_model`` is odd or too small, ``base`` is not positive, or
            ``layout`` is unknown.

    Example:
        >>> sinusoidal_frequencies(4, base=100.0)
        tensor([1.0000, 0.1000], dtype=torch.float64)
    """
    if d_model < 2 or d_model % 2 != 0:
        raise ValueError(f"d_model must be even and >= 2 (sin/cos pairs), got d_model={d_model}")
    if base <= 0:
        raise ValueError(f"base must be > 0, got base={base}")
    half = d_model // 2
    i = torch.arange(half, dtype=torch.float64)  # (d/2,)
    if layout == "interleaved":
        return base ** (-2.0 * i / d_model)
    if layout == "concatenated":
        if half < 2:
            raise ValueError(f"layout='concatenated' needs d_model >= 4, got d_model={d_model}")
        return base ** (-i / (half - 1))
    raise ValueError(f"layout must be 'interleaved' or 'concatenated', got layout={layout!r}")


def sinusoidal_encoding(
    num_positions: int,
    d_model: int,
    base: float = 10000.0,
    *,
    layout: SinusoidalLayout = "interleaved",
    angle_dtype: torch.dtype = torch.float64,
    start: int = 0,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """The fixed sinusoidal position table (rows ``start`` … ``start + num_positions − 1``).

    ``layout="interleaved"`` is the paper's (Vaswani et al. 2017, §3.5)::

        PE[p, 2i]   = sin(p / base^(2i / d_model))
        PE[p, 2i+1] = cos(p / base^(2i / d_model))      for i = 0 … d_model/2 − 1

    ``layout="concatenated"`` is tensor2tensor's and fairseq's ``[sin | cos]`` table, which
    also spaces the frequencies slightly differently::

        PE[p, i]             = sin(p · base^(−i / (d_model/2 − 1)))
        PE[p, d_model/2 + i] = cos(p · base^(−i / (d_model/2 − 1)))

    The angles p·ω_i are formed in float64 and only the sines and cosines are rounded to
    float32, so the table stays accurate at large p (a float32 angle near p = 10 000 is
    already off by ~5e-4 rad). ``angle_dtype`` forms them in a lower precision instead, as
    a model that computed its table in that dtype would: positions and frequencies are
    rounded to ``angle_dtype`` and multiplied there; the sine and cosine of that rounded
    angle are then taken in float64. It exists to measure what low precision costs
    (float16 cannot even hold a position above 65 504: those rows come out NaN).

    Args:
        num_positions: number of positions P (rows), positions 0 … P−1; must be ≥ 0.
        d_model: model width (columns); must be even and ≥ 2 (≥ 4 for ``"concatenated"``,
            whose exponent divides by d_model/2 − 1).
        base: the wavelength base; wavelengths run from 2π to base·2π. Must be > 0.
        layout: ``"interleaved"`` (the paper) or ``"concatenated"`` (tensor2tensor/fairseq).
        angle_dtype: the dtype in which p·ω_i is formed, one of :data:`ANGLE_DTYPES`;
            float64 (the default) is the library's choice.
        start: the first position (row) of the table; must be ≥ 0. A block of rows far
            out, without the rows before it.
        dtype: the dtype of the returned table: float32 (the default, what a model adds)
            or float64 (the sines and cosines unrounded, to measure an angle's error).

    Returns:
        Tensor ``[num_positions, d_model]``, ``dtype``, on the CPU.

    Raises:
        TypeError: if ``num_positions`` or ``d_model`` is not an integer.
        ValueError: if ``d_model`` is odd or too small, ``num_positions`` is negative,
            ``base`` is not positive, ``layout`` is unknown, or ``angle_dtype`` is not one
            of :data:`ANGLE_DTYPES`, ``start`` is negative, or ``dtype`` is neither
            float32 nor float64.

    Example:
        >>> sinusoidal_encoding(4, 8).shape
        torch.Size([4, 8])
    """
    require_int(num_positions, "num_positions")
    require_int(d_model, "d_model", minimum=None)  # sinusoidal_frequencies: even, >= 2
    if angle_dtype not in ANGLE_DTYPES:
        raise ValueError(f"angle_dtype must be one of {ANGLE_DTYPES}, got angle_dtype={angle_dtype}")
    require_int(start, "start")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got dtype={dtype}")
    frequencies = sinusoidal_frequencies(d_model, base, layout=layout)  # (d/2,), float64
    positions = torch.arange(start, start + num_positions, dtype=torch.float64)[:, None]
    angles = positions.to(angle_dtype) * frequencies.to(angle_dtype)  # (P, d/2), in angle_dtype
    angles = angles.double()
    if layout == "interleaved":
        # (P, d/2, 2) -> (P, d): columns 2i, 2i+1 hold sin, cos of pair i
        table = torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(num_positions, d_model)
    else:
        table = torch.cat([angles.sin(), angles.cos()], dim=-1)  # (P, d): [sin | cos]
    return table.to(dtype)


FREQUENCY_FORMS = ("base^(-2i/d)", "exp(-2i ln(base)/d)", "float64 ω_i, rounded once")
"""Three ways to compute the interleaved ω_i = base^(−2i/d_model) in a low precision: the
power form (the base held in that dtype), the exp-log form of the Annotated Transformer
(its exponent formed in that dtype too), and the float64 value rounded once."""


def frequency_form_errors(d_model: int, base: float, dtype: torch.dtype, form: str,
                          spans: tuple[int, ...] = ()) -> dict:
    """What computing ω_i in ``dtype`` by one of :data:`FREQUENCY_FORMS` costs.

    Args:
        d_model: model width; even, ≥ 2.
        base: the wavelength base, > 0.
        dtype: the dtype ω_i is formed in (and the angles p·ω_i, for ``spans``).
        form: one of :data:`FREQUENCY_FORMS`.
        spans: largest positions p to measure the angle error up to.

    Returns:
        ``{"ω_i": largest relative error of ω_i, span: largest |p·ω_i formed in dtype −
        p·ω_i in float64| over p = 0 … span, in radians, for each span}`` (floats). A
        base that ``dtype`` cannot hold becomes inf in the power form, so ω_i = 0 past
        i = 0 (relative error 1).

    Raises:
        ValueError: for an unknown ``form``, or as :func:`sinusoidal_frequencies`.
    """
    if form not in FREQUENCY_FORMS:
        raise ValueError(f"form must be one of {FREQUENCY_FORMS}, got form={form!r}")
    reference = sinusoidal_frequencies(d_model, base)  # [d/2], float64
    two_i = torch.arange(0, d_model, 2, dtype=dtype)
    if form == FREQUENCY_FORMS[0]:
        freq = torch.tensor(base, dtype=dtype) ** (-two_i / d_model)  # base held in dtype
    elif form == FREQUENCY_FORMS[1]:
        freq = torch.exp(two_i * (-math.log(base) / d_model))
    else:
        freq = reference.to(dtype)
    errors = {"ω_i": float(((freq.double() - reference) / reference).abs().max())}
    for span in spans:
        p = torch.arange(span + 1, dtype=torch.float64)
        formed = (p.to(dtype)[:, None] * freq).double()
        errors[span] = float((formed - p[:, None] * reference).abs().max())
    return errors
