"""Figures a reader can move: a slider over a parameter, offline, in the built HTML.

A :class:`Player` holds one PNG frame per value of a parameter (a position, a window
length, a stretch factor κ) and writes them, with a slider, two step buttons and a play
button, as one self-contained piece of HTML: the frames are ``data:`` URIs and the script
that swaps them is inline, so the page loads nothing from the network and needs no running
kernel. Where the script cannot run (Jupyter does not run the scripts of a notebook it does
not trust, such as one freshly cloned), the player says so and how to enable it: the hint
is in the HTML and the script removes it.
Every frame is drawn by matplotlib from numbers computed beforehand; each figure's
function (in :mod:`posenc_lib.players`) returns those numbers too (``player.table``), so a
notebook can assert and print what the frames show. This module needs no torch.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import string
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
from matplotlib.figure import Figure

DPI = 90
"""Resolution of the frames: a 7.6 in wide figure is 684 px, inside the book's column."""


@dataclass
class Player:
    """PNG frames of one figure, one per value of a parameter, shown with a slider.

    Attributes:
        frames: PNG bytes, one per slider position, all of the same pixel size.
        values: the parameter's value at each frame, as the reader should read it
            (e.g. ``"t = 5, s = 2"``).
        label: what the slider moves (e.g. ``"query position t"``).
        alt: what the figure shows, for readers who cannot see it (the image's alt
            text; the player's own aria-label is the short "figure with a slider:
            ``label``").
        table: the numbers the frames show, for a notebook to assert and print.
    """

    frames: list[bytes]
    values: list[str]
    label: str
    alt: str
    table: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __post_init__(self) -> None:
        if not self.frames or len(self.frames) != len(self.values):
            raise ValueError(f"need one value per frame and at least one frame, got "
                             f"{len(self.frames)} frames, {len(self.values)} values")

    @property
    def size_bytes(self) -> int:
        """Length of :meth:`to_html`, the bytes the player adds to a page."""
        return len(self.to_html().encode())

    def to_html(self) -> str:
        """The player as HTML: image, slider, step and play buttons, a hint shown only where
        scripts do not run, and an inline script.

        Nothing in it refers to another address: the frames are ``data:`` URIs. The
        element ids come from a hash of the frames, so two players on a page differ.
        """
        uris = ["data:image/png;base64," + base64.b64encode(f).decode("ascii")
                for f in self.frames]
        digest = hashlib.sha1(b"".join(self.frames) + self.label.encode()).hexdigest()
        uid = "posenc-player-" + digest[:12]
        width, height = _png_size(self.frames[0])
        alt, label = html.escape(self.alt), html.escape(self.label)
        shown = html.escape(self.values[0])
        last = len(self.frames) - 1
        # one substitution pass: text put in (base64, values) is never searched again
        script = _SCRIPT.substitute(uid=uid, frames=_script_json(uris),
                                    values=_script_json(self.values), frame_ms=FRAME_MS)
        group = html.escape(f"figure with a slider: {self.label}")  # short: alt is long
        return (
            f'<div class="posenc-player" id="{uid}" role="group" '
            f'aria-label="{group}">\n'
            f'<img class="posenc-player-frame" src="{uris[0]}" alt="{alt}" '
            f'width="{width}" height="{height}">\n'
            f'<div class="posenc-player-controls" style="display: flex; '
            f'align-items: center; gap: 0.5em; max-width: {width}px;">\n'
            f'<button type="button" class="posenc-player-previous" '
            f'aria-label="previous frame">&#9664;</button>\n'
            f'<input type="range" class="posenc-player-slider" min="0" max="{last}" '
            f'step="1" value="0" aria-label="{label}" style="flex: 1;">\n'
            f'<button type="button" class="posenc-player-next" '
            f'aria-label="next frame">&#9654;</button>\n'
            f'<button type="button" class="posenc-player-play" '
            f'aria-label="play">&#9655; play</button>\n'
            f'<output class="posenc-player-value" aria-live="polite">{shown}</output>\n'
            f"</div>\n"
            f'<p class="posenc-player-hint"><em>{html.escape(UNTRUSTED_HINT)}</em></p>\n'
            f"<script>{script}</script>\n</div>"
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:
        return f"Player({len(self.frames)} frames of {self.label!r})"


UNTRUSTED_HINT = ("The slider and buttons do nothing: this notebook's scripts are not "
                  "running. In Jupyter, trust the notebook (File > Trust Notebook, or "
                  "`jupyter trust` on the file) and reload it; on the book's website the "
                  "figure moves.")
"""Shown under a player whose script did not run; the script removes it."""

FRAME_MS = 600
"""Milliseconds per frame when the player plays."""

_SCRIPT = string.Template("""
(function () {
  var root = document.getElementById("$uid");
  var frames = $frames, values = $values;
  var img = root.querySelector(".posenc-player-frame");
  var slider = root.querySelector(".posenc-player-slider");
  var shown = root.querySelector(".posenc-player-value");
  function show(i) {
    i = Math.max(0, Math.min(frames.length - 1, i));
    slider.value = i; img.src = frames[i]; shown.textContent = values[i];
  }
  slider.addEventListener("input", function () { show(parseInt(slider.value, 10)); });
  root.querySelector(".posenc-player-previous").addEventListener(
    "click", function () { show(parseInt(slider.value, 10) - 1); });
  root.querySelector(".posenc-player-next").addEventListener(
    "click", function () { show(parseInt(slider.value, 10) + 1); });
  var play = root.querySelector(".posenc-player-play"), timer = null;
  function stop() { clearInterval(timer); timer = null; play.innerHTML = "&#9655; play"; }
  play.addEventListener("click", function () {
    if (timer !== null) { stop(); return; }
    if (parseInt(slider.value, 10) >= frames.length - 1) { show(0); }
    play.innerHTML = "&#10073;&#10073; pause";
    timer = setInterval(function () {
      var i = parseInt(slider.value, 10) + 1;
      show(i);
      if (i >= frames.length - 1) { stop(); }
    }, $frame_ms);
  });
  var hint = root.querySelector(".posenc-player-hint");
  if (hint) { hint.remove(); }
})();
""")


def _script_json(value: object) -> str:
    """``value`` as a JavaScript literal that cannot end the inline ``<script>``."""
    return json.dumps(value).replace("</", "<\\/")


def _png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels, read from the PNG's header."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def render_frames(draw: Callable[[Figure, int], None], count: int, *,
                  figsize: tuple[float, float], dpi: int = DPI) -> list[bytes]:
    """Draw ``count`` frames: ``draw(fig, i)`` fills an empty figure for frame ``i``.

    Every frame has the same size (no tight bounding box), so the page does not jump
    when the slider moves. The figures are drawn without pyplot: nothing is shown in
    the notebook and the backend is left alone.
    """
    frames = []
    for i in range(count):
        fig = Figure(figsize=figsize, dpi=dpi)
        draw(fig, i)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi)
        frames.append(buffer.getvalue())
    return frames
