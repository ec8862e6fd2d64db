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
from collections.abc import Mapping, Sequence

import pandas as pd
import torch
from torch import Tensor

from posenc_lib.encodings.alibi import alibi_bias
from posenc_lib.model.attention import SelfAttention, attend, causal_mask
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


@torch.no_grad()
def attention_input(model: TransformerLM, tokens: Tensor, layer: int) -> Tensor:
    """The input of one layer's attention for ``tokens`` (after the block's layer norm).

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM`.
        tokens: integer ``[B, T]``.
        layer: block index, 0 … num_layers − 1.

    Returns:
        ``[B, T, C]`` in the model's dtype: what ``model.blocks[layer].attn`` receives, e.g.
        for :func:`rope_score_by_pair`.

    Raises:
        ValueError: for a layer index out of range.
    """
    if not 0 <= layer < len(model.blocks):
        raise ValueError(f"layer must lie in 0 … {len(model.blocks) - 1}, got layer={layer}")
    captured: dict[str, Tensor] = {}
    handle = model.blocks[layer].attn.register_forward_pre_hook(
        lambda module, args: captured.update(x=args[0]))
    try:
        model(tokens)
    finally:
        handle.remove()
    return captured["x"]


@torch.no_grad()
def rope_mean_pair_prediction(attn: SelfAttention, x: Tensor, distances: Sequence[int],
                              inverse_frequencies: Tensor) -> Tensor:
    """Each RoPE pair's mean score term at distance r predicted from the mean query and the
    mean key alone: Re(q̄_i · conj(k̄_i) · e^{i r θ_i}) / √D, averaged over the heads.

    With q̄_i, k̄_i the mean over batch and positions of pair i's unrotated query and key
    (as complex numbers), this is what :func:`rope_score_by_pair` would measure if the
    contents of a query and a key at distance r were unrelated: a wave of wavelength
    2π/θ_i.

    Args:
        attn: a RoPE :class:`~posenc_lib.model.attention.SelfAttention`.
        x: its input ``[B, T, C]`` (:func:`attention_input`).
        distances: the distances r (any integers ≥ 0).
        inverse_frequencies: θ_i of each pair, ``[P]`` (rad per position).

    Returns:
        float64 ``[P, R]``: pair (0 the fastest) × distance, like the mean over heads of
        :func:`rope_score_by_pair`.

    Raises:
        ValueError: if the layer has no rotary embedding or ``inverse_frequencies`` does
            not hold one θ per rotated pair.
    """
    if attn.rotary is None:
        raise ValueError("a pair prediction needs a RoPE attention layer (rotary=None here)")
    pairs = attn.rotary.rotary_dim // 2
    if inverse_frequencies.shape != (pairs,):
        raise ValueError(f"inverse_frequencies must have shape ({pairs},), got "
                         f"{tuple(inverse_frequencies.shape)}")
    theta = inverse_frequencies.double()
    r_axis = torch.as_tensor(list(distances)).double()
    no_rotation = torch.zeros(x.shape[1], dtype=torch.long, device=x.device)
    q_raw, k_raw, _ = attn.project(x, no_rotation)  # (B, H, T, D), before any rotation
    predicted = []
    for i in range(pairs):
        first, second = rope_pair_dims(attn, [i]).tolist()  # pair i, as a complex
        q_mean = torch.complex(q_raw[..., first].double(), q_raw[..., second].double())
        k_mean = torch.complex(k_raw[..., first].double(), k_raw[..., second].double())
        q_mean, k_mean = q_mean.mean((0, 2)), k_mean.mean((0, 2))  # (H,): over B and t
        turn = torch.exp(1j * r_axis * theta[i])  # (R,)
        wave = (q_mean[:, None] * k_mean.conj()[:, None] * turn).real  # (H, R)
        predicted.append(wave.mean(0) / math.sqrt(attn.head_dim))
    return torch.stack(predicted)  # (P, R)


def excess_over_range(curve: Tensor, split: int) -> float:
    """How far a curve's part from index ``split`` on leaves the range [min, max] of its
    part before ``split``, as a share of that range (0 when it stays inside).

    Args:
        curve: 1-D, at least ``split`` + 1 values (e.g. a mean score term by distance,
            split at L_train).
        split: 1 … len(curve) − 1.

    Raises:
        ValueError: for a curve that is not 1-D or a split outside 1 … len(curve) − 1.
    """
    if curve.dim() != 1 or not 1 <= split < len(curve):
        raise ValueError(f"need a 1-D curve and 1 <= split < len(curve), got shape "
                         f"{tuple(curve.shape)} and split={split}")
    inside, outside = curve[:split], curve[split:]
    over = max((outside.max() - inside.max()).item(),
               (inside.min() - outside.min()).item(), 0.0)
    return over / (inside.max() - inside.min()).item()


def effective_share(weights: Tensor) -> float:
    """The effective number of entries of a distribution, 1 / Σ q², as a share of its
    length: 1 for equal weights, 1/n for all weight on one of n entries.

    Args:
        weights: 1-D, non-negative, not all zero (normalised here: q = w / Σ w).

    Raises:
        ValueError: for weights that are not 1-D or sum to zero.
    """
    if weights.dim() != 1 or not weights.sum() > 0:
        raise ValueError("weights must be 1-D with a positive sum")
    q = weights / weights.sum()
    return (1 / q.pow(2).sum()).item() / len(q)


def last_queries_attention(model: TransformerLM, tokens: Tensor, layer: int, *,
                           last_queries: int, beyond: int, near: int) -> dict:
    """Summaries of one layer's attention for the last ``last_queries`` queries of
    ``tokens`` (the first T − last_queries are skipped), each the mean over the batch,
    the heads and those queries.

    Returns:
        ``entropy`` (nats, :func:`attention_entropy`), ``near`` (share of the weight on
        the nearest ``near`` keys), ``beyond`` (share on keys more than ``beyond`` back,
        :func:`attention_mass_beyond`), all floats, and ``profile``: float32 ``[H, T]``,
        the mean weight by distance per head (:func:`attention_by_distance`).

    Raises:
        ValueError: as :func:`attention_probabilities` and the summaries (e.g.
            ``last_queries`` larger than T).
    """
    probs = attention_probabilities(model, tokens, layer)  # (B, H, T, T)
    skip = tokens.shape[1] - last_queries
    return {
        "entropy": attention_entropy(probs, skip_first=skip).mean().item(),
        "near": 1 - attention_mass_beyond(probs, near, skip_first=skip).mean().item(),
        "beyond": attention_mass_beyond(probs, beyond, skip_first=skip).mean().item(),
        "profile": attention_by_distance(probs, skip_first=skip),
    }


def far_weight_follows_score(score_by_pair: Tensor, weight_by_distance: Tensor,
                             train_length: int) -> dict[str, Tensor]:
    """Per head, does the attention weight past L_train follow the mean score there?

    For each head h, over the distances r = L_train … R − 1 (R the distances of
    ``score_by_pair``): the correlation of log weight with the mean score (summed over
    the pairs), the number of distances whose mean score is higher than anywhere at
    r < L_train, and their share of the weight at r ≥ L_train.

    Args:
        score_by_pair: ``[H, P, R]`` from :func:`rope_score_by_pair` (distances 0 … R − 1).
        weight_by_distance: ``[H, T]``, T ≥ R, from :func:`attention_by_distance`.
        train_length: L_train, 1 … R − 1.

    Returns:
        float64 ``corr``, int64 ``above`` and float64 ``share``, each ``[H]``.

    Raises:
        ValueError: for mismatched heads, T < R, or L_train outside 1 … R − 1.
    """
    heads, _, reach = score_by_pair.shape
    if weight_by_distance.shape[0] != heads or weight_by_distance.shape[1] < reach:
        raise ValueError(f"weight_by_distance must be [{heads}, T >= {reach}], got "
                         f"{list(weight_by_distance.shape)}")
    if not 1 <= train_length < reach:
        raise ValueError(f"train_length must lie in 1 … {reach - 1}, got {train_length}")
    far = slice(train_length, reach)
    mean_score = score_by_pair.sum(1)  # (H, R): mean score at each distance, all pairs
    corr, above_counts, shares = [], [], []
    for h in range(heads):
        weight = weight_by_distance[h, :reach].double()  # mean weight at each distance
        score = mean_score[h].double()
        above = score[far] > score[:train_length].max()  # higher than anywhere before
        corr.append(torch.corrcoef(torch.stack([weight[far].log(), score[far]]))[0, 1].item())
        above_counts.append(int(above.sum()))
        shares.append((weight[far][above].sum() / weight[far].sum()).item())
    return {"corr": torch.tensor(corr, dtype=torch.float64),
            "above": torch.tensor(above_counts), "share": torch.tensor(shares, dtype=torch.float64)}


def alibi_bias_attention(num_heads: int, length: int) -> Tensor:
    """The causal attention weights of the ALiBi bias alone, as if every score q·k were 0.

    softmax(−m_h · (t − s) + causal mask) over the keys s (Press et al. 2022, eq. 1 without
    the content term): the weights a head would give from its slope alone, the baseline
    against which a trained head's weights are compared.

    Args:
        num_heads: heads H ≥ 1 (slopes from :func:`~posenc_lib.encodings.alibi.alibi_slopes`).
        length: sequence length L ≥ 1 (queries and keys).

    Returns:
        float32 ``[H, L, L]``; row t sums to 1 over keys 0 … t and is 0 after t.

    Raises:
        ValueError: for num_heads < 1 or length < 1.
    """
    if num_heads < 1 or length < 1:
        raise ValueError(f"num_heads and length must be >= 1, got num_heads={num_heads}, "
                         f"length={length}")
    return (alibi_bias(num_heads, length, length) + causal_mask(length, length)).softmax(-1)


def alibi_padding_error(attention_mask: Tensor, bias: Tensor, *, head_dim: int = 16) -> float:
    """How far the real tokens' attention outputs move when a row is padded, with a given bias.

    Draws random q, k, v ``[1, H, T, head_dim]`` (from torch's global generator), attends
    over the padded row with ``bias`` plus a −inf mask on the pad keys, and compares the
    real queries' outputs with attention over the real tokens alone (ALiBi bias of their
    own length, :func:`~posenc_lib.encodings.alibi.alibi_bias`). A bias built from the
    mask (:func:`~posenc_lib.encodings.alibi.alibi_bias_from_mask`) gives ≈ 0 for any
    padding; one built from ``arange`` only where the pads are all on the left.

    Args:
        attention_mask: ``[1, T]``, 1/True for real tokens (at least one).
        bias: the padded row's bias ``[H, T, T]`` (float32).
        head_dim: width of the random q, k, v.

    Returns:
        The largest absolute difference of the real queries' outputs (a Python float).

    Raises:
        ValueError: for a mask not ``[1, T]`` with a real token, or a bias not ``[H, T, T]``.
    """
    if attention_mask.dim() != 2 or attention_mask.shape[0] != 1 or not attention_mask.bool().any():
        raise ValueError(f"attention_mask must be [1, T] with a real token, got shape "
                         f"{tuple(attention_mask.shape)}")
    length = attention_mask.shape[1]
    if bias.dim() != 3 or tuple(bias.shape[1:]) != (length, length):
        raise ValueError(f"bias must be [H, {length}, {length}], got {tuple(bias.shape)}")
    heads = bias.shape[0]
    q, k, v = torch.randn(3, 1, heads, length, head_dim).unbind(0)
    real = attention_mask[0].bool()
    n = int(real.sum())
    alone = attend(q[:, :, real], k[:, :, real], v[:, :, real], alibi_bias(heads, n, n))
    pad_keys = torch.zeros(1, 1, 1, length).masked_fill(
        ~attention_mask.bool()[:, None, None, :], float("-inf"))
    padded = attend(q, k, v, bias + pad_keys)[:, :, real]  # (1, H, n, d)
    return (padded - alone).abs().max().item()


def head_table(columns: Mapping[str, Tensor], *, name: str | None = None) -> pd.DataFrame:
    """A table with one row per head: per-head values, and per-layer ones spread into columns.

    Args:
        columns: column name → ``[H]`` tensor (one column) or ``[layers, H]`` tensor (one
            column per layer, named ``key.format(layer)`` for layer = 1, 2, …, so the key
            holds a ``{}``).
        name: a name for the columns axis (what the numbers are), or None.

    Returns:
        A float DataFrame indexed by "head h" = 1 … H.

    Raises:
        ValueError: for an empty ``columns``, a tensor that is not 1-D or 2-D, or
            disagreeing numbers of heads.
    """
    if not columns:
        raise ValueError("columns must name at least one column")
    table, heads = {}, {values.shape[-1] for values in columns.values()}
    if len(heads) != 1:
        raise ValueError(f"columns must agree on the number of heads, got {sorted(heads)}")
    for key, values in columns.items():
        if values.dim() == 1:
            table[key] = values.tolist()
        elif values.dim() == 2:
            table.update({key.format(layer + 1): row.tolist() for layer, row in enumerate(values)})
        else:
            raise ValueError(f"column {key!r} must be [H] or [layers, H], got {tuple(values.shape)}")
    index = pd.Index(range(1, heads.pop() + 1), name="head h")
    return pd.DataFrame(table, index=index).rename_axis(columns=name)


@torch.no_grad()
def left_padding_gaps(model: TransformerLM, tokens: Tensor, attention_mask: Tensor
                      ) -> tuple[float, float]:
    """How far a left-padded prompt's logits move from the prompt's own, for the two ways
    of numbering its positions.

    Row 0 of ``tokens`` is a prompt with its pads on the left. Its real tokens' logits
    are compared with those of the prompt run alone, once with the positions the model
    derives from ``attention_mask`` (0 at the first real token) and once with the column
    numbers 0 … T − 1 as positions.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` (put in eval mode).
        tokens: ``[B, T]`` byte ids; row 0 left-padded.
        attention_mask: ``[B, T]``, 0 at the pads, 1 at real tokens; row 0 is 0 … 0 1 … 1.

    Returns:
        ``(from the mask, column positions)``: the largest absolute logit differences of
        the prompt's real tokens, as Python floats.

    Raises:
        ValueError: if the shapes differ or row 0 of the mask is not pads then real tokens.
    """
    if tokens.shape != attention_mask.shape or tokens.dim() != 2:
        raise ValueError(f"tokens and attention_mask must be one [B, T] shape, got "
                         f"{tuple(tokens.shape)} and {tuple(attention_mask.shape)}")
    pads = int((attention_mask[0] == 0).sum())
    if pads == tokens.shape[1] or attention_mask[0, pads:].eq(0).any():
        raise ValueError("row 0 of attention_mask must be pads (0) then real tokens (1), "
                         f"got {attention_mask[0].tolist()}")
    alone = model(tokens[:1, pads:])[0]  # [T - pads, vocab]: the prompt by itself
    from_mask = model(tokens, attention_mask=attention_mask)[0, pads:]
    columns = torch.arange(tokens.shape[1], device=tokens.device)
    by_column = model(tokens, positions=columns, attention_mask=attention_mask)[0, pads:]
    return (from_mask - alone).abs().max().item(), (by_column - alone).abs().max().item()
