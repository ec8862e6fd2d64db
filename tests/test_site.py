"""The book as readers meet it: the built website in a browser, and the ways to get the
book.

* The site is built (``jupyter-book build . -W``; incremental, so quick after the
  README's build) and every page of ``_toc.yml`` is opened in headless Chromium at 1280
  px, served over HTTP as a website would be. Each page must show: math typeset by
  MathJax and no raw TeX left; every image loaded, with alt text, and not shrunk below
  80 % of its size in CSS px (a figure stored at 2x declares it); nothing in the main column
wider than the column (no output that
  scrolls or is clipped sideways); citations that link to a reference whose label reads
  like the citation; no console errors and no request that fails or leaves the site.
* Every image in a page's text is a numbered figure ("Figure 3.1") with a caption, stored
  at twice its CSS size and linked to its own file; at a 390 px phone viewport its tick
  labels are still at least 9 px.
* Every link and anchor between the site's pages resolves.
* Chapters carry a Colab button at the book's version.
* The figures a reader can move (``posenc_lib.players``) change their picture when
  their slider or buttons move, and ask nothing of the network.
* The landing page's sentences about its figure hold on the stored results it draws.
* The GitHub Pages workflow runs the README's build command and publishes
  ``_build/html``.
* A wheel of posenc_lib carries every subpackage, the corpora and the stored results.
* The release workflow creates the tag the Colab links and install cells name.

Chromium comes from the Debian package ``chromium`` (``.ci/run`` installs it when
missing) and is driven with Playwright. Where it cannot be installed, ``.ci/run`` says
why in ``$POSENC_BROWSER_UNAVAILABLE`` and the browser tests skip with that reason;
anywhere else a missing Chromium fails under CI (``$CI``) and skips with instructions on
a developer machine.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPOSITORY = CONFIG["repository"]["url"]
TAG = CONFIG["repository"]["branch"]
VIEWPORT = {"width": 1280, "height": 900}
MIN_SCALE = 0.8  # an image shown below 80 % of its size has text too small to read
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def toc_files() -> list[str]:
    def walk(node) -> list[str]:
        found = []
        if isinstance(node, dict):
            found += [node[k] for k in ("root", "file") if k in node]
            for key in ("parts", "chapters", "sections"):
                found += walk(node.get(key, []))
        elif isinstance(node, list):
            for item in node:
                found += walk(item)
        return found

    return walk(yaml.safe_load((ROOT / "_toc.yml").read_text()))


PAGES = toc_files()


def readme_command(marker: str) -> str:
    """The command in the fenced block after ``<!-- marker -->`` in README.md."""
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- {marker} -->\s*```bash\n(.+?)\n```", text, re.S)
    assert match, f"README.md has no ```bash block after <!-- {marker} -->"
    return match.group(1).strip()


# --- The built site -------------------------------------------------------------------


@pytest.fixture(scope="session")
def site() -> Path:
    """``_build/html``, built now with warnings as errors (incremental: quick if up to date)."""
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [
        str(jupyter_book if jupyter_book.exists() else "jupyter-book"),
        "build",
        ".",
        "-W",
        "--keep-going",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert (
        done.returncode == 0
    ), f"the book does not build with -W:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return HTML


def page_path(docname: str) -> str:
    return f"{docname}.html"


def ids_and_links(path: Path) -> tuple[set[str], list[tuple[str, str]]]:
    """The ids (and names) of a page's elements, and its (tag, url) references."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(errors="replace"), "html.parser")
    ids = {el["id"] for el in soup.find_all(id=True)} | {
        el["name"] for el in soup.find_all("a", attrs={"name": True})
    }
    links = [
        (el.name, el[attr])
        for attr, tags in (("href", ("a", "link")), ("src", ("img", "script")))
        for el in soup.find_all(tags)
        if el.get(attr)
    ]
    return ids, links


def test_internal_links_and_anchors_resolve(site: Path) -> None:
    pages = {
        p: ids_and_links(p) for p in site.rglob("*.html") if "_static" not in p.parts
    }
    broken = []
    for path, (_, links) in pages.items():
        base = path.as_uri()
        for tag, url in links:
            parsed = urlparse(url)
            if parsed.scheme in (
                "http",
                "https",
                "mailto",
                "javascript",
                "data",
            ) or url.startswith("//"):
                continue
            target_url, fragment = urldefrag(urljoin(base, url))
            target = Path(unquote(urlparse(target_url).path))
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(site)}: <{tag}> {url}"
            if not target.exists():
                broken.append(
                    f"{where} (no file {target.relative_to(site) if site in target.parents else target})"
                )
            elif fragment and target.suffix == ".html":
                ids = pages[target][0] if target in pages else ids_and_links(target)[0]
                if fragment not in ids:
                    broken.append(f"{where} (no element #{fragment})")
    assert not broken, "broken internal links:\n" + "\n".join(broken)


@pytest.mark.parametrize("docname", [d for d in PAGES if d.startswith("notebooks/")])
def test_chapter_has_a_colab_button_at_the_book_version(
    site: Path, docname: str
) -> None:
    html = (site / page_path(docname)).read_text()
    owner_repo = urlparse(REPOSITORY).path.strip("/")
    expected = f"https://colab.research.google.com/github/{owner_repo}/blob/{TAG}/{docname}.ipynb"
    assert expected in html, f"{docname}: no Colab launch button to {expected}"


# --- In the browser -------------------------------------------------------------------


def chromium_executable() -> str | None:
    for candidate in (
        os.environ.get("POSENC_CHROMIUM"),
        "chromium",
        "chromium-browser",
        "google-chrome",
    ):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


@pytest.fixture(scope="session")
def browser(site: Path):
    """Headless Chromium and the base URL of the site, served over HTTP as a website is."""
    unavailable = os.environ.get("POSENC_BROWSER_UNAVAILABLE")
    if unavailable:
        pytest.skip(f"browser tests not run: {unavailable}")
    executable = chromium_executable()
    if executable is None:
        message = (
            "Chromium not found (looked for $POSENC_CHROMIUM, chromium, chromium-browser, "
            "google-chrome); install it with `apt-get install chromium` — .ci/run does"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(f"browser tests not run: {message}")
    from playwright.sync_api import sync_playwright

    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_FLAGS
        )
        yield chromium, base
        chromium.close()
    server.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(
        self, format: str, *args
    ) -> None:  # noqa: A002 - the base class's name
        pass


# The width an <img> asks for in CSS px: its width attribute or style (a 2x figure's is half
# its pixels), else its pixels.
DECLARED_WIDTH = r"""
  const declaredWidth = (img) => {
    const attribute = parseFloat(img.getAttribute('width') || img.style.width || '');
    return attribute > 0 ? attribute : img.naturalWidth;
  };
"""

# Runs in the page once it has loaded and MathJax has finished: every problem a reader would see.
INSPECT = r"""
async (minScale) => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  // Open what a reader can open (solutions, hidden code), since it must fit too.
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  await new Promise(r => setTimeout(r, 100));
  const article = document.querySelector('article.bd-article') || document.querySelector('main');
  const right = article.getBoundingClientRect().right;
  const problems = [];
  const describe = (e) => {
    const cls = (e.className && e.className.baseVal === undefined) ? e.className : '';
    const text = (e.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 70);
    return `<${e.tagName.toLowerCase()}${cls ? ' class="' + cls + '"' : ''}> "${text}"`;
  };
  const visible = (e) => e.getClientRects().length > 0;
  ${DECLARED_WIDTH}

  // Math: every math element typeset, no raw TeX delimiters left in the text.
  const maths = [...article.querySelectorAll('.math')];
  const raw = maths.filter(m => !m.querySelector('mjx-container'));
  if (raw.length) problems.push(`${raw.length} of ${maths.length} math elements not typeset, e.g. ${describe(raw[0])}`);
  const prose = article.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, mjx-container, .highlight').forEach(e => e.remove());
  for (const delimiter of ['\\(', '\\)', '\\[', '\\]', '$$']) {
    const at = prose.textContent.indexOf(delimiter);
    if (at >= 0) problems.push(`raw TeX ${delimiter} in the text: "${prose.textContent.slice(Math.max(0, at - 40), at + 40).replace(/\s+/g, ' ')}"`);
  }

  // Images: loaded, described, and shown at a readable size.
  for (const img of article.querySelectorAll('img')) {
    const src = img.getAttribute('src') || '';
    const name = src.split('/').pop();
    if (!img.complete || img.naturalWidth === 0) { problems.push(`image not loaded: ${src}`); continue; }
    const alt = (img.getAttribute('alt') || '').trim();
    if (!alt || alt === src || alt.endsWith(name) || /\.(png|jpe?g|svg|gif)$/i.test(alt)) {
      problems.push(`image without alt text (alt="${alt.slice(0, 60)}"): ${name}`);
    }
    // A figure stored at 2x ("retina") declares its size in CSS px; shrinking is
    // measured against that size, not against its pixels.
    const shown = img.getBoundingClientRect().width;
    const size = declaredWidth(img);
    if (visible(img) && shown < minScale * size - 1) {
      problems.push(`image shrunk to ${Math.round(100 * shown / size)} % (${Math.round(shown)} of ${Math.round(size)} CSS px): ${name}`);
    }
  }

  // Width: nothing scrolls or is clipped sideways, nothing sticks out of the column.
  const clips = (e) => ['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(e).overflowX);
  const block = (e) => !getComputedStyle(e).display.startsWith('inline');
  for (const e of article.querySelectorAll('*')) {
    if (!visible(e) || !block(e) || e.parentElement?.closest('mjx-container')) continue;
    if (clips(e) && e.scrollWidth > e.clientWidth + 2) {
      problems.push(`wider than the column by ${e.scrollWidth - e.clientWidth} px (scrolls or is cut): ${describe(e)}`);
    }
  }
  for (const e of article.querySelectorAll('div, pre, table, img, figure, p, ul, ol, dl, mjx-container[display="true"]')) {
    if (!visible(e) || e.getBoundingClientRect().right <= right + 2) continue;
    let inside = false;
    for (let a = e.parentElement; a && a !== article; a = a.parentElement) { if (clips(a)) { inside = true; break; } }
    if (!inside) problems.push(`sticks out of the column by ${Math.round(e.getBoundingClientRect().right - right)} px: ${describe(e)}`);
  }

  // Citations: each links to an element whose label reads like the citation.
  const citations = [...article.querySelectorAll('span.bibtex-citation a, a.bibtex-citation')];
  const targets = [];
  for (const a of citations) {
    const url = new URL(a.href);
    targets.push({text: a.textContent.trim(), page: url.origin + url.pathname, id: decodeURIComponent(url.hash.slice(1))});
  }
  return {problems, citations: targets, here: location.origin + location.pathname};
}
""".replace("${DECLARED_WIDTH}", DECLARED_WIDTH)


def label_of(target: dict, cache: dict) -> str | None:
    """Text of the label of the citation target (on this page or another one)."""
    key = (target["page"], target["id"])
    if key not in cache:
        from bs4 import BeautifulSoup

        path = HTML / urlparse(target["page"]).path.lstrip("/")
        soup = BeautifulSoup(path.read_text(), "html.parser")
        element = soup.find(id=target["id"])
        label = element.find(class_="label") if element else None
        cache[key] = (
            label.get_text(" ", strip=True).strip("[] ")
            if label
            else (element.get_text(" ", strip=True)[:80] if element else None)
        )
    return cache[key]


_LABELS: dict = {}


def offline_page(chromium, problems: list[str]):
    """A new page at the desktop viewport that may load only from the local server: a
    request for anything else is aborted and reported in ``problems``, as is a page error."""

    def on_request(route) -> None:
        if urlparse(route.request.url).hostname not in ("127.0.0.1", "localhost"):
            problems.append(f"request leaves the site: {route.request.url[:120]}")
            route.abort()
        else:
            route.continue_()

    page = chromium.new_page(viewport=VIEWPORT)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.route("**/*", on_request)
    return page


@pytest.mark.parametrize("docname", PAGES)
def test_page_reads_well_in_chromium(browser, docname: str) -> None:
    chromium, base = browser
    errors: list[str] = []

    def on_console(message) -> None:
        if message.type == "error":
            errors.append(f"console error: {message.text}")

    page = offline_page(chromium, errors)
    page.on("console", on_console)
    page.on(
        "requestfailed", lambda request: errors.append(f"request failed: {request.url}")
    )
    try:
        response = page.goto(base + page_path(docname), wait_until="load")
        assert (
            response is not None and response.ok
        ), f"{docname}: HTTP {response and response.status}"
        report = page.evaluate(INSPECT, MIN_SCALE)
    finally:
        page.close()
    problems = errors + report["problems"]
    for citation in report["citations"]:
        label = label_of(citation, _LABELS)
        words = re.findall(r"\w+", citation["text"].replace("et al", ""))
        if label is None:
            problems.append(
                f"citation {citation['text']!r} links to nothing (#{citation['id']})"
            )
        elif not all(word in label for word in words):
            problems.append(
                f"citation {citation['text']!r} links to an entry labelled {label!r}"
            )
    assert not problems, f"{docname}, at {VIEWPORT['width']} px:\n" + "\n".join(
        problems
    )


# Chapters with a player of posenc_lib.players (a figure with a slider), and how many.
PLAYERS = {
    "notebooks/05_rope": 1,
    "notebooks/10_why_extrapolation_fails": 1,
    "notebooks/11_context_extension": 1,
}


@pytest.mark.parametrize("docname", list(PLAYERS))
def test_interactive_figures_move_offline(browser, docname: str) -> None:
    """Each player on the page changes its picture when its slider or buttons move it,
    and nothing it does asks for anything outside the site."""
    chromium, base = browser
    problems: list[str] = []

    page = offline_page(chromium, problems)
    try:
        page.goto(base + page_path(docname), wait_until="load")
        players = page.locator(".posenc-player")
        assert players.count() == PLAYERS[docname], f"{docname}: players on the page"
        for n in range(players.count()):
            player = players.nth(n)
            player.scroll_into_view_if_needed()
            image = player.locator("img.posenc-player-frame")
            slider = player.locator("input.posenc-player-slider")
            shown = player.locator("output.posenc-player-value")
            last = int(slider.get_attribute("max"))
            assert last >= 2, f"{docname}, player {n}: {last + 1} frames"
            seen = [(image.get_attribute("src"), shown.text_content())]
            player.locator("button.posenc-player-next").click()  # one step
            seen.append((image.get_attribute("src"), shown.text_content()))
            assert slider.input_value() == "1"
            slider.press("End")  # the slider moved to its end, from the keyboard
            seen.append((image.get_attribute("src"), shown.text_content()))
            assert slider.input_value() == str(last)
            player.locator("button.posenc-player-previous").click()
            seen.append((image.get_attribute("src"), shown.text_content()))
            assert slider.input_value() == str(last - 1)
            sources = [src for src, _ in seen]
            assert all(src.startswith("data:image/png;base64,") for src in sources)
            assert len(set(sources)) == 4, f"{docname}, player {n}: the frame did not change"
            assert len({value for _, value in seen}) == 4, f"{docname}, player {n}: label"
            assert image.evaluate("img => img.complete && img.naturalWidth > 0")
            assert len((image.get_attribute("alt") or "").split()) >= 5
            # the script ran, so the hint for untrusted notebooks is gone; play moves on
            assert player.locator(".posenc-player-hint").count() == 0
            slider.press("Home")
            player.locator("button.posenc-player-play").click()
            page.wait_for_timeout(1500)
            assert int(slider.input_value()) >= 1, f"{docname}, player {n}: play did not move"
            player.locator("button.posenc-player-play").click()  # pause
    finally:
        page.close()
    assert not problems, f"{docname}:\n" + "\n".join(problems)


# --- Figures: numbered, captioned, sharp at 2x, exportable, legible on a phone ----------

PHONE = {"width": 390, "height": 844}  # a phone's viewport in CSS px (iPhone 12 to 15)
FIGURES_PENDING: set[str] = set()
"""Issue 29: chapters edited in parallel when figures got numbers, captions and 2x
images (as in tests/test_book_hygiene.py). Expected to fail until the mechanism is applied
to them; one that passes fails, so that it is taken off this list."""


def expect_unless_pending(docname: str, problems: list[str]) -> None:
    if docname in FIGURES_PENDING:
        if problems:
            pytest.xfail(f"issue 29, not yet applied to {docname}: {problems[0]}")
        pytest.fail(f"{docname} passes now: take it off FIGURES_PENDING")
    assert not problems, f"{docname}:\n" + "\n".join(problems)


def is_player_frame(img) -> bool:
    """A frame of an interactive player (``posenc_lib.players``): an HTML output with
    data-URI frames, not a figure; the player tests check it."""
    parent = img.parent
    return (
        "posenc-player-frame" in img.get("class", [])
        and img.get("src", "").startswith("data:image/")
        and parent is not None
        and parent.name == "div"
        and "posenc-player" in parent.get("class", [])
    )


def declared_width(img) -> float | None:
    """The CSS width an <img> declares (attribute or inline style), in px."""
    match = re.search(
        r"(?:^|;)\s*width:\s*([\d.]+)px", img.get("style", "")
    ) or re.fullmatch(r"([\d.]+)(px)?", img.get("width", ""))
    return float(match.group(1)) if match else None


@pytest.mark.parametrize("docname", PAGES)
def test_figures_are_numbered_captioned_sharp_and_exportable(
    site: Path, docname: str
) -> None:
    """Every image in a page's text is a numbered figure with a caption, declares its
    CSS size, is stored with twice as many pixels (sharp on a 2x screen), and links to
    its own file (a reader can open, save or present it; it works offline)."""
    from bs4 import BeautifulSoup
    from PIL import Image

    path = site / page_path(docname)
    soup = BeautifulSoup(path.read_text(), "html.parser")
    article = soup.select_one("article.bd-article") or soup.main
    images = [img for img in article.find_all("img") if not is_player_frame(img)]
    if not images:
        pytest.skip(f"{docname} shows no image")
    problems = []
    for img in images:
        name = img["src"].split("/")[-1][:16]
        figure = img.find_parent("figure")
        caption = figure.find("figcaption") if figure else None
        number = caption.select_one(".caption-number") if caption else None
        if number is None or not re.fullmatch(
            r"Figure \d+(\.\d+)*", number.get_text(strip=True)
        ):
            problems.append(f"{name}: not in a <figure> numbered 'Figure N.M' in its caption")
        elif not figure.get("id"):
            problems.append(f"{name}: its figure has no id to cite it by")
        elif len(caption.get_text(" ", strip=True).split()) < 10:
            problems.append(f"{name}: caption too short to say what to notice")
        width = declared_width(img)
        link = img.find_parent("a")
        if width is None:
            problems.append(f"{name}: declares no CSS width (not stored at 2x)")
        if link is None or not link.get("href", "").endswith(".png"):
            problems.append(f"{name}: does not link to its image file")
            continue
        target = (path.parent / unquote(link["href"])).resolve()
        if not target.is_file():
            problems.append(f"{name}: links to a missing file {link['href']}")
        elif width is not None:
            pixels = Image.open(target).size[0]
            if pixels < 2 * width - 2:
                problems.append(
                    f"{name}: {pixels} px for {width:.0f} CSS px (not sharp at 2x)"
                )
    expect_unless_pending(docname, problems)


@pytest.mark.parametrize("docname", PAGES)
def test_figures_are_legible_on_a_phone(browser, docname: str) -> None:
    """At a 390 px viewport a figure is shown narrower than its size; its tick labels
    (``TICK_FONT_PT`` at ``FIGURE_DPI``) must still be at least ``MIN_PHONE_FONT_PX``, and
    it must keep its proportions (not be squeezed sideways)."""
    from posenc_book.plotting import (
        FIGURE_DPI,
        MAX_FIGURE_WIDTH_IN,
        MIN_PHONE_FONT_PX,
        TICK_FONT_PT,
    )

    tick_px = TICK_FONT_PT * FIGURE_DPI / 72  # the tick labels' size at 100 %
    chromium, base = browser
    page = chromium.new_page(viewport=PHONE)
    try:
        page.goto(base + page_path(docname), wait_until="load")
        shown = page.evaluate(
            "() => {" + DECLARED_WIDTH + """
              const article = document.querySelector('article.bd-article');
              const frame = 'div.posenc-player > img.posenc-player-frame';
              return [...article.querySelectorAll('img')]
                .filter(img => !img.matches(frame)).map(img => ({
                name: img.getAttribute('src').split('/').pop().slice(0, 16),
                shown: img.getBoundingClientRect().width,
                tall: img.getBoundingClientRect().height,
                aspect: img.naturalHeight / img.naturalWidth,
                size: declaredWidth(img)}));
            }"""
        )
    finally:
        page.close()
    if not shown:
        pytest.skip(f"{docname} shows no image")
    problems = [
        f"{i['name']}: tick labels {tick_px * i['shown'] / i['size']:.1f} px at "
        f"{PHONE['width']} px ({i['shown']:.0f} of {i['size']:.0f} CSS px); draw it "
        f"narrower (at most {MAX_FIGURE_WIDTH_IN} in)"
        for i in shown
        if tick_px * i["shown"] / i["size"] < MIN_PHONE_FONT_PX
    ] + [
        f"{i['name']}: stretched to {i['tall'] / i['shown']:.2f} of its width, drawn at "
        f"{i['aspect']:.2f} (a fixed height in the <img>?)"
        for i in shown
        if abs(i["tall"] / i["shown"] / i["aspect"] - 1) > 0.02
    ]
    expect_unless_pending(docname, problems)


# --- What the landing page says -------------------------------------------------------


def test_landing_page_claims_hold_on_the_stored_results() -> None:
    """book/intro.md: on the stored `book` sweep (sliding windows), ALiBi stays flat (within
    2 %) up to 16 × L_train, and RoPE and sinusoidal rise (by more than 10 %) at 2 × L_train;
    the learned table has one point, at L_train; the runs are at the book scale, larger
    than chapter 9's ci scale.
    """
    from posenc_lib.tasks.sweep import summarize
    from posenc_book.stored import load_stored_results

    results = load_stored_results("book")
    summary = summarize(results)["sliding"]
    train_length = results[0]["run"]["train_length"]
    mean = {
        scheme: {L: v[0] for L, v in curve.items()} for scheme, curve in summary.items()
    }
    assert max(mean["alibi"]) == 16 * train_length
    assert all(
        abs(p / mean["alibi"][train_length] - 1) < 0.02 for p in mean["alibi"].values()
    )
    for scheme in ("rope", "sinusoidal"):
        assert (
            mean[scheme][2 * train_length] > 1.10 * mean[scheme][train_length]
        ), scheme
    # The caption: learned positions have one point, since the table ends at L_train; the
    # runs are at the book scale, and chapter 9's live sweep at the smaller ci scale.
    from posenc_lib.training.scales import get_scale

    assert list(mean["learned"]) == [train_length]
    assert all(
        r["train_config"]["model"]["max_positions"] == train_length
        for r in results
        if r["run"]["scheme"] == "learned"
    )
    assert {r["run"]["scale"]["name"] for r in results} == {"book"}
    ci, book = get_scale("ci"), get_scale("book")
    assert ci.d_model < book.d_model and ci.steps < book.steps
    assert ci.num_layers <= book.num_layers
    intro = " ".join((ROOT / "book" / "intro.md").read_text().split())
    assert "stays flat up to 16 times the training length" in intro
    assert "Learned positions have a single point" in intro
    assert "live at the smaller ci scale" in intro


# --- Deployment and packaging ---------------------------------------------------------


def test_pages_workflow_builds_with_the_readme_command_and_publishes_the_html() -> None:
    workflow = yaml.safe_load(
        (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    )
    triggers = workflow.get(
        "on", workflow.get(True)
    )  # PyYAML reads a bare `on:` as True
    assert "push" in triggers and "workflow_dispatch" in triggers
    assert workflow["permissions"] == {
        "contents": "read",
        "pages": "write",
        "id-token": "write",
    }
    steps = workflow["jobs"]["build"]["steps"]
    runs = [step["run"].strip() for step in steps if "run" in step]
    assert (
        readme_command("build command") in runs
    ), "the workflow must run the README's build command"
    upload = [
        s
        for s in steps
        if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")
    ]
    assert len(upload) == 1 and upload[0]["with"]["path"] == "_build/html"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert any(
        str(s.get("uses", "")).startswith("actions/deploy-pages")
        for s in deploy["steps"]
    )


def test_the_version_is_written_once_and_followed() -> None:
    import tomllib

    import posenc_lib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (
        posenc_lib.__version__ == version
    ), "pyproject.toml and posenc_lib.__version__ disagree"
    assert (
        TAG == f"v{version}"
    ), f"_config.yml repository.branch must be the tag v{version}, got {TAG}"
    readme = (ROOT / "README.md").read_text()
    owner_repo = urlparse(REPOSITORY).path.strip("/")
    assert (
        f"https://colab.research.google.com/github/{owner_repo}/blob/{TAG}/" in readme
    )
    from tools.reader_notebooks import book_extension

    assert book_extension().site_url(REPOSITORY) in readme


def test_the_release_workflow_creates_the_tag_the_links_name() -> None:
    """The links name ``v`` + the version (above); the release workflow creates exactly that
    tag (from pyproject.toml, the version's one home), after building the sdist and the wheel
    and installing the wheel into a fresh environment. The repository itself cannot be
    reached from CI, so the tag's existence there is the workflow's job, checked here by
    reading what the workflow does."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key "on" as True
    assert on["push"]["branches"] == ["main"]
    steps = workflow["jobs"]["tag"]["steps"]
    script = "\n".join(str(step.get("run", "")) for step in steps)
    assert 'tomllib.load(open("pyproject.toml", "rb"))["project"]["version"]' in script
    assert 'echo "tag=v$version"' in script
    assert "--sdist --wheel" in script and "import posenc_lib" in script
    assert 'git tag "${{ steps.version.outputs.tag }}"' in script
    assert 'git push origin "${{ steps.version.outputs.tag }}"' in script
    # the tagged commit holds the reader notebooks, written from a build of the book
    assert script.index("tools/reader_notebooks.py --out notebooks") < script.index(
        "git commit"
    ) < script.index('git tag "')
    assert readme_command("build command").split("&& ")[-1] in script
    assert TAG.startswith("v")


def test_how_to_run_commands_are_the_readmes() -> None:
    how_to = (ROOT / "book" / "how_to_run.md").read_text()
    blocks = re.findall(r"```bash\n(.+?)\n```", how_to, re.S)
    assert blocks and blocks[0].strip() == readme_command(
        "local command"
    ), "book/how_to_run.md's first command must be the README's local command"


def test_every_subpackage_is_packaged() -> None:
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
            "packages"
        ]
    )
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "posenc_lib").rglob("__init__.py")
    }
    assert (
        on_disk <= listed
    ), f"add to [tool.setuptools] packages in pyproject.toml: {sorted(on_disk - listed)}"


def test_a_wheel_carries_the_corpora_and_the_stored_results(tmp_path: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    source = tmp_path / "src"
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    # Offline with the setuptools at hand; otherwise pip fetches setuptools to build.
    isolation = ["--no-build-isolation"] if _has_setuptools() else []
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-q",
        *isolation,
        "-w",
        str(tmp_path / "dist"),
        str(source),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (tmp_path / "dist").glob("posenc_lib-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    stored = {
        n for n in names if n.startswith("posenc_book/results/") and n.endswith(".json")
    }
    expected = {  # results/NAME/*.json and results/NAME/RUN/*.json (the pretrained runs)
        f"posenc_book/results/{p.relative_to(ROOT / 'results').as_posix()}"
        for p in (ROOT / "results").rglob("*.json")
    }
    assert (
        expected and stored == expected
    ), f"missing from the wheel: {sorted(expected - stored)[:5]}"
    assert any(n.startswith("posenc_lib/corpora/austen/") for n in names)
    assert {
        "posenc_lib/encodings/__init__.py",
        "posenc_lib/symbolic/__init__.py",
    } <= names


def _has_setuptools() -> bool:
    """setuptools >= 68 (pyproject.toml's build requirement) is importable here."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("setuptools").split(".")[0]) >= 68
    except (PackageNotFoundError, ValueError):
        return False


# --- Reader notebooks (tools/reader_notebooks.py): the chapters as Colab and Jupyter show them


@pytest.fixture(scope="session")
def reader_notebooks(site: Path, tmp_path_factory) -> dict[str, Path]:
    """Every chapter's reader notebook, written from this build (here, not in the checkout)."""
    from tools.reader_notebooks import main

    out = tmp_path_factory.mktemp("reader")
    assert main(["--out", str(out)]) == 0
    return {p.stem: p for p in sorted(out.glob("*.ipynb"))}


def test_reader_notebooks_show_no_raw_myst_and_keep_the_code(reader_notebooks) -> None:
    """No role or directive is left as source in any Markdown cell; every code cell, with
    its stored outputs and tags, is the source's, in order; every figure has its caption."""
    import nbformat

    from tools.reader_notebooks import RAW_MYST

    sources = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [p.stem for p in sources] == list(reader_notebooks)
    for source_path in sources:
        source = nbformat.read(source_path, as_version=4)
        reader = nbformat.read(reader_notebooks[source_path.stem], as_version=4)
        raw = [
            m.group(0)
            for cell in reader.cells
            if cell.cell_type == "markdown"
            for m in RAW_MYST.finditer(cell.source)
        ]
        assert not raw, f"{source_path.stem}: raw MyST left: {raw[:5]}"
        code = [c for c in source.cells if c.cell_type == "code"]
        assert [c for c in reader.cells if c.cell_type == "code"] == code
        figures = [
            c["metadata"]["mystnb"]["figure"]["name"]
            for c in code
            if "figure" in c["metadata"].get("mystnb", {})
        ]
        captions = [
            c.source
            for c in reader.cells
            if c.cell_type == "markdown" and c.source.startswith("**Figure ")
        ]
        assert len(captions) == len(figures), f"{source_path.stem}: captions missing"
        chapter = int(source_path.stem[:2])
        assert all(
            c.startswith(f"**Figure {chapter}.{k}.** ") for k, c in enumerate(captions, 1)
        ), f"{source_path.stem}: captions not numbered as on the site: {captions[:2]}"


def test_reader_notebooks_link_to_pages_and_anchors_that_exist(
    site: Path, reader_notebooks
) -> None:
    """Their links into the website (citations, figures, exercises, chapters, solutions)
    point at pages and elements of this build."""
    import nbformat

    from tools.reader_notebooks import site_url

    base = site_url(CONFIG)
    link = re.compile(r"\]\((" + re.escape(base) + r"[^)\s]*)\)")
    broken, count, ids = [], 0, {}
    for stem, path in reader_notebooks.items():
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            for url in link.findall(cell.source):
                count += 1
                page, fragment = urldefrag(url[len(base) :])
                target = site / page
                if not target.exists():
                    broken.append(f"{stem}: {url} (no page)")
                    continue
                if target not in ids:
                    ids[target] = ids_and_links(target)[0]
                if fragment and fragment not in ids[target]:
                    broken.append(f"{stem}: {url} (no #{fragment})")
    assert count > 500, f"only {count} links into the site: the conversion lost some"
    assert not broken, "broken links in reader notebooks:\n" + "\n".join(broken[:20])


def test_a_reader_notebook_runs_and_matches_its_stored_outputs(reader_notebooks) -> None:
    """Chapter 1's reader notebook under nbval, strict, as a reader would check it: it runs
    top to bottom in a fresh kernel and reproduces every stored output. (The other chapters'
    code cells are the sources' own, which the suite runs under nbval.)"""
    path = reader_notebooks["01_why_position"]
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "--override-ini=addopts=", "--nbval", "--nbval-current-env", str(path),
    ]
    env = {**os.environ, "POSENC_DEVICE": "cpu"}
    done = subprocess.run(
        command, cwd=path.parent, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\b\d+ passed", done.stdout), done.stdout[-2000:]


# --- Site chrome: icon, link previews, no empty header band, a cue on wide tables -------


@pytest.mark.parametrize("docname", PAGES)
def test_page_has_an_icon_and_a_link_preview(site: Path, docname: str) -> None:
    from bs4 import BeautifulSoup

    path = site / page_path(docname)
    soup = BeautifulSoup(path.read_text(errors="replace"), "html.parser")
    icon = soup.find("link", rel="icon")
    assert icon and (path.parent / icon["href"]).exists(), f"{docname}: no favicon"
    for attrs in (
        {"property": "og:title"},
        {"property": "og:description"},
        {"property": "og:url"},
        {"name": "description"},
    ):
        meta = soup.find("meta", attrs=attrs)
        assert meta and meta.get("content", "").strip(), f"{docname}: no {attrs}"


def test_no_empty_header_band_and_wide_tables_show_a_scroll_cue(browser) -> None:
    """At 1280 px the top of the page is the article's bar, not pydata's empty header
    (64 px of nothing before the fix); at 390 px every table that scrolls sideways has the
    edge shadows of ``_static/book.css`` (backgrounds that scroll with it)."""
    chromium, base = browser
    problems: list[str] = []
    page = offline_page(chromium, problems)
    try:
        page.goto(base + page_path("notebooks/16_claims_ledger"), wait_until="load")
        band = page.evaluate(
            """() => { const h = document.querySelector('header.bd-header');
                       return h ? h.getBoundingClientRect().height : 0; }"""
        )
        assert band == 0, f"an empty header band of {band} px at 1280 px"
        page.set_viewport_size({"width": 390, "height": 800})
        scrolling = page.evaluate(
            """() => [...document.querySelectorAll('div.output.text_html')]
                 .filter(e => e.scrollWidth > e.clientWidth + 2)
                 .map(e => [getComputedStyle(e).backgroundImage,
                            getComputedStyle(e).backgroundAttachment])"""
        )
    finally:
        page.close()
    assert scrolling, "no table scrolls sideways at 390 px on the ledger: test a wider one"
    for image, attachment in scrolling:
        assert image.count("gradient") == 4 and "local" in attachment, (image, attachment)
    assert not problems, problems
