"""posenc_lib.pretrained.streaming: the whole-sequence form equals token-by-token decoding with a
bounded cache (the definition), for each mode, on tiny models (the book's RoPE model and
a randomly initialised transformers Llama); a cache as long as the text equals a plain
forward; the modes differ where they should; bad input is refused.
"""

from __future__ import annotations

import pytest
import torch

from posenc_lib.model.transformer import ModelConfig, TransformerLM
from posenc_lib.pretrained.streaming import (
    MODES,
    STREAMING_LABELS,
    STREAMING_MODES,
    StreamingCache,
    StreamingConfig,
    block_means,
    compare_streaming,
    streaming,
    streaming_forms_gap,
    streaming_logits,
    streaming_nll,
    streaming_table,
)
from posenc_lib.encodings.rope import RotaryEmbedding


def book_model(position: str = "rope") -> TransformerLM:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=50, d_model=32, num_heads=4, num_layers=2,
                         position=position)
    return TransformerLM(config).eval()


def config_of(mode: str, cache: int = 10, sinks: int = 2) -> StreamingConfig:
    return StreamingConfig(cache, 0 if mode == "window" else sinks, mode)


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    return torch.randint(0, 50, (2, 30), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("mode", MODES)
def test_book_model_whole_sequence_equals_decoding(tokens, mode) -> None:
    model = book_model()
    whole, share = streaming_logits(model, tokens, config_of(mode))
    decoded, _ = streaming_logits(model, tokens, config_of(mode), decode=True)
    assert (whole - decoded).abs().max() < 1e-5
    assert share.shape == (2, 4) and ((share >= 0) & (share <= 1)).all()


def test_a_cache_as_long_as_the_text_is_a_plain_forward(tokens) -> None:
    model = book_model()
    with torch.no_grad():
        plain = model(tokens)
    for mode in MODES:
        whole, _ = streaming_logits(model, tokens, config_of(mode, cache=30))
        assert (whole - plain).abs().max() < 1e-5
    with torch.no_grad():
        assert torch.equal(model(tokens), plain)  # the layers are restored


def test_modes_agree_before_the_cache_fills_and_differ_after(tokens) -> None:
    model = book_model()
    out = {m: streaming_logits(model, tokens, config_of(m))[0] for m in MODES}
    with torch.no_grad():
        plain = model(tokens)
    for mode in MODES:  # cache 10: queries 0 … 9 see every earlier token
        assert (out[mode][:, :10] - plain[:, :10]).abs().max() < 1e-5
    b, c = out["sinks_cache_positions"], out["sinks_original_positions"]
    assert (b[:, 10:] - c[:, 10:]).abs().max() > 1e-3  # positions of the sinks differ
    assert (out["window"][:, 10:] - b[:, 10:]).abs().max() > 1e-3


def test_sinks_at_cache_positions_by_hand() -> None:
    """One layer's decode cache against scores written out for query 5, cache 4."""
    torch.manual_seed(0)
    rotary = RotaryEmbedding(8, 10000.0)
    q, k, v = (torch.randn(1, 1, 6, 8) for _ in range(3))
    cache = StreamingCache(StreamingConfig(4, 1, "sinks_cache_positions"), rotary)
    for t in range(6):
        out = cache.step(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], t)
    assert cache.positions == [0, 3, 4, 5]  # the sink and the last three
    kept = [0, 3, 4, 5]
    keys = rotary(k[:, :, kept], torch.arange(4))  # slots 0 … 3
    scores = rotary(q[:, :, 5:6], torch.tensor([3])) @ keys.transpose(-2, -1)
    expected = (scores / 8 ** 0.5).softmax(-1) @ v[:, :, kept]
    assert (out - expected).abs().max() < 1e-6


def test_block_means_and_nll(tokens) -> None:
    assert block_means(torch.tensor([1.0, 3.0, 5.0]), 2) == [2.0, 5.0]
    nll, share = streaming_nll(book_model(), tokens[0], config_of("window"))
    assert nll.shape == (29,) and nll.dtype == torch.float64 and (nll > 0).all()


def test_bad_input_is_refused(tokens) -> None:
    with pytest.raises(ValueError, match="mode must be"):
        StreamingConfig(8, 2, "sinks")
    with pytest.raises(ValueError, match="keeps no sinks"):
        StreamingConfig(8, 2, "window")
    with pytest.raises(ValueError, match="sinks must be"):
        StreamingConfig(8, 8, "sinks_cache_positions")
    with pytest.raises(ValueError, match="needs a RoPE model"):
        with streaming(book_model("alibi"), config_of("window")):
            pass
    with pytest.raises(ValueError, match="tokens must be"):
        streaming_logits(book_model(), tokens.float(), config_of("window"))


transformers = pytest.importorskip(
    "transformers", reason="transformers (test-only, pinned) is not installed"
)
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402


@pytest.mark.parametrize("mode", MODES)
def test_llama_whole_sequence_equals_decoding(tokens, mode) -> None:
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=50, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=16)).eval()
    whole, _ = streaming_logits(model, tokens, config_of(mode, cache=12, sinks=3))
    decoded, _ = streaming_logits(model, tokens, config_of(mode, cache=12, sinks=3),
                                  decode=True)
    assert (whole - decoded).abs().max() < 1e-5
    with torch.no_grad():
        plain = model(tokens).logits
    full, _ = streaming_logits(model, tokens, config_of(mode, cache=30, sinks=3))
    assert (full - plain).abs().max() < 1e-5


def test_the_command_line_passes_its_arguments(monkeypatch) -> None:
    from tools.runs import streaming as streaming_tool

    calls = []
    monkeypatch.setattr(streaming_tool, "run_pretrained_streaming",
                        lambda out, **kwargs: calls.append((out, kwargs)))
    assert streaming_tool.main(["--out", "x.json", "--tokens", "64", "--sinks", "2"]) == 0
    assert calls == [("x.json", {"num_tokens": 64, "cache": 1024, "sinks": 2, "block": 512,
                                 "book": "persuasion"})]
    with pytest.raises(SystemExit):
        streaming_tool.main(["--tokens", "64"])  # --out is required


def test_streaming_modes_is_the_one_tuple_and_every_cache_has_a_label() -> None:
    assert STREAMING_MODES is MODES
    assert list(STREAMING_LABELS) == ["full", *STREAMING_MODES]


def test_the_two_forms_agree_for_every_mode(tokens) -> None:
    gaps = streaming_forms_gap(book_model(), tokens, 10, sinks=2)
    assert list(gaps) == list(STREAMING_MODES)
    assert max(gaps.values()) < 1e-5
    with pytest.raises(ValueError, match="sinks must be"):
        streaming_forms_gap(book_model(), tokens, 10, sinks=10)


def test_compare_streaming_on_the_book_model(tokens) -> None:
    model = book_model()
    text = tokens[0]
    nll, share = compare_streaming(model, text, 10, sinks=2)
    assert list(nll) == ["full", *STREAMING_MODES] and list(share) == list(STREAMING_MODES)
    with torch.no_grad():
        logits = model(text[None])[0, :-1]
    full = torch.nn.functional.cross_entropy(logits, text[1:], reduction="none")
    assert torch.equal(nll["full"], full.double())
    for mode in STREAMING_MODES:
        expected, expected_share = streaming_nll(model, text, config_of(mode, 10, 2))
        assert torch.equal(nll[mode], expected)
        assert torch.equal(share[mode], expected_share)
    # a cache as long as the text evicts nothing: every mode is the plain forward
    whole, _ = compare_streaming(model, text, 30, sinks=2)
    assert all((whole[m] - whole["full"]).abs().max() < 1e-5 for m in STREAMING_MODES)
    with pytest.raises(ValueError, match="tokens must be"):
        compare_streaming(model, tokens, 10)


def test_streaming_table_labels_columns_and_blocks() -> None:
    table = streaming_table({"full": [3.0, 2.5], "window": torch.tensor([3.0, 2.75])},
                            4, "bytes")
    assert list(table.columns) == [STREAMING_LABELS["full"], STREAMING_LABELS["window"]]
    assert list(table.index) == ["0–3", "4–7"] and table.index.name == "positions (bytes)"
    assert table.to_numpy().tolist() == [[3.0, 3.0], [2.5, 2.75]]
    assert str(table.dtypes.iloc[1]) == "float64"
    with pytest.raises(ValueError, match="unknown keys"):
        streaming_table({"sinks": [1.0]}, 4)
    with pytest.raises(ValueError, match="same length"):
        streaming_table({"full": [1.0], "window": [1.0, 2.0]}, 4)
    with pytest.raises(ValueError, match="block must be"):
        streaming_table({"full": [1.0]}, 0)
