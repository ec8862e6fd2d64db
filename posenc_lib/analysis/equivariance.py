"""Does a layer's output follow a reordering of its input? Permutation equivariance.

Self-attention without positions is permutation-equivariant: ``Attn(PX) = P Attn(X)``
for every reordering P of the rows of X. :func:`permutation_gap` measures how far a
function is from that, so a chapter can show the identity holds (to float rounding) and
where it breaks (a causal mask, position encodings). :func:`averaging_attention` is the
simplest layer through which a causal mask alone leaks position: a running mean.

Shapes: B batch, T sequence, C channels (any trailing axes).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from posenc_lib.model.attention import SelfAttention


def permutation_gap(f: Callable[[Tensor], Tensor], x: Tensor, perm: Tensor, *,
                    positions: Tensor | None = None, at: int | None = None) -> float:
    """Largest ``|f(x)[:, perm] − f(x[:, perm])|``: zero when ``f`` commutes with ``perm``.

    Args:
        f: a function (a layer, a stack of layers) of ``[B, T, …]`` returning
            ``[B, T, …]``; it is called twice, without gradients.
        x: the input ``[B, T, …]`` (e.g. embedded tokens, float; or token ids, integer).
        perm: the reordering of the T positions, integer ``[T]``.
        positions: optional ``[T, …]`` added to the input *after* reordering, so the
            tokens move and the positions stay: ``f(x + positions)[:, perm]`` is compared
            with ``f(x[:, perm] + positions)``.
        at: compare only this output position (of the reordered sequence), e.g. ``-1``
            for the last query; None (default): every position.

    Returns:
        The maximum absolute difference, a Python float (0.0 when equal).

    Raises:
        ValueError: if ``perm`` is not a 1-D permutation of 0 … T−1 for ``x``'s axis 1.
    """
    if x.dim() < 2:
        raise ValueError(f"x must be [B, T, ...], got shape {tuple(x.shape)}")
    if perm.dim() != 1 or not torch.equal(perm.sort().values.cpu(), torch.arange(x.shape[1])):
        raise ValueError(f"perm must be a permutation of 0 … {x.shape[1] - 1}, got {perm.tolist()}")
    with torch.no_grad():
        if positions is None:
            out, out_of_permuted = f(x)[:, perm], f(x[:, perm])
        else:
            out, out_of_permuted = f(x + positions)[:, perm], f(x[:, perm] + positions)
    if at is not None:
        out, out_of_permuted = out[:, at], out_of_permuted[:, at]
    return (out - out_of_permuted).abs().max().item()


def averaging_attention(d_model: int) -> SelfAttention:
    """A one-head causal self-attention layer whose output at t is the mean of v_0 … v_t.

    It is :class:`~posenc_lib.model.attention.SelfAttention` ``(d_model, 1, causal=True)``
    with its random initialisation (so it draws from torch's global random stream as that
    does), then W_q = 0 and every bias 0, so all scores are equal and softmax spreads the
    weight uniformly over the keys the causal mask keeps; the output projection is the
    identity, so the output is the mean of the values ``v_s = W_v x_s``. It shows what a
    causal mask alone tells a layer about position: a token's share 1 / (t + 1).

    Args:
        d_model: the width C ≥ 1.

    Returns:
        The layer, in eval mode, on the CPU; ``forward(x [B, T, C]) -> [B, T, C]``.

    Raises:
        ValueError: for ``d_model`` < 1.
    """
    if not isinstance(d_model, int) or d_model < 1:
        raise ValueError(f"d_model must be an integer >= 1, got d_model={d_model!r}")
    layer = SelfAttention(d_model, 1, causal=True).eval()
    with torch.no_grad():
        layer.qkv.weight[:d_model].zero_()  # W_q = 0: all scores equal
        layer.qkv.bias.zero_()
        layer.out.weight.copy_(torch.eye(d_model))  # read the values out unchanged
        layer.out.bias.zero_()
    return layer


def rotation_normal_form(rotation: Tensor) -> tuple[Tensor, list[float]]:
    """The real normal form of an orthogonal matrix G with det 1 and no real eigenvalue:
    ``Qᵀ G^t Q = R_Θ,t``, RoFormer's block rotation with interleaved pairs.

    From each conjugate pair of eigenvalues e^{±iθ_i} the eigenvector v of e^{−iθ_i}
    gives the columns 2i, 2i+1 of Q: (√2 Re v, √2 Im v), which span the plane that G
    turns by θ_i.

    Args:
        rotation: ``[d, d]`` orthogonal matrix with det 1 and no eigenvalue ±1, d even
            (float64 for a tight check).

    Returns:
        ``(Q, angles)``: Q ``[d, d]`` (orthogonal up to rounding) and the d/2 angles
        θ_i > 0 in radians per position, in the order of Q's column pairs.

    Raises:
        ValueError: if ``rotation`` is not square of even size, or has a real eigenvalue
            (no pair for it).
    """
    if rotation.dim() != 2 or rotation.shape[0] != rotation.shape[1] or rotation.shape[0] % 2:
        raise ValueError(f"rotation must be [d, d] with d even, got {tuple(rotation.shape)}")
    values, vectors = torch.linalg.eig(rotation)
    down = values.imag < 0  # one eigenvalue e^{-iθ_i} of each conjugate pair, θ_i > 0
    if 2 * int(down.sum()) != rotation.shape[0]:
        raise ValueError("rotation has a real eigenvalue: no normal form of 2 × 2 rotations")
    Q = torch.stack([vectors[:, down].real, vectors[:, down].imag], dim=-1).flatten(1)
    Q = Q * math.sqrt(2)  # [d, d]: columns 2i, 2i+1 span the plane of pair i
    return Q, (-values[down].angle()).tolist()
RESIDUAL_READS = ("token_embedding.weight", "qkv.weight", "mlp.0.weight", "lm_head.weight")
"""Weights of :class:`~posenc_lib.model.transformer.TransformerLM` whose last axis is the
residual stream (they read it, or, for the token embedding, write it row by row)."""

RESIDUAL_WRITES = ("attn.out.weight", "attn.out.bias", "mlp.2.weight", "mlp.2.bias")
"""Weights whose first axis is the residual stream (they write into it)."""


def permute_residual_stream(state: dict[str, Tensor], perm: Tensor) -> dict[str, Tensor]:
    """The same model with the coordinates of its residual stream reordered by ``perm``.

    Every weight that reads or writes the stream is reordered with it (the token
    embedding's columns, ``W_q, W_k, W_v``, the MLP's input, the output head; the rows of
    the attention's and the MLP's output projections; LayerNorm's gain and bias), so the
    permuted model, fed a position table with its columns reordered the same way, computes
    the same logits: LayerNorm's mean and variance do not depend on the order.

    Args:
        state: a ``state_dict`` of a :class:`~posenc_lib.model.transformer.TransformerLM`.
        perm: integer ``[d_model]``, a permutation; coordinate ``perm[j]`` becomes ``j``.

    Returns:
        A new state dict (the input is not changed).

    Raises:
        ValueError: if ``perm`` is not a permutation of ``0 … d_model − 1``, with
            ``d_model`` the width of the token embedding.
    """
    width = state["token_embedding.weight"].shape[-1]
    if perm.dim() != 1 or not torch.equal(perm.sort().values.cpu(), torch.arange(width)):
        raise ValueError(f"perm must be a permutation of 0 … {width - 1}, got {perm}")
    permuted = {}
    for name, weight in state.items():
        if name.endswith(RESIDUAL_READS):
            weight = weight[:, perm]
        elif name.endswith(RESIDUAL_WRITES) or "norm" in name:
            weight = weight[perm]
        permuted[name] = weight
    return permuted
