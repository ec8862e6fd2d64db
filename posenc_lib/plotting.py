"""One figure style for the whole book. Draws results; never trains.

The same scheme has the same colour, marker and display name in every chapter.
Figures are sized for the book's text column: at the default size and dpi
(:func:`use_book_style`) one panel is 704 px wide, about the width of the column at a
1280 px window.

Conventions every figure follows (CONTRIBUTING.md, "Outputs a reader can read"):

* axes labelled with units, where the quantity has one (perplexity has none);
* tick labels in the numbers the prose uses: 128, 256, … on a log axis, not 2⁷, 2⁸;
* a colour bar on every heat map, labelled with what the colour means.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import matplotlib.transforms as mtransforms
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

SCHEME_STYLE: dict[str, dict[str, str]] = {
    "none": {"color": "#7f7f7f", "marker": "x", "label": "NoPE"},
    "sinusoidal": {"color": "#1f77b4", "marker": "o", "label": "Sinusoidal"},
    "learned": {"color": "#ff7f0e", "marker": "s", "label": "Learned"},
    "rope": {"color": "#2ca02c", "marker": "^", "label": "RoPE"},
    "alibi": {"color": "#d62728", "marker": "v", "label": "ALiBi"},
    "t5": {"color": "#9467bd", "marker": "D", "label": "T5 bias"},
}
"""Colour, marker and display name of each positional scheme."""

FIGURE_WIDTH_IN = 6.4
"""Width of a one-panel figure in inches (at 110 dpi: 704 px, the book's column)."""


def use_book_style() -> None:
    """Set the book's matplotlib defaults (size, grid, fonts); once per notebook."""
    plt.rcParams.update(
        {
            "figure.figsize": (FIGURE_WIDTH_IN, 4.0),
            "figure.dpi": 110,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "legend.frameon": False,
            "font.size": 10,
        }
    )


def scheme_label(scheme: str) -> str:
    """Display name of a scheme (``"rope"`` → ``"RoPE"``); unknown names unchanged."""
    return SCHEME_STYLE.get(scheme, {}).get("label", scheme)


def _plain_number(value: float, _position: int | None = None) -> str:
    """``128.0`` → ``"128"``, ``2.5`` → ``"2.5"``: a tick label as prose writes it."""
    return f"{value:g}"


def plain_log_ticks(
    ax: Axes, axis: str = "y", values: Sequence[float] | None = None
) -> None:
    """Label a log axis with plain numbers (5, 10, 20 or 128, 256, …) instead of powers.

    Matplotlib labels a log axis with 10¹, 2×10¹ or 2⁷, 2⁸; the book's prose writes 20
    and 128. Call this after ``ax.set_xscale("log")`` or ``ax.set_yscale("log")``
    (setting the scale again resets the ticks).

    Args:
        ax: the axes.
        axis: ``"x"`` or ``"y"``.
        values: where to put the ticks (e.g. the evaluation lengths). By default 1, 2
            and 5 times each power of ten, which gives readable ticks over any range.

    Raises:
        ValueError: if ``axis`` is not ``"x"`` or ``"y"``, or a value is not positive.
    """
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got axis={axis!r}")
    target = ax.xaxis if axis == "x" else ax.yaxis
    if values is not None:
        if any(v <= 0 for v in values):
            raise ValueError(
                f"values must be positive on a log axis, got values={list(values)}"
            )
        target.set_major_locator(FixedLocator(sorted(values)))
    else:
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(_plain_number))
    target.set_minor_locator(NullLocator())


def plot_perplexity_vs_length(
    results: Mapping[str, Mapping[int, float]],
    *,
    train_length: int,
    spread: Mapping[str, Mapping[int, float]] | None = None,
    ax: Axes | None = None,
    ylabel: str = "perplexity",
    yscale: str = "linear",
    title: str | None = None,
    legend: bool = True,
) -> Figure:
    """Perplexity against evaluation length, one line per scheme, L_train marked.

    The x axis is logarithmic (base 2) with a tick at every evaluation length, labelled
    as a plain number of bytes (128, 256, …). The L_train marker is a dashed vertical
    line whose label sits above the plotting area, where no legend can cover it.

    Args:
        results: scheme name (``"rope"``, …) → {evaluation length L (bytes) →
            perplexity}.
        train_length: L_train in bytes, drawn as a dashed vertical line.
        spread: optional scheme → {L → standard deviation}, drawn as a ± one std band.
        ax: axes to draw on (a new one-panel figure otherwise).
        ylabel: label of the y axis. Perplexity has no unit, so the default has none.
        yscale: ``"linear"`` or ``"log"``; a log axis is labelled with plain numbers
            (:func:`plain_log_ticks`). Use this argument, not ``ax.set_yscale``
            afterwards (which would bring back labels such as 2×10¹).
        title: a title in words a reader understands (e.g. "Sliding windows"), or None.
        legend: draw the legend (off for all but one panel of a multi-panel figure).

    Returns:
        The figure (returned, not shown, so that a notebook cell displays it once).

    Raises:
        ValueError: if ``results`` is empty, ``train_length`` is not positive, a length
            is not positive, or ``yscale`` is not ``"linear"`` or ``"log"``.
    """
    if not results:
        raise ValueError("results must hold at least one scheme's curve, got none")
    if train_length <= 0:
        raise ValueError(
            f"train_length must be a positive number of bytes, got {train_length}"
        )
    if yscale not in ("linear", "log"):
        raise ValueError(f"yscale must be 'linear' or 'log', got yscale={yscale!r}")
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    all_lengths: set[int] = set()
    for scheme, curve in results.items():
        lengths: Sequence[int] = sorted(curve)
        if any(L <= 0 for L in lengths):
            raise ValueError(
                f"evaluation lengths must be positive, got {lengths} for {scheme!r}"
            )
        all_lengths.update(lengths)
        values = [curve[L] for L in lengths]
        style = SCHEME_STYLE.get(scheme, {})
        ax.plot(lengths, values, marker=style.get("marker", "o"),
                color=style.get("color"), label=scheme_label(scheme))
        if spread is not None and scheme in spread:
            sd = [spread[scheme][L] for L in lengths]
            low = [v - s for v, s in zip(values, sd)]
            high = [v + s for v, s in zip(values, sd)]
            ax.fill_between(lengths, low, high, color=style.get("color"), alpha=0.2,
                            linewidth=0)
    ax.axvline(train_length, color="black", linestyle="--", linewidth=1)
    # x in data coordinates, y in axes coordinates: just above the plotting area.
    above = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
    ax.text(train_length, 1.01, r"$L_\mathrm{train}$", transform=above, ha="center",
            va="bottom")
    ax.set_xscale("log", base=2)
    plain_log_ticks(ax, "x", sorted(all_lengths | {train_length}))
    if yscale == "log":
        ax.set_yscale("log")
        plain_log_ticks(ax, "y")
    ax.set_xlabel("evaluation length L (bytes)")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, pad=16)  # room for the L_train label under it
    if legend:
        ax.legend()
    fig.tight_layout()
    return fig


def plot_attention_map(
    probabilities,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    colorbar_label: str = "attention probability",
    vmax: float | None = None,
) -> Figure:
    """One head's attention probabilities as a heat map: labelled axes, a colour bar.

    Args:
        probabilities: ``[queries, keys]`` float tensor (any device) or array, e.g. one
            head of :func:`posenc_lib.attention_probabilities`; row t is query t.
        ax: axes to draw on (a new figure otherwise).
        title: a title in words (e.g. "ALiBi, head 1"), or None.
        colorbar_label: what the colour means.
        vmax: top of the colour scale (default: the largest value), so that several
            maps can share one scale.

    Returns:
        The figure.

    Raises:
        ValueError: if ``probabilities`` is not two-dimensional.
    """
    if hasattr(probabilities, "detach"):  # a torch tensor, possibly on a GPU
        probabilities = probabilities.detach().float().cpu().numpy()
    matrix = np.asarray(probabilities, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(
            f"probabilities must be [queries, keys] (2-D), got shape {matrix.shape}"
        )
    if ax is None:
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN * 0.75, FIGURE_WIDTH_IN * 0.6))
    else:
        fig = ax.figure
    image = ax.imshow(matrix, cmap="viridis", vmin=0.0,
                      vmax=vmax, interpolation="nearest", aspect="auto")
    ax.grid(False)
    ax.set_xlabel("key position s")
    ax.set_ylabel("query position t")
    if title:
        ax.set_title(title)
    fig.colorbar(image, ax=ax, label=colorbar_label)
    return fig
