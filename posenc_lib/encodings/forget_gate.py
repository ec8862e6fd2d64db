"""The forget gate of the Forgetting Transformer (FoX; Lin et al. 2025, "Forgetting
Transformer: Softmax Attention with a Forget Gate", ICLR 2025, §2): a learned,
data-dependent recency bias on the attention scores.

Each head h has a scalar gate per token, f_t = σ(w_hᵀ x_t + b_h) ∈ (0, 1), computed from
the layer's input. Query i's score for key j ≤ i gets the additive bias

    D_ij = Σ_{k=j+1..i} log f_k = c_i − c_j,   c_t = Σ_{k ≤ t} log f_k,

so attention to a key decays by the product of the gates of every token after it. There
is no position anywhere: the model is NoPE plus this bias (FoX's default: no RoPE).

ALiBi is the special case of a constant gate. With w_h = 0 and σ(b_h) = e^{−m_h}, every
log f_k = −m_h and D_ij = −m_h (i − j), ALiBi's bias with slope m_h
(:func:`gate_bias_for_slopes` gives that b_h). FoX learns the gate from the data instead.

Shapes: B batch, H heads, T sequence, C = d_model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def forget_gate_bias(log_forget: Tensor) -> Tensor:
    """The forgetting bias D_ij = Σ_{k=j+1..i} log f_k for every (query i, key j).

    Args:
        log_forget: log f, float ``[B, H, T]`` (≤ 0).

    Returns:
        Float ``[B, H, T, T]`` (the dtype of ``log_forget``): c_i − c_j with c the running
        sum of log f over the tokens. Entries with j > i (keys after the query) are not
        meaningful; the causal mask removes them.

    Raises:
        ValueError: if ``log_forget`` is not 3-D.

    Example:
        >>> log_f = torch.full((1, 1, 3), -0.5)  # a constant gate: ALiBi with slope 0.5
        >>> forget_gate_bias(log_f)[0, 0].tril()
        tensor([[ 0.0000,  0.0000,  0.0000],
                [-0.5000,  0.0000,  0.0000],
                [-1.0000, -0.5000,  0.0000]])
    """
    if log_forget.dim() != 3:
        raise ValueError(f"log_forget must be [batch, heads, seq], got shape {tuple(log_forget.shape)}")
    c = log_forget.cumsum(dim=-1)  # (B, H, T)
    return c[..., :, None] - c[..., None, :]  # (B, H, T, T)


def gate_bias_for_slopes(slopes: Tensor) -> Tensor:
    """The gate bias b_h whose constant gate σ(b_h) = e^{−m_h} reproduces ALiBi's slope m_h.

    b_h = logit(e^{−m_h}) = −m_h − log(1 − e^{−m_h}).

    Args:
        slopes: m_h > 0, float ``[H]`` (e.g. :func:`~posenc_lib.encodings.alibi.alibi_slopes`).

    Returns:
        Float ``[H]``, computed in float64 and returned in the slopes' dtype.

    Raises:
        ValueError: if a slope is not > 0 (a gate of 1 needs b = +∞).
    """
    if not bool((slopes > 0).all()):
        raise ValueError(f"slopes must all be > 0, got {slopes.tolist()}")
    m = slopes.double()
    return (-m - torch.log(-torch.expm1(-m))).to(slopes.dtype)


class ForgetGate(nn.Module):
    """One layer's forget gates: ``forward(x [B, T, C]) -> log f [B, H, T]`` (float32).

    log f_t = log σ(w_hᵀ x_t + b_h), one linear map C → H with a bias (FoX's ``fgate``),
    initialised as PyTorch's ``nn.Linear`` (the paper's default, without a special bias
    initialisation).

    Args:
        d_model: C ≥ 1.
        num_heads: H ≥ 1.

    Raises:
        ValueError: if d_model or num_heads is < 1.
    """

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("num_heads", num_heads)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {name}={value}")
        self.proj = nn.Linear(d_model, num_heads)

    def forward(self, x: Tensor) -> Tensor:
        return F.logsigmoid(self.proj(x).float()).transpose(1, 2)  # (B, H, T)
