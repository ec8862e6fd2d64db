"""Shared plumbing of the suites: devices, dtypes, rows → table, results → JSON."""

from __future__ import annotations

import dataclasses
import datetime
import gc
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pandas as pd
import torch

from posenc_lib.measure import Timing, compare, environment
from posenc_lib.records import RESULT_FORMAT
from posenc_lib.records import RUN_DTYPES as DTYPES  # noqa: F401  the suites' dtype choices
from posenc_lib.training.progress import progress_bar

_Case = TypeVar("_Case")


@dataclasses.dataclass(frozen=True)
class Rounds:
    """What the command line gives every suite's ``run``: where to time, how many timed
    (``repeats``) and untimed (``warmup``) rounds per variant, ``quick`` (fewer sizes, for a
    smoke test) and whether to draw progress bars."""

    device: torch.device
    repeats: int
    warmup: int
    quick: bool = False
    progress: bool = True

    def config(self) -> dict:
        """``repeats`` and ``warmup``, for the suite's configuration record."""
        return {"repeats": self.repeats, "warmup": self.warmup}

    def cases(self, cases: Iterable[_Case], desc: str) -> Iterator[_Case]:
        """The suite's cases one by one under a progress bar titled ``desc``; the garbage is
        collected after each (the loop drops its references to a case's tensors first)."""
        for case in progress_bar(cases, desc=desc, enabled=self.progress):
            yield case
            gc.collect()

    def compare(self, variants: Mapping[str, Callable[[], object]]) -> dict[str, Timing]:
        """:func:`posenc_lib.measure.compare` of ``variants`` on the device, these rounds."""
        return compare(variants, self.device, repeats=self.repeats, warmup=self.warmup)



def timing_columns(timing: Timing) -> dict:
    """Median and quartiles of a :class:`Timing`, in milliseconds."""
    return {
        "median_ms": timing.median * 1e3,
        "q1_ms": timing.low * 1e3,
        "q3_ms": timing.high * 1e3,
        "repeats": len(timing.samples),
        "cpu_median_ms": None if timing.cpu_median is None else timing.cpu_median * 1e3,
    }


def start_record(
    suite: str, device: torch.device, config: dict, argv: Sequence[str]
) -> dict:
    """The JSON record of one suite run, before its rows: what, where, when, how."""
    return {
        "format": RESULT_FORMAT,
        "suite": suite,
        "command": "python -m tools.benchmarks " + " ".join(argv),
        "config": config,
        "environment": environment(device),
        "rows": [],
    }


def finish_record(record: dict, rows: list[dict]) -> dict:
    record["rows"] = rows
    record["load_average_end"] = (
        list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    )
    return record


def save(record: dict, out: Path) -> Path:
    """Write ``record`` to a new file ``out/<suite>-<device type>-<UTC time>.json``.

    The name carries the time to the second; an existing file is never replaced (a
    second run in the same second gets a ``-2`` suffix).
    """
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    stem = f"{record['suite']}-{record['environment']['device_type']}-{stamp}"
    text = json.dumps(record, indent=1, allow_nan=False, default=str)
    for attempt in range(1, 100):
        path = out / (stem if attempt == 1 else f"{stem}-{attempt}")
        path = path.with_suffix(".json")
        try:
            with open(path, "x", encoding="utf-8") as file:  # "x": fail if it exists
                file.write(text + "\n")
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"could not find a free file name for {stem} in {out}")


def show(rows: list[dict], columns: Sequence[str], title: str) -> str:
    """A plain-text table of some columns of the rows, rounded for the terminal."""
    frame = pd.DataFrame(rows)[list(columns)]
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        text = frame.to_string(index=False, float_format=lambda v: f"{v:.3g}")
    return f"{title}\n{text}\n"
