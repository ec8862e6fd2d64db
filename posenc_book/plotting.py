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
    linestyles: Mapping[str, str] | None = None,
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
        linestyles: optional scheme → matplotlib line style (``"--"``, ``":"``) for
            the lines to tell apart beyond their colour; the others are solid.

    Returns:
        The figure (returned, not shown, so that a notebook cell displays it once).

    Raises:
        ValueError: if ``results`` is empty, ``train_length`` is not positive, a length
            is not positive, ``yscale`` is not ``"linear"`` or ``"log"``, or
            ``linestyles`` names a scheme that ``results`` has not.
    """
    if not results:
        raise ValueError("results must hold at least one scheme's curve, got none")
    if train_length <= 0:
        raise ValueError(
            f"train_length must be a positive number of bytes, got {train_length}"
        )
    if yscale not in ("linear", "log"):
        raise ValueError(f"yscale must be 'linear' or 'log', got yscale={yscale!r}")
    linestyles = dict(linestyles or {})
    unknown = sorted(set(linestyles) - set(results))
    if unknown:
        raise ValueError(f"linestyles names schemes without a curve: {unknown}")
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
        line_style = {"linestyle": linestyles[scheme]} if scheme in linestyles else {}
        ax.plot(lengths, values, marker=style.get("marker", "o"),
                color=style.get("color"), label=scheme_label(scheme), **line_style)
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


def plot_condition_bars(
    values: Mapping[tuple[str, str], float],
    schemes: Sequence[str],
    colors: Mapping[str, str],
    *,
    ylabel: str,
    title: str,
) -> tuple[Figure, Axes]:
    """Grouped bars: one group per scheme, one bar per condition (in the order of
    ``colors``), and a black line at 1.0, for ratios such as PPL / PPL(L_train).

    Args:
        values: ``(scheme, condition)`` → value; a pair that is missing leaves a gap.
        schemes: the groups, left to right (raw names; shown by display name).
        colors: condition → colour, also the conditions' order and legend labels.
        ylabel, title: the axis label and the title.

    Returns:
        The figure (6.5 × 3.8 inches, laid out, with the legend below) and its axes.

    Raises:
        ValueError: for a value whose condition has no colour.
    """
    unknown = {c for _, c in values} - set(colors)
    if unknown:
        raise ValueError(f"colors has no entry for the conditions {sorted(unknown)}")
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    width = 0.8 / len(colors)
    for j, (condition, color) in enumerate(colors.items()):
        present = [i for i, s in enumerate(schemes) if (s, condition) in values]
        xs = [i + (j - (len(colors) - 1) / 2) * width for i in present]
        ys = [values[schemes[i], condition] for i in present]
        ax.bar(xs, ys, width, label=condition, color=color)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(schemes)), [scheme_label(s) for s in schemes])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    legend_below(fig)
    return fig, ax


def plot_rope_pair_terms(curves: Sequence, train_length: int, critical_pair: int) -> Figure:
    """Each RoPE pair's mean score term against the distance, in two panels: the pairs
    that complete a full turn within L_train (0 … i_c − 1) and those that do not.

    Args:
        curves: ``[P, R]``, pair (0 the fastest) × distance r = 0 … R − 1, e.g. the mean
            over heads of :func:`posenc_lib.rope_score_by_pair` (logits).
        train_length: L_train; distances from it on are shaded.
        critical_pair: i_c, 1 … P − 1.

    Returns:
        The figure (6.5 × 3.4 inches, laid out, legend below; one colour per pair, dark
        to light from the fastest to the slowest).

    Raises:
        ValueError: unless 1 ≤ ``critical_pair`` < P.
    """
    pairs, reach = len(curves), len(curves[0])
    if not 1 <= critical_pair < pairs:
        raise ValueError(f"critical_pair must lie in 1 … {pairs - 1}, got {critical_pair}")
    fig, axes = plt.subplots(1, 2, figsize=(6.5, 3.4), sharey=True)
    groups = ((axes[0], range(critical_pair), f"pairs 0–{critical_pair - 1}: full turns"),
              (axes[1], range(critical_pair, pairs),
               f"pairs {critical_pair}–{pairs - 1}: no full turn"))
    for ax, group, title in groups:
        for i in group:
            ax.plot(range(reach), curves[i], label=f"pair {i}", linewidth=1,
                    color=plt.cm.viridis(0.9 * i / (pairs - 1)))
        ax.axvspan(train_length, reach, color="grey", alpha=0.12)
        ax.axvline(train_length, color="black", linestyle="--", linewidth=1)
        ax.set_xlim(0, reach)
        ax.set_xticks([m * train_length for m in (1, 4, 8) if m * train_length <= reach])
        ax.set_xlabel("distance r = t − s (bytes)")
        ax.set_title(title)
    axes[0].set_ylabel("mean score term (logits)")
    fig.tight_layout()
    legend_below(fig, axes, ncol=4)
    return fig


def plot_weight_by_distance(
    profiles: Mapping[str, Mapping[int, Sequence[float]]],
    train_length: int,
    *,
    layer: int,
    near: int = 8,
) -> Figure:
    """Mean attention weight against the distance, on log-log axes: one panel per scheme
    (2 × 2), one line per window length (dotted, dashed, solid from the shortest).

    Args:
        profiles: scheme → window length L → 1-D weight by distance r = 0 … L − 1 (e.g.
            the mean over heads of :func:`posenc_lib.attention_by_distance`); r = 0 is
            left out of the log axis. At most 4 schemes and 3 lengths.
        train_length: L_train, marked by a dashed line.
        layer: the layer the weights come from (in the titles).
        near: a distance to label on the x axis besides 1, L_train and the longest L.

    Returns:
        The figure (6.5 × 5.4 inches, laid out, legend below).

    Raises:
        ValueError: for more than 4 schemes or 3 lengths.
    """
    lengths = sorted({L for by_length in profiles.values() for L in by_length})
    if len(profiles) > 4 or len(lengths) > 3:
        raise ValueError(f"at most 4 schemes and 3 lengths, got {len(profiles)} and {len(lengths)}")
    fig, axes = plt.subplots(2, 2, figsize=(6.5, 5.4), sharex=True, sharey=True)
    for ax, (scheme, by_length) in zip(axes.flat, profiles.items()):
        for L, style in zip(lengths, (":", "--", "-")):
            profile = by_length[L]
            ax.plot(range(1, len(profile)), profile[1:], style,
                    color=SCHEME_STYLE[scheme]["color"], label=f"L = {L} bytes")
        ax.axvline(train_length, color="black", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{scheme_label(scheme)}, layer {layer}")
    ticks = [1, near, train_length, lengths[-1]]
    for ax in axes[1]:
        ax.set_xticks(ticks, [str(v) for v in ticks])
        ax.minorticks_off()
        ax.set_xlabel("distance r (bytes)")
    for ax in axes[:, 0]:
        ax.set_ylabel("mean weight")
    fig.tight_layout()
    legend_below(fig, ncol=3)  # the line styles, in the first panel's colour
    return fig

def mark_train_length(ax: Axes, train_length: int) -> None:
    """Draw the training length as a dashed black vertical line, labelled for the legend.

    The label reads ``$L_\\mathrm{train}$ = 128`` (for ``train_length=128``), as the
    chapters write it.

    Args:
        ax: the axes; ``train_length`` is in the units of its x axis (bytes, positions).
        train_length: L_train, a positive number.

    Raises:
        ValueError: if ``train_length`` is not positive.
    """
    if not train_length > 0:
        raise ValueError(f"train_length must be positive, got train_length={train_length!r}")
    ax.axvline(train_length, color="black", lw=1, ls="--",
               label=rf"$L_\mathrm{{train}}$ = {train_length}")


def log_axes(ax: Axes, ticks: Sequence[float], axes: str = "xy") -> None:
    """Put the named axes on a log scale, with plain-number ticks at ``ticks``.

    ``log_axes(ax, [1, 8, 128], "xy")`` is ``ax.set_xscale("log")``,
    ``ax.set_yscale("log")``, then :func:`plain_log_ticks` on x and on y.

    Args:
        ax: the axes.
        ticks: where the ticks go, on every named axis; positive numbers.
        axes: ``"x"``, ``"y"`` or ``"xy"``.

    Raises:
        ValueError: if ``axes`` is not one of those, or a tick is not positive.
    """
    if axes not in ("x", "y", "xy"):
        raise ValueError(f"axes must be 'x', 'y' or 'xy', got axes={axes!r}")
    for axis in axes:
        getattr(ax, f"set_{axis}scale")("log")
    for axis in axes:
        plain_log_ticks(ax, axis, ticks)


def show_figure(fig: Figure, *, legend: str | None = "below") -> None:
    """Finish a figure the book's way and show it: ``tight_layout``, then the legend.

    Args:
        fig: the figure.
        legend: ``"below"``: the legend of the first axes goes under the figure
            (:func:`legend_below`, two columns); ``None``: leave the legends as drawn.

    Raises:
        ValueError: for any other ``legend``.
    """
    if legend not in ("below", None):
        raise ValueError(f"legend must be 'below' or None, got legend={legend!r}")
    fig.tight_layout()
    if legend == "below":
        legend_below(fig)
    plt.show()


def log_bins(stop: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer bin edges spaced evenly on a log scale from 1 to ``stop``, and their centres.

    The edges are ``np.geomspace(1, stop, count)`` rounded down to integers, duplicates
    removed (so there may be fewer than ``count``); the centre of bin j is the geometric
    middle ``sqrt(edges[j] * edges[j + 1])``. Use with :func:`binned_means` to draw a
    per-position curve on a log x axis without its noise.

    Args:
        stop: the last edge, a position (≥ 2).
        count: how many edges to ask ``geomspace`` for (≥ 2).

    Returns:
        ``(edges, centres)``: int64 ``[n]`` and float64 ``[n - 1]`` arrays.

    Raises:
        ValueError: if ``stop`` or ``count`` is below 2.
    """
    if stop < 2 or count < 2:
        raise ValueError(f"stop and count must be at least 2, got stop={stop}, count={count}")
    edges = np.unique(np.geomspace(1, stop, count).astype(int))
    return edges, np.sqrt(edges[:-1] * edges[1:])


def binned_means(curve, edges: Sequence[int]) -> list[float]:
    """Mean of a per-position curve over each range ``[edges[j], edges[j + 1])`` it covers.

    Ranges that reach past the end of the curve are left out, so a curve of 128 positions
    and the edges 0, 8, 32, 128, 512 give three means.

    Args:
        curve: ``[T]`` values by position (a torch tensor or a NumPy array).
        edges: increasing integer positions.

    Returns:
        one float per covered range, in order.

    Raises:
        ValueError: if ``edges`` are not increasing or a range is empty.
    """
    edges = [int(e) for e in edges]
    if any(hi <= lo for lo, hi in zip(edges[:-1], edges[1:])):
        raise ValueError(f"edges must be strictly increasing, got edges={edges}")
    return [curve[lo:hi].mean().item() for lo, hi in zip(edges[:-1], edges[1:])
            if hi <= len(curve)]


DECAY_CURVE_STYLE = {
    "bound B(r) / B(0)": ("-", "black"),
    "|sum of phases| / (d/2)": ("--", "#8c564b"),
    "q with itself": ("-", "#17becf"),
    "|q, independent k|": (":", "#e377c2"),
}
"""Line style and colour of each curve of :func:`plot_decay_curves` (not the schemes'
colours: no scheme is meant)."""


def plot_decay_curves(decay: Mapping[float, Mapping[str, object]], distances,
                      bins: int = 25) -> Figure:
    """RoPE's decay bound and measured scores against the distance, one panel per base.

    Each curve is drawn faintly at every distance and, bold, as its means over
    log-spaced bins of the distance. ``"bound B(r)"`` is drawn divided by its value at
    r = 0 (``distances[0]``), on the scale of the scores; the point r = 0 is left out.

    Args:
        decay: base → the curves of
            :func:`~posenc_lib.encodings.rope_decay.decay_curves` (``[m]`` arrays or CPU
            tensors, names as in :data:`DECAY_CURVE_STYLE` or ``"bound B(r)"``).
        distances: ``[m]`` increasing integer distances, starting at 0.
        bins: how many log-spaced bin edges from 1 to ``max(distances) + 1``.

    Returns:
        The figure (two panels sharing y for two bases), not yet shown.

    Raises:
        ValueError: if ``distances`` do not start at 0, or ``decay`` is empty.
    """
    r_all = np.asarray(distances, dtype=np.float64)
    if len(r_all) < 2 or r_all[0] != 0:
        raise ValueError(f"distances must start at 0 and hold more, got {r_all[:3]}")
    if not decay:
        raise ValueError("decay must hold at least one base")
    r_axis = r_all[1:]
    edges = np.logspace(0, np.log10(r_axis.max() + 1), bins).astype(np.float32)
    r_bin = np.searchsorted(edges.astype(np.float64), r_axis, side="left")
    kept = np.unique(r_bin)
    fig, axes = plt.subplots(1, len(decay), figsize=(6.5, 3.6), sharey=True, squeeze=False)
    for ax, (base, curves) in zip(axes[0], decay.items()):
        for name, values in curves.items():
            values = np.asarray(values, dtype=np.float64)
            if name == "bound B(r)":
                name, values = "bound B(r) / B(0)", values / values[0]
            style, colour = DECAY_CURVE_STYLE[name]
            ax.plot(r_axis, values[1:], "-", color=colour, alpha=0.25, linewidth=0.8)
            ax.plot([r_axis[r_bin == b].mean() for b in kept],
                    [values[1:][r_bin == b].mean() for b in kept],
                    style, color=colour, linewidth=2, label=name)
        ax.set_xscale("log")
        ax.set_xticks([1, 100, 10000], ["1", "100", "10 000"])
        ax.set_xlabel("distance r = t − s")
        ax.set_title("base " + f"{base:,.0f}".replace(",", " "))
    axes[0][0].set_ylabel("normalised bound, scores")
    return fig


def plot_angle_errors(positions, errors: Mapping[str, object], head_dim: int,
                      base: float = 10000.0) -> Figure:
    """RoPE's error against position, one line per dtype of the angles, log–log.

    Args:
        positions: ``[n]`` positive positions.
        errors: dtype name (e.g. ``"float32"``) → ``[n]`` largest absolute error at each
            position, against a float64 reference.
        head_dim: the head dimension (for the title).
        base: the frequency base (for the title).

    Returns:
        The figure, with its legend, not yet shown.

    Raises:
        ValueError: if ``errors`` is empty.
    """
    if not errors:
        raise ValueError("errors must hold at least one dtype")
    fig, ax = plt.subplots()
    for name, err in errors.items():
        ax.plot(np.asarray(positions), np.asarray(err), label=f"angles in {name}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([1, 10, 100, 1000, 10000], ["1", "10", "100", "1 000", "10 000"])
    ax.set_xlabel("position p")
    ax.set_ylabel("max |RoPE(x, p) − float64 reference|")
    ax.set_title(f"Angle precision, head_dim {head_dim}, base "
                 + f"{base:,.0f}".replace(",", " "))
    ax.legend()
    return fig


def plot_time_by_length(medians, low, high,
                        lines: Mapping[str, tuple[str, str, str]]) -> Figure:
    """Time of several attention variants relative to a baseline, against the length.

    One line per variant (its median over runs) with a band from its lowest to its
    highest run, both axes log₂ with plain-number ticks, legend below in one column.

    Args:
        medians, low, high: ``pandas.DataFrame`` tables, one row per variant and one
            column per length L (tokens): the median, lowest and highest ratio.
        lines: variant → (scheme for the colour, as in :data:`SCHEME_STYLE`; line style;
            marker), in the legend's order.

    Returns:
        The figure, not yet shown (:func:`show_figure` with ``legend=None`` shows it).

    Raises:
        KeyError: for a variant of ``lines`` that ``medians`` lacks, or an unknown scheme.
    """
    fig, ax = plt.subplots(figsize=(6.5, 4.6))
    for variant, (scheme, line, marker) in lines.items():
        row = medians.loc[variant]
        colour = SCHEME_STYLE[scheme]["color"]
        ax.plot(row.index, row.values, linestyle=line, marker=marker, markersize=4,
                color=colour, label=variant)
        ax.fill_between(row.index, low.loc[variant], high.loc[variant], color=colour,
                        alpha=0.12, linewidth=0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(list(medians.columns), [str(length) for length in medians.columns])
    ax.set_yticks([0.5, 1, 2, 4, 8, 16, 32], ["0.5", "1", "2", "4", "8", "16", "32"])
    ax.minorticks_off()
    ax.set_xlabel("sequence length L (tokens)")
    ax.set_ylabel("time relative to causal SDPA (median; band: 5 runs)")
    fig.tight_layout()
    legend_below(fig, ncol=1)
    return fig

def mark_vertical(ax: Axes, x: float, text: str, *, side: str = "right", color: str = "black",
                  linestyle: str = "--", linewidth: float = 1) -> None:
    """Draw a vertical line at ``x`` with ``text`` written beside its top (not in the legend).

    Args:
        ax: the axes.
        x: where, in data coordinates.
        text: the label, placed at 95 % of the axes' height, 4 points from the line.
        side: ``"right"`` (default) or ``"left"``: which side of the line the text is on.
        color, linestyle, linewidth: the line's style (default: black, dashed, 1 point).

    Raises:
        ValueError: for a ``side`` other than ``"left"`` or ``"right"``.
    """
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got side={side!r}")
    ax.axvline(x, color=color, linestyle=linestyle, linewidth=linewidth)
    ax.annotate(text, (x, 0.95), xycoords=("data", "axes fraction"),
                xytext=(4 if side == "right" else -4, 0), textcoords="offset points",
                ha="left" if side == "right" else "right", va="top")

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


def plot_passkey_maps(
    maps: Mapping[str, np.ndarray | None],
    titles: Mapping[str, str] | None = None,
    *,
    ncols: int,
    multiples: Sequence[int],
    depths: Sequence[float],
) -> Figure:
    """Passkey accuracy maps, key depth × L / L_train, one panel per model or scheme
    (:func:`plot_share_maps` with the passkey axes; chapter 12).

    Args:
        maps: panel name → ``[len(depths), len(multiples)]`` shares in [0, 1]
            (:func:`~posenc_book.stored.passkey_share_map`), or None for an empty panel.
        titles: panel name → title; by default each panel's name.
        ncols: panels per row, ≥ 1.
        multiples: the columns' L / L_train (1, 2, 4, …).
        depths: the rows' key depths in [0, 1].

    Returns:
        The figure.

    Raises:
        ValueError: as :func:`plot_share_maps`.
    """
    return plot_share_maps(maps, titles if titles is not None else {k: k for k in maps},
                           ncols=ncols, x_ticks=[f"{m}" for m in multiples],
                           y_ticks=[f"{d:g}" for d in depths], x_label="L / L_train",
                           y_label="key depth", colorbar_label="keys retrieved (share)")


def passkey_panel_title(shares, scheme: str) -> str:
    """A scheme's panel title over its passkey map: its name, the seeds pooled, and
    either the seed left out ("(seed 1: below bar)") or "(below bar)" when no run
    reaches the bar at L_train (all of them pooled). Always two lines.

    Args:
        shares: :func:`~posenc_book.stored.passkey_run_shares` (indexed by ``scheme``,
            ``seed``; columns ``meets`` and ``kept``).
        scheme: a scheme of ``shares`` (``"rope"``).

    Returns:
        E.g. ``"ALiBi, seed 0\\n(seed 1: below bar)"`` or ``"RoPE, seeds 0, 1\\n"``.

    Raises:
        KeyError: for a scheme not in ``shares``.
    """
    from posenc_book.stored import kept_seeds

    if scheme not in shares.index.get_level_values("scheme"):
        raise KeyError(f"scheme {scheme!r} is not in the shares")
    kept = kept_seeds(shares)[scheme]
    left = [int(d) for d in sorted(shares.loc[scheme].index) if d not in kept]
    named = f"{scheme_label(scheme)}, seed{'s' if len(kept) > 1 else ''} " + ", ".join(
        map(str, kept))
    if not shares.loc[scheme].meets.any():
        return f"{named}\n(below bar)"
    return named + (f"\n(seed {left[0]}: below bar)" if left else "\n")


def plot_end_of_window_loss(draws, end_loss, schemes: Sequence[str],
                            lengths: Sequence[int], train_length: int, *,
                            ylim: tuple[float, float] | None = None) -> Figure:
    """End-of-window loss against L / L_train: each stored draw as a faint dot (nudged
    sideways per scheme so that the schemes do not hide one another) and the mean at
    each length as a line (chapter 12).

    Args:
        draws: a DataFrame with columns ``scheme``, ``L`` (tokens or bytes) and
            ``nll_unseen`` (nats/byte), one row per draw
            (:func:`~posenc_book.stored.copy_gain_cells`).
        end_loss: a Series indexed by (``scheme``, ``L``): the pooled mean per length.
        schemes: the schemes to draw, in order (colours C0, C1, …).
        lengths: the evaluation lengths, multiples of ``train_length``.
        train_length: L_train.
        ylim: the y range, or None for matplotlib's.

    Returns:
        The figure (log₂ x axis, legend in three columns at the top left).

    Raises:
        ValueError: for ``train_length`` < 1.
    """
    if train_length < 1:
        raise ValueError(f"train_length must be positive, got train_length={train_length}")
    multiples = [L // train_length for L in lengths]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for i, scheme in enumerate(schemes):
        color = f"C{i}"
        mine = draws[draws.scheme == scheme]
        ax.scatter(mine.L / train_length * (1 + 0.04 * (i - 2)), mine.nll_unseen, s=9,
                   alpha=0.45, color=color, linewidths=0)
        ax.plot(np.array(lengths) / train_length, end_loss[scheme].reindex(lengths),
                marker="o", color=color, label=scheme_label(scheme))
    ax.set_xscale("log", base=2)
    ax.set_xticks(multiples, [f"{m}" for m in multiples])
    ax.set_xlabel("L / L_train")
    ax.set_ylabel("end-of-window loss\n(nats/byte)")
    ax.legend(ncols=3, loc="upper left", frameon=False)
    if ylim is not None:
        ax.set_ylim(*ylim)
    return fig


def plot_recall_and_perplexity(per_draw, nll, groups: Sequence[str], tasks: Mapping[str, str],
                               train_length: int, *, by: str = "scheme", labels=None,
                               colors=None) -> Figure:
    """Both of the book's metrics against L / L_train, side by side (chapter 12): recall
    accuracy per task on the left, test NLL on the right; each line the mean over the
    stored repeats, its band their range (lowest to highest).

    Args:
        per_draw: a DataFrame with columns ``by``, ``task``, ``L`` and ``accuracy`` (a
            share in [0, 1]), one row per repeat (e.g. per seed and window draw, depths
            pooled).
        nll: a DataFrame with columns ``by``, ``L`` and ``nll`` (nats/byte), one row per
            repeat (seed).
        groups: the values of ``by`` to draw, in order.
        tasks: task → its line style in the left panel (e.g. ``{"1k0d": "--",
            "4k2d": "-"}``), in legend order.
        train_length: L_train, in the units of ``L``.
        by: the column that tells the lines apart (``"scheme"``, a RoPE base, …).
        labels: group → legend name (a mapping or a function); default
            :func:`~posenc_book.schemes.scheme_label`.
        colors: group → colour; default the scheme's colour, else C0, C1, …

    Returns:
        The figure (two panels, log₂ x axes).

    Raises:
        ValueError: for ``train_length`` < 1, no ``groups`` or no ``tasks``, or a
            column missing from ``per_draw`` or ``nll`` (named).
    """
    if train_length < 1:
        raise ValueError(f"train_length must be positive, got train_length={train_length}")
    if not groups or not tasks:
        raise ValueError(f"groups and tasks must not be empty, got groups={list(groups)}, "
                         f"tasks={dict(tasks)}")
    for frame, name, needed in ((per_draw, "per_draw", (by, "task", "L", "accuracy")),
                                (nll, "nll", (by, "L", "nll"))):
        missing = [column for column in needed if column not in frame]
        if missing:
            raise ValueError(f"{name} lacks the columns {missing}")
    if labels is None:
        label = scheme_label
    elif callable(labels):
        label = labels
    else:
        label = lambda group: labels.get(group, str(group))  # noqa: E731
    fig, (left, right) = plt.subplots(1, 2, figsize=(MAX_FIGURE_WIDTH_IN, 3.4))
    for i, group in enumerate(groups):
        color = (colors or {}).get(group) or SCHEME_STYLE.get(group, {}).get("color") or f"C{i}"
        for task, style in tasks.items():
            mine = per_draw[(per_draw[by] == group) & (per_draw.task == task)].groupby("L").accuracy
            x = np.asarray(mine.mean().index) / train_length
            left.plot(x, 100 * mine.mean(), linestyle=style, marker="o", ms=3, color=color)
            left.fill_between(x, 100 * mine.min(), 100 * mine.max(), color=color, alpha=0.15, lw=0)
        mine = nll[nll[by] == group].groupby("L").nll
        x = np.asarray(mine.mean().index) / train_length
        right.plot(x, mine.mean(), marker="o", ms=3, color=color, label=label(group))
        right.fill_between(x, mine.min(), mine.max(), color=color, alpha=0.15, lw=0)
    for task, style in tasks.items():
        left.plot([], [], linestyle=style, color="black", label=task)
    multiples = sorted({L // train_length for L in per_draw.L} | {L // train_length for L in nll.L})
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(multiples, [f"{m}" for m in multiples])
        ax.set_xlabel("L / L_train")
    left.set_ylabel("queries answered (%)")
    left.set_ylim(-3, 103)
    right.set_ylabel("test NLL (nats/byte)")
    left.legend(frameon=False, loc="upper right", title="task")
    right.legend(frameon=False, loc="upper left")
    fig.tight_layout()
    return fig


def plot_heat_map_grid(
    images: Sequence,
    shape: tuple[int, int],
    *,
    figsize: tuple[float, float] = (MAX_FIGURE_WIDTH_IN, 4.8),
    titles: Sequence[str] | None = None,
    row_labels: Sequence[str] | None = None,
    xlabel: str | None = None,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    extent: tuple[float, float, float, float] | None = None,
    interpolation: str | None = None,
    xticks: Sequence[float] | None = None,
    yticks: Sequence[float] | None = None,
    colorbar_label: str | None = None,
    extend: str = "neither",
    suptitle: str | None = None,
) -> Figure:
    """A grid of heat maps that share their axes and one colour bar (e.g. layers × heads).

    Each panel is drawn with ``imshow`` on one colour scale, without a grid; only the outer
    panels keep their tick labels, the left column its y label and the bottom row its x label.

    Args:
        images: ``rows · cols`` two-dimensional arrays or tensors (any device), row by row.
        shape: ``(rows, cols)`` of the grid.
        figsize: the figure's size in inches.
        titles: one title per panel (same order as ``images``), or None.
        row_labels: one y label per row (shown on the left column), or None.
        xlabel: the x label of the bottom row, or None.
        cmap, vmin, vmax, extent, interpolation: passed to ``imshow`` for every panel.
        xticks, yticks: tick positions shared by all panels, or None (matplotlib's).
        colorbar_label: the colour bar's label; extend: its ``extend`` ("max" for values
            clipped at ``vmax``).
        suptitle: a title over the grid, or None.

    Returns:
        The figure (``rows · cols`` panels and the colour bar).

    Raises:
        ValueError: when the number of images, titles or row labels does not fit ``shape``.
    """
    rows, cols = shape
    if len(images) != rows * cols:
        raise ValueError(f"images must hold rows · cols = {rows * cols} maps, got {len(images)}")
    if titles is not None and len(titles) != rows * cols:
        raise ValueError(f"titles must hold {rows * cols} titles, got {len(titles)}")
    if row_labels is not None and len(row_labels) != rows:
        raise ValueError(f"row_labels must hold {rows} labels, got {len(row_labels)}")
    fig, axes = plt.subplots(rows, cols, figsize=figsize, squeeze=False, sharex=True, sharey=True)
    for i, (ax, matrix) in enumerate(zip(axes.flat, images)):
        if hasattr(matrix, "detach"):  # a torch tensor, possibly on a GPU
            matrix = matrix.detach().cpu().numpy()
        image = ax.imshow(matrix, cmap=cmap, vmin=vmin, vmax=vmax, extent=extent,
                          interpolation=interpolation)
        if titles is not None:
            ax.set_title(titles[i], fontsize="medium")
        if xticks is not None:
            ax.set_xticks(xticks)
        if yticks is not None:
            ax.set_yticks(yticks)
        ax.grid(False)
    for ax in axes.flat:
        ax.label_outer()
    for row, ax in enumerate(axes[:, 0]):
        if row_labels is not None:
            ax.set_ylabel(row_labels[row])
    for ax in axes[-1]:
        if xlabel is not None:
            ax.set_xlabel(xlabel)
    fig.colorbar(image, ax=axes, shrink=0.8, label=colorbar_label, extend=extend)
    if suptitle is not None:
        fig.suptitle(suptitle)
    return fig


def plot_gap_bars(gaps: Mapping[str, Sequence[float]], colors: Mapping[str, str],
                  bound: float, *, ylabel: str, ylim: tuple[float, float] = (1e-5, 10),
                  ) -> Figure:
    """Bars of differences on a log axis, one group per scheme, one bar per choice; a
    difference below ``bound`` (rounding noise) is drawn faint and hatched at the bound
    it is checked to, and labelled ``< bound``, not with a number that varies by CPU.

    Args:
        gaps: scheme → one difference (≥ 0) per choice, in the order of ``colors``.
        colors: choice → colour, also the legend's labels and order (two or more).
        bound: the rounding bound (> 0), drawn as a dashed line.
        ylabel: the y axis label.
        ylim: the y range (log axis).

    Returns:
        The figure (6.4 × 3.2 inches), not yet laid out or shown (:func:`show_figure`).

    Raises:
        ValueError: if a scheme has not one value per choice, or ``bound`` is not positive.
    """
    from posenc_book.checks import format_bound

    if not bound > 0:
        raise ValueError(f"bound must be > 0, got bound={bound}")
    wrong = [s for s, values in gaps.items() if len(values) != len(colors)]
    if wrong:
        raise ValueError(f"gaps must hold {len(colors)} values per scheme: {wrong}")
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for j, (choice, color) in enumerate(colors.items()):
        for i, values in enumerate(gaps.values()):
            gap = values[j]
            below = gap < bound  # rounding noise: drawn at the bound it is checked to
            top, x = bound if below else gap, i + (j - (len(colors) - 1) / 2) * 0.38
            ax.bar(x, top, width=0.36, color=color, alpha=0.35 if below else 1.0,
                   hatch="//" if below else None, label=None if i else choice)
            ax.annotate(f"< {format_bound(bound)}" if below else f"{gap:.1f}", (x, top),
                        xytext=(0, 2), textcoords="offset points", ha="center",
                        va="bottom")
    ax.axhline(bound, color="black", linestyle="--", linewidth=1)
    ax.set_yscale("log")
    ax.set_ylim(*ylim)
    ax.set_xticks(range(len(gaps)), [scheme_label(name) for name in gaps])
    ax.set_ylabel(ylabel)
    return fig


def plot_loss_curves(lines: Mapping[str, tuple[object, str, str]], *, first_step: int,
                     xlim: tuple[int, int], title: str,
                     ylabel: str = "training loss (nats/byte, 20-step mean)") -> Figure:
    """Smoothed training-loss curves, cut to the steps worth comparing.

    The y axis tops out 0.05 above the highest curve at ``xlim[0]``, so the steep first
    steps do not squash the rest.

    Args:
        lines: label → (curve ``[n]``: the value at step ``first_step + j`` is
            ``curve[j]``; colour; line style), drawn in order.
        first_step: the step of each curve's first value (20 for 20-step means).
        xlim: (first, last) step shown; ``xlim[0] ≥ first_step``.
        title, ylabel: the title and the y label.

    Returns:
        The figure (6.5 × 4.0 inches), not yet laid out or shown (:func:`show_figure`).

    Raises:
        ValueError: if ``lines`` is empty or ``xlim`` starts before ``first_step``.
    """
    if not lines:
        raise ValueError("lines must hold at least one curve")
    if xlim[0] < first_step:
        raise ValueError(f"xlim must start at or after first_step={first_step}, got {xlim}")
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    for label, (curve, colour, dash) in lines.items():
        ax.plot(range(first_step, first_step + len(curve)), curve, dash, color=colour,
                label=label)
    ax.set_xlim(*xlim)
    highest = max(float(curve[xlim[0] - first_step]) for curve, _, _ in lines.values())
    ax.set_ylim(top=highest + 0.05)
    ax.set(xlabel="training step", ylabel=ylabel, title=title)
    return fig


def plot_head_curves(curves: Mapping[str, object], styles: Mapping[str, str],
                     train_length: int, *, label: str, ylabel: str, title: str,
                     bins: int = 40) -> Figure:
    """Per-head curves along the query position, binned on log–log axes, one colour per
    scheme and the line ``t + 1`` of uniform attention for reference.

    Args:
        curves: scheme → ``[H, T]`` values by head and query position t (tensor or
            array), e.g. the effective number of keys of one layer.
        styles: scheme → line style, also the order of drawing.
        train_length: L_train, marked and used for the ticks (1, 8, 32, L, 4 L, T).
        label: legend label of a scheme's first head, ``{scheme}`` replaced by its
            display name (e.g. ``"{scheme}, heads of layer 1"``).
        ylabel, title: the y label and the title.
        bins: how many log-spaced bin edges (:func:`log_bins`) from 1 to T.

    Returns:
        The figure (6.5 × 3.8 inches), not yet laid out or shown (:func:`show_figure`).

    Raises:
        ValueError: if ``styles`` names a scheme ``curves`` lacks, or the curves' lengths
            differ.
    """
    missing = [s for s in styles if s not in curves]
    if missing:
        raise ValueError(f"styles names schemes that curves lacks: {missing}")
    lengths = {np.shape(curves[s])[-1] for s in styles}
    if len(lengths) != 1:
        raise ValueError(f"the curves must have one length, got {sorted(lengths)}")
    (length,) = lengths
    edges, centres = log_bins(length, bins)
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for scheme, style in styles.items():
        for h, curve in enumerate(curves[scheme]):
            name = label.format(scheme=scheme_label(scheme)) if h == 0 else None
            ax.plot(centres, binned_means(curve, edges), style,
                    color=SCHEME_STYLE[scheme]["color"], lw=1.2, label=name)
    ax.plot(centres, centres + 1, ":", color="black", label="uniform attention, t + 1")
    mark_train_length(ax, train_length)
    log_axes(ax, [1, 8, 32, train_length, 4 * train_length, length], "xy")
    ax.set(xlim=(1, None), ylim=(1, None), xlabel="query position t (bytes)",
           ylabel=ylabel, title=title)
    return fig


def plot_position_readout(quartiles, length: int, train_length: int,
                          ticks: Sequence[int], *, ylabel: str, title: str,
                          scheme: str = "none") -> Figure:
    """What a probe reads off a model against the true position: the median and the
    middle 50 % of its predictions per range of positions, and the diagonal, log–log.

    Args:
        quartiles: a table with columns ``"t"``, ``"25%"``, ``"50%"``, ``"75%"``, one row
            per range (:func:`~posenc_lib.analysis.probes.quartiles_by_range`).
        length: the longest true position shown (the diagonal runs from 1 to it).
        train_length: L_train, marked.
        ticks: tick positions of both axes.
        ylabel, title: the y label and the title.
        scheme: whose colour (:data:`SCHEME_STYLE`).

    Returns:
        The figure (6.5 × 3.8 inches), not yet laid out or shown (:func:`show_figure`).

    Raises:
        KeyError: if ``quartiles`` lacks a column, or ``scheme`` is unknown.
    """
    t, low, median, high = (quartiles[c] for c in ("t", "25%", "50%", "75%"))
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    color = SCHEME_STYLE[scheme]["color"]
    ax.fill_between(t, low, high, color=color, alpha=0.25,
                    label="probe's prediction, middle 50 %")
    ax.plot(t, median, color=color, marker="x", label="probe's prediction, median")
    ax.plot([1, length], [1, length], ":", color="black", label="exact, t̂ = t")
    mark_train_length(ax, train_length)
    log_axes(ax, ticks, "xy")
    ax.set(xlabel="true position t (bytes)", ylabel=ylabel, title=title)
    return fig


def plot_loss_by_position(curves: Mapping[str, object], length: int, train_length: int,
                          ticks: Sequence[int], *,
                          levels: Mapping[str, tuple[float, str]] | None = None,
                          title: str, bins: int = 44) -> Figure:
    """Test loss against the position in the window, in log-spaced bins, one line per
    scheme, with horizontal reference levels (e.g. n-gram tables).

    Args:
        curves: scheme → ``[T_s]`` loss by position (nats/byte), T_s ≤ ``length``; a
            bin is drawn where the curve covers it.
        length: the last bin edge (:func:`log_bins`).
        train_length: L_train, marked.
        ticks: x tick positions.
        levels: name → (level, line style), drawn as ``"{name} table"``.
        title: the title.
        bins: how many log-spaced bin edges from 1 to ``length``.

    Returns:
        The figure (6.5 × 3.8 inches), not yet laid out or shown (:func:`show_figure`).

    Raises:
        ValueError: if a curve is longer than ``length``.
    """
    edges, centres = log_bins(length, bins)
    too_long = [s for s, c in curves.items() if len(c) > length]
    if too_long:
        raise ValueError(f"curves longer than length={length}: {too_long}")
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for scheme, curve in curves.items():
        covered = edges[edges <= len(curve)]
        style = SCHEME_STYLE[scheme]
        ax.plot(centres[: len(covered) - 1], binned_means(curve, covered), ms=3,
                color=style["color"], marker=style["marker"], label=scheme_label(scheme))
    for name, (level, ls) in (levels or {}).items():
        ax.axhline(level, color="black", ls=ls, lw=1, label=f"{name} table")
    mark_train_length(ax, train_length)
    log_axes(ax, ticks, "x")
    ax.set(xlabel="position t in the window (bytes)",
           ylabel="test loss at position t (nats/byte)", title=title)
    return fig


def plot_loss_by_context(table, edges: Sequence[int], schemes: Sequence[str], *,
                         title: str) -> Figure:
    """Loss by groups of context length, one line per scheme, on a log₂ x axis with one
    tick per group at its geometric centre, legend below in three columns.

    Args:
        table: rows = groups (their labels become the ticks), columns = schemes'
            display names (:func:`scheme_label`), values in nats per byte.
        edges: the groups' bounds: group j holds contexts ``edges[j] + 1 … edges[j + 1]``.
        schemes: raw scheme names, in the legend's order.
        title: the title.

    Returns:
        The figure, laid out with its legend below, not yet shown.

    Raises:
        ValueError: if ``table`` has not one row per group of ``edges``.
    """
    if len(table) != len(edges) - 1:
        raise ValueError(f"table has {len(table)} rows for {len(edges) - 1} groups of edges")
    centres = [((a + 1) * b) ** 0.5 for a, b in zip(edges, edges[1:])]  # geometric
    fig, ax = plt.subplots()
    for s in schemes:
        ax.plot(centres, table[scheme_label(s)], marker=SCHEME_STYLE[s]["marker"],
                color=SCHEME_STYLE[s]["color"], label=scheme_label(s))
    ax.set_xscale("log", base=2)
    ax.set_xticks(centres, list(table.index))  # one tick per group, at its centre
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlabel("bytes of context of the scored byte (t + 1)")
    ax.set_ylabel("loss (nats per byte)")
    ax.set_title(title)
    fig.tight_layout()
    legend_below(fig, ncol=3)
    return fig


PROTOCOL_TITLES = {"nonoverlapping": "Non-overlapping", "sliding": "Sliding"}
"""Display names of the two evaluation protocols, as panel titles."""


def plot_sweep_protocols(frame, train_length: int, *, title: str,
                         yticks: Sequence[float] = (6, 8, 10, 15, 20, 30, 40)) -> Figure:
    """A sweep's perplexity against the length, mean ± std over seeds, one panel per
    protocol (non-overlapping, sliding) sharing a log y axis, legend below.

    Args:
        frame: one row per evaluation, with columns ``protocol``, ``scheme``,
            ``eval_length`` and ``perplexity`` (``posenc_lib.results_frame``).
        train_length: L_train, marked in each panel.
        title: the figure's title.
        yticks: plain-number ticks of the shared y axis.

    Returns:
        The figure (6.5 × 4.0 inches), laid out with its legend below, not yet shown.

    Raises:
        ValueError: if ``frame`` has no row of a protocol.
    """
    missing = [p for p in PROTOCOL_TITLES if not (frame.protocol == p).any()]
    if missing:
        raise ValueError(f"frame has no evaluation with protocol {missing}")
    fig, axes = plt.subplots(1, 2, figsize=(6.5, 4.0), sharey=True)
    for ax, (protocol, name) in zip(axes, PROTOCOL_TITLES.items()):
        stats = (frame[frame.protocol == protocol]
                 .groupby(["scheme", "eval_length"], sort=False)["perplexity"]
                 .agg(["mean", "std"]))
        means, stds = ({s: stats.loc[s, stat].to_dict() for s in stats.index.unique(0)}
                       for stat in ("mean", "std"))
        plot_perplexity_vs_length(means, spread=stds, train_length=train_length, ax=ax,
                                  yscale="log", title=f"{name} windows",
                                  legend=protocol == "sliding")
    axes[1].set_ylabel("")
    plain_log_ticks(axes[0], "y", list(yticks))  # shared by both panels
    fig.suptitle(title)
    fig.tight_layout()
    legend_below(fig, axes[1], ncol=3)
    return fig


def plot_ratio_marks(marks: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]], *,
                     xlabel: str, xticks: Sequence[float] = (1, 2, 4, 8)) -> Figure:
    """One mark per seed of a ratio, one row per scheme, one panel per set of runs:
    filled marks for non-overlapping windows, open ones for sliding windows, log x axis
    and a dashed line at 1.

    Args:
        marks: panel title → scheme (rows, top to bottom) → protocol
            (``"nonoverlapping"``, ``"sliding"``) → the seeds' values.
        xlabel: the x label of every panel.
        xticks: plain-number ticks of the shared x axis.

    Returns:
        The figure (6.5 × 3.6 inches), laid out with its legend below, not yet shown.

    Raises:
        ValueError: if the panels do not list the same schemes.
    """
    orders = [list(by_scheme) for by_scheme in marks.values()]
    if not orders or any(order != orders[0] for order in orders):
        raise ValueError(f"every panel must list the same schemes, got {orders}")
    order = orders[0]
    fig, axes = plt.subplots(1, len(marks), figsize=(6.5, 3.6), sharex=True, sharey=True,
                             squeeze=False)
    axes = axes[0]
    for ax, (name, by_scheme) in zip(axes, marks.items()):
        for y, s in enumerate(order):
            color = SCHEME_STYLE[s]["color"]
            for dy, p, face in ((0.15, "nonoverlapping", color),
                                (-0.15, "sliding", "none")):
                r = by_scheme[s][p]
                ax.scatter(r, [y + dy] * len(r), marker="o", s=45,
                           facecolors=face, edgecolors=color, linewidths=1.5)
        ax.axvline(1, color="black", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel(xlabel)
    plain_log_ticks(axes[0], "x", list(xticks))
    axes[0].set_yticks(range(len(order)), [scheme_label(s) for s in order])
    axes[0].set_ylim(len(order) - 0.5, -0.5)
    for face, label in (("grey", "non-overlapping"), ("none", "sliding")):
        axes[-1].scatter([], [], marker="o", facecolors=face, edgecolors="grey",
                         linewidths=1.5, label=f"{label} windows, one mark per seed")
    fig.tight_layout()
    legend_below(fig, axes[-1], ncol=1)
    return fig


def plot_table_rows(trained_length, start_length, main, *, title: str,
                    xticks: Sequence[int] = (0, 32, 64, 96, 127),
                    scheme: str = "learned") -> Figure:
    """A position table's rows in two panels against the position p: their lengths,
    trained and at the start (dashed grey), and each row's coordinate along the trained
    table's main direction.

    Args:
        trained_length, start_length: ``[P]`` row lengths ‖row_p‖ after and before
            training.
        main: ``[P]`` coordinate of each trained row along the main direction.
        title: the figure's title.
        xticks: the positions ticked on both panels.
        scheme: whose colour (:data:`SCHEME_STYLE`).

    Returns:
        The figure (6.5 × 3.6 inches, the legend in the first panel), not yet laid out
        or shown (:func:`show_figure` with ``legend=None``).

    Raises:
        ValueError: if the three curves differ in length.
    """
    lengths = {len(trained_length), len(start_length), len(main)}
    if len(lengths) != 1:
        raise ValueError(f"the three curves must have one length, got {sorted(lengths)}")
    fig, (ax_len, ax_main) = plt.subplots(1, 2, figsize=(6.5, 3.6), sharex=True)
    color = SCHEME_STYLE[scheme]["color"]
    ax_len.plot(trained_length, color=color, label="trained")
    ax_len.plot(start_length, color="#7f7f7f", linestyle="--", label="start")
    ax_len.set_ylabel("row length ‖row_p‖")
    ax_len.legend()
    ax_main.plot(main, color=color)
    ax_main.set_ylabel("main-direction coordinate")
    for ax in (ax_len, ax_main):
        ax.set(xlabel="position p", xticks=list(xticks))
    fig.suptitle(title)
    return fig


def plot_per_run(panels: Mapping[str, object], *, label: str,
                 colours: Mapping[str, str] | None = None, reference: float | None = 1.0,
                 band: tuple[float, float] | None = None, horizontal: bool = False,
                 log: bool = False, height: float = 3.8) -> Figure:
    """One dot per run and a bar at the median, for each item of each panel (e.g. a
    scheme's throughput relative to a baseline in five benchmark runs).

    Args:
        panels: panel title → ``pandas.DataFrame`` with one row per item (its index:
            the tick labels, in order) and one column per run; panels share the value
            axis. A title ``""`` draws no title.
        label: the value axis' label (with its unit).
        colours: item → colour; items not in it are black.
        reference: a dotted line at this value (``None``: none).
        band: ``(low, high)``, a grey band across every panel (e.g. a noise floor).
        horizontal: items on the y axis (top to bottom) and values on x; otherwise items
            on the x axis (labels turned 45°) and values on y.
        log: a log₁₀ value axis.
        height: the figure's height in inches (its width is 6.5 in).

    Returns:
        The figure (one row of panels), not yet shown.

    Raises:
        ValueError: for no panel, or a band whose low end is above its high end.
    """
    if not panels:
        raise ValueError("panels must hold at least one table, got none")
    if band is not None and band[0] > band[1]:
        raise ValueError(f"band must be (low, high) with low <= high, got band={band}")
    colours = colours or {}
    share = {"sharex": True} if horizontal else {"sharey": True}
    fig, axes = plt.subplots(1, len(panels), figsize=(MAX_FIGURE_WIDTH_IN, height),
                             squeeze=False, **share)
    for ax, (title, table) in zip(axes[0], panels.items()):
        for i, (item, values) in enumerate(table.iterrows()):
            values = values.dropna()
            colour = colours.get(item, "black")
            spots, median = [i] * len(values), [values.median()] * 2
            if horizontal:
                ax.scatter(values, spots, s=14, alpha=0.6, color=colour)
                ax.plot(median, [i - 0.3, i + 0.3], color="black", lw=1.5)
            else:
                ax.scatter(spots, values, s=14, alpha=0.6, color=colour)
                ax.plot([i - 0.3, i + 0.3], median, color="black", lw=1.5)
        line = ax.axvline if horizontal else ax.axhline
        if reference is not None:
            line(reference, color="grey", linewidth=0.8, linestyle=":")
        if band is not None:
            (ax.axvspan if horizontal else ax.axhspan)(*band, color="grey", alpha=0.15,
                                                        linewidth=0)
        if horizontal:
            ax.set_yticks(range(len(table)), list(table.index))
            ax.set_ylim(len(table) - 0.5, -0.5)
            ax.set_xscale("log" if log else "linear")
            ax.set_xlabel(label)
        else:
            ax.set_xticks(range(len(table)), list(table.index), rotation=45, ha="right")
            ax.set_yscale("log" if log else "linear")
        if title:
            ax.set_title(title, fontsize="medium")
    if not horizontal:
        axes[0][0].set_ylabel(label)
    fig.tight_layout()
    return fig


def plot_long_context_runs(runs: Mapping[str, Mapping], labels: Mapping, styles: Mapping,
                           colors: Mapping[str, str], context_length: int,
                           yticks: Sequence[float]) -> Figure:
    """Perplexity per block of stored long-context runs, one panel per text.

    Args:
        runs: panel title (a text's name) → {key → stored result}; a key is
            ``(method, κ)`` and a result has ``run`` (``block``, ``num_tokens``) and
            ``blocks`` with ``first_position`` and ``perplexity``.
        labels: key → legend label.
        styles: key → ``(marker, linestyle)``, so that close curves stay apart.
        colors: method → colour.
        context_length: the trained context, marked with a dotted line.
        yticks: the ticks of the log y axis, written as plain numbers.

    Returns:
        The figure, legend under it.

    Raises:
        ValueError: if ``runs`` is empty.
    """
    if not runs:
        raise ValueError("runs must hold at least one text's runs, got none")
    fig, axes = plt.subplots(1, len(runs), figsize=(6.5, 4.6), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, (title, by_key) in zip(axes, runs.items()):
        end = 0
        for key, style in styles.items():
            run, blocks = by_key[key]["run"], by_key[key]["blocks"]
            middle = [b["first_position"] + run["block"] / 2 for b in blocks]
            end = max(end, run["num_tokens"])
            ax.plot(middle, [b["perplexity"] for b in blocks], marker=style[0],
                    linestyle=style[1], color=colors[key[0]], label=labels[key])
        ax.axvline(context_length, color="black", linestyle=":", linewidth=1)
        ax.text(context_length, 1.01, "trained context", ha="center", va="bottom",
                transform=ax.get_xaxis_transform())
        ax.set_yscale("log")
        plain_log_ticks(ax, "y", yticks)
        ticks = range(0, end + 1, context_length)
        ax.set_xticks(ticks, [str(v) for v in ticks])
        ax.set_xlabel("token position")
        ax.set_title(title, style="italic", pad=18)
    axes[0].set_ylabel("perplexity per token")
    fig.tight_layout()
    legend_below(fig, axes[-1])
    return fig


def plot_frequency_ratios(ratios: Mapping[str, Sequence[float]], colors: Mapping[str, str],
                          critical_pair: int, *, ylabel: str) -> Figure:
    """θ'_i/θ_i of each context-extension method against the pair index i (log₂ y axis).

    Args:
        ratios: legend label → θ'_i/θ_i for pairs 0 … d/2 − 1 (at most four methods:
            markers o, s, D, ^ in that order).
        colors: legend label → colour.
        critical_pair: i_c, marked by a dashed line before it.
        ylabel: the y axis' label (say which κ).

    Returns:
        The figure, legend under it; ticks at 1, 1/2 and 1/4.

    Raises:
        ValueError: if ``ratios`` is empty or holds more than four methods.
    """
    if not 0 < len(ratios) <= 4:
        raise ValueError(f"ratios must hold 1 to 4 methods, got {len(ratios)}")
    pairs = len(next(iter(ratios.values())))
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for (label, values), marker in zip(ratios.items(), "osD^"):
        ax.plot(range(pairs), values, marker=marker, color=colors[label], label=label)
    ax.axvline(critical_pair - 0.5, color="black", linestyle="--", linewidth=1)
    ax.text(critical_pair - 0.4, 0.9, "first pair without\na full turn ($i_c$)")
    ax.set_yscale("log", base=2)
    ax.set_yticks([1, 1 / 2, 1 / 4], ["1", "1/2", "1/4"])
    ax.set_xticks(range(pairs))
    ax.set_xlabel("frequency pair i (0 = fastest)")
    ax.set_ylabel(ylabel)
    fig.tight_layout()
    legend_below(fig)
    return fig


def plot_extension_panels(panels: Mapping[str, Mapping[str, Mapping[int, float]]],
                          train_length: int, styles: Mapping[str, Mapping], *,
                          yticks: Sequence[float]) -> Figure:
    """Perplexity against length on a log y axis, side by side, one panel per title.

    Args:
        panels: panel title → lines as :func:`plot_perplexity_vs_length` takes them
            (line name → {length L → perplexity}); the legend goes under the last panel.
        train_length: L_train, marked in every panel.
        styles: legend label → Line2D properties set on that panel line (colour,
            marker, linestyle); lines not named keep their scheme style.
        yticks: the y ticks, written as plain numbers (axes share y).

    Returns:
        The figure.

    Raises:
        ValueError: if ``panels`` is empty.
    """
    if not panels:
        raise ValueError("panels must hold at least one panel, got none")
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5, 3.9), sharey=True,
                             squeeze=False)
    axes = axes[0]
    for ax, (title, lines) in zip(axes, panels.items()):
        plot_perplexity_vs_length(lines, train_length=train_length, ax=ax, yscale="log",
                                  title=title, legend=ax is axes[-1])
        for line in ax.get_lines():
            line.set(**styles.get(line.get_label(), {}))
    for ax in axes[1:]:
        ax.set_ylabel("")
    plain_log_ticks(axes[0], "y", yticks)
    fig.tight_layout()
    legend_below(fig, axes[-1])
    return fig
