"""Sinusoidal absolute positional encoding (Vaswani et al. 2017, §3.5)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

SinusoidalLayout = Literal["interleaved", "concatenated"]


def sinusoidal_encoding(
    num_positions: int,
    d_model: int,
    base: float = 10000.0,
    *,
    layout: SinusoidalLayout = "interleaved",
) -> Tensor:
    """The fixed sinusoidal position table.

    ``layout="interleaved"`` is the paper's (Vaswani et al. 2017, §3.5)::

        PE[p, 2i]   = sin(p / base^(2i / d_model))
        PE[p, 2i+1] = cos(p / base^(2i / d_model))      for i = 0 … d_model/2 − 1

    ``layout="concatenated"`` is tensor2tensor's and fairseq's ``[sin | cos]`` table, which
    also spaces the frequencies slightly differently::

        PE[p, i]             = sin(p · base^(−i / (d_model/2 − 1)))
        PE[p, d_model/2 + i] = cos(p · base^(−i / (d_model/2 − 1)))

    The angles p·ω_i are formed in float64 and only the sines and cosines are rounded to
    float32, so the table stays accurate at large p (a float32 angle near p = 10 000 is
    already off by ~5e-4 rad).

    Args:
        num_positions: number of positions P (rows), positions 0 … P−1; must be ≥ 0.
        d_model: model width (columns); must be even and ≥ 2 (≥ 4 for ``"concatenated"``,
            whose exponent divides by d_model/2 − 1).
        base: the wavelength base; wavelengths run from 2π to base·2π. Must be > 0.
        layout: ``"interleaved"`` (the paper) or ``"concatenated"`` (tensor2tensor/fairseq).

    Returns:
        Tensor ``[num_positions, d_model]``, float32, on the CPU.

    Raises:
        ValueError: if ``d_model`` is odd or too small, ``num_positions`` is negative,
            ``base`` is not positive, or ``layout`` is unknown.

    Example:
        >>> sinusoidal_encoding(4, 8).shape
        torch.Size([4, 8])
    """
    if d_model < 2 or d_model % 2 != 0:
        raise ValueError(f"d_model must be even and >= 2 (sin/cos pairs), got d_model={d_model}")
    if num_positions < 0:
        raise ValueError(f"num_positions must be >= 0, got num_positions={num_positions}")
    if base <= 0:
        raise ValueError(f"base must be > 0, got base={base}")
    half = d_model // 2
    positions = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
    i = torch.arange(half, dtype=torch.float64)  # (d/2,)
    if layout == "interleaved":
        frequencies = base ** (-2.0 * i / d_model)
        angles = positions * frequencies  # (P, d/2)
        table = torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(num_positions, d_model)
    elif layout == "concatenated":
        if half < 2:
            raise ValueError(f"layout='concatenated' needs d_model >= 4, got d_model={d_model}")
        frequencies = base ** (-i / (half - 1))
        angles = positions * frequencies  # (P, d/2)
        table = torch.cat([angles.sin(), angles.cos()], dim=-1)  # (P, d)
    else:
        raise ValueError(f"layout must be 'interleaved' or 'concatenated', got layout={layout!r}")
    return table.to(torch.float32)
