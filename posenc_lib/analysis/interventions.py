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
* :func:`drawn_positions` gives every sequence randomized positions, an ordered random
  subset of a larger range (Ruoss et al. 2023's evaluation of a model trained that way).
* :func:`ablated_attention` zeroes the attention output of chosen layers or heads: what a
  task needs them for.
* :func:`head_log_scaling` multiplies each head's queries by 1 + α_h ln(p/L0) beyond L0
  (log-n with a slope per head), and :func:`fit_head_log_scaling` fits the slopes at one
  held-out length.
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
import torch.nn.functional as F
from torch import Tensor, nn

from posenc_lib.model.attention import SelfAttention, causal_mask, window_band
from posenc_lib.analysis.attention_maps import rope_pair_dims
from posenc_lib.encodings.positions import positions_from_mask, randomized_positions, require_int
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


@contextmanager
def drawn_positions(model: TransformerLM, position_range: int, *, seed: int = 0) -> Iterator[TransformerLM]:
    """Within the ``with`` block, every call ``model(tokens)`` that passes no positions gets
    randomized ones: per sequence, an ordered random subset of 0 … ``position_range`` − 1
    (:func:`~posenc_lib.encodings.positions.randomized_positions`).

    This is how Ruoss et al. (2023) evaluate a model trained with randomized positions: at
    test time too the positions are drawn from the whole range, so a test length L ≤ M
    meets position values and gaps like those of training. Calls with explicit
    ``positions`` or an ``attention_mask`` are refused: their positions mean something.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM`.
        position_range: M, at least every length the block evaluates.
        seed: seeds the draws; the same seed and calls give the same positions.

    Yields:
        The same model.

    Raises:
        ValueError: for a call with explicit positions or a mask, or longer than M.
    """
    generator = torch.Generator().manual_seed(seed)

    def draw(module: TransformerLM, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        tokens = args[0]
        if len(args) > 1 or kwargs.get("positions") is not None or kwargs.get("attention_mask") is not None:
            raise ValueError("drawn_positions draws the positions itself: call the model with tokens only")
        positions = randomized_positions(tokens.shape[0], tokens.shape[1], position_range, generator)
        return (tokens,), {"positions": positions.to(tokens.device)}

    with _hooked([model], draw, pre=True):
        yield model


@contextmanager
def ablated_attention(model: TransformerLM, layers: Sequence[int], *, heads: Sequence[int] | None = None
                      ) -> Iterator[TransformerLM]:
    """Within the ``with`` block, the attention of the given layers (or only the given heads
    in them) contributes nothing: their head outputs are set to zero before the output
    projection (zero ablation), the rest of the model unchanged.

    What a task loses under it is what those layers' attention did for it: retrieval that
    survives the ablation of a layer did not need that layer.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM`.
        layers: layer indices in 0 … num_layers − 1.
        heads: head indices to ablate in each of those layers; None: all heads.

    Yields:
        The same model.

    Raises:
        ValueError: for a layer or head index out of range, or no layer.
    """
    blocks = list(model.blocks)
    layers = list(layers)
    if not layers or any(not 0 <= i < len(blocks) for i in layers):
        raise ValueError(f"layers must be indices in 0 … {len(blocks) - 1}, got layers={layers}")
    num_heads, head_dim = blocks[0].attn.num_heads, blocks[0].attn.head_dim
    chosen = list(range(num_heads)) if heads is None else list(heads)
    if not chosen or any(not 0 <= h < num_heads for h in chosen):
        raise ValueError(f"heads must be indices in 0 … {num_heads - 1}, got heads={heads}")
    keep = torch.ones(num_heads, head_dim)
    keep[chosen] = 0.0
    keep = keep.reshape(-1)  # (C,): the concatenated heads entering the output projection

    def zero_heads(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        y = args[0]  # (B, T, C)
        return (y * keep.to(y.device, y.dtype),), kwargs

    with _hooked([blocks[i].attn.out for i in layers], zero_heads, pre=True):
        yield model


def head_log_factors(slopes: Tensor, seq: int, original_length: int) -> Tensor:
    """The query multiplier of every (layer, head, position) under per-head log scaling:
    1 + α_{ℓ,h} · ln((p + 1)/L0) where p + 1 > L0, else 1.

    With every α = 1/ln L0 this is Qwen's log-n, log_{L0}(p + 1)
    (:mod:`~posenc_lib.encodings.logit_scaling`'s ``log_length``); a slope per head lets
    each head sharpen (α > 0) or flatten (α < 0) with length by its own amount.

    Args:
        slopes: α, float ``[num_layers, H]`` (may require grad).
        seq: T, positions 0 … T − 1.
        original_length: L0 ≥ 1 (L_train).

    Returns:
        ``[num_layers, H, T]`` in the slopes' dtype.
    """
    require_int(original_length, "original_length", 1)
    length = torch.arange(1, seq + 1, dtype=torch.float64, device=slopes.device)
    log_ratio = (length / original_length).log().clamp(min=0).to(slopes.dtype)  # (T,)
    return 1 + slopes[:, :, None] * log_ratio  # (layers, H, T)


@contextmanager
def head_log_scaling(model: TransformerLM, slopes: Tensor, original_length: int
                     ) -> Iterator[TransformerLM]:
    """Within the ``with`` block, the query of head h in layer ℓ at position p is multiplied
    by 1 + α_{ℓ,h} · ln((p + 1)/L0) beyond L0 (:func:`head_log_factors`): log-n scaling
    with a slope per head, e.g. fitted by :func:`fit_head_log_scaling`.

    A multiplier on q scales the logits q·k of that query and head (RoPE rotates q
    linearly, so it makes no difference whether it acts before or after the rotation).
    Positions are 0 … T − 1 (calls with explicit positions are not supported).

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM`.
        slopes: α, float ``[num_layers, H]``; gradients flow to it.
        original_length: L0 (L_train).

    Yields:
        The same model.

    Raises:
        ValueError: if ``slopes`` is not ``[num_layers, H]``.
    """
    layers = _attention_layers(model)
    if tuple(slopes.shape) != (len(layers), layers[0].num_heads):
        raise ValueError(f"slopes must be [num_layers={len(layers)}, heads={layers[0].num_heads}], "
                         f"got {tuple(slopes.shape)}")

    def hook_for(index: int) -> Callable:
        def scale_queries(module: nn.Module, args: tuple, kwargs: dict, out: Tensor) -> Tensor:
            b, t, three_c = out.shape
            c = three_c // 3
            heads = layers[index].num_heads
            factor = head_log_factors(slopes[index:index + 1], t, original_length)[0]  # (H, T)
            factor = factor.T.repeat_interleave(c // heads, dim=1).to(out.dtype)  # (T, C)
            return torch.cat([out[..., :c] * factor, out[..., c:]], dim=-1)
        return scale_queries

    handles = [layer.qkv.register_forward_hook(hook_for(i), with_kwargs=True)
               for i, layer in enumerate(layers)]
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()


def fit_head_log_scaling(model: TransformerLM, tokens: Tensor, length: int, original_length: int, *,
                         steps: int = 60, windows: int = 8, lr: float = 0.05, seed: int = 0) -> Tensor:
    """Fit the slopes α of :func:`head_log_scaling` at one length, the model's weights frozen:
    Adam on the mean next-token NLL of ``windows`` random windows of ``length`` tokens per
    step, α starting at 0 (no scaling).

    Wang et al. (2024, "Length generalization of causal Transformers without position
    encoding") fit a temperature per head at the target length; this fits the slope of a
    per-head log-n factor instead, so that one fit gives a multiplier at every length, 1 up
    to L0 (cited, not measured).

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM`.
        tokens: ``[N]`` held-out stream (not the test split), N > ``length``.
        length: the fitting length (> L0 for the slopes to matter).
        original_length: L0.
        steps, windows, lr, seed: the fit.

    Returns:
        float32 ``[num_layers, H]``, detached.

    Raises:
        ValueError: if ``length`` ≤ ``original_length`` or the stream is too short.
    """
    if length <= original_length:
        raise ValueError(f"length must exceed original_length={original_length} (below it every "
                         f"factor is 1), got length={length}")
    if tokens.numel() <= length:
        raise ValueError(f"tokens must hold more than length={length} tokens, got {tokens.numel()}")
    layers = _attention_layers(model)
    device = next(model.parameters()).device
    slopes = torch.zeros(len(layers), layers[0].num_heads, device=device, requires_grad=True)
    optimizer = torch.optim.Adam([slopes], lr=lr)
    generator = torch.Generator().manual_seed(seed)
    stream = tokens.long()
    was_training = model.training
    model.eval()
    frozen = [p for p in model.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    try:
        for _ in range(steps):
            starts = torch.randint(0, stream.numel() - length - 1, (windows,), generator=generator)
            batch = stream[starts[:, None] + torch.arange(length + 1)].to(device)  # (W, L + 1)
            with head_log_scaling(model, slopes, original_length):
                logits = model(batch[:, :-1]).float()
            loss = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        for p in frozen:
            p.requires_grad_(True)
        model.train(was_training)
    return slopes.detach().float()


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
def sliding_window(model: TransformerLM, window: int, *, layers: Sequence[int] | None = None
                   ) -> Iterator[TransformerLM]:
    """Within the ``with`` block, every query of every layer (or of ``layers`` only) sees only
    its last ``window`` keys.

    The mask is added to the layer's score bias (ALiBi's or T5's, if any), so it works for
    every scheme, and :func:`~posenc_lib.analysis.attention_maps.attention_probabilities` sees it too.
    With ``window = L_train`` no query meets a distance or a key count it did not meet in
    training — though through the layers information still flows from further back.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM` of any scheme.
        window: keys per query, ≥ 1 (distances 0 … window − 1).
        layers: the layer indices to restrict; None (default): every layer.

    Yields:
        The same model.

    Raises:
        ValueError: if ``window`` < 1, or a layer index is out of range.
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

    chosen = _attention_layers(model)
    if layers is not None:
        if not layers or any(not 0 <= i < len(chosen) for i in layers):
            raise ValueError(f"layers must be indices in 0 … {len(chosen) - 1}, got layers={layers}")
        chosen = [chosen[i] for i in layers]
    with _hooked(chosen, add_band, pre=True):
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
