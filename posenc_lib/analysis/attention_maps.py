"""Read attention probabilities out of a trained :class:`~posenc_lib.model.transformer.TransformerLM`.

The model runs attention through SDPA, which never returns its probabilities. This module
captures a layer's input with a forward hook and asks that layer for its weights
(:meth:`~posenc_lib.model.attention.SelfAttention.probabilities`), leaving the forward pass untouched.
Summaries of the weights per head: :func:`mean_attention_distance`, :func:`attention_entropy`,
:func:`attention_mass_beyond` and :func:`attention_by_distance`. For RoPE layers,
:func:`rope_score_by_pair` splits the scores into the contribution of each frequency pair.

Shapes: B batch, H heads, T sequence, D = head_dim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from posenc_lib.model.attention import SelfAttention
from posenc_lib.model.transformer import TransformerLM


@torch.no_grad()
def attention_probabilities(model: TransformerLM, tokens: Tensor, layer: int) -> Tensor:
    """The attention probabilities of one layer for ``tokens``.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` (any positional scheme).
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


def _check_probabilities(probabilities: Tensor, skip_first: int) -> int:
    """Validate causal attention rows ``[B, H, T, T]`` and ``skip_first``; return T."""
    if probabilities.dim() != 4 or probabilities.shape[-1] != probabilities.shape[-2]:
        raise ValueError(
            f"probabilities must be [batch, heads, seq, seq], got {tuple(probabilities.shape)}"
        )
    t = probabilities.shape[-1]
    if not 0 <= skip_first < t:
        raise ValueError(f"skip_first must lie in 0 … {t - 1}, got skip_first={skip_first}")
    return t


def attention_entropy(probabilities: Tensor, *, skip_first: int = 0) -> Tensor:
    """Shannon entropy of each head's attention rows, −Σ_s p_ts ln p_ts, in nats.

    A head that looks at one key has entropy 0; one that spreads evenly over n keys has
    ln n. As the window grows, a head whose scores do not single out a few keys spreads over
    more of them and its entropy grows towards ln(t + 1) — the "attention dilution" of long
    contexts.

    Args:
        probabilities: ``[B, H, T, T]`` causal attention rows (e.g. from
            :func:`attention_probabilities`); zeros count as 0 · ln 0 = 0.
        skip_first: leave out queries 0 … skip_first − 1 (e.g. keep only the last queries
            of a long window, which see the most keys).

    Returns:
        float32 ``[H]``: mean over batch and the kept queries t of −Σ_s p_ts ln p_ts (nats).

    Raises:
        ValueError: for a tensor that is not ``[B, H, T, T]`` or ``skip_first`` outside
            0 … T−1.

    Example:
        >>> uniform = torch.full((1, 1, 4, 4), 0.25)
        >>> attention_entropy(uniform)  # ln 4
        tensor([1.3863])
    """
    _check_probabilities(probabilities, skip_first)
    p = probabilities.float()
    per_query = -torch.special.xlogy(p, p).sum(-1)  # (B, H, T); xlogy(0, 0) = 0
    return per_query[..., skip_first:].mean(dim=(0, 2))


def attention_mass_beyond(probabilities: Tensor, distance: int, *, skip_first: int = 0) -> Tensor:
    """Share of each head's attention that goes to keys at least ``distance`` tokens back.

    With ``distance = L_train`` this is the weight a model puts on relative distances
    t − s ≥ L_train, which it never saw in training.

    Args:
        probabilities: ``[B, H, T, T]`` causal attention rows.
        distance: the smallest distance t − s counted, ≥ 0 (0 counts everything: 1 per row).
        skip_first: leave out queries 0 … skip_first − 1.

    Returns:
        float32 ``[H]``: mean over batch and kept queries t of Σ_{s ≤ t − distance} p_ts,
        a share between 0 and 1.

    Raises:
        ValueError: for a tensor that is not ``[B, H, T, T]``, ``skip_first`` outside
            0 … T−1, or a negative ``distance``.

    Example:
        >>> uniform = torch.full((1, 1, 4, 4), 0.25)
        >>> attention_mass_beyond(uniform, 2, skip_first=3)  # keys 0, 1 of query 3
        tensor([0.5000])
    """
    t = _check_probabilities(probabilities, skip_first)
    if distance < 0:
        raise ValueError(f"distance must be >= 0, got distance={distance}")
    positions = torch.arange(t, device=probabilities.device)
    far = (positions[:, None] - positions[None, :]) >= distance  # (T, T): t − s ≥ distance
    per_query = (probabilities.float() * far).sum(-1)  # (B, H, T)
    return per_query[..., skip_first:].mean(dim=(0, 2))


def attention_by_distance(probabilities: Tensor, *, skip_first: int = 0) -> Tensor:
    """Mean attention weight at each distance r = t − s, per head: the attention profile.

    Args:
        probabilities: ``[B, H, T, T]`` causal attention rows.
        skip_first: leave out queries 0 … skip_first − 1.

    Returns:
        float32 ``[H, T]``: entry ``[h, r]`` is the mean of p_{t, t−r} over the batch and the
        kept queries t ≥ r (queries with no key at distance r are left out); NaN for a
        distance no kept query reaches.

    Raises:
        ValueError: for a tensor that is not ``[B, H, T, T]`` or ``skip_first`` outside
            0 … T−1.

    Example:
        >>> uniform = torch.full((1, 1, 4, 4), 0.25)
        >>> attention_by_distance(uniform, skip_first=3)
        tensor([[0.2500, 0.2500, 0.2500, 0.2500]])
    """
    t = _check_probabilities(probabilities, skip_first)
    queries = torch.arange(skip_first, t, device=probabilities.device)  # kept queries
    distances = torch.arange(t, device=probabilities.device)
    keys = queries[:, None] - distances[None, :]  # (Q, R): key position s = t − r
    valid = keys >= 0
    rows = probabilities.float()[..., skip_first:, :]  # (B, H, Q, T)
    index = keys.clamp(min=0).expand(*rows.shape[:2], -1, -1)  # (B, H, Q, R)
    weights = rows.gather(-1, index) * valid  # p_{t, t−r}, 0 where t < r
    count = valid.sum(0) * rows.shape[0]  # (R,): how many (batch, query) pairs reach r
    return weights.sum(dim=(0, 2)) / count  # (H, R); 0/0 = NaN where none reaches


def rope_pair_dims(attn: SelfAttention, pairs: Sequence[int]) -> Tensor:
    """The head dimensions that make up the given frequency pairs of a RoPE layer.

    Pair i is dimensions (i, i + r/2) in the rotate-half layout and (2i, 2i + 1) in the
    interleaved one, where r is the layer's ``rotary_dim``.

    Args:
        attn: a RoPE :class:`~posenc_lib.model.attention.SelfAttention`.
        pairs: pair indices, each in 0 … rotary_dim/2 − 1.

    Returns:
        int64 ``[2 · len(pairs)]``, sorted.

    Raises:
        ValueError: if the layer has no rotary embedding or a pair index is out of range.
    """
    if attn.rotary is None:
        raise ValueError("frequency pairs need a RoPE attention layer (rotary=None here)")
    half = attn.rotary.rotary_dim // 2
    pairs = sorted(set(int(i) for i in pairs))
    if any(not 0 <= i < half for i in pairs):
        raise ValueError(f"pairs must lie in 0 … {half - 1}, got {pairs}")
    index = torch.tensor(pairs, dtype=torch.long)
    if attn.rotary.interleaved:
        dims = torch.cat([2 * index, 2 * index + 1])
    else:
        dims = torch.cat([index, index + half])
    return dims.sort().values


@torch.no_grad()
def rope_score_by_pair(
    attn: SelfAttention,
    x: Tensor,
    distances: Sequence[int],
    positions: Tensor | None = None,
) -> Tensor:
    """Mean contribution of each RoPE frequency pair to the attention score, per distance.

    The score of query t and key s is a sum over pairs,
    (R_t q_t)ᵀ(R_s k_s)/√D = Σ_i (R_t q_t)_(i)ᵀ (R_s k_s)_(i) / √D, where (i) picks the two
    dimensions of pair i (:func:`rope_pair_dims`). This averages each term over every query
    t ≥ r of the input, with its key at s = t − r, and over the batch. All distances come
    from one cross-correlation per pair (computed with the FFT, in float64).

    Args:
        attn: a RoPE :class:`~posenc_lib.model.attention.SelfAttention`.
        x: its input ``[B, T, C]`` (e.g. captured with a forward hook).
        distances: distances r to evaluate, each in 0 … T − 1.
        positions: integer ``[T]`` or ``[B, T]``; default 0 … T − 1.

    Returns:
        float32 ``[H, P, R]``: heads, P = rotary_dim/2 pairs (pair 0 the fastest), and the
        R distances; summed over pairs, entry r is the mean score at distance r (before the
        softmax, without any bias). Dimensions that are not rotated are left out.

    Raises:
        ValueError: if the layer has no rotary embedding or a distance is outside 0 … T − 1.
    """
    if attn.rotary is None:
        raise ValueError("score by pair needs a RoPE attention layer (rotary=None here)")
    t, distances = x.shape[1], list(distances)
    if any(not 0 <= r < t for r in distances):
        raise ValueError(f"distances must lie in 0 … {t - 1}, got {list(distances)}")
    q, k, _ = attn.project(x, positions)  # (B, H, T, D), rotated
    pairs = attn.rotary.rotary_dim // 2
    dims = torch.stack([rope_pair_dims(attn, [i]) for i in range(pairs)])  # (P, 2)
    dims = dims.to(x.device)
    # (B, H, T, P, 2) -> (B, H, P, 2, T): each pair's two dimensions as sequences over t
    q_pairs = q.double()[..., dims].permute(0, 1, 3, 4, 2)
    k_pairs = k.double()[..., dims].permute(0, 1, 3, 4, 2)
    # Σ_t q(t) k(t − r) for every lag r at once: a cross-correlation, through the FFT
    # (zero-padded to 2T, so that no lag wraps around)
    n = 2 * t
    spectrum = torch.fft.rfft(q_pairs, n=n) * torch.fft.rfft(k_pairs, n=n).conj()
    lagged = torch.fft.irfft(spectrum, n=n)[..., :t].sum(dim=3)  # (B, H, P, T): lags 0 … T−1
    lags = torch.as_tensor(distances, device=x.device, dtype=torch.long)
    counts = (t - lags).double()  # queries t ≥ r that have a key at distance r
    mean = lagged[..., lags].sum(dim=0) / (q.shape[0] * counts)  # (H, P, R)
    return (mean / math.sqrt(attn.head_dim)).float()
