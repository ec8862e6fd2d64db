"""posenc_lib.tasks.retrieval: passkey windows, their scoring, copy windows and copy gain,
the training mixture, and the pretrained-tokenizer path on a tiny random Llama."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from posenc_lib.training.store import cache_key, passkey_mix_cache_key
from posenc_lib.model.transformer import ModelConfig, TransformerLM
from posenc_lib.tasks.retrieval import (
    REPEATED_FILLER,
    PasskeyMixConfig,
    PasskeyTemplate,
    byte_encode,
    copy_gain,
    copy_windows,
    make_passkey,
    passkey_accuracy,
    passkey_training_windows,
    sample_passkeys,
    score_passkeys,
    train_passkey_mix,
)
from posenc_lib.training.train import TrainConfig, train


def text(tokens: torch.Tensor) -> str:
    return bytes(tokens.tolist()).decode()


class Oracle(nn.Module):
    """Logits that put all weight on the true next token of the one window it knows
    (or on ``wrong`` at one position): a model whose greedy answer is known."""

    def __init__(self, window: torch.Tensor, wrong_at: int | None = None) -> None:
        super().__init__()
        self.window, self.wrong_at = window, wrong_at
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        batch, length = ids.shape
        logits = torch.zeros(batch, length, 256)
        nxt = torch.cat([self.window[1:], self.window[:1]])
        logits[:, torch.arange(length), nxt] = 10.0
        if self.wrong_at is not None:
            logits[:, self.wrong_at, (nxt[self.wrong_at] + 1) % 256] = 20.0
        return logits


def test_passkey_window_layout() -> None:
    ex = make_passkey(byte_encode, 128, 0.5, "04213")
    s = text(ex.tokens)
    assert len(ex.tokens) == ex.length == 128
    assert s.endswith(" What is the pass key? The pass key is 04213")
    assert s[ex.needle_start :].startswith(" The pass key is 04213. ")
    assert text(ex.tokens[ex.answer_start :]) == " 04213"
    fill = 128 - len(" The pass key is 04213. ") - len(" What is the pass key? The pass key is") - 6
    assert ex.needle_start == round(0.5 * fill)
    assert s.startswith(REPEATED_FILLER[:20]) and ex.filler == "repeated"


@pytest.mark.parametrize("depth, where", [(0.0, 0), (1.0, None)])
def test_depth_ends(depth, where) -> None:
    ex = make_passkey(byte_encode, 100, depth, "123")
    if where is None:  # right before the question
        qlen = len(" What is the pass key? The pass key is") + len(" 123")
        assert ex.needle_start + len(" The pass key is 123. ") == 100 - qlen
    else:
        assert ex.needle_start == where


def test_stream_filler_is_reported_and_used() -> None:
    stream = torch.arange(1000) % 26 + 97
    ex = make_passkey(byte_encode, 90, 0.0, "7", filler=stream, filler_offset=10)
    assert ex.filler == "stream" and ex.filler_offset == 10
    needle = len(" The pass key is 7. ")
    assert ex.tokens[needle : needle + 5].tolist() == stream[10:15].tolist()
    with pytest.raises(ValueError, match="no .* tokens at offset"):
        make_passkey(byte_encode, 90, 0.0, "7", filler=stream, filler_offset=990)


@pytest.mark.parametrize("depth", [-0.1, 1.5, float("nan")])
def test_bad_depth(depth) -> None:
    with pytest.raises(ValueError, match="depth must be in"):
        make_passkey(byte_encode, 128, depth, "123")


def test_window_too_short_for_the_key() -> None:
    with pytest.raises(ValueError, match="more than the window length=40"):
        make_passkey(byte_encode, 40, 0.5, "12345")
    with pytest.raises(ValueError, match="digits"):
        make_passkey(byte_encode, 128, 0.5, "12a45")
    with pytest.raises(ValueError, match="key_digits"):
        sample_passkeys(byte_encode, 128, 0.5, 2, key_digits=0)
    with pytest.raises(ValueError, match="contain"):
        PasskeyTemplate(needle="no key here")


def test_sampling_is_seeded() -> None:
    stream = torch.randint(97, 123, (5000,), generator=torch.Generator().manual_seed(0))
    a = sample_passkeys(byte_encode, 128, 0.25, 8, seed=3, filler=stream)
    b = sample_passkeys(byte_encode, 128, 0.25, 8, seed=3, filler=stream)
    c = sample_passkeys(byte_encode, 128, 0.25, 8, seed=4, filler=stream)
    assert [e.describe() for e in a] == [e.describe() for e in b]
    assert all(torch.equal(x.tokens, y.tokens) for x, y in zip(a, b))
    assert [e.key for e in a] != [e.key for e in c]
    assert all(len(e.key) == 5 for e in a)


def test_scoring_is_exact_match_of_greedy_answer() -> None:
    ex = make_passkey(byte_encode, 96, 0.3, "55555")
    assert score_passkeys(Oracle(ex.tokens), [ex]) == [True]
    # one wrong digit (the prediction made at the answer's third token) fails the key
    assert score_passkeys(Oracle(ex.tokens, wrong_at=ex.answer_start + 2), [ex]) == [False]
    # a wrong prediction before the answer does not count
    assert score_passkeys(Oracle(ex.tokens, wrong_at=ex.answer_start - 5), [ex]) == [True]
    other = make_passkey(byte_encode, 97, 0.3, "55555")
    with pytest.raises(ValueError, match="one length"):
        score_passkeys(Oracle(ex.tokens), [ex, other])


def test_accuracy_rows_and_learned_table_skip() -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig("learned", d_model=32, num_heads=2,
                                      max_positions=128)).eval()
    rows = passkey_accuracy(model, byte_encode, [128, 256], [0.0, 1.0], trials=4)
    assert [(r["length"], r["depth"]) for r in rows] == [(128, 0.0), (128, 1.0),
                                                         (256, 0.0), (256, 1.0)]
    assert all(0 <= r["accuracy"] <= 1 and r["trials"] == 4 for r in rows[:2])
    assert rows[2]["accuracy"] is None and "max_length" in rows[2]["skipped"]
    assert len(rows[0]["needle_starts"]) == 4


def test_copy_windows_place_the_repeat() -> None:
    stream = torch.arange(10_000) % 251
    tokens, control, first, second = copy_windows(stream, 200, 64, 16, 3, seed=1)
    assert tokens.shape == (3, 200) and (first, second) == (200 - 16 - 64, 184)
    assert torch.equal(tokens[:, second:], tokens[:, first : first + 16])
    outside = torch.ones(200, dtype=torch.bool)
    outside[first : first + 16] = False
    assert torch.equal(control[:, outside], tokens[:, outside])
    assert not torch.equal(control[:, first : first + 16], tokens[:, first : first + 16])
    steps = (tokens[:, 1:second] - tokens[:, : second - 1]) % 251
    assert (steps == 1).all()  # the rest is the stream's consecutive tokens
    with pytest.raises(ValueError, match="span <= distance"):
        copy_windows(stream, 200, 8, 16, 3)
    with pytest.raises(ValueError, match="exceeds length"):
        copy_windows(stream, 200, 190, 16, 3)


def test_copy_gain_of_a_perfect_copier() -> None:
    class Copier(nn.Module):
        """Predicts the token that followed the previous occurrence of the current token
        (uniform if none): a hand-made induction head."""

        def __init__(self) -> None:
            super().__init__()
            self.dummy = nn.Parameter(torch.zeros(1))

        def forward(self, ids):
            logits = torch.zeros(*ids.shape, 256)
            for b in range(ids.shape[0]):
                seen = {}
                for t in range(ids.shape[1]):
                    tok = ids[b, t].item()
                    if tok in seen:
                        logits[b, t, seen[tok]] = 30.0
                    if t + 1 < ids.shape[1]:
                        seen[tok] = ids[b, t + 1].item()
            return logits

    stream = torch.randperm(256, generator=torch.Generator().manual_seed(0))
    stream = stream.repeat(4)[:1000]  # every token once per 256: no repeats within 120
    rows = copy_gain(Copier(), stream, [120], [40, 200], span=20, windows=2)
    assert [r["distance"] for r in rows] == [40]  # 200 + 20 > 120 is left out
    assert rows[0]["nll_second"] < 1e-6
    assert rows[0]["gain"] == pytest.approx(rows[0]["nll_first"])
    assert rows[0]["nll_first"] == pytest.approx(torch.log(torch.tensor(256.0)).item())
    assert rows[0]["nll_unseen"] == pytest.approx(rows[0]["nll_first"])
    assert rows[0]["gain_vs_unseen"] == pytest.approx(rows[0]["nll_unseen"])


def tiny_config(position: str = "rope", steps: int = 3) -> TrainConfig:
    model = ModelConfig(position, d_model=16, num_layers=1, num_heads=2, max_positions=96)
    return TrainConfig(model=model, seq_len=96, batch_size=4, steps=steps, warmup_steps=1)


def test_mixture_fraction_zero_is_the_plain_run() -> None:
    config = tiny_config()
    plain, plain_record = train(config, progress=False)
    mixed, mixed_record = train_passkey_mix(PasskeyMixConfig(config, 0.0), progress=False)
    assert plain_record.losses == mixed_record.losses
    for (name, a), (_, b) in zip(plain.state_dict().items(), mixed.state_dict().items()):
        assert torch.equal(a, b), name


def test_mixture_windows_and_differing_run() -> None:
    import random

    config = PasskeyMixConfig(tiny_config(), 0.5)
    stream = torch.tensor(list(b"abcdefghij" * 100))
    windows = passkey_training_windows(config, stream, random.Random(0), 3)
    assert windows.shape == (3, 97)
    for row in windows:
        s = text(row)
        key = s[-5:]
        assert key.isdigit() and f"The pass key is {key}. " in s
    _, plain = train(config.base, progress=False)
    _, mixed = train_passkey_mix(config, progress=False)
    assert plain.losses != mixed.losses and config.passkey_rows() == 2
    with pytest.raises(ValueError, match="fraction"):
        PasskeyMixConfig(config.base, 1.5)


def test_mixture_cache_key_depends_on_the_recipe_only() -> None:
    base = tiny_config()
    a = passkey_mix_cache_key(PasskeyMixConfig(base, 0.25), "cpu")
    assert a == passkey_mix_cache_key(PasskeyMixConfig(base, 0.25), "cpu")
    assert a != passkey_mix_cache_key(PasskeyMixConfig(base, 0.5), "cpu")
    longer = dataclasses.replace(base, steps=4)
    assert a != passkey_mix_cache_key(PasskeyMixConfig(longer, 0.25), "cpu")
    assert a != cache_key(base, "cpu")


# ----------------------------------------------------------------------------------------
# The pretrained path: a tiny random Llama with a byte-level tokenizer

transformers = pytest.importorskip("transformers")


@pytest.fixture
def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=2, max_position_embeddings=512)
    return LlamaForCausalLM(config).eval()


def test_pretrained_model_path(tiny_llama) -> None:
    """A transformers model returns an output with ``.logits``; the scoring reads them,
    and a tokenizer-like ``encode`` (here bytes shifted by one id) builds the windows."""

    def encode(s: str) -> list[int]:
        return [(b + 1) % 256 for b in s.encode()]

    template = PasskeyTemplate(
        needle=" There is a pass key hidden in this text. The pass key is {key}. ",
        question=" What is the pass key? The pass key is",
    )
    rows = passkey_accuracy(tiny_llama, encode, [200], [0.5], trials=3, template=template)
    assert rows[0]["accuracy"] in (0.0, 1 / 3, 2 / 3, 1.0)
    ex = sample_passkeys(encode, 200, 0.5, 1, template=template)[0]
    logits = tiny_llama(ex.tokens[None]).logits
    greedy = logits[0, ex.answer_start - 1 : -1].argmax(-1)
    truth = ex.tokens[ex.answer_start :]
    assert score_passkeys(tiny_llama, [ex]) == [bool(torch.equal(greedy, truth))]
    stream = torch.tensor(encode("It was a truth universally acknowledged. " * 40))
    gains = copy_gain(tiny_llama, stream, [256], [64], span=16, windows=2)
    assert gains[0]["gain"] == pytest.approx(gains[0]["nll_first"] - gains[0]["nll_second"])


def test_answer_weight_adds_the_answer_loss() -> None:
    base = tiny_config(steps=2)
    plain = PasskeyMixConfig(base, 0.5)
    weighted = PasskeyMixConfig(base, 0.5, answer_weight=1.0)
    assert weighted.answer_tokens() == len(" 00000")
    _, a = train_passkey_mix(plain, progress=False)
    _, b = train_passkey_mix(weighted, progress=False)
    assert a.losses[0] == b.losses[0]  # the same first batch; the record is the LM loss
    assert a.losses[1] != b.losses[1]  # the first update differed
    _, none = train_passkey_mix(PasskeyMixConfig(base, 0.0, answer_weight=1.0),
                                progress=False)
    _, ref = train(base, progress=False)
    assert none.losses == ref.losses  # no passkey rows: nothing to weight
    with pytest.raises(ValueError, match="answer_weight"):
        PasskeyMixConfig(base, 0.5, answer_weight=-1.0)


def test_repeat_windows() -> None:
    import random

    from posenc_lib.tasks.retrieval import repeat_training_windows

    stream = torch.arange(500)
    windows = repeat_training_windows(9, stream, random.Random(0), 2)
    assert windows.shape == (2, 9)
    assert torch.equal(windows[:, 5:], windows[:, :4])  # chunk of 5, then itself
    assert ((windows[:, 1:5] - windows[:, :4]) == 1).all()
    config = PasskeyMixConfig(tiny_config(), 0.25, repeat_fraction=0.5)
    assert (config.passkey_rows(), config.repeat_rows()) == (1, 2)
    with pytest.raises(ValueError, match="repeat_fraction"):
        PasskeyMixConfig(tiny_config(), 0.75, repeat_fraction=0.5)
