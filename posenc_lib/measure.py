"""What a code path costs: time, peak memory, and the bytes it must move.

Two kinds of numbers come out of this module, and the book treats them differently:

* **Measurements** (:func:`measure`, :func:`compare`, :func:`peak_memory_bytes`): wall
  time and peak memory of real calls. They depend on the machine, its load and the
  allocator, so the book shows them as stored results labelled with where and when they
  ran, or as live output that is not checked — never in an assertion.
* **Counts** (:func:`memory_traffic`, :func:`rope_bytes`, :func:`attention_bias_bytes`):
  which PyTorch operations a call runs, the tensors it allocates, and the bytes it reads
  and writes, from the shapes alone. They are the same on every machine, so tests and
  chapters assert them.

Peak memory is what a call adds on top of what was held before it:

* CUDA: :func:`torch.cuda.max_memory_allocated` after resetting the peak (bytes held by
  PyTorch's caching allocator in tensors).
* CPU (Linux): the process's peak resident set size (``VmHWM`` in
  ``/proc/self/status``), reset through ``/proc/self/clear_refs`` before the call, minus
  the resident size before it. Large tensors are allocated with ``mmap`` and returned to
  the system when freed, so this follows PyTorch's large allocations; it misses small
  ones that reuse freed memory and sees anything else the process does meanwhile.
* Anywhere else (Apple's MPS, a CPU without Linux's ``/proc``): not measured, ``None``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_bytes(field_name: str) -> int:
    """A memory field of ``/proc/self/status`` (reported in kB), in bytes."""
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field_name} not found in {_STATUS}")


def _reset_peak_rss() -> None:
    _CLEAR_REFS.write_text("5")  # "5" resets the peak RSS (VmHWM) to the current RSS


def _cpu_peak_measurable() -> bool:
    return _STATUS.exists() and _CLEAR_REFS.exists()


def peak_memory_bytes(
    fn: Callable[[], object], device: torch.device | str = "cpu"
) -> int | None:
    """Run ``fn()`` once and return the peak memory it added, in bytes (≥ 0), or None.

    Args:
        fn: the call to measure; its result is dropped before returning.
        device: where ``fn`` allocates: ``"cpu"``, a CUDA device, or any other device.

    Returns:
        Bytes (int ≥ 0) on CUDA (allocator counters) and on a Linux CPU (peak resident
        set size, see the module docstring); ``None`` where there is no counter to read:
        Apple's MPS, other device types, a CPU without ``/proc`` (macOS, Windows).
        ``fn`` still runs once in every case.

    Example:
        >>> peak_memory_bytes(lambda: None, "meta") is None
        True
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return max(0, torch.cuda.max_memory_allocated(device) - before)
    if device.type != "cpu" or not _cpu_peak_measurable():
        fn()
        return None
    _reset_peak_rss()
    before = _status_bytes("VmRSS")
    fn()
    return max(0, _status_bytes("VmHWM") - before)


def _synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that a clock read after it includes that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


@dataclass(frozen=True)
class Measurement:
    """One call's cost: medians over the repeats of its wall time and of the CPU time
    the process spent in it (all threads; on a busy machine it varies less than the wall
    time), both in seconds, and the peak memory it added in bytes (None where not
    measured)."""

    seconds: float
    cpu_seconds: float
    peak_bytes: int | None


def measure(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
    *,
    repeats: int = 3,
    warmup: int = 1,
    memory: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
) -> Measurement:
    """Time ``fn`` (medians of ``repeats`` runs after ``warmup`` runs) and measure its
    peak memory.

    Wall time depends on the machine and on whatever else runs on it; CPU time less so.

    Args:
        fn: the call to measure.
        device: where it runs (GPU work is synchronised before each clock read).
        repeats: timed runs (≥ 1); warmup: untimed runs before them (≥ 0).
        memory: also run ``fn`` once more under :func:`peak_memory_bytes`.
        clock, cpu_clock: the wall and CPU clocks in seconds (replaceable for tests).

    Returns:
        A :class:`Measurement`.

    Raises:
        ValueError: if ``repeats`` < 1 or ``warmup`` < 0.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(
            f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}"
        )
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(repeats):
        _synchronize(device)
        start, start_cpu = clock(), cpu_clock()
        fn()
        _synchronize(device)
        wall.append(clock() - start)
        cpu.append(cpu_clock() - start_cpu)
    peak = peak_memory_bytes(fn, device) if memory else None
    return Measurement(statistics.median(wall), statistics.median(cpu), peak)


@dataclass(frozen=True)
class Timing:
    """Wall times of one variant in a :func:`compare` run, in seconds.

    Attributes:
        samples: every timed run, in the order they ran.
        median, low, high: the median and the first and third quartiles of ``samples``
            (the spread a table reports next to the median).
        cpu_median: the median CPU time of the process over the same runs (all threads;
            less disturbed than wall time by other jobs waiting for the same cores), or
            None when no CPU clock was read.
    """

    samples: tuple[float, ...]
    median: float
    low: float
    high: float
    cpu_median: float | None = None

    @classmethod
    def of(cls, samples: list[float], cpu_samples: list[float] | None = None) -> Timing:
        ordered = sorted(samples)
        if len(ordered) >= 2:
            low, _, high = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            low = high = ordered[0]
        cpu = statistics.median(cpu_samples) if cpu_samples else None
        return cls(tuple(samples), statistics.median(ordered), low, high, cpu)


def compare(
    variants: Mapping[str, Callable[[], object]],
    device: torch.device | str = "cpu",
    *,
    repeats: int = 7,
    warmup: int = 2,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] | None = time.process_time,
) -> dict[str, Timing]:
    """Time several variants side by side: interleaved repeats, medians and quartiles.

    Each round runs every variant once, starting one place later than the round before
    (rounds 0, 1, 2 of variants A, B, C run ABC, BCA, CAB), so a slow spell of a shared
    machine hits all variants alike and no variant always runs first or last. Ratios
    between variants of one call hold much better than absolute times.

    Args:
        variants: name → a call with no arguments.
        device: where they run (GPU work is synchronised before each clock read).
        repeats: timed rounds (≥ 1); warmup: untimed rounds before them (≥ 0).
        clock: the wall clock in seconds (replaceable for tests).
        cpu_clock: the process's CPU clock in seconds, or None to read none.

    Returns:
        name → :class:`Timing`, in the order of ``variants``.

    Raises:
        ValueError: for no variants, ``repeats`` < 1 or ``warmup`` < 0.

    Example:
        >>> ticks = iter(range(100))
        >>> timings = compare({"a": lambda: None}, repeats=3, warmup=0,
        ...                   clock=lambda: next(ticks), cpu_clock=None)
        >>> timings["a"].samples
        (1, 1, 1)
    """
    if not variants:
        raise ValueError("variants must name at least one call")
    if repeats < 1 or warmup < 0:
        raise ValueError(
            f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}"
        )
    device = torch.device(device)
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu_samples: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(warmup + repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            _synchronize(device)
            start, start_cpu = clock(), cpu_clock() if cpu_clock else 0.0
            variants[name]()
            _synchronize(device)
            elapsed = clock() - start
            elapsed_cpu = cpu_clock() - start_cpu if cpu_clock else 0.0
            if round_index >= warmup:
                samples[name].append(elapsed)
                cpu_samples[name].append(elapsed_cpu)
    return {
        name: Timing.of(samples[name], cpu_samples[name] if cpu_clock else None)
        for name in names
    }


# ------------------------------------------------------------------------------------
# Counts: deterministic, from shapes and the operations PyTorch runs


def unique_bytes(tensor: Tensor) -> int:
    """Bytes of the distinct elements a tensor holds: a broadcast (stride-0) dimension
    is stored once, so ``cos[None].expand(32, -1, -1)`` counts as one ``cos``."""
    elements = math.prod(n for n, st in zip(tensor.shape, tensor.stride()) if st != 0)
    return elements * tensor.element_size()


@dataclass
class Traffic:
    """What a call did, operation by operation, as counted by :func:`memory_traffic`.

    Attributes:
        operations: how often each ATen operation ran (views, which move no data, are
            left out), e.g. ``{"mul": 2, "addcmul_": 2, "empty": 1}``.
        bytes_read: bytes of the tensor inputs of every operation (a broadcast input
            counted once, see :func:`unique_bytes`).
        bytes_written: bytes of every operation's outputs, new or written in place.
        bytes_allocated: bytes of the new tensors the call created.
        allocations: how many new tensors it created.
    """

    operations: Counter = field(default_factory=Counter)
    bytes_read: int = 0
    bytes_written: int = 0
    bytes_allocated: int = 0
    allocations: int = 0

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus bytes written: the traffic if no operation found its inputs
        in a cache (a model, but the right one for tensors larger than the caches)."""
        return self.bytes_read + self.bytes_written


_ALLOCATE_ONLY = (
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
)


class _TrafficMode(TorchDispatchMode):
    """Sees every ATen operation below autograd and adds up what it reads and writes."""

    def __init__(self, traffic: Traffic) -> None:
        super().__init__()
        self.traffic = traffic

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func.is_view:
            return result
        name = func.overloadpacket.__name__
        traffic = self.traffic
        traffic.operations[name] += 1
        schema = func._schema
        write_only = {  # out= arguments: written, not read
            a.name
            for a in schema.arguments
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
        }
        if name not in _ALLOCATE_ONLY:
            for value in args:
                traffic.bytes_read += _tensor_bytes(value)
            for key, value in kwargs.items():
                if key not in write_only:
                    traffic.bytes_read += _tensor_bytes(value)
        outputs, _ = tree_flatten(result)
        returns = list(schema.returns) + [None] * (len(outputs) - len(schema.returns))
        for value, returned in zip(outputs, returns):
            if not isinstance(value, Tensor):
                continue
            in_place = returned is not None and returned.alias_info is not None
            if not in_place:
                traffic.allocations += 1
                traffic.bytes_allocated += unique_bytes(value)
            if name not in _ALLOCATE_ONLY:
                traffic.bytes_written += unique_bytes(value)
        return result


def _tensor_bytes(value: object) -> int:
    tensors, _ = tree_flatten(value)
    return sum(unique_bytes(t) for t in tensors if isinstance(t, Tensor))


def memory_traffic(fn: Callable[[], object]) -> Traffic:
    """Run ``fn()`` once and count its operations, allocations and bytes read and
    written.

    Every ATen operation that runs below autograd is seen (a fused kernel such as SDPA's
    is one operation: what it keeps in registers or cache is not counted). The counts
    depend only on the code path and the shapes, never on the machine's speed or load,
    so they can be asserted. It is a model of memory traffic: each operation reads its
    tensor inputs and writes its outputs once, as if nothing stayed in cache between
    operations.

    Args:
        fn: the call to count (runs once, eagerly). It must not use higher-order
            operators (FlexAttention, ``torch.compile``d code): PyTorch raises
            ``NotImplementedError`` for those inside a dispatch mode.

    Returns:
        A :class:`Traffic`.

    Example:
        >>> x = torch.ones(1024)
        >>> t = memory_traffic(lambda: x * 2)
        >>> t.operations["mul"], t.bytes_read, t.bytes_written, t.bytes_allocated
        (1, 4096, 4096, 4096)
    """
    traffic = Traffic()
    with _TrafficMode(traffic):
        fn()
    return traffic


def rope_bytes(
    shape: tuple[int, ...], dtype: torch.dtype, table_dtype: torch.dtype = torch.float32
) -> int:
    """The bytes applying RoPE must move at least: read x, write the result, read
    cos/sin.

    The cos and sin tables are ``[seq, head_dim/2]`` each, shared by batch and heads.

    Args:
        shape: x's shape ``[..., seq, head_dim]``.
        dtype: x's dtype (the result has the same).
        table_dtype: the dtype of the cos/sin tables (the library keeps float32).

    Returns:
        2 · numel(x) · itemsize(dtype) + 2 · seq · head_dim/2 · itemsize(table_dtype).

    Raises:
        ValueError: for a shape of fewer than 2 dimensions.

    Example:
        >>> rope_bytes((1, 32, 4096, 128), torch.float32) / 2**20
        130.0
    """
    if len(shape) < 2:
        raise ValueError(
            f"shape must be [..., seq, head_dim], got shape={tuple(shape)}"
        )
    seq, head_dim = shape[-2], shape[-1]
    x_bytes = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
    table = seq * head_dim // 2 * torch.empty(0, dtype=table_dtype).element_size()
    return 2 * x_bytes + 2 * table


def attention_bias_bytes(
    heads: int,
    q_len: int,
    k_len: int,
    dtype: torch.dtype = torch.float32,
    batch: int = 1,
) -> int:
    """Bytes of an additive attention bias ``[batch, heads, q_len, k_len]`` held as a
    tensor.

    This is what ALiBi or T5's bias costs when it is handed to an attention kernel as a
    mask (quadratic in the length); a kernel that computes it inside (FlexAttention's
    ``score_mod``) holds none of it.

    Raises:
        ValueError: for a size below 1.

    Example:
        >>> attention_bias_bytes(4, 4096, 4096) / 2**20
        256.0
    """
    if min(heads, q_len, k_len, batch) < 1:
        raise ValueError(
            f"sizes must be >= 1, got batch={batch}, heads={heads}, q_len={q_len}, "
            f"k_len={k_len}"
        )
    itemsize = torch.empty(0, dtype=dtype).element_size()
    return batch * heads * q_len * k_len * itemsize


# ------------------------------------------------------------------------------------
# Another way to write ALiBi, to compare the library's with


def alibi_attention_folded_keys(
    q: Tensor, k: Tensor, v: Tensor, slopes: Tensor | None = None
) -> Tensor:
    """Causal ALiBi through SDPA's plain causal kernel: the bias moved into the dot
    product.

    Under a causal mask, −m_h (t − s) and +m_h s give the same attention: they differ by
    −m_h t, a constant in each query's row, and a softmax ignores such constants (Press
    et al. 2022 build their bias this way). The term m_h s is a dot product: append a 1
    to every query and m_h s √D to every key, fix SDPA's scale at 1/√D, and the extra
    dimension adds exactly m_h s to each score. v gets a zero column so that all head
    widths agree (the CPU's fused kernel wants that), which is cut off afterwards. No
    ``[H, L, L]`` tensor exists, and the kernel skips the blocks above the diagonal.

    The price is precision: the key column grows to m_h s √D (2 500 for m_h = 1/4,
    s = 2047, D = 24), and q·k is added to it in float32, so each score is rounded
    relative to the column's size rather than its own; in bfloat16 (8 significant bits)
    the column rounds away the differences between neighbouring keys altogether. The library does
    not use it for that reason; the cost chapter measures both.

    Args:
        q, k, v: ``[B, H, L, D]``, the same L (self-attention).
        slopes: ``[H]``; default :func:`~posenc_lib.encodings.alibi.alibi_slopes` (H).

    Returns:
        ``[B, H, L, D]``, q's dtype.

    Raises:
        ValueError: for q, k, v that are not 4-D with equal lengths, or slopes not
            ``[H]``.
    """
    from posenc_lib.encodings.alibi import alibi_slopes

    if q.dim() != 4 or k.shape != q.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError(
            "q, k, v must be [batch, heads, seq, head_dim] with one seq, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    batch, heads, length, head_dim = q.shape
    slopes = alibi_slopes(heads) if slopes is None else slopes
    if slopes.shape != (heads,):
        raise ValueError(
            f"slopes must be [heads={heads}], got shape {tuple(slopes.shape)}"
        )
    positions = torch.arange(length, device=q.device, dtype=torch.float32)
    column = slopes.to(q.device)[:, None] * positions * math.sqrt(head_dim)  # (H, L)
    column = column[None, :, :, None].expand(batch, heads, length, 1).to(k.dtype)
    ones = torch.ones(batch, heads, length, 1, device=q.device, dtype=q.dtype)
    zeros = torch.zeros(batch, heads, length, 1, device=v.device, dtype=v.dtype)
    q1 = torch.cat([q, ones], -1)  # (B, H, L, D + 1)
    k1 = torch.cat([k, column], -1)
    v1 = torch.cat([v, zeros], -1)
    out = torch.nn.functional.scaled_dot_product_attention(
        q1, k1, v1, is_causal=True, scale=1 / math.sqrt(head_dim)
    )  # (B, H, L, D + 1)
    return out[..., :head_dim]


def environment(device: torch.device | str = "cpu") -> dict:
    """Where a measurement ran: :func:`posenc_lib.records.provenance` plus the CPU
    model, the CPU count and the load average (1, 5, 15 min) when the call was made."""
    from posenc_lib.records import provenance

    info = provenance(device)
    info["cpu_count"] = os.cpu_count()
    info["cpu_model"] = _cpu_model()
    info["load_average"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return info


def load_stored_benchmark(name: str) -> dict:
    """A benchmark run stored as ``results/benchmarks/NAME.json`` by ``python -m
    benchmarks``.

    Args:
        name: the file's stem, e.g. ``"rope-cpu-20261201T001500Z"``.

    Returns:
        The record: ``suite``, ``command``, ``label``, ``config``, ``environment``
            (where and when it ran), ``load_average_end`` and ``rows`` (one dict per
            measurement).

    Raises:
        ValueError: for a name with a path separator.
        FileNotFoundError: if there is no such stored run.
    """
    from posenc_book.stored import stored_results_dir  # late: stored imports experiments

    if "/" in name or "\\" in name:
        raise ValueError(
            f"name must be a file stem in results/benchmarks, got name={name!r}"
        )
    path = stored_results_dir("benchmarks") / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(
            f"no stored benchmark {path}; run `python -m tools.benchmarks`"
        )
    return json.loads(path.read_text())


def benchmark_label(record: dict) -> str:
    """One line saying where and when a stored benchmark ran, e.g. ``"rope suite, cpu
    (AMD EPYC, 2 threads), torch 2.13.0+cpu, commit 1a2b3c4, 2026-12-01 00:15 UTC, load
    average 16.1 → 17.9"``."""
    env = record["environment"]
    device = (
        env["device"] if env["device_type"] != "cpu" else f"cpu ({env.get('cpu_model')}"
    )
    if env["device_type"] == "cpu":
        device += f", {env['torch_threads']} threads)"
    commit = str(env.get("git_commit"))[:7] + (
        " + local changes" if env.get("git_dirty") else ""
    )
    load = ""
    if env.get("load_average") and record.get("load_average_end"):
        start, end = env["load_average"][0], record["load_average_end"][0]
        load = f", load average {start:.1f} → {end:.1f}"
    when = env["date_utc"][:16].replace("T", " ")
    return (
        f"{record['suite']} suite, {device}, torch {env['torch_version']}, "
        f"commit {commit}, {when} UTC{load}"
    )


def stored_benchmark_runs(suite: str, series: str) -> list[dict]:
    """The stored CPU runs of one suite that belong to a series, in the order they ran.

    A series is a set of runs made together and labelled ``"SERIES, run N of M, …"``
    (``python -m tools.benchmarks --label``), e.g. the cost chapter's ``"series A"``.

    Args:
        suite: ``"rope"``, ``"attention"`` or ``"model"``.
        series: the start of the runs' labels, e.g. ``"series A"``.

    Returns:
        One record per run (as :func:`load_stored_benchmark` returns it, oldest first, by
        file name), each with two keys added: ``"name"``, the file's stem, and
        ``"written_utc"``, the time the file was written (from its name), a UTC
        ``pandas.Timestamp``.

    Raises:
        ValueError: for a suite name with a path separator or ``-``.
    """
    import pandas as pd
    from posenc_book.stored import stored_results_dir  # late: stored imports experiments

    if not suite or any(c in suite for c in "/\\-"):
        raise ValueError(f"suite must be a suite name such as 'rope', got suite={suite!r}")
    runs = []
    for path in sorted(stored_results_dir("benchmarks").glob(f"{suite}-cpu-*.json")):
        record = load_stored_benchmark(path.stem)
        if (record["label"] or "").startswith(series):
            stamp = path.stem.split("-")[-1]
            written = pd.to_datetime(stamp, format="%Y%m%dT%H%M%SZ", utc=True)
            runs.append({**record, "name": path.stem, "written_utc": written})
    return runs


class RopeVariant:
    """The names of the RoPE suite's variants (``tools/benchmarks/rope.py``), as its
    stored rows spell them in ``variant``: one home for the suite and the cost chapter.
    """

    COPY = "copy into a new tensor (x.clone())"
    COPY_INTO = "copy into an existing tensor (64 MiB float32)"
    TRIAD = "triad a = b + s·c (3 × 64 MiB float32)"
    NAIVE = "naive rotate-half"
    BEFORE = "posenc_lib at 039df76 (upcast, slices, cat)"
    PASSES = "four passes over all of x (posenc_lib at bf5fcbc)"
    LIBRARY = "posenc_lib apply_rope"
    LIBRARY_OUT = "posenc_lib apply_rope, out= an existing tensor"
    LIBRARY_IN_PLACE = "posenc_lib apply_rope, in place (out=x)"
    IN_CACHE = "four passes on one cached block, as often as x has blocks"
    MODULE = "posenc_lib RotaryEmbedding (the model's path)"
    MODULE_POSITIONS = "posenc_lib RotaryEmbedding, positions given"
    COMPLEX = "complex multiply (interleaved)"
    COMPLEX_OUT = "complex multiply (interleaved), out= an existing tensor"
    COMPILED_INTO = "torch.compile(one fused expression), out= an existing tensor"
    COMPILED_NAIVE = "torch.compile(naive rotate-half)"
    SHORT = {
        TRIAD: "triad", COPY: "x.clone()", LIBRARY: "library, new result",
        MODULE: "RotaryEmbedding", LIBRARY_OUT: "library, out=",
        LIBRARY_IN_PLACE: "library, in place", PASSES: "4 passes over x, new",
        IN_CACHE: "4 passes, cached block", COMPLEX: "complex, new",
        COMPLEX_OUT: "complex, out=", COMPILED_INTO: "compiled, out=",
        COMPILED_NAIVE: "compiled naive",
    }
    """Short names of the large shape's float32 variants for a figure's tick labels, in
    the cost chapter's order (the yardsticks first, the library's forms next)."""


class AttentionVariant:
    """The names of the attention suite's variants (``tools/benchmarks/attention.py``).

    ``RENAMED`` maps the names older stored runs wrote (e.g. the cost chapter's
    "series A") to the current ones: ``rows["variant"].replace(AttentionVariant.RENAMED)``.
    """

    CAUSAL = "causal SDPA (NoPE, sinusoidal, learned)"
    ROPE = "RoPE: rotate q, k + causal SDPA"
    ALIBI_BEFORE = "ALiBi: mask built per call, one SDPA call"
    ALIBI_ONE_CALL = "ALiBi: mask built once, one SDPA call"
    ALIBI_NOW = "ALiBi: mask built once, query blocks (library)"
    ALIBI_FLEX = "ALiBi: FlexAttention score_mod"
    ALIBI_KEYS = "ALiBi: folded into the keys"
    T5_BEFORE = "T5 bias: bias and mask per call, one SDPA call"
    T5_NOW = "T5 bias: one lookup per call, query blocks (library)"
    LINES = {
        CAUSAL: ("none", "-", "x"), ROPE: ("rope", "-", "^"),
        ALIBI_BEFORE: ("alibi", ":", "v"), ALIBI_ONE_CALL: ("alibi", "-.", "o"),
        ALIBI_NOW: ("alibi", "-", "s"), ALIBI_KEYS: ("alibi", "--", "D"),
        T5_BEFORE: ("t5", ":", "v"), T5_NOW: ("t5", "-", "s"),
    }
    """variant → (scheme for the colour, line style, marker) for
    :func:`~posenc_book.plotting.plot_time_by_length`; FlexAttention is left out (its
    times are off the scale of the others)."""
    RENAMED = {
        "ALiBi: mask built per call, one SDPA call (library before)": ALIBI_BEFORE,
        "ALiBi: mask built once, query blocks (library now)": ALIBI_NOW,
        "T5 bias: bias + mask per call, one SDPA call (library before)": T5_BEFORE,
        "T5 bias: mask lookup per call, query blocks (library now)": T5_NOW,
    }


def run_time(record: dict, end: bool = False):
    """When a stored run started (``end=False``, from its environment's ``date_utc``)
    or ended (``end=True``: the time its file was written, ``written_utc``).

    Args:
        record: a record of :func:`stored_benchmark_runs`.
        end: the end instead of the start.

    Returns:
        A UTC ``pandas.Timestamp``.
    """
    import pandas as pd

    return record["written_utc"] if end else pd.Timestamp(record["environment"]["date_utc"])


def traffic_table(calls: Mapping[str, Callable[[], object]], x: Tensor):
    """The memory traffic of several ways to rotate ``x`` (RoPE), one row each.

    Args:
        calls: name -> a call without arguments that returns the rotated ``x``.
        x: the input the calls rotate, ``[..., seq, head_dim]`` of any float dtype.

    Returns:
        ``pandas.DataFrame`` indexed by ``implementation`` (the names), with columns
        ``operations`` (PyTorch operations run), ``new tensors`` (allocations),
        ``allocated (× x)`` (bytes allocated ÷ bytes of ``x``) and ``moved (× minimum)``
        (bytes read and written ÷ :func:`rope_bytes`, the least RoPE must move), from
        :func:`memory_traffic`.

    Raises:
        TypeError: for an ``x`` that is not a tensor.
    """
    import pandas as pd

    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    x_bytes = x.numel() * x.element_size()
    minimum = rope_bytes(tuple(x.shape), x.dtype)
    rows = []
    for name, call in calls.items():
        traffic = memory_traffic(call)
        rows.append({
            "implementation": name,
            "operations": sum(traffic.operations.values()),
            "new tensors": traffic.allocations,
            "allocated (× x)": traffic.bytes_allocated / x_bytes,
            "moved (× minimum)": traffic.bytes_moved / minimum,
        })
    return pd.DataFrame(rows).set_index("implementation")


def benchmark_rows(runs: list[dict]):
    """Every measurement of several stored runs as one long table.

    Args:
        runs: records as :func:`stored_benchmark_runs` returns them.

    Returns:
        ``pandas.DataFrame``: one row per stored row (its columns as the suite wrote
        them, e.g. ``variant``, ``median_ms``, ``cpu_median_ms``), and ``run``, the
        run's number (1 for ``runs[0]`` …).
    """
    import pandas as pd

    frames = [pd.DataFrame(record["rows"]).assign(run=i + 1) for i, record in enumerate(runs)]
    return pd.concat(frames, ignore_index=True)


def run_provenance(record: dict) -> dict:
    """Where and when a labelled stored run ran, as a table row.

    Args:
        record: a record of :func:`stored_benchmark_runs`, labelled
            ``"…, run N of M, library at 1a2b3c4 …"``.

    Returns:
        ``{"run": N, "started (UTC)": "YYYY-MM-DD HH:MM", "threads": int,
        "load average": "start → end" (1-minute averages), "library at": "1a2b3c4"}``.

    Raises:
        ValueError: for a label without a run number or a commit.
    """
    import re

    label = record["label"] or ""
    run, commit = re.search(r"run (\d+) of", label), re.search(r"at ([0-9a-f]{7})", label)
    if run is None or commit is None:
        raise ValueError(f"label must name 'run N of M' and 'at <commit>', got {label!r}")
    env = record["environment"]
    start, end = env["load_average"][0], record["load_average_end"][0]
    return {
        "run": int(run.group(1)),
        "started (UTC)": env["date_utc"][:16].replace("T", " "),
        "threads": env["torch_threads"],
        "load average": f"{start:.1f} → {end:.1f}",
        "library at": commit.group(1),
    }


def with_cpu_time_fractions(rows, reference: str):
    """Each row's bandwidth relative to a reference variant's, by CPU time.

    A row's rate is ``bytes_needed`` per CPU millisecond; it is divided by the rate of
    the ``reference`` row (e.g. a copy into an existing tensor) of the same run and
    dtype, measured in the same rounds.

    Args:
        rows: a :func:`benchmark_rows` table with ``run``, ``dtype``, ``variant``,
            ``bytes_needed``, ``median_ms`` and ``cpu_median_ms``, holding a ``reference``
            row for every (run, dtype).
        reference: the variant to divide by.

    Returns:
        A new table (rows without a reference of their run and dtype are dropped) with
        ``copy_bytes`` and ``copy_cpu_ms`` (the reference's), ``cpu_fraction`` (rate ÷
        the reference's), ``cpu_gb_per_s`` (GB per CPU second) and ``stretch`` (wall
        time ÷ CPU time) added.
    """
    copy_cpu = rows[rows.variant == reference][["run", "dtype", "bytes_needed", "cpu_median_ms"]]
    copy_cpu.columns = ["run", "dtype", "copy_bytes", "copy_cpu_ms"]
    rows = rows.merge(copy_cpu, on=["run", "dtype"])
    rows["cpu_fraction"] = (rows.bytes_needed / rows.cpu_median_ms) / (rows.copy_bytes / rows.copy_cpu_ms)
    rows["cpu_gb_per_s"] = rows.bytes_needed / rows.cpu_median_ms / 1e6
    rows["stretch"] = rows.median_ms / rows.cpu_median_ms
    return rows


def per_run(frame, value: str, **where):
    """One value per run: column ``value`` of the rows of ``frame`` (a
    :func:`benchmark_rows` table) where each named column equals the value given.

    Example: ``per_run(rows, "median_ms", variant="copy", dtype="float32")``.

    Returns:
        ``pandas.Series`` indexed by ``run``, sorted.

    Raises:
        KeyError: for a column the table does not have.
    """
    chosen = frame
    for column, wanted in where.items():
        chosen = chosen[chosen[column] == wanted]
    return chosen.set_index("run")[value].sort_index()


def spread(values) -> str:
    """``"median (lowest–highest)"`` of a series of values (e.g. one per run), two
    decimals: ``spread(pd.Series([1, 2, 4]))`` is ``"2.00 (1.00–4.00)"``."""
    return f"{values.median():.2f} ({values.min():.2f}–{values.max():.2f})"


def span(values, digits: int = 1) -> tuple[float, float]:
    """``(lowest, highest)`` of a series of values (e.g. one per run), each rounded to
    ``digits`` decimals: ``span(pd.Series([2.34, 8.57]))`` is ``(2.3, 8.6)``.

    Args:
        values: a ``pandas.Series`` (or anything with ``min()`` and ``max()``).
        digits: decimals kept (``round``; 0 keeps whole numbers as floats).

    Raises:
        ValueError: for an empty series.
    """
    if len(values) == 0:
        raise ValueError("values must hold at least one value, got an empty series")
    return round(values.min(), digits), round(values.max(), digits)


def run_reader(frame, value: str, *keys: str, **fixed):
    """A reader of one value per run from a :func:`benchmark_rows` table: ``read(*wanted)``
    is :func:`per_run` of the rows whose ``keys`` columns hold ``wanted`` (in order) and
    whose ``fixed`` columns hold the values given; keywords of ``read`` override ``fixed``,
    and ``read(..., value="other_column")`` reads another column.

    Example: ``fraction = run_reader(rows, "cpu_fraction", "variant", "dtype",
    dtype="float32")``, then ``fraction(LIB)`` (float32), ``fraction(LIB, "bfloat16")``
    and ``fraction(LIB, value="page_faults")``.

    Args:
        frame: a table with a ``run`` column.
        value: the column read by default.
        keys: the columns given positionally, in order.
        fixed: column → the value it holds unless a call says otherwise.

    Returns:
        ``read(*wanted, value=value, **where) -> pandas.Series`` indexed by ``run``.

    Raises:
        KeyError: for a column (``value``, a key, a fixed one) the table does not have;
            ``read`` raises TypeError for more values than ``keys``.
    """
    missing = [c for c in ("run", value, *keys, *fixed) if c not in frame.columns]
    if missing:
        raise KeyError(f"frame has no column {missing[0]!r}; it has {list(frame.columns)}")

    def read(*wanted, value: str = value, **where):
        if len(wanted) > len(keys):
            raise TypeError(f"read takes at most {len(keys)} values ({', '.join(keys)}), "
                            f"got {len(wanted)}")
        return per_run(frame, value, **{**fixed, **dict(zip(keys, wanted)), **where})

    return read


def run_times(runs: Mapping[str, list[dict]]):
    """When each stored run started and ended (:func:`run_time`), by suite and run number.

    Args:
        runs: suite → its records as :func:`stored_benchmark_runs` returns them; run N
            is ``records[N - 1]`` (as in :func:`benchmark_rows`).

    Returns:
        ``(start, end)``: two ``pandas.Series`` of UTC timestamps indexed by
        (``suite``, ``run``), e.g. ``end["rope", 1] < start["attention", 1]``.
    """
    import pandas as pd

    index = pd.MultiIndex.from_tuples(
        [(suite, i + 1) for suite, records in runs.items() for i in range(len(records))],
        names=["suite", "run"])
    records = [record for records in runs.values() for record in records]
    return (pd.Series([run_time(r) for r in records], index=index, name="start"),
            pd.Series([run_time(r, end=True) for r in records], index=index, name="end"))


def benchmark_provenance(runs: Mapping[str, list[dict]]):
    """:func:`run_provenance` of every stored run, one row each, by suite and run.

    Args:
        runs: suite → its labelled records (:func:`stored_benchmark_runs`).

    Returns:
        ``pandas.DataFrame`` indexed by (``suite``, ``run``: the number in the label),
        with the columns ``started (UTC)``, ``threads``, ``load average`` and
        ``library at``.

    Raises:
        ValueError: as :func:`run_provenance`.
    """
    import pandas as pd

    return pd.DataFrame(
        [{"suite": suite, **run_provenance(r)} for suite, rs in runs.items() for r in rs]
    ).set_index(["suite", "run"])


def _cpu_model() -> str | None:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    import platform

    return platform.processor() or None


_ANGLE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def rope_angle_errors(x: Tensor, positions: Tensor,
                      dtypes: tuple[str, ...] = ("float32", "bfloat16", "float16")) -> dict[str, Tensor]:
    """How far RoPE lands from its float64 self when its angles are computed in a lower precision.

    Each row of ``x`` is rotated by :func:`~posenc_lib.encodings.rope.apply_rope`
    (rotate-half pairs, base 10 000) at its position, with the angles ``p θ_i`` formed in
    each dtype, and compared with the rotation by float64 angles.

    Args:
        x: float64 ``[n, d]``, one row per position.
        positions: integer ``[n]``.
        dtypes: names of the angle dtypes: ``"float32"``, ``"bfloat16"``, ``"float16"``.

    Returns:
        dtype name → float64 ``[n]``: the largest absolute difference in each row; NaN
        for float16 at the positions it cannot hold (|p| > 65 504, where its angles
        overflow and :func:`~posenc_lib.encodings.rope.apply_rope` refuses them).

    Raises:
        ValueError: for ``x`` that is not float64 ``[n, d]`` or an unknown dtype name.
    """
    from posenc_lib.encodings.rope import apply_rope

    if x.dtype != torch.float64 or x.dim() != 2:
        raise ValueError(f"x must be float64 [n, d], got x of {x.dtype} {tuple(x.shape)}")
    unknown = [name for name in dtypes if name not in _ANGLE_DTYPES]
    if unknown:
        raise ValueError(f"dtypes must be among {list(_ANGLE_DTYPES)}, got dtypes={unknown}")
    from posenc_lib.encodings.rope import FLOAT16_MAX_POSITION

    def rotated(dtype: torch.dtype) -> Tensor:
        if dtype != torch.float16:
            return apply_rope(x, positions, angle_dtype=dtype)
        held = positions.abs() <= FLOAT16_MAX_POSITION  # rows past it: NaN
        out = torch.full_like(x, math.nan)
        out[held] = apply_rope(x[held], positions[held], angle_dtype=dtype)
        return out

    reference = apply_rope(x, positions, angle_dtype=torch.float64)
    return {name: (rotated(_ANGLE_DTYPES[name]) - reference).abs().amax(-1)
            for name in dtypes}


def rope_error_in_eps(rotated: Tensor, reference: Tensor, dtype: torch.dtype) -> float:
    """The largest error of a RoPE result in units of ``dtype``'s rounding of its pair.

    Each element's error ``|rotated − reference|`` is divided by ``eps(dtype)`` times the
    norm of the element's rotate-half pair (dimensions i and i + d/2 of ``reference``):
    the error of rounding that rotated pair once to ``dtype`` is about 1 on this scale.

    Args:
        rotated: ``[..., d]``, any float dtype (compared in float64).
        reference: float64 ``[..., d]`` of the same shape: the exact rotation.
        dtype: a floating dtype whose ``eps`` is the unit, e.g. ``torch.bfloat16``.

    Returns:
        The largest ratio (a float).

    Raises:
        ValueError: for shapes that differ or an odd last dimension.
    """
    if rotated.shape != reference.shape or reference.shape[-1] % 2:
        raise ValueError(f"rotated and reference must share a shape with an even last dimension, "
                         f"got {tuple(rotated.shape)} and {tuple(reference.shape)}")
    pair_norm = reference.unflatten(-1, (2, -1)).norm(dim=-2)  # [..., d/2]
    pair_norm = torch.cat([pair_norm, pair_norm], -1)
    return ((rotated.double() - reference).abs() / (torch.finfo(dtype).eps * pair_norm)).max().item()


def spread_table(rows, value: str, index: str, columns: str):
    """``"median (lowest–highest)"`` over runs of one column of a :func:`benchmark_rows`
    table, one row per ``index`` value and one column per ``columns`` value (e.g. variant ×
    dtype, or scheme × mode), both in the order they appear
    (:func:`posenc_book.tables.mean_spread_table`, the one home of these tables).

    Args:
        rows: a table with a ``run`` column and one row per run and (index, columns) pair.
        value: the column to summarise, e.g. ``"cpu_fraction"`` or ``"vs_nope_cpu"``.
        index, columns: the columns that name the rows and the columns of the result.

    Returns:
        ``pandas.DataFrame`` of strings; ``""`` where a pair was not measured.

    Raises:
        KeyError: for a column name the table does not have (named in the message).
    """
    from posenc_book.tables import mean_spread_table

    missing = [name for name in (value, index, columns) if name not in rows.columns]
    if missing:
        raise KeyError(f"rows has no column {missing[0]!r}; it has {list(rows.columns)}")
    table = mean_spread_table(rows, index, columns, value, spread="range", center="median",
                              order=list(dict.fromkeys(rows[index])), missing="")
    return table[list(dict.fromkeys(rows[columns]))]  # the columns in order of appearance


def scores_computed(length: int, block: int | None = None) -> float:
    """The share of the ``length × length`` attention scores a kernel computes when it
    is handed a float mask: all of them in one call (``block=None``), or, with queries
    cut into blocks of ``block`` (:data:`~posenc_lib.model.CAUSAL_BLOCK`), each block of
    queries ``[a, b)`` against keys ``[0, b)``.

    Example: ``scores_computed(2048, 512)`` is 10/16 (four blocks).

    Raises:
        ValueError: for a length or block below 1.
    """
    if length < 1 or (block is not None and block < 1):
        raise ValueError(f"length and block must be >= 1, got length={length}, block={block}")
    if block is None:
        return 1.0
    starts = range(0, length, block)
    return sum(min(length, a + block) * (min(length, a + block) - a) for a in starts) / length**2


FUSED_CPU_ATTENTION = "_scaled_dot_product_flash_attention_for_cpu"
"""The ATen operation of PyTorch's fused CPU attention kernel (FlashAttention-style)."""


def sdpa_path(call: Callable[[], object]) -> str:
    """Which attention kernel a call ends in, seen by :func:`memory_traffic` (no clock).

    Returns:
        ``"fused kernel × N"`` (N calls of :data:`FUSED_CPU_ATTENTION`), or
        ``"math path: bmm, _safe_softmax"`` (the operations of SDPA's fallback that ran),
        or ``"neither"`` where no attention ran.

    Raises:
        TypeError: for a ``call`` that is not callable.
    """
    if not callable(call):
        raise TypeError(f"call must be callable, got {type(call).__name__}")
    names = memory_traffic(call).operations
    if names.get(FUSED_CPU_ATTENTION, 0):
        return f"fused kernel × {names[FUSED_CPU_ATTENTION]}"
    math_ops = sorted(n for n in names if n in ("bmm", "_safe_softmax"))
    return "math path: " + ", ".join(math_ops) if math_ops else "neither"


def alibi_folding_errors(length: int, head_dim: int = 24, heads: int = 4,
                         seeds: tuple[int, int, int] = (0, 1, 2)) -> tuple[dict, float]:
    """How far causal ALiBi lands from a float64 reference, held as a float mask and
    folded into the keys (:func:`alibi_attention_folded_keys`), in float32 and bfloat16.

    q, k and v are ``[1, heads, length, head_dim]`` standard normal, each from its own
    generator seeded with ``seeds``. Every result is computed with SDPA's math backend,
    selected explicitly: every CPU build of PyTorch has it, while the fused kernels'
    bfloat16 path is missing on some CPUs (an Intel CPU with AMX under
    ``ATEN_CPU_CAPABILITY=default`` raises), so the errors are the same on every machine.

    Args:
        length: L, queries and keys (self-attention), ≥ 1.
        head_dim, heads: the heads' width and number, ≥ 1.
        seeds: the seeds of q, k and v.

    Returns:
        ``({(form, dtype): largest absolute error}, size)``: form ``"mask"`` or ``"keys"``,
        dtype ``"float32"`` or ``"bfloat16"``; ``size`` is the mean absolute value of
        the reference output (float64).

    Raises:
        ValueError: for a length, head_dim or heads below 1.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from posenc_lib.encodings.alibi import alibi_bias
    from posenc_lib.model.attention import attend

    if min(length, head_dim, heads) < 1:
        raise ValueError(f"length, head_dim and heads must be >= 1, got length={length}, "
                         f"head_dim={head_dim}, heads={heads}")
    q, k, v = (torch.randn(1, heads, length, head_dim,
                           generator=torch.Generator().manual_seed(s)) for s in seeds)
    reference = attend(q.double(), k.double(), v.double(),
                       alibi_bias(heads, length, length, dtype=torch.float64))
    errors = {}
    with sdpa_kernel(SDPBackend.MATH):
        for dtype in (torch.float32, torch.bfloat16):
            qd, kd, vd = q.to(dtype), k.to(dtype), v.to(dtype)
            name = str(dtype).removeprefix("torch.")
            forms = {"mask": attend(qd, kd, vd, alibi_bias(heads, length, length)),
                     "keys": alibi_attention_folded_keys(qd, kd, vd)}
            for form, out in forms.items():
                errors[form, name] = (out.double() - reference).abs().max().item()
    return errors, reference.abs().mean().item()
