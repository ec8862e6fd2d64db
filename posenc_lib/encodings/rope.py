"""Rotary position embedding, RoPE (Su et al. 2021, RoFormer §3.2–3.4)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def _check_head_dim(head_dim: int, name: str = "head_dim") -> None:
    if head_dim < 2 or head_dim % 2 != 0:
        raise ValueError(f"{name} must be even and >= 2 (RoPE rotates pairs), got {name}={head_dim}")


def rope_inverse_frequencies(head_dim: int, base: float = 10000.0) -> Tensor:
    """The rotation frequencies θ_i = base^(−2i/head_dim), i = 0 … head_dim/2 − 1.

    Source: Su et al. 2021 (RoFormer), eq. 15, with base 10 000 as in the paper.

    Args:
        head_dim: the per-head width d; must be even and ≥ 2.
        base: the frequency base (10 000 in RoFormer, 500 000 in Llama 3); must be > 0.

    Returns:
        Tensor ``[head_dim // 2]``, float32, radians per position, decreasing from 1.

    Raises:
        ValueError: if ``head_dim`` is odd or < 2, or ``base`` ≤ 0.

    Example:
        >>> rope_inverse_frequencies(4, base=100.0)
        tensor([1.0000, 0.1000])
    """
    _check_head_dim(head_dim)
    if base <= 0:
        raise ValueError(f"base must be > 0, got base={base}")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return (base ** -exponents).to(torch.float32)


def _angles(positions: Tensor, inv_freq: Tensor, x_dim: int) -> Tensor:
    """Angles p·θ_i in float32, shaped to broadcast against ``[..., seq, head_dim/2]``."""
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
    angles = positions.to(torch.float32)[..., None] * inv_freq.to(positions.device)  # (..., seq, d/2)
    if positions.dim() == 2:
        if x_dim < 3:
            raise ValueError("positions of shape [batch, seq] need x with at least 3 dims [batch, ..., seq, head_dim]")
        # (batch, seq, d/2) -> (batch, 1, …, 1, seq, d/2): one singleton per head-like dim of x
        angles = angles.reshape(angles.shape[0], *([1] * (x_dim - 3)), *angles.shape[1:])
    return angles


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor, *, interleaved: bool) -> Tensor:
    """Rotate each pair of ``x``'s last dimension by the angle whose cos/sin are given.

    Pairs are (i, i + d/2) when ``interleaved=False`` (rotate-half) and (2i, 2i+1) when
    ``interleaved=True``. The arithmetic is done in float32 (or float64 if x is float64) and
    the result is cast back to x's dtype. Su et al. 2021, eq. 34 (the elementwise form).

    Args:
        x: ``[..., seq, d]`` with d even.
        cos, sin: ``[..., seq, d/2]``, broadcastable against x's leading dims.
        interleaved: the pairing convention (see above).

    Returns:
        Tensor with x's shape and dtype.
    """
    compute_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(compute_dtype)
    if interleaved:
        x1, x2 = xf[..., 0::2], xf[..., 1::2]  # (..., seq, d/2) each
    else:
        half = x.shape[-1] // 2
        x1, x2 = xf[..., :half], xf[..., half:]
    cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    if interleaved:
        out = torch.stack([out1, out2], dim=-1).flatten(-2)  # (..., seq, d/2, 2) -> (..., seq, d)
    else:
        out = torch.cat([out1, out2], dim=-1)
    return out.to(x.dtype)


def apply_rope(
    x: Tensor,
    positions: Tensor,
    *,
    base: float = 10000.0,
    interleaved: bool = False,
) -> Tensor:
    """Rotate queries or keys by their positions: RoPE(x, p) = R_{Θ,p} x.

    Each pair (x_a, x_b) of the head dimension is rotated by the angle p·θ_i:
    ``(x_a cos pθ_i − x_b sin pθ_i,  x_b cos pθ_i + x_a sin pθ_i)`` — Su et al. 2021,
    eqs. 13–15 and the elementwise form eq. 34. Then ⟨RoPE(q, m), RoPE(k, n)⟩ depends on
    q, k and n − m only.

    Args:
        x: ``[..., seq, head_dim]`` (typically ``[batch, heads, seq, head_dim]``), any float dtype.
        positions: integer positions, ``[seq]`` (shared by the batch, e.g. ``arange(t0, t0+seq)``
            for a KV cache offset) or ``[batch, seq]`` (per sequence, e.g. from a left-padded mask).
        base: θ_i = base^(−2i/head_dim).
        interleaved: ``False`` pairs dimension i with i + head_dim/2 (rotate-half: GPT-NeoX,
            Hugging Face Llama); ``True`` pairs 2i with 2i+1 (GPT-J, Meta's complex form).

    Returns:
        Tensor with x's shape and dtype. The angles, cos and sin are computed in float32
        whatever x's dtype.

    Raises:
        ValueError: if head_dim is odd, positions are not integers, or their shape does not
            match ``seq`` (and ``batch``).

    Example:
        >>> q = torch.randn(1, 2, 5, 8)
        >>> apply_rope(q, torch.arange(5)).shape
        torch.Size([1, 2, 5, 8])
    """
    if x.dim() < 2:
        raise ValueError(f"x must be [..., seq, head_dim], got shape {tuple(x.shape)}")
    head_dim, seq = x.shape[-1], x.shape[-2]
    _check_head_dim(head_dim)
    if positions.dim() not in (1, 2) or positions.shape[-1] != seq:
        raise ValueError(
            f"positions must be [seq={seq}] or [batch, seq={seq}], got shape {tuple(positions.shape)}"
        )
    if positions.dim() == 2 and positions.shape[0] != x.shape[0]:
        raise ValueError(
            f"positions [batch, seq] has batch={positions.shape[0]} but x has batch={x.shape[0]}"
        )
    angles = _angles(positions.to(x.device), rope_inverse_frequencies(head_dim, base).to(x.device), x.dim())
    return rotate_pairs(x, angles.cos(), angles.sin(), interleaved=interleaved)


class RotaryEmbedding(nn.Module):
    """RoPE as a module with a float32 cos/sin cache, for attention layers.

    ``forward(x, positions)`` has :func:`apply_rope`'s shapes and semantics. The cache of
    cos(p·θ_i) and sin(p·θ_i) is kept in float32 even after ``module.to(torch.bfloat16)``
    (it is not a buffer, so ``.to(dtype)`` does not touch it), follows x's device, and grows
    when a position beyond it arrives. With ``rotary_dim < head_dim`` only the first
    ``rotary_dim`` dimensions are rotated and the rest pass through (partial rotary, as
    GPT-NeoX and GPT-J use).

    Args:
        head_dim: per-head width; even.
        base: θ_i = base^(−2i/rotary_dim).
        interleaved: pairing convention, see :func:`apply_rope`.
        rotary_dim: how many leading dimensions to rotate (even, ≤ head_dim); default all.

    Raises:
        ValueError: for odd ``head_dim``/``rotary_dim``, ``rotary_dim > head_dim``, or x whose
            last dimension is not ``head_dim``.

    Example:
        >>> rope = RotaryEmbedding(8)
        >>> rope(torch.randn(1, 2, 5, 8), torch.arange(5)).shape
        torch.Size([1, 2, 5, 8])
    """

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        *,
        interleaved: bool = False,
        rotary_dim: int | None = None,
    ) -> None:
        super().__init__()
        _check_head_dim(head_dim)
        rotary_dim = head_dim if rotary_dim is None else rotary_dim
        _check_head_dim(rotary_dim, "rotary_dim")
        if rotary_dim > head_dim:
            raise ValueError(f"rotary_dim must be <= head_dim={head_dim}, got rotary_dim={rotary_dim}")
        self.head_dim, self.rotary_dim = head_dim, rotary_dim
        self.base, self.interleaved = base, interleaved
        self.inv_freq = rope_inverse_frequencies(rotary_dim, base)  # float32, not a buffer
        self._cos = torch.empty(0, rotary_dim // 2)
        self._sin = torch.empty(0, rotary_dim // 2)

    def _extend_cache(self, length: int, device: torch.device) -> None:
        if self._cos.shape[0] >= length and self._cos.device == device:
            return
        length = max(length, 2 * self._cos.shape[0])  # grow geometrically, not by one each step
        angles = torch.arange(length, device=device, dtype=torch.float32)[:, None] * self.inv_freq.to(device)
        self._cos, self._sin = angles.cos(), angles.sin()  # (length, rotary_dim/2) float32

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """Rotate ``x`` ``[..., seq, head_dim]`` by integer ``positions`` ``[seq]`` or ``[batch, seq]``."""
        if x.dim() < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"x must be [..., seq, head_dim={self.head_dim}], got shape {tuple(x.shape)}")
        seq = x.shape[-2]
        if positions.dim() not in (1, 2) or positions.shape[-1] != seq:
            raise ValueError(f"positions must be [seq={seq}] or [batch, seq={seq}], got shape {tuple(positions.shape)}")
        if positions.dtype.is_floating_point or positions.dtype == torch.bool:
            raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
        positions = positions.to(x.device)
        if positions.numel() and int(positions.min()) < 0:
            raise ValueError(f"positions must be >= 0, got min {int(positions.min())}")
        self._extend_cache(int(positions.max()) + 1 if positions.numel() else 0, x.device)
        cos, sin = self._cos[positions], self._sin[positions]  # (..., seq, r/2)
        if positions.dim() == 2:
            cos = cos.reshape(cos.shape[0], *([1] * (x.dim() - 3)), *cos.shape[1:])
            sin = sin.reshape(sin.shape[0], *([1] * (x.dim() - 3)), *sin.shape[1:])
        rotated = rotate_pairs(x[..., : self.rotary_dim], cos, sin, interleaved=self.interleaved)
        if self.rotary_dim == self.head_dim:
            return rotated
        return torch.cat([rotated, x[..., self.rotary_dim :]], dim=-1)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, interleaved={self.interleaved}"
