"""One figure style for the whole book. Draws results; never trains.

The same scheme has the same colour, marker and display name in every chapter.
Figures are sized for the book's text column: at the default size and dpi
(:func:`use_book_style`) one panel is 704 px wide, about the width of the column at a
1280 px window. They are stored at twice that resolution ("retina" PNG: 1408 pixels
shown at 704 CSS px), so they stay sharp on high-density screens, and their text is
large enough to read on a 390 px phone, where the column is about 358 px wide and a
one-panel figure is shown at half its size: :data:`TICK_FONT_PT` at 110 dpi is
18.3 px, so tick labels are about 9 px there.

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

from posenc_book.schemes import SCHEME_STYLE, scheme_label

FIGURE_WIDTH_IN = 6.4
"""Width of a one-panel figure in inches (at 110 dpi: 704 px, the book's column)."""

MAX_FIGURE_WIDTH_IN = 6.5
"""The widest a chapter's figure may be drawn (715 CSS px): wider ones are shown smaller
than their size on a phone, and their text falls below :data:`MIN_PHONE_FONT_PX`."""

FIGURE_DPI = 110
"""CSS pixels per inch of a figure: its size on the page at 100 %."""

PIXEL_RATIO = 2
"""Stored pixels per CSS pixel (2: "retina"), for high-density screens and slides."""

TICK_FONT_PT = 12
"""Font size of every text of a figure (ticks, labels, legends, titles), in points."""

MIN_PHONE_FONT_PX = 9
"""The smallest tick label, in CSS px, that a figure may show at a 390 px viewport
(``tests/test_site.py`` checks it on every chapter figure)."""


def use_book_style() -> None:
    """Set the book's matplotlib defaults (size, grid, fonts); once per notebook.

    In a notebook it also makes IPython display figures as :func:`retina_png`:
    :data:`PIXEL_RATIO` times the pixels, with the CSS width in the output's metadata
    (MyST-NB writes it into the page's ``<img>``), so a figure is shown at its size in
    CSS px and sharp on a high-density screen. The figure's dpi stays
    :data:`FIGURE_DPI`, so its text output (``<Figure size 704x440 …>``) is unchanged.
    Every DataFrame the notebook displays is drawn by :func:`posenc_book.tables.table_html`
    (:func:`posenc_book.tables.use_book_tables`).
    """
    plt.rcParams.update(
        {
            "figure.figsize": (FIGURE_WIDTH_IN, 4.0),
            "figure.dpi": FIGURE_DPI,
            "savefig.dpi": FIGURE_DPI * PIXEL_RATIO,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "legend.frameon": False,
            "font.size": TICK_FONT_PT,
            "axes.titlesize": "medium",
            "figure.titlesize": "medium",
            "axes.labelsize": "medium",
            "xtick.labelsize": "medium",
            "ytick.labelsize": "medium",
            "legend.fontsize": "medium",
        }
    )
    _inline_retina()
    try:  # pandas: a notebook has it; the website's light build (no pandas) runs no notebook
        from posenc_book.tables import use_book_tables
    except ModuleNotFoundError:
        return
    use_book_tables()


def retina_png(fig: Figure) -> tuple[bytes, dict[str, int]] | None:
    """A figure as the book stores it: PNG at :data:`PIXEL_RATIO` times its CSS size.

    Drawn as IPython's inline backend draws (tight bounding box), at ``fig.dpi *
    PIXEL_RATIO``, then reduced to a 256-colour palette: the book's figures have a few
    line colours and one colour map, and the palette makes the PNG about a third of
    the size of the full-colour one, so a notebook stays small.

    Returns:
        The PNG bytes and ``{"width": …}``, the CSS width in px (the output's metadata:
        MyST-NB and Jupyter show the image this wide), or None for a figure with nothing
        drawn on it (as IPython does). No height: a fixed height would keep the image
        that tall where a narrow screen shrinks its width, and stretch it.
    """
    import io

    from PIL import Image

    if not fig.axes and not fig.lines and not fig.texts and not fig.images:
        return None
    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=fig.dpi * PIXEL_RATIO, bbox_inches="tight",
                facecolor=fig.get_facecolor(), edgecolor=fig.get_edgecolor())
    image = Image.open(io.BytesIO(drawn.getvalue())).convert("RGB")
    stored = io.BytesIO()
    image.quantize(256).save(stored, format="png", optimize=True)
    return stored.getvalue(), {"width": image.size[0] // PIXEL_RATIO}


def _inline_retina() -> None:
    """In IPython, display figures with :func:`retina_png`; outside it, nothing."""
    try:
        from IPython import get_ipython
    except ImportError:  # the book's build environment has no IPython
        return
    shell = get_ipython()
    if shell is None:
        return
    # Load the inline backend now: on loading, it sets IPython's figure formatters
    # (configure_inline_support), which would replace the one set here.
    plt.switch_backend(plt.get_backend())
    formatters = shell.display_formatter.formatters
    formatters["image/png"].for_type(Figure, retina_png)
    for other in ("image/svg+xml", "image/jpeg", "application/pdf"):
        formatters[other].pop(Figure, None)  # one image per figure


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
        ax.set_title(title, pad=24)  # room for the L_train label under it
    if legend:
        ax.legend()
    fig.tight_layout()
    return fig


def legend_below(
    fig: Figure, ax: Axes | Sequence[Axes] | None = None, ncol: int = 2
) -> None:
    """Move a legend under the figure, in ``ncol`` columns, where it covers no curve.

    At the book's font size a legend of five or more entries covers part of a one-panel
    plot; under the x label it covers nothing. Call it last (after ``tight_layout``):
    the legend hangs below the figure's bottom edge, and the stored image, whose
    bounding box is fitted to what is drawn (:func:`retina_png`), includes it.

    Args:
        fig: the figure.
        ax: the axes whose lines the legend names (default: the first axes), or several
            axes, whose lines it names in order, each label once (panels that draw
            different lines share one legend).
        ncol: number of columns.
    """
    axes = [fig.axes[0]] if ax is None else [ax] if isinstance(ax, Axes) else list(ax)
    handles, labels = [], []
    for one in axes:
        for handle, label in zip(*one.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
        if one.get_legend() is not None:
            one.get_legend().remove()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               bbox_transform=fig.transFigure, ncol=ncol)


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


def plot_share_maps(
    maps: Mapping[str, np.ndarray | None],
    titles: Mapping[str, str],
    *,
    ncols: int,
    x_ticks: Sequence[str],
    y_ticks: Sequence[str],
    x_label: str,
    y_label: str,
    colorbar_label: str,
) -> Figure:
    """Heat maps of shares in [0, 1] (e.g. passkeys retrieved), each cell labelled in percent.

    Args:
        maps: panel name → [rows, columns] array of shares (NaN: no value, left blank),
            or None for an empty panel; drawn ``ncols`` to a row, in order.
        titles: panel name → title (for every panel that is not None).
        ncols: panels per row, ≥ 1.
        x_ticks, y_ticks: the labels of the columns and of the rows (shown on the
            bottom row and the left column of panels).
        x_label, y_label, colorbar_label: axis and colour-bar labels.

    Returns:
        The figure (one shared colour bar, viridis from 0 to 1).

    Raises:
        ValueError: for ``ncols`` < 1 or no map that is not None.
    """
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got ncols={ncols}")
    if all(grid is None for grid in maps.values()):
        raise ValueError("maps must hold at least one array, got only None")
    nrows = -(-len(maps) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.5, 2.4 * nrows + 0.4),
                             sharex=True, sharey=True, squeeze=False,
                             gridspec_kw={"hspace": 0.65})
    for ax, grid in zip(axes.flat, [*maps.values(), *[None] * axes.size]):
        ax.set_visible(grid is not None)
    for ax, (name, grid) in zip(axes.flat, maps.items()):
        if grid is None:
            continue
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto",
                          origin="lower")
        for (i, j), value in np.ndenumerate(grid):
            if not np.isnan(value):
                ax.text(j, i, f"{value:.0%}".replace("%", ""), ha="center",
                        va="center", color="black" if value > 0.5 else "white")
        ax.set_title(titles[name])
        ax.grid(False)
    for ax in axes[-1]:
        ax.set_xticks(range(len(x_ticks)), list(x_ticks))
        ax.set_xlabel(x_label)
    for ax in axes[:, 0]:
        ax.set_yticks(range(len(y_ticks)), list(y_ticks))
        ax.set_ylabel(y_label)
    fig.colorbar(image, ax=axes, shrink=0.8, label=colorbar_label)
    return fig
