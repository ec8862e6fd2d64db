"""pytest settings for the whole repository: the unit tests in tests/ and nbval over notebooks/.

Here rather than in tests/conftest.py, which pytest does not load when it collects only the
notebooks (as in ``pytest notebooks/``).
"""

import os
import re
from pathlib import Path

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


OUTPUT_TIMEOUT_S = 120
"""How long nbval waits for each of a cell's output messages after the cell has finished."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Let nbval wait up to ``OUTPUT_TIMEOUT_S`` for a finished cell's outputs, not 5 s.

    nbval reads a cell's output messages only after the kernel has replied that the cell is
    done, and gives up when none arrives within its fixed ``output_timeout`` of 5 s. On a
    machine busy with other work (2 cores, a load of 6) that failed chapter 09's 18-model
    sweep cell ("Timeout of 5 seconds exceeded waiting for output") although the cell had
    run. A kernel that hangs is still caught by ``--nbval-cell-timeout``.
    """
    for item in items:
        if hasattr(item, "output_timeout"):  # nbval's IPyNbCell
            item.output_timeout = OUTPUT_TIMEOUT_S
    longest_files_first(items)


TIMES = Path(__file__).parent / "book" / "execution_status.md"
"""The last measured time of each notebook and test file (written by ``tools/ci_times.py``)."""


def measured_times() -> dict[str, float]:
    """Seconds per file (``notebooks/08_nope.ipynb``, ``tests/test_site.py``) from ``TIMES``."""
    times = {}
    text = TIMES.read_text() if TIMES.exists() else ""
    for name, seconds in re.findall(r"^\| \{doc\}`(\S+) <[^|]*\|[^|]*\| ([\d.]+) \|", text, re.M):
        times[f"notebooks/{name}.ipynb"] = float(seconds)
    for name, seconds in re.findall(r"^\| `(tests/\S+\.py)` \|[^|]*\| ([\d.]+) \|", text, re.M):
        times[name] = float(seconds)
    return times


def longest_files_first(items: list[pytest.Item]) -> None:
    """Orders the files (each notebook, each test file) longest first, by their last measured time.

    pytest-xdist (``--dist loadfile``) hands whole files to its workers in this order, as each
    worker frees up; the longest first leave no long file starting last on one worker while the
    other idles (the order cut CI's wall time; the numbers are in the closing note of the
    change). Files without a measured time keep their order, after the measured ones. Within a
    file the order is unchanged (a notebook's cells run top to bottom).
    """
    times = measured_times()
    rank = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        rank.setdefault(path, (-times.get(path, -1.0), len(rank)))
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])
