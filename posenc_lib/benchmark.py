"""Time and peak memory of one call, on the CPU or a CUDA GPU.

Peak memory is what the call adds on top of what was held before it:

* CUDA: :func:`torch.cuda.max_memory_allocated` after resetting the peak (bytes held by
  PyTorch's caching allocator in tensors).
* CPU (Linux): the process's peak resident set size (``VmHWM`` in ``/proc/self/status``),
  reset through ``/proc/self/clear_refs`` before the call, minus the resident size before it.
  Large tensors are allocated with ``mmap`` and returned to the system when freed, so this
  follows PyTorch's allocations to within a few MiB.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_bytes(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024  # the file reports kB
    raise RuntimeError(f"{field} not found in {_STATUS}")


def peak_memory_bytes(fn: Callable[[], object], device: torch.device | str = "cpu") -> int:
    """Run ``fn()`` once and return the peak memory it added, in bytes (≥ 0).

    Args:
        fn: the call to measure; its result is dropped before returning.
        device: where ``fn`` allocates: ``"cpu"`` or a CUDA device.

    Raises:
        RuntimeError: on a CPU without Linux's ``/proc`` peak-RSS counters (e.g. macOS),
            or on a device type other than CPU and CUDA.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return max(0, torch.cuda.max_memory_allocated(device) - before)
    if device.type != "cpu":
        raise RuntimeError(f"peak memory is measured on 'cpu' or 'cuda', got device {device}")
    if not (_STATUS.exists() and _CLEAR_REFS.exists()):
        raise RuntimeError("CPU peak memory needs Linux's /proc/self/status and /proc/self/clear_refs")
    _CLEAR_REFS.write_text("5")  # "5" resets the peak RSS (VmHWM) to the current RSS
    before = _status_bytes("VmRSS")
    fn()
    return max(0, _status_bytes("VmHWM") - before)


@dataclass(frozen=True)
class Measurement:
    """One call's cost: medians over the repeats of its wall time and of the CPU time the
    process spent in it (all threads; on a busy machine it varies less than the wall time),
    both in seconds, and the peak memory it added, in bytes."""

    seconds: float
    cpu_seconds: float
    peak_bytes: int


def measure(fn: Callable[[], object], device: torch.device | str = "cpu", *, repeats: int = 3, warmup: int = 1) -> Measurement:
    """Time ``fn`` (medians of ``repeats`` runs after ``warmup`` runs) and measure its peak memory.

    Wall time depends on the machine and on whatever else runs on it; CPU time less so.

    Raises:
        ValueError: if ``repeats`` < 1 or ``warmup`` < 0.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    device = torch.device(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *_: None)
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(repeats):
        sync(device)
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        sync(device)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return Measurement(statistics.median(wall), statistics.median(cpu), peak_memory_bytes(fn, device))
