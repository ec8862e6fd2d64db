"""Training and evaluation throughput of the book's model per scheme, relative to NoPE.

The model is the one the book trains at scale ``book`` (d_model 96, 2 layers, 4 heads),
fresh and seeded (speed does not depend on what it has learned). One training call is
an AdamW step on a batch of 32 × L_train = 128 random byte windows, forward and
backward; one evaluation call is a forward pass without gradients over 8 × L = 2048
(16 384 tokens, the batch :func:`posenc_lib.training.evaluate.evaluate_perplexity` uses at that
length), and one more over as many tokens at L = L_train = 128 (128 × 128), so that
the cost past L_train can be told from the cost at L_train. The learned table gets 2048 rows so
that it can be evaluated at L = 2048 too.
Schemes run interleaved, so a slow spell of the machine hits them all. For ALiBi and T5
the evaluation also runs with the library's query blocks turned off (``"alibi, one SDPA
call"``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F

from tools.benchmarks.common import Rounds, timing_columns
import posenc_lib.model.attention as attention_module
from posenc_lib.model.transformer import SCHEMES, TransformerLM
from posenc_lib.training.scales import get_scale


def _model(
    scheme: str, scale_name: str, max_positions: int, device: torch.device
) -> TransformerLM:
    scale = get_scale(scale_name)
    config = dataclasses.replace(
        scale.train_config(scheme).model, max_positions=max_positions
    )
    torch.manual_seed(0)
    return TransformerLM(config).to(device)


def _train_step(
    model: TransformerLM, batch: int, length: int, device: torch.device
) -> Callable[[], None]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 256, (batch, length + 1), generator=generator).to(device)

    def step() -> None:
        model.train()
        logits = model(tokens[:, :-1])  # (B, L, V)
        loss = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def _eval_forward(
    model: TransformerLM, batch: int, length: int, device: torch.device
) -> Callable[[], None]:
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 256, (batch, length), generator=generator).to(device)

    def forward() -> None:
        model.eval()
        with torch.no_grad():
            model(tokens)

    return forward


def _one_sdpa_call(step: Callable[[], None]) -> Callable[[], None]:
    """``step`` with attention's query blocks turned off: a causal float mask goes to
    SDPA in one call (what the blocks buy, side by side)."""

    def call() -> None:
        saved = attention_module.CAUSAL_BLOCK
        attention_module.CAUSAL_BLOCK = 1 << 62  # longer than any sequence: one block
        try:
            step()
        finally:
            attention_module.CAUSAL_BLOCK = saved

    return call


def run(rounds: Rounds, *, scale_name: str = "book") -> tuple[dict, list[dict]]:
    """Training and evaluation throughput per scheme; returns (configuration, rows)."""
    device = rounds.device
    train_batch, train_length = (32, 128)
    eval_batch, eval_length = (2, 512) if rounds.quick else (8, 2048)
    # evaluation at L = L_train too, with as many tokens per call as the long one
    short_batch = eval_batch * eval_length // train_length
    config = {
        "scale": scale_name,
        "train_batch": train_batch,
        "train_length": train_length,
        "eval_batch": eval_batch,
        "eval_length": eval_length,
        "eval_at_train_length_batch": short_batch,
        **rounds.config(),
        "dtype": "float32",
        "optimizer": "AdamW",
        "learned_max_positions": eval_length,
    }
    rows = []
    modes = ("train", "eval", "eval_at_train_length")
    for mode in rounds.cases(modes, desc="throughput"):
        variants = {}
        for scheme in SCHEMES:
            model = _model(scheme, scale_name, eval_length, device)
            if mode == "train":
                variants[scheme] = _train_step(model, train_batch, train_length, device)
            elif mode == "eval_at_train_length":
                variants[scheme] = _eval_forward(
                    model, short_batch, train_length, device
                )
            else:
                variants[scheme] = _eval_forward(model, eval_batch, eval_length, device)
                if scheme in ("alibi", "t5") and hasattr(
                    attention_module, "CAUSAL_BLOCK"
                ):
                    variants[f"{scheme}, one SDPA call"] = _one_sdpa_call(
                        variants[scheme]
                    )
        timings = rounds.compare(variants)
        batch, length = {
            "train": (train_batch, train_length),
            "eval": (eval_batch, eval_length),
            "eval_at_train_length": (short_batch, train_length),
        }[mode]
        tokens = batch * length
        nope = tokens / timings["none"].median
        nope_cpu = timings["none"].cpu_median
        for scheme, timing in timings.items():
            rate = tokens / timing.median
            rows.append(
                {
                    "mode": mode,
                    "scheme": scheme,
                    "batch": batch,
                    "length": length,
                    **timing_columns(timing),
                    "tokens_per_s": rate,
                    "vs_nope": rate / nope,
                    "vs_nope_cpu": (
                        nope_cpu / timing.cpu_median if timing.cpu_median else None
                    ),
                }
            )
        del variants  # collected before the next mode
    return config, rows


COLUMNS = (
    "mode",
    "scheme",
    "length",
    "median_ms",
    "q1_ms",
    "q3_ms",
    "tokens_per_s",
    "vs_nope",
    "vs_nope_cpu",
)
