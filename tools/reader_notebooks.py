"""Reader notebooks: the chapters as Jupyter and Colab show them, with no raw MyST.

    python tools/reader_notebooks.py --out reader            # every chapter
    python tools/reader_notebooks.py --out reader notebooks/05_rope.ipynb

The chapters' sources (``notebooks/*.ipynb``) are written in MyST: citations, figure and
exercise references, ``{doc}`` links, exercises, dropdowns and admonitions, and figure
captions kept in cell metadata. The website renders all of it; Colab, GitHub and plain
Jupyter show it as source (``{cite}`su2021roformer```) and never show a caption. This tool
writes, for each chapter, a notebook in which

* citations read "Su et al. (2021)" or "(Su et al., 2021)", as on the website, and link to the
  website's bibliography; ``{bibliography}`` becomes the chapter's list of references;
* ``{numref}``, ``{ref}`` and ``{doc}`` read as the website prints them ("Figure 5.2",
  "Exercise 5.1", a section's or chapter's title) and link to that place on the website;
* exercises are block quotes headed "Exercise 5.1: title"; a ``dropdown`` is an HTML
  ``<details>`` block (folded in Jupyter and Colab too); an admonition is a block quote
  under its title;
* each figure's caption follows its cell as Markdown ("**Figure 5.2.** …");
* a first cell says where the notebook comes from and where the website is.

Code cells and their stored outputs are copied unchanged, so the reader notebooks compute
exactly what the sources compute (``tests/test_site.py`` checks it, that no raw role or
directive remains, that their links reach the built site, and runs one of them).

The numbers, titles and labels come from the website's own build (Sphinx's environment in
``_build/.doctrees``), so they cannot disagree with the site: build the book first
(README, "Build the website"). The release workflow writes them over the sources in the
commit it tags, so that the Colab badge and the launch buttons, which name that tag, open
these notebooks; locally, ``--out reader`` and ``jupyter lab reader/``.
"""

from __future__ import annotations

import argparse
import copy
import pickle
import posixpath
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCTREES = ROOT / "_build" / ".doctrees"

ROLE = re.compile(r"\{(doc|ref|numref|cite|cite:p|cite:t)\}`([^`]+)`")
"""A MyST role the chapters use, and its content."""

EXPLICIT = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
"""A role's ``text <target>`` form."""

FENCE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[a-z-]+)\}[ \t]*(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.S | re.M,
)
"""A MyST directive: ```` ```{name} argument ```` … ```` ``` ```` (or ``:::``)."""

OPTION = re.compile(r"^:([a-z-]+):[ \t]*(.*)$")
TARGET = re.compile(r"^\(([^()\s]+)\)=[ \t]*\n", re.M)
"""A label target line, ``(label)=``."""

URL_COMMAND = re.compile(r"\\\\url\s*")
"""pybtex leaves BibTeX's ``\\url`` (in ``howpublished``) as text; the address follows it."""

RAW_MYST = re.compile(r"\{[a-z:-]+\}`|^(`{3,}|:{3,})\{[a-z-]+\}|^\([^()\s]+\)=\s*$", re.M)
"""What must not remain in a reader notebook's Markdown."""


def book_extension():
    """The book's Sphinx extension (``book/_ext/posenc_sphinx.py``): its bibliography labels
    and style are the website's, so the reader notebooks cite as the website does."""
    if str(ROOT / "book" / "_ext") not in sys.path:
        sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import posenc_sphinx

    return posenc_sphinx


def site_url(config: dict) -> str:
    """The website's address, ``https://OWNER.github.io/REPO/``, from ``repository.url``."""
    return book_extension().site_url(config["repository"]["url"])


@dataclass
class Book:
    """What the website's build knows: titles, labels, numbers, and the bibliography."""

    url: str
    titles: dict[str, str]
    labels: dict[str, tuple[str, str, str]]  # label -> (docname, anchor, section name)
    numbers: dict[str, tuple[str, tuple[int, ...]]]  # label -> (kind, (chapter, k))
    bibliography: dict  # key -> pybtex entry

    @classmethod
    def from_build(cls, doctrees: Path = DOCTREES, root: Path = ROOT) -> Book:
        """Read ``environment.pickle`` of a build of the book in ``root``.

        Raises:
            FileNotFoundError: no build there (build the book first).
        """
        pickled = Path(doctrees) / "environment.pickle"
        if not pickled.exists():
            raise FileNotFoundError(
                f"{pickled} is missing: build the book first (README, 'Build the website')"
            )
        with pickled.open("rb") as f:
            env = pickle.load(f)
        from pybtex.database import parse_file

        config = yaml.safe_load((root / "_config.yml").read_text())
        entries = {}
        for bibfile in config["bibtex_bibfiles"]:
            entries.update(parse_file(str(root / bibfile)).entries)
        std = env.domaindata["std"]
        labels = dict(std["labels"])  # label -> (docname, anchor, section name)
        for label, (doc, anchor) in std["anonlabels"].items():
            labels.setdefault(label, (doc, anchor, ""))
        numbers = {}
        for kinds in env.toc_fignumbers.values():
            for kind, by_id in kinds.items():
                for anchor, number in by_id.items():
                    numbers[anchor] = (kind, tuple(number))
        titles = {doc: node.astext() for doc, node in env.titles.items()}
        return cls(site_url(config), titles, labels, numbers, entries)

    # --- one role ------------------------------------------------------------------

    def page(self, docname: str, anchor: str = "") -> str:
        return f"{self.url}{docname}.html" + (f"#{anchor}" if anchor else "")

    def number_text(self, label: str) -> str:
        kind, number = self.numbers[label]
        return f"{kind.capitalize()} {'.'.join(str(n) for n in number)}"

    def cite(self, role: str, keys: str) -> str:
        author_year_label = book_extension().author_year_label  # the website's labels

        parts = []
        for key in (k.strip() for k in keys.split(",")):
            if key not in self.bibliography:
                raise KeyError(f"citation key {key!r} is not in the bibliography")
            who, year = author_year_label(self.bibliography[key]).rsplit(", ", 1)
            link = self.page("book/references")
            parts.append(
                f"[{who} ({year})]({link})" if role == "cite:t" else f"[{who}, {year}]({link})"
            )
        return "; ".join(parts) if role == "cite:t" else f"({'; '.join(parts)})"

    def role(self, name: str, content: str, docname: str) -> str:
        """Markdown for one role in the page ``docname``."""
        if name.startswith("cite"):
            return self.cite(name, content)
        explicit = EXPLICIT.match(content)
        text, target = (explicit.group(1), explicit.group(2)) if explicit else (None, content)
        if name == "doc":
            target = target.removesuffix(".ipynb").removesuffix(".md")
            doc = (
                target.lstrip("/")
                if target.startswith("/")
                else posixpath.normpath(posixpath.join(posixpath.dirname(docname), target))
            )
            if doc not in self.titles:
                raise KeyError(f"{{doc}} target {target!r} in {docname} is not a page")
            return f"[{text or self.titles[doc]}]({self.page(doc)})"
        if target not in self.labels:
            raise KeyError(f"{{{name}}} target {target!r} in {docname} is not a label")
        doc, anchor, section = self.labels[target]
        if name == "numref" or (text is None and target in self.numbers):
            number = self.number_text(target)
            if text:
                shown = number.split(" ", 1)[1]
                text = text.replace("%s", shown).replace("{number}", shown)
            return f"[{text or number}]({self.page(doc, anchor)})"
        return f"[{text or section}]({self.page(doc, anchor)})"

    # --- one Markdown cell ---------------------------------------------------------

    def markdown(self, source: str, docname: str, cited: list[str]) -> str:
        """The Markdown of one cell, with every directive and role rendered."""
        for match in ROLE.finditer(source):
            if match.group(1).startswith("cite"):
                cited.extend(k.strip() for k in match.group(2).split(","))
        source = FENCE.sub(lambda m: self.directive(m, docname, cited), source)
        source = TARGET.sub("", source)
        return ROLE.sub(lambda m: self.role(m.group(1), m.group(2), docname), source)

    def directive(self, match: re.Match, docname: str, cited: list[str]) -> str:
        name, argument = match.group("name"), match.group("arg").strip()
        lines = match.group("body").split("\n")
        options = {}
        while lines and OPTION.match(lines[0]):
            key, value = OPTION.match(lines[0]).groups()
            options[key] = value
            lines.pop(0)
        body = self.markdown("\n".join(lines).strip("\n"), docname, cited)
        if name == "dropdown":
            return f"<details>\n<summary>{argument}</summary>\n\n{body}\n\n</details>\n"
        if name == "admonition":
            return quoted(f"**{argument}**\n\n{body}")
        if name == "exercise":
            label = options.get("label")
            head = self.number_text(label) if label in self.numbers else "Exercise"
            return quoted(f"**{head}: {argument}**\n\n{body}" if argument else f"**{head}**\n\n{body}")
        if name == "bibliography":
            return self.reference_list(cited)
        raise ValueError(f"directive {{{name}}} in {docname} has no reader form")

    def reference_list(self, keys: list[str]) -> str:
        """The entries cited on the page, as the website lists them (pybtex, author–year)."""
        AuthorYearStyle = book_extension().AuthorYearStyle  # noqa: N806

        unique = [self.bibliography[k] for k in dict.fromkeys(keys)]
        if not unique:
            return ""
        formatted = AuthorYearStyle().format_entries(unique)
        lines = []
        for entry in formatted:
            text = entry.text.render_as("markdown").replace("\n", " ")
            lines.append(f"- [{entry.label}] {URL_COMMAND.sub('', text)}")
        return "\n".join(lines)


def quoted(text: str) -> str:
    """``text`` as a Markdown block quote."""
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n")) + "\n"


def reader_notebook(path: Path, book: Book) -> nbformat.NotebookNode:
    """The reader version of the chapter at ``path`` (the source is left as it is).

    Raises:
        KeyError: a role names a page, label or citation the build does not know.
        ValueError: a directive with no reader form.
    """
    nb = nbformat.read(path, as_version=4)
    docname = f"{path.parent.name}/{path.stem}"
    out = copy.deepcopy(nb)
    cited: list[str] = []
    cells = [
        nbformat.v4.new_markdown_cell(
            f"*This notebook is the chapter [{book.titles.get(docname, path.stem)}]"
            f"({book.page(docname)}) of the book *Positional Encodings, Executed*, written for "
            "Jupyter and Colab: the website shows the same text, code and outputs. Run the "
            "cells from the top.*"
        )
    ]
    cells[0]["id"] = "reader-origin"
    for cell in nb.cells:
        cell = copy.deepcopy(cell)
        if cell.cell_type == "markdown":
            cell.source = book.markdown(cell.source, docname, cited)
        cells.append(cell)
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if cell.cell_type == "code" and figure and "caption" in figure:
            number = book.number_text(figure["name"]) if figure.get("name") in book.numbers else "Figure"
            caption = book.markdown(figure["caption"], docname, [])
            note = nbformat.v4.new_markdown_cell(f"**{number}.** {caption}")
            note["id"] = f"caption-{figure.get('name', cell.get('id', ''))}"[:64]
            cells.append(note)
    out.cells = cells
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter")
    parser.add_argument("--out", type=Path, required=True, help="folder to write them to")
    parser.add_argument("--doctrees", type=Path, default=DOCTREES, help="the book's build")
    args = parser.parse_args(argv)
    book = Book.from_build(args.doctrees)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    args.out.mkdir(parents=True, exist_ok=True)
    for path in paths:
        target = args.out / path.name
        nbformat.write(reader_notebook(path.resolve(), book), target)
        print(f"{path.name} -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
