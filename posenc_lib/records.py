"""Writing result and model files safely: a reader sees the old file or the whole new one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


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
    with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False) as tmp:
        write(tmp)
        tmp.flush()
        os.fsync(tmp.fileno())
    os.replace(tmp.name, path)
