"""A seeded training loop for :class:`~posenc_lib.model.TransformerLM` on byte streams."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from tqdm import tqdm

from posenc_lib.data import load_corpus, sample_batch
from posenc_lib.model import ModelConfig, TransformerLM


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a trained model (and so its cache key).

    Attributes:
        model: the architecture, including the positional scheme.
        seq_len: L_train, the length of every training window (bytes).
        batch_size: windows per step.
        steps: optimiser steps.
        lr: peak learning rate of AdamW; linear warm-up, then cosine decay to 10 %.
        warmup_steps: warm-up length.
        weight_decay: AdamW's decoupled weight decay (on matrices only).
        position_weight_decay: the decoupled weight decay of the learned position table
            (``position="learned"`` only); None (default) gives it ``weight_decay`` like
            every other matrix, 0.0 exempts it (as one would exempt a bias). Must be ≥ 0.
        grad_clip: global gradient-norm clip.
        seed: seeds the initial weights and the batch sampler.
        corpus: name for :func:`~posenc_lib.data.load_corpus`.
        autocast_dtype: ``"float32"`` (no autocast) or ``"bfloat16"`` (autocast, for GPUs).
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    seq_len: int = 128
    batch_size: int = 32
    steps: int = 300
    lr: float = 3e-3
    warmup_steps: int = 30
    weight_decay: float = 0.1
    position_weight_decay: float | None = None
    grad_clip: float = 1.0
    seed: int = 0
    corpus: str = "austen"
    autocast_dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.seq_len < 1 or self.batch_size < 1 or self.steps < 1:
            raise ValueError(f"seq_len, batch_size and steps must be >= 1, got {self.seq_len}, {self.batch_size}, {self.steps}")
        if self.model.position == "learned" and self.model.max_positions < self.seq_len:
            raise ValueError(f"learned table max_positions={self.model.max_positions} is shorter than seq_len={self.seq_len}")
        if self.position_weight_decay is not None:
            if self.model.position != "learned":
                raise ValueError(
                    "position_weight_decay applies to the learned table only, got "
                    f"position={self.model.position!r}"
                )
            if self.position_weight_decay < 0:
                raise ValueError(f"position_weight_decay must be >= 0, got {self.position_weight_decay}")
        if self.autocast_dtype not in ("float32", "bfloat16"):
            raise ValueError(f"autocast_dtype must be 'float32' or 'bfloat16', got {self.autocast_dtype!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        d = dict(d)
        d["model"] = ModelConfig(**d["model"])
        return cls(**d)


@dataclass
class TrainRecord:
    """What a training run measured: loss per step, wall time, throughput."""

    losses: list[float]
    wall_time_s: float
    tokens_per_second: float
    device: str
    num_parameters: int

    def to_dict(self) -> dict:
        return asdict(self)


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up to ``config.lr``, then cosine decay to 10 % of it at the last step."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def weight_decay_factor(config: TrainConfig, weight_decay: float | None = None) -> float:
    """The factor by which decoupled weight decay alone scales a weight over a whole run.

    AdamW multiplies every decayed weight by (1 − lr_t · λ) at each step t before adding its
    Adam update (Loshchilov and Hutter 2019, Algorithm 2; PyTorch's ``AdamW``). A weight whose
    gradient were always zero would end at ∏_t (1 − lr_t · λ) times its start; what the
    gradients do comes on top. Use it to tell the two apart.

    Args:
        config: the run (its learning-rate schedule and step count).
        weight_decay: λ; default ``config.weight_decay``. Must be ≥ 0.

    Returns:
        ∏_{t=0}^{steps−1} (1 − lr_t · λ), a float in (0, 1] for the library's schedules.

    Raises:
        ValueError: if ``weight_decay`` is negative.
    """
    decay = config.weight_decay if weight_decay is None else weight_decay
    if decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got weight_decay={decay}")
    return math.prod(1 - learning_rate(step, config) * decay for step in range(config.steps))


def _optimizer(model: TransformerLM, config: TrainConfig) -> torch.optim.Optimizer:
    table = model.learned.table.weight if model.learned is not None else None
    separate = table is not None and config.position_weight_decay is not None
    # matrices and embeddings decay; biases and LayerNorm gains do not
    decay = [p for p in model.parameters() if p.dim() >= 2 and not (separate and p is table)]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if separate:
        groups.append({"params": [table], "weight_decay": config.position_weight_decay})
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.95))


def train(config: TrainConfig, device: torch.device | str = "cpu", *, progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Train a fresh model from ``config``; deterministic for a given seed and device.

    Shows a tqdm bar (to stderr) unless ``progress=False``.

    Returns:
        ``(model, record)``; the model is in eval mode on ``device``.
    """
    device = torch.device(device)
    torch.manual_seed(config.seed)
    model = TransformerLM(config.model).to(device)
    tokens = load_corpus(config.corpus).train
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = _optimizer(model, config)
    use_autocast = config.autocast_dtype == "bfloat16"
    losses: list[float] = []
    model.train()
    start = time.perf_counter()
    bar = tqdm(range(config.steps), desc=f"train {config.model.position}", disable=not progress, mininterval=1.0)
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config)
        inputs, targets = sample_batch(tokens, config.batch_size, config.seq_len, generator)
        inputs, targets = inputs.to(device), targets.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_autocast):
            logits = model(inputs)  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        losses.append(loss.item())
        if step % 20 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)  # shown at the next timed refresh: at most one line a second
    wall = time.perf_counter() - start
    model.eval()
    record = TrainRecord(
        losses=losses,
        wall_time_s=wall,
        tokens_per_second=config.steps * config.batch_size * config.seq_len / wall,
        device=str(device),
        num_parameters=model.num_parameters(),
    )
    return model, record
