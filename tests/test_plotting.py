"""posenc_book.plotting: figures a reader can read (CONTRIBUTING.md, "Outputs a reader
can read").

Each test checks what a reader sees in the drawn figure: tick labels as text, axis
labels, where the L_train label sits relative to the legend, the colour bar of a heat
map.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from posenc_book.plotting import (  # noqa: E402
    FIGURE_DPI,
    MAX_FIGURE_WIDTH_IN,
    MIN_PHONE_FONT_PX,
    PIXEL_RATIO,
    SCHEME_STYLE,
    TICK_FONT_PT,
    legend_below,
    plain_log_ticks,
    plot_attention_map,
    plot_perplexity_vs_length,
    retina_png,
    scheme_label,
    use_book_style,
)

LENGTHS = [128, 256, 512, 1024, 2048]
CURVES = {  # made-up curves of the shape the sweep produces
    "alibi": {L: 5.0 for L in LENGTHS},
    "rope": {L: 4.8 * (L / 128) ** 0.45 for L in LENGTHS},
    "sinusoidal": {L: 5.2 * (L / 128) ** 0.15 for L in LENGTHS},
    "learned": {128: 6.0},
}


@pytest.fixture(autouse=True)
def _close_figures():
    use_book_style()
    yield
    plt.close("all")


def tick_texts(axis) -> list[str]:
    axis.figure.canvas.draw()
    return [
        t.get_text() for t in axis.get_ticklabels() if t.get_visible() and t.get_text()
    ]


def test_x_ticks_are_the_lengths_as_plain_numbers() -> None:
    fig = plot_perplexity_vs_length(CURVES, train_length=128)
    assert tick_texts(fig.axes[0].xaxis) == ["128", "256", "512", "1024", "2048"]


def test_y_label_is_perplexity_without_a_unit() -> None:
    fig = plot_perplexity_vs_length(CURVES, train_length=128)
    assert fig.axes[0].get_ylabel() == "perplexity"
    assert fig.axes[0].get_xlabel() == "evaluation length L (bytes)"


def test_log_y_axis_reads_as_plain_numbers() -> None:
    fig = plot_perplexity_vs_length(CURVES, train_length=128, yscale="log")
    labels = tick_texts(fig.axes[0].yaxis)
    assert labels, "a log y axis needs at least one labelled tick"
    for label in labels:
        float(label)  # "5", "10", "20": no 10^1 or 2×10^1 mathtext
        assert "$" not in label and "times" not in label


def test_plain_log_ticks_rejects_bad_input() -> None:
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="axis"):
        plain_log_ticks(ax, "z")
    with pytest.raises(ValueError, match="positive"):
        plain_log_ticks(ax, "x", [0, 128])


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("yscale", ["linear", "log"])
def test_train_length_label_is_not_covered_by_the_legend(yscale: str) -> None:
    fig = plot_perplexity_vs_length(  # a title as wide as the plot, over the label
        CURVES, train_length=128, yscale=yscale,
        title="Trained on 128-byte windows, tested on longer ones (one seed)",
    )
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    marker = [t for t in ax.texts if "L_" in t.get_text()]
    assert len(marker) == 1
    box = marker[0].get_window_extent(renderer)
    assert not overlaps(box, ax.get_legend().get_window_extent(renderer))
    assert not overlaps(
        box, ax.title.get_window_extent(renderer)
    ), "title and L_train label collide"


def test_display_names_in_the_legend() -> None:
    fig = plot_perplexity_vs_length(CURVES, train_length=128)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["ALiBi", "RoPE", "Sinusoidal", "Learned"]
    assert [scheme_label(s) for s in SCHEME_STYLE] == [
        "NoPE",
        "Sinusoidal",
        "Learned",
        "RoPE",
        "ALiBi",
        "T5 bias",
    ]


def test_one_panel_fits_the_column() -> None:
    fig = plot_perplexity_vs_length(CURVES, train_length=128)
    width_px = fig.get_figwidth() * fig.dpi
    assert width_px <= 720, f"a one-panel figure is {width_px:.0f} px wide"


def test_spread_band_and_bad_arguments() -> None:
    fig = plot_perplexity_vs_length(
        CURVES, train_length=128, spread={"rope": {L: 0.1 for L in LENGTHS}}
    )
    assert len(fig.axes[0].collections) == 1
    with pytest.raises(ValueError, match="train_length"):
        plot_perplexity_vs_length(CURVES, train_length=0)
    with pytest.raises(ValueError, match="yscale"):
        plot_perplexity_vs_length(CURVES, train_length=128, yscale="symlog")
    with pytest.raises(ValueError, match="at least one"):
        plot_perplexity_vs_length({}, train_length=128)


def test_attention_map_has_labelled_axes_and_a_colour_bar() -> None:
    probabilities = torch.softmax(torch.randn(8, 8), dim=-1)
    fig = plot_attention_map(probabilities, title="RoPE, head 1")
    heat, bar = fig.axes
    assert (
        heat.get_xlabel() == "key position s"
        and heat.get_ylabel() == "query position t"
    )
    assert bar.get_ylabel() == "attention probability"
    with pytest.raises(ValueError, match="2-D"):
        plot_attention_map(torch.zeros(2, 3, 4))


def test_retina_png_has_twice_the_pixels_of_its_css_size() -> None:
    import io

    from PIL import Image

    fig = plot_perplexity_vs_length(CURVES, train_length=128)
    png, size = retina_png(fig)
    pixels = Image.open(io.BytesIO(png)).size
    assert pixels[0] // PIXEL_RATIO == size["width"] and PIXEL_RATIO == 2
    assert set(size) == {"width"}  # a fixed height would stretch it on a phone
    # tight bounding box: about the figure's size in CSS px, never wider
    assert 0.9 * fig.get_figwidth() * FIGURE_DPI < size["width"]
    assert size["width"] <= fig.get_figwidth() * FIGURE_DPI + 1
    assert retina_png(plt.figure()) is None  # nothing drawn: no image, as in IPython


def test_text_is_legible_on_a_phone_at_the_widest_figure() -> None:
    """A figure drawn MAX_FIGURE_WIDTH_IN wide is shown 358 px wide in a 390 px window
    (the column measured in Chromium); its tick labels must stay >= MIN_PHONE_FONT_PX."""
    assert plt.rcParams["font.size"] == TICK_FONT_PT
    assert plt.rcParams["figure.dpi"] == FIGURE_DPI
    shown = TICK_FONT_PT * FIGURE_DPI / 72 * 358 / (MAX_FIGURE_WIDTH_IN * FIGURE_DPI)
    assert shown >= MIN_PHONE_FONT_PX


def test_legend_below_names_the_lines_of_several_panels_once() -> None:
    fig, axes = plt.subplots(1, 2)
    axes[0].plot([0, 1], [0, 1], label="pair 0")
    axes[0].plot([0, 1], [1, 0], label="shared")
    axes[1].plot([0, 1], [0, 1], label="pair 1")
    axes[1].plot([0, 1], [1, 0], label="shared")
    axes[1].legend()
    fig.tight_layout()
    legend_below(fig, axes, ncol=3)
    assert axes[1].get_legend() is None and len(fig.legends) == 1
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["pair 0", "shared", "pair 1"]


def test_legend_below_sits_under_the_axes_and_covers_nothing() -> None:
    fig = plot_perplexity_vs_length(CURVES, train_length=128)
    legend_below(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    assert ax.get_legend() is None and len(fig.legends) == 1
    box = fig.legends[0].get_window_extent(renderer)
    below = ax.xaxis.label.get_window_extent(renderer)
    assert box.y1 <= below.y0 + 1, "the legend must hang below the x label"
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["ALiBi", "RoPE", "Sinusoidal", "Learned"]


def test_plot_share_maps_labels_cells_and_leaves_empty_panels() -> None:
    import numpy as np

    from posenc_book.plotting import plot_share_maps

    grid = np.array([[0.25, np.nan], [1.0, 0.0]])
    fig = plot_share_maps({"a": grid, "b": None, "c": grid}, {"a": "A", "c": "C"}, ncols=2,
                          x_ticks=["1", "2"], y_ticks=["0", "1"], x_label="x",
                          y_label="y", colorbar_label="share")
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["A", "C"]
    assert sorted(t.get_text() for t in panels[0].texts) == ["0", "100", "25"]  # NaN blank
    plt.close(fig)
    with pytest.raises(ValueError, match="ncols"):
        plot_share_maps({"a": grid}, {"a": "A"}, ncols=0, x_ticks=[], y_ticks=[],
                        x_label="", y_label="", colorbar_label="")
