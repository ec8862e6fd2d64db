"""posenc_lib.pretrained.checkup on tiny randomly initialised Llama models (transformers, test-only;
nothing downloaded): the layout probe tells a model built interleaved from one built
rotate-half, the config's RoPE reproduces the logits, pair shares and positional heads
are well formed, the critical pair matches chapter 10's rule, the extension is measured,
and bad input gets a clear error.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from posenc_lib.pretrained.checkup import (
    LAYOUTS,
    checkup,
    critical_pair,
    first_break,
    load_model,
    logits_reproduced,
    pair_indices,
    pairing_losses,
    positional_heads,
    positional_pair_shares,
    probe_layout,
    config_frequencies,
    rope_settings,
    stored_extension,
    tiny_llama,
    trained_context,
)

transformers = pytest.importorskip(
    "transformers", reason="transformers (test-only, pinned) is not installed"
)
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402


@pytest.fixture(scope="module")
def probe() -> torch.Tensor:
    return torch.randint(0, 97, (1, 24), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("interleaved", [False, True])
def test_the_probe_finds_the_layout_a_model_was_built_with(probe, interleaved) -> None:
    model = tiny_llama(interleaved=interleaved)
    found = probe_layout(model, probe)
    expected = "interleaved" if interleaved else "rotate_half"
    other = next(layout for layout in LAYOUTS if layout != expected)
    assert found["layout"] == expected and found["reproduces"]
    assert found["differences"][expected] < 1e-5
    assert found["differences"][other] > 1e-3  # the wrong pairing is far off
    assert found["differences"]["rotate_half, 2× base"] > 1e-4
    assert logits_reproduced(model, probe, expected) < 1e-5
    assert logits_reproduced(model, probe, other) > 1e-3


def test_logits_reproduced_restores_the_model(probe) -> None:
    model = tiny_llama()
    before = model(probe).logits
    logits_reproduced(model, probe, "interleaved")
    assert torch.equal(model(probe).logits, before)


def test_a_scaled_config_is_reproduced_with_its_scaling(probe) -> None:
    model = tiny_llama(rope_parameters={"rope_type": "linear", "factor": 2.0,
                                        "rope_theta": 10000.0})
    assert rope_settings(model)["rope_scaling"]["rope_type"] == "linear"
    found = probe_layout(model, probe)
    assert found["layout"] == "rotate_half" and found["reproduces"]


def test_pair_indices_of_both_layouts() -> None:
    assert pair_indices(8, "rotate_half") == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert pair_indices(8, "interleaved") == [(0, 1), (2, 3), (4, 5), (6, 7)]


def test_critical_pair_follows_chapter_10s_rule() -> None:
    found = critical_pair(64, 100_000.0, 8192)  # SmolLM2, as chapter 11 computes it
    assert found["pair"] == 20 and 8370 < found["wavelength"] < 8390
    assert 0.97 < found["turns_within_context"] < 0.99
    theta = 100_000.0 ** (-2 * 19 / 64)
    assert 8191 * theta >= 2 * math.pi  # pair 19 turns fully
    with pytest.raises(ValueError, match="no critical"):
        critical_pair(4, 10.0, 10_000)


def test_first_break_by_hand() -> None:
    blocks = [3.0, 2.9, 2.8, 2.9, 3.2]
    assert first_break(blocks[:4], 2, 6)["break_start"] is None  # 2.9 < 1.1 × 2.8
    found = first_break(blocks, 2, 6)
    assert found["break_start"] == 8 and found["ratio"] == pytest.approx(3.2 / 2.8)


def test_positional_heads_by_hand() -> None:
    usage = {"diagonal": torch.tensor([[0.6, 0.1]]),
             "previous": torch.tensor([[0.2, 0.5]])}
    found = positional_heads(usage)
    assert [(f["layer"], f["head"], f["kind"]) for f in found] == [
        (0, 0, "diagonal"), (0, 1, "previous-token")]


def test_the_whole_checkup_on_a_tiny_model_measures_each_part() -> None:
    model = tiny_llama()
    text = torch.randint(0, 97, (80,), generator=torch.Generator().manual_seed(1))
    report = checkup(model, text, usage_tokens=40, probe_tokens=16,
                     extension_tokens=text[:64], block=8)
    json.dumps(report, allow_nan=False)  # JSON-ready
    assert report["layout"]["layout"] == "rotate_half" and report["layout"]["reproduces"]
    share = torch.tensor(report["pairs"]["share"], dtype=torch.float64)
    assert share.shape == (2, 4, 8)
    assert torch.allclose(share.sum(dim=-1), torch.ones(2, 4, dtype=torch.float64))
    assert report["critical_pair"]["pair"] == critical_pair(16, 10000.0, 32)["pair"]
    extension = report["extension"]
    assert extension["source"] == "measured" and extension["factor"] == 2.0
    assert set(extension["past_context_nll"]) == {"none", "linear", "yarn"}
    assert extension["best"] in extension["past_context_nll"]
    assert report["critical_pair"]["perplexity_break"]["source"] == "measured"
    assert set(report["seconds"]) == {"layout", "pairs", "extension"}
    assert model.model.layers[0].self_attn.__class__.__name__ == "LlamaAttention"


def test_the_stored_chapter_11_run_is_read() -> None:
    from posenc_book.stored import stored_results_dir

    folder = stored_results_dir("pretrained") / "smollm2-persuasion-16384"
    stored = stored_extension(folder, 8192)
    assert set(stored["past_context_nll"]) == {"none", "linear", "dynamic", "yarn",
                                               "llama3"}
    assert stored["num_tokens"] == 16384 and stored["block"] == 2048
    assert len(stored["none_block_nll"]) == 8
    brk = first_break(stored["none_block_nll"], stored["block"], 8192)
    assert brk["break_start"] == 10240


def test_the_equal_stretch_dynamic_run_replaces_the_first_folders() -> None:
    from posenc_book.stored import stored_results_dir

    base = stored_results_dir("pretrained")
    both = stored_extension([base / "smollm2-persuasion-16384",
                             base / "smollm2-persuasion-16384-dynamic-factor1"], 8192)
    alone = stored_extension(base / "smollm2-persuasion-16384-dynamic-factor1", 8192)
    assert both["past_context_nll"]["dynamic"] == alone["past_context_nll"]["dynamic"]
    assert both["runs"]["dynamic"] == {
        "folder": "smollm2-persuasion-16384-dynamic-factor1", "factor": 1.0}
    assert both["runs"]["yarn"]["folder"] == "smollm2-persuasion-16384"
    assert both["factor"] == 2.0 and len(both["none_block_nll"]) == 8


LLAMA3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8,
          "rope_theta": 10000.0}


def test_a_scaled_config_counts_from_its_original_context() -> None:
    model = tiny_llama(rope_parameters=dict(LLAMA3))  # max_position_embeddings 32
    settings = rope_settings(model)
    assert trained_context(settings) == 8 and trained_context(settings, 20) == 20
    theta = config_frequencies(settings)
    plain = critical_pair(16, 10000.0, 8)
    scaled = critical_pair(16, 10000.0, 8, theta)
    assert scaled["first_unseen_distance"] == 8
    assert scaled["wavelength"] == pytest.approx(2 * math.pi / theta[scaled["pair"]].item())
    assert theta[-1] == pytest.approx(plain_theta_last() / 4)  # slow pairs stretched
    assert scaled["pair"] <= plain["pair"]
    text = torch.randint(0, 97, (40,), generator=torch.Generator().manual_seed(1))
    report = checkup(model, text, usage_tokens=20, probe_tokens=16)
    assert report["context_length"] == 8
    assert report["critical_pair"] == scaled
    no_original = {k: v for k, v in LLAMA3.items()
                   if k != "original_max_position_embeddings"}
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        trained_context({**settings, "rope_scaling": no_original})


def plain_theta_last() -> float:
    return 10000.0 ** (-2 * 7 / 16)


def test_a_text_shorter_than_usage_tokens_is_refused() -> None:
    text = torch.randint(0, 97, (30,), generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="usage_tokens=40"):
        checkup(tiny_llama(), text, usage_tokens=40, probe_tokens=16)


def test_a_model_without_rotary_attention_is_refused() -> None:
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50,
                                      bos_token_id=0, eos_token_id=0))
    with pytest.raises(ValueError, match="no Llama-style attention"):
        rope_settings(gpt2)
    model = tiny_llama()
    model.config.rope_parameters = {}
    with pytest.raises(ValueError, match="no rotary position embedding"):
        rope_settings(model)


def test_a_missing_gguf_file_or_folder_is_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        load_model(gguf=str(tmp_path / "missing.gguf"))
    with pytest.raises(FileNotFoundError, match="no Hugging Face model"):
        load_model(hf_dir=str(tmp_path))
    with pytest.raises(ValueError, match="exactly one"):
        load_model()


def test_the_command_line_writes_a_report(tmp_path, monkeypatch) -> None:
    from tools.runs import checkup as checkup_module  # the command line

    class ByteTokenizer:  # stands in for a real tokenizer: one id per byte, mod 97
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [b % 97 for b in text.encode()]}

    monkeypatch.setattr(checkup_module, "load_model",
                        lambda gguf=None, hf_dir=None: (tiny_llama(), ByteTokenizer()))
    out = tmp_path / "report.json"
    assert checkup_module.main(["--hf-dir", str(tmp_path), "--out", str(out),
                                "--usage-tokens", "40", "--context-length", "32"]) == 0
    report = json.loads(out.read_text())
    assert report["layout"]["layout"] == "rotate_half"
    assert report["source"]["hf_dir"] == str(tmp_path)
    assert report["extension"] == {"source": "not measured"}
    assert {"git_commit", "torch_version"} <= set(report["provenance"])


def test_tiny_llama_is_seeded_and_built_rotate_half() -> None:
    first, again = tiny_llama(), tiny_llama()
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), again.parameters()))
    assert rope_settings(first)["head_dim"] == 16 and rope_settings(first)["base"] == 10000.0
    assert tiny_llama(max_position_embeddings=64).config.max_position_embeddings == 64


def test_pairing_losses_favour_the_pairing_the_model_runs(probe) -> None:
    model = tiny_llama()
    before = [layer.self_attn for layer in model.model.layers]
    losses = pairing_losses(model, probe[0])
    assert set(losses) == set(LAYOUTS)
    assert [layer.self_attn for layer in model.model.layers] == before  # restored
    # rotate-half is what a tiny Llama runs: that loss is the model's own, exactly as far
    # as the library's RoPE reproduces it; the interleaved one differs
    with torch.no_grad():
        logits = model(probe).logits[0, :-1]
    own = torch.nn.functional.cross_entropy(logits, probe[0, 1:]).item()
    assert losses["rotate_half"] == pytest.approx(own, abs=1e-5)
    assert abs(losses["interleaved"] - own) > 1e-4
    with pytest.raises(ValueError, match="tokens must be"):
        pairing_losses(model, probe)


def test_positional_pair_shares_by_hand() -> None:
    # 2 layers × 3 heads × 4 pairs; head (0, 0) is positional, its layer-mates (0, 1), (0, 2)
    share = torch.full((2, 3, 4), 0.25, dtype=torch.float64)
    share[0, 0] = torch.tensor([0.7, 0.1, 0.1, 0.1])
    share[0, 1] = torch.tensor([0.1, 0.1, 0.4, 0.4])
    pairs = {"share": share.tolist(),
             "positional_heads": [{"layer": 0, "head": 0, "kind": "diagonal",
                                   "mass": 0.614}]}
    found = positional_pair_shares(pairs, critical=2, fastest=1)
    assert found["flagged"].sum() == 1 and found["flagged"][0, 0]
    assert found["mate_heads"] == 2
    assert found["positional_fast"] == pytest.approx(0.8)
    assert found["mates_fast"] == pytest.approx((0.2 + 0.5) / 2)
    assert found["positional_fastest"] == pytest.approx(0.7)
    assert found["mates_fastest"] == pytest.approx((0.1 + 0.25) / 2)
    assert found["others_fastest"] == pytest.approx((0.1 + 0.25 * 4) / 5)
    assert found["even_split"] == 0.5
    assert torch.allclose(found["mates_profile"], (share[0, 1] + share[0, 2]) / 2)
    table = found["table"]
    assert list(table.columns) == ["layer (0-based)", "head (0-based)", "kind",
                                   "attention mass", "share on pairs 0–1",
                                   "share on pairs 0–0"]
    assert table.iloc[0]["attention mass"] == 0.61
    with pytest.raises(ValueError, match="critical must be in"):
        positional_pair_shares(pairs, critical=5)
    with pytest.raises(ValueError, match="no head to compare"):
        positional_pair_shares({**pairs, "positional_heads": []}, critical=2)
