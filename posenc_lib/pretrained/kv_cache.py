"""RoPE at inference time: the key/value cache.

A decoder that generates one token at a time keeps the keys and values of every earlier
token (the KV cache) instead of recomputing them. With RoPE the keys are stored *after*
rotation: the key of the token at position s is cached as R_s k (Hugging Face's Llama
rotates, then calls ``past_key_values.update``; so does
:class:`~posenc_lib.pretrained.loading.PosencRopeAttention`). Three consequences, each a
function here:

* :func:`kv_cache_bytes_per_token`: what the cache costs per token, from a model's
  config (2 tensors × layers × key/value heads × head_dim × bytes per element), and
  how much grouped-query attention saves against one key/value head per query head.
* :func:`rerotate_keys`: a cached key can be moved to another position without the
  unrotated key, because rotations compose, R_b R_a = R_{a+b}: rotate it by the offset
  (:func:`rerotation_error` compares moved keys with recomputed ones, layer by layer).
* :func:`cached_decode_logits` and :func:`recomputed_logits`: decoding token by token
  with the cache against recomputing every prefix without it. With plain RoPE the two
  agree to ~1e-3 in the logits (the order of additions differs). With dynamic NTK (the
  base grows with the current length L once L exceeds L0) a cached key keeps the base it
  was rotated with, so past L0 the cache holds keys rotated under several bases and the
  logits differ from a recomputation (huggingface/transformers issue #25104, "Inconsistent Rotation Base
  for Dynamic NTK Scaling RoPE", 2023; transformers 5.23 still caches rotated keys).

Shapes: ``[batch, heads, seq, head_dim]`` for keys; ``[batch, seq]`` int64 for tokens;
``[batch, seq, vocab]`` float for logits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from posenc_lib.encodings.rope import apply_rope
from posenc_lib.records import DTYPE_NAMES


def _field(config, name: str, default=None):
    """A config value from a transformers config (attribute) or a plain mapping."""
    if isinstance(config, Mapping):
        return config.get(name, default)
    value = getattr(config, name, default)
    return default if value is None else value


def _element_bytes(dtype) -> int:
    """Bytes per element of ``dtype``: a torch.dtype, a name ("bfloat16") or an int."""
    if isinstance(dtype, bool):
        raise TypeError("dtype must be a torch.dtype, a dtype name or a byte count")
    if isinstance(dtype, int):
        if dtype <= 0:
            raise ValueError(f"bytes per element must be positive, got {dtype}")
        return dtype
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
        if name not in DTYPE_NAMES:
            raise ValueError(f"unknown dtype name {dtype!r}; use one of "
                             f"{sorted(DTYPE_NAMES)}, a torch.dtype or a byte count")
        dtype = DTYPE_NAMES[name]
    if not isinstance(dtype, torch.dtype):
        raise TypeError("dtype must be a torch.dtype, a dtype name or a byte count, "
                        f"got {type(dtype).__name__}")
    return torch.empty((), dtype=dtype).element_size()


@dataclass(frozen=True)
class KVCacheSize:
    """The KV cache of one token, from a model's shapes.

    Attributes:
        layers: decoder layers that cache keys and values (``num_hidden_layers``).
        heads: query heads per layer (``num_attention_heads``).
        kv_heads: key/value heads per layer (``num_key_value_heads``).
        head_dim: width d of one head.
        element_bytes: bytes per cached element (4 for float32, 2 for bfloat16).
        bytes_per_token: 2 · layers · kv_heads · head_dim · element_bytes (bytes).
        mha_bytes_per_token: the same with kv_heads = heads (multi-head attention).
    """

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    element_bytes: int
    bytes_per_token: int
    mha_bytes_per_token: int

    @property
    def gqa_factor(self) -> int:
        """Query heads per key/value head: MHA's cache is this many times larger."""
        return self.heads // self.kv_heads

    @property
    def saved_fraction(self) -> float:
        """The share of MHA's cache that grouped-query attention does not store."""
        return 1.0 - self.bytes_per_token / self.mha_bytes_per_token


def kv_cache_bytes_per_token(config, dtype=None) -> KVCacheSize:
    """Bytes of KV cache per token of context, and what grouped-query attention saves.

    Every layer stores one key and one value vector per key/value head and token, so one
    token costs 2 · layers · H_kv · d · bytes, where grouped-query attention (Ainslie
    et al. 2023, "GQA", EMNLP; arXiv:2305.13245) shares each of the H_kv key/value
    heads among H / H_kv query heads; multi-head attention has H_kv = H. This counts
    a cache that holds every token in every layer (no sliding-window layers, no
    quantised cache).

    Args:
        config: a Hugging Face config (e.g. ``transformers.LlamaConfig``) or a mapping
            with ``num_hidden_layers``, ``num_attention_heads``, optionally
            ``num_key_value_heads`` (default: ``num_attention_heads``, i.e. MHA) and
            ``head_dim`` (default: ``hidden_size // num_attention_heads``).
        dtype: the cache's element type: a torch.dtype, a name ("bfloat16") or bytes
            per element; None takes the config's ``dtype`` (a mapping's
            ``torch_dtype`` too, the older key).

    Returns:
        A :class:`KVCacheSize` (bytes per token for the config and for MHA).

    Raises:
        ValueError: if a field is missing or not positive, ``num_attention_heads`` is
            not a multiple of ``num_key_value_heads``, or no dtype is given or found.
        TypeError: for a dtype of another type.

    Example:
        >>> cfg = {"num_hidden_layers": 30, "num_attention_heads": 9,
        ...        "num_key_value_heads": 3, "head_dim": 64}
        >>> size = kv_cache_bytes_per_token(cfg, torch.bfloat16)
        >>> size.bytes_per_token, size.mha_bytes_per_token, size.gqa_factor
        (23040, 69120, 3)
    """
    layers = _field(config, "num_hidden_layers")
    heads = _field(config, "num_attention_heads")
    if layers is None or heads is None:
        raise ValueError("config needs num_hidden_layers and num_attention_heads")
    kv_heads = _field(config, "num_key_value_heads", heads)
    head_dim = _field(config, "head_dim")
    if head_dim is None:
        hidden = _field(config, "hidden_size")
        if hidden is None:
            raise ValueError("config needs head_dim or hidden_size")
        head_dim = hidden // heads
    for name, value in (("num_hidden_layers", layers), ("num_attention_heads", heads),
                        ("num_key_value_heads", kv_heads), ("head_dim", head_dim)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if heads % kv_heads != 0:
        raise ValueError(f"num_attention_heads={heads} is not a multiple of "
                         f"num_key_value_heads={kv_heads}")
    if dtype is None:
        dtype = _field(config, "dtype")
        if dtype is None and isinstance(config, Mapping):  # an older config.json
            dtype = config.get("torch_dtype")
        if dtype is None:
            raise ValueError("the config names no dtype: pass dtype= (e.g. "
                             "torch.bfloat16 or 2 bytes)")
    element = _element_bytes(dtype)
    per_kv_head = 2 * layers * head_dim * element  # a key and a value in every layer
    return KVCacheSize(layers, heads, kv_heads, head_dim, element,
                       per_kv_head * kv_heads, per_kv_head * heads)


def rerotate_keys(
    k: Tensor,
    old_positions: Tensor,
    new_positions: Tensor,
    base: float = 10000.0,
    *,
    interleaved: bool = False,
) -> Tensor:
    """Move keys that were rotated at ``old_positions`` to ``new_positions``.

    RoPE's rotations compose, R_b R_a = R_{a+b} (each pair turns by p·θ_i, and angles
    add), so R_new k = R_{new − old} (R_old k): the cached, rotated key is rotated by
    the offset with :func:`~posenc_lib.encodings.rope.apply_rope`, and the unrotated key
    is not needed. Exact in real arithmetic; in float32 the result differs from
    rotating the unrotated key at ``new_positions`` by rounding that grows with the
    positions (the angles p·θ_i are rounded, about eps·p radians each; tests bound it).
    Only for plain RoPE, whose θ_i do not depend on the position or the length: under
    dynamic NTK the frequencies change with L and the composition does not hold.

    Args:
        k: rotated keys ``[..., seq, head_dim]`` (typically ``[batch, heads, seq,
            head_dim]``), any float dtype; arithmetic in float32 (float64 for float64).
        old_positions: integer positions they were rotated at, ``[seq]`` or
            ``[batch, seq]``.
        new_positions: integer target positions, the same shape (negative offsets
            move keys back, as after evicting earlier tokens from the cache).
        base: θ_i = base^(−2i/head_dim), the base the keys were rotated with.
        interleaved: the pairing convention, as in :func:`apply_rope`.

    Returns:
        Tensor of k's shape and dtype: R_new R_old⁻¹ k.

    Raises:
        TypeError: if a position argument is not a tensor.
        ValueError: if the two position tensors differ in shape or are not integers,
            and as :func:`apply_rope` (shapes, odd head_dim, non-float k).

    Example:
        >>> k = apply_rope(torch.randn(1, 2, 3, 8), torch.arange(3))
        >>> moved = rerotate_keys(k, torch.arange(3), torch.arange(3) + 100)
        >>> moved.shape
        torch.Size([1, 2, 3, 8])
    """
    for name, p in (("old_positions", old_positions), ("new_positions", new_positions)):
        if not isinstance(p, Tensor):
            raise TypeError(f"{name} must be an integer torch.Tensor, "
                            f"got {type(p).__name__}")
        if p.dtype.is_floating_point or p.dtype == torch.bool:
            raise ValueError(f"{name} must be an integer tensor, got dtype {p.dtype}")
    if old_positions.shape != new_positions.shape:
        raise ValueError(f"old_positions {tuple(old_positions.shape)} and "
                         f"new_positions {tuple(new_positions.shape)} must have "
                         "the same shape")
    offset = new_positions.to(torch.int64) - old_positions.to(torch.int64)
    return apply_rope(k, offset, base=base, interleaved=interleaved)


def _check_tokens(tokens: Tensor, prefill: int) -> None:
    if not isinstance(tokens, Tensor) or tokens.dim() != 2:
        raise ValueError("tokens must be an integer tensor [batch, seq]")
    if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
        raise ValueError(f"tokens must be integers, got dtype {tokens.dtype}")
    if not 1 <= prefill <= tokens.shape[1]:
        raise ValueError(f"prefill must be in 1 … seq={tokens.shape[1]}, got {prefill}")


@torch.no_grad()
def cached_decode_logits(model: nn.Module, tokens: Tensor, prefill: int = 1) -> Tensor:
    """Logits of decoding with the KV cache: a prefill, then one token per step.

    The first ``prefill`` tokens go through one forward pass (``use_cache=True``); then
    each later token is fed alone with the cache of all earlier ones, at its position,
    as generation does (teacher-forced: the given tokens, not sampled ones).

    Args:
        model: a transformers causal LM (e.g. ``LlamaForCausalLM``) in eval mode.
        tokens: ``[batch, seq]`` token ids.
        prefill: how many leading tokens the first forward pass reads (1 … seq).

    Returns:
        ``[batch, seq, vocab]`` logits, in the model's dtype, on its device: position t
        predicts token t + 1, computed with the cache of tokens 0 … t − 1.

    Raises:
        ValueError: for tokens that are not ``[batch, seq]`` integers, or a
            ``prefill`` outside 1 … seq.
    """
    _check_tokens(tokens, prefill)
    out = model(tokens[:, :prefill], use_cache=True)
    logits, cache = [out.logits], out.past_key_values
    for t in range(prefill, tokens.shape[1]):
        positions = torch.full((tokens.shape[0], 1), t, device=tokens.device)
        out = model(tokens[:, t : t + 1], past_key_values=cache, use_cache=True,
                    position_ids=positions)
        logits.append(out.logits)
        cache = out.past_key_values
    return torch.cat(logits, dim=1)


@torch.no_grad()
def recomputed_logits(model: nn.Module, tokens: Tensor, start: int = 1) -> Tensor:
    """Logits of decoding without a cache: every prefix recomputed from scratch.

    Position t's logits come from a forward pass over tokens 0 … t (no cache), so every
    key is rotated for the current length L = t + 1 (what generation without a cache
    computes). Positions before ``start`` come from one forward pass over the first
    ``start`` tokens. With plain RoPE this equals one full forward pass (the causal
    mask); with dynamic NTK it does not, since the base depends on L.

    Args:
        model: a transformers causal LM in eval mode.
        tokens: ``[batch, seq]`` token ids.
        start: the first position recomputed on its own (1 … seq).

    Returns:
        ``[batch, seq, vocab]`` logits.

    Raises:
        ValueError: as :func:`cached_decode_logits`.
    """
    _check_tokens(tokens, start)
    logits = [model(tokens[:, :start], use_cache=False).logits]
    for t in range(start, tokens.shape[1]):
        logits.append(model(tokens[:, : t + 1], use_cache=False).logits[:, -1:])
    return torch.cat(logits, dim=1)


@torch.no_grad()
def rerotation_error(model: nn.Module, tokens: Tensor, offset: int, *,
                     base: float | None = None) -> float:
    """How well cached keys, re-rotated by ``offset``, match keys computed there.

    The keys the model caches for ``tokens`` at positions 0 … T − 1 are moved to
    ``offset`` … ``offset`` + T − 1 with :func:`rerotate_keys`, and compared in every
    layer with the keys it caches when it reads the same tokens at those positions.
    With plain RoPE the two agree up to float32 rounding (every layer's hidden states
    depend on distances only).

    Args:
        model: a transformers causal LM with plain RoPE (e.g. after
            :func:`~posenc_lib.pretrained.loading.use_posenc_rope`), in eval mode; its
            cache has ``.layers[i].keys`` ``[batch, kv_heads, seq, head_dim]``.
        tokens: ``[batch, seq]`` token ids.
        offset: the shift of the positions, an int ≥ 0.
        base: the keys' RoPE base; None: the config's
            (:func:`~posenc_lib.pretrained.loading.rope_config`).

    Returns:
        The largest over layers of max |moved − recomputed| / max |recomputed|
        (float, relative).

    Raises:
        ValueError: for tokens that are not ``[batch, seq]`` integers, or a negative
            ``offset``.
    """
    _check_tokens(tokens, 1)
    seq = tokens.shape[1]
    if offset < 0:
        raise ValueError(f"offset must be >= 0 (positions start at 0), got offset={offset}")
    if base is None:
        from posenc_lib.pretrained.loading import rope_config

        _, base = rope_config(model)
    old, new = torch.arange(seq), torch.arange(offset, offset + seq)
    at_start = model(tokens, use_cache=True).past_key_values
    shifted = model(tokens, position_ids=new[None].expand(tokens.shape[0], -1)
                    .to(tokens.device), use_cache=True).past_key_values
    worst = 0.0
    for before, after in zip(at_start.layers, shifted.layers):
        moved = rerotate_keys(before.keys, old, new, base=base)
        fresh = after.keys
        worst = max(worst, ((moved - fresh).abs().max() / fresh.abs().max()).item())
    return worst
