"""A small decoder-only Transformer language model whose positional scheme is chosen by name.

Pre-LayerNorm blocks (as GPT-2), causal attention through PyTorch's SDPA, byte vocabulary.
Shapes: B batch, T sequence, C = d_model, V vocabulary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from posenc_lib.attention import SelfAttention
from posenc_lib.encodings import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    T5RelativePositionBias,
    alibi_bias,
    sinusoidal_encoding,
)

PositionScheme = Literal["none", "sinusoidal", "learned", "rope", "alibi", "t5"]
SCHEMES: tuple[str, ...] = ("none", "sinusoidal", "learned", "rope", "alibi", "t5")
"""Every positional scheme the model knows, in the book's order."""


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
        learned_init: ``"normal"`` (N(0, 1), PyTorch's default) or ``"sinusoidal"`` (start the
            learned table from the sinusoidal values).
        position_after_norm: add absolute encodings to LayerNorm(token embeddings) instead of
            the raw embeddings.
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
    position_after_norm: bool = False

    def __post_init__(self) -> None:
        if self.position not in SCHEMES:
            raise ValueError(f"position must be one of {SCHEMES}, got position={self.position!r}")
        if self.num_heads < 1:
            raise ValueError(f"num_heads must be >= 1, got num_heads={self.num_heads}")
        if self.d_model % self.num_heads != 0:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}")
        if self.position in ("rope",) and (self.d_model // self.num_heads) % 2 != 0:
            raise ValueError(f"RoPE needs an even head_dim, got head_dim={self.d_model // self.num_heads}")
        if self.learned_init not in ("normal", "sinusoidal"):
            raise ValueError(f"learned_init must be 'normal' or 'sinusoidal', got {self.learned_init!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def to_dict(self) -> dict:
        return asdict(self)


class Block(nn.Module):
    """Pre-LayerNorm Transformer block: x + Attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: ModelConfig, rotary: RotaryEmbedding | None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.d_model)
        self.attn = SelfAttention(config.d_model, config.num_heads, rotary=rotary)
        self.norm2 = nn.LayerNorm(config.d_model)
        hidden = config.mlp_ratio * config.d_model
        self.mlp = nn.Sequential(nn.Linear(config.d_model, hidden), nn.GELU(), nn.Linear(hidden, config.d_model))

    def forward(self, x: Tensor, bias: Tensor | None) -> Tensor:
        x = x + self.attn(self.norm1(x), bias)
        return x + self.mlp(self.norm2(x))


class TransformerLM(nn.Module):
    """Decoder-only byte-level language model: ``forward(tokens [B, T]) -> logits [B, T, V]``.

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
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.embedding_norm = nn.LayerNorm(c.d_model) if c.position_after_norm else None
        self.learned = None
        if c.position == "learned":
            self.learned = LearnedPositionalEmbedding(c.max_positions, c.d_model)
            if c.learned_init == "sinusoidal":
                with torch.no_grad():
                    self.learned.table.weight.copy_(sinusoidal_encoding(c.max_positions, c.d_model, c.sinusoidal_base))
        rotary = RotaryEmbedding(c.head_dim, c.rope_base) if c.position == "rope" else None
        self.t5_bias = T5RelativePositionBias(c.num_heads) if c.position == "t5" else None
        self.blocks = nn.ModuleList(Block(c, rotary) for _ in range(c.num_layers))
        self.final_norm = nn.LayerNorm(c.d_model)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self._sinusoidal_cache = torch.empty(0, c.d_model)

    @property
    def max_length(self) -> int | None:
        """The longest sequence the model accepts (the learned table's size), or None if unbounded."""
        return self.config.max_positions if self.config.position == "learned" else None

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _sinusoidal(self, seq: int, device: torch.device, dtype: torch.dtype) -> Tensor:
        if self._sinusoidal_cache.shape[0] < seq or self._sinusoidal_cache.device != device:
            table = sinusoidal_encoding(max(seq, 2 * self._sinusoidal_cache.shape[0]), self.config.d_model, self.config.sinusoidal_base)
            self._sinusoidal_cache = table.to(device)
        return self._sinusoidal_cache[:seq].to(dtype)

    def attention_bias(self, seq: int, device: torch.device) -> Tensor | None:
        """The additive score bias ``[H, T, T]`` shared by all layers (ALiBi, T5), else None."""
        if self.config.position == "alibi":
            return alibi_bias(self.config.num_heads, seq, seq, device=device)
        if self.t5_bias is not None:
            return self.t5_bias(seq, seq)
        return None

    def forward(self, tokens: Tensor) -> Tensor:
        if tokens.dim() != 2 or tokens.dtype.is_floating_point:
            raise ValueError(f"tokens must be an integer tensor [batch, seq], got {tokens.dtype} {tuple(tokens.shape)}")
        seq = tokens.shape[1]
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.config.vocab_size):
            raise ValueError(f"token ids must lie in [0, vocab_size={self.config.vocab_size}), got min {int(tokens.min())}, max {int(tokens.max())}")
        if self.max_length is not None and seq > self.max_length:
            raise ValueError(
                f"sequence length {seq} exceeds max_positions={self.max_length} of the learned position table"
            )
        x = self.token_embedding(tokens)  # (B, T, C)
        if self.embedding_norm is not None:
            x = self.embedding_norm(x)
        if self.learned is not None:
            x = self.learned(x)
        elif self.config.position == "sinusoidal":
            x = x + self._sinusoidal(seq, x.device, x.dtype)  # (T, C) broadcasts over B
        bias = self.attention_bias(seq, x.device)
        for block in self.blocks:
            x = block(x, bias)
        return self.lm_head(self.final_norm(x))  # (B, T, V)
