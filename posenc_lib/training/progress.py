"""Progress bars that redraw a fixed number of times, however slowly the work runs.

Why not tqdm's default: a bar redraws on a clock (``mininterval`` seconds), and in a
Jupyter kernel every redraw is one output message. nbval reads a cell's messages only
after the cell ends, and the kernel's ZeroMQ output socket drops messages beyond its
queue limit, the final "idle" message among them; nbval then fails the cell with
"Timeout of 5 seconds exceeded waiting for output". A cell that redraws once a second
passes when it runs in ten minutes and fails when a loaded machine makes it run in
seventy. These bars redraw every ``1 / MAX_REDRAWS`` of their total instead, so a bar
sends the same number of messages at any speed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from tqdm import tqdm

# Redraws per bar, not counting the first and last: one every 5 % of the work.
MAX_REDRAWS = 20


def progress_bar(iterable: Iterable | None = None, *, desc: str, total: int | None = None,
                 enabled: bool = True, leave: bool = True) -> tqdm:
    """A tqdm bar (to stderr) that flushes at most ``MAX_REDRAWS + 3`` times at any speed.

    Args:
        iterable: the items to loop over; or None for a bar advanced by hand with
            ``bar.update(n)`` (then ``total`` is required).
        desc: the label shown before the bar.
        total: the number of items (>= 0); defaults to ``len(iterable)``.
        enabled: False gives a bar that prints nothing (tqdm's ``disable``).
        leave: keep the finished bar on screen.

    Returns:
        A :class:`tqdm.tqdm`. Besides its redraws every ``ceil(total / MAX_REDRAWS)``
        items, it prints when it opens and twice when it closes (the last state and a
        newline), and once for each ``set_postfix`` called with ``refresh=True``.

    Raises:
        ValueError: if ``total`` is negative, or is None for an iterable without a length.
    """
    if total is None:
        if iterable is None or not hasattr(iterable, "__len__"):
            raise ValueError("progress_bar needs total= (the number of items) when the iterable "
                             f"has no length, got iterable of type {type(iterable).__name__}")
        total = len(iterable)  # type: ignore[arg-type]
    if total < 0:
        raise ValueError(f"total must be >= 0, got total={total}")
    # miniters fixes the redraws by count; mininterval=0 drops the clock; maxinterval=inf
    # stops tqdm's monitor thread from setting miniters to 1 when a bar is slow.
    return tqdm(iterable, desc=desc, total=total, disable=not enabled, leave=leave,
                miniters=max(1, math.ceil(total / MAX_REDRAWS)), mininterval=0,
                maxinterval=math.inf)
