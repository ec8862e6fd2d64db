"""A seeded training loop for :class:`~posenc_lib.model.transformer.TransformerLM` on byte streams."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace

import torch
import torch.nn.functional as F

from posenc_lib.training.data import load_corpus, sample_batch
from posenc_lib.model.transformer import ModelConfig, TransformerLM
from posenc_lib.training.progress import progress_bar


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
        corpus: name for :func:`~posenc_lib.training.data.load_corpus`.
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


def _training_step(model: TransformerLM, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
                   targets: torch.Tensor, lr: float, grad_clip: float, use_autocast: bool) -> float:
    """One optimiser step on a batch; shared by :func:`train` and :func:`fine_tune`.

    ``inputs`` and ``targets`` are ``[batch, seq]`` int64 byte ids on the model's device
    (targets are inputs shifted by one). Sets every group's learning rate to ``lr``,
    clips the gradient's global norm to ``grad_clip``, runs the forward pass in bfloat16
    autocast if ``use_autocast``. Returns the batch's mean loss in nats per byte.
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
    with torch.autocast(inputs.device.type, dtype=torch.bfloat16, enabled=use_autocast):
        logits = model(inputs)  # [batch, seq, vocab]
    loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())  # in float32 even under autocast
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


def train(config: TrainConfig, device: torch.device | str = "cpu", *, progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Train a fresh model from ``config``; deterministic for a given seed and device.

    Shows a progress bar (to stderr; :func:`~posenc_lib.training.progress.progress_bar`) unless
    ``progress=False``.

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
    bar = progress_bar(range(config.steps), desc=f"train {config.model.position}", enabled=progress)
    for step in bar:
        inputs, targets = sample_batch(tokens, config.batch_size, config.seq_len, generator)
        losses.append(_training_step(model, optimizer, inputs.to(device), targets.to(device),
                                     learning_rate(step, config), config.grad_clip, use_autocast))
        if step % 20 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)  # shown at the bar's next redraw
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


@dataclass(frozen=True)
class FineTuneConfig:
    """A short continued training of a trained RoPE model at a longer length.

    Chen et al. 2023 extend a trained model's context by changing how RoPE reads
    positions (``rope_scaling``) and then training briefly at the new length; this is
    that recipe at the book's scale. Everything here (the base included) is part of the
    fine-tuned model's cache key.

    Attributes:
        base: the :class:`TrainConfig` of the model to start from.
        seq_len: the new training length (bytes), e.g. 4 × L_train.
        steps: optimiser steps (a few percent of the base run's).
        batch_size: windows per step.
        lr: peak learning rate; linear warm-up, then cosine decay to 10 % of it (as
            :func:`train`).
        warmup_steps: warm-up length.
        rope_scaling: the method used during and after fine-tuning (see
            :class:`~posenc_lib.model.transformer.ModelConfig`), or None for plain RoPE at the new
            length.
        weight_decay, grad_clip: as in :class:`TrainConfig`.

    Raises:
        ValueError: for a base that is not a RoPE model, ``seq_len`` not above the
            base's, or sizes below 1.
    """

    base: TrainConfig
    seq_len: int
    steps: int
    batch_size: int
    lr: float
    warmup_steps: int = 0
    rope_scaling: dict | None = None
    weight_decay: float = 0.1
    grad_clip: float = 1.0

    def __post_init__(self) -> None:
        if self.base.model.position != "rope":
            raise ValueError("fine-tuning with rope_scaling needs a RoPE base model, "
                             f"got position={self.base.model.position!r}")
        if self.seq_len <= self.base.seq_len:
            raise ValueError(f"seq_len must exceed the base model's L_train="
                             f"{self.base.seq_len}, got seq_len={self.seq_len}")
        sizes = (self.steps, self.batch_size, self.warmup_steps, self.lr)
        too_small = min(self.steps, self.batch_size) < 1 or self.warmup_steps < 0
        if too_small or not self.lr > 0:
            raise ValueError("steps and batch_size must be >= 1, warmup_steps >= 0 and "
                             f"lr > 0, got {sizes}")
        if self.rope_scaling is not None:  # checked and normalised as ModelConfig does
            object.__setattr__(self, "rope_scaling", self.model.rope_scaling)

    @property
    def model(self) -> ModelConfig:
        """The architecture after fine-tuning: the base's, with ``rope_scaling``."""
        return replace(self.base.model, rope_scaling=self.rope_scaling)

    def to_dict(self) -> dict:
        return asdict(self)


def fine_tune(
    model: TransformerLM,
    config: FineTuneConfig,
    device: torch.device | str = "cpu",
    *,
    progress: bool = True,
) -> tuple[TransformerLM, TrainRecord]:
    """Go on training a trained RoPE model at ``config.seq_len``, with its scaling.

    The given model is not modified: its weights are copied into a model built from
    ``config.model``. Batches come from the base config's corpus, with a generator
    seeded by ``config.base.seed + 1`` (other windows than the base run's first ones).
    Deterministic for a given device.

    Returns:
        ``(model, record)``; the model is in eval mode on ``device``.
    """
    device = torch.device(device)
    torch.manual_seed(config.base.seed)
    tuned = TransformerLM(config.model).to(device)
    tuned.load_state_dict(model.state_dict())
    tokens = load_corpus(config.base.corpus).train
    generator = torch.Generator().manual_seed(config.base.seed + 1)
    optimizer = _optimizer(tuned, config)  # type: ignore[arg-type]  # lr, weight_decay
    use_autocast = config.base.autocast_dtype == "bfloat16"  # as the base was trained
    losses: list[float] = []
    tuned.train()
    start = time.perf_counter()
    method = (config.rope_scaling or {}).get("rope_type", "default")
    bar = progress_bar(range(config.steps), desc=f"fine-tune {method} at {config.seq_len}", enabled=progress)
    for step in bar:
        inputs, targets = sample_batch(tokens, config.batch_size, config.seq_len, generator)
        losses.append(_training_step(tuned, optimizer, inputs.to(device), targets.to(device),
                                     learning_rate(step, config), config.grad_clip, use_autocast))  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    tuned.eval()
    record = TrainRecord(
        losses=losses,
        wall_time_s=wall,
        tokens_per_second=config.steps * config.batch_size * config.seq_len / wall,
        device=str(device),
        num_parameters=tuned.num_parameters(),
    )
    return tuned, record


def stretched_fine_tune(base: TrainConfig, method: str, kappa: float = 4.0) -> FineTuneConfig:
    """Chapter 11's fine-tune recipe: a RoPE model stretched by κ and trained briefly.

    After Chen et al. 2023 (position interpolation followed by a short fine-tune at the
    new length): κ · L_train bytes per window, 5 % of the base run's steps, the same bytes
    per step (batch divided by κ), a fifth of its peak learning rate and one warm-up
    step, with the method set for the new window by
    :func:`~posenc_lib.encodings.rope_scaling.stretch_scaling` (dynamic NTK: factor 1).

    Args:
        base: the RoPE model's :class:`TrainConfig`.
        method: one of :data:`~posenc_lib.encodings.rope_scaling.STRETCH_METHODS`.
        kappa: the stretch κ > 1; the new length is round(κ · ``base.seq_len``).

    Returns:
        The :class:`FineTuneConfig`.

    Raises:
        ValueError: for an unknown method, κ ≤ 1, or a base that is not RoPE.
    """
    # imported here so that this recipe stays one self-contained addition to the module
    from posenc_lib.encodings.rope_scaling import stretch_scaling

    if not kappa > 1:
        raise ValueError(f"kappa must be > 1 (a longer window), got kappa={kappa}")
    seq_len = round(kappa * base.seq_len)
    return FineTuneConfig(
        base=base,
        seq_len=seq_len,
        steps=max(1, round(0.05 * base.steps)),  # 5 % of the original steps
        batch_size=max(1, base.batch_size * base.seq_len // seq_len),  # same bytes/step
        lr=base.lr / 5,
        warmup_steps=1,
        rope_scaling=stretch_scaling(method, kappa, base.seq_len),
    )
