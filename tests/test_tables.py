"""posenc_book.tables: the book's HTML for a DataFrame."""

from __future__ import annotations

import pandas as pd
import pytest

from posenc_book.tables import table_html, use_book_tables


def frame() -> pd.DataFrame:
    df = pd.DataFrame(
        {"128": ["11.47 ± 0.06", "7.02 ± 0.11"], "256": ["—", "< 1e-5"],
         "note": ["flat", "rises past L_train"]},
        index=pd.MultiIndex.from_tuples(
            [("non-overlapping", "NoPE"), ("non-overlapping", "RoPE")],
            names=["protocol", "scheme"]),
    )
    df.columns.name = "L (bytes)"
    return df


def test_one_header_row_of_labels_with_the_index_names_first() -> None:
    html = table_html(frame())
    header = html.split("<thead>")[1].split("</thead>")[0].strip().splitlines()
    assert len(header) == 2  # the columns' name, then the labels: no empty index-name row
    assert 'colspan="3">L (bytes)</th>' in header[0]
    assert header[1].startswith('<tr><th class="index">protocol</th>'
                                '<th class="index">scheme</th>')


def test_numbers_right_text_left() -> None:
    html = table_html(frame())
    assert '<td class="num">11.47 ± 0.06</td>' in html
    assert '<td class="num">—</td>' in html and '<td class="num">&lt; 1e-5</td>' in html
    assert '<td class="text">rises past L<sub>train</sub></td>' in html


def test_a_repeated_outer_label_is_shown_once() -> None:
    html = table_html(frame())
    assert html.count("non-overlapping") == 1 and 'rowspan="2"' in html


def test_deterministic_and_escaped() -> None:
    df = pd.DataFrame({"x": ["<b>"]})
    assert table_html(df) == table_html(df.copy())
    assert "&lt;b&gt;" in table_html(df) and "<style" not in table_html(df)


def test_a_default_range_index_is_not_shown() -> None:
    html = table_html(pd.DataFrame({"a": [1, 2]}))
    assert 'class="index"' not in html and '<td class="num">2</td>' in html


def test_column_multiindex_is_refused_with_the_argument_named() -> None:
    df = pd.DataFrame([[1, 2]], columns=pd.MultiIndex.from_tuples([("a", "x"), ("a", "y")]))
    with pytest.raises(ValueError, match="frame.columns"):
        table_html(df)


def test_outside_ipython_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert use_book_tables() is False


def test_in_ipython_every_dataframe_is_drawn_by_table_html() -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or InteractiveShell.instance()
    shell.display_formatter.formatters["text/html"].enabled = True
    assert use_book_tables() is True
    data, _ = shell.display_formatter.format(frame().reset_index(level=0))
    assert data["text/html"] == table_html(frame().reset_index(level=0))
    assert "protocol" in data["text/plain"]  # the plain text is pandas' own


def test_a_link_is_drawn_as_a_link_and_reads_as_text() -> None:
    from posenc_book.tables import Link

    df = pd.DataFrame({"verdict": ["fails"]},
                      index=pd.Index([Link("RoPE <extrapolates>", "#ledger-claim-11")],
                                     name="claim"))
    html = table_html(df)
    assert ('<th class="index" rowspan="1">' not in html
            and '<a class="reference internal" href="#ledger-claim-11">'
            'RoPE &lt;extrapolates&gt;</a>' in html)
    assert "RoPE <extrapolates>" in df.to_string()
    with pytest.raises(ValueError, match="href"):
        Link("x", "")


def test_floats_are_shown_as_pandas_shows_them_not_as_their_binary_expansion() -> None:
    import numpy as np

    df = pd.DataFrame({"share (%)": [np.float32(1.55), np.float32(4.03)],
                       "x": [0.1234567, 12.0]}).astype(object).T
    html = table_html(df)
    assert "1.5499999523162842" not in html and '<td class="num">1.55</td>' in html
    assert html.count("0.123457") == 1


@pytest.mark.parametrize(
    "text, shown",
    [
        ("PPL(16 L_train)", "PPL(16 L<sub>train</sub>)"),
        ("width d_model", "width d<sub>model</sub>"),
        ("R_tᵀ R_s = R_(t−s)", "R<sub>t</sub>ᵀ R<sub>s</sub> = R<sub>t−s</sub>"),
        ("m_h = 2^-4", "m<sub>h</sub> = 2<sup>-4</sup>"),
        ("‖q‖ c^(−s)", "‖q‖ c<sup>−s</sup>"),
        ("e^{irθ}", "e<sup>irθ</sup>"),
        ("rope_scaling, max_position_embeddings", "rope_scaling, max_position_embeddings"),
        ("x < 1e-5", "x &lt; 1e-5"),
    ],
)


def test_plain_text_notation_is_set_as_sub_and_superscripts(text: str, shown: str) -> None:
    from posenc_book.tables import notation_html

    assert notation_html(text) == shown


def test_notation_in_a_table_and_plain_text_unchanged() -> None:
    df = pd.DataFrame({"PPL(L_train)": [7.02]}, index=pd.Index(["RoPE"], name="scheme"))
    assert "PPL(L<sub>train</sub>)" in table_html(df) and "L_train" in df.to_string()


def test_mean_spread_table_std_and_range() -> None:
    from posenc_book.tables import mean_spread_table

    data = pd.DataFrame({"model": ["b", "b", "a", "a", "c"], "L": [2, 1, 1, 1, 1],
                         "PPL": [4.0, 1.0, 1.0, 3.0, 5.0]})
    table = mean_spread_table(data, "model", "L", "PPL", order=["a", "b", "x"],
                              labels={"a": "A", "b": "B"}.get, column_label="L = {}")
    assert table.index.tolist() == ["A", "B"]
    assert table.columns.tolist() == ["L = 1", "L = 2"]
    assert table.loc["A", "L = 1"] == "2.00 ± 1.41" and table.loc["A", "L = 2"] == "—"
    assert table.loc["B", "L = 1"] == "1.00 ± 0.00"  # one value: no spread
    ranges = mean_spread_table(data, "model", "L", "PPL", spread="range",
                               number="{:.1f}".format)
    assert ranges.loc["a", 1] == "2.0 (1.0–3.0)" and ranges.loc["c", 1] == "5.0"
    with pytest.raises(ValueError, match="spread"):
        mean_spread_table(data, "model", "L", "PPL", spread="iqr")
    with pytest.raises(ValueError, match="'seed'"):
        mean_spread_table(data, "model", "seed", "PPL")


def test_context_groups_double_and_loss_by_context_averages_them() -> None:
    from posenc_book.tables import context_groups, loss_by_context

    edges, labels = context_groups(8)
    assert edges == [0, 1, 2, 4, 8] and labels == ["1", "2", "3–4", "5–8"]
    curve = [float(t) for t in range(8)]

    class Curve(list):  # a sequence with slices that have .mean(), as tensors do
        def __getitem__(self, item):
            part = list.__getitem__(self, item)
            return Curve(part) if isinstance(item, slice) else part

        def mean(self):
            return sum(self) / len(self)

    table = loss_by_context({"rope": Curve(curve)}, 8)
    assert table.index.name == "bytes of context" and list(table.columns) == ["RoPE"]
    assert table["RoPE"].tolist() == [0.0, 1.0, 2.5, 5.5]
    with pytest.raises(ValueError, match="power of 2"):
        context_groups(12)
    with pytest.raises(ValueError, match="length=8"):
        loss_by_context({"rope": Curve(curve[:4])}, 8)


def test_value_span_shows_a_range_or_one_number() -> None:
    import pytest

    from posenc_book.tables import value_span

    assert value_span(6.131, 6.449) == "6.13–6.45"
    assert value_span(10.21, 10.24) == "10.2"  # the same at three digits
    assert value_span(0.9901, 0.993) == "0.990–0.993"
    with pytest.raises(ValueError, match="low must not be above high"):
        value_span(2.0, 1.0)
    with pytest.raises(ValueError, match="digits must be at least 1"):
        value_span(1.0, 2.0, digits=0)


def test_mean_spread_table_median_and_range() -> None:
    import pandas as pd
    import pytest

    from posenc_book.tables import mean_spread_table

    data = pd.DataFrame({"m": ["a"] * 3, "L": [1] * 3, "v": [1.0, 2.0, 6.0]})
    assert mean_spread_table(data, "m", "L", "v", spread="range",
                             center="median").iloc[0, 0] == "2.00 (1.00–6.00)"
    assert mean_spread_table(data, "m", "L", "v", spread="range").iloc[0, 0] == (
        "3.00 (1.00–6.00)")
    with pytest.raises(ValueError, match="center"):
        mean_spread_table(data, "m", "L", "v", center="median")  # a median ± std


def test_passkey_seed_table_orders_schemes_and_marks_the_pooled_runs() -> None:
    from posenc_book.stored import passkey_run_shares
    from posenc_book.tables import passkey_seed_table

    cells = pd.DataFrame({"scheme": ["rope", "rope", "none", "rope"], "seed": [1, 0, 0, 0],
                          "L": [8, 8, 8, 16], "correct": [1, 4, 0, 2],
                          "trials": [4, 4, 4, 4]})
    table = passkey_seed_table(cells, 8, passkey_run_shares(cells, 8))
    assert table.index.tolist() == [("NoPE", 0), ("RoPE", 0), ("RoPE", 1)]
    assert table.columns.tolist() == ["in the maps", "1× (8)", "2× (16)"]
    assert table["in the maps"].tolist() == [True, True, False]  # NoPE: none meets
    assert table["2× (16)"].tolist() == ["—", "50%", "—"]
    assert table.columns.name == "keys retrieved, all depths"
    with pytest.raises(ValueError, match="train_length"):
        passkey_seed_table(cells, 0, passkey_run_shares(cells, 8))
    with pytest.raises(ValueError, match="xpe"):
        passkey_seed_table(cells.replace("none", "xpe"), 8, passkey_run_shares(cells, 8))


def test_scheme_table_rows_by_display_name_and_missing_cells() -> None:
    from types import SimpleNamespace

    from posenc_book.tables import scheme_table

    table = scheme_table({"rope": {128: 6.812, 256: 7.97}, "learned": {128: 11.24}},
                         columns="L (bytes)", digits=1)
    assert list(table.index) == ["RoPE", "Learned"] and table.index.name == "scheme"
    assert list(table.columns) == [128, 256] and table.columns.name == "L (bytes)"
    assert table.loc["RoPE", 128] == 6.8 and pd.isna(table.loc["Learned", 256])
    results = {"alibi": {128: SimpleNamespace(perplexity=8.04)}}
    assert scheme_table(results, "perplexity").loc["ALiBi", 128] == 8.04
    text = scheme_table({"none": {"a": "x", "b": "y"}, "t5": {"a": "z"}}, name="n",
                        missing="—")
    assert text.loc["T5 bias", "b"] == "—" and text.index.name == "n"
    with pytest.raises(ValueError, match="values"):
        scheme_table({})


def test_ngram_bracket_names_the_two_tables_around_a_value() -> None:
    from posenc_book.tables import ngram_bracket

    levels = {1: 21.8, 2: 11.8, 3: 7.4, 4: 5.5, 5: 5.3}
    assert ngram_bracket(9.0, levels) == "3-gram … 2-gram"
    assert ngram_bracket(6.8, levels) == "4-gram … 3-gram"
    assert ngram_bracket(5.0, levels) == "below 5-gram"
    assert ngram_bracket(26.5, levels) == "above 1-gram"
    with pytest.raises(ValueError, match="levels"):
        ngram_bracket(1.0, {})
