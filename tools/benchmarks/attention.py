"""Attention per positional scheme, L = 256 … 4096: time, peak memory, bytes allocated.

One batch of one sequence, H heads of width D (default 4 × 32), causal, forward only
(inference: no gradients, as in an evaluation). What each scheme adds to plain causal
SDPA:

* NoPE, sinusoidal, learned: nothing inside attention (absolute vectors are added to the
  embeddings once, outside).
* RoPE: rotating q and k, then the same causal SDPA.
* ALiBi and T5: an additive bias. Handed to SDPA as a float mask it is an
  ``[1, H, L, L]`` tensor (:func:`posenc_lib.measure.attention_bias_bytes`), and the
  kernel can no longer skip the blocks above the diagonal that ``is_causal=True`` skips.
  The variants show what building that mask costs per call, what reusing it saves,
  FlexAttention (the bias added inside the kernel by a ``score_mod``; compiled on CUDA,
  eager on a CPU), and the bias folded into the keys (one extra dimension, then plain
  causal SDPA).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from tools.benchmarks.common import Rounds, timing_columns
from posenc_lib.model.alibi_attention import alibi_attention
from posenc_lib.model.attention import attend, score_mask
from posenc_lib.measure import (
    AttentionVariant,
    alibi_attention_folded_keys,
    attention_bias_bytes,
    memory_traffic,
    peak_memory_bytes,
)
from posenc_lib.encodings import RotaryEmbedding, alibi_bias
from posenc_lib.model.transformer import ModelConfig, TransformerLM

LENGTHS = (256, 512, 1024, 2048, 4096)

CAUSAL = AttentionVariant.CAUSAL
ROPE = AttentionVariant.ROPE
ALIBI_BEFORE = AttentionVariant.ALIBI_BEFORE
ALIBI_ONE_CALL = AttentionVariant.ALIBI_ONE_CALL
ALIBI_NOW = AttentionVariant.ALIBI_NOW
ALIBI_FLEX = AttentionVariant.ALIBI_FLEX
ALIBI_KEYS = AttentionVariant.ALIBI_KEYS
T5_BEFORE = AttentionVariant.T5_BEFORE
T5_NOW = AttentionVariant.T5_NOW

SCHEME_OF = {
    CAUSAL: "none",
    ROPE: "rope",
    ALIBI_BEFORE: "alibi",
    ALIBI_ONE_CALL: "alibi",
    ALIBI_NOW: "alibi",
    ALIBI_FLEX: "alibi",
    ALIBI_KEYS: "alibi",
    T5_BEFORE: "t5",
    T5_NOW: "t5",
}


def _variants(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, flex: bool
) -> dict[str, Callable[[], object]]:
    heads, length, head_dim = q.shape[1], q.shape[2], q.shape[3]
    device = q.device
    rope = RotaryEmbedding(head_dim)
    t5_model = TransformerLM(
        ModelConfig(
            position="t5", d_model=heads * head_dim, num_heads=heads, num_layers=1
        )
    ).to(device)
    t5 = t5_model.t5_bias
    torch.nn.init.normal_(
        t5.bias.weight, std=0.5, generator=torch.Generator().manual_seed(0)
    )
    alibi_mask = score_mask(
        alibi_bias(heads, length, length, device=device),
        length,
        length,
        device=device,
        dtype=q.dtype,
    )
    sdpa = F.scaled_dot_product_attention

    def rope_then_sdpa() -> torch.Tensor:
        return sdpa(
            rope(q), rope(k), v, is_causal=True
        )  # positions 0 … L−1, as the model

    def alibi_before() -> torch.Tensor:
        bias = alibi_bias(heads, length, length, device=device)
        return sdpa(q, k, v, attn_mask=score_mask(bias, length, length, device=device))

    def t5_before() -> torch.Tensor:
        bias = t5(length, length)
        return sdpa(q, k, v, attn_mask=score_mask(bias, length, length, device=device))

    def t5_now() -> torch.Tensor:
        return attend(q, k, v, mask=t5_model.score_mask(length, device, q.dtype))

    variants = {
        CAUSAL: lambda: sdpa(q, k, v, is_causal=True),
        ROPE: rope_then_sdpa,
        ALIBI_BEFORE: alibi_before,
        ALIBI_ONE_CALL: lambda: sdpa(q, k, v, attn_mask=alibi_mask),
        ALIBI_NOW: lambda: attend(q, k, v, mask=alibi_mask),
        ALIBI_KEYS: lambda: alibi_attention_folded_keys(q, k, v),
        T5_BEFORE: t5_before,
        T5_NOW: t5_now,
    }
    if flex:
        variants[ALIBI_FLEX] = lambda: alibi_attention(q, k, v, implementation="flex")
    return variants


def run(
    rounds: Rounds, *, heads: int = 4, head_dim: int = 32, flex: bool = True
) -> tuple[dict, list[dict]]:
    """Every variant at every length; returns (configuration, rows)."""
    device = rounds.device
    lengths = LENGTHS[:3] if rounds.quick else LENGTHS
    config = {
        "batch": 1,
        "heads": heads,
        "head_dim": head_dim,
        "lengths": list(lengths),
        "dtype": "float32",
        **rounds.config(),
        "flex": flex,
        "flex_compiled": device.type == "cuda",
        "peak_memory": (
            "CUDA allocator peak"
            if device.type == "cuda"
            else "process peak resident set (Linux VmHWM) added by one call"
        ),
    }
    rows = []
    for length in rounds.cases(lengths, desc="attention"):
        generator = torch.Generator().manual_seed(length)
        q, k, v = (
            torch.randn(1, heads, length, head_dim, generator=generator).to(device)
            for _ in range(3)
        )
        variants = {
            name: torch.no_grad()(call)
            for name, call in _variants(q, k, v, flex).items()
        }
        timings = rounds.compare(variants)
        base, base_cpu = timings[CAUSAL].median, timings[CAUSAL].cpu_median
        for name, timing in timings.items():
            # a dispatch mode cannot look inside FlexAttention (a higher-order operator)
            traffic = None if name == ALIBI_FLEX else memory_traffic(variants[name])
            rows.append(
                {
                    "length": length,
                    "variant": name,
                    "scheme": SCHEME_OF[name],
                    **timing_columns(timing),
                    "time_vs_causal": timing.median / base,
                    "cpu_time_vs_causal": (
                        timing.cpu_median / base_cpu if base_cpu else None
                    ),
                    "peak_bytes": peak_memory_bytes(variants[name], device),
                    "bytes_allocated": (
                        None if traffic is None else traffic.bytes_allocated
                    ),
                    "mask_bytes": attention_bias_bytes(heads, length, length),
                }
            )
        del q, k, v, variants  # collected before the next length
    return config, rows


COLUMNS = (
    "length",
    "variant",
    "median_ms",
    "q1_ms",
    "q3_ms",
    "time_vs_causal",
    "cpu_time_vs_causal",
    "peak_bytes",
    "bytes_allocated",
)
