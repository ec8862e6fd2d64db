"""Multi-key recall with near-miss distractors and variable tracking: a RULER-style
retrieval probe at the book's byte-level scale.

What it measures. Several key→value statements (``needles``, e.g. ``" @kqd=4170. "``) are
hidden at controlled depths in natural byte text (the book's corpora); the window ends with
queries (``" @kqd="``), each followed by its answer (``"4170"``). A query is right when
greedy decoding of its answer bytes returns exactly the value (exact match). Three knobs
make the task harder than finding one marked needle:

* **several keys** (``num_keys``), of which ``num_queries`` are asked: the model must pick
  the statement whose key matches, not the only marked one;
* **near-miss distractors** (``distractors`` per queried key): statements whose key shares
  the queried key's prefix (all but its last ``key_length − prefix_length`` bytes) and
  whose value differs, so that matching part of the key is not enough;
* **variable tracking** (``chain_length`` > 1): the value is assigned to X1 and the
  queried key is reached through ``X2 = X1``, …, ``Xc = X(c−1)``; the answer is the value
  of X1, reachable only by following every link.

How it differs from the passkey task (:mod:`posenc_lib.tasks.retrieval`). The passkey
window holds one needle in filler and asks for it: nothing else in the window looks like
an answer, so a model can find it by its marker alone. The passkey task is this task's
one-key, one-query, no-distractor, no-chain case: :func:`passkey_recall_config` builds that
configuration from a :class:`~posenc_lib.tasks.retrieval.PasskeyTemplate`, and its windows
are byte for byte the windows :func:`~posenc_lib.tasks.retrieval.make_passkey` builds
from the same text at the same offset and depth (``tests/test_recall.py`` checks it).

Anchors (cited, not measured here):

* RULER (Hsieh et al. 2024, arXiv:2404.06654): needle-in-a-haystack variants — single,
  multi-key (``num_keys`` > 1, one query), multi-query (``num_queries`` > 1) — and
  variable tracking (``chain_length`` > 1). RULER's multi-value variant (several values
  under one key, all asked) is not built here.
* Zoology's multi-query associative recall, MQAR (Arora et al. 2023, arXiv:2312.04927):
  key–value pairs, then several queries whose answers are scored at once; here the pairs
  sit in natural text instead of back to back, and each query's answer is scored with the
  true earlier answers in context (teacher forcing, as MQAR's loss does).
* Lost in the middle (Liu et al. 2024, TACL): accuracy as a function of where the
  relevant statement sits; :func:`recall_accuracy` reports it per depth.

Depth. A needle of n tokens asked at depth d starts at ``round(d × (H − n))``, where H is
the window before the queries (the haystack): exactly the passkey task's placement when
there is one needle. Needles whose asked places overlap are moved apart, in depth order,
by the least that makes room (so a needle moves by at most the needles it collides with).
Between the needles lies one contiguous stretch of the text, read in order.

Tokens are bytes (vocabulary 256, as :func:`~posenc_lib.tasks.retrieval.byte_encode`)
unless an ``encode`` is passed: then each piece (needle, link, question, answer) is encoded
on its own by it (e.g. a subword tokenizer: one valid tokenization of the joined text, as
:func:`~posenc_lib.tasks.retrieval.make_passkey` does) and the text between is a stream of
that tokenizer's ids. The default template's markers ``@`` and ``=`` do not occur in the
Austen corpus. A model is anything that maps int64 ``[B, L]`` to logits ``[B, L, V]`` (or
to an object with ``.logits``); :func:`~posenc_lib.pretrained.passkey.score_recall_lm`
scores a transformers causal LM without its full logits.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from posenc_lib.encodings.positions import randomized_positions
from posenc_lib.model.transformer import TransformerLM
from posenc_lib.tasks.retrieval import PasskeyTemplate, repeat_training_windows
from posenc_lib.training.data import sample_batch
from posenc_lib.training.train import AnswerLoss, Batch, TrainConfig, TrainRecord, train_fresh

ROLES = ("queried", "chain", "distractor", "other")
"""A needle's role: the statement that names a queried key; an earlier link of its chain
(the first holds the value); a near-miss distractor of a queried key; a key never asked."""


@dataclass(frozen=True)
class RecallTemplate:
    """The bytes around keys and values (``{key}``, ``{value}``, ``{source}`` are filled in
    by plain replacement, so other braces are kept as they are).

    Attributes:
        needle: a statement ``key = value``; holds ``{value}`` and (unless the window has a
            single key, as in the passkey task) ``{key}``.
        link: a variable-tracking statement ``key = source``; holds ``{key}`` and
            ``{source}`` (the earlier variable's key).
        question: a query; holds ``{key}`` (unless single-key). Its answer follows it.
        answer: the scored bytes; holds ``{value}``.

    Raises:
        ValueError: naming the field that lacks a placeholder it needs.
    """

    needle: str = " @{key}={value}. "
    link: str = " @{key}=@{source}. "
    question: str = " @{key}="
    answer: str = "{value}"

    def __post_init__(self) -> None:
        for name, holes in (("needle", ("{value}",)), ("link", ("{key}", "{source}")),
                            ("answer", ("{value}",))):
            text = getattr(self, name)
            for hole in holes:
                if hole not in text:
                    raise ValueError(f"template {name} must contain {hole!r}, got {name}={text!r}")
        if "{key}" in self.answer:
            raise ValueError(f"template answer must not contain '{{key}}', got answer={self.answer!r}")

    @property
    def names_keys(self) -> bool:
        """Whether needles and questions show the key (needed for more than one key)."""
        return "{key}" in self.needle and "{key}" in self.question


def _text(text: str, key: str = "", value: str = "", source: str = "") -> str:
    return text.replace("{key}", key).replace("{value}", value).replace("{source}", source)


def _fill(text: str, key: str = "", value: str = "", source: str = "") -> bytes:
    return _text(text, key, value, source).encode("utf-8")


def _encoded(text: str, encode: Callable[[str], Sequence[int]] | None) -> list[int]:
    """``text`` as token ids: its UTF-8 bytes, or ``encode(text)``."""
    return list(text.encode("utf-8")) if encode is None else list(encode(text))


@dataclass(frozen=True)
class RecallConfig:
    """One recall task: how many keys, queries, distractors, how long a chain.

    Attributes:
        num_keys: keys with a value in the window (chains count once), ≥ 1.
        num_queries: how many of them are asked, 1 … ``num_keys``, in random order.
        distractors: near-miss statements per queried key, ≥ 0: the key shares the
            queried key's first ``prefix_length`` bytes and differs after; the value
            differs from the queried key's value. Never asked.
        chain_length: statements from the value to a queried key, ≥ 1 (1: ``key =
            value``; c: ``X1 = value``, ``X2 = X1``, …, ``Xc = X(c−1)``, Xc asked).
        key_length, value_length: bytes per key and per value, ≥ 1.
        key_alphabet, value_alphabet: the ASCII characters keys and values are drawn
            from (uniformly, each character independently), ≥ 2 distinct characters.
        prefix_length: bytes a distractor shares with its queried key (default
            ``key_length − 1``). Keys that are not distractors all have different
            prefixes, so a near miss comes only from a distractor.
        template: the bytes around keys and values.

    Raises:
        ValueError: naming the argument, for any count out of range, distractors with no
            key to be near, an alphabet too small for the keys asked, or a template that
            does not show keys when there is more than one.
    """

    num_keys: int = 4
    num_queries: int = 1
    distractors: int = 0
    chain_length: int = 1
    key_length: int = 3
    value_length: int = 4
    key_alphabet: str = string.ascii_lowercase
    value_alphabet: str = string.digits
    prefix_length: int | None = None
    template: RecallTemplate = RecallTemplate()

    def __post_init__(self) -> None:
        if self.distractors > 0 and self.num_keys < 1:
            raise ValueError(f"distractors need keys to be near: distractors={self.distractors} "
                             f"with num_keys={self.num_keys}")
        if self.num_keys < 1:
            raise ValueError(f"num_keys must be >= 1, got num_keys={self.num_keys}")
        if not 1 <= self.num_queries <= self.num_keys:
            raise ValueError(f"num_queries must be in [1, num_keys={self.num_keys}], "
                             f"got num_queries={self.num_queries}")
        if self.distractors < 0:
            raise ValueError(f"distractors must be >= 0, got distractors={self.distractors}")
        if self.chain_length < 1:
            raise ValueError(f"chain_length must be >= 1, got chain_length={self.chain_length}")
        for name in ("key_length", "value_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {name}={getattr(self, name)}")
        for name in ("key_alphabet", "value_alphabet"):
            alphabet = getattr(self, name)
            if len(set(alphabet)) != len(alphabet) or len(alphabet) < 2 or not alphabet.isascii():
                raise ValueError(f"{name} must hold >= 2 distinct ASCII characters, got {name}={alphabet!r}")
        p = self.shared_prefix
        if not 0 <= p < self.key_length:
            raise ValueError(f"prefix_length must be in [0, key_length={self.key_length}), got prefix_length={p}")
        if self.distractors and p == 0:
            raise ValueError("distractors need a shared prefix: prefix_length >= 1 (and key_length >= 2), "
                             f"got prefix_length={p}, key_length={self.key_length}")
        a = len(self.key_alphabet)
        if a ** (self.key_length - p) - 1 < self.distractors:
            raise ValueError(f"distractors={self.distractors} exceeds the {a ** (self.key_length - p) - 1} "
                             f"keys that share a queried key's prefix (key_length={self.key_length}, "
                             f"prefix_length={p})")
        primary = self.num_keys + self.num_queries * (self.chain_length - 1)
        distinct = a ** p if p > 0 else a ** self.key_length  # keys that are not near misses of each other
        if distinct < primary:
            raise ValueError(f"key_length={self.key_length} (prefix_length={p}) over {a} characters gives "
                             f"{distinct} keys with different prefixes, fewer than the {primary} needed")
        if primary > 1 and not self.template.names_keys:
            raise ValueError("template needle and question must contain '{key}' when a window has more "
                             f"than one key, got template={self.template!r}")

    @property
    def shared_prefix(self) -> int:
        """Bytes a distractor shares with its queried key."""
        return self.key_length - 1 if self.prefix_length is None else self.prefix_length

    def needle_roles(self) -> tuple[str, ...]:
        """The role of each needle, in the order :func:`make_recall_window` takes depths:
        for each query, its chain (``"chain"`` × (c − 1), then ``"queried"``) and its
        distractors; then the keys never asked (``"other"``)."""
        per_query = ("chain",) * (self.chain_length - 1) + ("queried",) + ("distractor",) * self.distractors
        return per_query * self.num_queries + ("other",) * (self.num_keys - self.num_queries)

    def _needle_bytes(self, role: str) -> int:
        t, k, v = self.template, "k" * self.key_length, "v" * self.value_length
        if role == "queried" and self.chain_length > 1:
            return len(_fill(t.link, key=k, source=k))
        return len(_fill(t.needle, key=k, value=v))

    def tail_tokens(self) -> int:
        """Tokens of the queries and their answers at the end of a window."""
        t = self.template
        one = len(_fill(t.question, key="k" * self.key_length)) + len(_fill(t.answer, value="v" * self.value_length))
        return one * self.num_queries

    def min_length(self) -> int:
        """The shortest window of bytes: every needle, the queries and answers, no text."""
        return sum(self._needle_bytes(r) for r in self.needle_roles()) + self.tail_tokens()


def passkey_recall_config(template: PasskeyTemplate | None = None, key_digits: int = 5) -> RecallConfig:
    """The passkey task as a recall task: one key, one query, no distractor, no chain, the
    passkey wording (``template``, default :class:`~posenc_lib.tasks.retrieval.PasskeyTemplate`;
    its ``{key}`` is this module's ``{value}``), ``key_digits`` decimal digits. Its windows
    equal :func:`~posenc_lib.tasks.retrieval.make_passkey`'s from the same text, offset and
    depth (the key drawn is not shown: the wording names no key)."""
    template = PasskeyTemplate() if template is None else template
    return RecallConfig(
        num_keys=1, num_queries=1, distractors=0, chain_length=1, key_length=1,
        value_length=key_digits, value_alphabet=string.digits,
        template=RecallTemplate(needle=template.needle.replace("{key}", "{value}"),
                                question=template.question,
                                answer=template.answer.replace("{key}", "{value}")))


@dataclass(frozen=True)
class Needle:
    """One statement in a window.

    Attributes:
        key: the key it assigns.
        value: the value (for a ``key = value`` statement) or None (a link).
        source: the earlier variable's key (a link) or None.
        role: one of :data:`ROLES`.
        query: index of the query it belongs to (None for ``"other"``).
        depth: the depth asked, in [0, 1].
        start, end: its token span ``[start, end)`` in the window.
    """

    key: str
    value: str | None
    source: str | None
    role: str
    query: int | None
    depth: float
    start: int
    end: int


@dataclass(frozen=True)
class Query:
    """One query and its answer.

    Attributes:
        key: the key asked.
        value: the right value (after following the chain).
        distractor_values: the values of its near-miss distractors.
        depth: the depth asked of the statement that names ``key`` (role ``"queried"``).
        value_depth: the depth asked of the statement that holds the value (the chain's
            first; ``depth`` when there is no chain).
        question_start: index of the question's first token.
        answer_start, answer_end: the scored span ``[answer_start, answer_end)``.
    """

    key: str
    value: str
    distractor_values: tuple[str, ...]
    depth: float
    value_depth: float
    question_start: int
    answer_start: int
    answer_end: int


@dataclass(frozen=True)
class RecallWindow:
    """One recall window.

    Attributes:
        tokens: ``[length]``: text and needles, then question, answer, question, … (uint8
            bytes; int64 ids when built with an ``encode``).
        config: the task.
        needles: in window order.
        queries: in the order asked.
        text_offset: where the text between the needles starts in the stream.
        encode: the tokenizer its pieces were encoded with (None: bytes).
    """

    tokens: Tensor
    config: RecallConfig
    needles: tuple[Needle, ...]
    queries: tuple[Query, ...]
    text_offset: int
    encode: Callable[[str], Sequence[int]] | None = field(default=None, compare=False, repr=False)

    def answer_tokens(self, value: str) -> list[int]:
        """The tokens of the template's answer holding ``value`` (as the window encodes it)."""
        return _encoded(_text(self.config.template.answer, value=value), self.encode)

    def judge(self, query: Query, predicted: Tensor) -> dict:
        """Exact match of one query from the argmax tokens at its answer positions.

        Args:
            query: one of :attr:`queries`.
            predicted: int ``[A]``, the argmax after each of the positions
                ``answer_start − 1 … answer_end − 2`` (teacher-forced: each given the true
                tokens before it), A = ``answer_end − answer_start``.

        Returns:
            ``{"correct": bool, "right_tokens": int, "tokens": int, "distractor": bool}``:
            every answer token right; how many are; A; the answer is exactly a near-miss
            distractor's value.

        Raises:
            ValueError: if ``predicted`` does not hold A tokens.
        """
        truth = self.tokens[query.answer_start : query.answer_end].long()
        predicted = predicted.long().cpu()
        if predicted.shape != truth.shape:
            raise ValueError(f"predicted must hold the {truth.numel()} answer tokens, got shape "
                             f"{tuple(predicted.shape)}")
        wrong = {tuple(self.answer_tokens(v)) for v in query.distractor_values}
        return {"correct": bool(torch.equal(predicted, truth)), "right_tokens": int((predicted == truth).sum()),
                "tokens": truth.numel(), "distractor": tuple(predicted.tolist()) in wrong}

    @property
    def length(self) -> int:
        return self.tokens.numel()

    @property
    def answer_spans(self) -> list[tuple[int, int]]:
        """``[answer_start, answer_end)`` of each query."""
        return [(q.answer_start, q.answer_end) for q in self.queries]

    def describe(self) -> dict:
        """The window without its tokens (JSON-ready)."""
        return {"length": self.length, "text_offset": self.text_offset,
                "needles": [vars(n) for n in self.needles], "queries": [vars(q) for q in self.queries]}


def _word(index: int, alphabet: str, width: int) -> str:
    chars = []
    for _ in range(width):
        index, r = divmod(index, len(alphabet))
        chars.append(alphabet[r])
    return "".join(reversed(chars))


def _draw_keys(config: RecallConfig, rng: random.Random) -> list[str]:
    """The keys that are not distractors: pairwise different prefixes."""
    a, p, k = config.key_alphabet, config.shared_prefix, config.key_length
    primary = config.num_keys + config.num_queries * (config.chain_length - 1)
    if p == 0:
        keys = [_word(i, a, k) for i in rng.sample(range(len(a) ** k), primary)]
    else:
        prefixes = [_word(i, a, p) for i in rng.sample(range(len(a) ** p), primary)]
        keys = [pre + _word(rng.randrange(len(a) ** (k - p)), a, k - p) for pre in prefixes]
    return keys


def _near_misses(key: str, config: RecallConfig, rng: random.Random) -> list[str]:
    a, p, k = config.key_alphabet, config.shared_prefix, config.key_length
    own = key[p:]
    suffixes = (_word(i, a, k - p) for i in rng.sample(range(len(a) ** (k - p)), config.distractors + 1))
    return [key[:p] + s for s in suffixes if s != own][: config.distractors]


def _value(config: RecallConfig, rng: random.Random, unlike: str | None = None) -> str:
    while True:
        value = "".join(rng.choice(config.value_alphabet) for _ in range(config.value_length))
        if value != unlike:
            return value


def _check_depths(depths: Sequence[float], count: int) -> list[float]:
    depths = [float(d) for d in depths]
    if len(depths) != count:
        raise ValueError(f"depths must give one depth per needle ({count}, see needle_roles()), "
                         f"got {len(depths)} depths")
    for d in depths:
        if not 0.0 <= d <= 1.0 or math.isnan(d):
            raise ValueError(f"depths must be in [0, 1], got depths={depths}")
    return depths


def _place(sizes: list[int], depths: list[float], haystack: int) -> list[int]:
    """Start of each needle: ``round(d × (H − n))``, moved apart in depth order where they
    overlap (forward, then back from the end so the last fits)."""
    order = sorted(range(len(sizes)), key=lambda i: (round(depths[i] * (haystack - sizes[i])), i))
    starts = [0] * len(sizes)
    floor = 0
    for i in order:
        starts[i] = max(round(depths[i] * (haystack - sizes[i])), floor)
        floor = starts[i] + sizes[i]
    ceiling = haystack
    for i in reversed(order):
        starts[i] = min(starts[i], ceiling - sizes[i])
        ceiling = starts[i]
    return starts


def make_recall_window(
    config: RecallConfig,
    length: int,
    depths: Sequence[float] | None,
    rng: random.Random,
    text: Tensor,
    *,
    encode: Callable[[str], Sequence[int]] | None = None,
) -> RecallWindow:
    """Build one recall window of exactly ``length`` tokens.

    Draws (from ``rng``, in this order): the keys, the queried keys' order and values,
    the distractors, the depths when ``depths`` is None, and the text's offset.

    Args:
        config: the task.
        length: L, tokens in the window, answers included.
        depths: one depth in [0, 1] per needle, in the order of
            :meth:`RecallConfig.needle_roles`; None: each drawn uniformly, those of a
            chain sorted so that it reads in order.
        rng: the seeded source of every draw.
        text: a token stream ``[N]`` (uint8 or int, bytes; with ``encode``, that
            tokenizer's ids), e.g. ``load_corpus("austen").validation``; consecutive
            tokens of it fill the space between the needles (``L − config.min_length()``
            of them for bytes).
        encode: text → token ids for each piece (None: UTF-8 bytes, the book's models).

    Returns:
        A :class:`RecallWindow`: tokens ``[length]`` (uint8 for bytes, int64 with
        ``encode``), needles and queries with their spans.

    Raises:
        ValueError: naming ``length`` when the window cannot hold the needles and
            queries, ``depths`` for a wrong count or a depth outside [0, 1], ``text``
            for a stream too short or (bytes) a token that is not a byte.
    """
    roles = config.needle_roles()
    if depths is not None:
        depths = _check_depths(depths, len(roles))
    t = config.template
    keys = _draw_keys(config, rng)
    order = list(range(config.num_keys))
    rng.shuffle(order)  # which keys are asked, and in which order
    asked, others = order[: config.num_queries], order[config.num_queries :]
    chains: list[list[str]] = []
    extra = iter(keys[config.num_keys :])
    for i in asked:  # the chain X1 … Xc ends at the asked key
        chains.append([next(extra) for _ in range(config.chain_length - 1)] + [keys[i]])
    values = [_value(config, rng) for _ in asked]
    near = [_near_misses(chain[-1], config, rng) for chain in chains]
    near_values = [[_value(config, rng, unlike=v) for _ in ks] for v, ks in zip(values, near)]
    other_values = [_value(config, rng) for _ in others]
    # the needles in needle_roles() order: (key, value, source, role, query)
    specs: list[tuple[str, str | None, str | None, str, int | None]] = []
    for q, chain in enumerate(chains):
        for j, key in enumerate(chain):
            role = "queried" if j == len(chain) - 1 else "chain"
            if j == 0:
                specs.append((key, values[q], None, role, q))
            else:
                specs.append((key, None, chain[j - 1], role, q))
        specs += [(key, v, None, "distractor", q) for key, v in zip(near[q], near_values[q])]
    specs += [(keys[i], v, None, "other", None) for i, v in zip(others, other_values)]
    if depths is None:
        depths = [rng.random() for _ in specs]
        per_chain = config.chain_length
        step = per_chain + config.distractors
        for q in range(config.num_queries):
            depths[q * step : q * step + per_chain] = sorted(depths[q * step : q * step + per_chain])
    pieces = [_encoded(_text(t.needle, key=k, value=v) if v is not None else _text(t.link, key=k, source=s),
                       encode) for k, v, s, _, _ in specs]
    tail_parts = []
    for chain, value in zip(chains, values):
        tail_parts += [_encoded(_text(t.question, key=chain[-1]), encode),
                       _encoded(_text(t.answer, value=value), encode)]
    haystack = length - sum(len(p) for p in tail_parts)
    sizes = [len(p) for p in pieces]
    num_text = haystack - sum(sizes)
    if num_text < 0:
        raise ValueError(f"the needles, questions and answers take {length - num_text} tokens, more "
                         f"than the window length={length}")
    starts = _place(sizes, depths, haystack)
    if text.dim() != 1 or text.numel() < num_text:
        raise ValueError(f"text must be a 1-D stream of >= {num_text} tokens, got shape {tuple(text.shape)}")
    offset = rng.randrange(text.numel() - num_text + 1)
    filler = text[offset : offset + num_text]
    dtype = torch.uint8 if encode is None else torch.int64
    if encode is None and filler.numel() and (int(filler.min()) < 0 or int(filler.max()) > 255):
        raise ValueError("text must hold bytes (0 … 255), got a token outside that range")
    filler = filler.to(dtype)
    window = torch.empty(length, dtype=dtype)
    used, pos = 0, 0
    for i in sorted(range(len(pieces)), key=lambda i: starts[i]):
        gap = starts[i] - pos
        window[pos : starts[i]] = filler[used : used + gap]
        used += gap
        window[starts[i] : starts[i] + sizes[i]] = torch.tensor(pieces[i], dtype=dtype)
        pos = starts[i] + sizes[i]
    window[pos:haystack] = filler[used:]
    pos, queries = haystack, []
    for q, (chain, value) in enumerate(zip(chains, values)):
        question, answer = tail_parts[2 * q], tail_parts[2 * q + 1]
        window[pos : pos + len(question)] = torch.tensor(question, dtype=dtype)
        window[pos + len(question) : pos + len(question) + len(answer)] = torch.tensor(answer, dtype=dtype)
        first = q * (config.chain_length + config.distractors)
        queries.append(Query(key=chain[-1], value=value, distractor_values=tuple(near_values[q]),
                             depth=depths[first + config.chain_length - 1], value_depth=depths[first],
                             question_start=pos, answer_start=pos + len(question),
                             answer_end=pos + len(question) + len(answer)))
        pos += len(question) + len(answer)
    needles = tuple(sorted((Needle(key=k, value=v, source=s, role=r, query=q, depth=d, start=b, end=b + n)
                            for (k, v, s, r, q), d, b, n in zip(specs, depths, starts, sizes)),
                           key=lambda n: n.start))
    return RecallWindow(tokens=window, config=config, needles=needles, queries=tuple(queries),
                        text_offset=offset, encode=encode)


def sample_recall_windows(
    config: RecallConfig,
    length: int,
    depth: float | None,
    trials: int,
    text: Tensor,
    *,
    seed: int = 0,
    encode: Callable[[str], Sequence[int]] | None = None,
) -> list[RecallWindow]:
    """``trials`` seeded windows of one (L, depth): the statements that name the queried
    keys at ``depth`` (they sit side by side when there are several), the earlier links of
    their chains uniform in [0, depth] and in order, every other needle uniform in [0, 1].
    ``depth`` None: every needle uniform. The same arguments always give the same windows
    (seeded by ``(seed, length, depth)``). ``encode``: as :func:`make_recall_window`.

    Raises:
        ValueError: for ``trials`` < 1, ``depth`` outside [0, 1], and as
            :func:`make_recall_window`.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got trials={trials}")
    if depth is not None:
        _check_depths([depth], 1)
    rng = random.Random(f"recall-{seed}-{length}-{depth!r}")
    roles = config.needle_roles()
    windows = []
    for _ in range(trials):
        depths = None
        if depth is not None:
            depths = [depth if r == "queried" else rng.random() for r in roles]
            step = config.chain_length + config.distractors
            for q in range(config.num_queries):
                links = depths[q * step : q * step + config.chain_length - 1]
                depths[q * step : q * step + config.chain_length - 1] = sorted(d * depth for d in links)
        windows.append(make_recall_window(config, length, depths, rng, text, encode=encode))
    return windows


@dataclass(frozen=True)
class RecallBatch:
    """Training windows: ``inputs`` and next-token ``targets`` int64 ``[B, L]``, and
    ``answer_mask`` bool ``[B, L]``, True where the target is an answer byte."""

    inputs: Tensor
    targets: Tensor
    answer_mask: Tensor


def recall_training_batch(config: RecallConfig, seq_len: int, batch_size: int, rng: random.Random,
                          text: Tensor) -> RecallBatch:
    """``batch_size`` windows of ``seq_len + 1`` tokens (the +1 is the last target), depths
    uniform (:func:`make_recall_window` with ``depths`` None), text from ``text`` (the
    training split) at random offsets. Use with :func:`recall_loss`."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got batch_size={batch_size}")
    windows = [make_recall_window(config, seq_len + 1, None, rng, text) for _ in range(batch_size)]
    tokens = torch.stack([w.tokens for w in windows]).long()  # (B, L+1)
    mask = torch.zeros(batch_size, seq_len + 1, dtype=torch.bool)
    for b, w in enumerate(windows):
        for start, end in w.answer_spans:
            mask[b, start:end] = True
    return RecallBatch(inputs=tokens[:, :-1], targets=tokens[:, 1:], answer_mask=mask[:, 1:])


def recall_loss(logits: Tensor, targets: Tensor, answer_mask: Tensor, answer_weight: float = 0.0) -> Tensor:
    """The mean next-token loss (nats) plus ``answer_weight`` × the mean loss of the answer
    bytes: :func:`~posenc_lib.tasks.retrieval.train_passkey_mix`'s weighted answer loss,
    with the answer bytes given by a mask (here they are spread over the queries).

    Args:
        logits: float ``[B, L, V]``; targets: int64 ``[B, L]``; answer_mask: bool
            ``[B, L]`` (rows with no answer, e.g. plain text, are all False).
        answer_weight: w ≥ 0.

    Returns:
        A scalar tensor.
    """
    if not answer_weight >= 0:
        raise ValueError(f"answer_weight must be >= 0, got answer_weight={answer_weight}")
    nll = F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")  # (B, L)
    loss = nll.mean()
    if answer_weight > 0:
        loss = loss + AnswerLoss(targets.shape[0], 1, answer_weight, answer_mask).term(nll)
    return loss


@torch.no_grad()
def recall_accuracy(model: nn.Module, windows: Sequence[RecallWindow], *, batch_size: int = 32,
                    by_depth: bool = True) -> list[dict]:
    """Exact match of every query's answer under greedy decoding, per (L, depth, task).

    Greedy decoding returns exactly the answer's bytes if and only if, with the true
    answer fed in (teacher forcing), the argmax at every answer position is the true next
    byte, so one forward pass per window decides every query (as
    :func:`~posenc_lib.tasks.retrieval.score_passkeys`); a later query sees the true
    answers of the earlier ones. A model with a longest input (``model.max_length``) gets
    rows with ``accuracy`` None and a ``skipped`` reason for each L past it.

    Args:
        model: maps int64 ``[B, L]`` to logits ``[B, L, V]`` (or an output with ``.logits``).
        windows: any mix of lengths and tasks.
        batch_size: windows per forward pass.
        by_depth: one row per depth (pin depths with :func:`sample_recall_windows`); False:
            depths pooled, ``depth`` None (for windows with random depths, which would
            otherwise give a row per query).

    Returns:
        One dict per (``length``, ``depth``, ``num_keys``, ``num_queries``,
        ``distractors``, ``chain_length``) where ``depth`` is the query's
        :attr:`Query.depth`, sorted: those keys and ``windows``, ``queries``, ``correct``,
        ``accuracy`` (correct / queries), ``byte_accuracy`` (answer bytes whose argmax is
        right / answer bytes), ``distractor_answers`` (queries answered with exactly a
        distractor's value).
    """
    max_length = getattr(model, "max_length", None)
    groups: dict[tuple, dict] = {}
    by_length: dict[int, list[RecallWindow]] = {}
    for w in windows:
        by_length.setdefault(w.length, []).append(w)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    for length, group in sorted(by_length.items()):
        skip = max_length is not None and length > max_length
        for i in range(0, len(group), batch_size):
            chunk = group[i : i + batch_size]
            predicted = None
            if not skip:
                batch = torch.stack([w.tokens for w in chunk]).long().to(device)  # (B, L)
                out = model(batch)
                logits = (out.logits if hasattr(out, "logits") else out).float()
                predicted = logits.argmax(-1).cpu()  # (B, L): the byte predicted after each
            for b, w in enumerate(chunk, start=i):
                c = w.config
                for q in w.queries:
                    depth = q.depth if by_depth else None
                    key = (length, depth, c.num_keys, c.num_queries, c.distractors, c.chain_length)
                    row = groups.setdefault(key, {"windows": set(), "queries": 0, "correct": 0, "bytes": 0,
                                                  "right_bytes": 0, "distractor_answers": 0})
                    row["windows"].add(b)
                    row["queries"] += 1
                    if predicted is None:
                        continue
                    judged = w.judge(q, predicted[b - i, q.answer_start - 1 : q.answer_end - 1])
                    row["correct"] += int(judged["correct"])
                    row["bytes"] += judged["tokens"]
                    row["right_bytes"] += judged["right_tokens"]
                    row["distractor_answers"] += int(judged["distractor"])
    model.train(was_training)
    rows = []
    for key, g in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1] or 0.0, item[0][2:])):
        length, depth, num_keys, num_queries, distractors, chain_length = key
        row = {"length": length, "depth": depth, "num_keys": num_keys, "num_queries": num_queries,
               "distractors": distractors, "chain_length": chain_length, "windows": len(g["windows"]),
               "queries": g["queries"]}
        if max_length is not None and length > max_length:
            rows.append({**row, "correct": None, "accuracy": None, "byte_accuracy": None,
                         "distractor_answers": None, "skipped": f"model's max_length is {max_length}"})
            continue
        rows.append({**row, "correct": g["correct"], "accuracy": g["correct"] / g["queries"],
                     "byte_accuracy": g["right_bytes"] / g["bytes"],
                     "distractor_answers": g["distractor_answers"]})
    return rows


# ----------------------------------------------------------------------------------------
# Training with recall windows in the mixture, task by task (a curriculum)


@dataclass(frozen=True)
class RecallStage:
    """One stage of a curriculum: ``steps`` optimiser steps whose recall windows are of
    task ``task``.

    Raises:
        ValueError: for ``steps`` below 1.
    """

    task: RecallConfig
    steps: int

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got steps={self.steps}")


@dataclass(frozen=True)
class RecallMixConfig:
    """A training run whose batches mix text windows, recall windows and repeat windows,
    with the recall task changing stage by stage (a curriculum, e.g. one key, then two
    keys with a distractor, then four keys with two distractors).

    Every step draws the base run's text batch (the same generator as
    :func:`~posenc_lib.training.train.train`); its first ``round(fraction × batch_size)``
    rows are replaced by recall windows of the current stage's task
    (:func:`recall_training_batch`: L_train + 1 tokens, uniform depths, text from the
    training split), the next ``round(repeat_fraction × batch_size)`` by repeat windows
    (:func:`~posenc_lib.tasks.retrieval.repeat_training_windows`: a text chunk, then the
    same chunk: they teach copying, which chapter 12's passkey recipe needed). The loss is
    the batch's mean next-token loss plus ``answer_weight`` × the mean loss of the recall
    answers' bytes. The learning-rate schedule spans the whole run (one warm-up, one cosine
    decay), so a stage boundary changes the data only.

    Attributes:
        base: the :class:`~posenc_lib.training.train.TrainConfig` (model, L_train, budget,
            seed, corpus); ``base.steps`` must equal the stages' steps summed.
        stages: the curriculum, in order, ≥ 1 stage.
        fraction: share of each batch's windows that are recall windows, in (0, 1].
        repeat_fraction: share that are repeat windows, in [0, 1 − fraction].
        answer_weight: w ≥ 0.
        position_range: None (positions 0 … L_train − 1), or M ≥ L_train: every training
            window gets its own positions, an ordered random subset of L_train of
            0 … M − 1 (randomized positional encodings, Ruoss et al. 2023, cited, not
            measured here), drawn from their own generator (seeded by the base seed), so
            the windows are the same as without them. A learned table needs
            ``max_positions`` ≥ M.

    Raises:
        ValueError: naming the argument out of range, and ``stages`` when their steps do
            not sum to ``base.steps`` or a stage's windows do not fit in L_train + 1.
    """

    base: TrainConfig
    stages: tuple[RecallStage, ...]
    fraction: float = 0.5
    repeat_fraction: float = 0.25
    answer_weight: float = 1.0
    position_range: int | None = None

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("stages must hold at least one RecallStage, got stages=()")
        total = sum(stage.steps for stage in self.stages)
        if total != self.base.steps:
            raise ValueError(f"stages must sum to base.steps={self.base.steps}, got {total} steps")
        for stage in self.stages:
            if stage.task.min_length() > self.base.seq_len + 1:
                raise ValueError(f"stages: a window of {stage.task} needs {stage.task.min_length()} "
                                 f"tokens, more than seq_len + 1 = {self.base.seq_len + 1}")
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got fraction={self.fraction}")
        if not 0.0 <= self.repeat_fraction <= 1.0 - self.fraction:
            raise ValueError("repeat_fraction must be in [0, 1 - fraction], got "
                             f"repeat_fraction={self.repeat_fraction}")
        if not self.answer_weight >= 0:
            raise ValueError(f"answer_weight must be >= 0, got answer_weight={self.answer_weight}")
        if self.position_range is not None:
            if self.position_range < self.base.seq_len:
                raise ValueError(f"position_range must be >= seq_len={self.base.seq_len}, got "
                                 f"position_range={self.position_range}")
            model = self.base.model
            if model.position == "learned" and model.max_positions < self.position_range:
                raise ValueError(f"position_range={self.position_range} needs a learned table of as "
                                 f"many rows, got max_positions={model.max_positions}")

    @property
    def model(self):
        return self.base.model

    def recall_rows(self) -> int:
        """Recall windows per batch (at least one)."""
        return max(1, round(self.fraction * self.base.batch_size))

    def repeat_rows(self) -> int:
        """Repeat windows per batch."""
        return round(self.repeat_fraction * self.base.batch_size)

    def to_dict(self) -> dict:
        out = {"base": self.base.to_dict(), "stages": [asdict(stage) for stage in self.stages],
               "fraction": self.fraction, "repeat_fraction": self.repeat_fraction,
               "answer_weight": self.answer_weight}
        if self.position_range is not None:  # absent otherwise: earlier keys stay the same
            out["position_range"] = self.position_range
        return out

    def describe(self) -> str:
        """The curriculum in one line, e.g. ``1k0d×800 → 2k1d×800 → 4k2d×1600``
        (keys, distractors, chain length when > 1, steps)."""
        parts = []
        for stage in self.stages:
            t = stage.task
            chain = f"c{t.chain_length}" if t.chain_length > 1 else ""
            parts.append(f"{t.num_keys}k{t.distractors}d{chain}×{stage.steps}")
        positions = "" if self.position_range is None else f", positions in [0, {self.position_range})"
        return " → ".join(parts) + positions


def recall_mix_batches(config: RecallMixConfig, tokens: Tensor, generator: torch.Generator,
                       rng: random.Random) -> Iterator[Batch]:
    """The batches of ``config``, one per step, for :func:`~posenc_lib.training.train.fit`.

    Each batch is a text batch of ``config.base`` (drawn with ``generator`` from
    ``tokens``) whose first :meth:`RecallMixConfig.recall_rows` rows are recall windows of
    the current stage's task and the next :meth:`RecallMixConfig.repeat_rows` repeat
    windows, both drawn with ``rng``; with ``answer_weight`` > 0 it carries an
    :class:`~posenc_lib.training.train.AnswerLoss` whose mask marks the answer bytes.
    With ``position_range`` M each batch carries a fourth entry, int64 ``[B, L]``: per
    window, L sorted positions drawn without replacement from 0 … M − 1. Ends after
    ``base.steps`` batches.
    """
    base = config.base
    rows, repeats = config.recall_rows(), config.repeat_rows()
    draws = torch.Generator().manual_seed(base.seed + 1_000_003)  # positions only
    for stage in config.stages:
        for _ in range(stage.steps):
            inputs, targets = sample_batch(tokens, base.batch_size, base.seq_len, generator)
            recall = recall_training_batch(stage.task, base.seq_len, rows, rng, tokens)
            inputs[:rows], targets[:rows] = recall.inputs, recall.targets
            if repeats:
                windows = repeat_training_windows(base.seq_len + 1, tokens, rng, repeats)
                inputs[rows : rows + repeats] = windows[:, :-1]
                targets[rows : rows + repeats] = windows[:, 1:]
            answer = None
            if config.answer_weight > 0:
                answer = AnswerLoss(rows, 1, config.answer_weight, recall.answer_mask)
            if config.position_range is None:
                yield inputs, targets, answer
                continue
            positions = randomized_positions(base.batch_size, base.seq_len, config.position_range,
                                             draws)  # [B, L]
            yield inputs, targets, answer, positions


def train_recall_mix(config: RecallMixConfig, device: torch.device | str = "cpu", *,
                     progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Train a fresh model on the text / recall / repeat mixture of ``config``: the same
    initial weights, optimiser and schedule as :func:`~posenc_lib.training.train.train`
    with ``config.base``; recall and repeat draws seeded by ``"recall-mix-{seed}"``.

    Returns:
        ``(model, record)``; the model is in eval mode on ``device``.
    """
    base = config.base
    return train_fresh(base, lambda tokens, generator: recall_mix_batches(
        config, tokens, generator, random.Random(f"recall-mix-{base.seed}")), device,
        desc=f"train {base.model.position} + recall ({config.describe()})", progress=progress)
