"""Positions of the tokens of a batch: read off a padding mask, and checked where they are given."""

from __future__ import annotations

import torch
from torch import Tensor


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
        ValueError: if the mask is not 2-D or holds values other than 0 and 1.

    Example:
        >>> positions_from_mask(torch.tensor([[0, 0, 1, 1, 1]]))
        tensor([[0, 0, 0, 1, 2]])
    """
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must be [batch, seq], got shape {tuple(attention_mask.shape)}")
    mask = attention_mask.long()
    if mask.numel() and not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("attention_mask must hold only 0/1 (or False/True)")
    return (mask.cumsum(-1) - 1).clamp(min=0) * mask  # (B, S)


def check_positions(positions: Tensor, batch: int, seq: int) -> None:
    """Raise a ValueError unless ``positions`` are integers shaped ``[seq]`` or ``[batch, seq]``.

    Raises:
        ValueError: naming the dtype or the shape that was expected.
    """
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
    if positions.shape not in ((seq,), (batch, seq)):
        raise ValueError(f"positions must be [seq={seq}] or [batch={batch}, seq={seq}], got shape {tuple(positions.shape)}")
