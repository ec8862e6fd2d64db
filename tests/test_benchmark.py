"""benchmark: the contracts of the measuring functions (on fake clocks and counters,
never on live time or memory), and the deterministic counts of operations and bytes."""

import itertools

import pytest
import torch

from posenc_lib import apply_rope, rope_complex, rope_inverse_frequencies, rope_rotate_half_naive, rotate_pairs_blocked
from posenc_lib import measure as benchmark
from posenc_lib.measure import (
    Timing,
    attention_bias_bytes,
    compare,
    measure,
    memory_traffic,
    peak_memory_bytes,
    rope_bytes,
    unique_bytes,
)


class FakeClock:
    """A clock that advances by the given steps, one per read."""

    def __init__(self, steps) -> None:
        self.now, self.steps = 0.0, iter(steps)

    def __call__(self) -> float:
        self.now += next(self.steps)
        return self.now


@pytest.fixture
def fake_rss(monkeypatch):
    """Replace the /proc readers by counters the test sets."""
    state = {"VmRSS": 0, "VmHWM": 0, "resets": 0}

    def reset() -> None:
        state["resets"] += 1
        state["VmHWM"] = state["VmRSS"]

    monkeypatch.setattr(benchmark, "_cpu_peak_measurable", lambda: True)
    monkeypatch.setattr(benchmark, "_reset_peak_rss", reset)
    monkeypatch.setattr(benchmark, "_status_bytes", lambda name: state[name])
    return state


def test_cpu_peak_is_high_water_mark_minus_resident_before(fake_rss) -> None:
    fake_rss.update(VmRSS=100, VmHWM=5000)  # a stale peak from before: must be reset

    def allocate_then_free() -> None:
        fake_rss["VmHWM"] = 100 + 64  # the call's peak
        fake_rss["VmRSS"] = 100  # freed again

    assert peak_memory_bytes(allocate_then_free) == 64
    assert fake_rss["resets"] == 1

    def frees_memory() -> None:
        fake_rss["VmRSS"] = 40

    assert peak_memory_bytes(frees_memory) == 0  # never negative


@pytest.mark.parametrize("device", ["mps", "meta"])
def test_peak_is_none_where_there_is_no_counter(device) -> None:
    calls = []
    assert peak_memory_bytes(lambda: calls.append(1), device) is None
    assert calls == [1]  # the call still ran


def test_peak_is_none_on_a_cpu_without_proc(monkeypatch) -> None:
    monkeypatch.setattr(benchmark, "_cpu_peak_measurable", lambda: False)
    assert peak_memory_bytes(lambda: None, "cpu") is None


def test_measure_takes_medians_of_the_repeats(fake_rss) -> None:
    wall = FakeClock([0, 3, 0, 1, 0, 2])  # three runs: 3, 1, 2 s
    cpu = FakeClock([0, 6, 0, 2, 0, 4])
    calls = []
    result = measure(
        lambda: calls.append(1), repeats=3, warmup=2, clock=wall, cpu_clock=cpu
    )
    assert (result.seconds, result.cpu_seconds, result.peak_bytes) == (2.0, 4.0, 0)
    assert len(calls) == 2 + 3 + 1  # warm-up, timed runs, one run for the peak
    quick = measure(
        lambda: None,
        repeats=1,
        warmup=0,
        memory=False,
        clock=FakeClock([0, 1]),
        cpu_clock=FakeClock([0, 1]),
    )
    assert quick.peak_bytes is None
    with pytest.raises(ValueError, match="repeats"):
        measure(lambda: None, repeats=0)
    with pytest.raises(ValueError, match="warmup"):
        measure(lambda: None, warmup=-1)


def test_compare_interleaves_and_rotates_the_order() -> None:
    order = []
    variants = {name: (lambda name=name: order.append(name)) for name in "abc"}
    durations = {"a": 1.0, "b": 2.0, "c": 4.0}
    clock_steps = []
    # each timed call reads the clock twice; its duration is the second step
    for name in ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]:
        clock_steps += [0.0, durations[name]]
    # the process ran for half of the wall time
    cpu_steps = [step / 2 for step in clock_steps]
    timings = compare(
        variants,
        repeats=3,
        warmup=1,
        clock=FakeClock(clock_steps),
        cpu_clock=FakeClock(cpu_steps),
    )
    assert order == list("abc" "bca" "cab" "abc")  # warm-up round, then rotated rounds
    assert {n: t.median for n, t in timings.items()} == durations
    assert {n: t.cpu_median for n, t in timings.items()} == {
        n: d / 2 for n, d in durations.items()
    }
    assert list(timings) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="variants"):
        compare({})


def test_timing_quartiles() -> None:
    timing = Timing.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (timing.median, timing.low, timing.high) == (3.0, 2.0, 4.0)
    assert timing.samples == (5.0, 1.0, 3.0, 2.0, 4.0)
    assert Timing.of([7.0]).low == Timing.of([7.0]).high == 7.0
    assert (
        timing.cpu_median is None
        and Timing.of([1.0, 3.0], [0.5, 1.0]).cpu_median == 0.75
    )


def test_unique_bytes_counts_a_broadcast_once() -> None:
    cos = torch.ones(16, 8)
    assert unique_bytes(cos) == 16 * 8 * 4
    assert unique_bytes(cos[None].expand(32, -1, -1)) == 16 * 8 * 4
    assert unique_bytes(torch.ones(4, dtype=torch.bfloat16)) == 8


def test_memory_traffic_counts_operations_and_bytes() -> None:
    x = torch.ones(1000)
    clone = memory_traffic(lambda: x.clone())
    assert dict(clone.operations) == {"clone": 1}
    assert (clone.bytes_read, clone.bytes_written, clone.bytes_allocated) == (
        4000,
        4000,
        4000,
    )
    assert clone.bytes_moved == 8000 and clone.allocations == 1

    out = torch.empty(1000)
    into = memory_traffic(lambda: torch.mul(x, x, out=out))  # out= is written, not read
    assert (into.bytes_read, into.bytes_written, into.allocations) == (8000, 4000, 0)
    in_place = memory_traffic(lambda: out.add_(x))  # in place: self is read and written
    assert (in_place.bytes_read, in_place.bytes_written, in_place.allocations) == (
        8000,
        4000,
        0,
    )
    views = memory_traffic(lambda: x.view(10, 100).t()[0])
    assert views.bytes_moved == 0 and not views.operations
    empty = memory_traffic(lambda: torch.empty(1000))
    assert (empty.bytes_allocated, empty.bytes_moved) == (4000, 0)


def _rope_inputs(seq=64, head_dim=16, heads=3):
    torch.manual_seed(0)
    x = torch.randn(2, heads, seq, head_dim)
    positions = torch.arange(seq)
    angles = positions.float()[:, None] * rope_inverse_frequencies(
        head_dim
    )  # (seq, d/2)
    return x, positions, angles


def test_reference_forms_equal_apply_rope() -> None:
    x, positions, angles = _rope_inputs()
    cos, sin = angles.cos(), angles.sin()
    naive = rope_rotate_half_naive(
        x, torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    )
    assert torch.allclose(naive, apply_rope(x, positions), atol=1e-6)
    rotations = torch.polar(torch.ones_like(angles), angles)
    assert torch.allclose(
        rope_complex(x, rotations),
        apply_rope(x, positions, interleaved=True),
        atol=1e-6,
    )


def test_rope_traffic_library_against_naive() -> None:
    """The counts the cost chapter states: bytes moved per byte of x, by code path."""
    x, positions, angles = _rope_inputs(seq=256, head_dim=64, heads=8)
    cos, sin = angles.cos(), angles.sin()
    cos_full, sin_full = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    x_bytes = x.numel() * 4
    naive = memory_traffic(lambda: rope_rotate_half_naive(x, cos_full, sin_full))
    assert naive.allocations == 5 and naive.bytes_allocated == 4.5 * x_bytes
    library = memory_traffic(lambda: rotate_pairs_blocked(x, cos, sin, interleaved=False))
    assert library.allocations == 1 and library.bytes_allocated == x_bytes
    assert dict(library.operations) == {"empty": 1, "mul": 2, "addcmul_": 2}
    tables = 2 * cos.numel() * 4
    assert library.bytes_read == 3 * x_bytes + 2 * tables  # cos read twice, sin twice
    assert library.bytes_written == 2 * x_bytes
    assert naive.bytes_moved > 1.9 * library.bytes_moved
    minimum = rope_bytes(tuple(x.shape), x.dtype)
    assert minimum == 2 * x_bytes + tables


def test_bytes_formulas() -> None:
    assert rope_bytes((1, 32, 4096, 128), torch.float32) == 130 * 2**20
    assert (
        rope_bytes((4096, 128), torch.bfloat16) == 2 * 4096 * 128 * 2 + 4096 * 128 * 4
    )
    assert attention_bias_bytes(4, 4096, 4096) == 256 * 2**20
    assert attention_bias_bytes(4, 10, 20, torch.bfloat16, batch=3) == 3 * 4 * 200 * 2
    with pytest.raises(ValueError, match="shape"):
        rope_bytes((8,), torch.float32)
    with pytest.raises(ValueError, match="heads=0"):
        attention_bias_bytes(0, 8, 8)


def test_environment_records_load_and_versions() -> None:
    info = benchmark.environment("cpu")
    assert info["torch_version"] == torch.__version__ and info["device_type"] == "cpu"
    assert info["cpu_count"] >= 1
    assert info["load_average"] is None or len(info["load_average"]) == 3


def test_fake_clock_helper() -> None:
    clock = FakeClock(itertools.repeat(0.5))
    assert (clock(), clock()) == (0.5, 1.0)


def test_alibi_folded_into_keys_equals_the_mask_up_to_its_precision() -> None:
    from posenc_lib import alibi_bias, attend
    from posenc_lib.measure import alibi_attention_folded_keys

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 300, 16) for _ in range(3))
    reference = attend(
        q.double(), k.double(), v.double(), alibi_bias(4, 300, 300, dtype=torch.float64)
    )
    folded = alibi_attention_folded_keys(q, k, v)
    masked = attend(q, k, v, alibi_bias(4, 300, 300))
    assert (folded.double() - reference).abs().max() < 1e-4
    traffic = memory_traffic(lambda: alibi_attention_folded_keys(q, k, v))
    assert (
        traffic.operations["_scaled_dot_product_flash_attention_for_cpu"] == 1
    )  # fused, causal
    assert traffic.bytes_allocated < attention_bias_bytes(
        4, 300, 300
    )  # no [H, L, L] tensor
    assert (masked.double() - reference).abs().max() < 1e-5
    with pytest.raises(ValueError, match="slopes"):
        alibi_attention_folded_keys(q, k, v, torch.ones(3))


def test_stored_benchmark_loader_and_label(tmp_path, monkeypatch) -> None:
    import json

    from posenc_book import stored
    from posenc_lib.measure import benchmark_label, load_stored_benchmark

    (tmp_path / "benchmarks").mkdir()
    record = {
        "suite": "rope",
        "rows": [],
        "environment": {
            "device": "cpu",
            "device_type": "cpu",
            "cpu_model": "AMD EPYC",
            "torch_threads": 2,
            "git_commit": "0123456789abcdef",
            "git_dirty": False,
            "torch_version": "2.13.0+cpu",
            "date_utc": "2026-12-01T00:15:09+00:00",
            "load_average": [16.14, 1.0, 1.0],
        },
        "load_average_end": [17.94, 1.0, 1.0],
    }
    (tmp_path / "benchmarks" / "rope-cpu-x.json").write_text(json.dumps(record))
    monkeypatch.setattr(stored, "REPOSITORY_RESULTS", tmp_path)
    loaded = load_stored_benchmark("rope-cpu-x")
    assert loaded == record
    assert benchmark_label(loaded) == (
        "rope suite, cpu (AMD EPYC, 2 threads), torch 2.13.0+cpu, commit 0123456, "
        "2026-12-01 00:15 UTC, load average 16.1 → 17.9"
    )
    with pytest.raises(FileNotFoundError, match="python -m tools.benchmarks"):
        load_stored_benchmark("missing")
    with pytest.raises(ValueError, match="file stem"):
        load_stored_benchmark("../x")


def test_stored_benchmark_runs_reads_one_series_in_order() -> None:
    import pandas as pd

    from posenc_lib.measure import benchmark_rows, per_run, run_provenance, stored_benchmark_runs

    runs = stored_benchmark_runs("rope", "series A")
    assert [run_provenance(r)["run"] for r in runs] == [1, 2, 3, 4, 5]
    assert all(r["label"].startswith("series A") for r in runs)
    names = [r["name"] for r in runs]
    assert names == sorted(names) and all(n.startswith("rope-cpu-") for n in names)
    for r in runs:  # written after it started, within the hour
        started = pd.Timestamp(r["environment"]["date_utc"])
        assert pd.Timedelta(0) < r["written_utc"] - started < pd.Timedelta(hours=1)
    rows = benchmark_rows(runs)
    assert len(rows) == sum(len(r["rows"]) for r in runs)
    assert sorted(rows.run.unique()) == [1, 2, 3, 4, 5]
    copy = per_run(rows, "median_ms", variant=rows.variant.iloc[0], dtype="float32", shape_name="large")
    assert list(copy.index) == [1, 2, 3, 4, 5]
    assert stored_benchmark_runs("rope", "no such series") == []
    with pytest.raises(ValueError, match="suite must be"):
        stored_benchmark_runs("../rope", "series A")


def test_run_provenance_and_spread() -> None:
    import pandas as pd

    from posenc_lib.measure import run_provenance, spread

    record = {"label": "series B, run 3 of 5, library at 1a2b3c4 (export)", "load_average_end": [2.0, 1, 1],
              "environment": {"date_utc": "2026-12-02T04:20:50+00:00", "torch_threads": 1,
                              "load_average": [1.25, 1, 1]}}
    assert run_provenance(record) == {"run": 3, "started (UTC)": "2026-12-02 04:20", "threads": 1,
                                      "load average": "1.2 → 2.0", "library at": "1a2b3c4"}
    with pytest.raises(ValueError, match="label must name"):
        run_provenance({**record, "label": None})
    assert spread(pd.Series([1, 2, 4])) == "2.00 (1.00–4.00)"


def test_span_rounds_the_lowest_and_highest_value() -> None:
    import pandas as pd

    from posenc_lib.measure import span

    assert span(pd.Series([2.34, 8.57, 5.0])) == (2.3, 8.6)
    assert span(pd.Series([0.987, 1.013]), 2) == (0.99, 1.01)
    with pytest.raises(ValueError, match="values"):
        span(pd.Series([], dtype=float))


def test_run_reader_reads_one_value_per_run_with_fixed_and_positional_columns() -> None:
    import pandas as pd

    from posenc_lib.measure import run_reader

    rows = pd.DataFrame({"run": [2, 1, 1, 2, 1], "variant": ["a", "a", "b", "b", "a"],
                         "dtype": ["f32", "f32", "f32", "f32", "bf16"],
                         "x": [2.0, 1.0, 3.0, 4.0, 5.0], "y": [20, 10, 30, 40, 50]})
    read = run_reader(rows, "x", "variant", "dtype", dtype="f32")
    assert read("a").tolist() == [1.0, 2.0] and list(read("a").index) == [1, 2]
    assert read("a", "bf16").tolist() == [5.0]
    assert read("b", value="y").tolist() == [30, 40]
    assert read(dtype="bf16").tolist() == [5.0]  # no key given: every variant
    with pytest.raises(TypeError, match="at most 2"):
        read("a", "f32", "extra")
    with pytest.raises(KeyError, match="'z'"):
        run_reader(rows, "z", "variant")


def test_run_times_and_provenance_by_suite_and_run() -> None:
    import pandas as pd

    from posenc_lib.measure import benchmark_provenance, run_times

    def record(n: int, minute: int) -> dict:
        return {"label": f"series B, run {n} of 2, library at 1a2b3c4",
                "load_average_end": [2.0], "written_utc": pd.Timestamp(
                    f"2026-12-02T04:{minute + 5:02d}:00Z"),
                "environment": {"date_utc": f"2026-12-02T04:{minute:02d}:00+00:00",
                                "torch_threads": 1, "load_average": [1.0]}}

    runs = {"rope": [record(1, 0), record(2, 10)], "model": [record(1, 3)]}
    start, end = run_times(runs)
    assert start["rope", 2] == pd.Timestamp("2026-12-02T04:10:00Z")
    assert end["model", 1] == pd.Timestamp("2026-12-02T04:08:00Z")
    assert list(start.index) == [("rope", 1), ("rope", 2), ("model", 1)]
    table = benchmark_provenance(runs)
    assert table.index.names == ["suite", "run"] and len(table) == 3
    assert table.loc[("rope", 2), "started (UTC)"] == "2026-12-02 04:10"
    assert list(table.columns) == ["started (UTC)", "threads", "load average", "library at"]


def test_cpu_time_fractions_divide_by_the_reference_of_the_same_run_and_dtype() -> None:
    import pandas as pd

    from posenc_lib.measure import with_cpu_time_fractions

    rows = pd.DataFrame({
        "run": [1, 1, 2, 2, 1], "dtype": ["float32"] * 4 + ["bfloat16"],
        "variant": ["copy", "rope", "copy", "rope", "rope"],
        "bytes_needed": [100.0, 50.0, 100.0, 50.0, 25.0],
        "cpu_median_ms": [1.0, 1.0, 2.0, 0.5, 1.0], "median_ms": [2.0, 3.0, 2.0, 1.0, 1.0],
    })
    out = with_cpu_time_fractions(rows, "copy").set_index(["run", "variant"])
    assert out.loc[(1, "rope"), "cpu_fraction"] == 0.5 and out.loc[(2, "rope"), "cpu_fraction"] == 2.0
    assert out.loc[(1, "copy"), "cpu_gb_per_s"] == 100 / 1.0 / 1e6
    assert out.loc[(1, "rope"), "stretch"] == 3.0
    assert len(out) == 4  # the bfloat16 row has no reference: dropped


def test_rope_angle_errors_grow_as_the_angle_dtype_shrinks() -> None:
    from posenc_lib.measure import rope_angle_errors

    positions = torch.tensor([1, 100, 70000])
    x = torch.randn(3, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    errors = rope_angle_errors(x, positions)
    assert list(errors) == ["float32", "bfloat16", "float16"]
    assert errors["float32"][1] < errors["bfloat16"][1]
    assert torch.isnan(errors["float16"][2])  # 70000 overflows float16
    with pytest.raises(ValueError, match="x must be float64"):
        rope_angle_errors(x.float(), positions)
    with pytest.raises(ValueError, match="dtypes"):
        rope_angle_errors(x, positions, ("float8",))


def test_rope_error_in_eps_is_in_units_of_the_pair_rounding() -> None:
    from posenc_lib.measure import rope_error_in_eps

    reference = torch.tensor([[3.0, 1.0, 4.0, 0.0]], dtype=torch.float64)  # pair norms 5, 1
    rotated = reference + torch.tensor([[5 * torch.finfo(torch.bfloat16).eps, 0, 0, 0]])
    assert rope_error_in_eps(rotated, reference, torch.bfloat16) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="share a shape"):
        rope_error_in_eps(rotated[:, :3], reference[:, :3], torch.bfloat16)


def test_traffic_table_counts_each_call_against_x_and_the_minimum() -> None:
    x = torch.randn(1, 2, 16, 8)
    table = benchmark.traffic_table({"clone": lambda: x.clone()}, x)
    row = table.loc["clone"]
    assert list(table.columns) == ["operations", "new tensors", "allocated (× x)", "moved (× minimum)"]
    assert (row["new tensors"], row["allocated (× x)"]) == (1, 1.0)
    assert row["moved (× minimum)"] == pytest.approx(2 * x.numel() * 4 / rope_bytes(tuple(x.shape), x.dtype))
    with pytest.raises(TypeError, match="x must be a tensor"):
        benchmark.traffic_table({}, [1.0])


def test_run_time_reads_start_from_the_environment_and_end_from_the_file() -> None:
    import pandas as pd

    written = pd.Timestamp("2026-01-02T03:04:05Z")
    record = {"environment": {"date_utc": "2026-01-02T03:00:00+00:00"}, "written_utc": written}
    assert benchmark.run_time(record) == pd.Timestamp("2026-01-02T03:00:00Z")
    assert benchmark.run_time(record, end=True) == written


def test_variant_names_are_the_suites_and_renames_reach_current_names() -> None:
    from tools.benchmarks import attention, rope

    assert rope.LIBRARY == benchmark.RopeVariant.LIBRARY and rope.COPY == benchmark.RopeVariant.COPY
    assert attention.ALIBI_NOW == benchmark.AttentionVariant.ALIBI_NOW
    current = {v for k, v in vars(benchmark.AttentionVariant).items() if k.isupper() and isinstance(v, str)}
    assert set(benchmark.AttentionVariant.RENAMED.values()) <= current
    assert not set(benchmark.AttentionVariant.RENAMED) & current
    assert set(benchmark.AttentionVariant.LINES) <= current  # the figure's styles
    names = {v for k, v in vars(benchmark.RopeVariant).items() if k.isupper() and isinstance(v, str)}
    assert set(benchmark.RopeVariant.SHORT) <= names  # the figure's short names


def test_spread_table_summarises_each_pair_over_runs() -> None:
    import pandas as pd

    from posenc_lib.measure import spread_table

    rows = pd.DataFrame({"run": [1, 2, 3, 1, 2], "variant": ["a"] * 3 + ["b"] * 2,
                         "dtype": ["f32"] * 5, "x": [1.0, 2.0, 4.0, 3.0, 5.0]})
    table = spread_table(rows, "x", "variant", "dtype")
    assert table.loc["a", "f32"] == "2.00 (1.00–4.00)"
    assert table.loc["b", "f32"] == "4.00 (3.00–5.00)"
    with pytest.raises(KeyError, match="'y'"):
        spread_table(rows, "y", "variant", "dtype")


def test_scores_computed_by_query_blocks() -> None:
    from posenc_lib.measure import scores_computed

    assert scores_computed(2048) == 1.0
    assert scores_computed(2048, 512) == 10 / 16
    assert scores_computed(512, 512) == 1.0  # one block: the same call
    assert scores_computed(1000, 512) == (512 * 512 + 1000 * 488) / 1000**2  # ragged end
    with pytest.raises(ValueError, match="block=0"):
        scores_computed(2048, 0)


def test_sdpa_path_names_the_fused_kernel_or_the_math_path() -> None:
    import torch.nn.functional as F

    from posenc_lib.measure import sdpa_path

    q = torch.randn(1, 2, 16, 8)
    assert sdpa_path(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)) == (
        "fused kernel × 1")
    mask = torch.zeros(2, 16, 16)  # 3-D: the math path on a CPU
    assert sdpa_path(lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
                     ).startswith("math path: ")
    assert sdpa_path(lambda: q + 1) == "neither"
    with pytest.raises(TypeError, match="callable"):
        sdpa_path(q)


def test_alibi_folding_errors_keys_lose_precision_in_bfloat16() -> None:
    from posenc_lib.measure import alibi_folding_errors

    errors, size = alibi_folding_errors(256, head_dim=8, heads=2)
    assert set(errors) == {(f, d) for f in ("mask", "keys") for d in ("float32", "bfloat16")}
    assert errors["mask", "float32"] < 1e-5 and 0 < size < 10
    assert errors["keys", "bfloat16"] > errors["mask", "bfloat16"]
    with pytest.raises(ValueError, match="heads=0"):
        alibi_folding_errors(256, heads=0)
