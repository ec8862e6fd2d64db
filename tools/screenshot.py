"""Screenshots of the built book as a reader sees it, in headless Chromium.

    python tools/screenshot.py book/intro notebooks/09_train_short_test_long_at_scale \
        [--width 1280] [--full-page] [--out _build/screenshots]

Build the book first (README, "Build the book"). Each page of ``_build/html`` is served over
HTTP, opened at the given window width (1280 px by default, the width the browser test
checks), and saved as ``OUT/<page>.png`` once MathJax has typeset it. Chromium comes from the
Debian package ``chromium`` (or ``$POSENC_CHROMIUM``), driven with Playwright, with the same
flags as ``tests/test_site.py``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
WAIT_FOR_MATHJAX = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
}"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass


def chromium() -> str:
    for name in (os.environ.get("POSENC_CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise SystemExit("Chromium not found: apt-get install chromium, or set POSENC_CHROMIUM")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pages", nargs="+", help="pages as in _toc.yml, e.g. book/intro")
    parser.add_argument("--width", type=int, default=1280, help="window width in px")
    parser.add_argument("--full-page", action="store_true", help="the whole page")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "screenshots")
    args = parser.parse_args(argv)
    html = ROOT / "_build" / "html"
    if not (html / "index.html").exists():
        raise SystemExit(f"no built book at {html}: build it first (README)")
    from playwright.sync_api import sync_playwright

    handler = functools.partial(QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=FLAGS)
        page = browser.new_page(viewport={"width": args.width, "height": 900})
        for name in args.pages:
            page.goto(f"{base}{name}.html", wait_until="load")
            page.evaluate(WAIT_FOR_MATHJAX)
            target = args.out / f"{name.replace('/', '__')}.png"
            page.screenshot(path=str(target), full_page=args.full_page)
            print(target)
        browser.close()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
