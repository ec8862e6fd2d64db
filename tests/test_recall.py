"""posenc_lib.tasks.recall: multi-key recall windows (depths, keys, near-miss distractors,
variable-tracking chains), their scoring, the training batch, the passkey task as its
one-key case, and errors that name the argument."""

from __future__ import annotations

import random
import re
import string
from dataclasses import replace

import pytest
import torch
from torch import nn

from posenc_lib.model.transformer import ModelConfig, TransformerLM
from posenc_lib.tasks.recall import (
    RecallConfig,
    RecallMixConfig,
    RecallStage,
    RecallTemplate,
    make_recall_window,
    passkey_recall_config,
    recall_accuracy,
    recall_loss,
    recall_mix_batches,
    recall_training_batch,
    sample_recall_windows,
)
from posenc_lib.tasks.retrieval import MARKED_TEMPLATE, byte_encode, make_passkey
from posenc_lib.training.data import load_corpus, sample_batch
from posenc_lib.training.train import TrainConfig


@pytest.fixture(scope="module")
def text() -> torch.Tensor:
    return load_corpus("austen").validation


HARD = RecallConfig(num_keys=4, num_queries=2, distractors=2, chain_length=3)
STATEMENT = re.compile(rb" @([a-z]+)=(@[a-z]+|[0-9]+)\. ")


def as_bytes(tokens: torch.Tensor) -> bytes:
    return bytes(tokens.tolist())


def haystack(window) -> bytes:
    return as_bytes(window.tokens[: window.queries[0].question_start])


class NextByte(nn.Module):
    """A fake model whose logits put all weight on a known next byte: the window's own
    next byte (an oracle), or the next byte of a stand-in window with the same prefix."""

    def __init__(self, stand_ins: dict[bytes, torch.Tensor] | None = None) -> None:
        super().__init__()
        self.stand_ins = stand_ins or {}
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        batch, length = ids.shape
        logits = torch.zeros(batch, length, 256)
        for b in range(batch):
            row = self.stand_ins.get(as_bytes(ids[b]), ids[b])
            nxt = torch.cat([row[1:], row[:1]]).long()
            logits[b, torch.arange(length), nxt] = 10.0
        return logits


class UniformValues(nn.Module):
    """Random logits over the value alphabet's bytes (seeded), −inf elsewhere: a model with
    no memory whose greedy byte is uniform over the alphabet."""

    def __init__(self, alphabet: str) -> None:
        super().__init__()
        self.allowed = torch.tensor(list(alphabet.encode()))
        self.generator = torch.Generator().manual_seed(0)
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits = torch.full((*ids.shape, 256), float("-inf"))
        noise = torch.rand((*ids.shape, len(self.allowed)), generator=self.generator)
        logits[..., self.allowed] = noise
        return logits


def test_sampling_is_seeded(text) -> None:
    a = sample_recall_windows(HARD, 256, 0.5, 6, text, seed=3)
    b = sample_recall_windows(HARD, 256, 0.5, 6, text, seed=3)
    c = sample_recall_windows(HARD, 256, 0.5, 6, text, seed=4)
    assert [w.describe() for w in a] == [w.describe() for w in b]
    assert all(torch.equal(x.tokens, y.tokens) for x, y in zip(a, b))
    assert [q.key for w in a for q in w.queries] != [q.key for w in c for q in w.queries]
    x = make_recall_window(HARD, 300, None, random.Random(9), text)
    y = make_recall_window(HARD, 300, None, random.Random(9), text)
    assert torch.equal(x.tokens, y.tokens) and x.describe() == y.describe()
    assert x.tokens.dtype == torch.uint8 and x.tokens.shape == (300,)


def test_needles_sit_at_their_depths(text) -> None:
    config = RecallConfig(num_keys=3, num_queries=1)
    depths = [0.1, 0.5, 0.9]
    w = make_recall_window(config, 512, depths, random.Random(0), text)
    space = w.queries[0].question_start  # H, the window before the queries
    for needle in w.needles:
        size = needle.end - needle.start
        assert abs(needle.start - needle.depth * (space - size)) <= 0.5  # apart: exactly as asked
    assert sorted(n.depth for n in w.needles) == depths
    # depths that collide: moved apart in order, each within one needle per needle moved
    w = make_recall_window(config, 512, [0.5, 0.5, 0.5], random.Random(0), text)
    starts = [n.start for n in w.needles]
    size = w.needles[0].end - w.needles[0].start
    assert [b - a for a, b in zip(starts, starts[1:])] == [size, size]
    assert all(abs(s - 0.5 * (space - size)) <= 2 * size for s in starts)
    # the ends: the first needle opens the window, the last touches the first question
    w = make_recall_window(config, 512, [0.0, 1.0, 1.0], random.Random(0), text)
    assert w.needles[0].start == 0 and w.needles[-1].end == w.queries[0].question_start


def test_text_between_needles_is_one_stretch_of_the_stream(text) -> None:
    w = make_recall_window(HARD, 400, None, random.Random(2), text)
    keep = torch.ones(w.length, dtype=torch.bool)
    for n in w.needles:
        keep[n.start : n.end] = False
    keep[w.queries[0].question_start :] = False
    filler = w.tokens[keep]
    assert torch.equal(filler, text[w.text_offset : w.text_offset + filler.numel()])


@pytest.mark.parametrize("seed", range(8))
def test_each_queried_key_appears_once_with_its_value(text, seed) -> None:
    config = RecallConfig(num_keys=6, num_queries=3, distractors=3)
    w = make_recall_window(config, 320, None, random.Random(seed), text)
    hay, tail = haystack(w), as_bytes(w.tokens[w.queries[0].question_start :])
    assert len(w.queries) == 3 and len({q.key for q in w.queries}) == 3
    for q in w.queries:
        key = q.key.encode()
        assert hay.count(b"@" + key + b"=") == 1
        assert hay.count(b" @" + key + b"=" + q.value.encode() + b". ") == 1
        assert tail.count(b" @" + key + b"=" + q.value.encode()) == 1
    statements = STATEMENT.findall(hay)
    assert len(statements) == len(w.needles) == 6 + 3 * 3
    assert len({k for k, _ in statements}) == len(statements)  # every key once


@pytest.mark.parametrize("seed", range(8))
def test_distractors_are_near_misses(text, seed) -> None:
    config = RecallConfig(num_keys=3, num_queries=2, distractors=4, key_length=4, prefix_length=2)
    w = make_recall_window(config, 400, None, random.Random(seed), text)
    statements = dict(STATEMENT.findall(haystack(w)))
    for i, q in enumerate(w.queries):
        near = [n for n in w.needles if n.role == "distractor" and n.query == i]
        assert len(near) == 4 and sorted(n.value for n in near) == sorted(q.distractor_values)
        for n in near:
            assert n.key[:2] == q.key[:2] and n.key != q.key
            assert n.value != q.value
            assert statements[n.key.encode()] == n.value.encode()
    # keys that are not distractors never share a prefix
    others = [n.key[:2] for n in w.needles if n.role != "distractor"]
    assert len(set(others)) == len(others)


@pytest.mark.parametrize("seed", range(8))
def test_chain_resolves_to_the_value(text, seed) -> None:
    w = make_recall_window(HARD, 320, None, random.Random(seed), text)
    statements = dict(STATEMENT.findall(haystack(w)))
    for i, q in enumerate(w.queries):
        value, hops = statements[q.key.encode()], 0
        while value.startswith(b"@"):
            value, hops = statements[value[1:]], hops + 1
        assert value == q.value.encode() and hops == HARD.chain_length - 1
        chain = [n for n in w.needles if n.query == i and n.role in ("chain", "queried")]
        assert [n.role for n in chain] == ["chain", "chain", "queried"]  # read in order


@pytest.mark.parametrize("template", [None, MARKED_TEMPLATE])
@pytest.mark.parametrize("depth", [0.0, 0.3, 0.5, 1.0])
def test_one_key_without_distractors_is_the_passkey_task(text, template, depth) -> None:
    config = passkey_recall_config(template, key_digits=5)
    assert config.needle_roles() == ("queried",)
    w = make_recall_window(config, 128, [depth], random.Random(int(depth * 10)), text)
    value = w.queries[0].value
    kwargs = {} if template is None else {"template": template}
    ex = make_passkey(byte_encode, 128, depth, value, filler=text, filler_offset=w.text_offset, **kwargs)
    assert torch.equal(w.tokens.long(), ex.tokens)
    assert w.needles[0].start == ex.needle_start
    assert w.answer_spans == [(ex.answer_start, 128)]


def test_oracle_scores_one_and_exact_match_needs_every_byte(text) -> None:
    windows = sample_recall_windows(HARD, 256, 0.5, 5, text) + sample_recall_windows(HARD, 256, 0.2, 5, text)
    rows = recall_accuracy(NextByte(), windows, batch_size=4)
    assert [r["depth"] for r in rows] == [0.2, 0.5]
    assert all(r["accuracy"] == 1.0 and r["byte_accuracy"] == 1.0 and r["queries"] == 10 for r in rows)
    assert all(r["windows"] == 5 and r["distractor_answers"] == 0 for r in rows)
    # a model that answers every query with its first distractor's value: 0, and counted
    stand_ins = {}
    for w in windows:
        wrong = w.tokens.clone()
        for q in w.queries:
            wrong[q.answer_start : q.answer_end] = torch.tensor(list(q.distractor_values[0].encode()))
        stand_ins[as_bytes(w.tokens)] = wrong
    rows = recall_accuracy(NextByte(stand_ins), windows)
    assert all(r["accuracy"] == 0.0 and r["distractor_answers"] == r["queries"] for r in rows)
    # one wrong byte in one answer fails that query only
    w = windows[0]
    wrong = w.tokens.clone()
    q = w.queries[1]
    wrong[q.answer_end - 1] = ord("x")
    (row,) = recall_accuracy(NextByte({as_bytes(w.tokens): wrong}), [w])
    assert row["correct"] == 1 and row["queries"] == 2
    assert row["byte_accuracy"] == 7 / 8 and row["distractor_answers"] == 0


def test_uniform_model_scores_one_in_the_alphabet_per_byte(text) -> None:
    config = RecallConfig(num_keys=4, num_queries=4)
    windows = sample_recall_windows(config, 128, None, 100, text)
    (row,) = recall_accuracy(UniformValues(config.value_alphabet), windows, batch_size=50, by_depth=False)
    assert row["depth"] is None and row["queries"] == 400 and row["windows"] == 100
    assert abs(row["byte_accuracy"] - 1 / 10) < 0.03  # 1,600 bytes: 4 standard errors
    assert row["correct"] <= 2  # exact match: 400 × 10⁻⁴ expected


def test_rows_past_a_learned_table_are_skipped(text) -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig("learned", d_model=32, num_heads=2, max_positions=128)).eval()
    windows = sample_recall_windows(RecallConfig(), 128, 0.5, 2, text)
    windows += sample_recall_windows(RecallConfig(), 256, 0.5, 2, text)
    short, long = recall_accuracy(model, windows)
    assert 0 <= short["accuracy"] <= 1 and short["length"] == 128
    assert long["accuracy"] is None and "max_length" in long["skipped"]


def test_training_batch_marks_the_answer_bytes(text) -> None:
    batch = recall_training_batch(HARD, 255, 3, random.Random(0), text)
    assert batch.inputs.shape == batch.targets.shape == batch.answer_mask.shape == (3, 255)
    assert torch.equal(batch.inputs[:, 1:], batch.targets[:, :-1])
    assert batch.answer_mask.sum(1).tolist() == [2 * 4] * 3  # two queries of 4 bytes
    assert set(as_bytes(batch.targets[batch.answer_mask])) <= set(b"0123456789")
    logits = torch.randn(3, 255, 256, generator=torch.Generator().manual_seed(0))
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch.targets, reduction="none")
    assert torch.isclose(recall_loss(logits, batch.targets, batch.answer_mask), nll.mean())
    weighted = recall_loss(logits, batch.targets, batch.answer_mask, answer_weight=2.0)
    assert torch.isclose(weighted, nll.mean() + 2.0 * nll[batch.answer_mask].mean())


def test_default_markers_are_absent_from_the_corpus() -> None:
    corpus = load_corpus("austen")
    for split in (corpus.train, corpus.validation, corpus.test):
        assert not torch.isin(split, torch.tensor([ord("@"), ord("=")], dtype=torch.uint8)).any()


@pytest.mark.parametrize("kwargs, name", [
    ({"num_keys": 0, "distractors": 1}, "distractors"),
    ({"num_keys": 0}, "num_keys"),
    ({"num_keys": 2, "num_queries": 3}, "num_queries"),
    ({"num_queries": 0}, "num_queries"),
    ({"distractors": -1}, "distractors"),
    ({"distractors": 26}, "distractors"),
    ({"chain_length": 0}, "chain_length"),
    ({"key_length": 0}, "key_length"),
    ({"value_length": 0}, "value_length"),
    ({"value_alphabet": "7"}, "value_alphabet"),
    ({"key_alphabet": "aab"}, "key_alphabet"),
    ({"prefix_length": 3}, "prefix_length"),
    ({"key_length": 1, "distractors": 1}, "prefix_length"),
    ({"num_keys": 30, "key_length": 2}, "key_length"),
    ({"template": RecallTemplate(needle=" is {value}. ")}, "template"),
])
def test_bad_configs_name_the_argument(kwargs, name) -> None:
    with pytest.raises(ValueError, match=name):
        RecallConfig(**kwargs)


def test_bad_windows_name_the_argument(text) -> None:
    with pytest.raises(ValueError, match="needle"):
        RecallTemplate(needle=" @{key} ")
    with pytest.raises(ValueError, match="link"):
        RecallTemplate(link=" @{key}=? ")
    with pytest.raises(ValueError, match=f"length={HARD.min_length() - 1}"):
        make_recall_window(HARD, HARD.min_length() - 1, None, random.Random(0), text)
    make_recall_window(HARD, HARD.min_length(), None, random.Random(0), text)  # no text at all fits
    with pytest.raises(ValueError, match="depths"):
        make_recall_window(HARD, 256, [0.5], random.Random(0), text)
    with pytest.raises(ValueError, match="depths"):
        make_recall_window(RecallConfig(num_keys=1), 256, [1.5], random.Random(0), text)
    with pytest.raises(ValueError, match="text"):
        make_recall_window(HARD, 256, None, random.Random(0), text[:10])
    with pytest.raises(ValueError, match="text must hold bytes"):
        make_recall_window(HARD, 256, None, random.Random(0), text.long() + 200)
    with pytest.raises(ValueError, match="trials"):
        sample_recall_windows(HARD, 256, 0.5, 0, text)
    with pytest.raises(ValueError, match="answer_weight"):
        recall_loss(torch.zeros(1, 2, 256), torch.zeros(1, 2, dtype=torch.long),
                    torch.zeros(1, 2, dtype=torch.bool), answer_weight=-1.0)


TINY_BASE = TrainConfig(model=ModelConfig("rope", d_model=16, num_layers=1, num_heads=2), seq_len=128,
                        batch_size=8, steps=5)
CURRICULUM = (RecallStage(RecallConfig(num_keys=1), 2),
              RecallStage(RecallConfig(num_keys=2, num_queries=2, distractors=1), 3))


def test_recall_mix_batches_follow_the_curriculum(text) -> None:
    """Rows 0–3 are recall windows of the stage's task (answers masked), rows 4–5 repeat
    windows, rows 6–7 the base run's text; the stage changes after its steps, and the
    source ends after base.steps batches."""
    config = RecallMixConfig(TINY_BASE, CURRICULUM, fraction=0.5, repeat_fraction=0.25, answer_weight=2.0)
    assert (config.recall_rows(), config.repeat_rows()) == (4, 2)
    assert config.describe() == "1k0d×2 → 2k1d×3"
    batches = list(recall_mix_batches(config, text, torch.Generator().manual_seed(0), random.Random(0)))
    assert len(batches) == 5
    plain = torch.Generator().manual_seed(0)
    for step, (inputs, targets, answer) in enumerate(batches):
        queries = 1 if step < 2 else 2
        assert inputs.shape == targets.shape == (8, 128)
        assert torch.equal(inputs[:, 1:], targets[:, :-1])
        assert answer.weight == 2.0 and answer.rows == 4
        assert answer.mask.sum(1).tolist() == [4 * queries] * 4
        for row in inputs[:4]:
            assert len(STATEMENT.findall(as_bytes(row))) == (1 if step < 2 else 4)  # 2 keys + 2 near misses
        for row in torch.cat([inputs[4:6], targets[4:6, -1:]], 1):
            assert torch.equal(row[:64], row[65:])  # a chunk of 65, then itself (cut to 129)
        text_inputs, _ = sample_batch(text, 8, 128, plain)
        assert torch.equal(inputs[6:], text_inputs[6:])


def test_recall_mix_config_names_the_argument() -> None:
    with pytest.raises(ValueError, match="stages must sum to base.steps=5, got 2"):
        RecallMixConfig(TINY_BASE, CURRICULUM[:1])
    with pytest.raises(ValueError, match="stages must hold"):
        RecallMixConfig(TINY_BASE, ())
    with pytest.raises(ValueError, match="steps must be >= 1"):
        RecallStage(RecallConfig(), 0)
    with pytest.raises(ValueError, match="stages: a window"):
        RecallMixConfig(replace(TINY_BASE, seq_len=16), CURRICULUM)
    for kwargs, name in (({"fraction": 0.0}, "fraction"), ({"repeat_fraction": 0.6}, "repeat_fraction"),
                         ({"answer_weight": -1.0}, "answer_weight")):
        with pytest.raises(ValueError, match=name):
            RecallMixConfig(TINY_BASE, CURRICULUM, **kwargs)


def test_randomized_positions_ride_along_and_change_nothing_else(text) -> None:
    """With position_range M each batch carries sorted distinct positions in [0, M); the
    windows are those of the run without them; a learned table must hold M rows."""
    plain = RecallMixConfig(TINY_BASE, CURRICULUM)
    config = replace(plain, position_range=512)
    assert "position_range" not in plain.to_dict() and config.to_dict()["position_range"] == 512
    assert config.describe().endswith("positions in [0, 512)")
    with_pos = list(recall_mix_batches(config, text, torch.Generator().manual_seed(0), random.Random(0)))
    without = list(recall_mix_batches(plain, text, torch.Generator().manual_seed(0), random.Random(0)))
    for (x, y, _, positions), (x0, y0, _) in zip(with_pos, without):
        assert torch.equal(x, x0) and torch.equal(y, y0)
        assert positions.shape == (8, 128) and positions.dtype == torch.int64
        assert (positions.diff(dim=1) > 0).all() and positions.min() >= 0 and positions.max() < 512
    with pytest.raises(ValueError, match="position_range must be >= seq_len=128"):
        replace(plain, position_range=64)
    learned = replace(TINY_BASE, model=ModelConfig("learned", d_model=16, num_layers=1, num_heads=2,
                                                    max_positions=128))
    with pytest.raises(ValueError, match="max_positions=128"):
        RecallMixConfig(learned, CURRICULUM, position_range=512)


def test_fit_passes_randomized_positions_to_the_model(text) -> None:
    """A model trained with positions in [0, 512) differs from one trained on 0 … L − 1."""
    from posenc_lib.tasks.recall import train_recall_mix

    config = RecallMixConfig(replace(TINY_BASE, steps=2), (RecallStage(RecallConfig(num_keys=1), 2),))
    plain, _ = train_recall_mix(config, progress=False)
    moved, _ = train_recall_mix(replace(config, position_range=512), progress=False)
    assert any(not torch.equal(a, b) for a, b in zip(plain.parameters(), moved.parameters()))


def test_windows_with_a_subword_encode() -> None:
    """With an ``encode``, each piece is encoded on its own and the text is a token stream:
    int64 windows of exactly L tokens whose pieces decode back to the template's text."""
    vocab = {w: i for i, w in enumerate(
        "the special number for is . what ? = @".split() + list(string.ascii_uppercase) + list(string.digits))}
    words = {i: w for w, i in vocab.items()}

    def encode(text: str) -> list[int]:  # words, then single characters, as ids ≥ 0
        out = []
        for part in text.replace(".", " . ").replace("?", " ? ").split():
            out += [vocab[part]] if part in vocab else [vocab[c] for c in part]
        return out

    template = RecallTemplate(needle=" the number for {key} is {value}. ",
                              question=" what is the number for {key}? the number for {key} is ",
                              answer="{value}")
    task = RecallConfig(num_keys=4, distractors=2, key_length=3, key_alphabet=string.ascii_uppercase,
                        value_length=5, template=template)
    stream = torch.randint(0, 6, (5000,))  # word ids only: no letter or digit in the text
    windows = sample_recall_windows(task, 300, 0.5, 3, stream, seed=0, encode=encode)
    for w in windows:
        assert w.tokens.dtype == torch.int64 and w.length == 300
        for n in w.needles:
            shown = " ".join(words[int(t)] for t in w.tokens[n.start : n.end])
            assert n.key in shown.replace(" ", "") and shown.startswith("the number for")
        (q,) = w.queries
        assert w.tokens[q.answer_start : q.answer_end].tolist() == encode(q.value)
        assert w.answer_tokens(q.value) == encode(q.value)
        right = w.judge(q, w.tokens[q.answer_start : q.answer_end])
        assert right == {"correct": True, "right_tokens": 5, "tokens": 5, "distractor": False}
        near = w.judge(q, torch.tensor(encode(q.distractor_values[0])))
        assert near["distractor"] and not near["correct"]
        with pytest.raises(ValueError, match="predicted"):
            w.judge(q, torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="length=40"):
        sample_recall_windows(task, 40, 0.5, 1, stream, encode=encode)
