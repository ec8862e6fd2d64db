"""Geometry of a position table: how far the rows past L_train lie from the rows trained on.

A model trained on windows of L_train tokens has seen only rows 0 … L_train − 1 of an absolute
position table (the sinusoidal table of Vaswani et al. 2017, §3.5, or a learned one). Past
L_train every row is an input it never met; how new it is can be measured as its Euclidean
distance to the nearest trained row, in the table's own units and in "neighbour steps", the
distance between the rows of two neighbouring positions.

Shapes: P positions (rows of the table), C = d_model, L = L_train.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

_CHUNK = 1024  # rows past L_train compared at a time: at most 1024 × L distances in memory


@dataclass(frozen=True)
class TrainedRowDistance:
    """What :func:`distance_to_trained_rows` measures; P − L entries per tensor, row p − L for p.

    Attributes:
        positions: int64 ``[P − L]``, the positions p = L_train … P − 1.
        distance: float64 ``[P − L]``, min over s < L_train of ‖table[p] − table[s]‖, in
            the table's units.
        nearest_row: int64 ``[P − L]``, the trained row s that attains it (the smallest such
            s on a tie).
        step: the neighbour step, the mean of ‖table[s + 1] − table[s]‖ over the trained rows
            s = 0 … L_train − 2, in the table's units (for the sinusoidal table the same at
            every s: ‖PE(s + 1) − PE(s)‖² = 2 Σ_i (1 − cos ω_i)).
    """

    positions: Tensor
    distance: Tensor
    nearest_row: Tensor
    step: float

    @property
    def in_steps(self) -> Tensor:
        """float64 ``[P − L]``: :attr:`distance` in neighbour steps (1 = as far as a neighbour)."""
        return self.distance / self.step


def distance_to_trained_rows(table: Tensor, L_train: int) -> TrainedRowDistance:
    """The distance from each row past ``L_train`` to the nearest row a model trained on.

    For every position p = L_train … P − 1 it finds min over s = 0 … L_train − 1 of the
    Euclidean distance ‖table[p] − table[s]‖, and the neighbour step of the trained rows to
    express it in. Everything is computed in float64 with exact differences (no
    ‖a‖² + ‖b‖² − 2a·b shortcut, whose cancellation would put rounding noise into small
    distances), so the result does not depend on the CPU's matrix kernels beyond float64
    rounding. The rows are compared 1024 at a time, so memory stays at 1024 × L_train
    distances whatever P is.

    Args:
        table: ``[positions, d_model]`` floating-point position table (any float dtype, e.g.
            the float32 :func:`~posenc_lib.encodings.sinusoidal_encoding`), finite, with
            more than ``L_train`` rows: rows 0 … L_train − 1 are the trained ones.
        L_train: the training length, an int with 2 ≤ L_train < positions (two trained rows
            are needed to define a neighbour step, and one row past them to measure).

    Returns:
        A :class:`TrainedRowDistance`: ``distance`` in table units and ``in_steps`` in
        neighbour steps, both float64 ``[positions − L_train]``, plus ``nearest_row`` and
        ``step``. Row L_train's nearest trained row is L_train − 1 for the sinusoidal table,
        at exactly one step.

    Raises:
        TypeError: if ``table`` is not a tensor or ``L_train`` is not an int.
        ValueError: if ``table`` is not 2-D, not floating point or not finite, its trained
            rows are all equal (a neighbour step of 0), or ``L_train`` is outside
            2 … positions − 1.

    Example:
        >>> line = torch.tensor([[0.0], [1.0], [2.0], [5.0]])  # rows on a line, step 1
        >>> gap = distance_to_trained_rows(line, L_train=3)
        >>> gap.distance.tolist(), gap.nearest_row.tolist(), gap.step
        ([3.0], [2], 1.0)
    """
    if not isinstance(table, Tensor):
        raise TypeError(f"table must be a torch.Tensor, got {type(table).__name__}")
    if table.dim() != 2 or not table.is_floating_point():
        raise ValueError(
            f"table must be a floating-point [positions, d_model] tensor, got shape "
            f"{tuple(table.shape)} and dtype {table.dtype}"
        )
    if not isinstance(L_train, int) or isinstance(L_train, bool):
        raise TypeError(f"L_train must be an int, got {type(L_train).__name__}")
    positions = table.shape[0]
    if not 2 <= L_train < positions:
        raise ValueError(
            f"L_train must lie in 2 … positions − 1 = {positions - 1} (two trained rows and "
            f"at least one past them), got L_train={L_train}"
        )
    rows = table.detach().to(device="cpu", dtype=torch.float64)  # (P, C)
    if not torch.isfinite(rows).all():
        raise ValueError("table must be finite: it holds NaN or infinite entries")
    trained = rows[:L_train]  # (L, C)
    step = float((trained[1:] - trained[:-1]).norm(dim=-1).mean())
    if step == 0:
        raise ValueError("table's trained rows are all equal: the neighbour step is 0")
    distances, nearest = [], []
    for start in range(L_train, positions, _CHUNK):
        chunk = rows[start : start + _CHUNK]  # (≤ 1024, C)
        pairwise = torch.cdist(chunk, trained, compute_mode="donot_use_mm_for_euclid_dist")
        smallest = pairwise.min(dim=-1)  # (≤ 1024,) over the L trained rows
        distances.append(smallest.values)
        nearest.append(smallest.indices)
    return TrainedRowDistance(
        positions=torch.arange(L_train, positions),
        distance=torch.cat(distances),
        nearest_row=torch.cat(nearest),
        step=step,
    )
