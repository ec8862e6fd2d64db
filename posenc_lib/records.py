"""Result and model files: written safely (a reader sees the old file or the whole new one),
with one layout version, one set of dtype names and one provenance record for every tool
that writes results (the sweep, the pretrained-model runs, the benchmarks), and one rule for
resuming a set of planned runs from their result files (:class:`ResultFiles`)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Generic, Protocol, TypeVar

import torch

RESULT_FORMAT = 1
"""Version of the result-file layout (bumped when fields change meaning)."""

RUN_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16}
"""The dtypes a run (a long-context pass, a benchmark) may be asked for, by name."""

DTYPE_NAMES: dict[str, torch.dtype] = {**RUN_DTYPES, "float16": torch.float16,
                                       "float64": torch.float64}
"""Every floating dtype a result or a size may name."""


def write_atomic(path: Path | str, write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it onto ``path``.

    The rename (:func:`os.replace`) is atomic on one file system, so an interrupted run leaves
    either nothing or a whole file — never half of one — and a parallel reader never sees a
    partial write.

    Args:
        path: the destination; its folder must exist.
        write: writes the content to the binary file object it is given.
    """
    path = Path(path)
    with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                     delete=False) as tmp:
        write(tmp)
        tmp.flush()
        os.fsync(tmp.fileno())
    os.replace(tmp.name, path)


def write_json_atomic(path: Path | str, obj: dict) -> None:
    """Write ``obj`` as JSON (indent 1, no NaN): ``path`` holds the old file or the whole new one.

    Raises:
        ValueError: for a NaN or infinite number in ``obj`` (JSON has none).
    """
    text = json.dumps(obj, indent=1, allow_nan=False)
    write_atomic(path, lambda file: file.write(text.encode()))


class PlannedRun(Protocol):
    """A run a results folder can hold: its file is ``<name>.json``, its ``to_dict()`` is stored
    under the result's ``"run"``."""

    @property
    def name(self) -> str: ...

    def to_dict(self) -> dict: ...


_Run = TypeVar("_Run", bound=PlannedRun)


class ResultFiles(Generic[_Run]):
    """The results of planned runs in a folder, one file ``<run name>.json`` a run: which are
    stored already and which are left to run — the rule that lets a sweep resume.

    A run whose file exists is read back and not run again, unless ``overwrite``; a file
    that records another configuration (its ``"run"`` is not the run's ``to_dict()``) is an
    error, never overwritten silently. :meth:`store` writes a new result atomically.

    Args:
        runs: the planned runs, in the order :meth:`in_plan_order` returns them.
        out: the folder, created if missing.
        overwrite: treat every run as left to run (its file is replaced when it finishes).

    Raises:
        FileExistsError: if a run's file holds a different configuration and ``overwrite``
            is False.
    """

    def __init__(self, runs: Iterable[_Run], out: Path | str, *, overwrite: bool = False) -> None:
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.runs = list(runs)
        self.results: dict[str, dict] = {}  # by run name: read back, or stored by this run
        self.todo: list[_Run] = []  # the runs left to run (all of them with overwrite), in plan order
        for run in self.runs:
            path = self.out / f"{run.name}.json"
            if path.exists() and not overwrite:
                stored = json.loads(path.read_text())
                if stored.get("run") != run.to_dict():
                    raise FileExistsError(f"{path} holds a run with a different configuration; "
                                          "use a new --out or --overwrite")
                self.results[run.name] = stored
            else:
                self.todo.append(run)

    @property
    def done(self) -> str:
        """``"K of N already done"``, for a progress bar's title."""
        return f"{len(self.runs) - len(self.todo)} of {len(self.runs)} already done"

    def store(self, run: _Run, result: dict) -> None:
        """Write ``result`` to the run's file (:func:`write_json_atomic`) and keep it."""
        write_json_atomic(self.out / f"{run.name}.json", result)
        self.results[run.name] = result

    def in_plan_order(self) -> list[dict]:
        """One result per planned run, in plan order (every run must have one by now)."""
        return [self.results[run.name] for run in self.runs]


def git_commit() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout that holds posenc_lib, or (None, None) outside git."""
    root = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit, bool(status.strip())


def provenance(device: torch.device | str) -> dict:
    """Where and with what a result was produced: commit, versions, device, date (UTC).

    Args:
        device: the device the result was computed on.

    Returns:
        ``git_commit``, ``git_dirty``, ``posenc_lib_version``, ``torch_version``,
        ``python_version``, ``platform``, ``device`` (its name), ``device_type``,
        ``torch_threads`` and ``date_utc`` (ISO 8601, seconds).
    """
    import posenc_lib  # the package's version; late: this module is imported while it loads
    from posenc_lib.training.device import device_name

    commit, dirty = git_commit()
    return {
        "git_commit": commit,
        "git_dirty": dirty,
        "posenc_lib_version": posenc_lib.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "device": device_name(device),
        "device_type": torch.device(device).type,
        "torch_threads": torch.get_num_threads(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def peak_memory(device: torch.device) -> dict:
    """The peak memory so far: ``peak_memory_bytes`` and ``peak_memory_kind``.

    On CUDA, ``torch.cuda.max_memory_allocated`` (reset it at the start of a run); elsewhere
    the whole process's peak resident set (``ru_maxrss``: KiB on Linux, bytes on macOS).
    """
    if device.type == "cuda":
        return {"peak_memory_bytes": torch.cuda.max_memory_allocated(device),
                "peak_memory_kind": "cuda max_memory_allocated during this run"}
    scale = 1 if sys.platform == "darwin" else 1024
    return {"peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale,
            "peak_memory_kind": "process peak RSS so far"}


def package_versions(names: Iterable[str]) -> str:
    """Import each package and name its installed version: ``"transformers 4.57.1, …"``.

    Args:
        names: distribution names that are also module names (``"transformers"``).

    Returns:
        ``"name version"`` for each, joined by ", ", in the order given.

    Raises:
        ValueError: if ``names`` is empty.
        ImportError: for a package that is missing or does not import.
    """
    import importlib
    from importlib.metadata import version

    names = list(names)
    if not names:
        raise ValueError("names must name at least one package, got none")
    return ", ".join(f"{importlib.import_module(n).__name__} {version(n)}" for n in names)


def require_version(version: str, repository: str) -> None:
    """Stop a chapter whose book edition needs another posenc_lib than the one installed.

    The second line of every chapter's install cell: a reader who installed posenc_lib
    earlier (another edition of the book, or a clone at another commit) learns which version
    the chapter was written for and the command that installs it, instead of meeting a
    missing name or a changed number many cells later.

    Args:
        version: the book's tag, ``"v"`` + a posenc_lib version (``"v0.1.0"``).
        repository: the address the install cell installs from (for the message).

    Raises:
        ValueError: if ``version`` does not start with ``"v"``.
        ImportError: if the installed posenc_lib is another version; the message names both
            and the ``%pip install --force-reinstall`` command for the book's.
    """
    from posenc_lib import __version__

    if not version.startswith("v"):
        raise ValueError(f"version must be a tag such as 'v0.1.0', got {version!r}")
    if "v" + __version__ != version:
        raise ImportError(f"posenc_lib {__version__} is installed; this book needs {version}: "
                          "%pip install --force-reinstall "
                          f'"posenc_lib @ git+{repository}@{version}"')
