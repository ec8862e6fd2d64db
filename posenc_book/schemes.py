"""The positional schemes of the book: their names in the book's order, and how figures and
tables show them (display name, colour, marker). The one home of these names: the model
(:data:`posenc_lib.model.SCHEMES`), the stored results and the figures all read them here.
The same for the methods that stretch a RoPE model's context (chapters 11, 12 and 16):
:data:`METHOD_STYLE`."""

from __future__ import annotations

SCHEMES: tuple[str, ...] = ("none", "sinusoidal", "learned", "rope", "alibi", "t5")
"""Every positional scheme the model knows, in the book's order."""

SCHEME_STYLE: dict[str, dict[str, str]] = {
    "none": {"color": "#7f7f7f", "marker": "x", "label": "NoPE"},
    "sinusoidal": {"color": "#1f77b4", "marker": "o", "label": "Sinusoidal"},
    "learned": {"color": "#ff7f0e", "marker": "s", "label": "Learned"},
    "rope": {"color": "#2ca02c", "marker": "^", "label": "RoPE"},
    "alibi": {"color": "#d62728", "marker": "v", "label": "ALiBi"},
    "t5": {"color": "#9467bd", "marker": "D", "label": "T5 bias"},
}
"""Colour, marker and display name of each positional scheme."""

def scheme_label(scheme: str) -> str:
    """Display name of a scheme (``"rope"`` → ``"RoPE"``); unknown names unchanged."""
    return SCHEME_STYLE.get(scheme, {}).get("label", scheme)


METHOD_STYLE: dict[str, dict[str, str]] = {
    "none": {"color": SCHEME_STYLE["rope"]["color"], "label": "no scaling",
             "short": "no scaling"},
    "linear": {"color": "#17becf", "label": "PI (linear)", "short": "PI"},
    "dynamic": {"color": "#8c564b", "label": "dynamic NTK", "short": "dynamic NTK"},
    "yarn": {"color": "#e377c2", "label": "YaRN", "short": "YaRN"},
    "llama3": {"color": "#bcbd22", "label": "Llama 3", "short": "Llama 3"},
}
"""Colour, display name and short name of each context-extension method
(:data:`posenc_lib.encodings.rope_scaling.STRETCH_METHODS`, in that order): plain RoPE
("none") in RoPE's colour, the four methods in colours no scheme uses."""


def method_label(method: str, short: bool = False) -> str:
    """Display name of a method (``"linear"`` → ``"PI (linear)"``, short: ``"PI"``).

    Raises:
        ValueError: for a method not in :data:`METHOD_STYLE` (named in the message).
    """
    if method not in METHOD_STYLE:
        raise ValueError(f"method must be one of {list(METHOD_STYLE)}, got method={method!r}")
    return METHOD_STYLE[method]["short" if short else "label"]
