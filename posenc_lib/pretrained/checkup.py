"""A positional check-up of a checkpoint: what its RoPE does, measured, not read off.

Given a transformers Llama-style model (``model.model.layers[i].self_attn`` with
``q_proj``, ``k_proj``, ``v_proj``, ``o_proj`` and a rotary embedding), :func:`checkup`
reports:

1. **Layout and base.** :func:`probe_layout` captures every attention layer's input on a
   fixed token sequence, recomputes the layer's output with posenc_lib's RoPE in the
   rotate-half and in the interleaved pairing (and, as a control, at twice the base),
   and compares with what the layer returned: the candidate that reproduces it is the
   layout in use. :func:`logits_reproduced` then swaps posenc_lib's RoPE, built from
   the config's base and scaling in that layout, into every layer and compares the
   model's logits with its own.
2. **Pair usage.** :func:`pair_usage`: for every layer, head and frequency pair i,
   the mean |term of pair i in the score| over the causal (t, s) of a text, as a
   share of all pairs (the share of |score terms|: a size, not a dependence, and a
   different measure from Barbero et al.'s); in the spirit of Barbero et al. (2025,
   "Round and Round We Go! What makes Rotary Positional Encodings useful?", ICLR), who
   find high-frequency pairs building positional heads and low-frequency pairs
   carrying content.
   :func:`positional_heads` flags the heads that put half their attention or more on
   the same token (diagonal) or the previous one, the two kinds of positional head
   Barbero et al. name.
3. **The critical pair** (chapter 10): i_c, the first pair with (L_train − 1)·θ_i < 2π,
   its wavelength, and the first distance whose angle it never saw (L_train), next to
   where perplexity breaks (a measured per-block loss, or the stored run of chapter 11).
   L_train is the config's ``original_max_position_embeddings`` when its RoPE is
   scaled (Llama 3.1: 8192, not the 131 072 of ``max_position_embeddings``), and θ_i
   are the frequencies the config rotates with (:func:`config_frequencies`).
4. **Extension.** :func:`extension_effect` measures the loss past L_train at 2 L_train
   for each context-extension method; for SmolLM2 the 16 384-token passes take about
   26 min each on this book's CPU, so the command line reads chapter 11's stored runs
   instead (``--stored-extension``, one folder or several, a later folder's method
   replacing an earlier one's) and records which folder each method came from.

Command line::

    python tools/runs/checkup.py --gguf shipped --out results/pretrained/smollm2-checkup.json \
        --stored-extension results/pretrained/smollm2-persuasion-16384 \
        results/pretrained/smollm2-persuasion-16384-dynamic-factor1
    python tools/runs/checkup.py --hf-dir PATH/TO/MODEL --context-length 4096

Shapes: tokens ``[B, T]`` int64; q ``[B, H, T, D]``; k, v ``[B, H_kv, T, D]``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from posenc_lib.encodings.rope import RotaryEmbedding, rope_inverse_frequencies
from posenc_lib.encodings.rope_scaling import critical_pair_index
from posenc_lib.pretrained.loading import llama_heads

LAYOUTS: tuple[str, ...] = ("rotate_half", "interleaved")
"""Pairings of a head's dimensions: i with i + d/2 (GPT-NeoX, Hugging Face Llama), or
2i with 2i + 1 (GPT-J, Meta's original Llama code, llama.cpp's GGUF files)."""

REPRODUCES = 1e-4
"""Largest relative difference (max |Δ| / max |output|) that counts as reproducing."""

BREAK_RATIO = 1.10
"""A block 'breaks' when its loss exceeds the last in-context block's by 10 % or more."""


# --------------------------------------------------------------------- the model's RoPE


def _inner(attention: nn.Module | None) -> nn.Module | None:
    """The transformers attention layer inside a wrapper (PosencRopeAttention)."""
    return getattr(attention, "attention", attention)


def rope_settings(model: nn.Module) -> dict:
    """head_dim, base, scaling and trained context of a Llama-style model's config.

    Returns:
        ``{"head_dim", "base", "rope_scaling" (None for plain RoPE), "heads",
        "kv_heads", "layers", "max_position_embeddings"}``.

    Raises:
        ValueError: if the model has no rotary attention (no ``model.model.layers`` with
            ``q_proj``/``k_proj``, or no rotary embedding and no RoPE parameters), or
            rotates only part of each head.
    """
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    config = getattr(model, "config", None)
    if layers is None or config is None or not all(
            hasattr(_inner(getattr(layer, "self_attn", None)), "q_proj")
            for layer in layers):
        raise ValueError(f"{type(model).__name__} has no Llama-style attention layers "
                         "(model.model.layers[i].self_attn.q_proj): the check-up reads "
                         "rotary attention only")
    params = dict(getattr(config, "rope_parameters", None) or {})
    if not hasattr(inner, "rotary_emb") or "rope_theta" not in params:
        raise ValueError(f"{type(model).__name__} has no rotary position embedding "
                         "(no rotary_emb, no rope_theta): nothing to check up")
    if params.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError("the model rotates part of each head (partial_rotary_factor="
                         f"{params['partial_rotary_factor']}); the check-up expects "
                         "whole-head RoPE")
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    scaling = None if params.get("rope_type", "default") == "default" else params
    return {"head_dim": head_dim, "base": float(params["rope_theta"]),
            "rope_scaling": scaling, "heads": heads,
            "kv_heads": getattr(config, "num_key_value_heads", None) or heads,
            "layers": len(layers),
            "max_position_embeddings": getattr(config, "max_position_embeddings", None)}


def _rotary(settings: Mapping, layout: str, base: float | None = None) -> RotaryEmbedding:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got layout={layout!r}")
    scaling = settings["rope_scaling"]
    if scaling is not None:  # the base goes in on its own (a control may change it)
        scaling = {k: v for k, v in scaling.items() if k != "rope_theta"}
    return RotaryEmbedding(settings["head_dim"], base or settings["base"],
                           interleaved=layout == "interleaved", rope_scaling=scaling)


@torch.no_grad()
def capture_attention(model: nn.Module, tokens: Tensor) -> list[tuple[Tensor, Tensor]]:
    """Every attention layer's input hidden states and output, on one forward pass.

    Returns:
        One ``(input [B, T, C], output [B, T, C])`` per layer, float32.
    """
    captured: list[tuple[Tensor, Tensor]] = []

    def hook(module, args, kwargs, output):
        x = kwargs.get("hidden_states", args[0] if args else None)
        captured.append((x.float(), output[0].float()))

    handles = [layer.self_attn.register_forward_hook(hook, with_kwargs=True)
               for layer in model.model.layers]
    try:
        model(tokens, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def _probabilities(attn: nn.Module, x: Tensor, rotary: RotaryEmbedding
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(probabilities [B, H, T, T], rotated q [B, H, T, D], rotated k repeated to H, v)."""
    q, k, v = llama_heads(attn, x)
    positions = torch.arange(x.shape[1], device=x.device)
    q, k = rotary(q, positions), rotary(k, positions)
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-2, -1)) * attn.scaling
    t = x.shape[1]
    future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
    return scores.masked_fill(future, float("-inf")).softmax(dim=-1), q, k, v


def _layer_output(attn: nn.Module, x: Tensor, rotary: RotaryEmbedding) -> Tensor:
    probs, _, _, v = _probabilities(attn, x, rotary)
    out = (probs @ v).transpose(1, 2).reshape(*x.shape[:-1], -1)
    return attn.o_proj(out)


@torch.no_grad()
def probe_layout(model: nn.Module, tokens: Tensor) -> dict:
    """Which RoPE pairing (and base) reproduces every attention layer's output.

    Each layer's captured input is pushed through the layer's own projections with
    posenc_lib's RoPE in each candidate, and the output compared with the layer's:
    relative difference max |Δ| / max |output|, the largest over layers.

    Args:
        model: a Llama-style transformers model in eval mode.
        tokens: int64 ``[B, T]``, T ≥ 2 (a fixed, seeded sequence).

    Returns:
        ``{"differences": {candidate: float}, "layout": best layout,
        "reproduces": bool}``; candidates are ``"rotate_half"``, ``"interleaved"``
        (both at the config's base and scaling) and ``"rotate_half, 2× base"``.

    Raises:
        ValueError: as :func:`rope_settings`.
    """
    settings = rope_settings(model)
    candidates = {"rotate_half": _rotary(settings, "rotate_half"),
                  "interleaved": _rotary(settings, "interleaved"),
                  "rotate_half, 2× base": _rotary(settings, "rotate_half",
                                                  2 * settings["base"])}
    captured = capture_attention(model, tokens)
    differences = {}
    for name, rotary in candidates.items():
        worst = 0.0
        for layer, (x, out) in zip(model.model.layers, captured):
            attn = _inner(layer.self_attn)  # a wrapper's
            mine = _layer_output(attn, x, rotary)
            worst = max(worst, ((mine - out).abs().max() / out.abs().max()).item())
        differences[name] = worst
    layout = min(LAYOUTS, key=differences.__getitem__)
    return {"differences": differences, "layout": layout,
            "reproduces": differences[layout] < REPRODUCES}


@torch.no_grad()
def logits_reproduced(model: nn.Module, tokens: Tensor, layout: str) -> float:
    """Relative logit difference when posenc_lib's RoPE (config base and scaling, this
    layout) rotates every layer instead of the model's own: max |Δ| / max |logits|.

    The model is restored afterwards.
    """
    from posenc_lib.pretrained.loading import PosencRopeAttention

    settings = rope_settings(model)
    own = model(tokens, use_cache=False).logits.float()
    rotary = _rotary(settings, layout)
    layers = model.model.layers
    originals = [layer.self_attn for layer in layers]
    try:
        for layer in layers:
            inner = _inner(layer.self_attn)
            layer.self_attn = PosencRopeAttention(inner, rotary)
        mine = model(tokens, use_cache=False).logits.float()
    finally:
        for layer, original in zip(layers, originals):
            layer.self_attn = original
    return ((mine - own).abs().max() / own.abs().max()).item()


# --------------------------------------------------------------------- pairs and heads


def pair_indices(head_dim: int, layout: str) -> list[tuple[int, int]]:
    """The two dimensions of each pair i = 0 … d/2 − 1 in a layout."""
    half = head_dim // 2
    if layout == "interleaved":
        return [(2 * i, 2 * i + 1) for i in range(half)]
    return [(i, i + half) for i in range(half)]


@torch.no_grad()
def pair_usage(model: nn.Module, tokens: Tensor, layout: str) -> dict:
    """Each head's share of |score terms| per frequency pair, and its attention.

    For layer l, head h and pair i, u_{l,h,i} = mean over t ≥ s of |Re z_i(t, s)| =
    |q_t,i · k_s,i| (the 2-dimensional pair's term of the rotated dot product),
    divided by Σ_i of the same: a share, summing to 1 over the pairs of a head. It
    measures the terms' size, not how much the attention depends on them: softmax
    ignores the part of a term that is constant over the keys of a query, and that
    part is not removed here. A different measure from Barbero et al.'s.

    Memory: for each head it builds the terms of all (t, s, i) at once, a float32
    tensor ``[T, T, d/2]`` (T² d/2 · 4 bytes: 8 MiB at T = 256, d = 64; 2 GiB at
    T = 4096), plus a copy of its causal part; keep T to a few hundred tokens.

    Args:
        model: a Llama-style model in eval mode.
        tokens: int64 ``[1, T]`` (a text).
        layout: the pairing in use (from :func:`probe_layout`).

    Returns:
        ``{"share": float64 [layers, H, d/2], "diagonal": [layers, H],
        "previous": [layers, H], "first": [layers, H]}``: the last three are the mean
        attention on the same token, the previous token and token 0, over queries
        t ≥ 1.
    """
    settings = rope_settings(model)
    rotary = _rotary(settings, layout)
    captured = capture_attention(model, tokens)
    pairs = pair_indices(settings["head_dim"], layout)
    a = torch.tensor([p[0] for p in pairs])
    b = torch.tensor([p[1] for p in pairs])
    t = tokens.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    shares, diagonal, previous, first = [], [], [], []
    for layer, (x, _) in zip(model.model.layers, captured):
        attn = _inner(layer.self_attn)
        probs, q, k, _ = _probabilities(attn, x, rotary)
        per_head = []
        for h in range(q.shape[1]):
            qa, qb, ka, kb = q[0, h][:, a], q[0, h][:, b], k[0, h][:, a], k[0, h][:, b]
            contribution = (qa[:, None] * ka[None] + qb[:, None] * kb[None]).abs()
            per_head.append(contribution[causal].mean(dim=0).double())  # (d/2,)
        usage = torch.stack(per_head)
        shares.append(usage / usage.sum(dim=-1, keepdim=True))
        p = probs[0, :, 1:].double()  # queries t ≥ 1: (H, T − 1, T)
        rows = torch.arange(1, t)
        diagonal.append(p[:, rows - 1, rows].mean(dim=-1))
        previous.append(p[:, rows - 1, rows - 1].mean(dim=-1))
        first.append(p[:, :, 0].mean(dim=-1))
    return {"share": torch.stack(shares), "diagonal": torch.stack(diagonal),
            "previous": torch.stack(previous), "first": torch.stack(first)}


def positional_heads(usage: Mapping, threshold: float = 0.5) -> list[dict]:
    """Heads with mean attention ≥ ``threshold`` on the same or the previous token.

    Returns:
        One ``{"layer", "head", "kind": "diagonal" | "previous-token", "mass"}`` per
        head, in layer order.
    """
    found = []
    for kind, table in (("diagonal", usage["diagonal"]),
                        ("previous-token", usage["previous"])):
        for layer, head in (table >= threshold).nonzero().tolist():
            found.append({"layer": layer, "head": head, "kind": kind,
                          "mass": float(table[layer, head])})
    return sorted(found, key=lambda f: (f["layer"], f["head"]))


# --------------------------------------------------------------------- critical pair


def critical_pair(head_dim: int, base: float, context_length: int,
                  inverse_frequencies: Tensor | None = None) -> dict:
    """Chapter 10's critical pair for a model: i_c, its wavelength, its turns.

    i_c is :func:`~posenc_lib.encodings.rope_scaling.critical_pair_index` (the first pair
    with (L_train − 1)·θ_i < 2π); distances r ≥ L_train give it angles r·θ_{i_c} it never
    saw in training (up to r = λ_{i_c}, where it comes round).

    Args:
        head_dim, base: θ_i = base^(−2i/d), unless ``inverse_frequencies`` is given.
        context_length: L_train.
        inverse_frequencies: ``[d/2]`` θ_i to use instead (a scaled config's, from
            :func:`config_frequencies`).

    Raises:
        ValueError: if every pair completes a turn (no critical pair).
    """
    theta = (rope_inverse_frequencies(head_dim, base) if inverse_frequencies is None
             else inverse_frequencies).double()
    turns = (context_length - 1) * theta / (2 * math.pi)
    i_c = critical_pair_index(theta, context_length)
    return {"pair": i_c, "pairs": head_dim // 2,
            "wavelength": 2 * math.pi / theta[i_c].item(),
            "turns_within_context": turns[i_c].item(),
            "first_unseen_distance": context_length}


def trained_context(settings: Mapping, context_length: int | None = None) -> int:
    """L_train of a model: ``context_length`` if given; for a scaled RoPE config its
    ``original_max_position_embeddings`` (the context the unscaled model was trained
    at); otherwise ``max_position_embeddings``.

    Raises:
        ValueError: if the config is scaled without ``original_max_position_embeddings``,
            or has no ``max_position_embeddings``, and no ``context_length`` is given.
    """
    if context_length:
        return int(context_length)
    scaling = settings["rope_scaling"]
    if scaling is not None:
        original = scaling.get("original_max_position_embeddings")
        if not original:
            raise ValueError(f"the config's RoPE is scaled ({scaling.get('rope_type')}) "
                             "but has no original_max_position_embeddings: pass "
                             "context_length (L_train) explicitly")
        return int(original)
    if not settings["max_position_embeddings"]:
        raise ValueError("pass context_length: the config has no "
                         "max_position_embeddings")
    return int(settings["max_position_embeddings"])


def config_frequencies(settings: Mapping) -> Tensor:
    """θ_i (``[d/2]``) the config rotates with: base^(−2i/d) for plain RoPE, the scaled
    frequencies (PI, YaRN, Llama 3, …) for a scaled config (at its shortest length, for
    dynamic NTK)."""
    return _rotary(settings, "rotate_half").inv_freq.detach().clone()


def first_break(block_nll: Sequence[float], block: int, context_length: int) -> dict:
    """The first block past the context whose loss is ≥ BREAK_RATIO × the last block
    inside it.

    Returns:
        ``{"reference_nll", "break_start" (first position of that block, or None),
        "break_nll", "ratio"}``.
    """
    inside = [v for n, v in enumerate(block_nll) if (n + 1) * block <= context_length]
    if not inside:
        raise ValueError("no block lies inside the context")
    reference = inside[-1]
    for n, value in enumerate(block_nll):
        if n * block >= context_length and value >= BREAK_RATIO * reference:
            return {"reference_nll": reference, "break_start": n * block,
                    "break_nll": value, "ratio": value / reference}
    return {"reference_nll": reference, "break_start": None, "break_nll": None,
            "ratio": None}


# --------------------------------------------------------------------- extension


@torch.no_grad()
def extension_effect(model: nn.Module, tokens: Tensor, context_length: int,
                     methods: Sequence[str] = ("none", "linear", "yarn")) -> dict:
    """Mean loss (nats per token) past ``context_length`` under each method.

    Each method (:func:`~posenc_lib.encodings.rope_scaling.method_scaling` with factor T / L_train) is
    swapped in with :func:`~posenc_lib.pretrained.loading.use_posenc_rope`, the text scored in
    one pass, and the losses of the predictions at positions ≥ L_train averaged; the
    model's own RoPE comes back at the end.

    Args:
        model: a Llama-style model with plain RoPE.
        tokens: int64 ``[T]``, T > context_length.
        context_length: L_train.
        methods: names from :data:`~posenc_lib.encodings.rope_scaling.STRETCH_METHODS`.

    Returns:
        ``{method: mean nll past L_train}``.
    """
    from posenc_lib.encodings.rope_scaling import method_scaling
    from posenc_lib.pretrained.loading import token_nll, use_own_rope, use_posenc_rope

    if tokens.dim() != 1 or tokens.numel() <= context_length:
        raise ValueError(f"tokens must be [T] with T > context_length={context_length}, "
                         f"got {tuple(tokens.shape)}")
    factor = tokens.numel() / context_length
    result = {}
    try:
        for method in methods:
            use_posenc_rope(model, method_scaling(method, factor, context_length))
            nll = token_nll(model, tokens)
            result[method] = nll[context_length:].mean().item()
    finally:
        use_own_rope(model)
    return result


def stored_extension(folders: Path | str | Sequence[Path | str],
                     context_length: int) -> dict:
    """Chapter 11's stored SmolLM2 runs: the mean loss past L_train per method, and the
    per-block loss of plain RoPE (``none``).

    Args:
        folders: one folder of runs, or several: a method found in a later folder
            replaces the same method from an earlier one (e.g. dynamic NTK at
            ``factor`` 1, the other methods' stretch, from its own folder).
        context_length: L_train.

    Returns:
        ``{"past_context_nll": {method: nats per token}, "none_block_nll", "block",
        "num_tokens", "factor" (the first folder's), "book", "runs": {method:
        {"folder": folder name, "factor": that run's factor}}}``.
    """
    from posenc_lib.pretrained.long_context import load_long_context_results

    if isinstance(folders, (str, Path)):
        folders = [folders]
    results, runs = {}, {}
    for folder in folders:
        for run in load_long_context_results(folder):
            method = run["run"]["method"]
            results[method] = run
            runs[method] = {"folder": Path(folder).name, "factor": run["run"]["factor"]}
    first = load_long_context_results(folders[0])[0]["run"]
    past, blocks, block = {}, None, None
    for run in results.values():
        after = [b for b in run["blocks"] if b["first_position"] >= context_length]
        count = sum(b["last_position"] - b["first_position"] + 1 for b in after)
        past[run["run"]["method"]] = sum(
            b["nll"] * (b["last_position"] - b["first_position"] + 1)
            for b in after) / count
        if run["run"]["method"] == "none":
            blocks = [b["nll"] for b in run["blocks"]]
            block = run["run"]["block"]
    return {"past_context_nll": past, "none_block_nll": blocks, "block": block,
            "num_tokens": first["num_tokens"], "factor": first["factor"],
            "book": first["book"], "runs": runs}


# --------------------------------------------------------------------- the report


def checkup(model: nn.Module, text_tokens: Tensor, *, context_length: int | None = None,
            probe_tokens: int = 64, usage_tokens: int = 256,
            extension: Mapping | None = None, extension_tokens: Tensor | None = None,
            block: int | None = None) -> dict:
    """The whole check-up of one model, as a JSON-ready dict with a time per part.

    Args:
        model: a Llama-style transformers model with RoPE, in eval mode.
        text_tokens: int64 ``[T]`` of a text, T ≥ usage_tokens.
        context_length: L_train; default :func:`trained_context` (the config's
            ``original_max_position_embeddings`` for scaled RoPE, else
            ``max_position_embeddings``).
        probe_tokens: the layout probe's sequence length (seeded random tokens).
        usage_tokens: tokens of the text read by :func:`pair_usage` (memory grows as
            usage_tokens², see there).
        extension: a stored extension record (:func:`stored_extension`), or None to
            measure it on ``extension_tokens`` (T > L_train) with
            :func:`extension_effect`; neither: the part is reported as not measured.
        block: positions per block for the measured break (default L_train / 4).

    Raises:
        ValueError: for a model without rotary attention (:func:`rope_settings`), a
            text shorter than ``usage_tokens``, or no known L_train
            (:func:`trained_context`).
    """
    settings = rope_settings(model)
    if text_tokens.dim() != 1 or text_tokens.numel() < usage_tokens:
        raise ValueError(f"text_tokens must be [T] with T >= usage_tokens={usage_tokens},"
                         f" got {tuple(text_tokens.shape)}")
    context = trained_context(settings, context_length)
    report: dict = {"settings": {k: v for k, v in settings.items()},
                    "context_length": context, "seconds": {}}
    clock = time.perf_counter()
    generator = torch.Generator().manual_seed(0)
    probe = torch.randint(0, model.config.vocab_size, (1, probe_tokens),
                          generator=generator)
    report["layout"] = probe_layout(model, probe)
    layout = report["layout"]["layout"]
    report["layout"]["logit_difference"] = logits_reproduced(model, probe, layout)
    report["seconds"]["layout"] = time.perf_counter() - clock

    clock = time.perf_counter()
    usage = pair_usage(model, text_tokens[None, :usage_tokens], layout)
    critical = critical_pair(settings["head_dim"], settings["base"], context,
                             config_frequencies(settings))
    heads = positional_heads(usage)
    share = usage["share"]
    fast = share[..., : critical["pair"]].sum(dim=-1)  # share on pairs i < i_c
    flagged = torch.zeros(share.shape[:2], dtype=torch.bool)
    for head in heads:
        flagged[head["layer"], head["head"]] = True
    report["pairs"] = {
        "share": share.tolist(),
        "fast_share": fast.tolist(),
        "mean_fast_share_positional": fast[flagged].mean().item() if flagged.any()
        else None,
        "mean_fast_share_other": fast[~flagged].mean().item(),
        "positional_heads": heads,
        "attention_on_first_token": usage["first"].tolist(),
        "tokens": usage_tokens,
    }
    report["seconds"]["pairs"] = time.perf_counter() - clock
    report["critical_pair"] = critical

    clock = time.perf_counter()
    if extension is not None:
        report["extension"] = {"source": "from the stored run of chapter 11",
                               **extension}
        report["critical_pair"]["perplexity_break"] = {
            "source": "from the stored run of chapter 11",
            **first_break(extension["none_block_nll"], extension["block"], context)}
    elif extension_tokens is not None:
        from posenc_lib.pretrained.loading import block_nll, token_nll

        past = extension_effect(model, extension_tokens, context)
        nll = token_nll(model, extension_tokens)
        step = block or max(1, context // 4)
        report["extension"] = {"source": "measured", "past_context_nll": past,
                               "num_tokens": extension_tokens.numel(),
                               "factor": extension_tokens.numel() / context}
        report["critical_pair"]["perplexity_break"] = {
            "source": "measured", **first_break(block_nll(nll, step), step, context)}
    else:
        report["extension"] = {"source": "not measured"}
    if "past_context_nll" in report["extension"]:
        past = report["extension"]["past_context_nll"]
        report["extension"]["best"] = min(past, key=past.__getitem__)
    report["retrieval_break"] = {"source": "not measured by the check-up"}
    report["seconds"]["extension"] = time.perf_counter() - clock
    return report


# --------------------------------------------------------------------- loading, CLI


def load_model(*, gguf: str | None = None, hf_dir: str | None = None):
    """(model, tokenizer) from a GGUF file (``"shipped"``: the book's SmolLM2) or a
    Hugging Face model folder, float32, eval mode.

    Raises:
        FileNotFoundError: for a file or folder that does not exist.
        ValueError: unless exactly one of ``gguf`` and ``hf_dir`` is given.
    """
    if (gguf is None) == (hf_dir is None):
        raise ValueError("give exactly one of gguf= (a .gguf file, or 'shipped') and "
                         "hf_dir= (a Hugging Face model folder)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if gguf == "shipped":
        from posenc_lib.pretrained.loading import load_pretrained

        return load_pretrained()
    if gguf is not None:
        path = Path(gguf)
        if not path.is_file():
            raise FileNotFoundError(f"no GGUF file at {path}: pass an existing .gguf "
                                    "file, or --gguf shipped for the book's SmolLM2")
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                     dtype=torch.float32)
        return model.eval(), tokenizer
    folder = Path(hf_dir)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"no Hugging Face model at {folder} (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return model.eval(), tokenizer


# --------------------------------------------------------------------- chapter 15's readings


def tiny_llama(*, interleaved: bool = False, **config):
    """A tiny randomly initialised Llama (seed 0), where the check-up's answers are known.

    2 layers, 4 query heads sharing 2 key/value heads, head_dim 16, vocabulary 97,
    ``max_position_embeddings`` 32, RoPE base 10 000 (transformers' defaults otherwise);
    built rotate-half, as transformers' Llama is. Needs transformers (nothing is
    downloaded).

    Args:
        interleaved: replace every layer's rotation by posenc_lib's RoPE in the
            interleaved pairing (the same weights, rotated 2i with 2i + 1), so that
            :func:`probe_layout` should report ``"interleaved"``.
        **config: further :class:`transformers.LlamaConfig` fields, replacing the ones
            above (e.g. ``rope_parameters``).

    Returns:
        A ``LlamaForCausalLM`` in eval mode, float32.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    from posenc_lib.pretrained.loading import PosencRopeAttention, rope_config

    torch.manual_seed(0)
    fields = {"vocab_size": 97, "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 32,
              **config}
    model = LlamaForCausalLM(LlamaConfig(**fields)).eval()
    if interleaved:
        rotary = RotaryEmbedding(*rope_config(model), interleaved=True)
        for layer in model.model.layers:
            layer.self_attn = PosencRopeAttention(layer.self_attn, rotary)
    return model


@torch.no_grad()
def pairing_losses(model: nn.Module, tokens: Tensor) -> dict[str, float]:
    """Mean loss of a text with posenc_lib's RoPE in each pairing, on the same weights.

    :func:`probe_layout` tells which rotation the forward pass runs, not which pairing
    the weights were written for; the loss does: weights written for one pairing predict
    a text much better under it than under the other. Every layer is given posenc_lib's
    plain RoPE (head_dim and base of the config, see
    :func:`~posenc_lib.pretrained.loading.rope_config`) in the rotate-half and then the
    interleaved pairing; the layers are restored afterwards.

    Args:
        model: a transformers Llama-style causal LM with plain RoPE, in eval mode.
        tokens: int64 ``[T]``, T ≥ 2, one text.

    Returns:
        ``{"rotate_half": nats, "interleaved": nats}``: the mean negative
        log-likelihood per predicted token (float).

    Raises:
        ValueError: for tokens that are not ``[T]`` with T ≥ 2, or a model whose RoPE is
            scaled or partial (:func:`~posenc_lib.pretrained.loading.rope_config`).
    """
    from posenc_lib.pretrained.loading import PosencRopeAttention, rope_config, token_nll

    if tokens.dim() != 1 or tokens.numel() < 2:
        raise ValueError(f"tokens must be [T] with T >= 2, got {tuple(tokens.shape)}")
    head_dim, base = rope_config(model)
    layers = model.model.layers
    originals = [layer.self_attn for layer in layers]
    losses = {}
    try:
        for layout in LAYOUTS:
            rotary = RotaryEmbedding(head_dim, base, interleaved=layout == "interleaved")
            for layer, original in zip(layers, originals):
                layer.self_attn = PosencRopeAttention(_inner(original), rotary)
            losses[layout] = token_nll(model, tokens).mean().item()
    finally:
        for layer, original in zip(layers, originals):
            layer.self_attn = original
    return losses


def positional_pair_shares(pairs: Mapping, critical: int, fastest: int = 4) -> dict:
    """Positional heads against their layer-mates, from a check-up report's pair shares.

    Each positional head (:func:`positional_heads`) is compared with the mean of the
    *other* heads of its own layer, since the shares change from layer to layer: the
    share of |score terms| (:func:`pair_usage`) on the pairs i < ``critical`` (the
    pairs that complete a turn within the trained context) and on the ``fastest``
    fastest pairs.

    Args:
        pairs: the report's ``"pairs"`` entry (:func:`checkup`): ``"share"``, nested
            lists ``[layers][H][d/2]``, and ``"positional_heads"``, a list of
            ``{"layer", "head", "kind", "mass"}`` in layer and head order.
        critical: i_c (:func:`critical_pair`), 1 … d/2.
        fastest: how many of the fastest pairs the second share counts, 1 … d/2.

    Returns:
        A dict with

        * ``"share"``: float64 ``[layers, H, d/2]``; ``"flagged"``: bool ``[layers, H]``,
          the positional heads;
        * ``"positional_profile"`` and ``"mates_profile"``: float64 ``[d/2]``, the mean
          share per pair of the positional heads, and of their layer-mates (the mean
          over positional heads of each one's layer-mates' mean);
        * ``"mate_heads"``: how many heads are layer-mates of some positional head;
        * ``"positional_fast"``, ``"mates_fast"``: mean share on pairs 0 … i_c − 1;
          ``"positional_fastest"``, ``"mates_fastest"``, ``"others_fastest"`` (all
          heads not flagged): mean share on pairs 0 … fastest − 1; ``"even_split"``:
          i_c / (d/2), the share of an even split; ``"busiest_pair"``: the pair with
          the largest mean share over all heads (floats and an int);
        * ``"table"``: a :class:`pandas.DataFrame`, one row per positional head (layer
          and head 0-based, kind, attention mass, its two shares, rounded to 2 places).

    Raises:
        ValueError: for no positional heads, or ``critical`` or ``fastest`` outside
            1 … d/2.
    """
    import pandas as pd

    share = torch.tensor(pairs["share"], dtype=torch.float64)  # (layers, H, d/2)
    half = share.shape[-1]
    for name, value in (("critical", critical), ("fastest", fastest)):
        if not 1 <= value <= half:
            raise ValueError(f"{name} must be in 1 … d/2 = {half}, got {name}={value}")
    positional = pd.DataFrame(pairs["positional_heads"])
    if positional.empty:
        raise ValueError("pairs['positional_heads'] is empty: no head to compare")
    flagged = torch.zeros(share.shape[:2], dtype=torch.bool)
    flagged[positional["layer"].tolist(), positional["head"].tolist()] = True
    mates = torch.stack([share[layer][~flagged[layer]].mean(0)
                         for layer in positional["layer"]])  # (positional, d/2)
    fast = share[..., :critical].sum(-1)  # (layers, H)
    quick = share[..., :fastest].sum(-1)
    table = positional.assign(**{
        f"share on pairs 0–{critical - 1}": fast[flagged].numpy().round(2),
        f"share on pairs 0–{fastest - 1}": quick[flagged].numpy().round(2),
        "mass": positional["mass"].round(2)}).rename(columns={
            "layer": "layer (0-based)", "head": "head (0-based)", "mass": "attention mass"})
    return {
        "share": share, "flagged": flagged,
        "positional_profile": share[flagged].mean(0), "mates_profile": mates.mean(0),
        "mate_heads": int((~flagged[sorted(set(positional["layer"]))]).sum()),
        "positional_fast": fast[flagged].mean().item(),
        "mates_fast": mates[:, :critical].sum(-1).mean().item(),
        "positional_fastest": quick[flagged].mean().item(),
        "mates_fastest": mates[:, :fastest].sum(-1).mean().item(),
        "others_fastest": quick[~flagged].mean().item(),
        "even_split": critical / half,
        "busiest_pair": int(share.mean(dim=(0, 1)).argmax()),
        "table": table,
    }
