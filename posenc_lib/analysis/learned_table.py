"""Geometry of a position table: how far the rows past L_train lie from the rows trained on,
how similar rows are by offset, and how a table moved in training or rounds in low precision.

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
import torch.nn.functional as F
from torch import Tensor

from posenc_lib.encodings.sinusoidal import sinusoidal_encoding, sinusoidal_frequencies

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


def neighbour_distances(rows: Tensor) -> Tensor:
    """‖row(p + 1) − row(p)‖ for p = 0 … P − 2, in float64.

    Args:
        rows: ``[P, d_model]`` floating-point position table (any float dtype), P ≥ 2.

    Returns:
        float64 ``[P − 1]``; 0 where two neighbouring rows are identical (e.g. a bfloat16 table
        whose angles rounded to the same value).

    Raises:
        ValueError: if ``rows`` is not 2-D with at least two rows.
    """
    if rows.dim() != 2 or rows.shape[0] < 2:
        raise ValueError(f"rows must be [P, d_model] with P >= 2, got {tuple(rows.shape)}")
    rows = rows.double()
    return (rows[1:] - rows[:-1]).norm(dim=1)


def cosine_matrix(rows: Tensor) -> Tensor:
    """Cosine similarity C[p, p′] = cos∠(row_p, row_p′) between every pair of rows, in float64.

    Args:
        rows: ``[P, d_model]`` floating-point table.

    Returns:
        float64 ``[P, P]``, symmetric, 1 on the diagonal (for non-zero rows).

    Raises:
        ValueError: if ``rows`` is not 2-D.
    """
    if rows.dim() != 2:
        raise ValueError(f"rows must be [P, d_model], got {tuple(rows.shape)}")
    unit = F.normalize(rows.double(), dim=1)
    return unit @ unit.T


def mean_by_offset(similarity: Tensor) -> Tensor:
    """The mean of C[p, p + k] over p, for each offset k = 0 … P − 1.

    Args:
        similarity: square ``[P, P]`` matrix, e.g. from :func:`cosine_matrix`.

    Returns:
        ``[P]`` in the dtype of ``similarity``; entry k averages the P − k pairs at offset k.

    Raises:
        ValueError: if ``similarity`` is not square.
    """
    if similarity.dim() != 2 or similarity.shape[0] != similarity.shape[1]:
        raise ValueError(f"similarity must be [P, P], got {tuple(similarity.shape)}")
    n = similarity.shape[0]
    return torch.stack([torch.diagonal(similarity, k).mean() for k in range(n)])


def offset_r2(similarity: Tensor) -> float:
    """The share of the off-diagonal variance of a symmetric C explained by the offset |p − p′|.

    Each off-diagonal entry is predicted by the mean of its offset (:func:`mean_by_offset`);
    the result is 1 − Var(residual) / Var(C) over the off-diagonal entries: 1 for a table
    whose similarity depends on the offset only (the sinusoidal table), about 0 for random
    rows.

    Args:
        similarity: symmetric ``[P, P]`` matrix, P ≥ 3.

    Raises:
        ValueError: if ``similarity`` is not square with P ≥ 3.
    """
    if similarity.dim() != 2 or similarity.shape[0] != similarity.shape[1] or similarity.shape[0] < 3:
        raise ValueError(f"similarity must be [P, P] with P >= 3, got {tuple(similarity.shape)}")
    n = similarity.shape[0]
    offset = (torch.arange(n)[None, :] - torch.arange(n)[:, None]).abs()  # [P, P]
    residual = similarity - mean_by_offset(similarity)[offset]
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    return 1 - (residual[off_diagonal].var() / similarity[off_diagonal].var()).item()


def fitted_scale(trained: Tensor, start: Tensor) -> float:
    """Least-squares c in ``trained ≈ c · start``: Σ trained·start / Σ start², in float64.

    How much a table shrank (c < 1) or grew since its start, the rest ``trained − c·start``
    being what training wrote that is not a multiple of the start.

    Args:
        trained, start: tables of one shape (e.g. ``[P, d_model]``), ``start`` not all zero.

    Raises:
        ValueError: if the shapes differ or ``start`` is zero.
    """
    if trained.shape != start.shape:
        raise ValueError(f"trained and start must have one shape, got {tuple(trained.shape)} and {tuple(start.shape)}")
    after, before = trained.double(), start.double()
    norm = (before**2).sum()
    if norm == 0:
        raise ValueError("start is all zeros: no scale can be fitted")
    return ((after * before).sum() / norm).item()


def pair_angles(rows: Tensor) -> Tensor:
    """The angle of each (sin, cos) pair of an interleaved sinusoidal table, in float64.

    Pair i of row p is (PE[p, 2i], PE[p, 2i + 1]) = (sin θ, cos θ); the angle is
    ``atan2(sin, cos)`` in (−π, π], i.e. p·ω_i wrapped.

    Args:
        rows: ``[P, d_model]`` table in the paper's interleaved layout, d_model even.

    Returns:
        float64 ``[P, d_model / 2]`` angles (rad).

    Raises:
        ValueError: if ``rows`` is not 2-D with an even width.
    """
    if rows.dim() != 2 or rows.shape[1] % 2:
        raise ValueError(f"rows must be [P, d_model] with d_model even, got {tuple(rows.shape)}")
    return torch.atan2(rows[:, 0::2].double(), rows[:, 1::2].double())


def sinusoidal_angle_error(num_positions: int, d_model: int, base: float, angle_dtype: torch.dtype) -> Tensor:
    """How far the angles of a table formed in ``angle_dtype`` are from float64 angles.

    Compares :func:`~posenc_lib.encodings.sinusoidal_encoding` with ``angle_dtype`` against the
    default table (angles formed in float64), pair by pair: the error is the wrapped angle
    difference, in [0, π] (π: the angle is noise).

    Args:
        num_positions: P, rows 0 … P − 1.
        d_model: even table width.
        base: the frequency base (10 000 in the paper).
        angle_dtype: the dtype the angles p·ω_i are formed in (e.g. ``torch.bfloat16``).

    Returns:
        float64 ``[P]``: the largest error over the pairs at each position (rad).

    Raises:
        ValueError: as :func:`~posenc_lib.encodings.sinusoidal_encoding`.
    """
    reference = sinusoidal_encoding(num_positions, d_model, base)
    rows = sinusoidal_encoding(num_positions, d_model, base, angle_dtype=angle_dtype)
    diff = pair_angles(rows) - pair_angles(reference)
    return torch.atan2(diff.sin(), diff.cos()).abs().max(dim=1).values


def sinusoidal_offset_distance(offsets: Tensor, d_model: int, base: float) -> Tensor:
    """‖PE(p + k) − PE(p)‖ for each offset k, in exact arithmetic: √(2 Σ_i (1 − cos kω_i)).

    The same at every p (each pair is a unit vector turned by kω_i), so it is a function of k
    alone; computed in float64 from :func:`~posenc_lib.encodings.sinusoidal_frequencies`.

    Args:
        offsets: ``[K]`` offsets k (any real dtype; float64 keeps kω_i exact enough).
        d_model: even table width.
        base: the frequency base.

    Returns:
        float64 ``[K]`` distances, in the table's units.

    Raises:
        ValueError: if ``offsets`` is not 1-D, or as ``sinusoidal_frequencies``.
    """
    if offsets.dim() != 1:
        raise ValueError(f"offsets must be [K], got {tuple(offsets.shape)}")
    w = sinusoidal_frequencies(d_model, base)  # [d_model/2]
    return (2 * (1 - torch.cos(offsets[:, None] * w)).sum(1)).sqrt()


def offset_curve_shape(f: Tensor, near: int = 512) -> dict[str, float]:
    """Landmarks of a curve over offsets, such as f(k) = PE(0)·PE(k) for k = 0 … K.

    Args:
        f: ``[K + 1]`` values at k = 0 … K, with K ≥ ``near``; it must rise somewhere and go
            below 0 somewhere (the sinusoidal dot product does, for any base).
        near: the offsets searched for the largest rebound, k ≤ ``near``.

    Returns:
        ``first_rise``: the smallest k with f(k + 1) > f(k); ``rebound_from`` and
        ``rebound_to``: where the largest rise above the running minimum over k ≤ ``near``
        starts (that minimum) and ends; ``rebound``: that rise, in f's units;
        ``first_negative``: the smallest k with f(k) < 0; ``lowest``: the k ≥ 1 where f is
        smallest (the first, on a tie), and ``minimum``: f there. Offsets are ints, values
        floats.

    Raises:
        ValueError: if ``f`` is not 1-D with more than ``near`` entries, never rises or is
            never negative.
    """
    if f.dim() != 1 or f.numel() <= near:
        raise ValueError(f"f must be [K + 1] with K >= near={near}, got {tuple(f.shape)}")
    rises, negative = (f[1:] > f[:-1]).nonzero(), (f < 0).nonzero()
    if not len(rises) or not len(negative):
        raise ValueError("f must rise somewhere and be negative somewhere")
    head = f[: near + 1]
    rebound = head - torch.cummin(head, 0).values  # rise above the lowest value so far
    top = int(rebound.argmax())
    lowest = int(f[1:].argmin()) + 1
    return {"first_rise": int(rises[0]), "rebound_from": int(head[: top + 1].argmin()),
            "rebound_to": top, "rebound": float(rebound.max()), "first_negative": int(negative[0]),
            "lowest": lowest, "minimum": float(f[lowest])}


def learned_position_table(model: torch.nn.Module) -> Tensor:
    """The learned position table of a model, ``[max_positions, d_model]``, detached, on the CPU.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` with
            ``position="learned"``.

    Raises:
        ValueError: if the model has no learned position table.
    """
    learned = getattr(model, "learned", None)
    if learned is None:
        raise ValueError("the model has no learned position table (position != 'learned')")
    return learned.table.weight.detach().cpu()


def offset_structure(similarity: Tensor, digits: int | None = None) -> dict[str, float]:
    """How much a row-similarity matrix C is organised by offset, in four numbers.

    Args:
        similarity: symmetric ``[P, P]`` matrix (:func:`cosine_matrix`), P > 32.
        digits: round each number with Python's ``round(x, digits)``; None: unrounded.

    Returns:
        ``"mean C, offset 1"``, ``"mean C, offset 8"``: :func:`mean_by_offset` at k = 1 and 8;
        ``"mean C, offsets ≥ 32"``: its mean over k ≥ 32; ``"variance explained by offset"``:
        :func:`offset_r2`. Plain floats.

    Raises:
        ValueError: if ``similarity`` is not square with more than 32 rows.
    """
    if similarity.dim() != 2 or similarity.shape[0] != similarity.shape[1] or similarity.shape[0] <= 32:
        raise ValueError(f"similarity must be [P, P] with P > 32, got {tuple(similarity.shape)}")
    profile = mean_by_offset(similarity)
    numbers = {"mean C, offset 1": profile[1].item(), "mean C, offset 8": profile[8].item(),
               "mean C, offsets ≥ 32": profile[32:].mean().item(),
               "variance explained by offset": offset_r2(similarity)}
    return numbers if digits is None else {k: round(v, digits) for k, v in numbers.items()}


def sinusoidal_offset_curve(length: int, d_model: int, base: float = 10000.0) -> Tensor:
    """f(k) = PE(0)·PE(k) for k = 0 … length − 1, from the stored sinusoidal table.

    The rows are those of :func:`~posenc_lib.encodings.sinusoidal_encoding` (float32, as a
    model sees them), multiplied in float64; f(k) equals Σ_i cos(k ω_i) up to the table's
    rounding, and PE(p)·PE(p + k) is the same at every p (Vaswani et al. 2017, §3.5).

    Args:
        length: number of offsets, ≥ 1.
        d_model: even model width.
        base: the wavelength base.

    Returns:
        float64 ``[length]``; f(0) = d_model/2.

    Raises:
        ValueError: as :func:`~posenc_lib.encodings.sinusoidal_encoding`.
    """
    rows = sinusoidal_encoding(length, d_model, base).double()  # [length, d_model]
    return rows @ rows[0]


def initial_position_table(config) -> Tensor:
    """The learned position table a training run starts from, before any step.

    Builds the model of ``config`` under ``torch.manual_seed(config.seed)``, as training
    does, and returns its table; the caller's random state is left as it was
    (``torch.random.fork_rng``), so asking for a start does not shift later draws.

    Args:
        config: a :class:`~posenc_lib.training.train.TrainConfig` whose model has
            ``position="learned"`` (e.g. ``scale.train_config("learned", seed=0)``).

    Returns:
        float32 ``[max_positions, d_model]``, detached, on the CPU.

    Raises:
        ValueError: if the config's model has no learned position table.
    """
    from posenc_lib.model.transformer import TransformerLM  # the model imports this package

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return learned_position_table(TransformerLM(config.model))


def off_diagonal(matrix: Tensor) -> Tensor:
    """The entries of a square matrix off its diagonal, row by row (e.g. the cosines of
    distinct rows in a :func:`cosine_matrix`).

    Args:
        matrix: ``[n, n]``, any dtype.

    Returns:
        ``[n · (n − 1)]``, the matrix's dtype.

    Raises:
        ValueError: if ``matrix`` is not square and two-dimensional.
    """
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"matrix must be square [n, n], got shape {tuple(matrix.shape)}")
    return matrix[~torch.eye(len(matrix), dtype=torch.bool, device=matrix.device)]


def main_direction(table: Tensor) -> tuple[Tensor, Tensor]:
    """Each row's coordinate along a table's main direction (first principal component).

    Centres the rows, takes the SVD (principal component analysis) and orients the first
    direction so that the last row's coordinate exceeds the first row's (late positions
    positive, for a position table).

    Args:
        table: ``[P, d]`` rows (e.g. :func:`learned_position_table`), P ≥ 2; computed in float64.

    Returns:
        ``(coordinate, energy)``: float64 ``[P]`` coordinates (in the table's units) and
        float64 ``[min(P, d)]`` shares of the variance along each direction (summing to 1).

    Raises:
        ValueError: if ``table`` is not two-dimensional with at least two rows.
    """
    if table.dim() != 2 or table.shape[0] < 2:
        raise ValueError(f"table must be [P >= 2, d], got shape {tuple(table.shape)}")
    rows = table.double()
    U, singular, _ = torch.linalg.svd(rows - rows.mean(0), full_matrices=False)  # U: [P, r]
    energy = singular**2 / (singular**2).sum()
    coordinate = U[:, 0] * singular[0]
    return coordinate * torch.sign(coordinate[-1] - coordinate[0]), energy


def table_movement(trained: Tensor, start: Tensor) -> dict[str, float]:
    """How a trained position table relates to its own start, in six numbers (float64).

    Args:
        trained, start: the table after and before training, one shape ``[P, d_model]``
            (the same seed and initial weights: :func:`initial_position_table`).

    Returns:
        ``"start row norm"`` and ``"trained row norm"`` (mean row lengths, 3 decimals);
        ``"fitted scale c"`` (:func:`fitted_scale`, 3 decimals); ``"rest / trained (norm
        %)"``: 100 ‖trained − c·start‖ / ‖trained‖ (1 decimal); ``"RMS change per
        entry"`` (4 decimals); ``"min cosine of a row with its start"`` (3 decimals).

    Raises:
        ValueError: as :func:`fitted_scale` (shapes differ, or ``start`` is zero).
    """
    c = fitted_scale(trained, start)  # least-squares c in after ≈ c · before
    after, before = trained.double(), start.double()
    rest = after - c * before
    return {
        "start row norm": round(before.norm(dim=1).mean().item(), 3),
        "trained row norm": round(after.norm(dim=1).mean().item(), 3),
        "fitted scale c": round(c, 3),
        "rest / trained (norm %)": round(100 * (rest.norm() / after.norm()).item(), 1),
        "RMS change per entry": round((after - before).pow(2).mean().sqrt().item(), 4),
        "min cosine of a row with its start": round(
            F.cosine_similarity(after, before, dim=1).min().item(), 3),
    }


def perplexity_with_rows(model: torch.nn.Module, rows: Tensor, tokens: Tensor,
                         seq_len: int, max_tokens: int | None = None) -> float:
    """A learned-position model's perplexity with its position table replaced by ``rows``
    (shuffled, zeroed, …); the table is put back afterwards, also on an error.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` with
            ``position="learned"``.
        rows: ``[max_positions, d_model]`` replacement rows, on the model's device.
        tokens, seq_len, max_tokens: as :func:`~posenc_lib.training.evaluate.evaluate_perplexity`
            (non-overlapping windows of ``seq_len``).

    Returns:
        The perplexity (a float).

    Raises:
        ValueError: if the model has no learned table, or ``rows`` is not of its shape.
    """
    from posenc_lib.training.evaluate import evaluate_perplexity

    learned = getattr(model, "learned", None)
    if learned is None:
        raise ValueError("the model has no learned position table (position != 'learned')")
    table = learned.table.weight  # [P, d]
    if rows.shape != table.shape:
        raise ValueError(f"rows must have the table's shape {tuple(table.shape)}, "
                         f"got {tuple(rows.shape)}")
    kept = table.detach().clone()
    try:
        with torch.no_grad():
            table.copy_(rows)
        return evaluate_perplexity(model, tokens, seq_len, max_tokens=max_tokens).perplexity
    finally:
        with torch.no_grad():
            table.copy_(kept)  # the model as trained again


LEARNED_FILLS = ("last row copied", "table repeated", "rows interpolated")
"""Three ways to give a learned table rows past the L_train it was trained with."""


def filled_learned_rows(trained: Tensor, num_positions: int) -> dict[str, Tensor]:
    """A learned table lengthened to ``num_positions`` rows without training, three ways.

    ``"last row copied"``: row p is trained row min(p, L − 1); ``"table repeated"``: row
    p mod L; ``"rows interpolated"``: the L trained rows stretched linearly over the
    ``num_positions`` positions (position p sits at p·(L − 1)/(P − 1) of the trained span).

    Args:
        trained: ``[L, d_model]`` trained rows (any float dtype, any device).
        num_positions: P ≥ L, rows of the new table.

    Returns:
        ``{fill: [P, d_model]}`` in the order of :data:`LEARNED_FILLS`, on ``trained``'s
        device and dtype.

    Raises:
        ValueError: if ``trained`` is not 2-D with ≥ 2 rows, or ``num_positions`` < L.
    """
    if trained.dim() != 2 or trained.shape[0] < 2:
        raise ValueError(f"trained must be [L, d_model] with L >= 2, got {tuple(trained.shape)}")
    length = trained.shape[0]
    if num_positions < length:
        raise ValueError(f"num_positions must be >= L = {length}, got {num_positions}")
    p = torch.arange(num_positions, device=trained.device)
    x = p * (length - 1) / (num_positions - 1)  # P positions over the trained span
    low, w = x.floor().long(), (x - x.floor())[:, None]
    high = (low + 1).clamp(max=length - 1)
    return {"last row copied": trained[p.clamp(max=length - 1)],
            "table repeated": trained[p % length],
            "rows interpolated": (1 - w) * trained[low] + w * trained[high]}


def with_learned_rows(model: torch.nn.Module, rows: Tensor) -> torch.nn.Module:
    """A copy of a learned-table model whose position table is ``rows``, every other
    weight as trained: a model that accepts ``len(rows)`` positions.

    The caller's random state is left as it was (the new model's own initialisation is
    overwritten). Returns it on the model's device, in eval mode.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` with
            ``position="learned"``.
        rows: ``[P, d_model]`` the new table.

    Raises:
        ValueError: if the model has no learned table, or ``rows`` is not
            ``[P, d_model]``.
    """
    import dataclasses

    from posenc_lib.model.transformer import TransformerLM  # the model imports this package

    old = learned_position_table(model)  # raises without a learned table
    if rows.dim() != 2 or rows.shape[1] != old.shape[1]:
        raise ValueError(f"rows must be [P, {old.shape[1]}], got {tuple(rows.shape)}")
    with torch.random.fork_rng(devices=[]):
        longer = TransformerLM(dataclasses.replace(model.config, max_positions=rows.shape[0]))
    state = {k: v for k, v in model.state_dict().items() if k != "learned.table.weight"}
    longer.load_state_dict(state, strict=False)
    longer = longer.to(next(model.parameters()).device).eval()
    with torch.no_grad():
        longer.learned.table.weight.copy_(rows)
    return longer
