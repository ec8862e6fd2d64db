"""A small decoder-only Transformer language model whose positional scheme is chosen by name.

Pre-LayerNorm blocks (as GPT-2), causal attention through PyTorch's SDPA, byte vocabulary.
Shapes: B batch, T sequence, C = d_model, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Literal

import torch
from torch import Tensor, nn

from posenc_book.schemes import SCHEMES
from posenc_lib.model.attention import SelfAttention, local_mask, score_mask
from posenc_lib.encodings import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    T5RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    positions_from_mask,
    sinusoidal_encoding,
    t5_relative_position_bucket,
)
from posenc_lib.encodings.forget_gate import gate_bias_for_slopes
from posenc_lib.encodings.learned import DEFAULT_INIT_STD
from posenc_lib.encodings.positions import check_positions, require_tensor
from posenc_lib.encodings.logit_scaling import applies_to_layer, normalize_logit_scaling
from posenc_lib.encodings.rope_partial import (
    PARTIAL_FORMS,
    neox_rotary_dim,
    p_rope_kept_pairs,
)
from posenc_lib.encodings.rope_scaling import (
    LAYER_TYPES,
    is_per_layer_type,
    normalize_rope_parameters,
    resolve_base,
)

PositionScheme = Literal["none", "sinusoidal", "learned", "rope", "alibi", "t5"]


@dataclass(frozen=True)
class ModelConfig:
    """Size and positional scheme of a :class:`TransformerLM`.

    Attributes:
        position: ``"none"`` (NoPE), ``"sinusoidal"``, ``"learned"``, ``"rope"``, ``"alibi"``
            or ``"t5"`` (T5's bucketed relative bias).
        d_model, num_layers, num_heads: width C, depth and heads H (C divisible by H).
        max_positions: rows of the learned table (only for ``"learned"``): the longest input.
        vocab_size: 256 for bytes.
        mlp_ratio: hidden width of the MLP as a multiple of d_model.
        rope_base: RoPE's base (θ_i = base^(−2i/head_dim)).
        sinusoidal_base: the sinusoidal table's base.
        learned_init: ``"normal"`` (N(0, learned_init_std²)) or ``"sinusoidal"`` (start the
            learned table from the sinusoidal values).
        learned_init_std: standard deviation of the ``"normal"`` start, 0.02 by default (Hugging
            Face's ``initializer_range`` for GPT-2 and BERT); 1.0 is PyTorch's ``nn.Embedding``
            default, N(0, 1).
        position_after_norm: add absolute encodings to LayerNorm(token embeddings) instead of
            the raw embeddings.
        token_init_std: standard deviation of the token embedding at initialisation. 1.0
            (default) is PyTorch's ``nn.Embedding`` default, N(0, 1); 0.02 is GPT-2's
            token table; ``d_model ** -0.5`` with ``scale_token_embedding=True`` is the start
            of tensor2tensor (the original Transformer's code) and of fairseq's
            ``Embedding``. Other values rescale the same
            N(0, 1) draw, so every other weight starts the same as with the default.
        scale_token_embedding: multiply the token embeddings by sqrt(d_model) before
            anything is added to them (Vaswani et al. 2017 §3.4; fairseq's
            ``embed_scale``). False (default): no multiplier.
        rope_scaling: only for ``"rope"``: a context-extension method in Hugging
            Face's vocabulary (see :mod:`~posenc_lib.encodings.rope_scaling`), e.g.
            ``{"rope_type": "yarn", "factor": 4.0,
            "original_max_position_embeddings": 128}``; None for plain RoPE. Stored
            normalised (defaults filled in), so equal methods give equal configs.
            May also be transformers v5's nested per-layer-type form,
            ``{"sliding_attention": {...}, "full_attention": {...}}``, with one entry
            for every type in ``layer_types``; an entry's ``rope_theta`` is that
            type's base (Gemma 3: 1e4 local, 1e6 with linear ×8 global), else
            ``rope_base``.
        rope_fraction: partial rotation, in (0, 1]; 1.0 (default) rotates every pair.
        rope_fraction_form: ``"neox"`` (rotate the first ⌊fraction·head_dim⌋ dims,
            frequencies spread over that width: GPT-NeoX's ``rotary_pct``) or
            ``"p_rope"`` (keep the ⌊fraction·head_dim/2⌋ fastest pairs, θ_i = 0 for
            the rest: Barbero et al. 2025); see
            :mod:`~posenc_lib.encodings.rope_partial`.
        layer_types: one entry per layer, each ``"full_attention"`` or
            ``"sliding_attention"`` (transformers' vocabulary); None (default): all
            full.
        sliding_window: the window W of the ``"sliding_attention"`` layers (each query
            sees itself and W − 1 earlier keys); required when there is one, else None.
        nope_layers: indices of the layers that rotate nothing (NoPE layers in a RoPE
            model: SmolLM3 every 4th, Llama 4's iRoPE); position ``"rope"`` only.
            :func:`every_kth_layer` builds the usual pattern. Default None (none).
            Both lists are stored as lists (nope_layers sorted, an empty one as None),
            so a config survives ``to_dict`` → JSON → ``TrainConfig.from_dict``
            unchanged.
        logit_scaling: a rule of :mod:`~posenc_lib.encodings.logit_scaling`
            (DeepSeek's YaRN softmax scale, Qwen's log-length queries, Llama 4's
            temperature in NoPE layers), or None (default). Stored normalised.
        forget_gate: every layer adds the Forgetting Transformer's learned recency bias
            (Lin et al. 2025; :mod:`~posenc_lib.encodings.forget_gate`); with
            ``position="none"`` this is FoX. Default False. Left out of :meth:`to_dict`
            when False, so configs written before it existed keep their cache keys.
        forget_gate_init: ``"linear"`` (default: PyTorch's ``nn.Linear`` start, the
            paper's default) or ``"alibi"`` (gate weights 0 and biases
            :func:`~posenc_lib.encodings.forget_gate.gate_bias_for_slopes` of ALiBi's
            slopes: the model starts as ALiBi, and the gates may then learn to depend on
            the data). Left out of :meth:`to_dict` at its default.
    """

    position: PositionScheme = "rope"
    d_model: int = 128
    num_layers: int = 2
    num_heads: int = 4
    max_positions: int = 128
    vocab_size: int = 256
    mlp_ratio: int = 4
    rope_base: float = 10000.0
    sinusoidal_base: float = 10000.0
    learned_init: Literal["normal", "sinusoidal"] = "normal"
    learned_init_std: float = DEFAULT_INIT_STD
    position_after_norm: bool = False
    rope_scaling: dict | None = None
    token_init_std: float = 1.0
    scale_token_embedding: bool = False
    rope_fraction: float = 1.0
    rope_fraction_form: str = "neox"
    layer_types: list[str] | None = None
    sliding_window: int | None = None
    nope_layers: list[int] | None = None
    logit_scaling: dict | None = None
    forget_gate: bool = False
    forget_gate_init: str = "linear"

    def __post_init__(self) -> None:
        # Everything that would fail at the first forward pass fails here, when the model is built.
        if self.position not in SCHEMES:
            raise ValueError(f"position must be one of {SCHEMES}, got position={self.position!r}")
        for name in ("d_model", "num_layers", "num_heads", "max_positions", "vocab_size", "mlp_ratio"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {name}={getattr(self, name)}")
        if self.d_model % self.num_heads != 0:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}")
        if self.position == "rope" and self.head_dim % 2 != 0:
            raise ValueError(f"RoPE rotates pairs, so it needs an even head_dim, got head_dim={self.head_dim}")
        if self.position == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError("the sinusoidal table pairs sin and cos, so it needs an even d_model, "
                             f"got d_model={self.d_model}")
        if self.learned_init not in ("normal", "sinusoidal"):
            raise ValueError(f"learned_init must be 'normal' or 'sinusoidal', got {self.learned_init!r}")
        if self.position == "learned" and self.learned_init == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(f"learned_init='sinusoidal' needs an even d_model, got d_model={self.d_model}")
        if not self.learned_init_std > 0:
            raise ValueError(f"learned_init_std must be > 0, got learned_init_std={self.learned_init_std}")
        std = self.token_init_std
        if isinstance(std, bool) or not isinstance(std, (int, float)) or not 0 < std < math.inf:
            raise ValueError(f"token_init_std must be a finite number > 0, got token_init_std={std!r}")
        if not isinstance(self.scale_token_embedding, bool):
            raise ValueError("scale_token_embedding must be True or False, got "
                             f"scale_token_embedding={self.scale_token_embedding!r}")
        for name in ("rope_base", "sinusoidal_base"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {name}={getattr(self, name)}")
        if not isinstance(self.forget_gate, bool):
            raise ValueError(f"forget_gate must be True or False, got forget_gate={self.forget_gate!r}")
        if self.forget_gate_init not in ("linear", "alibi"):
            raise ValueError("forget_gate_init must be 'linear' or 'alibi', got "
                             f"forget_gate_init={self.forget_gate_init!r}")
        if self.forget_gate_init != "linear" and not self.forget_gate:
            raise ValueError("forget_gate_init needs forget_gate=True")
        self._check_layer_pattern()
        if self.rope_scaling is not None:
            if self.position != "rope":
                raise ValueError("rope_scaling applies to position='rope' only, "
                                 f"got position={self.position!r}")
            scaling = normalize_rope_parameters(self.rope_scaling)  # names a bad key
            if is_per_layer_type(scaling):
                missing = sorted(set(self.layer_type_list) - set(scaling))
                if missing:
                    raise ValueError("the per-layer-type rope_scaling has no entry for "
                                     f"the layer type(s) {missing} in layer_types")
            else:
                resolve_base(self.rope_base, scaling)  # a rope_theta in it must agree
            object.__setattr__(self, "rope_scaling", scaling)  # frozen: set once
        self._check_partial_rotation()
        if self.logit_scaling is not None:
            object.__setattr__(self, "logit_scaling",
                               normalize_logit_scaling(self.logit_scaling))

    def _check_layer_pattern(self) -> None:
        """layer_types, sliding_window and nope_layers: checked, stored as lists."""
        if self.layer_types is not None:
            types = self.layer_types
            if isinstance(types, str) or not hasattr(types, "__len__") \
                    or len(types) != self.num_layers:
                raise ValueError(f"layer_types must list one type per layer "
                                 f"(num_layers={self.num_layers}), got {types!r}")
            bad = sorted({t for t in types if t not in LAYER_TYPES}, key=str)
            if bad:
                raise ValueError(f"layer_types entries must be one of {LAYER_TYPES}, "
                                 f"got {bad}")
            object.__setattr__(self, "layer_types", list(types))
        sliding = "sliding_attention" in self.layer_type_list
        window = self.sliding_window
        if sliding and (isinstance(window, bool) or not isinstance(window, int)
                        or window < 1):
            raise ValueError("layer_types has 'sliding_attention' layers, so "
                             "sliding_window must be an integer >= 1, got "
                             f"sliding_window={window!r}")
        if not sliding and window is not None:
            raise ValueError("sliding_window is only used by 'sliding_attention' "
                             f"layers, and layer_types has none; got sliding_window={window!r}")
        nope = () if self.nope_layers is None else self.nope_layers
        if isinstance(nope, (str, bytes)) or not hasattr(nope, "__iter__"):
            raise ValueError(f"nope_layers must be a list of layer indices, got {nope!r}")
        nope = tuple(nope)
        if nope:
            if self.position != "rope":
                raise ValueError("nope_layers applies to position='rope' only (the "
                                 f"other layers rotate q and k), got position={self.position!r}")
            bad = [i for i in nope if isinstance(i, bool) or not isinstance(i, int)
                   or not 0 <= i < self.num_layers]
            if bad or len(set(nope)) != len(nope):
                raise ValueError("nope_layers must be distinct layer indices in 0 … "
                                 f"{self.num_layers - 1}, got nope_layers={nope!r}")
        object.__setattr__(self, "nope_layers", sorted(nope) if nope else None)

    def _check_partial_rotation(self) -> None:
        if self.rope_fraction_form not in PARTIAL_FORMS:
            raise ValueError(f"rope_fraction_form must be one of {PARTIAL_FORMS}, got "
                             f"rope_fraction_form={self.rope_fraction_form!r}")
        fraction = self.rope_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
                or not 0 < fraction <= 1:
            raise ValueError("rope_fraction must be a number in (0, 1], got "
                             f"rope_fraction={fraction!r}")
        if fraction != 1.0:
            if self.position != "rope":
                raise ValueError("rope_fraction applies to position='rope' only, got "
                                 f"position={self.position!r}")
            self.rotary_options()  # an odd or empty rotated width fails here

    @property
    def layer_type_list(self) -> tuple[str, ...]:
        """The type of every layer (all ``"full_attention"`` when layer_types is None)."""
        if self.layer_types is None:
            return ("full_attention",) * self.num_layers
        return tuple(self.layer_types)

    def rotary_options(self) -> dict:
        """Keyword arguments of :class:`RotaryEmbedding` for partial rotation ({} for
        full rotation, so the default model builds exactly as before)."""
        if self.rope_fraction == 1.0:
            return {}
        if self.rope_fraction_form == "neox":
            return {"rotary_dim": neox_rotary_dim(self.head_dim, self.rope_fraction)}
        return {"p_rope_pairs": p_rope_kept_pairs(self.head_dim, self.rope_fraction)}

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def to_dict(self) -> dict:
        """The fields as a dict; fields added later (:data:`KEY_STABLE_FIELDS`) appear only
        when they differ from their default, so earlier configs keep their cache keys."""
        out = asdict(self)
        for name, default in KEY_STABLE_FIELDS.items():
            if out[name] == default:
                del out[name]
        return out


KEY_STABLE_FIELDS: dict[str, object] = {"forget_gate": False, "forget_gate_init": "linear"}
"""ModelConfig fields that :meth:`ModelConfig.to_dict` leaves out at their default."""


def every_kth_layer(num_layers: int, k: int) -> tuple[int, ...]:
    """Indices of every k-th layer, counting from 1: k − 1, 2k − 1, … (the NoPE
    layers of SmolLM3 with k = 4, as transformers' ``no_rope_layer_interval``).

    Raises:
        ValueError: if num_layers or k is not an integer >= 1.

    Example:
        >>> every_kth_layer(8, 4)
        (3, 7)
    """
    for name, value in (("num_layers", num_layers), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {name}={value!r}")
    return tuple(i for i in range(num_layers) if (i + 1) % k == 0)


class Block(nn.Module):
    """Pre-LayerNorm Transformer block: x + Attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: ModelConfig, rotary: RotaryEmbedding | None, *,
                 sliding_window: int | None = None,
                 logit_scaling: dict | None = None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.d_model)
        self.attn = SelfAttention(config.d_model, config.num_heads, rotary=rotary,
                                  sliding_window=sliding_window,
                                  logit_scaling=logit_scaling,
                                  forget_gate=config.forget_gate)
        self.norm2 = nn.LayerNorm(config.d_model)
        hidden = config.mlp_ratio * config.d_model
        self.mlp = nn.Sequential(nn.Linear(config.d_model, hidden), nn.GELU(), nn.Linear(hidden, config.d_model))

    def forward(
        self,
        x: Tensor,
        bias: Tensor | None,
        positions: Tensor | None = None,
        mask: Tensor | None = None,
    ) -> Tensor:
        x = x + self.attn(self.norm1(x), bias, positions, mask=mask)
        return x + self.mlp(self.norm2(x))


class TransformerLM(nn.Module):
    """Decoder-only byte-level language model: ``forward(tokens [B, T], positions=None,
    attention_mask=None) -> logits [B, T, V]``.

    Where each scheme acts:

    * ``none``: nowhere; causal masking is the only source of order (NoPE).
    * ``sinusoidal``/``learned``: a vector added to the token embeddings (Vaswani et al. 2017 §3.5;
      GPT-2 for the learned table).
    * ``rope``: q and k rotated in every layer (Su et al. 2021).
    * ``alibi``: −m_h·(i − j) added to the scores in every layer (Press et al. 2022).
    * ``t5``: a learned bucketed bias shared by all layers (Raffel et al. 2020 §2.1).

    Raises:
        ValueError: in ``forward`` for tokens that are not a 2-D integer tensor, token ids outside
            [0, vocab_size), or (``learned``) a sequence longer than ``max_positions``.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)  # N(0, 1)
        if c.token_init_std != 1.0:
            # rescale the N(0, 1) draw: no extra random numbers, so the other weights
            # start exactly as with the default
            with torch.no_grad():
                self.token_embedding.weight.mul_(c.token_init_std)
        # Vaswani et al. 2017 §3.4: token embeddings times sqrt(d_model), None = no multiplier
        self.embedding_multiplier = math.sqrt(c.d_model) if c.scale_token_embedding else None
        self.embedding_norm = nn.LayerNorm(c.d_model) if c.position_after_norm else None
        self.learned = None
        if c.position == "learned":
            self.learned = LearnedPositionalEmbedding(c.max_positions, c.d_model, init_std=c.learned_init_std)
            if c.learned_init == "sinusoidal":
                with torch.no_grad():
                    self.learned.table.weight.copy_(sinusoidal_encoding(c.max_positions, c.d_model, c.sinusoidal_base))
        rotaries = self._rotaries(c)  # one per layer type, shared by its layers
        self.t5_bias = T5RelativePositionBias(c.num_heads) if c.position == "t5" else None
        blocks = []
        for i, layer_type in enumerate(c.layer_type_list):
            rotary = None if i in (c.nope_layers or ()) else rotaries.get(layer_type)
            sliding = layer_type == "sliding_attention"
            scaling = c.logit_scaling if applies_to_layer(c.logit_scaling,
                                                          rotary is not None) else None
            blocks.append(Block(c, rotary, logit_scaling=scaling,
                                sliding_window=c.sliding_window if sliding else None))
        self.blocks = nn.ModuleList(blocks)
        if c.forget_gate_init == "alibi":  # start as ALiBi: log f = −m_h at every token
            with torch.no_grad():
                for block in self.blocks:
                    block.attn.forget_gate.proj.weight.zero_()
                    block.attn.forget_gate.proj.bias.copy_(gate_bias_for_slopes(alibi_slopes(c.num_heads)))
        self.final_norm = nn.LayerNorm(c.d_model)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self._sinusoidal_cache = torch.empty(0, c.d_model)
        self._sinusoidal_fixed = False  # True after use_sinusoidal_table: never regrown
        # ALiBi's score mask for the last (length, device, dtype) seen: it depends on
        # nothing else, so evaluation and training reuse it instead of rebuilding it
        # every call
        self._alibi_mask: tuple[tuple, Tensor] | None = None
        # T5's bucket of every (query, key) pair for the last (length, device) seen
        self._t5_buckets: tuple[tuple, Tensor] | None = None

    @staticmethod
    def _rotaries(c: ModelConfig) -> dict[str, RotaryEmbedding]:
        """The rotary module of each layer type ({} for a model without RoPE)."""
        if c.position != "rope":
            return {}
        options = c.rotary_options()
        if not is_per_layer_type(c.rope_scaling):
            rotary = RotaryEmbedding(c.head_dim, c.rope_base, rope_scaling=c.rope_scaling,
                                     **options)
            return {layer_type: rotary for layer_type in LAYER_TYPES}
        rotaries = {}
        for layer_type, params in c.rope_scaling.items():
            base = params.get("rope_theta", c.rope_base)
            rotaries[layer_type] = RotaryEmbedding(c.head_dim, base, rope_scaling=params,
                                                   **options)
        return rotaries

    @property
    def max_length(self) -> int | None:
        """The longest sequence the model accepts (the learned table's size), or None if unbounded."""
        return self.config.max_positions if self.config.position == "learned" else None

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def use_sinusoidal_table(self, table: Tensor) -> None:
        """Add ``table`` in place of the sinusoidal encoding (e.g. with its columns reordered).

        Args:
            table: float ``[N, d_model]``; row p is added to the token embedding at position p.
                It is kept as given (moved to the input's device): a position ≥ N raises
                rather than regrowing the standard table.

        Raises:
            ValueError: for a model whose position is not ``"sinusoidal"``, or a table that is
                not ``[N, d_model]``.
        """
        if self.config.position != "sinusoidal":
            raise ValueError(f"use_sinusoidal_table needs a sinusoidal model, got position={self.config.position!r}")
        if table.dim() != 2 or table.shape[1] != self.config.d_model:
            raise ValueError(f"table must be [N, d_model={self.config.d_model}], got {tuple(table.shape)}")
        self._sinusoidal_cache = table
        self._sinusoidal_fixed = True

    def _sinusoidal(self, positions: Tensor, device: torch.device, dtype: torch.dtype) -> Tensor:
        """Rows of the sinusoidal table for ``positions`` (``[T]`` or ``[B, T]``), cached and grown as needed."""
        needed = int(positions.max()) + 1 if positions.numel() else 0
        if self._sinusoidal_fixed:
            if self._sinusoidal_cache.shape[0] < needed:
                raise ValueError(f"the table given to use_sinusoidal_table has {self._sinusoidal_cache.shape[0]} "
                                 f"rows, position {needed - 1} was asked for")
            self._sinusoidal_cache = self._sinusoidal_cache.to(device)
        elif self._sinusoidal_cache.shape[0] < needed or self._sinusoidal_cache.device != device:
            rows = max(needed, 2 * self._sinusoidal_cache.shape[0])
            table = sinusoidal_encoding(rows, self.config.d_model, self.config.sinusoidal_base)
            self._sinusoidal_cache = table.to(device)
        return self._sinusoidal_cache[positions.to(device)].to(dtype)  # (T, C) or (B, T, C)

    def attention_bias(
        self,
        seq: int,
        device: torch.device,
        positions: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor | None:
        """The additive score bias shared by all layers, or None when there is none.

        ALiBi: −m_h·|p_t − p_s|; T5: the learned bucket bias of p_s − p_t (Raffel et al. 2020
        §2.1). With the default positions 0 … seq − 1 it is ``[H, T, T]``; with per-sequence
        ``positions`` ``[B, T]`` it is ``[B, H, T, T]``. An ``attention_mask`` adds −inf at the
        padding keys (``[B, 1 or H, T, T]``); a padding *query* keeps its own key, so its row is
        finite (its output is meaningless and should be ignored).
        """
        bias = None
        if self.config.position == "alibi":
            if positions is None:
                bias = alibi_bias(self.config.num_heads, seq, seq, device=device)  # (H, T, T)
            else:
                p = positions.to(device).float()
                p = p.expand(1, seq) if p.dim() == 1 else p  # (B, T)
                slopes = alibi_slopes(self.config.num_heads).to(device)
                distance = (p[:, :, None] - p[:, None, :]).abs()  # (B, T, T)
                bias = -slopes[None, :, None, None] * distance[:, None]  # (B, H, T, T)
        elif self.t5_bias is not None:
            if positions is None:
                bias = self.t5_bias(seq, seq)  # (H, T, T)
            else:
                p = positions.to(device)
                p = p.expand(1, seq) if p.dim() == 1 else p  # (B, T)
                bias = self.t5_bias.for_positions(p, p)  # (B, H, T, T)
        if attention_mask is None:
            return bias
        keep = attention_mask.to(device=device, dtype=torch.bool)  # (B, S): True = a real key
        eye = torch.eye(seq, dtype=torch.bool, device=device)
        visible = keep[:, None, :] | eye[None]  # (B, T, S): real keys, plus each token's own
        dtype = bias.dtype if bias is not None else torch.float32
        padding = torch.zeros(visible.shape, device=device, dtype=dtype).masked_fill(~visible, float("-inf"))
        padding = padding[:, None]  # (B, 1, T, S)
        return padding if bias is None else bias + padding

    def score_mask(
        self,
        seq: int,
        device: torch.device,
        dtype: torch.dtype,
        positions: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor | None:
        """The additive mask every layer hands to SDPA: :meth:`attention_bias` folded
        with the causal mask, ``[B | 1, H | 1, T, T]`` in ``dtype`` (None for a plain
        causal model).

        Built once per forward pass and shared by all layers, instead of adding the bias
        and the causal mask again in each. For ALiBi at the default positions the mask
        depends only on (T, device, dtype), so the last one is kept and reused across
        calls: an evaluation at one length builds it once (Press et al. 2022 fold ALiBi
        into the causal mask the same way). T5's bias is learned and changes every
        training step, so it is built per forward pass.
        """
        default_positions = positions is None and attention_mask is None
        causal_t5 = self.t5_bias is not None and not self.t5_bias.bidirectional
        if causal_t5 and default_positions:
            return self._t5_score_mask(seq, device, dtype)
        cacheable = self.config.position == "alibi" and default_positions
        key = (seq, device, dtype)
        if cacheable and self._alibi_mask is not None and self._alibi_mask[0] == key:
            return self._alibi_mask[1]
        bias = self.attention_bias(seq, device, positions, attention_mask)
        mask = score_mask(bias, seq, seq, device=device, dtype=dtype)
        if cacheable:
            self._alibi_mask = (key, mask)
        return mask

    def _t5_score_mask(
        self, seq: int, device: torch.device, dtype: torch.dtype
    ) -> Tensor:
        """T5's causal score mask ``[1, H, T, T]`` in one lookup.

        Every (query t, key s) pair has a bucket that depends on s − t only, so the
        buckets are kept per length; the keys after t get one more bucket, whose bias is
        −inf. The mask is then the learned table, with that row added, read at the
        buckets: the same values as the bias plus the causal mask, built in one pass
        instead of several, and the table still gets its gradient (the lookup is
        differentiable).
        """
        t5 = self.t5_bias
        if self._t5_buckets is None or self._t5_buckets[0] != (seq, device):
            positions = torch.arange(seq, device=device)
            relative = positions[None, :] - positions[:, None]  # (T, S): s − t
            buckets = t5_relative_position_bucket(
                relative, num_buckets=t5.num_buckets, max_distance=t5.max_distance
            )
            future = t5.num_buckets  # the extra bucket, for keys after the query
            buckets = buckets.masked_fill(relative > 0, future).to(torch.int32)
            self._t5_buckets = ((seq, device), buckets)
        weight = t5.bias.weight  # (buckets, H)
        never = weight.new_full((1, weight.shape[1]), float("-inf"))
        table = torch.cat([weight, never]).to(dtype).t()  # (H, buckets + 1)
        return table[:, self._t5_buckets[1]][None]  # (1, H, T, S)

    def forward(self, tokens: Tensor, positions: Tensor | None = None, attention_mask: Tensor | None = None) -> Tensor:
        """Logits ``[B, T, V]`` for integer ``tokens`` ``[B, T]``.

        Args:
            tokens: int64 or int32 ``[batch, seq]`` (the dtypes an embedding lookup takes;
                convert bytes with ``tokens.long()``), values in [0, vocab_size).
            positions: integer ``[seq]`` or ``[batch, seq]``, ≥ 0: the position of each token,
                used by every scheme (e.g. an offset for a continued sequence, or restarting
                positions of packed sequences). Default: read off ``attention_mask`` when one is
                given (:func:`~posenc_lib.encodings.positions.positions_from_mask`), else
                0 … seq − 1.
            attention_mask: ``[batch, seq]``, 1/True for real tokens, 0/False for padding; padding
                keys are masked out of every query's attention. With a left-padded batch, each
                row's real tokens then get the same logits as the unpadded sequence alone (up to
                float rounding).

        Raises:
            TypeError: for tokens, positions or a mask that is not a tensor.
            ValueError: for tokens that are not a 2-D int64/int32 tensor, token ids outside
                [0, vocab_size), a mask or positions of the wrong shape or dtype, negative
                positions, or (``learned``) a position beyond the table.
        """
        require_tensor(tokens, "tokens", "[batch, seq] of int64 token ids")
        if attention_mask is not None:
            require_tensor(attention_mask, "attention_mask", "[batch, seq] of 0/1")
        if tokens.dim() != 2 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise ValueError(f"tokens must be an integer tensor [batch, seq], got {tokens.dtype} {tuple(tokens.shape)}")
        if tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError("tokens must be int64 or int32 (the dtypes an embedding lookup "
                             f"takes), got dtype {tokens.dtype}: convert with tokens.long()")
        batch, seq = tokens.shape
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.config.vocab_size):
            raise ValueError(f"token ids must lie in [0, vocab_size={self.config.vocab_size}), "
                             f"got min {int(tokens.min())}, max {int(tokens.max())}")
        if attention_mask is not None:
            if attention_mask.shape != (batch, seq):
                raise ValueError(f"attention_mask must be [batch={batch}, seq={seq}], "
                                 f"got shape {tuple(attention_mask.shape)}")
            if positions is None:
                positions = positions_from_mask(attention_mask)  # (B, T), 0 at the pads
        if positions is not None:
            check_positions(positions, batch, seq)
            if positions.numel() and int(positions.min()) < 0:
                raise ValueError(f"positions must be >= 0, got min {int(positions.min())}")
        elif self.max_length is not None and seq > self.max_length:
            raise ValueError(
                f"sequence length {seq} exceeds max_positions={self.max_length} of the learned position table"
            )
        x = self.token_embedding(tokens)  # (B, T, C)
        if self.embedding_multiplier is not None:
            x = x * self.embedding_multiplier
        if self.embedding_norm is not None:
            x = self.embedding_norm(x)
        if self.learned is not None:
            x = self.learned(x, positions)
        elif self.config.position == "sinusoidal":
            p = torch.arange(seq, device=x.device) if positions is None else positions
            x = x + self._sinusoidal(p, x.device, x.dtype)  # (T, C) or (B, T, C) broadcasts over B
        # q's dtype in attention: autocast's when it is on (bf16 on a GPU), else x's
        dtype = x.dtype
        if torch.is_autocast_enabled(x.device.type):
            dtype = torch.get_autocast_dtype(x.device.type)
        mask = self.score_mask(seq, x.device, dtype, positions, attention_mask)
        local = None  # the sliding-window layers' mask, built once for all of them
        if self.config.sliding_window is not None:
            local = local_mask(mask, seq, self.config.sliding_window, dtype, x.device)
        for block in self.blocks:
            window = block.attn.sliding_window is not None
            x = block(x, None, positions, mask=local if window else mask)
        return self.lm_head(self.final_norm(x))  # (B, T, V)


def with_rope_scaling(model: TransformerLM, rope_scaling: Mapping | None
                      ) -> TransformerLM:
    """The same trained weights, run with another RoPE frequency rule: no retraining.

    RoPE has no parameters, so a trained ``"rope"`` model's state dict loads unchanged
    into a model whose config differs only in ``rope_scaling``. The original model is
    not modified.

    Args:
        model: a :class:`TransformerLM` with ``position="rope"``.
        rope_scaling: the new method (see :class:`ModelConfig`), or None for plain RoPE.

    Returns:
        A new model on the same device, in the same train/eval mode, with copied
        weights.

    Raises:
        ValueError: if the model is not a RoPE model, or ``rope_scaling`` is invalid.

    Example:
        >>> model = TransformerLM(ModelConfig(position="rope", d_model=16, num_heads=2))
        >>> pi = with_rope_scaling(model, {"rope_type": "linear", "factor": 4.0})
        >>> pi.config.rope_scaling
        {'rope_type': 'linear', 'factor': 4.0}
    """
    if model.config.position != "rope":
        raise ValueError("with_rope_scaling needs a RoPE model, "
                         f"got position={model.config.position!r}")
    scaling = None if rope_scaling is None else dict(rope_scaling)
    config = replace(model.config, rope_scaling=scaling)
    device = next(model.parameters()).device
    scaled = TransformerLM(config).to(device)
    scaled.load_state_dict(model.state_dict())
    return scaled.train(model.training)
