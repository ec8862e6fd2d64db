"""One table style for the whole book: how a pandas DataFrame looks on the page.

pandas' own HTML puts the index names in a second header row of empty cells, right-aligns
every header and cell (prose too), and adds a ``<style>`` block to every table. The book's
tables instead have one header row (the index names head the index columns, the columns'
own name, e.g. ``L (bytes)``, heads the row above the values when there is one), numbers
right-aligned with tabular figures, text left-aligned, and no inline style: the site's
stylesheet (``_static/book.css``, class ``book-table``) draws them.

:func:`use_book_tables` makes this the HTML of every DataFrame a notebook displays (it is
called by :func:`posenc_book.plotting.use_book_style`); the plain-text form, which is what a
terminal and nbval's ``text/plain`` comparison see, is pandas' own and unchanged.
"""

from __future__ import annotations

import html
import re

import pandas as pd
from pandas.io.formats.format import format_array

NUMERIC = re.compile(
    r"^\s*[-+−]?(\d[\d,  ]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*(%|×)?"
    r"(\s*(±|–|…|\.\.\.)\s*[-+−]?(\d[\d,  ]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*(%|×)?)?\s*$"
    r"|^\s*[<>≤≥]\s*\S+\s*$|^\s*[—–-]\s*$|^\s*(nan|inf|-inf)\s*$"
)
"""A cell that reads as a number: ``7.02``, ``11.47 ± 0.06``, ``1.2e-05``, ``×1.46``-free
forms like ``1.46×``, ``< 1e-5``, a dash for "not measured", ``nan``."""


class Link(str):
    """A table cell that links somewhere: its text, and ``href`` (a page, or ``#anchor``).

    It is a ``str``, so pandas' plain text shows the text alone; :func:`table_html` draws
    it as ``<a href="…">text</a>``.

    Raises:
        ValueError: if ``href`` is empty.
    """

    href: str

    def __new__(cls, text: str, href: str) -> "Link":
        if not href:
            raise ValueError("Link: href must name a page or an #anchor, got ''")
        link = super().__new__(cls, text)
        link.href = href
        return link


def _is_numeric_column(values: pd.Series) -> bool:
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return True
    texts = [str(v) for v in values if not (isinstance(v, float) and pd.isna(v))]
    return bool(texts) and all(NUMERIC.match(t) for t in texts)


SUBSCRIPT = re.compile(
    r"(?<![A-Za-z0-9_])([A-Za-zθωρτκλμσ])_(train|model|\d+|[A-Za-z](?![A-Za-z0-9])|\([^()<>]*\))"
)
"""``L_train``, ``d_model``, ``θ_i``, ``m_1``, ``R_(t−s)``: a one-letter symbol and its
subscript, as the book's notation writes them (``rope_scaling`` is left alone)."""

SUPERSCRIPT = re.compile(r"(?<=[A-Za-z0-9)\]])\^(\{[^{}<>]*\}|\([^()<>]*\)|[−+-]?[A-Za-z0-9.]+)")
"""``2^-4``, ``2^23``, ``c^t``, ``c^(−s)``, ``e^{irθ}``: an exponent after a symbol."""


def notation_html(text: str) -> str:
    """Escaped ``text`` with the book's plain-text notation set as sub- and superscripts.

    Tables keep plain text in their ``text/plain`` form (a terminal, nbval); on the page
    ``L_train`` reads as L<sub>train</sub> and ``2^-4`` as 2<sup>-4</sup>, like the
    typeset math in the prose around them.
    """
    escaped = html.escape(text)
    escaped = SUBSCRIPT.sub(lambda m: f"{m.group(1)}<sub>{_unwrap(m.group(2))}</sub>", escaped)
    return SUPERSCRIPT.sub(lambda m: f"<sup>{_unwrap(m.group(1))}</sup>", escaped)


def _unwrap(part: str) -> str:
    if len(part) > 1 and part[0] + part[-1] in ("{}", "()"):
        return part[1:-1]
    return part


def _cell(tag: str, text: object, css: str | None = None, span: int = 1) -> str:
    attributes = f' class="{css}"' if css else ""
    if span > 1:
        attributes += f' rowspan="{span}"'
    inner = notation_html(_text(text))
    if isinstance(text, Link):
        inner = f'<a class="reference internal" href="{html.escape(text.href)}">{inner}</a>'
    return f"<{tag}{attributes}>{inner}</{tag}>"


def _text(value: object) -> str:
    if isinstance(value, float) and pd.isna(value):
        return ""
    return str(value)


def _formatted(values) -> list:
    """The cells of one column (or index level) as pandas' own HTML shows them: floats at
    ``display.precision`` significant digits with a common number of decimals, so a float32
    value never prints its binary expansion. :class:`Link` values are kept as they are."""
    values = pd.Series(values)
    shown = [text.strip() for text in format_array(values._values, None)]
    return [value if isinstance(value, Link) else text
            for value, text in zip(values, shown)]


def table_html(frame: pd.DataFrame) -> str:
    """The book's HTML for ``frame``: one header row, numbers right, text left.

    Args:
        frame: any DataFrame with single-level columns (a MultiIndex of rows is drawn with
            each index level in its own column, a repeated label shown once per run of
            equal values). Values are formatted as ``str(value)`` (format the numbers before,
            as the chapters do, to the precision the prose uses); a :class:`Link` value or
            index label is drawn as a link.

    Returns:
        A ``<table class="book-table">`` element as a string; deterministic (no random ids),
        so nbval can compare it.

    Raises:
        ValueError: if ``frame.columns`` is a MultiIndex (flatten it first, e.g.
            ``frame.columns = [" ".join(map(str, c)) for c in frame.columns]``).
    """
    if isinstance(frame.columns, pd.MultiIndex):
        raise ValueError(
            "table_html: frame.columns is a MultiIndex; flatten it to one level first"
        )
    index = frame.index
    index_names = [("" if n is None else str(n)) for n in index.names]
    show_index = not (
        isinstance(index, pd.RangeIndex) and index.name is None
    )
    numeric = [_is_numeric_column(frame.iloc[:, j]) for j in range(frame.shape[1])]
    align = ["num" if flag else "text" for flag in numeric]
    columns = [_formatted(frame.iloc[:, j]) for j in range(frame.shape[1])]
    levels = [_formatted(index.get_level_values(k)) for k in range(index.nlevels)]

    rows = ['<table class="book-table">', "<thead>"]
    if frame.columns.name:
        spanned = len(index_names) if show_index else 0
        rows.append(
            "<tr>" + "".join(_cell("th", "") for _ in range(spanned))
            + f'<th class="columns-name" colspan="{frame.shape[1]}">'
            f"{html.escape(str(frame.columns.name))}</th></tr>"
        )
    header = [_cell("th", name, "index") for name in index_names] if show_index else []
    header += [_cell("th", column, css) for column, css in zip(frame.columns, align)]
    rows += ["<tr>" + "".join(header) + "</tr>", "</thead>", "<tbody>"]

    labels = list(zip(*levels)) if len(index) else []
    rows_of_values = list(zip(*columns)) if columns else [() for _ in range(len(index))]
    for i, (label, values) in enumerate(zip(labels, rows_of_values)):
        cells = []
        if show_index:
            for level, value in enumerate(label):
                first_of_run = i == 0 or labels[i - 1][: level + 1] != label[: level + 1]
                if first_of_run:
                    span = 1
                    while (i + span < len(labels)
                           and labels[i + span][: level + 1] == label[: level + 1]):
                        span += 1
                    cells.append(_cell("th", value, "index", span))
        cells += [_cell("td", value, css) for value, css in zip(values, align)]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows += ["</tbody>", "</table>"]
    return "\n".join(rows)


def use_book_tables() -> bool:
    """Draw every DataFrame this IPython kernel displays with :func:`table_html`.

    Returns:
        True if an IPython kernel was found and the formatter registered; False outside
        IPython (a plain Python script), where nothing changes.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with Jupyter
        return False
    shell = get_ipython()
    if shell is None:
        return False
    formatter = shell.display_formatter.formatters["text/html"]
    formatter.for_type(pd.DataFrame, _html_or_none)
    return True


def _html_or_none(frame: pd.DataFrame) -> str | None:
    # Column MultiIndexes keep pandas' own HTML.
    if isinstance(frame.columns, pd.MultiIndex):
        return frame._repr_html_()
    return table_html(frame)


def mean_spread_table(
    frame: pd.DataFrame,
    rows: str,
    columns: str,
    values: str,
    *,
    spread: str = "std",
    center: str = "mean",
    number=None,
    order=None,
    labels=None,
    column_label: str | None = None,
    missing: str = "—",
) -> pd.DataFrame:
    """Mean and spread over seeds (or any repeats) as text: one row per group, one column
    per value of ``columns``.

    Args:
        frame: long data, one row per measurement, with columns ``rows``, ``columns``
            and ``values`` (e.g. ``model``, ``L``, ``PPL``, one row per seed).
        rows, columns, values: the column names.
        spread: ``"std"``: "mean ± std" (the std shows as 0 for a single repeat);
            ``"range"``: "mean (min–max)", or the mean alone for a single repeat.
        center: ``"mean"``, or ``"median"`` (with ``spread="range"`` only: "median
            (lowest–highest)", e.g. over benchmark runs).
        number: formats one number; by default two decimals (``f"{x:.2f}"``).
        order: the rows to keep, in this order (those absent from ``frame`` skipped);
            by default every row in order of first appearance.
        labels: row key → displayed name (a mapping or a function); by default the key.
        column_label: format of a column header, given the column's value
            (e.g. ``"L = {} bytes"``); by default the values themselves.
        missing: the text of a cell with no measurement.

    Returns:
        A DataFrame of strings; the columns sorted by value.

    Raises:
        ValueError: for an unknown ``spread`` or ``center``, a median with
            ``spread="std"``, or a missing column (named).

    Example:
        >>> data = pd.DataFrame({"m": ["a", "a"], "L": [1, 1], "v": [1.0, 3.0]})
        >>> mean_spread_table(data, "m", "L", "v").iloc[0, 0]
        '2.00 ± 1.41'
    """
    if spread not in ("std", "range"):
        raise ValueError(f"spread must be 'std' or 'range', got spread={spread!r}")
    if center not in ("mean", "median") or (center == "median" and spread == "std"):
        raise ValueError(f"center must be 'mean', or 'median' with spread='range'; got "
                         f"center={center!r}, spread={spread!r}")
    for name in (rows, columns, values):
        if name not in frame.columns:
            raise ValueError(f"frame has no column {name!r} (columns: {list(frame.columns)})")
    number = number or "{:.2f}".format
    stats = frame.groupby([rows, columns], sort=False)[values].agg(
        ["mean", "median", "std", "min", "max", "count"])

    def cell(row: pd.Series) -> str:
        if spread == "std":
            std = 0.0 if pd.isna(row["std"]) else row["std"]
            return f"{number(row['mean'])} ± {number(std)}"
        if row["count"] == 1:
            return number(row[center])
        return f"{number(row[center])} ({number(row['min'])}–{number(row['max'])})"

    table = stats.apply(cell, axis=1).unstack(columns)
    table = table.reindex(columns=sorted(frame[columns].unique())).fillna(missing)
    if order is not None:
        table = table.reindex([key for key in order if key in table.index])
    if labels is not None:
        name = labels.get if hasattr(labels, "get") else labels
        table.index = [name(key) for key in table.index]
    if column_label is not None:
        table.columns = [column_label.format(c) for c in table.columns]
    return table


def passkey_seed_table(cells: pd.DataFrame, train_length: int,
                       shares: pd.DataFrame) -> pd.DataFrame:
    """Each run's share of keys retrieved at each window length, every depth pooled, as
    percentages, with whether the run is pooled in the maps (chapter 12).

    Args:
        cells: :func:`~posenc_book.stored.passkey_cells` (columns ``scheme``, ``seed``,
            ``L``, ``correct``, ``trials``).
        train_length: L_train (bytes); a column is headed ``"k× (L)"``, k = L / L_train.
        shares: :func:`~posenc_book.stored.passkey_run_shares` of the same cells (its
            ``kept`` column gives "in the maps").

    Returns:
        A DataFrame of text indexed by (``scheme``, its display name; ``seed``), the
        schemes in the book's order (:data:`~posenc_book.schemes.SCHEMES`), with the
        boolean column ``in the maps`` and one column per L ("100%"; "—" for no cell);
        the columns' name is "keys retrieved, all depths".

    Raises:
        ValueError: for a ``train_length`` < 1 or a scheme not in the book's schemes.
    """
    from posenc_book.schemes import SCHEMES, scheme_label

    if train_length < 1:
        raise ValueError(f"train_length must be positive, got train_length={train_length}")
    unknown = sorted(set(cells.scheme) - set(SCHEMES))
    if unknown:
        raise ValueError(f"cells name schemes the book does not know: {unknown}")
    per_run = cells.groupby(["scheme", "seed", "L"])[["correct", "trials"]].sum()
    table = (per_run.correct / per_run.trials).unstack("L").map(
        lambda v: "—" if pd.isna(v) else f"{v:.0%}")
    table.columns = [f"{L // train_length}× ({L})" for L in table.columns]
    table.insert(0, "in the maps", [bool(shares.kept.get(run, False))
                                    for run in table.index])
    table = table.reindex(sorted(table.index, key=lambda r: (SCHEMES.index(r[0]), r[1])))
    table.index = pd.MultiIndex.from_tuples(
        [(scheme_label(s), d) for s, d in table.index], names=["scheme", "seed"])
    table.columns.name = "keys retrieved, all depths"
    return table


def context_groups(length: int) -> tuple[list[int], list[str]]:
    """Groups of context length c = t + 1 in doublings, for a window of ``length``:
    1, 2, 3–4, 5–8, …, length/2 + 1 … length.

    Args:
        length: the window length, a power of 2 (≥ 2).

    Returns:
        ``(edges, labels)``: group j holds the positions ``edges[j] ≤ t < edges[j + 1]``
        (contexts ``edges[j] + 1 … edges[j + 1]``); edges ``[0, 1, 2, 4, …, length]`` and
        one label per group (``"1"``, ``"2"``, ``"3–4"``, …).

    Raises:
        ValueError: if ``length`` is not a power of 2 of at least 2.
    """
    if length < 2 or length & (length - 1):
        raise ValueError(f"length must be a power of 2, at least 2, got length={length}")
    edges = [0] + [2**j for j in range(length.bit_length())]  # 0, 1, 2, 4, …, length
    labels = [f"{a + 1}–{b}" if b > a + 1 else f"{b}" for a, b in zip(edges, edges[1:])]
    return edges, labels


def loss_by_context(curves, length: int) -> pd.DataFrame:
    """Mean loss per group of context length (:func:`context_groups`), one column per
    scheme, by display name.

    Args:
        curves: scheme → ``[length]`` loss by position in the window (nats per byte; a
            torch tensor or NumPy array).
        length: the window length, a power of 2.

    Returns:
        A float DataFrame, one row per group (index named ``"bytes of context"``).

    Raises:
        ValueError: for a bad ``length`` or a curve of another length.
    """
    from posenc_book.schemes import scheme_label

    edges, labels = context_groups(length)
    wrong = [s for s, curve in curves.items() if len(curve) != length]
    if wrong:
        raise ValueError(f"curves must have length={length} positions: {wrong}")
    return pd.DataFrame(
        {scheme_label(s): [float(curve[a:b].mean()) for a, b in zip(edges, edges[1:])]
         for s, curve in curves.items()},
        index=pd.Index(labels, name="bytes of context"),
    )


def value_span(low: float, high: float, digits: int = 3) -> str:
    """A range of trained-model numbers as a table shows it: ``"6.13–6.45"``, or one number
    when both ends print the same (``"10.2"``), each with ``digits`` significant digits.

    Raises:
        ValueError: if ``low`` is above ``high`` or ``digits`` is below 1.
    """
    if digits < 1:
        raise ValueError(f"digits must be at least 1, got digits={digits}")
    if low > high:
        raise ValueError(f"low must not be above high, got low={low}, high={high}")
    low_text, high_text = f"{low:#.{digits}g}", f"{high:#.{digits}g}"
    return low_text if low_text == high_text else f"{low_text}–{high_text}"


def scheme_table(values, value: str | None = None, *, name: str = "scheme",
                 columns: str | None = None, digits: int | None = None,
                 missing=float("nan")) -> pd.DataFrame:
    """One row per scheme, by display name, one column per key of the rows' mappings.

    Args:
        values: scheme → {column key: cell}, the rows in this order (schemes of
            :data:`~posenc_book.schemes.SCHEME_STYLE` are shown by their display names,
            others as they are); the columns in the order their keys first appear.
            A cell is a number, a text, or an object with the attribute ``value``.
        value: the attribute read from every cell (e.g. ``"perplexity"`` of an
            evaluation result); None takes the cells as they are.
        name: the name of the index (the header of the scheme column).
        columns: the name of the columns (e.g. ``"L (bytes)"``), or None.
        digits: decimals the numbers are rounded to (``DataFrame.round``), or None.
        missing: the cell of a scheme with no value in a column: NaN, or a text
            such as ``"—"``.

    Returns:
        A DataFrame indexed by the display names.

    Raises:
        ValueError: for an empty ``values``.

    Example:
        >>> scheme_table({"rope": {128: 6.8, 256: 8.0}, "learned": {128: 11.2}}).loc[
        ...     "Learned"].tolist()
        [11.2, nan]
    """
    from posenc_book.schemes import scheme_label

    if not values:
        raise ValueError("values must hold at least one scheme, got an empty mapping")
    keys = list(dict.fromkeys(key for row in values.values() for key in row))
    cell = (lambda c: getattr(c, value)) if value else (lambda c: c)
    frame = pd.DataFrame(
        {key: [cell(row[key]) if key in row else missing for row in values.values()]
         for key in keys},
        index=pd.Index([scheme_label(s) for s in values], name=name))
    if columns is not None:
        frame = frame.rename_axis(columns=columns)
    return frame if digits is None else frame.round(digits)


def ngram_bracket(value: float, levels) -> str:
    """Which two n-gram tables' perplexities bracket ``value``: ``"3-gram … 2-gram"``.

    Args:
        value: a perplexity (no unit).
        levels: n → the perplexity of the order-n table on the same text, orders
            1, 2, … (each order below the one before it, as counting tables are).

    Returns:
        ``"{n+1}-gram … {n}-gram"`` where order n+1 is below ``value`` and order n above
        it; ``"below {N}-gram"`` under the highest order N, ``"above {1}-gram"`` over the
        lowest.

    Raises:
        ValueError: for empty ``levels``.

    Example:
        >>> ngram_bracket(9.0, {1: 21.8, 2: 11.8, 3: 7.4})
        '3-gram … 2-gram'
    """
    if not levels:
        raise ValueError("levels must hold at least one n-gram order, got none")
    orders = sorted(levels)
    for low, high in zip(orders, orders[1:]):
        if levels[high] < value < levels[low]:
            return f"{high}-gram … {low}-gram"
    if value < levels[orders[-1]]:
        return f"below {orders[-1]}-gram"
    return f"above {orders[0]}-gram"
