"""The docstrings on the API reference (``book/api.md``) read as their authors wrote them.

sphinx-autoapi reads the docstrings from the source without importing it, and
``sphinx.ext.napoleon`` turns their Google-style sections (Args, Returns, Raises) into
reStructuredText. The docstrings are written for a reader of the source: ````code````,
``:func:`` roles, and plain-text math such as ``−m_h·|i − j|``. Two things in that plain
text mean something else to reStructuredText; this extension, connected to
``autodoc-process-docstring`` (which sphinx-autoapi emits for every docstring it reads),
keeps them as written, so that math in a docstring cannot break the build:

* ``|x|`` (an absolute value, a norm) is a substitution reference: every ``|`` outside
  inline literals, roles, literal and doctest blocks and directives is escaped (after
  napoleon, which would otherwise see the escapes);
* a Returns (or Yields) section that opens with an inline literal running over several
  lines (````{"share": …, "first": …}````): napoleon takes the text before the line's first
  colon for the return type and cuts the literal there. The literal's lines are joined
  first (before napoleon), so that its colons are read as code.

It also keeps sphinx-autoapi out of the libraries the packages import. autoapi's parser
(astroid) follows imports to infer what an attribute holds; where torch and transformers are
installed it parsed thousands of their files (154 s for ``posenc_lib/pretrained/checkup.py``
alone, measured), where they are not (the light build) it gives up at once. Denying them
(``THIRD_PARTY``) makes every build read the page as the light build does, in seconds.

Loaded through ``sphinx.local_extensions`` in ``_config.yml``.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx

PROTECTED = re.compile(r"``.+?``|:[\w:+.-]+:`[^`]*`|`[^`]*`_{0,2}", re.S)
"""Inline literals, roles and interpreted text: a ``|`` inside them is not markup."""
DIRECTIVE = re.compile(r"^\.\. ([\w:-]+)::")
LITERAL_DIRECTIVES = {"math", "code", "code-block", "sourcecode", "literalinclude", "doctest",
                      "testcode", "testoutput", "parsed-literal", "raw", "highlight"}
"""Directives whose content is not reStructuredText prose."""
SECTION = re.compile(r"^\s*(Returns|Yields):\s*$")
THIRD_PARTY = ("torch", "transformers", "numpy", "sympy", "pandas", "matplotlib", "scipy",
               "accelerate", "gguf", "safetensors", "tokenizers", "huggingface_hub", "ipywidgets")
"""Top-level packages whose modules astroid is not to parse (nor any of their submodules)."""


def deny_third_party() -> None:
    """Makes astroid refuse to build modules of ``THIRD_PARTY``, as if they were missing."""
    from astroid.exceptions import AstroidImportError
    from astroid.manager import AstroidManager

    if getattr(AstroidManager, "_posenc_denied", False):
        return
    build = AstroidManager.ast_from_module_name

    def ast_from_module_name(self, modname, *args, **kwargs):
        if modname and modname.split(".")[0] in THIRD_PARTY:
            raise AstroidImportError(f"{modname}: not parsed for the API page")
        return build(self, modname, *args, **kwargs)

    AstroidManager.ast_from_module_name = ast_from_module_name
    AstroidManager._posenc_denied = True


def join_opening_literal(lines: list[str]) -> None:
    """Joins, in place, the lines of an inline literal that opens a Returns section."""
    for n, line in enumerate(lines):
        if not SECTION.match(line):
            continue
        first = next((k for k in range(n + 1, len(lines)) if lines[k].strip()), None)
        if first is None:
            continue
        while lines[first].count("``") % 2 and first + 1 < len(lines) and lines[first + 1].strip():
            lines[first] = f"{lines[first].rstrip()} {lines.pop(first + 1).strip()}"


def escape_bars(text: str) -> str:
    """``|`` escaped outside inline literals, roles and interpreted text."""
    out, at = [], 0
    for match in PROTECTED.finditer(text):
        out += [re.sub(r"(?<!\\)\|", r"\\|", text[at:match.start()]), match.group()]
        at = match.end()
    out.append(re.sub(r"(?<!\\)\|", r"\\|", text[at:]))
    return "".join(out)


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


def escape_bars_in_text(lines: list[str]) -> None:
    """Escapes, in place, ``|`` in the prose of a docstring. Left as they are: literal
    blocks (after ``::``), the contents of directives that are not prose (``.. math::``,
    where ``|x|`` is LaTeX; code), every directive's line and options (napoleon writes
    ``.. attribute:: x`` with ``:type: int | None``, read as Python) and doctests."""
    prose: list[int] = []  # indices of the current run of prose lines
    block_indent: int | None = None  # inside a literal block deeper than this
    in_options = in_doctest = False

    def flush() -> None:
        if prose:
            # One text, so that a literal may run over lines; napoleon's lines hold "\n".
            escaped = escape_bars("\0".join(lines[k] for k in prose)).split("\0")
            for k, new in zip(prose, escaped):
                lines[k] = new
            prose.clear()

    for n, line in enumerate(lines):
        stripped = line.strip()
        if block_indent is not None:
            if not stripped or indent_of(line) > block_indent:
                continue
            block_indent = None
        if in_options:
            if stripped.startswith(":"):
                continue
            in_options = False
        if in_doctest:
            if stripped:
                continue
            in_doctest = False
        if stripped.startswith(">>>"):
            flush()
            in_doctest = True
            continue
        directive = DIRECTIVE.match(stripped)
        if directive:
            flush()
            in_options = True
            if directive.group(1) in LITERAL_DIRECTIVES:
                block_indent = indent_of(line)
            continue
        if stripped.endswith("::"):
            flush()
            block_indent = indent_of(line)
            lines[n] = escape_bars(line)  # the paragraph that opens the block is prose
            continue
        prose.append(n)
    flush()


def before_napoleon(app, what, name, obj, options, lines: list[str]) -> None:
    join_opening_literal(lines)


def after_napoleon(app, what, name, obj, options, lines: list[str]) -> None:
    escape_bars_in_text(lines)


def setup(app: Sphinx) -> dict:
    deny_third_party()
    app.setup_extension("sphinx.ext.napoleon")
    # napoleon connects at the default priority, 500.
    app.connect("autodoc-process-docstring", before_napoleon, priority=400)
    app.connect("autodoc-process-docstring", after_napoleon, priority=600)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
