"""benchmark: peak memory sees a known allocation; timing returns the median."""

import sys

import pytest
import torch

from posenc_lib.benchmark import measure, peak_memory_bytes

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CPU peak memory reads Linux's /proc")


@linux_only
def test_peak_memory_sees_a_64_mib_tensor() -> None:
    size = 64 * 2**20
    peak = peak_memory_bytes(lambda: torch.ones(size // 4))
    assert 0.9 * size <= peak <= 1.2 * size
    small = peak_memory_bytes(lambda: torch.ones(4))
    assert small < 0.1 * size


@linux_only
def test_measure() -> None:
    result = measure(lambda: torch.ones(1000, 1000).sum(), repeats=3)
    assert result.seconds > 0 and result.cpu_seconds > 0 and result.peak_bytes >= 0
    with pytest.raises(ValueError, match="repeats"):
        measure(lambda: None, repeats=0)


def test_unknown_device() -> None:
    with pytest.raises(RuntimeError, match="'cpu' or 'cuda'"):
        peak_memory_bytes(lambda: None, "meta")
