"""A seeded training loop for :class:`~posenc_lib.model.transformer.TransformerLM` on byte streams."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol

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
            raise ValueError("seq_len, batch_size and steps must be >= 1, got "
                             f"{self.seq_len}, {self.batch_size}, {self.steps}")
        if self.model.position == "learned" and self.model.max_positions < self.seq_len:
            raise ValueError(f"learned table max_positions={self.model.max_positions} is shorter than "
                             f"seq_len={self.seq_len}")
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
        return {**asdict(self), "model": self.model.to_dict()}

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


class Recipe(Protocol):
    """The optimiser settings a run's config gives the loop: :class:`TrainConfig` and
    :class:`FineTuneConfig` both have them.

    Attributes:
        lr: peak learning rate (AdamW).
        warmup_steps: linear warm-up length (steps).
        steps: optimiser steps.
        weight_decay: AdamW's decoupled weight decay of matrices.
        grad_clip: global gradient-norm clip.
    """

    @property
    def lr(self) -> float: ...

    @property
    def warmup_steps(self) -> int: ...

    @property
    def steps(self) -> int: ...

    @property
    def weight_decay(self) -> float: ...

    @property
    def grad_clip(self) -> float: ...


def learning_rate(step: int, config: Recipe) -> float:
    """Linear warm-up to ``config.lr``, then cosine decay to 10 % of it at the last step."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def weight_decay_factor(config: Recipe, weight_decay: float | None = None) -> float:
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


def make_optimizer(model: TransformerLM, config: Recipe,
                   position_weight_decay: float | None = None) -> torch.optim.Optimizer:
    """The library's AdamW (betas 0.9, 0.95) for ``model``, at ``config.lr``.

    Matrices and embeddings decay by ``config.weight_decay``; biases and LayerNorm gains
    (parameters of fewer than 2 dimensions) do not. ``position_weight_decay`` (learned
    table only, see :class:`TrainConfig`) gives the learned position table a decay of its
    own; None: it decays like every other matrix.
    """
    table = model.learned.table.weight if model.learned is not None else None
    separate = table is not None and position_weight_decay is not None
    # matrices and embeddings decay; biases and LayerNorm gains do not
    decay = [p for p in model.parameters() if p.dim() >= 2 and not (separate and p is table)]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if separate:
        groups.append({"params": [table], "weight_decay": position_weight_decay})
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.95))


@dataclass(frozen=True)
class AnswerLoss:
    """A term added to a batch's loss: ``weight`` × the mean next-token loss of the last
    ``tokens`` targets of the batch's first ``rows`` windows (the answers of passkey
    windows, :func:`~posenc_lib.tasks.retrieval.passkey_mix_batches`), or, when ``mask``
    is given, of the first ``rows`` windows' targets where ``mask`` is True (answers
    spread over several queries, :func:`~posenc_lib.tasks.recall.recall_mix_batches`).

    Attributes:
        rows: windows that carry answers (the batch's first), ≥ 1.
        tokens: answer targets at the end of each of those rows, ≥ 1 (unused with ``mask``).
        weight: w ≥ 0.
        mask: None, or bool ``[rows, seq]``: True where a target is an answer byte.

    Raises:
        ValueError: for ``rows`` or ``tokens`` below 1, a negative ``weight``, or a
            ``mask`` that is not bool with ``rows`` rows.
    """

    rows: int
    tokens: int
    weight: float
    mask: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.rows < 1 or self.tokens < 1 or not self.weight >= 0:
            raise ValueError("AnswerLoss needs rows >= 1, tokens >= 1 and weight >= 0, got "
                             f"rows={self.rows}, tokens={self.tokens}, weight={self.weight}")
        if self.mask is not None and (self.mask.dtype != torch.bool or self.mask.dim() != 2
                                      or self.mask.shape[0] != self.rows):
            raise ValueError(f"AnswerLoss mask must be bool [rows={self.rows}, seq], got "
                             f"dtype={self.mask.dtype}, shape={tuple(self.mask.shape)}")

    def term(self, nll: torch.Tensor) -> torch.Tensor:
        """``weight`` × the mean of the answer targets' losses in ``nll`` (float
        ``[batch, seq]``, nats); 0 when a mask selects no target."""
        if self.mask is None:
            return self.weight * nll[: self.rows, -self.tokens :].mean()
        chosen = nll[: self.rows][self.mask.to(nll.device)]
        return self.weight * chosen.mean() if chosen.numel() else nll.new_zeros(())


Batch = tuple[torch.Tensor, torch.Tensor, AnswerLoss | None]
"""``(inputs, targets, answer)``: int64 ``[batch, seq]`` byte ids, the targets (inputs
shifted by one), and an added answer term or None (plain next-byte cross-entropy). A batch
may carry a fourth entry, int64 ``[batch, seq]`` positions for the model (randomized
positions, :class:`~posenc_lib.tasks.recall.RecallMixConfig`); without it the positions
are 0 … seq − 1."""


def training_step(model: TransformerLM, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
                  targets: torch.Tensor, lr: float, grad_clip: float, use_autocast: bool,
                  answer: AnswerLoss | None = None, positions: torch.Tensor | None = None) -> float:
    """One optimiser step on a batch.

    ``inputs`` and ``targets`` are ``[batch, seq]`` int64 byte ids on the model's device
    (targets are inputs shifted by one). Sets every group's learning rate to ``lr``,
    clips the gradient's global norm to ``grad_clip``, runs the forward pass in bfloat16
    autocast if ``use_autocast``. The loss is the mean next-byte cross-entropy, plus the
    ``answer`` term if one is given. ``positions`` (integer ``[batch, seq]``, e.g.
    randomized positions) go to the model; None: 0 … seq − 1.

    Returns:
        The batch's mean next-byte loss in nats per byte (without the answer term).
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
    with torch.autocast(inputs.device.type, dtype=torch.bfloat16, enabled=use_autocast):
        logits = model(inputs) if positions is None else model(inputs, positions=positions)
    if answer is None:  # logits: [batch, seq, vocab]
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())  # in float32 even under autocast
        total = loss
    else:
        nll = F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")  # [batch, seq]
        loss = nll.mean()
        total = loss + answer.term(nll)
    optimizer.zero_grad(set_to_none=True)
    total.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


def text_batches(tokens: torch.Tensor, batch_size: int, seq_len: int,
                 generator: torch.Generator) -> Iterator[Batch]:
    """Endless batches of random text windows (:func:`~posenc_lib.training.data.sample_batch`),
    with no answer term: what :func:`train` and :func:`fine_tune` feed :func:`fit`."""
    while True:
        inputs, targets = sample_batch(tokens, batch_size, seq_len, generator)
        yield inputs, targets, None


def fit(model: TransformerLM, batches: Iterable[Batch], config: Recipe, *,
        optimizer: torch.optim.Optimizer | None = None, use_autocast: bool = False,
        device: torch.device | str | None = None, desc: str = "train",
        progress: bool = True) -> TrainRecord:
    """The training loop: ``config.steps`` steps of :func:`training_step`, one batch each.

    Step t runs at ``learning_rate(t, config)`` with the gradient clipped to
    ``config.grad_clip``. Batches are drawn one per step, just before it (so a seeded
    batch source is consumed in the same order as the steps), and moved to ``device``.
    The model is in train mode during the loop and in eval mode after it.

    Args:
        model: the model to train, in place, on ``device``.
        batches: ``(inputs, targets, answer | None)`` per step (:data:`Batch`); at least
            ``config.steps`` of them.
        config: the schedule and budget (:class:`Recipe`).
        optimizer: default :func:`make_optimizer` of ``model`` and ``config``.
        use_autocast: run the forward passes in bfloat16 autocast.
        device: where the batches go; default the device of the model's parameters.
        desc: the progress bar's label (stderr; off with ``progress=False``).

    Returns:
        The :class:`TrainRecord` (loss per step, wall time, throughput).

    Raises:
        ValueError: if ``batches`` ends before ``config.steps`` steps.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    if optimizer is None:
        optimizer = make_optimizer(model, config)
    source = iter(batches)
    losses: list[float] = []
    tokens = 0
    model.train()
    start = time.perf_counter()
    bar = progress_bar(range(config.steps), desc=desc, enabled=progress)
    for step in bar:
        try:
            inputs, targets, answer, *positions = next(source)
        except StopIteration:
            raise ValueError(f"batches ended after {step} of steps={config.steps}") from None
        tokens += inputs.numel()
        at = positions[0].to(device) if positions else None
        losses.append(training_step(model, optimizer, inputs.to(device), targets.to(device),
                                    learning_rate(step, config), config.grad_clip, use_autocast, answer,
                                    at))
        if step % 20 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)  # shown at the bar's next redraw
    wall = time.perf_counter() - start
    model.eval()
    return TrainRecord(
        losses=losses,
        wall_time_s=wall,
        tokens_per_second=tokens / wall,
        device=str(device),
        num_parameters=model.num_parameters(),
    )


def train_fresh(config: TrainConfig, batches_from: Callable[[torch.Tensor, torch.Generator], Iterable[Batch]],
                device: torch.device | str = "cpu", *, desc: str,
                progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Train a fresh model of ``config.model`` on the batches ``batches_from(tokens,
    generator)`` gives: the one recipe behind :func:`train` (text windows),
    :func:`~posenc_lib.tasks.retrieval.train_passkey_mix` and
    :func:`~posenc_lib.tasks.recall.train_recall_mix` (mixtures).

    The weights are initialised under ``torch.manual_seed(config.seed)``; ``tokens`` is the
    training split of ``config.corpus`` and ``generator`` a ``torch.Generator`` seeded with
    ``config.seed``; :func:`fit` runs ``config.steps`` steps with :func:`make_optimizer`
    (the learned table's own weight decay) and bfloat16 autocast when
    ``config.autocast_dtype`` asks for it. Deterministic for a given seed and device.

    Returns:
        ``(model, record)``; the model is in eval mode on ``device``.
    """
    device = torch.device(device)
    torch.manual_seed(config.seed)
    model = TransformerLM(config.model).to(device)
    tokens = load_corpus(config.corpus).train
    batches = batches_from(tokens, torch.Generator().manual_seed(config.seed))
    record = fit(model, batches, config, optimizer=make_optimizer(model, config, config.position_weight_decay),
                 use_autocast=config.autocast_dtype == "bfloat16", device=device, desc=desc,
                 progress=progress)
    return model, record


def train(config: TrainConfig, device: torch.device | str = "cpu", *,
          progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Train a fresh model from ``config`` on random windows of its corpus
    (:func:`text_batches`, :func:`train_fresh`); deterministic for a given seed and device.

    Shows a progress bar (to stderr; :func:`~posenc_lib.training.progress.progress_bar`) unless
    ``progress=False``.

    Returns:
        ``(model, record)``; the model is in eval mode on ``device``.
    """
    return train_fresh(config, lambda tokens, generator: text_batches(
        tokens, config.batch_size, config.seq_len, generator), device,
        desc=f"train {config.model.position}", progress=progress)


@dataclass(frozen=True)
class FineTuneConfig:
    """A short continued training of a trained RoPE model at a longer length.

    Chen et al. 2023 extend a trained model's context by changing how RoPE reads
    positions (``rope_scaling``) and then training briefly at the new length; this is
    that recipe at the book's scale. Everything here (the base included) is part of the
    fine-tuned model's cache key. It is a :class:`Recipe` (its own ``lr``, ``warmup_steps``,
    ``steps``, ``weight_decay``, ``grad_clip``).

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
        return {**asdict(self), "base": self.base.to_dict()}


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
    method = (config.rope_scaling or {}).get("rope_type", "default")
    record = fit(tuned, text_batches(tokens, config.batch_size, config.seq_len, generator), config,
                 use_autocast=config.base.autocast_dtype == "bfloat16",  # as the base was trained
                 device=device, desc=f"fine-tune {method} at {config.seq_len}", progress=progress)
    return tuned, record


def smoothed_losses(losses: list[float], window: int = 20) -> torch.Tensor:
    """Moving average of a loss curve (e.g. :attr:`TrainRecord.losses`) over ``window`` steps.

    Args:
        losses: one loss per step (nats per token).
        window: steps averaged, 1 ≤ window ≤ len(losses).

    Returns:
        float32 ``[len(losses) − window + 1]``: entry j is the mean of steps j … j + window − 1.

    Raises:
        ValueError: if ``window`` is outside 1 … len(losses).
    """
    if not 1 <= window <= len(losses):
        raise ValueError(f"window must be in 1 … {len(losses)} (the number of losses), got window={window}")
    return torch.tensor(losses).unfold(0, window, 1).mean(1)

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
