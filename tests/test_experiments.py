"""The sweep: resumes after a kill without rework or loss, never overwrites silently, records
provenance, and summarises seeds as mean ± sample standard deviation."""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from posenc_lib.tasks import sweep as experiments
from posenc_book import cited
from posenc_lib.tasks.sweep import RunSpec, format_table, load_results, plan_sweep, run_sweep, summarize
from posenc_lib.training.scales import SCALES, Scale
from tools.runs import sweep as sweep_tool  # the command line

TINY = Scale("tiny", d_model=32, num_layers=1, num_heads=2, seq_len=32, batch_size=8, steps=15, lr=3e-3,
             warmup_steps=2, eval_lengths=(32, 64), eval_tokens=2048, seeds=(0, 1))
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))


def test_plan_order_and_evaluation_grid() -> None:
    runs = plan_sweep(TINY, schemes=["rope", "alibi"])
    assert [r.name for r in runs] == ["rope-Ltrain32-seed0", "alibi-Ltrain32-seed0", "rope-Ltrain32-seed1",
                                      "alibi-Ltrain32-seed1"]
    assert runs[0].eval_plan() == [("nonoverlapping", 32, None), ("sliding", 32, 16), ("nonoverlapping", 64, None),
                                   ("sliding", 64, 32)]
    longer = RunSpec(TINY, "rope", 0, 64)
    assert longer.sized_scale().eval_lengths == (64, 128) and longer.train_config().seq_len == 64
    assert len(plan_sweep(SCALES["ci"])) == 18  # six schemes × three seeds
    with pytest.raises(ValueError, match="scheme must be one of"):
        RunSpec(TINY, "xpos", 0, 32)
    with pytest.raises(ValueError, match="train_length must be >= 1"):
        RunSpec(TINY, "rope", 0, 0)


def test_result_records_provenance(tmp_path) -> None:
    (result,) = run_sweep(plan_sweep(TINY, schemes=["alibi"], seeds=[0]), tmp_path / "out", device="cpu",
                          progress=False)
    prov = result["provenance"]
    assert prov["torch_version"] == torch.__version__ and prov["device"] == "cpu" and prov["device_type"] == "cpu"
    assert prov["git_commit"] is None or len(prov["git_commit"]) == 40
    assert prov["date_utc"].endswith("+00:00")
    timing = result["timing"]
    assert timing["model_was_cached"] is False and timing["dtype"] == "float32"
    # Wall times and memory are recorded, never asserted on (issue 14): check the record's
    # shape and the relations that hold whatever the clock and the allocator read.
    for key in ("train_wall_s", "train_tokens_per_second", "eval_wall_s"):
        assert isinstance(timing[key], float), key
    config = result["train_config"]
    trained = config["steps"] * config["batch_size"] * config["seq_len"]
    assert timing["train_tokens_per_second"] * timing["train_wall_s"] == pytest.approx(trained)
    scored = sum(e["tokens_scored"] for e in result["evaluations"])
    assert timing["eval_tokens_scored"] == scored
    assert timing["eval_tokens_per_second"] * timing["eval_wall_s"] == pytest.approx(scored)
    assert timing["peak_memory_kind"] == "process peak RSS so far"  # on a CPU
    assert isinstance(timing["peak_memory_bytes"], int)
    assert result["run"] == RunSpec(TINY, "alibi", 0, 32).to_dict()
    assert result["train_config"]["model"]["position"] == "alibi"
    assert {(e["protocol"], e["eval_length"]) for e in result["evaluations"]} == {
        (p, L) for p in ("nonoverlapping", "sliding") for L in (32, 64)}
    label = experiments.provenance_label([result])
    assert label.startswith("1 run of scale tiny on cpu, torch ") and prov["date_utc"][:10] in label
    on_disk = json.loads((tmp_path / "out" / "alibi-Ltrain32-seed0.json").read_text())
    assert on_disk == result


def test_learned_beyond_its_table_is_recorded_as_skipped(tmp_path) -> None:
    (result,) = run_sweep(plan_sweep(TINY, schemes=["learned"], seeds=[0]), tmp_path, device="cpu", progress=False)
    long = [e for e in result["evaluations"] if e["eval_length"] == 64]
    assert all(e["perplexity"] is None and "32 rows" in e["skipped"] for e in long)
    assert 64 not in summarize([result])["sliding"]["learned"]


def test_interrupted_sweep_resumes_without_rework(tmp_path, monkeypatch) -> None:
    out = tmp_path / "out"
    runs = plan_sweep(TINY, schemes=["rope", "alibi"], seeds=[0])
    real_run_one = experiments.run_one
    calls: list[str] = []

    def interrupt_second(spec, *args, **kwargs):
        calls.append(spec.name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as if Ctrl-C arrived during the second run
        return real_run_one(spec, *args, **kwargs)

    monkeypatch.setattr(experiments, "run_one", interrupt_second)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(runs, out, device="cpu", progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["rope-Ltrain32-seed0.json"]  # no partial file
    first = (out / "rope-Ltrain32-seed0.json").read_bytes()

    calls.clear()
    results = run_sweep(runs, out, device="cpu", progress=False)
    assert calls == ["alibi-Ltrain32-seed0"]  # only the missing run
    assert (out / "rope-Ltrain32-seed0.json").read_bytes() == first  # untouched
    assert [r["name"] for r in results] == ["rope-Ltrain32-seed0", "alibi-Ltrain32-seed0"]


KILL_SCRIPT = """
import sys
from posenc_lib.training.scales import SCALES, Scale
from tools.runs import sweep as sweep_tool
SCALES["tiny"] = Scale("tiny", d_model=32, num_layers=1, num_heads=2, seq_len=32, batch_size=8, steps=60, lr=3e-3,
                       warmup_steps=2, eval_lengths=(32, 64, 128), eval_tokens=8192, seeds=(0,))
sys.exit(sweep_tool.main(["sweep", "--config", "tiny", "--schemes", "rope", "alibi", "t5", "--out", sys.argv[1],
                          "--no-progress", "--device", "cpu"]))
"""


def test_killed_process_resumes_and_loses_nothing(tmp_path) -> None:
    """SIGKILL the command line after its first result file appears; rerun; compare."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(out)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list(out.glob("*.json")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    survivors = {p.name: p.read_bytes() for p in out.glob("*.json")}
    assert "rope-Ltrain32-seed0.json" in survivors and len(survivors) < 3, \
        "kill the sweep while it still has runs to do"
    for content in survivors.values():
        json.loads(content)  # every file that exists is whole

    subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(out)], env=env, check=True, capture_output=True)
    after = {p.name: p.read_bytes() for p in out.glob("*.json")}
    assert sorted(after) == ["alibi-Ltrain32-seed0.json", "rope-Ltrain32-seed0.json", "t5-Ltrain32-seed0.json"]
    for name, content in survivors.items():
        assert after[name] == content  # finished runs neither redone nor rewritten


def test_never_overwrites_a_different_run_silently(tmp_path) -> None:
    run_sweep(plan_sweep(TINY, schemes=["none"], seeds=[0]), tmp_path, device="cpu", progress=False)
    changed = Scale(**{**TINY.__dict__, "steps": 16})
    with pytest.raises(FileExistsError, match="--overwrite"):
        run_sweep(plan_sweep(changed, schemes=["none"], seeds=[0]), tmp_path, device="cpu", progress=False)
    (result,) = run_sweep(plan_sweep(changed, schemes=["none"], seeds=[0]), tmp_path, device="cpu", progress=False,
                          overwrite=True)
    assert result["train"]["steps"] == 16 and load_results(tmp_path)[0]["train"]["steps"] == 16


def _fake_result(scheme: str, seed: int, perplexities: dict[int, float]) -> dict:
    return {
        "run": {"scheme": scheme, "seed": seed},
        "evaluations": [{"protocol": "nonoverlapping", "eval_length": L, "perplexity": p}
                        for L, p in perplexities.items()],
    }


def test_summary_is_mean_and_sample_std() -> None:
    results = [_fake_result("rope", s, {128: p, 256: 2 * p}) for s, p in enumerate([3.0, 4.0, 8.0])]
    summary = summarize(results + [_fake_result("alibi", 0, {128: 3.5})])
    mean, std, n = summary["nonoverlapping"]["rope"][256]
    assert (mean, n) == (10.0, 3) and std == pytest.approx(statistics.stdev([6.0, 8.0, 16.0]))
    assert summary["nonoverlapping"]["alibi"][128] == (3.5, 0.0, 1)
    assert list(summary["nonoverlapping"]) == ["rope", "alibi"]  # the book's scheme order
    table = format_table(summary)
    assert "10.00 ± 5.29" in table and "—" in table


def test_command_line_table(tmp_path, capsys) -> None:
    run_sweep(plan_sweep(TINY, schemes=["t5"], seeds=[0]), tmp_path, device="cpu", progress=False)
    assert sweep_tool.main(["table", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("nonoverlapping: perplexity") and "t5" in printed and "sliding" in printed
    with pytest.raises(FileNotFoundError):
        load_results(tmp_path / "missing")


# --- per-run ratios and their spread over seeds (results_frame, ratio_spread, summary_table) ---


def _fake_run(
    scheme: str,
    seed: int,
    curves: dict[str, dict[int, float | None]],
    train_length: int = 128,
) -> dict:
    """A result record with the fields the seed statistics read; None = skipped evaluation."""
    evaluations = [
        {
            "protocol": protocol,
            "eval_length": L,
            "perplexity": p,
            "bits_per_byte": None if p is None else math.log2(p),
        }
        for protocol, curve in curves.items()
        for L, p in curve.items()
    ]
    return {
        "name": f"{scheme}-Ltrain{train_length}-seed{seed}",
        "run": {"scheme": scheme, "seed": seed, "train_length": train_length},
        "evaluations": evaluations,
    }


def test_results_frame_divides_within_each_run() -> None:
    runs = [
        _fake_run(
            "alibi",
            0,
            {"sliding": {128: 8.0, 256: 8.08}, "nonoverlapping": {128: 8.0, 256: 7.92}},
        ),
        _fake_run("learned", 0, {"nonoverlapping": {128: 9.0, 256: None}}),
        _fake_run("rope", 1, {"nonoverlapping": {256: 14.0, 128: 7.0}}),
    ]
    frame = experiments.results_frame(runs)
    assert tuple(frame.columns) == experiments.FRAME_COLUMNS
    # protocols in PROTOCOLS order, schemes in the book's order, then seed and L
    assert list(zip(frame.protocol, frame.scheme, frame.eval_length)) == [
        ("nonoverlapping", "learned", 128),
        ("nonoverlapping", "rope", 128),
        ("nonoverlapping", "rope", 256),
        ("nonoverlapping", "alibi", 128),
        ("nonoverlapping", "alibi", 256),
        ("sliding", "alibi", 128),
        ("sliding", "alibi", 256),
    ]
    rope = frame[(frame.scheme == "rope") & (frame.eval_length == 256)].iloc[0]
    assert (
        rope.ratio == pytest.approx(2.0)
        and rope.multiple == 2.0
        and rope.bits_per_byte == pytest.approx(math.log2(14.0))
    )
    alibi = (
        frame[(frame.scheme == "alibi") & (frame.eval_length == 256)]
        .set_index("protocol")
        .ratio
    )
    assert alibi["nonoverlapping"] == pytest.approx(0.99) and alibi[
        "sliding"
    ] == pytest.approx(1.01)
    assert (frame[frame.multiple == 1].ratio == 1.0).all()


def test_results_frame_refuses_a_ratio_without_its_base() -> None:
    with pytest.raises(ValueError, match="no sliding evaluation at L_train=128"):
        experiments.results_frame([_fake_run("rope", 0, {"sliding": {256: 9.0}})])
    with pytest.raises(ValueError, match="at least one result"):
        experiments.results_frame([])


def test_ratio_spread_is_over_per_seed_ratios_not_over_levels() -> None:
    # The level varies a lot between seeds (8, 10, 12) but every seed loses exactly 1 %:
    # the ratio's spread is zero while the level's is large.
    levels = [8.0, 10.0, 12.0]
    runs = [
        _fake_run(
            "alibi", s, {"nonoverlapping": {128: p, 256: 0.99 * p, 512: 0.98 * p}}
        )
        for s, p in enumerate(levels)
    ]
    runs.append(_fake_run("learned", 0, {"nonoverlapping": {128: 9.0, 256: None}}))
    spread = experiments.ratio_spread(runs)
    assert list(spread.index) == [
        ("nonoverlapping", "alibi", 2.0),
        ("nonoverlapping", "alibi", 4.0),
    ]  # no learned, no k = 1
    row = spread.loc[("nonoverlapping", "alibi", 2.0)]
    assert row["mean"] == pytest.approx(0.99) and row["std"] == pytest.approx(
        0.0, abs=1e-12
    )
    assert (
        row["min"] == pytest.approx(0.99)
        and row["max"] == pytest.approx(0.99)
        and row["n"] == 3
    )
    assert statistics.stdev(levels) == 2.0  # ... while the level's std over seeds is 2
    # a ratio that does vary: sample standard deviation (n - 1)
    ratios = [1.1, 1.3, 1.8]
    varied = [
        _fake_run("rope", s, {"sliding": {128: 5.0, 256: 5.0 * r}})
        for s, r in enumerate(ratios)
    ]
    row = experiments.ratio_spread(varied).loc[("sliding", "rope", 2.0)]
    assert row["std"] == pytest.approx(statistics.stdev(ratios)) and row[
        "mean"
    ] == pytest.approx(statistics.fmean(ratios))


def test_summary_table_shows_summarize_with_display_names() -> None:
    runs = [
        _fake_run("rope", s, {"nonoverlapping": {128: p, 256: 2 * p}})
        for s, p in enumerate([3.0, 4.0, 8.0])
    ]
    runs.append(_fake_run("learned", 0, {"nonoverlapping": {128: 9.0, 256: None}}))
    table = experiments.summary_table(runs, "nonoverlapping")
    mean, std, _ = summarize(runs)["nonoverlapping"]["rope"][256]
    assert table.loc["RoPE", 256] == f"{mean:.2f} ± {std:.2f}" == "10.00 ± 5.29"
    assert (
        list(table.index) == ["Learned", "RoPE"] and table.columns.name == "L (bytes)"
    )
    assert (
        table.loc["Learned", 128] == "9.00 ± 0.00" and table.loc["Learned", 256] == "—"
    )
    ratios = experiments.summary_table(runs, "nonoverlapping", value="ratio", digits=3)
    assert (
        list(ratios.index) == ["RoPE"]
        and list(ratios.columns) == [2]
        and ratios.loc["RoPE", 2] == "2.000 ± 0.000"
    )
    with pytest.raises(ValueError, match="protocol must be one of"):
        experiments.summary_table(runs, "overlapping")
    with pytest.raises(ValueError, match="value must be"):
        experiments.summary_table(runs, "sliding", value="nll")


def test_shards_together_run_every_run_exactly_once(tmp_path, monkeypatch) -> None:
    """N workers with --shard 1/N … N/N into one folder: each run once, none twice."""
    calls: list[str] = []

    def fake_run_one(spec, *args, **kwargs):
        calls.append(spec.name)
        return {"run": spec.to_dict(), "name": spec.name, "evaluations": []}

    monkeypatch.setattr(experiments, "run_one", fake_run_one)
    monkeypatch.setitem(SCALES, "tiny", TINY)
    plan = [r.name for r in plan_sweep(TINY, seeds=[0, 1, 2])]  # 18 runs
    for num_shards in (1, 4, 18, 25):  # 4 does not divide 18; 25 leaves shards empty
        calls.clear()
        out = tmp_path / f"n{num_shards}"
        for shard in range(1, num_shards + 1):
            argv = ["sweep", "--config", "tiny", "--seeds", "0", "1", "2",
                    "--out", str(out), "--device", "cpu", "--no-progress",
                    "--shard", f"{shard}/{num_shards}"]
            assert sweep_tool.main(argv) == 0
        assert sorted(calls) == sorted(plan) and len(calls) == len(set(calls))
        assert sorted(p.stem for p in out.glob("*.json")) == sorted(plan)
    plan = plan_sweep(TINY, seeds=[0, 1, 2])
    sizes = [len(experiments.shard_runs(plan, k, 4)) for k in range(1, 5)]
    assert sizes == [5, 5, 4, 4]  # round robin: sizes differ by at most one


def test_shard_argument_is_checked(capsys) -> None:
    assert experiments.parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "2", "a/b", "1/2/3"):
        with pytest.raises(ValueError, match="K/N"):
            experiments.parse_shard(bad)
        with pytest.raises(SystemExit):
            sweep_tool.main(["sweep", "--shard", bad])
        assert "K/N" in capsys.readouterr().err
    with pytest.raises(ValueError, match="shard"):
        experiments.shard_runs(plan_sweep(TINY), 3, 2)


def test_model_setting_reaches_every_run_and_is_recorded(tmp_path, monkeypatch) -> None:
    """--model FIELD=VALUE: a controlled variant, stored in each run's scale.model_extra."""
    seen: list = []

    def fake_run_one(spec, *args, **kwargs):
        seen.append(spec.train_config().model)
        return {"run": spec.to_dict(), "name": spec.name, "evaluations": []}

    monkeypatch.setattr(experiments, "run_one", fake_run_one)
    monkeypatch.setitem(SCALES, "tiny", TINY)
    argv = ["sweep", "--config", "tiny", "--schemes", "sinusoidal", "rope", "--seeds", "0",
            "--model", "token_init_std=0.125", "--model", "scale_token_embedding=true",
            "--out", str(tmp_path), "--device", "cpu", "--no-progress"]
    assert sweep_tool.main(argv) == 0
    assert [(m.token_init_std, m.scale_token_embedding) for m in seen] == [(0.125, True)] * 2
    for result in load_results(tmp_path):
        assert result["run"]["scale"]["model_extra"] == {
            "token_init_std": 0.125, "scale_token_embedding": True}


def test_model_setting_is_checked(capsys) -> None:
    assert experiments.parse_model_setting("token_init_std=0.02") == ("token_init_std", 0.02)
    assert experiments.parse_model_setting("learned_init=normal") == ("learned_init", "normal")
    for bad, message in (("token_init_std", "FIELD=VALUE"), ("=1", "FIELD=VALUE"),
                         ("d_model=8", "FIELD must be one of"), ("nope=1", "FIELD must be")):
        with pytest.raises(ValueError, match=message):
            experiments.parse_model_setting(bad)
        with pytest.raises(SystemExit):
            sweep_tool.main(["sweep", "--model", bad])
        assert message in capsys.readouterr().err
    with pytest.raises(ValueError, match="token_init_std must be a finite number > 0"):
        sweep_tool.main(["sweep", "--config", "ci", "--model", "token_init_std=-1"])


def _two_protocol_runs() -> list[dict]:
    """Three seeds of ALiBi and RoPE and one learned table, under both protocols."""
    runs = []
    for seed, level in enumerate([8.0, 10.0, 12.0]):
        runs.append(_fake_run("alibi", seed, {
            "nonoverlapping": {128: level, 256: 0.99 * level},
            "sliding": {128: 0.98 * level, 256: 0.98 * 1.01 * level}}))
        runs.append(_fake_run("rope", seed, {
            "nonoverlapping": {128: level - 1, 256: 2 * (level - 1)},
            "sliding": {128: level - 1, 256: (2 + seed) * (level - 1)}}))
    runs.append(_fake_run("learned", 0, {"nonoverlapping": {128: 9.0, 256: None},
                                         "sliding": {128: 9.0, 256: None}}))
    return runs


def test_seed_values_are_one_number_per_seed() -> None:
    runs = _two_protocol_runs()
    levels = experiments.seed_values(runs, "nonoverlapping", "alibi")
    assert levels.index.name == "seed" and levels.to_dict() == {0: 8.0, 1: 10.0, 2: 12.0}
    ratios = experiments.seed_values(runs, "sliding", "rope", 2, value="ratio")
    assert ratios.to_list() == pytest.approx([2.0, 3.0, 4.0])
    assert experiments.level_spread(runs, "nonoverlapping", "alibi") == pytest.approx(
        statistics.stdev([8.0, 10.0, 12.0]) / 10.0)
    with pytest.raises(ValueError, match="scheme='learned' at multiple=2"):
        experiments.seed_values(runs, "sliding", "learned", 2)
    with pytest.raises(ValueError, match="value must be"):
        experiments.seed_values(runs, "sliding", "rope", value="nll")


def test_protocol_gap_is_sliding_over_nonoverlapping_per_seed() -> None:
    runs = _two_protocol_runs()
    assert experiments.protocol_gap(runs, "alibi").to_list() == pytest.approx([-0.02] * 3)
    assert experiments.protocol_gap(runs, "rope", 2).to_list() == pytest.approx([0.0, 0.5, 1.0])


def test_protocol_tables_stack_both_summary_tables() -> None:
    runs = _two_protocol_runs()
    table = experiments.protocol_tables(runs)
    assert table.index.names == ["protocol", "scheme"]
    for protocol, label in experiments.PROTOCOL_LABELS.items():
        assert table.loc[label].equals(experiments.summary_table(runs, protocol))
    ratios = experiments.protocol_tables(runs, value="ratio", digits=3)
    assert ratios.loc[("sliding", "RoPE"), 2] == "3.000 ± 1.000"


def test_ratio_spread_table_puts_the_level_spread_beside_the_ratio() -> None:
    runs = _two_protocol_runs()
    table = experiments.ratio_spread_table(runs, 2)
    assert list(table.index) == [("non-overlapping", "RoPE"), ("non-overlapping", "ALiBi"),
                                 ("sliding", "RoPE"), ("sliding", "ALiBi")]
    assert list(table.columns) == ["ratio at 2×: mean", "ratio at 2×: std", "ratio at 2×: min",
                                   "ratio at 2×: max", "level at L_train: std / mean"]
    alibi = table.loc[("non-overlapping", "ALiBi")]
    assert alibi["ratio at 2×: mean"] == pytest.approx(0.99)
    assert alibi["ratio at 2×: std"] == pytest.approx(0.0, abs=1e-12)
    assert alibi["level at L_train: std / mean"] == pytest.approx(0.2)


def test_per_byte_spreads_the_rise_over_the_bytes_of_a_token() -> None:
    assert experiments.per_byte(2.0 ** 5.3) == pytest.approx(2.0)
    assert experiments.per_byte(8.0, 3) == pytest.approx(2.0)
    wt103 = {s: cited.WT103_BYTES[s] / cited.WT103_TOKENS[s] for s in cited.WT103_TOKENS}
    assert all(abs(b - cited.WT103_BYTES_PER_TOKEN) < 0.05 for b in wt103.values())
    with pytest.raises(ValueError, match="ratio_per_token must be > 0"):
        experiments.per_byte(0.0)
    with pytest.raises(ValueError, match="bytes_per_token must be > 0"):
        experiments.per_byte(2.0, -1)


def test_press_ratios_and_table() -> None:
    press = cited.press_ratios()
    assert press["nonoverlapping"]["alibi"] == pytest.approx((18.73 / 19.73, 18.41 / 19.73))
    assert "rope" not in press["sliding"]
    runs = [_fake_run(s, 0, {p: {128: 10.0, 256: 11.0, 512: 12.0} for p in experiments.PROTOCOLS})
            for s in ("sinusoidal", "rope", "alibi", "t5")]
    table = experiments.press_table(runs, "ours")
    row = table.loc[("non-overlapping", "ALiBi")]
    assert row[("2×", "Press, per word")] == pytest.approx(18.73 / 19.73)
    assert row[("2×", "Press, per byte")] == pytest.approx(experiments.per_byte(18.73 / 19.73))
    assert row[("4×", "ours")] == pytest.approx(1.2)
    assert math.isnan(table.loc[("sliding", "RoPE"), ("2×", "Press, per word")])
    assert table.loc[("sliding", "RoPE"), ("2×", "ours")] == pytest.approx(1.1)


def test_relative_gain_and_haviv_numbers() -> None:
    from posenc_lib import HAVIV2022_PERPLEXITY, haviv_perplexities, relative_gain

    def record(scheme, seed, ppl):
        return {"run": {"scheme": scheme, "seed": seed, "train_length": 8},
                "evaluations": [{"protocol": "nonoverlapping", "eval_length": 8,
                                 "perplexity": ppl, "bits_per_byte": math.log2(ppl),
                                 "nll": math.log(ppl)}]}

    runs = [record("none", 0, 10.0), record("learned", 0, 9.0),
            record("none", 1, 10.0), record("learned", 1, 11.0)]
    gain = relative_gain(runs, "nonoverlapping", "learned")
    assert gain.round(6).tolist() == [0.1, -0.1]
    table = haviv_perplexities()
    assert list(table.columns) == ["none", "learned", "sinusoidal", "alibi"]
    assert len(table) == len(HAVIV2022_PERPLEXITY) == 8
    assert (table["none"] > table["alibi"]).all()


def test_seed_table_holds_one_value_per_scheme_and_seed() -> None:
    runs = [_fake_run("rope", 0, {"nonoverlapping": {128: 7.0, 256: 14.0}}),
            _fake_run("rope", 1, {"nonoverlapping": {128: 8.0, 256: 12.0}}),
            _fake_run("alibi", 0, {"nonoverlapping": {128: 8.0, 256: 7.92},
                                   "sliding": {128: 8.0, 256: 8.08}})]
    frame = experiments.results_frame(runs)
    ratios = experiments.seed_table(frame, 2)
    assert list(ratios.columns) == [0, 1] and ratios.loc["rope"].tolist() == [2.0, 1.5]
    assert experiments.seed_table(frame, 1, "perplexity").loc["rope", 1] == 8.0
    assert experiments.seed_table(frame, 2, protocol="sliding").loc["alibi", 0] == (
        pytest.approx(1.01))
    with pytest.raises(ValueError, match="values"):
        experiments.seed_table(frame, 2, "ppl")
    with pytest.raises(ValueError, match="multiple=16"):
        experiments.seed_table(frame, 16)


def test_seed_table_rows_by_several_columns_in_a_given_order() -> None:
    import pandas as pd

    runs = [_fake_run("rope", 0, {"nonoverlapping": {128: 7.0, 256: 14.0}}),
            _fake_run("alibi", 0, {"nonoverlapping": {128: 8.0, 256: 8.0}})]
    frame = experiments.results_frame(runs).assign(start="std 1")
    order = pd.MultiIndex.from_product([["rope", "alibi"], ["std 1", "std 0.02"]])
    table = experiments.seed_table(frame, 2, index=["scheme", "start"], order=order)
    assert list(table.index) == list(order)
    assert table.loc[("rope", "std 1"), 0] == 2.0
    assert table.loc[("alibi", "std 0.02")].isna().all()  # no such run: NaN
    with pytest.raises(KeyError):
        experiments.seed_table(frame, 2, index=["scheme", "no such column"])
