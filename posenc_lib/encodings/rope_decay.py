"""RoPE's long-term decay (Su et al. 2021, RoFormer §3.4.3), checked and measured numerically.

Read pair i of q and of k (rotate-half layout: dimensions i and i + d/2) as complex numbers
q̃_i, k̃_i, and let z_i = q̃_i · conj(k̃_i). The score of a query at position r and a key at 0
is then Re Σ_i z_i e^{i r θ_i}. Summation by parts with the partial sums
S_j = Σ_{i<j} e^{i r θ_i} and the boundary convention z_{d/2} := 0 gives
Σ_i z_i e^{i r θ_i} = −Σ_j (z_{j+1} − z_j) S_{j+1}, hence RoFormer's bound
|Σ_i z_i e^{i r θ_i}| ≤ max_j |z_{j+1} − z_j| · Σ_j |S_j|, whose r-dependent factor is
B(r) = (2/d) Σ_j |S_j|. The rotations come from :func:`~posenc_lib.encodings.rope.apply_rope`
with float64 angles.
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor

from posenc_lib.encodings.rope import apply_rope


def rope_pairs_as_complex(x: Tensor) -> Tensor:
    """The rotate-half pairs of ``x`` as complex numbers: pair i is x_i + i·x_{i+d/2}.

    Args:
        x: ``[..., d]`` float32 or float64, d even.

    Returns:
        ``[..., d/2]`` complex (complex128 for float64 x).

    Raises:
        ValueError: for an odd last dimension.

    Example:
        >>> rope_pairs_as_complex(torch.tensor([1.0, 2.0, 3.0, 4.0]))
        tensor([1.+3.j, 2.+4.j])
    """
    if x.shape[-1] % 2:
        raise ValueError(f"x's last dimension must be even (pairs), got shape {tuple(x.shape)}")
    half = x.shape[-1] // 2
    return torch.complex(x[..., :half], x[..., half:])


def rope_phases(distances: Tensor, head_dim: int, base: float = 10000.0) -> Tensor:
    """e^{i r θ_i} for every distance r and pair i: the library's rotation of the unit
    vector (1, 0) of every pair, with float64 angles.

    Args:
        distances: integer ``[n]``.
        head_dim: d, even; θ_i = base^(−2i/d).
        base: the frequency base.

    Returns:
        ``[n, d/2]`` complex128.

    Raises:
        ValueError: as :func:`~posenc_lib.encodings.rope.apply_rope` (odd head_dim,
            non-integer distances).

    Example:
        >>> rope_phases(torch.tensor([0]), 4)
        tensor([[1.+0.j, 1.+0.j]], dtype=torch.complex128)
    """
    half = head_dim // 2
    unit = torch.cat([torch.ones(half), torch.zeros(half)]).double()
    rotated = apply_rope(unit.expand(len(distances), -1), distances, base=base,
                         angle_dtype=torch.float64)
    return rope_pairs_as_complex(rotated)


def discrimination_sum(distances: Tensor, head_dim: int, base: float = 10000.0) -> Tensor:
    """Men et al.'s B_{m,θ} = Σ_i cos(m θ_i) for every distance m: the expected score
    advantage of a key equal to the query over a random key, up to a positive factor,
    when the coordinates of q are i.i.d. (Men et al. 2024, "Base of RoPE bounds context
    length", §3; their claim, cited, not measured here, is that a model can use distance m
    only while B stays ≥ 0, which bounds the context by the base).

    Args:
        distances: integer ``[n]``.
        head_dim: d, even; θ_i = base^(−2i/d), i < d/2.
        base: the frequency base.

    Returns:
        ``[n]`` float64: Re Σ_i e^{i m θ_i} (:func:`rope_phases`).

    Example:
        >>> discrimination_sum(torch.tensor([0]), 16)
        tensor([8.], dtype=torch.float64)
    """
    return rope_phases(distances, head_dim, base).real.sum(-1)


def first_negative_distance(head_dim: int, base: float = 10000.0, limit: int = 1 << 20) -> int | None:
    """The smallest distance m ≥ 1 with :func:`discrimination_sum` < 0: the context
    length Men et al.'s criterion allows for this head_dim and base (cited, not measured).

    Args:
        head_dim: d, even.
        base: the frequency base.
        limit: the largest m searched.

    Returns:
        The distance, or None when B stays ≥ 0 up to ``limit``.

    Raises:
        ValueError: for ``limit`` < 1.

    Example:
        >>> first_negative_distance(16, 100.0)
        16
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got limit={limit}")
    for start in range(1, limit + 1, 1 << 16):  # in blocks, so a long search stays small
        m = torch.arange(start, min(start + (1 << 16), limit + 1))
        negative = (discrimination_sum(m, head_dim, base) < 0).nonzero()
        if len(negative):
            return int(m[negative[0, 0]])
    return None


def _z(q: Tensor, k: Tensor) -> Tensor:
    if q.dim() != 2 or k.shape != q.shape or q.dtype != torch.float64:
        raise ValueError("q and k must be float64 [samples, head_dim] of one shape, got "
                         f"{tuple(q.shape)} {q.dtype} and {tuple(k.shape)} {k.dtype}")
    return rope_pairs_as_complex(q) * rope_pairs_as_complex(k).conj()  # (n, d/2)


def decay_by_parts_checks(q: Tensor, k: Tensor, distances: list[int],
                          base: float = 10000.0) -> pd.DataFrame:
    """Check, at each distance r, the complex form of the score, the summation by parts
    and RoFormer's bound on every sample (query at r, key at 0).

    Args:
        q, k: float64 ``[n, d]``: n sample queries and keys.
        distances: the distances r to check.
        base: the frequency base.

    Returns:
        One row per r (index ``r``): ``"score = Re Σ z e^{irθ}"`` (the score from
        :func:`~posenc_lib.encodings.rope.apply_rope` equals the complex sum within 1e-9),
        ``"sum by parts exact"`` (within 1e-9), ``"|Σ| ≤ bound (all n)"`` (bools) and
        ``"largest |Σ| / bound"`` (float).

    Raises:
        ValueError: for q and k that are not float64 ``[n, d]`` of one shape.
    """
    z = _z(q, k)
    # z_{i+1} for i = 0 … d/2 − 1, with the boundary convention z_{d/2} := 0
    z_next = torch.cat([z[:, 1:], torch.zeros(z.shape[0], 1, dtype=z.dtype)], dim=1)
    checks = []
    for r in distances:
        e = rope_phases(torch.tensor([r]), q.shape[-1], base)[0]  # (d/2,)
        partial_sums = torch.cumsum(e, 0)  # S_1 … S_{d/2}
        score = (apply_rope(q, torch.full((q.shape[0],), r), base=base,
                            angle_dtype=torch.float64) * k).sum(-1)  # query at r, key at 0
        complex_sum = (z * e).sum(-1)
        by_parts = -((z_next - z) * partial_sums).sum(-1)
        bound = (z_next - z).abs().amax(-1) * partial_sums.abs().sum()
        checks.append({
            "r": r,
            "score = Re Σ z e^{irθ}": (score - complex_sum.real).abs().max().item() < 1e-9,
            "sum by parts exact": (complex_sum - by_parts).abs().max().item() < 1e-9,
            f"|Σ| ≤ bound (all {q.shape[0]})": bool((complex_sum.abs() <= bound).all()),
            "largest |Σ| / bound": (complex_sum.abs() / bound).max().item(),
        })
    return pd.DataFrame(checks).set_index("r")


def decay_curves(q: Tensor, k: Tensor, distances: Tensor,
                 base: float = 10000.0) -> dict[str, Tensor]:
    """The decay factor and measured scores as functions of the distance r.

    Args:
        q, k: float64 ``[n, d]`` sample queries and (independent) keys.
        distances: integer ``[m]``.
        base: the frequency base.

    Returns:
        Four float64 ``[m]`` curves: ``"bound B(r)"`` (the mean of |S_j| over j = 1 … d/2),
        ``"|sum of phases| / (d/2)"``, ``"q with itself"`` (the mean over samples of the
        score of q at r with q at 0, over |q|²) and ``"|q, independent k|"`` (the mean of
        |score| / (|q| |k|)).

    Raises:
        ValueError: for q and k that are not float64 ``[n, d]`` of one shape.
    """
    z = _z(q, k)
    half = q.shape[-1] // 2
    z_self = rope_pairs_as_complex(q).abs() ** 2  # z_i of q with itself: |q_i|^2
    norm_q2, norm_qk = q.norm(dim=-1) ** 2, q.norm(dim=-1) * k.norm(dim=-1)
    e = rope_phases(distances, q.shape[-1], base)  # (m, d/2)
    partial_sums = e.cumsum(dim=-1).abs()  # |S_j|, j = 1 … d/2
    # score = Re Σ_i z_i e^{i r θ_i}: all distances in one product
    same = (z_self.to(e.dtype) @ e.T).real / norm_q2[:, None]  # (n, m)
    other = (z @ e.T).real.abs() / norm_qk[:, None]
    return {"bound B(r)": partial_sums.mean(-1),
            "|sum of phases| / (d/2)": partial_sums[:, -1] / half,
            "q with itself": same.mean(0), "|q, independent k|": other.mean(0)}


def decay_table(decay: dict[float, dict[str, Tensor]], distances: Tensor,
                probes: list[int]) -> pd.DataFrame:
    """The curves of :func:`decay_curves` for several bases, read at a few distances.

    Args:
        decay: base → the curves :func:`decay_curves` returned for ``distances``.
        distances: the integer ``[m]`` distances the curves were computed at.
        probes: distances to read, each one of ``distances``.

    Returns:
        float64 table, one row per (``"base 10 000"``, curve name) and one column per
        probe distance (index ``"r"``), unrounded.

    Raises:
        ValueError: for a probe that is not one of ``distances``.
    """
    where = {int(r): i for i, r in enumerate(distances.tolist())}
    missing = [r for r in probes if r not in where]
    if missing:
        raise ValueError(f"probes must be among distances, got probes={missing}")
    columns = {
        ("base " + f"{base:,.0f}".replace(",", " "), name): [
            float(curve[where[r]]) for r in probes]
        for base, curves in decay.items() for name, curve in curves.items()
    }
    return pd.DataFrame(columns, index=pd.Index(probes, name="r")).T
