"""Execute chapters top to bottom in a fresh kernel and store their outputs, the one way to do it.

    python tools/execute_notebook.py notebooks/05_rope.ipynb [more notebooks …]

For each notebook this
0. turns ``# NBVAL_IGNORE_OUTPUT`` / ``# NBVAL_SKIP`` / ``# NBVAL_RAISES_EXCEPTION`` comment
   lines into the cell tags nbval also reads (readers see comments, not tags);
1. runs every cell in a fresh kernel of *this* interpreter (``sys.executable``, as nbval's
   ``--nbval-current-env`` does), so the outputs come from the environment that tests them;
2. drops stderr streams from cells tagged ``nbval-ignore-output`` — the progress bars of
   training cells, which a reader does not need and which change on every run;
3. records where and when it ran in the notebook's metadata (``posenc_execution``: date, wall
   seconds, platform, CPU count, torch version, device, commit), from which the book's execution
   status page is generated;
4. writes the notebook in place only if every cell ran without error.

A cell that raises stops the run and leaves the file untouched (the error is printed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
IGNORE_TAG = "nbval-ignore-output"
MARKER_TAGS = {
    "# NBVAL_IGNORE_OUTPUT": "nbval-ignore-output",
    "# NBVAL_SKIP": "nbval-skip",
    "# NBVAL_RAISES_EXCEPTION": "raises-exception",
}
"""nbval's comment markers and the cell tags that mean the same."""
TIMEOUT_S = 5400  # per cell: a limit for a hung kernel, not a time budget (CI's 90 minutes)


class CurrentEnvKernelSpecs(KernelSpecManager):
    """Every kernel name resolves to an ipykernel of the running interpreter."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return KernelSpec(
            argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            display_name="Python 3 (ipykernel)",
            language="python",
        )


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _commit() -> str | None:
    return _git("rev-parse", "--short", "HEAD")


def _dirty() -> bool | None:
    """Whether tracked files differ from the commit (the code that ran is then not the commit's)."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def _torch_facts() -> dict:
    code = ("import json, torch; from posenc_lib.training.device import pick_device, device_name; "
            "print(json.dumps({'torch': torch.__version__, 'torch_threads': torch.get_num_threads(), "
            "'device': device_name(pick_device())}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def markers_to_tags(nb: nbformat.NotebookNode) -> int:
    """Replace nbval comment markers by cell tags; return how many were replaced."""
    replaced = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines = cell.source.splitlines()
        kept = [line for line in lines if line.strip() not in MARKER_TAGS]
        if len(kept) == len(lines):
            continue
        tags = cell.metadata.setdefault("tags", [])
        for line in lines:
            tag = MARKER_TAGS.get(line.strip())
            if tag and tag not in tags:
                tags.append(tag)
        replaced += len(lines) - len(kept)
        cell.source = "\n".join(kept)
    return replaced


def strip_progress(nb: nbformat.NotebookNode) -> int:
    """Remove stderr streams from cells tagged ``nbval-ignore-output``; return how many."""
    removed = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or IGNORE_TAG not in cell.metadata.get("tags", []):
            continue
        kept = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
        removed += len(cell.outputs) - len(kept)
        cell.outputs = kept
    return removed


def run_cells(path: Path) -> tuple[nbformat.NotebookNode, float, int]:
    """Run every cell of the notebook at ``path`` in a fresh kernel of this interpreter, in
    the notebook's folder, after turning nbval comment markers into cell tags (so that a cell
    marked to raise may raise); return the executed notebook (not written), the wall seconds
    and how many markers were turned into tags. A cell that raises otherwise raises
    ``nbclient.exceptions.CellExecutionError``."""
    nb = nbformat.read(path, as_version=4)
    converted = markers_to_tags(nb)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    km = KernelManager(kernel_name="python3", kernel_spec_manager=CurrentEnvKernelSpecs())
    client = NotebookClient(nb, km=km, timeout=TIMEOUT_S, resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - start, converted


def machine_facts() -> dict:
    """Where and when a run happens: date, platform, CPU count, Python, torch and its thread
    count, device, commit and whether tracked files had uncommitted changes, scale."""
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        **_torch_facts(),
        "commit": _commit(),
        "git_dirty": _dirty(),
        "scale": os.environ.get("POSENC_SCALE", "ci"),
    }


def execute(path: Path) -> None:
    nb, wall, converted = run_cells(path)
    removed = strip_progress(nb)
    facts = machine_facts()
    nb.metadata["posenc_execution"] = {"date_utc": facts.pop("date_utc"), "wall_s": round(wall, 1), **facts}
    nbformat.write(nb, path)
    print(f"{path}: executed in {wall:.0f} s, {removed} progress stream(s) dropped, "
          f"{converted} nbval comment(s) turned into cell tags")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    # The stored outputs are CPU results (the test command sets the same), unless told otherwise.
    os.environ.setdefault("POSENC_DEVICE", "cpu")
    for path in args.notebooks:
        execute(path.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
