"""Sphinx extension of the book: what its pages need beyond Jupyter Book.

Loaded through ``sphinx.local_extensions`` in ``_config.yml``. It adds

* a bibliography label style, so that the reference lists read "[Su et al., 2021]" as
  the citations in the text do (sphinxcontrib-bibtex's ``author_year`` style formats the
  citations; the list labels come from a pybtex label style, by default "[SLP+21]");
* ``{chapter-map}``: the landing page's numbered table of chapters, with what each one
  proves or measures (the directive's content) and how long a first run with an empty
  model cache takes (stored by ``tools/cold_times.py``, option ``:first-run:``);
* ``{execution-status}``: every chapter's last stored execution (date, run time,
  machine, torch, scale, commit), read from ``metadata.posenc_execution``, which
  ``tools/execute_notebook.py`` writes;
* ``{headline-figure}``: the headline result, drawn at build time from stored results
  (``results/NAME``, read by ``posenc_book.stored``) with ``posenc_book.plotting``, as a
  numbered figure with a caption that says what was run, and where the results came
  from under it. ``posenc_book`` imports no torch, so the book builds without it
  (``requirements-book.txt``); it is found in the checkout when it is not installed;
* the substitutions ``{{ book_version }}`` and ``{{ repository_url }}`` (from
  ``_config.yml``), and one copy of each script per page.

Nothing here executes a notebook: the build reads stored outputs and metadata only.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import yaml
from docutils import nodes
from docutils.parsers.rst import directives
from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

REPOSITORY = Path(__file__).resolve().parents[2]
"""The checkout this extension belongs to: posenc_book is imported from it when the build
environment has not installed it (requirements-book.txt installs no torch, and so neither
posenc_lib nor the package that carries posenc_book)."""
if str(REPOSITORY) not in sys.path:
    sys.path.append(str(REPOSITORY))  # after site-packages: an installed copy comes first

# --- Bibliography labels: "Su et al., 2021" -------------------------------------------


def _plain(latex: str) -> str:
    """BibTeX text (braces, accents such as {\\L}) as plain text."""
    return Text.from_latex(latex).render_as("text")


def author_year_label(entry) -> str:
    """"Vaswani et al., 2017", "Press and Smith, 2022", "Radford, 2019" for one entry.

    The names are the authors' last names (the editors' when there are no authors),
    counted as the author–year citations in the text count them: BibTeX's "and others"
    is a second name there ("Dubey and others"), so it is here too.
    """
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_plain(" ".join(p.prelast_names + p.last_names)) for p in persons]
    if not names:
        who = _plain(entry.fields.get("title", entry.key)).split(":")[0]
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels "Author et al., Year"; a, b, … appended where two would be the same."""

    def format_labels(self, sorted_entries):
        labels = [author_year_label(entry) for entry in sorted_entries]
        counts = Counter(labels)
        seen: Counter = Counter()
        for label in labels:
            if counts[label] == 1:
                yield label
            else:
                seen[label] += 1
                yield f"{label}{'abcdefghijklmnopqrstuvwxyz'[seen[label] - 1]}"


class AuthorYearStyle(PlainStyle):
    """pybtex's "plain" formatting (sorted by author, year, title), author–year labels.
    """

    default_label_style = "posenc_author_year"


register_plugin("pybtex.style.labels", "posenc_author_year", AuthorYearLabelStyle)
register_plugin("pybtex.style.formatting", "posenc_author_year", AuthorYearStyle)


# --- Reading the book's own files -----------------------------------------------------

CHAPTER_NAME = re.compile(r"notebooks/(\d\d)_[a-z0-9_]+")

CORPUS_NAMES = {
    "austen": "Jane Austen's novels",
    "sotu": "the State of the Union addresses",
}
"""The corpora of :mod:`posenc_lib.training.data`, in words."""


def toc_files(srcdir: Path) -> list[str]:
    """Every file listed in ``_toc.yml``, in reading order (without suffix)."""

    def walk(node) -> list[str]:
        found = []
        if isinstance(node, dict):
            found += [node[key] for key in ("root", "file") if key in node]
            for key in ("parts", "chapters", "sections"):
                found += walk(node.get(key, []))
        elif isinstance(node, list):
            for item in node:
                found += walk(item)
        return found

    return walk(yaml.safe_load((srcdir / "_toc.yml").read_text()))


def provenance(srcdir: Path, docname: str) -> dict | None:
    """``metadata.posenc_execution`` of a notebook, or None if it has none."""
    path = srcdir / f"{docname}.ipynb"
    if not path.exists():
        return None
    return json.loads(path.read_text()).get("metadata", {}).get("posenc_execution")


def duration(seconds: float) -> str:
    """12.3 → "12 s"; 95 → "1.6 min"; 4000 → "67 min"."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    return f"{minutes:.1f} min" if minutes < 10 else f"{minutes:.0f} min"


def machine(record: dict) -> str:
    """"cpu, 2 cores (Linux x86_64)" from a provenance record."""
    platform = record.get("platform", "")
    system = platform.split("-")[0] if platform else "?"
    arches = ("x86_64", "aarch64", "arm64", "AMD64")
    arch = next((a for a in arches if a in platform), "")
    where = f"{system} {arch}".strip()
    return f"{record.get('device', '?')}, {record.get('cpu_count')} cores ({where})"


# --- Building tables ------------------------------------------------------------------


def table(header: list[str], rows: list[list[nodes.Node | str]], widths: list[int],
          classes: list[str]) -> nodes.table:
    """A docutils table; cells are nodes or plain strings."""
    tab = nodes.table(classes=classes)
    group = nodes.tgroup(cols=len(header))
    tab += group
    for width in widths:
        group += nodes.colspec(colwidth=width)

    def row_of(cells) -> nodes.row:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            para = nodes.paragraph()
            para += cell if isinstance(cell, nodes.Node) else nodes.Text(cell)
            entry += para
            row += entry
        return row

    thead = nodes.thead()
    thead += row_of(header)
    group += thead
    tbody = nodes.tbody()
    for cells in rows:
        tbody += row_of(cells)
    group += tbody
    return tab


def doc_link(docname: str, refdoc: str) -> addnodes.pending_xref:
    """A link to a page, its text the page's title (resolved when pages are written)."""
    ref = addnodes.pending_xref("", refdomain="std", reftype="doc",
                                reftarget=f"/{docname}", refexplicit=False,
                                refwarn=True, refdoc=refdoc)
    ref += nodes.inline(text=docname)
    return ref


def first_runs(srcdir: Path, relpath: str) -> dict:
    """The stored first-run times (``tools/cold_times.py``'s JSON) at ``relpath``."""
    path = srcdir / relpath
    if not path.is_file():
        raise ValueError(f"first-run times {relpath!r} not found (write them with tools/cold_times.py)")
    return json.loads(path.read_text())


def first_runs_option(directive: SphinxDirective, name: str) -> dict | None:
    """The first-run times named by the directive's ``:first-run:`` option (None without
    it); a missing file is an error of the directive ``name``."""
    relpath = directive.options.get("first-run")
    if relpath is None:
        return None
    srcdir = Path(directive.env.srcdir)
    directive.env.note_dependency(str(srcdir / relpath))
    try:
        return first_runs(srcdir, relpath)
    except ValueError as error:
        raise directive.error(f"{name}: {error}") from error


class ChapterMap(SphinxDirective):
    """``{chapter-map}``: content lines ``notebooks/NN_topic | what it proves``.

    Option ``:first-run:`` (required) names the stored first-run times
    (``results/run-times/….json``, written by ``tools/cold_times.py``), which must time
    every listed chapter: the table shows how long a reader's first run of each chapter
    took, with an empty model cache.
    """

    has_content = True
    option_spec = {"first-run": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        srcdir = Path(self.env.srcdir)
        listed = set(toc_files(srcdir))
        cold = first_runs_option(self, "chapter-map")
        if cold is None:
            raise self.error("chapter-map: the option :first-run: is required")
        rows = []
        for line in self.content:
            if not line.strip():
                continue
            docname, _, what = (part.strip() for part in line.partition("|"))
            match = CHAPTER_NAME.fullmatch(docname)
            if not match or not what:
                raise self.error(
                    f"chapter-map: expected 'notebooks/NN_topic | text', got {line!r}")
            chapter = nodes.inline()
            chapter += nodes.Text(f"{int(match.group(1))}. ")
            if docname in listed and (srcdir / f"{docname}.ipynb").exists():
                self.env.note_dependency(str(srcdir / f"{docname}.ipynb"))
                chapter += doc_link(docname, self.env.docname)
                if docname not in cold["chapters"]:
                    raise self.error(f"chapter-map: {self.options['first-run']} has no first "
                                     f"run of {docname}; rerun tools/cold_times.py")
                runtime = duration(cold["chapters"][docname]["wall_s"])
            else:
                name = docname.split("/")[-1]
                chapter += nodes.emphasis(text=f"{name} (in preparation)")
                runtime = "—"
            rows.append([chapter, what, runtime])
        header = ["Chapter", "What it proves or measures", "First run"]
        total = sum(entry["wall_s"] for entry in cold["chapters"].values())
        note = ("First run: how long a first run of the chapter took, at the small ci "
                "scale: the chapter run alone, from the top, in a fresh kernel with an empty "
                "model cache, so that it trains every model it would otherwise take from the "
                "cache (models shipped with the book, a pretrained SmolLM2 and one trained "
                "RoPE model, are read, not trained; installing the packages is not included). "
                f"Measured {cold['date_utc'][:10]} on {machine(cold)}, torch "
                f"{cold.get('torch', '?')}, commit {cold.get('commit') or '?'}; the "
                f"{len(cold['chapters'])} first runs, each with its own empty cache, add up to "
                f"{duration(total)}. On another machine, on Colab or on a GPU the times differ; "
                "the execution status page also lists each chapter's stored run.")
        return [table(header, rows, [30, 56, 14], ["chapter-map"]), nodes.paragraph(text=note)]


class ExecutionStatus(SphinxDirective):
    """``{execution-status}``: one row per chapter listed in ``_toc.yml``.

    Option ``:first-run:``: the stored first-run times (as for ``{chapter-map}``), shown in
    a column of their own.
    """

    option_spec = {"first-run": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        srcdir = Path(self.env.srcdir)
        cold = first_runs_option(self, "execution-status")
        rows = []
        for docname in toc_files(srcdir):
            path = srcdir / f"{docname}.ipynb"
            if not path.exists():
                continue
            self.env.note_dependency(str(path))
            record = provenance(srcdir, docname)
            link = doc_link(docname, self.env.docname)
            first = []
            if cold is not None:
                entry = cold["chapters"].get(docname)
                first = [duration(entry["wall_s"]) if entry else "—"]
            if record is None:
                rows.append([link, "not recorded", "—", *first, "—", "—", "—"])
                continue
            rows.append([
                link,
                record["date_utc"][:16].replace("T", " "),
                duration(record["wall_s"]),
                *first,
                f"{machine(record)}, torch {record.get('torch', '?')}",
                str(record.get("scale", "?")),
                str(record.get("commit") or "?"),
            ])
        if cold is None:
            header = ["Chapter", "Executed (UTC)", "Stored run", "Where", "Scale", "Commit"]
            return [table(header, rows, [32, 14, 9, 27, 6, 8], ["execution-status"])]
        header = ["Chapter", "Executed (UTC)", "Stored run", "First run", "Where", "Scale",
                  "Commit"]
        note = (f"First run: from {self.options['first-run']}, every chapter measured "
                f"{cold['date_utc'][:10]} on {machine(cold)}, torch {cold.get('torch', '?')}, "
                f"at commit {cold.get('commit') or '?'} (not the commit of the row, which is "
                "the stored run's).")
        return [table(header, rows, [29, 14, 8, 8, 27, 6, 8], ["execution-status"]),
                nodes.paragraph(text=note)]


class HeadlineFigure(SphinxDirective):
    """``{headline-figure}``: stored sweep results, perplexity against length.

    Options: ``:results:`` the name of the stored results (``results/NAME``),
    ``:protocol:`` (``sliding`` or ``nonoverlapping``), ``:alt:`` the alt text. The
    content is the caption's first sentences; the directive adds what the runs were
    (seeds, protocol, model, scale, corpus). The figure is numbered (its id is
    ``fig-headline-NAME-PROTOCOL``) and stored as a retina PNG, like the chapters'
    figures; where the stored results came from (runs, torch, commits, dates) follows
    in a paragraph under the figure rather than in its caption.
    """

    has_content = True
    option_spec = {
        "results": directives.unchanged_required,
        "protocol": lambda v: directives.choice(v, ("sliding", "nonoverlapping")),
        "alt": directives.unchanged_required,
    }

    def run(self) -> list[nodes.Node]:
        import matplotlib

        matplotlib.use("Agg")  # no display during a build
        import matplotlib.pyplot as plt

        # neither imports torch (the build environment has none)
        from posenc_book.plotting import (
            plot_perplexity_vs_length,
            retina_png,
            use_book_style,
        )
        from posenc_book.stored import (
            load_stored_results,
            provenance_label,
            stored_results_dir,
            summarize,
        )

        if "alt" not in self.options:
            raise self.error("headline-figure needs :alt: (what the figure shows)")
        name = self.options["results"]
        protocol = self.options.get("protocol", "sliding")
        results = load_stored_results(name)
        for path in sorted(stored_results_dir(name).glob("*.json")):
            self.env.note_dependency(str(path))
        by_scheme = summarize(results)[protocol]
        first = results[0]
        train_length = first["run"]["train_length"]
        longest = max(L for curve in by_scheme.values() for L in curve)
        title = f"Trained on {train_length}-byte windows, tested up to {longest} bytes"
        use_book_style()
        fig = plot_perplexity_vs_length(
            {s: {L: v[0] for L, v in c.items()} for s, c in by_scheme.items()},
            spread={s: {L: v[1] for L, v in c.items()} for s, c in by_scheme.items()},
            train_length=train_length, yscale="log",
            title=title)
        # Stored at twice its size in CSS px (sharp on a high-density screen), shown at
        # its size: the width goes into the <img>, as MyST-NB does for the notebooks'
        # figures, and Sphinx links the image to its file (exportable).
        png, size = retina_png(fig)
        plt.close(fig)
        out = Path(self.env.srcdir) / "book" / "_generated" / f"{name}-{protocol}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        if not out.exists() or out.read_bytes() != png:
            out.write_bytes(png)

        figure = nodes.figure(classes=["headline-figure"])
        # a label, so that the page can cite it as {numref}`fig-headline-NAME-PROTOCOL`
        figure["names"].append(f"fig-headline-{name}-{protocol}")
        self.state.document.note_explicit_target(figure, figure)
        uri = "/" + out.relative_to(self.env.srcdir).as_posix()
        figure += nodes.image(uri=uri, alt=self.options["alt"], width=f"{size['width']}px")
        caption = nodes.caption()
        for node in self.parse_content_to_nodes() if self.content else []:
            caption += node.children if isinstance(node, nodes.paragraph) else node
        model = first["train_config"]["model"]
        corpus = first["train_config"]["corpus"]
        scale = first["run"]["scale"]
        seeds = ", ".join(str(s) for s in sorted({r["run"]["seed"] for r in results}))
        window = ("sliding windows (stride L/2)" if protocol == "sliding"
                  else "non-overlapping windows")
        caption += nodes.Text(
            f" Mean ± standard deviation over seeds {seeds}; {window}; "
            f"{first['train']['num_parameters']:,}-parameter models "
            f"({model['num_layers']} layers, d_model = {model['d_model']}, "
            f"{scale['steps']} steps: scale {scale['name']!r}) trained on "
            f"{CORPUS_NAMES.get(corpus, corpus)}. Select the figure for its 2× image.")
        figure += caption
        where = nodes.paragraph(classes=["headline-provenance"])
        where += nodes.Text(
            f"Where the figure's numbers come from: stored results "
            f"(results/{name}), not computed by this page: "
            f"{provenance_label(results)}.")
        return [figure, where]


# --- Configuration and page assets ----------------------------------------------------


def add_version_substitutions(app: Sphinx, config) -> None:
    """Make ``{{ book_version }}`` and ``{{ repository_url }}`` usable in Markdown.

    Both come from ``_config.yml`` (``repository.branch`` and ``repository.url``, which
    Jupyter Book passes to the theme), so no page repeats the version by hand.
    """
    theme = config.html_theme_options or {}
    substitutions = dict(config.myst_substitutions or {})
    substitutions.setdefault("book_version", theme.get("repository_branch", "main"))
    substitutions.setdefault("repository_url", theme.get("repository_url", ""))
    config.myst_substitutions = substitutions


def site_url(repository_url: str) -> str:
    """Where GitHub Pages publishes the book: ``https://OWNER.github.io/REPO/`` for the
    repository ``https://github.com/OWNER/REPO`` (``repository.url`` in ``_config.yml``)."""
    owner, repo = repository_url.rstrip("/").split("/")[-2:]
    return f"https://{owner}.github.io/{repo}/"


def add_link_preview_address(app: Sphinx, config) -> None:
    """Give sphinxext-opengraph the site's address (``og:url``), from ``repository.url``."""
    repository = (config.html_theme_options or {}).get("repository_url")
    if repository and not getattr(config, "ogp_site_url", ""):
        config.ogp_site_url = site_url(repository)


def drop_duplicate_scripts(app: Sphinx, pagename: str, templatename: str, context: dict,
                           doctree) -> None:
    """Keep one copy of each script of a page.

    sphinx-thebe and sphinx-togglebutton register their inline scripts twice (the copies
    differ only in ``filename``: None or ""), so every page declared ``const
    THEBE_JS_URL`` twice: a JavaScript error in every reader's console.
    """
    seen, unique = set(), []
    for script in context.get("script_files", []):
        attributes = getattr(script, "attributes", {}) or {}
        filename = getattr(script, "filename", script) or ""  # None, "": inline
        key = (str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"][:] = unique  # in place: MathJax's handler adds to this list


def setup(app: Sphinx) -> dict:
    app.add_directive("chapter-map", ChapterMap)
    app.add_directive("execution-status", ExecutionStatus)
    app.add_directive("headline-figure", HeadlineFigure)
    app.connect("config-inited", add_version_substitutions)
    app.connect("config-inited", add_link_preview_address)
    app.connect("html-page-context", drop_duplicate_scripts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
