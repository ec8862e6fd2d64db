"""The claims ledger of chapter 16: verdicts entered by the cells that measure them.

A :class:`Ledger` collects one entry per claim, in the order the chapter checks them: the
verdict's kind (one of :data:`VERDICT_KINDS`), the verdict in words with its scope, and the
numbers it rests on, as the checking cell computed them; later cells may add a second
verdict on another metric (retrieval). :meth:`Ledger.frame` is the ledger as a table whose
claims link to their sections, and :meth:`Ledger.plot` the verdicts at a glance, one row per
claim, coloured by kind. Torch-free, like the rest of :mod:`posenc_book`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from posenc_book.plotting import MAX_FIGURE_WIDTH_IN
from posenc_book.tables import Link

VERDICT_KINDS: dict[str, str] = {
    "holds": "#009e73",
    "in part": "#56b4e9",
    "depends": "#cc79a7",
    "fails": "#d55e00",
    "no verdict": "#dddddd",
}
"""The kinds of verdict, each with its colour (Okabe–Ito, readable by colour-blind readers;
the figure also writes the kind in each cell): the claim holds, holds in part (a loss that
is small but not none, one half of two), depends on a named setting, fails, or the evidence
gives no verdict (a model that did not learn the task)."""


class Ledger:
    """Claims and their verdicts, in the order they were entered.

    The n-th claim entered is the n-th section of the chapter, labelled
    ``ledger-claim-NN`` (:meth:`anchor`), so a table row can link to it.
    """

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, str]] = {}

    def record(self, claim: str, kind: str, verdict: str, evidence: str, *,
               scope: str) -> None:
        """Enter one claim's verdict, computed by the cell that calls it.

        Args:
            claim: the claim, short (it labels a row of the figure: at most 34
                characters).
            kind: one of :data:`VERDICT_KINDS`.
            verdict: the verdict in words, with the settings it hinges on.
            evidence: the numbers it rests on, as computed.
            scope: what the evidence covers ("any model" for algebra, "ci", …).

        Raises:
            ValueError: for an unknown ``kind``, a claim entered twice, a claim longer
                than 34 characters, or an empty ``verdict``, ``evidence`` or ``scope``.
        """
        _check_kind(kind)
        if claim in self.entries:
            raise ValueError(f"claim {claim!r} is already in the ledger")
        if not claim or len(claim) > 34:
            raise ValueError(f"claim must be 1 to 34 characters, got {claim!r}")
        for name, text in (("verdict", verdict), ("evidence", evidence),
                           ("scope", scope)):
            if not text:
                raise ValueError(f"{name} must not be empty (claim {claim!r})")
        self.entries[claim] = {"kind": kind, "scope": scope, "verdict": verdict,
                               "what this chapter measured": evidence}

    def add_retrieval(self, claim: str, kind: str, verdict: str) -> None:
        """Add a claim's verdict on the second metric, retrieval.

        Raises:
            KeyError: for a claim not yet recorded.
            ValueError: for an unknown ``kind``.
        """
        _check_kind(kind)
        if claim not in self.entries:
            raise KeyError(f"claim {claim!r} is not in the ledger; record it first")
        self.entries[claim]["retrieval kind"] = kind
        self.entries[claim]["on retrieval"] = verdict

    def anchor(self, claim: str) -> str:
        """The label of a claim's section: ``ledger-claim-NN``, NN its place (from 01)."""
        return f"ledger-claim-{list(self.entries).index(claim) + 1:02d}"

    def frame(self) -> pd.DataFrame:
        """The ledger as a table: one row per claim (a :class:`~posenc_book.tables.Link`
        to its section), its scope, verdict, evidence and retrieval verdict ("—" where
        none was entered)."""
        columns = ["scope", "verdict", "what this chapter measured", "on retrieval"]
        rows = [[entry.get(c, "—") for c in columns] for entry in self.entries.values()]
        index = pd.Index([Link(claim, f"#{self.anchor(claim)}") for claim in self.entries],
                         name="claim (links to its section)")
        return pd.DataFrame(rows, index=index, columns=columns)

    def check_table(self, source: str | Path) -> list[str]:
        """Check the verdict words typed in a Markdown ledger table against the kinds
        the checking cells entered, row n against the n-th claim.

        Args:
            source: the Markdown text, or the path of a notebook (``.ipynb``) whose
                Markdown cells hold the table (the first with a ``Verdict…`` column).

        Returns:
            The kinds read from the table, in row order (as :func:`table_verdict_kinds`).

        Raises:
            ValueError: if the table has another number of rows than the ledger has
                claims, or a row's verdict word is not its claim's kind (each
                disagreement is named: row, claim, table word, kind entered).
        """
        typed = table_verdict_kinds(source)
        entered = [entry["kind"] for entry in self.entries.values()]
        if len(typed) != len(entered):
            raise ValueError(f"the table has {len(typed)} rows, the ledger "
                             f"{len(entered)} claims")
        wrong = [f"row {n}, {claim!r}: table says {t!r}, the cell entered {e!r}"
                 for n, (claim, t, e) in enumerate(zip(self.entries, typed, entered), 1)
                 if t != e]
        if wrong:
            raise ValueError("verdicts typed in the table disagree with the ledger: "
                             + "; ".join(wrong))
        return typed

    def plot(self) -> Figure:
        """The verdicts at a glance: one row per claim (numbered as its section), a
        column for the scope of the evidence, one for the verdict and one for the
        verdict on retrieval, each cell coloured by its kind (:data:`VERDICT_KINDS`).

        Returns:
            The figure, 6.5 inches wide, laid out.

        Raises:
            ValueError: if the ledger is empty.
        """
        if not self.entries:
            raise ValueError("the ledger is empty: record a claim first")
        claims = list(self.entries)
        columns = ("scope", "verdict", "on retrieval")
        fig, ax = plt.subplots(figsize=(MAX_FIGURE_WIDTH_IN, 0.34 * len(claims) + 0.9))
        for row, claim in enumerate(claims):
            entry = self.entries[claim]
            cells = (("", entry["scope"]), (entry["kind"], entry["kind"]),
                     (entry.get("retrieval kind", ""), entry.get("retrieval kind", "—")))
            for col, (kind, text) in enumerate(cells):
                color = VERDICT_KINDS.get(kind, "white")
                ax.add_patch(Rectangle((col, row), 1, 1, facecolor=color,
                                       edgecolor="white", linewidth=2))
                ax.text(col + 0.5, row + 0.5, text, ha="center", va="center")
        ax.set_xlim(0, len(columns))
        ax.set_ylim(len(claims), 0)
        ax.set_yticks([r + 0.5 for r in range(len(claims))],
                      [f"{r + 1}. {c}" for r, c in enumerate(claims)])
        ax.set_xticks([c + 0.5 for c in range(len(columns))], columns)
        ax.xaxis.tick_top()
        ax.tick_params(length=0)
        ax.grid(False)
        for spine in ax.spines.values():
            spine.set_visible(False)
        fig.tight_layout()
        return fig


FLOAT16_MAX = 65_504.0
"""The largest finite float16: a position or a base above it overflows to inf."""


def frequency_form_table(errors: dict, base_is_finite: dict, angle_columns: dict,
                         *, power_form: str, d_model: int) -> pd.DataFrame:
    """What each way of computing ω_i costs in each dtype, as bounds of decades.

    Args:
        errors: ``{(dtype name, base, form): {"ω_i": relative error, span: angle error
            (rad), …}}``, as :func:`~posenc_lib.encodings.sinusoidal.frequency_form_errors`
            returns them for each key.
        base_is_finite: ``{(dtype name, base): whether the dtype holds the base}``.
        angle_columns: ``{span: column label}``, the angle errors to show.
        power_form: the name of the form that holds the base in the dtype (where the base
            overflows, its ω_i are 0 past i = 0).
        d_model: the width the errors were measured at (named in the index).

    Returns:
        One row per (``dtype``, ``base``, form), with the relative error of ω_i and one
        column per span: :func:`~posenc_book.checks.decade_bounds` of the error, "ω_i = 0"
        where the power form overflowed, "p overflows" where a float16 position does.

    Raises:
        KeyError: if ``base_is_finite`` lacks a (dtype, base) of ``errors``, or an entry
            of ``errors`` lacks a span of ``angle_columns``.
    """
    from posenc_book.checks import decade_bounds

    shown = {}
    for (dtype, base, name), e in errors.items():
        overflowed = not base_is_finite[dtype, base] and name == power_form
        row = ["1 (ω_i = 0 past i = 0)" if overflowed else decade_bounds(e["ω_i"])]
        for span in angle_columns:
            row.append("p overflows" if dtype == "float16" and span > FLOAT16_MAX else
                       "ω_i = 0" if overflowed else decade_bounds(e[span]))
        shown[dtype, f"{base:,.0f}", name] = row
    table = pd.DataFrame(shown, index=["ω_i, relative error", *angle_columns.values()]).T
    table.index.names = ["dtype", "base", f"ω_i computed as (d_model = {d_model})"]
    return table


def seeds_note(shares: pd.DataFrame, scheme: str) -> str:
    """Which seeds a scheme's retrieval evidence pools, and what the others did, as the
    ledger writes it before the numbers ("seed 0 (seed 1: no key at 1×): ", "seed 0, the
    only one run: ", "seeds 0 and 1: ").

    Args:
        shares: :func:`~posenc_book.stored.passkey_run_shares`.
        scheme: a scheme of ``shares``.

    Raises:
        KeyError: for a scheme not in ``shares``.
    """
    from posenc_book.stored import kept_seeds

    if scheme not in shares.index.get_level_values("scheme"):
        raise KeyError(f"scheme {scheme!r} is not in the shares")
    kept = kept_seeds(shares)[scheme]
    left = [int(d) for d in shares.loc[scheme].index if d not in kept]
    named = (f"seed {kept[0]}" if len(kept) == 1 else
             "seeds " + ", ".join(map(str, kept[:-1])) + f" and {kept[-1]}")
    if left:
        return f"{named} (seed {left[0]}: no key at 1×): "
    if len(kept) == 1:
        return f"{named}, the only one run: "
    return f"{named}: "


def table_verdict_kinds(source: str | Path) -> list[str]:
    """The verdict kinds typed in a Markdown ledger table, one per row.

    The table is the first whose header has a column starting with "Verdict"; each of its
    rows must open that column with the kind in bold (``**in part** here, …``).

    Args:
        source: the Markdown text, or the path of a notebook (``.ipynb``), whose
            Markdown cells are searched in order.

    Returns:
        The kinds, in row order, each one of :data:`VERDICT_KINDS`.

    Raises:
        ValueError: if no such table is found, or a row's verdict does not open with a
            known kind in bold.
    """
    if isinstance(source, Path):
        cells = json.loads(source.read_text())["cells"]
        source = "\n".join("".join(c["source"]) for c in cells
                           if c["cell_type"] == "markdown")
    column, kinds = None, []
    for line in source.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if column is None:
            starts = [i for i, c in enumerate(cells) if c.startswith("Verdict")]
            column = starts[0] if line.lstrip().startswith("|") and starts else None
        elif not line.lstrip().startswith("|"):
            break
        elif not set(cells[0]) <= set("-: "):
            found = re.match(r"\*\*(.+?)\*\*", cells[column])
            if found is None or found.group(1) not in VERDICT_KINDS:
                raise ValueError(f"row {cells[0]!r}: the verdict {cells[column]!r} does "
                                 f"not open with a kind of {list(VERDICT_KINDS)} in bold")
            kinds.append(found.group(1))
    if column is None or not kinds:
        raise ValueError("no Markdown table with a 'Verdict' column and rows found")
    return kinds


def _check_kind(kind: str) -> None:
    if kind not in VERDICT_KINDS:
        raise ValueError(f"kind must be one of {list(VERDICT_KINDS)}, got kind={kind!r}")
