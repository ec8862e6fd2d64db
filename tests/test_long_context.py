"""posenc_lib.pretrained.long_context: methods, planning, result files, resuming, the command line.

The model is a tiny random transformers Llama and the tokenizer a byte-level stand-in,
so the whole pipeline runs in seconds; the real model is exercised by chapter 11.
"""

from __future__ import annotations

import json

import pytest
import torch

import posenc_lib.pretrained.long_context as lc
from posenc_lib.encodings.rope_scaling import (
    last_unseen_distances,
    pair_stretch,
    unseen_distance_share,
)
from posenc_lib.pretrained.long_context import METHODS, LongContextRun, plan
from tools.runs import long_context as long_context_tool  # the command line

transformers = pytest.importorskip(
    "transformers", reason="transformers (test-only, pinned) is not installed"
)
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402


class ByteTokenizer:
    """Tokenizer stand-in: one token per byte (the tiny model has 256 ids)."""

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": list(text.encode("utf-8"))}


@pytest.fixture
def fake_model(monkeypatch) -> dict:
    calls = {"loads": 0}

    def load(device="cpu", dtype=torch.float32):
        calls["loads"] += 1
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=1, head_dim=16,
                             max_position_embeddings=64,
                             rope_parameters={"rope_type": "default",
                                              "rope_theta": 1e4})
        return LlamaForCausalLM(config).eval(), ByteTokenizer()

    monkeypatch.setattr(lc, "load_pretrained", load)
    return calls


def test_plan_defaults_the_factor_to_length_over_trained_context() -> None:
    runs = plan(METHODS, 16384, 2048)
    assert [r.method for r in runs] == list(METHODS)
    assert {r.factor for r in runs} == {2.0}
    assert {r.factor for r in plan(["yarn"], 4096, 512)} == {1.0}
    assert plan(["yarn"], 32768, 2048)[0].factor == 4.0
    assert runs[3].name == "yarn-16384"
    with pytest.raises(ValueError, match="dtype"):
        LongContextRun("none", 100, 10, 1.0, dtype="float8")


def test_runs_write_files_resume_and_refuse_other_configs(tmp_path, fake_model) -> None:
    runs = plan(["none", "yarn"], 200, 64, factor=2.0)
    results = lc.run_long_context(runs, tmp_path, device="cpu", progress=True)  # stderr
    names = sorted(p.name for p in tmp_path.glob("*.json"))
    assert names == ["none-200.json", "yarn-200.json"]
    first = results[0]
    assert [b["first_position"] for b in first["blocks"]] == [0, 64, 128, 192]
    assert first["blocks"][-1]["last_position"] == 198 and first["predictions"] == 199
    assert first["provenance"]["device"] == "cpu" and first["rope_scaling"] is None
    # one provenance for the whole invocation, taken when it started
    started = {r["provenance"]["date_utc"] for r in results}
    assert len(started) == 1 and all("finished_utc" in r["provenance"] for r in results)
    assert results[1]["rope_scaling"]["rope_type"] == "yarn"
    assert fake_model["loads"] == 1

    quiet = lc.run_long_context(plan(["none"], 200, 64, factor=2.0), tmp_path / "quiet",
                                progress=False)
    assert quiet[0]["blocks"] == first["blocks"]  # progress hooks change nothing
    again = lc.run_long_context(runs, tmp_path, device="cpu", progress=False)
    assert fake_model["loads"] == 2 and again == results  # nothing left: no third load
    assert lc.load_long_context_results(tmp_path) == results

    with pytest.raises(FileExistsError, match="different configuration"):
        lc.run_long_context(plan(["none"], 200, 64, factor=3.0), tmp_path, device="cpu",
                            progress=False)


def test_causal_prefix_gives_the_same_first_blocks(tmp_path, fake_model) -> None:
    """The first blocks of a long run equal a shorter run (causal; not dynamic)."""
    long = lc.run_long_context(plan(["linear"], 256, 64, factor=2.0), tmp_path / "a",
                               progress=False)[0]
    short = lc.run_long_context(plan(["linear"], 128, 64, factor=2.0), tmp_path / "b",
                                progress=False)[0]
    for b_long, b_short in zip(long["blocks"][:1], short["blocks"][:1]):
        assert b_long["nll"] == pytest.approx(b_short["nll"], rel=1e-5)


def test_command_line(tmp_path, fake_model, capsys) -> None:
    out = tmp_path / "cli"
    argv = ["run", "--tokens", "150", "--block", "50", "--methods", "none", "dynamic",
            "--factor", "2", "--out", str(out), "--no-progress", "--device", "cpu"]
    assert long_context_tool.main(argv) == 0
    printed = capsys.readouterr().out
    assert "dynamic" in printed and "0-49" in printed
    assert long_context_tool.main(["table", "--out", str(out)]) == 0
    stored = json.loads((out / "dynamic-150.json").read_text())
    assert stored["run"]["factor"] == 2.0 and stored["format"] == lc.RESULT_FORMAT


def test_run_stretch_and_long_context_blocks() -> None:
    from posenc_lib.pretrained.long_context import long_context_blocks, run_stretch

    blocks = [{"first_position": 0, "last_position": 1, "nll": 1.0, "perplexity": 2.7},
              {"first_position": 2, "last_position": 3, "nll": 2.0, "perplexity": 7.4}]
    results = [{"run": {"method": m, "factor": f, "num_tokens": 16384, "book": "persuasion"},
                "blocks": blocks} for m, f in (("none", 2.0), ("dynamic", 2.0), ("yarn", 2.0))]
    assert [run_stretch(r) for r in results] == [1.0, 3.0, 2.0]
    frame = long_context_blocks(results)
    assert len(frame) == 6 and frame.kappa.tolist() == [1.0, 1.0, 3.0, 3.0, 2.0, 2.0]
    assert frame.columns.tolist()[:5] == ["book", "method", "kappa", "factor", "block"]


def test_stored_run_helpers(tmp_path) -> None:
    """read_long_context_runs keys runs by (method, κ); block_perplexity (and _at) reads blocks."""
    blocks = [{"first_position": 0, "last_position": 1, "perplexity": 3.0},
              {"first_position": 2, "last_position": 3, "perplexity": 5.0}]
    for folder, method, factor in (("a", "none", 2.0), ("b", "dynamic", 2.0)):
        out = tmp_path / f"smollm2-persuasion-16384{folder}"
        out.mkdir()
        result = {"name": method, "blocks": blocks,
                  "run": {"method": method, "factor": factor, "num_tokens": 16_384}}
        (out / f"{method}.json").write_text(json.dumps(result))
    runs = lc.read_long_context_runs(tmp_path, "persuasion")
    assert sorted(runs) == [("dynamic", 3.0), ("none", 1.0)]
    assert lc.block_perplexity(runs["none", 1.0]).tolist() == [3.0, 5.0]
    with pytest.raises(FileNotFoundError, match="northangerabbey"):
        lc.read_long_context_runs(tmp_path, "northangerabbey")
    with pytest.raises(ValueError, match="no blocks"):
        lc.block_perplexity({"name": "x", "blocks": []})
    # a window of L tokens ends at position L - 1; past the last block, the last block
    assert [lc.block_perplexity_at(runs["none", 1.0], L) for L in (1, 2, 3, 4, 9)] == [
        3.0, 3.0, 5.0, 5.0, 5.0]
    with pytest.raises(ValueError, match="length"):
        lc.block_perplexity_at(runs["none", 1.0], 0)
    with pytest.raises(ValueError, match="no blocks"):
        lc.block_perplexity_at({"name": "x", "blocks": []}, 4)
    (tmp_path / "smollm2-persuasion-16384c").mkdir()
    (tmp_path / "smollm2-persuasion-16384c" / "none.json").write_text(
        json.dumps({"name": "none", "blocks": blocks,
                    "run": {"method": "none", "factor": 1.0, "num_tokens": 16_384}}))
    with pytest.raises(ValueError, match="two stored runs"):
        lc.read_long_context_runs(tmp_path, "persuasion")


def test_pair_stretch_and_transformers() -> None:
    """Dynamic NTK stretches the slowest pair by transformers' κ and keeps pair 0."""
    from posenc_lib.encodings.rope_scaling import dynamic_stretch, method_scaling

    stretch = pair_stretch(method_scaling("dynamic", 2.0, 8192), 64, 1e5, 16_384)
    assert stretch.shape == (32,) and abs(stretch[0].item() - 1) < 1e-6
    assert abs(stretch[-1].item() / dynamic_stretch(2.0, 16_384, 8192) - 1) < 1e-5
    theirs = lc.transformers_dynamic_stretch(2.0, 16_384, 64, 1e5, 8192)
    assert torch.allclose(theirs, stretch.double(), rtol=1e-5)
    assert torch.allclose(pair_stretch(None, 64, 1e5, 16_384), torch.ones(32))


def test_unseen_distances_and_rounding() -> None:
    """The share of keys past L_train, the last unseen distance, float32 angle rounding."""
    from posenc_lib.encodings.rope import rope_inverse_frequencies

    assert unseen_distance_share(10, 8) == 3 / 11
    assert unseen_distance_share(5, 8) == 0
    with pytest.raises(ValueError, match="position=-1"):
        unseen_distance_share(-1, 8)
    theta = rope_inverse_frequencies(64, 100_000.0)
    last = last_unseen_distances(theta, 8192, 16_383)
    assert min(last) == 20 and last[20] == 8378 and last[31] == 16_383
    error, half_ulp, octave = lc.float32_angle_rounding(20_000, 256, theta)
    assert 0 < error <= half_ulp == 2.0 ** (octave - 24)


def test_run_provenance_table() -> None:
    """One row per (text, run) in the labels' order, commit and minute cut, seconds rounded."""
    from posenc_lib import run_provenance_table

    def result(seconds: float) -> dict:
        return {"provenance": {"git_commit": "abcdef123456",
                               "finished_utc": "2026-12-01T10:20:30Z"},
                "timing": {"forward_wall_s": seconds}}

    runs = {"A": {("none", 1.0): result(10.4), ("yarn", 2.0): result(99.6)}}
    table = run_provenance_table(runs, {("yarn", 2.0): "YaRN", ("none", 1.0): "none"})
    assert table.index.tolist() == [("A", "YaRN"), ("A", "none")]
    assert table["forward pass (s)"].tolist() == [100, 10]
    assert table["git commit"].iloc[0] == "abcdef1"
    assert table["finished (UTC)"].iloc[0] == "2026-12-01T10:20"
    with pytest.raises(ValueError, match="need runs"):
        run_provenance_table({}, {})
