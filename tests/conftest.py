"""Shared fixtures: every test starts from a fixed seed; parallel workers share the cores."""

import os

import pytest
import torch


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, give each worker its share of the cores, not all of them.

    Every worker (and every notebook kernel it starts: nbval's kernels inherit this process's
    environment) would otherwise run as many threads as there are cores, and two workers on a
    2-core machine would fight over them. The stored outputs do not depend on the thread count
    (they print no rounding noise), so this changes speed only.
    """
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None:
        return
    threads = max(1, (os.cpu_count() or 1) // int(workers))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, str(threads))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
