"""posenc_book.ledger: the claims ledger's entries, table and figure."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from posenc_book.ledger import VERDICT_KINDS, Ledger  # noqa: E402
from posenc_book.tables import Link  # noqa: E402


def two_claims() -> Ledger:
    ledger = Ledger()
    ledger.record("A formula", "fails", "fails (sign)", "SymPy", scope="any model")
    ledger.record("A trained model", "in part", "in part here", "×1.43", scope="ci")
    return ledger


def test_entries_keep_their_order_and_link_to_their_sections() -> None:
    ledger = two_claims()
    assert ledger.anchor("A trained model") == "ledger-claim-02"
    frame = ledger.frame()
    assert list(frame.index) == ["A formula", "A trained model"]
    assert all(isinstance(claim, Link) for claim in frame.index)
    assert [c.href for c in frame.index] == ["#ledger-claim-01", "#ledger-claim-02"]
    assert frame.loc["A formula", "on retrieval"] == "—"  # none entered


def test_a_retrieval_verdict_joins_its_claim() -> None:
    ledger = two_claims()
    ledger.add_retrieval("A trained model", "no verdict", "did not learn the task")
    assert ledger.frame().loc["A trained model", "on retrieval"] == "did not learn the task"
    with pytest.raises(KeyError, match="not in the ledger"):
        ledger.add_retrieval("Unknown", "fails", "x")


@pytest.mark.parametrize(
    ("claim", "kind", "verdict", "match"),
    [
        ("A formula", "fails", "v", "already in the ledger"),
        ("New", "false", "v", "kind must be one of"),
        ("x" * 35, "fails", "v", "1 to 34 characters"),
        ("New", "holds", "", "verdict must not be empty"),
    ],
)
def test_a_bad_entry_is_refused(claim: str, kind: str, verdict: str, match: str) -> None:
    ledger = two_claims()
    with pytest.raises(ValueError, match=match):
        ledger.record(claim, kind, verdict, "e", scope="ci")


def test_the_figure_has_a_coloured_cell_per_claim_and_column() -> None:
    ledger = two_claims()
    ledger.add_retrieval("A trained model", "fails", "none past L_train")
    fig = ledger.plot()
    ax = fig.axes[0]
    assert fig.get_size_inches()[0] <= 6.5
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1. A formula",
                                                             "2. A trained model"]
    colours = [matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches]
    assert colours[1] == VERDICT_KINDS["fails"] and colours[4] == VERDICT_KINDS["in part"]
    assert colours[5] == VERDICT_KINDS["fails"]  # the retrieval verdict
    assert [t.get_text() for t in ax.texts][:3] == ["any model", "fails", "—"]
    plt.close(fig)
    with pytest.raises(ValueError, match="empty"):
        Ledger().plot()


TABLE = """Some prose.

| # | Claim | Verdict (scope) | Evidence |
|---|---|---|---|
| 1 | A formula | **fails**: the sign (any model) | x |
| 2 | A trained model | **in part** here | y |

After the table.
"""


def test_the_typed_table_is_checked_against_the_kinds_entered(tmp_path) -> None:
    from posenc_book.ledger import table_verdict_kinds

    assert table_verdict_kinds(TABLE) == ["fails", "in part"]
    assert two_claims().check_table(TABLE) == ["fails", "in part"]
    with pytest.raises(ValueError, match=r"row 2, 'A trained model': table says 'fails'"):
        two_claims().check_table(TABLE.replace("**in part**", "**fails**"))
    with pytest.raises(ValueError, match="3 rows, the ledger 2"):
        two_claims().check_table(TABLE.replace("\n\nAfter", "\n| 3 | C | **holds** | z |\n"))
    with pytest.raises(ValueError, match="in bold"):
        table_verdict_kinds(TABLE.replace("**in part**", "in part"))
    with pytest.raises(ValueError, match="no Markdown table"):
        table_verdict_kinds("no table here")
    notebook = tmp_path / "ledger.ipynb"
    notebook.write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": ["| Verdict |\n"]},
        {"cell_type": "markdown", "source": TABLE.splitlines(keepends=True)}]}))
    assert two_claims().check_table(notebook) == ["fails", "in part"]


def test_the_chapter_table_agrees_with_its_recorded_kinds() -> None:
    """The stored chapter: its typed verdict words against the kinds its cells record
    (read from the ``ledger.record(claim, kind, …)`` calls, in order)."""
    import re
    from pathlib import Path

    from posenc_book.ledger import table_verdict_kinds

    path = Path(__file__).resolve().parents[1] / "notebooks" / "16_claims_ledger.ipynb"
    cells = json.loads(path.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    recorded = re.findall(r'ledger\.record\(\s*"[^"]+",\s*"([^"]+)"', code)
    assert len(recorded) == 23
    assert table_verdict_kinds(path) == recorded


def test_the_frequency_form_table_marks_overflows_and_bounds_the_rest() -> None:
    from posenc_book.ledger import frequency_form_table

    e = {"ω_i": 3e-7, 100: 2e-3, 70_000: 5e-2}
    errors = {("float32", 500_000.0, "pow"): e, ("float16", 500_000.0, "pow"): e,
              ("float16", 500_000.0, "exp"): e}
    finite = {("float32", 500_000.0): True, ("float16", 500_000.0): False}
    table = frequency_form_table(errors, finite, {100: "p ≤ 100", 70_000: "p ≤ 70 000"},
                                 power_form="pow", d_model=8)
    assert list(table.columns) == ["ω_i, relative error", "p ≤ 100", "p ≤ 70 000"]
    assert table.index.names[2] == "ω_i computed as (d_model = 8)"
    assert table.loc[("float32", "500,000", "pow")].tolist() == [
        "> 1e-7, < 1e-6", "> 1e-3, < 0.01", "> 0.01, < 0.1"]
    assert table.loc[("float16", "500,000", "pow")].tolist() == [
        "1 (ω_i = 0 past i = 0)", "ω_i = 0", "p overflows"]
    assert table.loc[("float16", "500,000", "exp")].tolist()[2] == "p overflows"
    with pytest.raises(KeyError):
        frequency_form_table(errors, {}, {100: "p ≤ 100"}, power_form="pow", d_model=8)
