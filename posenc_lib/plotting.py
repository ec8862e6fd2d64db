"""One figure style for the whole book. Draws results; never trains.

The same scheme has the same colour and marker in every chapter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

SCHEME_STYLE: dict[str, dict[str, str]] = {
    "none": {"color": "#7f7f7f", "marker": "x", "label": "NoPE"},
    "sinusoidal": {"color": "#1f77b4", "marker": "o", "label": "Sinusoidal"},
    "learned": {"color": "#ff7f0e", "marker": "s", "label": "Learned"},
    "rope": {"color": "#2ca02c", "marker": "^", "label": "RoPE"},
    "alibi": {"color": "#d62728", "marker": "v", "label": "ALiBi"},
    "t5": {"color": "#9467bd", "marker": "D", "label": "T5 bias"},
}
"""Colour, marker and display name of each positional scheme."""


def use_book_style() -> None:
    """Set the book's matplotlib defaults (size, grid, fonts). Call once per notebook."""
    plt.rcParams.update(
        {
            "figure.figsize": (6.4, 4.0),
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
    """Display name of a scheme (``"rope"`` → ``"RoPE"``)."""
    return SCHEME_STYLE.get(scheme, {}).get("label", scheme)


def plot_perplexity_vs_length(
    results: Mapping[str, Mapping[int, float]],
    *,
    train_length: int,
    spread: Mapping[str, Mapping[int, float]] | None = None,
    ax: Axes | None = None,
    ylabel: str = "test perplexity (bytes)",
) -> Figure:
    """Perplexity against evaluation length, one line per scheme, L_train marked.

    Args:
        results: scheme → {evaluation length L → perplexity}.
        train_length: L_train, drawn as a dashed vertical line.
        spread: optional scheme → {L → standard deviation}, drawn as a band.
        ax: axes to draw on (a new figure otherwise).

    Returns:
        The figure (returned, not shown, so a notebook cell displays it once).
    """
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    for scheme, curve in results.items():
        lengths: Sequence[int] = sorted(curve)
        values = [curve[L] for L in lengths]
        style = SCHEME_STYLE.get(scheme, {})
        ax.plot(lengths, values, marker=style.get("marker", "o"), color=style.get("color"), label=scheme_label(scheme))
        if spread is not None and scheme in spread:
            sd = [spread[scheme][L] for L in lengths]
            ax.fill_between(lengths, [v - s for v, s in zip(values, sd)], [v + s for v, s in zip(values, sd)], color=style.get("color"), alpha=0.2)
    ax.axvline(train_length, color="black", linestyle="--", linewidth=1)
    ax.annotate(r"$L_\mathrm{train}$", (train_length, 1), xycoords=("data", "axes fraction"), xytext=(3, -12), textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("evaluation length L (bytes)")
    ax.set_ylabel(ylabel)
    ax.legend()
    fig.tight_layout()
    return fig
