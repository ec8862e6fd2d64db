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
import numpy as np  # noqa: E402
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


def test_line_styles_by_scheme() -> None:
    fig = plot_perplexity_vs_length(CURVES, train_length=128,
                                    linestyles={"rope": "--", "alibi": ":"})
    styles = {line.get_label(): line.get_linestyle() for line in fig.axes[0].get_lines()}
    assert styles[scheme_label("rope")] == "--" and styles[scheme_label("alibi")] == ":"
    assert styles[scheme_label("sinusoidal")] == "-"
    with pytest.raises(ValueError, match="nope"):
        plot_perplexity_vs_length(CURVES, train_length=128, linestyles={"nope": "--"})


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


def test_condition_bars_leave_gaps_for_missing_pairs() -> None:
    from posenc_book.plotting import plot_condition_bars

    colors = {"a": "#111111", "b": "#222222"}
    fig, ax = plot_condition_bars({("rope", "a"): 2.0, ("rope", "b"): 1.5, ("alibi", "a"): 1.0},
                                  ["rope", "alibi"], colors, ylabel="ratio", title="t")
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == [1.0, 1.5, 2.0]  # no bar for (alibi, b)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["RoPE", "ALiBi"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b"]
    plt.close(fig)
    with pytest.raises(ValueError, match="no entry for the conditions"):
        plot_condition_bars({("rope", "c"): 1.0}, ["rope"], colors, ylabel="", title="")


def test_rope_pair_terms_split_at_the_critical_pair() -> None:
    from posenc_book.plotting import plot_rope_pair_terms

    curves = torch.randn(8, 64)
    fig = plot_rope_pair_terms(curves, 8, 5)
    left, right = fig.axes
    assert len(left.get_lines()) == 5 + 1 and len(right.get_lines()) == 3 + 1  # + L_train line
    assert right.get_title() == "pairs 5–7: no full turn"
    plt.close(fig)
    with pytest.raises(ValueError, match="critical_pair"):
        plot_rope_pair_terms(curves, 8, 8)


def test_weight_by_distance_one_panel_per_scheme() -> None:
    from posenc_book.plotting import plot_weight_by_distance

    profiles = {s: {L: torch.rand(L) + 0.1 for L in (16, 64)} for s in ("none", "rope")}
    fig = plot_weight_by_distance(profiles, 16, layer=1, near=4)
    assert [ax.get_title() for ax in fig.axes[:2]] == ["NoPE, layer 1", "RoPE, layer 1"]
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == ["1", "4", "16", "64"]
    plt.close(fig)
    with pytest.raises(ValueError, match="at most 4 schemes"):
        plot_weight_by_distance({s: {16: torch.rand(16)} for s in "abcde"}, 16, layer=0)

def test_mark_train_length_draws_a_labelled_dashed_line() -> None:
    from posenc_book.plotting import mark_train_length

    fig, ax = plt.subplots()
    mark_train_length(ax, 128)
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [128, 128] and line.get_linestyle() == "--"
    assert line.get_label() == r"$L_\mathrm{train}$ = 128"
    with pytest.raises(ValueError, match="train_length"):
        mark_train_length(ax, 0)


def test_log_axes_sets_both_scales_and_plain_ticks() -> None:
    from posenc_book.plotting import log_axes

    fig, ax = plt.subplots()
    ax.plot([1, 2048], [1, 2048])
    log_axes(ax, [1, 8, 128, 2048], "xy")
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert tick_texts(ax.xaxis) == tick_texts(ax.yaxis) == ["1", "8", "128", "2048"]
    fig, ax = plt.subplots()
    ax.plot([1, 2048], [1, 2])
    log_axes(ax, [1, 2048], "x")
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "linear")
    with pytest.raises(ValueError, match="axes"):
        log_axes(ax, [1, 2], "z")


def test_show_figure_moves_the_legend_below(monkeypatch) -> None:
    from posenc_book.plotting import show_figure

    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(True))
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], label="a curve")
    ax.legend()
    show_figure(fig)
    assert shown == [True] and ax.get_legend() is None and len(fig.legends) == 1
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], label="a curve")
    ax.legend()
    show_figure(fig, legend=None)
    assert ax.get_legend() is not None and not fig.legends
    with pytest.raises(ValueError, match="legend"):
        show_figure(fig, legend="above")


def test_log_bins_and_binned_means() -> None:
    from posenc_book.plotting import binned_means, log_bins

    edges, centres = log_bins(1024, 11)
    assert edges[0] == 1 and edges[-1] == 1024 and len(edges) == 11
    assert all(2**i - 1 <= e <= 2**i for i, e in enumerate(edges))  # rounded down
    assert centres[0] == pytest.approx(2**0.5) and len(centres) == len(edges) - 1
    few = log_bins(16, 40)[0]  # 40 edges asked for, rounded down to integers
    assert few[0] == 1 and few[-1] == 16 and (few[1:] > few[:-1]).all() and len(few) < 16
    curve = torch.arange(10, dtype=torch.float64)
    assert binned_means(curve, [0, 2, 6, 10]) == [0.5, 3.5, 7.5]
    assert binned_means(curve, [0, 5, 20]) == [2.0]  # a range past the end is left out
    assert binned_means(curve.numpy(), [0, 5]) == [2.0]
    with pytest.raises(ValueError, match="edges"):
        binned_means(curve, [0, 5, 5])
    with pytest.raises(ValueError, match="stop"):
        log_bins(1, 10)


def test_decay_curves_and_angle_errors_figures() -> None:
    from posenc_book.plotting import plot_angle_errors, plot_decay_curves

    distances = np.array([0, 1, 2, 10, 100, 1000])
    curves = {"bound B(r)": np.linspace(2, 1, 6), "q with itself": np.linspace(1, 0.1, 6)}
    fig = plot_decay_curves({10000.0: curves, 500000.0: curves}, distances)
    assert [ax.get_title() for ax in fig.axes] == ["base 10 000", "base 500 000"]
    assert fig.axes[0].get_lines()[1].get_label() == "bound B(r) / B(0)"
    plt.close(fig)
    with pytest.raises(ValueError, match="start at 0"):
        plot_decay_curves({1.0: curves}, distances[1:])
    fig = plot_angle_errors(distances[1:], {"float32": np.ones(5)}, 128)
    assert fig.axes[0].get_title() == "Angle precision, head_dim 128, base 10 000"
    assert fig.axes[0].get_xscale() == "log"
    plt.close(fig)
    with pytest.raises(ValueError, match="errors"):
        plot_angle_errors(distances, {}, 128)


def test_time_by_length_draws_each_variant_on_log2_axes() -> None:
    import pandas as pd

    from posenc_book.plotting import plot_time_by_length

    medians = pd.DataFrame([[1.0, 1.1], [2.0, 4.0]], index=["causal", "ALiBi"],
                           columns=[1024, 2048])
    fig = plot_time_by_length(medians, medians * 0.9, medians * 1.1,
                              {"causal": ("none", "-", "x"), "ALiBi": ("alibi", ":", "v")})
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["causal", "ALiBi"]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    plt.close(fig)
    with pytest.raises(KeyError):
        plot_time_by_length(medians, medians, medians, {"T5": ("t5", "-", "s")})

def test_mark_vertical_writes_its_text_beside_the_line() -> None:
    from posenc_book.plotting import mark_vertical

    fig, ax = plt.subplots()
    ax.plot([1, 100], [0, 1])
    mark_vertical(ax, 10, "right of it")
    mark_vertical(ax, 50, "left of it", side="left", color="gray", linestyle=":")
    assert [line.get_xdata()[0] for line in ax.lines[1:]] == [10, 50]
    assert ax.lines[2].get_linestyle() == ":" and ax.lines[2].get_color() == "gray"
    right, left = ax.texts
    assert right.get_text() == "right of it" and right.get_ha() == "left"
    assert left.get_ha() == "right" and left.xyann == (-4, 0)
    assert ax.get_legend_handles_labels() == ([], [])  # not in the legend
    with pytest.raises(ValueError, match="side"):
        mark_vertical(ax, 1, "x", side="top")

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


def test_passkey_maps_title_the_pooled_seeds_and_label_the_axes() -> None:
    import pandas as pd

    from posenc_book.plotting import passkey_panel_title, plot_passkey_maps

    shares = pd.DataFrame({"share": [1.0, 0.2, 0.1, 1.0, 1.0],
                           "meets": [True, False, False, True, True],
                           "kept": [True, False, True, True, True]},
                          index=pd.MultiIndex.from_tuples(
                              [("alibi", 0), ("alibi", 1), ("none", 0), ("rope", 0),
                               ("rope", 1)], names=["scheme", "seed"]))
    assert passkey_panel_title(shares, "alibi") == "ALiBi, seed 0\n(seed 1: below bar)"
    assert passkey_panel_title(shares, "none") == "NoPE, seed 0\n(below bar)"
    assert passkey_panel_title(shares, "rope") == "RoPE, seeds 0, 1\n"
    with pytest.raises(KeyError, match="t5"):
        passkey_panel_title(shares, "t5")
    grid = np.array([[0.5, 1.0], [0.0, np.nan]])
    fig = plot_passkey_maps({"a\nuntuned": grid, "": None}, ncols=2, multiples=[1, 2],
                            depths=[0.0, 0.5])
    (panel,) = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert panel.get_title() == "a\nuntuned"  # titles default to the panel names
    assert [t.get_text() for t in panel.get_xticklabels()] == ["1", "2"]
    assert [t.get_text() for t in panel.get_yticklabels()] == ["0", "0.5"]
    assert panel.get_xlabel() == "L / L_train" and panel.get_ylabel() == "key depth"
    plt.close(fig)


def test_end_of_window_loss_draws_dots_and_a_mean_line_per_scheme() -> None:
    import pandas as pd

    from posenc_book.plotting import plot_end_of_window_loss

    draws = pd.DataFrame({"scheme": ["rope", "rope", "alibi", "alibi"],
                          "L": [8, 16, 8, 16], "nll_unseen": [1.5, 2.5, 1.5, 1.6]})
    end_loss = draws.groupby(["scheme", "L"]).nll_unseen.mean()
    fig = plot_end_of_window_loss(draws, end_loss, ["rope", "alibi"], [8, 16], 8,
                                  ylim=(1, 3))
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.get_lines()] == ["RoPE", "ALiBi"]
    assert ax.get_lines()[0].get_ydata().tolist() == [1.5, 2.5]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2"]
    assert ax.get_ylim() == (1, 3) and len(ax.collections) == 2
    plt.close(fig)
    with pytest.raises(ValueError, match="train_length"):
        plot_end_of_window_loss(draws, end_loss, ["rope"], [8], 0)


def test_heat_map_grid_labels_outer_panels_and_shares_one_colour_bar():
    from posenc_book.plotting import plot_heat_map_grid

    images = [torch.rand(4, 4) for _ in range(6)]
    fig = plot_heat_map_grid(images, (2, 3), titles=[f"p{i}" for i in range(6)],
                             row_labels=["row 1", "row 2"], xlabel="key", vmin=0, vmax=1,
                             colorbar_label="weight", extend="max", suptitle="grid")
    panels, colorbar = fig.axes[:6], fig.axes[6]
    assert len(fig.axes) == 7 and colorbar.get_ylabel() == "weight"
    assert [ax.get_title() for ax in panels] == [f"p{i}" for i in range(6)]
    assert [ax.get_ylabel() for ax in panels] == ["row 1", "", "", "row 2", "", ""]
    assert [ax.get_xlabel() for ax in panels] == ["", "", "", "key", "key", "key"]
    assert panels[4].images[0].get_clim() == (0, 1)
    assert fig._suptitle.get_text() == "grid"
    plt.close(fig)
    with pytest.raises(ValueError, match="images"):
        plot_heat_map_grid(images, (2, 2))
    with pytest.raises(ValueError, match="row_labels"):
        plot_heat_map_grid(images, (2, 3), row_labels=["one"])


# issue 37: figures moved out of chapters 04, 05, 08 and 09 ---------------------------

def test_gap_bars_draw_noise_at_the_bound_and_reject_bad_input() -> None:
    from posenc_book.plotting import plot_gap_bars

    colors = {"from the mask": "#1f77b4", "columns": "#ff7f0e"}
    fig = plot_gap_bars({"rope": (1e-7, 2e-6), "sinusoidal": (1e-7, 3.2)}, colors, 1e-4,
                        ylabel="max |Δ logit|")
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("< 1e-4") == 3 and "3.2" in texts
    assert [t.get_text() for t in ax.get_xticklabels()] == ["RoPE", "Sinusoidal"]
    plt.close(fig)
    with pytest.raises(ValueError, match="2 values per scheme"):
        plot_gap_bars({"rope": (1.0,)}, colors, 1e-4, ylabel="y")
    with pytest.raises(ValueError, match="bound"):
        plot_gap_bars({"rope": (1.0, 2.0)}, colors, 0.0, ylabel="y")


def test_loss_curves_start_at_their_first_step_and_cut_the_top() -> None:
    from posenc_book.plotting import plot_loss_curves

    curve = np.linspace(3.0, 2.0, 81)  # steps 20 … 100
    fig = plot_loss_curves({"a": (curve, "red", "-"), "b": (curve + 0.1, "blue", "--")},
                           first_step=20, xlim=(40, 100), title="t")
    ax = fig.axes[0]
    assert ax.lines[0].get_xdata()[0] == 20 and ax.get_xlim() == (40, 100)
    assert ax.get_ylim()[1] == pytest.approx(curve[20] + 0.1 + 0.05)
    plt.close(fig)
    with pytest.raises(ValueError, match="first_step"):
        plot_loss_curves({"a": (curve, "red", "-")}, first_step=20, xlim=(10, 100),
                         title="t")
    with pytest.raises(ValueError, match="at least one"):
        plot_loss_curves({}, first_step=20, xlim=(40, 100), title="t")


def test_head_curves_one_labelled_line_per_scheme_and_the_uniform_line() -> None:
    from posenc_book.plotting import plot_head_curves

    curves = {"none": torch.rand(4, 1024) + 1, "alibi": torch.rand(4, 1024) + 1}
    fig = plot_head_curves(curves, {"none": "-", "alibi": "--"}, 128,
                           label="{scheme}, heads of layer 1", ylabel="n", title="t")
    labels = [line.get_label() for line in fig.axes[0].lines
              if not line.get_label().startswith("_")]
    assert labels[:2] == ["NoPE, heads of layer 1", "ALiBi, heads of layer 1"]
    assert "uniform attention, t + 1" in labels
    plt.close(fig)
    with pytest.raises(ValueError, match="lacks"):
        plot_head_curves(curves, {"rope": "-"}, 128, label="{scheme}", ylabel="n",
                         title="t")


def test_position_readout_and_loss_by_position() -> None:
    import pandas as pd

    from posenc_book.plotting import plot_loss_by_position, plot_position_readout

    quartiles = pd.DataFrame({"t": [2.0, 20.0, 200.0], "25%": [1.0, 10.0, 50.0],
                              "50%": [2.0, 15.0, 60.0], "75%": [3.0, 20.0, 70.0]})
    fig = plot_position_readout(quartiles, 2048, 128, [1, 8, 128, 2048], ylabel="y",
                                title="t")
    assert fig.axes[0].get_xscale() == "log" == fig.axes[0].get_yscale()
    plt.close(fig)
    curves = {"none": torch.rand(2048), "alibi": torch.rand(128)}
    fig = plot_loss_by_position(curves, 2048, 128, [1, 8, 128, 2048],
                                levels={"bigram": (0.5, ":")}, title="t")
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert {"NoPE", "ALiBi", "bigram table"} <= set(labels)
    plt.close(fig)
    with pytest.raises(ValueError, match="longer than"):
        plot_loss_by_position({"none": torch.rand(4096)}, 2048, 128, [1, 2048], title="t")


def test_loss_by_context_ticks_each_group() -> None:
    from posenc_book.plotting import plot_loss_by_context
    from posenc_book.tables import context_groups, loss_by_context

    edges, labels = context_groups(16)
    table = loss_by_context({"rope": torch.rand(16), "alibi": torch.rand(16)}, 16)
    fig = plot_loss_by_context(table, edges, ["rope", "alibi"], title="t")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == labels
    plt.close(fig)
    with pytest.raises(ValueError, match="groups"):
        plot_loss_by_context(table.iloc[:2], edges, ["rope"], title="t")


def _sweep_frame():
    import pandas as pd

    rows = [{"protocol": p, "scheme": s, "eval_length": L, "seed": seed,
             "perplexity": 8.0 + seed + L / 1000}
            for p in ("nonoverlapping", "sliding") for s in ("rope", "alibi")
            for L in (128, 256) for seed in (0, 1)]
    return pd.DataFrame(rows)


def test_sweep_protocols_two_panels_and_a_missing_protocol() -> None:
    from posenc_book.plotting import plot_sweep_protocols

    frame = _sweep_frame()
    fig = plot_sweep_protocols(frame, 128, title="ci")
    assert [ax.get_title() for ax in fig.axes[:2]] == ["Non-overlapping windows",
                                                       "Sliding windows"]
    plt.close(fig)
    with pytest.raises(ValueError, match="sliding"):
        plot_sweep_protocols(frame[frame.protocol == "nonoverlapping"], 128, title="ci")


def test_ratio_marks_one_mark_per_seed_and_the_same_rows() -> None:
    from posenc_book.plotting import plot_ratio_marks

    panel = {s: {"nonoverlapping": [1.0, 1.1], "sliding": [1.2, 1.3]}
             for s in ("rope", "alibi")}
    fig = plot_ratio_marks({"ci scale": panel, "book scale": panel}, xlabel="ratio")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["RoPE", "ALiBi"]
    assert sum(len(c.get_offsets()) for c in fig.axes[0].collections) == 8
    plt.close(fig)
    with pytest.raises(ValueError, match="same schemes"):
        plot_ratio_marks({"a": panel, "b": {"rope": panel["rope"]}}, xlabel="x")


def test_table_rows_two_panels_and_mismatched_lengths() -> None:
    from posenc_book.plotting import plot_table_rows

    fig = plot_table_rows(torch.rand(128), torch.rand(128), torch.rand(128), title="t")
    assert [ax.get_xlabel() for ax in fig.axes] == ["position p", "position p"]
    plt.close(fig)
    with pytest.raises(ValueError, match="one length"):
        plot_table_rows(torch.rand(128), torch.rand(64), torch.rand(128), title="t")


def test_plot_per_run_draws_a_dot_per_run_and_a_median_bar() -> None:
    import pandas as pd

    from posenc_book.plotting import plot_per_run

    table = pd.DataFrame([[1.0, 2.0, 3.0], [0.5, 0.6, 0.7]], index=["a", "b"],
                         columns=[1, 2, 3])
    fig = plot_per_run({"left": table, "right": table}, label="ratio",
                       colours={"a": "red"}, band=(0.8, 1.2))
    left = fig.axes[0]
    assert [t.get_text() for t in left.get_xticklabels()] == ["a", "b"]
    assert left.get_ylabel() == "ratio" and left.get_title() == "left"
    assert sum(len(c.get_offsets()) for c in left.collections if c.get_offsets().size) == 6
    bars = [line for line in left.get_lines() if line.get_color() == "black"]
    assert sorted(bar.get_ydata()[0] for bar in bars) == [0.6, 2.0]  # the medians
    plt.close(fig)
    fig = plot_per_run({"": table}, label="ratio", horizontal=True, log=True)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "ratio"
    plt.close(fig)
    with pytest.raises(ValueError, match="band"):
        plot_per_run({"": table}, label="ratio", band=(2, 1))
    with pytest.raises(ValueError, match="panels"):
        plot_per_run({}, label="ratio")


def test_plot_long_context_runs() -> None:
    """One panel per text, one line per run, the trained context marked; no runs: error."""
    from posenc_book.plotting import plot_long_context_runs

    blocks = [{"first_position": p, "perplexity": v} for p, v in ((0, 30), (4, 60))]
    run = {"run": {"block": 4, "num_tokens": 8}, "blocks": blocks}
    key = ("none", 1.0)
    fig = plot_long_context_runs({"A": {key: run}, "B": {key: run}}, {key: "no scaling"},
                                 {key: ("o", "-")}, {"none": "black"}, 4, [30, 60])
    assert len(fig.axes) == 2 and fig.axes[0].lines[0].get_xdata().tolist() == [2, 6]
    with pytest.raises(ValueError, match="at least one"):
        plot_long_context_runs({}, {}, {}, {}, 4, [30])


def test_plot_frequency_ratios() -> None:
    """One line per method on a log2 axis, i_c marked; no methods: error."""
    from posenc_book.plotting import plot_frequency_ratios

    fig = plot_frequency_ratios({"PI": [0.25] * 4, "YaRN": [1, 0.5, 0.25, 0.25]},
                                {"PI": "red", "YaRN": "blue"}, 2, ylabel="ratio")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and [x.get_label() for x in ax.lines[:2]] == [
        "PI", "YaRN"]
    assert ax.lines[0].get_color() == "red" and ax.get_ylabel() == "ratio"
    plt.close(fig)
    with pytest.raises(ValueError, match="1 to 4"):
        plot_frequency_ratios({}, {}, 2, ylabel="ratio")


def test_plot_extension_panels() -> None:
    """One panel per title, styles set on the named lines, legend under the last."""
    from posenc_book.plotting import plot_extension_panels

    lines = {"RoPE, PI": {128: 5.0, 256: 9.0}, "alibi": {128: 6.0, 256: 6.1}}
    fig = plot_extension_panels({"before": lines, "after": lines}, 128,
                                {"RoPE, PI": {"color": "red", "marker": "s"},
                                 "ALiBi": {"linestyle": ":"}}, yticks=[5, 7])
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == ""
    styled = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert styled["RoPE, PI"].get_color() == "red" and styled["ALiBi"].get_linestyle() == ":"
    plt.close(fig)
    with pytest.raises(ValueError, match="at least one"):
        plot_extension_panels({}, 128, {}, yticks=[5])


def test_recall_and_perplexity_draws_both_metrics_with_their_range() -> None:
    import pandas as pd

    from posenc_book.plotting import plot_recall_and_perplexity

    per_draw = pd.DataFrame({"scheme": ["rope"] * 4, "task": ["4k2d"] * 4, "L": [128, 128, 256, 256],
                             "accuracy": [0.9, 1.0, 0.1, 0.3]})
    nll = pd.DataFrame({"scheme": ["rope"] * 4, "L": [128, 128, 256, 256], "nll": [1.6, 1.8, 2.0, 2.2]})
    fig = plot_recall_and_perplexity(per_draw, nll, ["rope"], {"4k2d": "-"}, 128)
    left, right = fig.axes
    assert list(left.lines[0].get_ydata()) == pytest.approx([95.0, 20.0])
    assert list(right.lines[0].get_ydata()) == pytest.approx([1.7, 2.1])
    assert [t.get_text() for t in right.get_legend().get_texts()] == ["RoPE"]
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["4k2d"]
    band = left.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(10.0) and band.max() == pytest.approx(100.0)
    plt.close(fig)
    with pytest.raises(ValueError, match="train_length"):
        plot_recall_and_perplexity(per_draw, nll, ["rope"], {"4k2d": "-"}, 0)
    with pytest.raises(ValueError, match=r"nll lacks the columns \['nll'\]"):
        plot_recall_and_perplexity(per_draw, nll.drop(columns="nll"), ["rope"], {"4k2d": "-"}, 128)
    with pytest.raises(ValueError, match="must not be empty"):
        plot_recall_and_perplexity(per_draw, nll, [], {"4k2d": "-"}, 128)
