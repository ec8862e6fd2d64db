"""The positional schemes of the book: their names in the book's order, and how figures and
tables show them (display name, colour, marker). The one home of these names: the model
(:data:`posenc_lib.model.SCHEMES`), the stored results and the figures all read them here."""

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
