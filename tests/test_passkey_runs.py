"""posenc_lib.pretrained.passkey: the tables of stored passkey rows, the copy of identical
rows, and the one-window scoring of a transformers model (on a tiny random Llama)."""

from __future__ import annotations

import math

import pytest
import torch

from posenc_lib.pretrained.passkey import (
    ROW_FIELDS,
    passkey_table,
    score_passkey_lm,
    with_identical_rows,
)
from posenc_lib.tasks.retrieval import PasskeyTemplate, make_passkey, score_passkeys


def row(method: str, length: int, depth: float, correct: bool, digits: int = 5,
        key: str = "12345") -> dict:
    return {"method": method, "length": length, "depth": depth, "key": key,
            "needle_token": 0, "correct": correct, "digits_correct": digits,
            "seconds": 1.0}


ROWS = [
    row("none", 2048, 0.0, True), row("none", 2048, 1.0, False, 3),
    row("none", 4096, 0.0, False, 0), row("none", 4096, 1.0, False, 1),
    row("yarn", 2048, 0.0, True), row("yarn", 2048, 1.0, True),
    row("yarn", 4096, 0.5, True), row("yarn", 4096, 1.0, False, 4),
]


def test_row_fields_are_the_stored_schema() -> None:
    assert tuple(ROWS[0]) == ROW_FIELDS


def test_method_by_length_accuracy() -> None:
    table = passkey_table(ROWS, order=["yarn", "none", "linear"])
    assert list(table.index) == ["yarn", "none"]  # the order given; no rows: left out
    assert list(table.columns) == [2048, 4096]
    assert table.loc["none"].tolist() == [0.5, 0.0]
    assert table.loc["yarn"].tolist() == [1.0, 0.5]
    counts = passkey_table(ROWS, aggfunc="count")
    assert counts.loc["none"].tolist() == [2, 2]


def test_depth_by_length_map_of_one_method() -> None:
    depth_map = passkey_table(ROWS, index="depth", where={"method": "yarn"})
    assert list(depth_map.index) == [0.0, 0.5, 1.0]
    assert depth_map.loc[1.0].tolist() == [1.0, 0.0]
    assert math.isnan(depth_map.loc[0.5, 2048])  # no row in that cell
    digits = passkey_table(ROWS, index="depth", values="digits_correct",
                           where={"method": "none"})
    assert digits.loc[1.0].tolist() == [3.0, 1.0]


def test_table_refuses_empty_or_malformed_rows() -> None:
    with pytest.raises(ValueError, match="no rows left"):
        passkey_table(ROWS, where={"method": "llama3"})
    with pytest.raises(ValueError, match="lacks the field 'length'"):
        passkey_table([{"method": "none", "correct": True}])


def test_identical_rows_are_copied_below_the_limit() -> None:
    rows = with_identical_rows(ROWS, "dynamic", "none", 2048)
    copies = [r for r in rows if r["method"] == "dynamic"]
    assert len(rows) == len(ROWS) + 2 and len(copies) == 2
    assert {r["length"] for r in copies} == {2048}
    assert all(r["seconds"] == 0.0 for r in copies)
    table = passkey_table(rows)
    assert table.loc["dynamic", 2048] == table.loc["none", 2048]
    assert math.isnan(table.loc["dynamic", 4096])
    with pytest.raises(ValueError, match="already has"):
        with_identical_rows(rows, "dynamic", "none", 2048)


transformers = pytest.importorskip("transformers")


def test_one_window_scoring_agrees_with_full_logits() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=2, max_position_embeddings=512)
    model = LlamaForCausalLM(config).eval()
    encode = lambda s: list(s.encode())  # noqa: E731 (bytes as token ids)
    template = PasskeyTemplate(question=" What is the pass key? The pass key is")
    for key in ("12345", "90210", "00000"):
        example = make_passkey(encode, 150, 0.3, key, template=template)
        scored = score_passkey_lm(model, example, key_tokens=5)
        assert scored["correct"] == score_passkeys(model, [example])[0]
        logits = model(example.tokens[None]).logits[0]
        greedy = logits[example.answer_start - 1 : -1].argmax(-1)
        right = greedy == example.tokens[example.answer_start :]
        assert scored["digits_correct"] == int(right[-5:].sum())
    with pytest.raises(ValueError, match="key_tokens"):
        score_passkey_lm(model, example, key_tokens=7)


def test_recall_window_scoring_agrees_with_recall_accuracy() -> None:
    """score_recall_lm (hidden states at the answers only) gives recall_accuracy's verdicts
    (full logits) on byte windows, query by query, with several queries per window."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from posenc_lib.pretrained.passkey import argmax_at_answers, score_recall_lm
    from posenc_lib.tasks.recall import RecallConfig, recall_accuracy, sample_recall_windows

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512)
    model = LlamaForCausalLM(config).eval()
    text = torch.randint(97, 123, (4000,))
    task = RecallConfig(num_keys=3, num_queries=2, distractors=1, value_length=2, value_alphabet="01")
    windows = sample_recall_windows(task, 160, 0.5, 6, text, seed=1)
    judged = [j for w in windows for j in score_recall_lm(model, w)]
    (row,) = recall_accuracy(model, windows, by_depth=False)
    assert row["queries"] == len(judged) == 12
    assert row["correct"] == sum(j["correct"] for j in judged)
    assert row["distractor_answers"] == sum(j["distractor"] for j in judged)
    assert row["byte_accuracy"] == sum(j["right_tokens"] for j in judged) / sum(j["tokens"] for j in judged)
    with pytest.raises(ValueError, match="spans"):
        argmax_at_answers(model, windows[0].tokens, [(0, 3)])
