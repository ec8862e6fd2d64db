"""Retrieval as a second metric beside perplexity: passkey retrieval and in-context copying.

A flat perplexity past L_train does not show that a model *uses* the longer context. Two
probes that do:

* **Passkey retrieval** (Mohtashami and Jaggi 2023): a key of k digits is hidden at a
  chosen depth of a filler text; the window ends with a question whose answer is the key.
  Accuracy is exact match of the key under greedy decoding.
* **In-context copying**: a span of natural text appears a second time at distance r after
  its first appearance; the copy gain is the span's loss the first time minus its loss
  the second time (nats per token): what the model gains from having seen it r tokens
  earlier.

Both work with the book's byte models (:class:`~posenc_lib.model.transformer.TransformerLM`, encode
with :func:`byte_encode`) and with a pretrained causal LM and its tokenizer (encode with
``lambda s: tokenizer(s, add_special_tokens=False)["input_ids"]``): a model is anything
that maps int64 ``[B, L]`` to logits ``[B, L, V]`` or to an object with ``.logits``.

The module also holds the training mixture that teaches the book's small models the
passkey task at L_train (:class:`PasskeyMixConfig`, :func:`train_passkey_mix`; cached by
:func:`posenc_lib.training.store.passkey_mix_cached`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from posenc_lib.training.data import sample_batch
from posenc_lib.model.transformer import ModelConfig, TransformerLM
from posenc_lib.training.train import AnswerLoss, Batch, TrainConfig, TrainRecord, train_fresh

Encode = Callable[[str], Sequence[int]]

REPEATED_FILLER = "The hills are green. The river is slow. The day is long. On we walk. "
"""A repetitive filler in the spirit of Mohtashami and Jaggi's (their sentences differ)."""


def byte_encode(text: str) -> list[int]:
    """Text → byte ids (UTF-8), the book's tokenizer."""
    return list(text.encode("utf-8"))


@dataclass(frozen=True)
class PasskeyTemplate:
    """The words around the key. ``needle`` holds ``{key}``; the window ends with
    ``question`` followed by ``answer`` (which holds ``{key}``), whose tokens are scored.

    The default is short, so that filler fills most of a 128-byte window of the book's
    byte models; pass a longer one (e.g. Mohtashami and Jaggi's wording) for a
    pretrained model.
    """

    needle: str = " The pass key is {key}. "
    question: str = " What is the pass key? The pass key is"
    answer: str = " {key}"

    def __post_init__(self) -> None:
        if "{key}" not in self.needle or "{key}" not in self.answer:
            raise ValueError("needle and answer must both contain '{key}', got "
                             f"needle={self.needle!r}, answer={self.answer!r}")


MARKED_TEMPLATE = PasskeyTemplate(needle=" The pass key is #{key}. ", answer=" #{key}")
"""The default wording with the key marked by ``#`` (a byte absent from the Austen
corpus), so that a byte model can find the key by the one byte before it."""


@dataclass(frozen=True)
class PasskeyExample:
    """One passkey window.

    Attributes:
        tokens: int64 ``[length]``: filler, needle, filler, question, answer.
        key: the key's digits.
        length: L, tokens in the window (the answer included).
        depth: the requested depth in [0, 1].
        needle_start: index of the needle's first token; the needle follows
            ``round(depth × filler tokens)`` filler tokens.
        answer_start: index of the answer's first token (the scored tokens run from
            here to the end).
        filler: ``"repeated"`` or ``"stream"``.
        filler_offset: where the filler was drawn from the stream (None if repeated).
    """

    tokens: Tensor
    key: str
    length: int
    depth: float
    needle_start: int
    answer_start: int
    filler: str
    filler_offset: int | None

    def describe(self) -> dict:
        """The example without its tokens (JSON-ready)."""
        return {k: v for k, v in asdict(self).items() if k != "tokens"}


def random_key(rng: random.Random, digits: int) -> str:
    """``digits`` decimal digits drawn uniformly (a leading 0 allowed)."""
    if digits < 1:
        raise ValueError(f"key_digits must be >= 1, got key_digits={digits}")
    return "".join(str(rng.randrange(10)) for _ in range(digits))


def make_passkey(
    encode: Encode,
    length: int,
    depth: float,
    key: str,
    *,
    filler: str | Tensor = REPEATED_FILLER,
    filler_offset: int = 0,
    template: PasskeyTemplate = PasskeyTemplate(),
) -> PasskeyExample:
    """Build one passkey window of exactly ``length`` tokens.

    The pieces are encoded separately and joined (for bytes that is the text's encoding;
    for a subword tokenizer it is one valid tokenization of it).

    Args:
        encode: text → token ids (:func:`byte_encode` for the book's models).
        length: L, the window's length in tokens, answer included.
        depth: where the needle goes in the filler, 0 (start) … 1 (just before the
            question).
        key: the key (digits).
        filler: a string, repeated as needed, or an int token stream from which
            ``length`` − (needle, question, answer) consecutive tokens are taken at
            ``filler_offset``.
        filler_offset: start of the filler in the stream (stream filler only).
        template: the words around the key.

    Raises:
        ValueError: for a depth outside [0, 1], a key that is not digits, a window too
            short for the needle, question and answer, or a stream too short.
    """
    if not 0.0 <= depth <= 1.0 or math.isnan(depth):
        raise ValueError(f"depth must be in [0, 1], got depth={depth}")
    if not key.isdigit():
        raise ValueError(f"key must be decimal digits, got key={key!r}")
    needle = list(encode(template.needle.format(key=key)))
    question = list(encode(template.question))
    answer = list(encode(template.answer.format(key=key)))
    fixed = len(needle) + len(question) + len(answer)
    num_filler = length - fixed
    if num_filler < 0:
        raise ValueError(f"the key, needle and question take {fixed} tokens, more than "
                         f"the window length={length}")
    if isinstance(filler, str):
        unit = list(encode(filler))
        if not unit:
            raise ValueError("filler text encodes to no tokens")
        fill = (unit * (num_filler // len(unit) + 1))[:num_filler]
        kind, offset = "repeated", None
    else:
        if filler_offset < 0 or filler_offset + num_filler > filler.numel():
            raise ValueError(f"filler stream of {filler.numel()} tokens has no "
                             f"{num_filler} tokens at offset {filler_offset}")
        fill = filler[filler_offset : filler_offset + num_filler].long().tolist()
        kind, offset = "stream", filler_offset
    cut = round(depth * num_filler)
    tokens = fill[:cut] + needle + fill[cut:] + question + answer
    return PasskeyExample(
        tokens=torch.tensor(tokens, dtype=torch.int64),
        key=key,
        length=length,
        depth=depth,
        needle_start=cut,
        answer_start=length - len(answer),
        filler=kind,
        filler_offset=offset,
    )


def sample_passkeys(
    encode: Encode,
    length: int,
    depth: float,
    trials: int,
    *,
    seed: int = 0,
    key_digits: int = 5,
    filler: str | Tensor = REPEATED_FILLER,
    template: PasskeyTemplate = PasskeyTemplate(),
) -> list[PasskeyExample]:
    """``trials`` seeded passkey windows of one (L, depth): fresh keys and, for a stream
    filler, fresh offsets. The same arguments always give the same windows (the draw is
    seeded by ``(seed, length, depth)``).
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got trials={trials}")
    rng = random.Random(f"passkey-{seed}-{length}-{depth!r}")
    examples = []
    for _ in range(trials):
        key = random_key(rng, key_digits)
        offset = 0
        if not isinstance(filler, str):
            span = length - (len(encode(template.needle.format(key=key)))
                             + len(encode(template.question))
                             + len(encode(template.answer.format(key=key))))
            if span < 0 or filler.numel() < span:
                raise ValueError(f"filler stream of {filler.numel()} tokens is too short "
                                 f"for length={length}")
            offset = rng.randrange(filler.numel() - span + 1)
        examples.append(make_passkey(encode, length, depth, key, filler=filler,
                                     filler_offset=offset, template=template))
    return examples


def _logits(model: nn.Module, ids: Tensor) -> Tensor:
    out = model(ids)
    return (out.logits if hasattr(out, "logits") else out).float()


@torch.no_grad()
def score_passkeys(model: nn.Module, examples: Sequence[PasskeyExample]) -> list[bool]:
    """Exact match of each key under greedy decoding, one forward pass per batch.

    Greedy decoding of the answer returns exactly the answer's tokens if and only if,
    with the true answer tokens fed in (teacher forcing), the argmax at every answer
    position is the true next token: so one forward pass over the whole window decides
    it. (With a subword tokenizer this is exact match of the tokenization used here.)

    Args:
        model: maps int64 ``[B, L]`` to logits ``[B, L, V]`` (or an output with
            ``.logits``).
        examples: windows of one length.

    Raises:
        ValueError: for examples of different lengths.
    """
    if not examples:
        return []
    lengths = {e.length for e in examples}
    if len(lengths) != 1:
        raise ValueError(f"examples must share one length, got {sorted(lengths)}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    batch = torch.stack([e.tokens for e in examples]).to(device)  # (B, L)
    logits = _logits(model, batch)  # (B, L, V)
    start = examples[0].answer_start
    predicted = logits[:, start - 1 : -1].argmax(-1)  # (B, answer tokens)
    model.train(was_training)
    return (predicted == batch[:, start:]).all(-1).tolist()


def passkey_accuracy(
    model: nn.Module,
    encode: Encode,
    lengths: Iterable[int],
    depths: Iterable[float],
    *,
    trials: int = 32,
    seed: int = 0,
    key_digits: int = 5,
    filler: str | Tensor = REPEATED_FILLER,
    template: PasskeyTemplate = PasskeyTemplate(),
    batch_size: int = 32,
) -> list[dict]:
    """Passkey accuracy for every (L, depth).

    A model with a longest input (``model.max_length``, the learned table) gets a row with
    ``accuracy`` None and a ``skipped`` reason for each L past it.

    Returns:
        One dict per (L, depth): ``length``, ``depth``, ``trials``, ``correct``,
        ``accuracy`` (correct / trials), ``key_digits``, ``filler`` (kind),
        ``needle_starts`` and ``filler_offsets`` (per trial), ``answer_start``.
    """
    rows = []
    max_length = getattr(model, "max_length", None)
    for length in lengths:
        for depth in depths:
            examples = sample_passkeys(encode, length, depth, trials, seed=seed,
                                       key_digits=key_digits, filler=filler,
                                       template=template)
            row = {"length": length, "depth": depth, "trials": trials,
                   "key_digits": key_digits, "filler": examples[0].filler,
                   "needle_starts": [e.needle_start for e in examples],
                   "filler_offsets": [e.filler_offset for e in examples],
                   "answer_start": examples[0].answer_start}
            if max_length is not None and length > max_length:
                rows.append({**row, "correct": None, "accuracy": None,
                             "skipped": f"model's max_length is {max_length}"})
                continue
            hits = []
            for i in range(0, trials, batch_size):
                hits += score_passkeys(model, examples[i : i + batch_size])
            rows.append({**row, "correct": sum(hits), "accuracy": sum(hits) / trials})
    return rows


# ----------------------------------------------------------------------------------------
# In-context copying


def copy_windows(stream: Tensor, length: int, distance: int, span: int, windows: int,
                 *, seed: int = 0) -> tuple[Tensor, Tensor, int, int]:
    """Windows of natural text whose last ``span`` tokens repeat an earlier span, and
    their controls.

    Each window is ``length`` consecutive tokens of ``stream`` (seeded random offsets);
    its last ``span`` tokens are replaced by the span that starts ``distance`` tokens
    earlier, so the first occurrence sits at ``[length − span − distance, length −
    distance)`` in its own context and the second at ``[length − span, length)``. The
    control window is the same window with the first occurrence replaced by ``span``
    tokens from another random offset: the repeat's tokens and their preceding text are
    unchanged, but the model has not seen them before.

    Returns:
        ``(tokens, control, first, second)``: int64 ``[windows, length]`` twice and the
        two start indices.

    Raises:
        ValueError: unless 1 ≤ span ≤ distance and distance + span ≤ length, and the
            stream holds a window.
    """
    if not 1 <= span <= distance:
        raise ValueError(f"need 1 <= span <= distance, got span={span}, distance={distance}")
    if distance + span > length:
        raise ValueError(f"distance + span = {distance + span} exceeds length={length}")
    if windows < 1 or stream.numel() < length:
        raise ValueError(f"need windows >= 1 and a stream of >= {length} tokens, got "
                         f"windows={windows}, {stream.numel()} tokens")
    rng = random.Random(f"copy-{seed}-{length}-{distance}-{span}")
    starts = [rng.randrange(stream.numel() - length + 1) for _ in range(windows)]
    offsets = torch.arange(length)
    tokens = stream[torch.tensor(starts)[:, None] + offsets[None, :]].long()  # (W, L)
    second, first = length - span, length - span - distance
    tokens[:, second:] = tokens[:, first : first + span]
    others = [rng.randrange(stream.numel() - span + 1) for _ in range(windows)]
    control = tokens.clone()
    control[:, first : first + span] = stream[torch.tensor(others)[:, None]
                                              + torch.arange(span)[None, :]].long()
    return tokens, control, first, second


@torch.no_grad()
def copy_gain(
    model: nn.Module,
    stream: Tensor,
    lengths: Iterable[int],
    distances: Iterable[int],
    *,
    span: int = 32,
    windows: int = 32,
    seed: int = 0,
    batch_size: int = 16,
) -> list[dict]:
    """The loss on a span the first and the second time it appears, per (L, r).

    Scored are the span's tokens after its first one (whose prediction, at the second
    occurrence, cannot come from the copy): the predictions of tokens 1 … span − 1 of
    each occurrence. ``nll_first`` is their mean NLL (nats per token) at the first
    occurrence, with ``length − span − distance`` tokens of its own preceding text;
    ``nll_second`` at the repeat; ``gain`` = first − second. The two occurrences have
    different preceding text, so ``gain`` also holds that difference; the control
    (:func:`copy_windows`) scores the repeat in a window where the first occurrence is
    other text: ``nll_unseen``, and ``gain_vs_unseen`` = unseen − second is what having
    seen the span r tokens earlier is worth, all else equal. Pairs (L, r) with
    r < span or r + span > L are left out; L past a model's ``max_length`` gets
    ``None`` values.

    Returns:
        One dict per (L, r): ``length``, ``distance``, ``span``, ``windows``,
        ``nll_first``, ``nll_second``, ``gain``, ``nll_unseen``, ``gain_vs_unseen``.
    """
    device = next(model.parameters()).device
    max_length = getattr(model, "max_length", None)
    was_training = model.training
    model.eval()
    rows = []
    for length in lengths:
        for distance in distances:
            if distance + span > length or distance < span:
                continue
            row = {"length": length, "distance": distance, "span": span, "windows": windows}
            if max_length is not None and length > max_length:
                rows.append({**row, "nll_first": None, "nll_second": None, "gain": None,
                             "nll_unseen": None, "gain_vs_unseen": None,
                             "skipped": f"model's max_length is {max_length}"})
                continue
            tokens, control, first, second = copy_windows(stream, length, distance, span,
                                                          windows, seed=seed)
            sums = [0.0, 0.0, 0.0]  # first, second, second in the control
            for i in range(0, windows, batch_size):
                for source, starts, slots in ((tokens, (first, second), (0, 1)),
                                              (control, (second,), (2,))):
                    batch = source[i : i + batch_size].to(device)
                    logits = _logits(model, batch)  # (B, L, V)
                    for slot, start in zip(slots, starts):
                        # predictions at start … start+span−2 of tokens start+1 … +span−1
                        pred = logits[:, start : start + span - 1]
                        target = batch[:, start + 1 : start + span]
                        nll = F.cross_entropy(pred.transpose(1, 2), target, reduction="sum")
                        sums[slot] += nll.double().item()
            count = windows * (span - 1)
            nll_first, nll_second, nll_unseen = (total / count for total in sums)
            rows.append({**row, "nll_first": nll_first, "nll_second": nll_second,
                         "gain": nll_first - nll_second, "nll_unseen": nll_unseen,
                         "gain_vs_unseen": nll_unseen - nll_second})
    model.train(was_training)
    return rows


# ----------------------------------------------------------------------------------------
# Training with passkey windows in the mixture


@dataclass(frozen=True)
class PasskeyMixConfig:
    """A training run whose batches mix text windows with passkey windows.

    Every step draws the base run's text batch (the same generator, so the text windows
    are the base run's); the first ``round(fraction × batch_size)`` rows are then
    replaced by passkey windows of L_train + 1 tokens (the +1 is the last target), built
    from the training text as filler at a random offset, a uniform depth in [0, 1] and
    a fresh key, drawn from their own seeded generator. The loss is the usual next-token
    loss over the whole window. With ``fraction`` 0 the run is the base run exactly.

    Attributes:
        base: the :class:`TrainConfig` (model, L_train, budget, seed, corpus).
        fraction: share of each batch's windows that are passkey windows, in [0, 1].
        key_digits: k, digits per key.
        template: the words around the key (the default :class:`PasskeyTemplate`).
        answer_weight: w ≥ 0: the loss is the mean next-token loss of the batch plus w
            times the mean loss of the passkey windows' answer tokens (0: the plain
            next-token loss, in which the answer is about 5 of every 128 targets of a
            passkey window).
        repeat_fraction: share of each batch's windows (after the passkey rows) that
            are repeat windows: a text chunk of ⌈(L_train + 1) / 2⌉ tokens followed by
            itself, so that every token of the second half can be copied from the first
            (:func:`repeat_training_windows`). 0 (default): none.
    """

    base: TrainConfig
    fraction: float
    key_digits: int = 5
    template: PasskeyTemplate = PasskeyTemplate()
    answer_weight: float = 0.0
    repeat_fraction: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got fraction={self.fraction}")
        if self.key_digits < 1:
            raise ValueError(f"key_digits must be >= 1, got key_digits={self.key_digits}")
        if not 0.0 <= self.repeat_fraction <= 1.0 - self.fraction:
            raise ValueError("repeat_fraction must be in [0, 1 - fraction], got "
                             f"repeat_fraction={self.repeat_fraction}")
        if not self.answer_weight >= 0:
            raise ValueError(f"answer_weight must be >= 0, got {self.answer_weight}")

    @property
    def model(self) -> ModelConfig:
        return self.base.model

    def passkey_rows(self) -> int:
        """Passkey windows per batch."""
        return round(self.fraction * self.base.batch_size)

    def to_dict(self) -> dict:
        return {"base": self.base.to_dict(), "fraction": self.fraction,
                "key_digits": self.key_digits, "template": asdict(self.template),
                "answer_weight": self.answer_weight, "repeat_fraction": self.repeat_fraction}

    def repeat_rows(self) -> int:
        """Repeat windows per batch."""
        return round(self.repeat_fraction * self.base.batch_size)

    def answer_tokens(self) -> int:
        """Tokens of the answer (the scored tail of a passkey window)."""
        return len(byte_encode(self.template.answer.format(key="0" * self.key_digits)))


def passkey_training_windows(config: PasskeyMixConfig, stream: Tensor, rng: random.Random,
                             count: int) -> Tensor:
    """``count`` passkey windows of L_train + 1 tokens for training, int64 ``[count, L+1]``,
    filler from ``stream`` at random offsets, depths uniform in [0, 1]."""
    length = config.base.seq_len + 1
    rows = []
    for _ in range(count):
        key = random_key(rng, config.key_digits)
        depth = rng.random()
        fixed = (len(byte_encode(config.template.needle.format(key=key)))
                 + len(byte_encode(config.template.question))
                 + len(byte_encode(config.template.answer.format(key=key))))
        offset = rng.randrange(stream.numel() - (length - fixed) + 1)
        rows.append(make_passkey(byte_encode, length, depth, key, filler=stream,
                                 filler_offset=offset, template=config.template).tokens)
    return torch.stack(rows)


def repeat_training_windows(length: int, stream: Tensor, rng: random.Random,
                            count: int) -> Tensor:
    """``count`` windows of ``length`` tokens, int64 ``[count, length]``: a chunk of
    ⌈length / 2⌉ consecutive tokens of ``stream`` (random offset), then the same chunk
    again, cut to ``length``."""
    half = (length + 1) // 2
    rows = []
    for _ in range(count):
        offset = rng.randrange(stream.numel() - half + 1)
        chunk = stream[offset : offset + half].long()
        rows.append(torch.cat([chunk, chunk])[:length])
    return torch.stack(rows)


def passkey_mix_batches(config: PasskeyMixConfig, tokens: Tensor, generator: torch.Generator,
                        rng: random.Random) -> Iterator[Batch]:
    """Endless batches of the mixture of ``config``, for :func:`~posenc_lib.training.train.fit`.

    Each batch is a text batch of ``config.base`` (``batch_size`` windows of ``seq_len``
    from ``tokens``, drawn with ``generator``) whose first :meth:`~PasskeyMixConfig.passkey_rows`
    rows are replaced by passkey windows (:func:`passkey_training_windows`) and the next
    :meth:`~PasskeyMixConfig.repeat_rows` by repeat windows (:func:`repeat_training_windows`),
    both drawn with ``rng``. With passkey rows and ``answer_weight`` > 0 the batch carries
    an :class:`~posenc_lib.training.train.AnswerLoss` on their answers; otherwise None.
    """
    base = config.base
    rows, repeats = config.passkey_rows(), config.repeat_rows()
    answer = None
    if rows and config.answer_weight > 0:
        answer = AnswerLoss(rows, config.answer_tokens(), config.answer_weight)
    while True:
        inputs, targets = sample_batch(tokens, base.batch_size, base.seq_len, generator)
        if rows:
            windows = passkey_training_windows(config, tokens, rng, rows)
            inputs[:rows], targets[:rows] = windows[:, :-1], windows[:, 1:]
        if repeats:
            windows = repeat_training_windows(base.seq_len + 1, tokens, rng, repeats)
            inputs[rows : rows + repeats] = windows[:, :-1]
            targets[rows : rows + repeats] = windows[:, 1:]
        yield inputs, targets, answer


def train_passkey_mix(config: PasskeyMixConfig, device: torch.device | str = "cpu", *,
                      progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Train a fresh model on the text / passkey mixture of ``config``.

    The same initial weights, text batches, optimiser and schedule as
    :func:`~posenc_lib.training.train.train` with ``config.base``; only the replaced rows differ
    (:func:`passkey_mix_batches`, passkey draws seeded by ``"passkey-mix-{seed}"``).

    Returns:
        ``(model, record)``; the model is in eval mode on ``device``.
    """
    base = config.base
    return train_fresh(base, lambda tokens, generator: passkey_mix_batches(
        config, tokens, generator, random.Random(f"passkey-mix-{base.seed}")), device,
        desc=f"train {base.model.position} + passkeys", progress=progress)


def with_steps(config: PasskeyMixConfig, steps: int) -> PasskeyMixConfig:
    """The same recipe with another step budget (warm-up unchanged)."""
    return replace(config, base=replace(config.base, steps=steps))
