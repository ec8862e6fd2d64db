"""Controlled changes to a trained model's attention, to test *why* it fails past L_train.

A model trained on windows of L_train tokens has never seen a relative distance of L_train or
more, nor more than L_train keys per query, nor (for absolute encodings) a position of L_train
or more. A long evaluation window changes all of these at once. Each context manager here
changes one thing while the model's weights stay as they are:

* :func:`shifted_positions` numbers the tokens from ``offset`` instead of 0: a window of
  L_train tokens whose *absolute* positions were never seen, with every distance and key
  count as in training.
* :func:`sliding_window` lets every query see only its last ``window`` keys: long inputs,
  but distances and key counts as in training (sliding-window attention, as in Longformer's
  local attention).
* :func:`clamped_rope_distances` keeps every key but scores any key more than
  ``max_distance`` back as if it were exactly ``max_distance`` back: more keys, no unseen
  distance. This is ReRoPE (Su 2023, "Rectified Rotary Position Embeddings"):
  score = (R_t q)ᵀ(R_s k) for t − s < w and (R_w q)ᵀ k beyond.

They act through hooks (on the model, or on each block's
:class:`~posenc_lib.model.attention.SelfAttention`), so :func:`~posenc_lib.training.evaluate.evaluate_perplexity`
runs unchanged inside the ``with`` block; the hooks are removed when it ends, also on an error.

Shapes: B batch, H heads, T sequence, D = head_dim, C = d_model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from posenc_lib.model.attention import SelfAttention, causal_mask, window_band
from posenc_lib.analysis.attention_maps import rope_pair_dims
from posenc_lib.encodings.positions import positions_from_mask
from posenc_lib.model.transformer import TransformerLM


def _attention_layers(model: TransformerLM) -> list[SelfAttention]:
    return [block.attn for block in model.blocks]


@contextmanager
def _hooked(modules: Sequence[nn.Module], hook: Callable, *, pre: bool) -> Iterator[None]:
    """Within the ``with`` block, ``hook`` runs on every call of each module, with the call's
    keyword arguments: before ``forward`` when ``pre`` (it may return new ``(args, kwargs)``),
    after it otherwise (it may return a new output). Removed when the block ends, also on
    an error."""
    handles = [
        (module.register_forward_pre_hook if pre else module.register_forward_hook)(hook, with_kwargs=True)
        for module in modules
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _split_call(args: tuple, kwargs: dict) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """(x, bias, positions) of a ``SelfAttention.forward(x, bias=None, positions=None)`` call."""
    x, *rest = args
    bias = rest[0] if rest else kwargs.get("bias")
    positions = rest[1] if len(rest) > 1 else kwargs.get("positions")
    return x, bias, positions


def _with_bias(args: tuple, kwargs: dict, bias: Tensor) -> tuple[tuple, dict]:
    """The same call with ``bias`` replaced, every other argument untouched."""
    if len(args) > 1:
        return (args[0], bias, *args[2:]), kwargs
    return args, {**kwargs, "bias": bias}


@contextmanager
def shifted_positions(model: TransformerLM, offset: int) -> Iterator[TransformerLM]:
    """Within the ``with`` block, every call ``model(tokens)`` numbers its tokens from ``offset``.

    Positions become offset, offset + 1, …, offset + T − 1 (added to explicit ``positions``
    when a call passes them). Relative schemes (RoPE, ALiBi, T5) see the same distances, so in
    exact arithmetic their outputs do not change; absolute ones (sinusoidal, learned) see
    vectors they were never trained with once offset + T > L_train; NoPE ignores positions.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` of any scheme.
        offset: the first position, ≥ 0.

    Yields:
        The same model.

    Raises:
        ValueError: if ``offset`` < 0 (a learned model raises its own error in ``forward``
            for a position beyond its table).
    """
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got offset={offset}")

    def shift(module: TransformerLM, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        # forward(tokens, positions=None, attention_mask=None), called either way
        tokens = args[0]
        positions = args[1] if len(args) > 1 else kwargs.get("positions")
        mask = args[2] if len(args) > 2 else kwargs.get("attention_mask")
        if positions is None and mask is not None:
            positions = positions_from_mask(mask)  # (B, T), what forward would use
        elif positions is None:
            positions = torch.arange(tokens.shape[1], device=tokens.device)  # (T,)
        return (tokens,), {"positions": positions + offset, "attention_mask": mask}

    with _hooked([model], shift, pre=True):
        yield model


def band_bias(seq: int, window: int, *, device: torch.device | str | None = None) -> Tensor:
    """Additive mask ``[seq, seq]``: 0 where 0 ≤ t − s < window, −inf where t − s ≥ window.

    Keys after the query (t − s < 0) are left at 0: the causal mask removes them.

    The rule is :func:`~posenc_lib.model.attention.window_band` (without ``causal``).

    Raises:
        ValueError: if ``window`` is not an integer ≥ 1.

    Example:
        >>> band_bias(3, 2)
        tensor([[0., 0., 0.],
                [0., 0., 0.],
                [-inf, 0., 0.]])
    """
    positions = torch.arange(seq, device=device)
    seen = window_band(positions[:, None], positions[None, :], window, causal=False)  # (T, S)
    return torch.zeros(seq, seq, device=device).masked_fill(~seen, float("-inf"))


@contextmanager
def sliding_window(model: TransformerLM, window: int) -> Iterator[TransformerLM]:
    """Within the ``with`` block, every query of every layer sees only its last ``window`` keys.

    The mask is added to the layer's score bias (ALiBi's or T5's, if any), so it works for
    every scheme, and :func:`~posenc_lib.analysis.attention_maps.attention_probabilities` sees it too.
    With ``window = L_train`` no query meets a distance or a key count it did not meet in
    training — though through the layers information still flows from further back.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` of any scheme.
        window: keys per query, ≥ 1 (distances 0 … window − 1).

    Yields:
        The same model.

    Raises:
        ValueError: if ``window`` < 1.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got window={window}")

    def add_band(module: SelfAttention, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        x, bias, _ = _split_call(args, kwargs)
        band = band_bias(x.shape[1], window, device=x.device)  # (T, T)
        if kwargs.get("mask") is not None:  # a finished score mask (bias + causal part)
            return args, {**kwargs, "mask": kwargs["mask"] + band.to(kwargs["mask"].dtype)}
        if bias is None:
            bias = band.expand(module.num_heads, -1, -1)  # (H, T, T)
        else:
            bias = bias + band  # (…, H, T, T) + (T, T)
        return _with_bias(args, kwargs, bias)

    with _hooked(_attention_layers(model), add_band, pre=True):
        yield model


def clamped_rope_scores(
    attn: SelfAttention,
    x: Tensor,
    max_distance: int,
    positions: Tensor | None = None,
    *,
    pairs: Sequence[int] | None = None,
) -> Tensor:
    """RoPE attention scores with every distance t − s above ``max_distance`` clamped to it.

    score_ts = (R_t q_t)ᵀ (R_s k_s) / √D where t − s ≤ max_distance, and (R_w q_t)ᵀ k_s / √D
    with w = max_distance beyond: since (R_t q)ᵀ(R_s k) = qᵀ R_{s−t} k, that is the score the
    pair would get at distance w (Su 2023, ReRoPE). With ``pairs``, only those frequency
    pairs are clamped and the others keep their true distance (the score is a sum over
    pairs, so the two parts add).

    Args:
        attn: a RoPE :class:`~posenc_lib.model.attention.SelfAttention` (``attn.rotary`` set).
        x: its input ``[B, T, C]``.
        max_distance: w ≥ 0.
        positions: integer ``[T]`` or ``[B, T]``; default 0 … T−1.
        pairs: frequency pairs to clamp (see :func:`rope_pair_dims`); default all.

    Returns:
        float32 ``[B, H, T, T]`` scores, before the causal mask and the softmax.

    Raises:
        ValueError: if the layer has no rotary embedding, ``max_distance`` < 0, or a pair
            index is out of range.
    """
    if attn.rotary is None:
        raise ValueError("clamped RoPE distances need a RoPE attention layer (rotary=None here)")
    if max_distance < 0:
        raise ValueError(f"max_distance must be >= 0, got max_distance={max_distance}")
    b, t, c = x.shape
    q, k, _ = attn.qkv(x).split(c, dim=-1)  # 3 × (B, T, C)
    # (B, T, C) -> (B, H, T, D): the projections before any rotation
    q, k = (z.view(b, t, attn.num_heads, attn.head_dim).transpose(1, 2) for z in (q, k))
    positions = torch.arange(t, device=x.device) if positions is None else positions
    q_rot, k_rot = attn.rotary(q, positions), attn.rotary(k, positions)
    clamped = torch.zeros(attn.head_dim, dtype=torch.bool, device=x.device)  # (D,)
    if pairs is None:
        clamped[:] = True
    else:
        clamped[rope_pair_dims(attn, pairs).to(x.device)] = True
    free = ~clamped
    # the clamped pairs at their true distance and at distance w …
    near = (q_rot * clamped).float() @ k_rot.float().transpose(-2, -1)  # (B, H, T, T)
    q_far = attn.rotary(q, torch.full((t,), max_distance, device=x.device))
    far = (q_far * clamped).float() @ k.float().transpose(-2, -1)  # (B, H, T, T): at w
    distance = positions[..., :, None] - positions[..., None, :]  # (T, T) or (B, T, T)
    if distance.dim() == 3:
        distance = distance[:, None]  # (B, 1, T, T)
    scores = torch.where(distance <= max_distance, near, far)
    if bool(free.any()):  # … plus the pairs that keep their true distance
        scores = scores + (q_rot * free).float() @ k_rot.float().transpose(-2, -1)
    return scores / math.sqrt(attn.head_dim)


@contextmanager
def clamped_rope_distances(
    model: TransformerLM, max_distance: int, *, pairs: Sequence[int] | None = None
) -> Iterator[TransformerLM]:
    """Within the ``with`` block, RoPE layers score far keys as if they were ``max_distance`` back.

    Every key stays visible, so a long window still brings more keys per query than
    training did, but no relative distance above ``max_distance`` reaches the rotations.
    With ``max_distance = L_train − 1`` the model meets only distances it was trained on.
    The attention output is recomputed from :func:`clamped_rope_scores` (SDPA cannot take
    two score matrices), so this is slower than the plain model.
    :func:`~posenc_lib.analysis.attention_maps.attention_probabilities` does not see the clamp.

    Args:
        model: a RoPE :class:`~posenc_lib.model.transformer.TransformerLM`.
        max_distance: w ≥ 0.
        pairs: clamp only these frequency pairs (e.g. the slow ones that never turned a full
            circle in training); default all.

    Yields:
        The same model.

    Raises:
        ValueError: if the model is not a RoPE model, ``max_distance`` < 0, or a pair index
            is out of range.
    """
    if model.config.position != "rope":
        raise ValueError(f"clamped RoPE distances need a RoPE model, got {model.config.position!r}")
    if max_distance < 0:
        raise ValueError(f"max_distance must be >= 0, got max_distance={max_distance}")
    if pairs is not None:
        rope_pair_dims(model.blocks[0].attn, pairs)  # fail now, in words, not in the hook

    def recompute(module: SelfAttention, args: tuple, kwargs: dict, output: Tensor) -> Tensor:
        x, bias, positions = _split_call(args, kwargs)
        b, t, c = x.shape
        scores = clamped_rope_scores(module, x, max_distance, positions, pairs=pairs)
        if kwargs.get("mask") is not None:  # a finished score mask: bias and causal part
            scores = scores + kwargs["mask"].float()
        else:
            if bias is not None:
                scores = scores + bias.float()
            scores = scores + causal_mask(t, t, device=x.device)
        v = module.qkv(x).split(c, dim=-1)[2]  # (B, T, C)
        v = v.view(b, t, module.num_heads, module.head_dim).transpose(1, 2)  # (B, H, T, D)
        y = scores.softmax(dim=-1).to(v.dtype) @ v  # (B, H, T, D)
        return module.out(y.transpose(1, 2).reshape(b, t, c))  # (B, T, C)

    with _hooked(_attention_layers(model), recompute, pre=False):
        yield model


def long_window_conditions(
    model: TransformerLM,
    score: Callable[..., float],
    train_length: int,
    multiples: Sequence[int] = (4, 16),
    *,
    clamp_distances: bool = False,
) -> dict[str, dict[int, float]]:
    """Score a model under the interventions that each change one thing a long window of
    L = k × L_train brings, for every k of ``multiples``:

    * ``"shifted positions"``: windows of L_train, positions shifted by (k − 1) L_train
      (:func:`shifted_positions`): the new positions alone;
    * ``"sliding attention"``: windows of L, each query sees its last L_train keys
      (:func:`sliding_window`): the long window without the distances past L_train;
    * ``"clamped distances"`` (only with ``clamp_distances``, RoPE): windows of L, every
      distance clamped to L_train − 1 (:func:`clamped_rope_distances`), two windows at a
      time (the clamp builds two score matrices per layer).

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM`.
        score: ``score(model, length, **options)`` → a number, e.g. the perplexity of
            windows of ``length`` over a fixed span of text (options: ``batch_size``).
        train_length: L_train.
        multiples: the k to score.
        clamp_distances: also score the clamp (the model must use RoPE).

    Returns:
        condition → k → score, in the order listed above.

    Raises:
        ValueError: from the interventions (e.g. a clamp on a model without RoPE).
    """
    conditions: dict[str, dict[int, float]] = {"shifted positions": {}, "sliding attention": {}}
    for k in multiples:
        with shifted_positions(model, (k - 1) * train_length):
            conditions["shifted positions"][k] = score(model, train_length)
        with sliding_window(model, train_length):
            conditions["sliding attention"][k] = score(model, k * train_length)
    if clamp_distances:
        conditions["clamped distances"] = {}
        for k in multiples:
            with clamped_rope_distances(model, train_length - 1):
                conditions["clamped distances"][k] = score(model, k * train_length, batch_size=2)
    return conditions
