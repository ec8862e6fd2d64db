"""How long nbval took per chapter, from pytest's JUnit XML, as a table in the book.

    python -m pytest notebooks/ --junitxml=_build/nbval-junit.xml
    python tools/ci_times.py _build/nbval-junit.xml

nbval reports every code cell of a notebook as one test case (class name
``notebooks.05_rope.ipynb``, name ``Cell 3``) with the seconds it took. This tool adds
them up per notebook and writes a Markdown table between the markers
``<!-- nbval-times start -->`` and ``<!-- nbval-times end -->`` of
``book/execution_status.md`` (or of the file given with ``--page``), with where and when
the tests ran (the JUnit file's time stamp and host name). Chapters of ``_toc.yml`` that
the JUnit file does not contain are listed as "not in this run", so a partial run is
visible as one. Nothing is typed by hand: run the two commands again to refresh it.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- nbval-times start -->", "<!-- nbval-times end -->"
NOTEBOOK_CLASS = re.compile(r"(?:.*\.)?notebooks\.(\d\d_[A-Za-z0-9_]+)\.ipynb")


def notebook_times(junit: Path) -> tuple[dict[str, dict], dict]:
    """Per notebook stem (``05_rope``): cells, seconds, failures and skips; and the
    run's time stamp, host name and test count (summed over the file's test suites)."""
    root = ElementTree.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    totals: dict[str, dict] = defaultdict(
        lambda: {"cells": 0, "seconds": 0.0, "failed": 0, "skipped": 0}
    )
    run = {"timestamp": None, "hostname": None, "tests": 0}
    for suite in suites:
        run["timestamp"] = run["timestamp"] or suite.get("timestamp")
        run["hostname"] = run["hostname"] or suite.get("hostname")
        for case in suite.iter("testcase"):
            run["tests"] += 1
            match = NOTEBOOK_CLASS.fullmatch(case.get("classname", ""))
            if not match:
                continue
            row = totals[match.group(1)]
            row["cells"] += 1
            row["seconds"] += float(case.get("time", 0.0))
            row["failed"] += case.find("failure") is not None
            row["failed"] += case.find("error") is not None
            row["skipped"] += case.find("skipped") is not None
    return dict(totals), run


def test_file_times(junit: Path) -> dict[str, dict]:
    """Per test file other than the notebooks (``tests/test_model.py``): tests and
    seconds, from the JUnit class names (``tests.test_model`` or
    ``tests.test_model.TestClass``)."""
    root = ElementTree.parse(junit).getroot()
    totals: dict[str, dict] = defaultdict(lambda: {"tests": 0, "seconds": 0.0})
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        if not classname or NOTEBOOK_CLASS.fullmatch(classname):
            continue
        parts = classname.split(".")
        module = next((i for i, part in enumerate(parts) if part.startswith("test_")),
                      len(parts) - 1)
        name = "/".join(parts[: module + 1]) + ".py"
        totals[name]["tests"] += 1
        totals[name]["seconds"] += float(case.get("time", 0.0))
    return dict(totals)


def file_table(totals: dict[str, dict]) -> str:
    """Markdown table of the other test files, slowest first."""
    lines = ["| Test file | Tests | Time (s) |", "|---|---:|---:|"]
    for name, row in sorted(totals.items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"| `{name}` | {row['tests']} | {row['seconds']:.1f} |")
    seconds = sum(row["seconds"] for row in totals.values())
    lines += ["", f"The library's and the book's other tests: {seconds:.1f} s between them "
              "(each test's own time; under pytest-xdist two run at once)."]
    return "\n".join(lines)


def toc_chapters(root: Path = ROOT) -> list[str]:
    """Notebook stems in the order of ``_toc.yml``."""
    text = (root / "_toc.yml").read_text()
    return re.findall(r"notebooks/(\d\d_[A-Za-z0-9_]+)", text)


def table(totals: dict[str, dict], run: dict, junit_name: str, chapters: list[str]) -> str:
    """The Markdown block: a table, one row per chapter, and a line saying where the
    times come from."""
    lines = [
        "| Chapter | Cells checked | nbval time (s) | Result |",
        "|---|---:|---:|---|",
    ]
    for stem in chapters:
        link = f"{{doc}}`{stem} <../notebooks/{stem}>`"
        row = totals.get(stem)
        if row is None:
            lines.append(f"| {link} | — | — | not in this run |")
            continue
        result = "passed"
        if row["failed"]:
            result = f"{row['failed']} failed"
        elif row["skipped"]:
            result = f"passed, {row['skipped']} skipped"
        lines.append(f"| {link} | {row['cells']} | {row['seconds']:.1f} | {result} |")
    listed = [s for s in chapters if s in totals]
    seconds = sum(totals[s]["seconds"] for s in listed)
    when = (run["timestamp"] or "?")[:16].replace("T", " ")
    lines += [
        "",
        f"Generated by `python tools/ci_times.py {junit_name}` from pytest's JUnit "
        f"file of a run started {when} UTC on host `{run['hostname']}` "
        f"({run['tests']} tests in that file); {len(listed)} of {len(chapters)} "
        f"chapters in it, {seconds:.1f} s of nbval time between them. The time of a "
        "chapter is the sum of its cells' times (the kernel's start is counted in the "
        "first cell); tests of other files are not counted.",
    ]
    return "\n".join(lines)


def write_block(page: Path, block: str) -> None:
    """Replace the text between the markers of ``page`` with ``block``."""
    text = page.read_text()
    if START not in text or END not in text:
        raise ValueError(f"{page} has no {START} … {END} markers")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    page.write_text(f"{before}{START}\n{block}\n{END}{after}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", type=Path, help="pytest --junitxml output")
    parser.add_argument(
        "--page", type=Path, default=ROOT / "book" / "execution_status.md"
    )
    args = parser.parse_args(argv)
    totals, run = notebook_times(args.junit)
    if not totals:
        print(f"{args.junit}: no notebook test cases (nbval) found", file=sys.stderr)
        return 1
    block = table(totals, run, args.junit.name, toc_chapters())
    files = test_file_times(args.junit)
    if files:
        block += "\n\n" + file_table(files)
    write_block(args.page, block)
    print(f"wrote the nbval times of {len(totals)} chapters into {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
