"""posenc_book.schemes: the display names and colours of schemes and stretch methods."""

from __future__ import annotations

import pytest

from posenc_book.schemes import METHOD_STYLE, SCHEME_STYLE, method_label
from posenc_lib.encodings.rope_scaling import STRETCH_METHODS


def test_method_style_covers_the_methods_in_order() -> None:
    assert tuple(METHOD_STYLE) == STRETCH_METHODS
    assert METHOD_STYLE["none"]["color"] == SCHEME_STYLE["rope"]["color"]
    colors = [style["color"] for style in METHOD_STYLE.values()]
    scheme_colors = {style["color"] for style in SCHEME_STYLE.values()}
    assert len(set(colors)) == len(colors) and not scheme_colors & set(colors[1:])


def test_method_label() -> None:
    assert method_label("linear") == "PI (linear)"
    assert method_label("linear", short=True) == "PI"
    with pytest.raises(ValueError, match="ntk"):
        method_label("ntk")
