"""Positions of the tokens of a batch: read off a padding mask, and checked where they are given."""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor


def require_int(value: object, name: str, minimum: int | None = 0) -> None:
    """Raise unless ``value`` is an integer ≥ ``minimum`` (a bool is not an integer here).

    ``minimum=None`` checks the type only (the caller checks the range).

    Raises:
        TypeError: for a non-integer (``10.5``, ``"4"``, a tensor), naming ``name``.
        ValueError: for an integer below ``minimum``, naming ``name`` and the range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        wanted = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise TypeError(f"{name} must be {wanted}, got {name}={value!r} "
                        f"({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {name}={value}")


def require_number(value: object, where: str, *, finite: bool = False,
                   above: float | None = None, at_least: float | None = None) -> float:
    """``value`` as a float, checked: a real number (not a bool), finite if ``finite``,
    > ``above`` and ≥ ``at_least`` where given.

    Args:
        value: the value to check.
        where: how the error names it, e.g. ``"rope_scaling['factor'] (rope_type='yarn')"``.

    Raises:
        ValueError: naming ``where``, for a non-number (or a non-finite one when ``finite``),
            or a number outside the range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (finite and not math.isfinite(value)):
        raise ValueError(f"{where} must be a {'finite ' if finite else ''}number, got {value!r}")
    if above is not None and not value > above:
        raise ValueError(f"{where} must be > {above:g}, got {value!r}")
    if at_least is not None and not value >= at_least:
        raise ValueError(f"{where} must be >= {at_least:g}, got {value!r}")
    return float(value)


def require_tensor(value: object, name: str, shape: str) -> None:
    """Raise a TypeError unless ``value`` is a tensor (e.g. not a Python list)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor {shape}, got {type(value).__name__}")


def positions_from_mask(attention_mask: Tensor) -> Tensor:
    """Token positions read off a padding mask: ``cumsum(mask) − 1``, 0 at the pads.

    In a left-padded batch the first real token of every sequence sits at a different column;
    its position must still be 0, so positions come from the mask, not from ``arange``.

    Args:
        attention_mask: ``[batch, seq]``, 1/True for a real token, 0/False for a pad (bool or
            integer).

    Returns:
        int64 ``[batch, seq]``: 0, 1, 2, … over the real tokens of each row, 0 at pads.

    Raises:
        TypeError: if the mask is not a tensor.
        ValueError: if the mask is not 2-D or holds values other than 0 and 1.

    Example:
        >>> positions_from_mask(torch.tensor([[0, 0, 1, 1, 1]]))
        tensor([[0, 0, 0, 1, 2]])
    """
    require_tensor(attention_mask, "attention_mask", "[batch, seq]")
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must be [batch, seq], got shape {tuple(attention_mask.shape)}")
    mask = attention_mask.long()
    if mask.numel() and not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("attention_mask must hold only 0/1 (or False/True)")
    return (mask.cumsum(-1) - 1).clamp(min=0) * mask  # (B, S)


def check_positions(positions: Tensor, batch: int, seq: int) -> None:
    """Raise a ValueError unless ``positions`` are integers shaped ``[seq]`` or ``[batch, seq]``.

    Raises:
        TypeError: if positions is not a tensor (e.g. a Python list).
        ValueError: naming the dtype or the shape that was expected.
    """
    require_tensor(positions, "positions", "of integers, [seq] or [batch, seq]")
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
    if positions.shape not in ((seq,), (batch, seq)):
        raise ValueError(f"positions must be [seq={seq}] or [batch={batch}, seq={seq}], "
                         f"got shape {tuple(positions.shape)}")


def randomized_positions(batch: int, length: int, position_range: int,
                         generator: torch.Generator | None = None) -> Tensor:
    """Randomized positions (Ruoss et al. 2023, "Randomized positional encodings boost
    length generalization", §3): for each of ``batch`` sequences, ``length`` positions
    drawn without replacement from 0 … ``position_range`` − 1 and sorted, so the order is
    kept while the values cover the whole range.

    Args:
        batch, length: B and L ≥ 1.
        position_range: M ≥ L.
        generator: the torch generator that draws them (reproducible runs).

    Returns:
        int64 ``[B, L]``, increasing along each row.

    Raises:
        TypeError, ValueError: if B or L is not an integer ≥ 1, or M is not an integer ≥ L.
    """
    require_int(batch, "batch", 1)
    require_int(length, "length", 1)
    require_int(position_range, "position_range", length)
    return torch.stack([torch.randperm(position_range, generator=generator)[:length].sort().values
                        for _ in range(batch)])  # (B, L)
