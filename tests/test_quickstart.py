"""The library's quickstart runs as written: the examples in README.md ("The library in
three examples") and in posenc_lib's package docstring, each checked against its shown
output with doctest; and the README states the Python version the outputs were stored with.
"""

from __future__ import annotations

import doctest
import json
import re
from pathlib import Path

import pytest
import torch

import posenc_lib

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FLAGS = doctest.NORMALIZE_WHITESPACE


def readme_examples() -> list[str]:
    """The ```pycon blocks of the README's quickstart section, in order."""
    start = README.index("## The library in three examples")
    section = README[start:README.index("\n## ", start + 1)]
    return re.findall(r"```pycon\n(.+?)```", section, re.S)


def test_the_readme_has_three_examples() -> None:
    assert len(readme_examples()) == 3


def test_the_readme_examples_run_as_shown() -> None:
    """Each block alone, in a fresh namespace, as a reader pasting one block into a new
    session (a block that leans on an earlier one's imports fails here)."""
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=FLAGS)
    for k, text in enumerate(readme_examples()):
        test = parser.get_doctest(text, {}, f"README example {k + 1}", "README.md", 0)
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0, "a README example changed; see above"


@pytest.mark.parametrize("module", [posenc_lib, posenc_lib.encodings.rope],
                         ids=["posenc_lib", "posenc_lib.encodings.rope"])
def test_docstring_examples_run_as_shown(module) -> None:
    result = doctest.testmod(module, extraglobs={"torch": torch}, optionflags=FLAGS)
    assert result.attempted > 0 and result.failed == 0


def test_the_readme_states_the_python_of_the_stored_outputs() -> None:
    versions = {
        ".".join(json.loads(path.read_text())["metadata"]["posenc_execution"]["python"]
                 .split(".")[:2])
        for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
    }
    assert len(versions) == 1, f"chapters stored with several Pythons: {versions}"
    assert f"You need Python {versions.pop()}" in " ".join(README.split())
