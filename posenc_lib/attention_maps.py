"""Read attention probabilities out of a trained :class:`~posenc_lib.model.TransformerLM`.

The model runs attention through SDPA, which never returns its probabilities. This module
captures a layer's input with a forward hook and asks that layer for its weights
(:meth:`~posenc_lib.attention.SelfAttention.probabilities`), leaving the forward pass untouched.

Shapes: B batch, H heads, T sequence, D = head_dim.
"""

from __future__ import annotations

import torch
from torch import Tensor

from posenc_lib.model import TransformerLM


@torch.no_grad()
def attention_probabilities(model: TransformerLM, tokens: Tensor, layer: int) -> Tensor:
    """The attention probabilities of one layer for ``tokens``.

    Args:
        model: a :class:`~posenc_lib.model.TransformerLM` (any positional scheme).
        tokens: integer ``[B, T]``.
        layer: block index, 0 … num_layers − 1.

    Returns:
        float32 ``[B, H, T, T]``; row i holds query i's weights over keys 0 … T−1 (zero after i).

    Raises:
        ValueError: for a layer index out of range (and whatever the model's forward raises).
    """
    if not 0 <= layer < len(model.blocks):
        raise ValueError(f"layer must lie in 0 … {len(model.blocks) - 1}, got layer={layer}")
    attn = model.blocks[layer].attn
    captured: dict[str, tuple] = {}

    def hook(module, args, kwargs):  # record the attention layer's input, change nothing
        captured["args"], captured["kwargs"] = args, kwargs

    handle = attn.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        model(tokens)
    finally:
        handle.remove()
    x, *rest = captured["args"]
    kwargs = captured["kwargs"]
    bias = rest[0] if rest else kwargs.get("bias")
    if bias is None:  # the model passes its finished score mask instead of a bias; the
        bias = kwargs.get("mask")  # causal part is added again: −inf stays −inf
    positions = rest[1] if len(rest) > 1 else kwargs.get("positions")
    return attn.probabilities(x, bias, positions)  # (B, H, T, T)


def mean_attention_distance(probabilities: Tensor, *, skip_first: int = 0) -> Tensor:
    """Average distance i − j that each head attends over, weighted by the probabilities.

    Args:
        probabilities: ``[B, H, T, T]`` causal attention rows (e.g. from
            :func:`attention_probabilities`).
        skip_first: leave out queries 0 … skip_first − 1 (they cannot look far back).

    Returns:
        float32 ``[H]``: mean over batch and queries of Σ_j p_ij (i − j), in tokens.

    Raises:
        ValueError: for a tensor that is not ``[B, H, T, T]`` or ``skip_first`` outside 0 … T−1.
    """
    if probabilities.dim() != 4 or probabilities.shape[-1] != probabilities.shape[-2]:
        raise ValueError(f"probabilities must be [batch, heads, seq, seq], got {tuple(probabilities.shape)}")
    t = probabilities.shape[-1]
    if not 0 <= skip_first < t:
        raise ValueError(f"skip_first must lie in 0 … {t - 1}, got skip_first={skip_first}")
    positions = torch.arange(t, device=probabilities.device, dtype=torch.float32)
    distance = (positions[:, None] - positions[None, :]).clamp(min=0)  # (T, T)
    per_query = (probabilities.float() * distance).sum(-1)  # (B, H, T)
    return per_query[..., skip_first:].mean(dim=(0, 2))
