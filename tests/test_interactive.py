"""posenc_lib.players: players that work offline and show what their tables hold."""

from __future__ import annotations

import html
import json
import math
import re

import pytest
import torch

from posenc_lib.players import (
    Player,
    attention_by_length_player,
    context_extension_player,
    render_frames,
    rope_rotation_player,
)

METHODS = {"linear": "PI", "dynamic": "NTK", "yarn": "YaRN", "llama3": "Llama 3"}
COLORS = {"linear": "C0", "dynamic": "C1", "yarn": "C2", "llama3": "C3"}


def _frames(count: int) -> list[bytes]:
    return render_frames(lambda fig, i: fig.text(0.5, 0.5, str(i)), count,
                         figsize=(1.0, 0.5), dpi=40)


def test_player_html_is_self_contained_and_described() -> None:
    player = Player(_frames(3), ["a = 1", "a = 2", "a = 3"], "a", "a number & a <b>")
    page = player.to_html()
    _assert_offline(page)
    assert page.count("data:image/png;base64,") == 3 + 1  # each frame, and the first shown
    assert 'alt="a number &amp; a &lt;b&gt;"' in page
    assert 'type="range"' in page and 'max="2"' in page and 'aria-label="a"' in page
    # the group's label is short, not the alt text again
    assert 'role="group" aria-label="figure with a slider: a"' in page
    assert 'width="40" height="20"' in page  # the PNG's own size: shown unscaled
    assert player._repr_html_() == page and player.size_bytes == len(page.encode())
    ids = set(re.findall(r'id="(posenc-player-[0-9a-f]+)"', page))
    other = Player(_frames(2), ["x", "y"], "b", "another figure").to_html()
    assert len(ids) == 1 and ids.isdisjoint(re.findall(r'id="([^"]+)"', other))


def _assert_offline(page: str) -> None:
    """No address in the page outside its data: URIs, and every src is a data: URI."""
    stripped = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]*", "data:", page)
    assert not re.search(r"https?:|//|\bhref=|url\(", stripped)
    sources = re.findall(r'\bsrc="([^"]*)"', page)
    assert sources and all(src.startswith("data:") for src in sources)


def test_offline_check_sees_addresses_and_not_base64() -> None:
    player = Player(_frames(2), ["x", "y"], "a", "text")
    page = player.to_html()
    _assert_offline(page)
    for leak in ('<a href="x">', 'src="//cdn.example/x.png"', "url(x)", "https://x"):
        with pytest.raises(AssertionError):
            _assert_offline(page.replace("</div>", leak + "</div>", 1))
    # base64 may spell "http" (the stored chapter 5 player does): not an address
    _assert_offline(page + '<img src="data:image/png;base64,iVBORhttp//AA==">')


def test_values_and_frames_are_put_in_once() -> None:
    """Text that spells a placeholder or ends a script is inserted as it is, once."""
    values = ["$values VALUES FRAMES UID", "</script><b>"]
    page = Player(_frames(2), values, "a", "text").to_html()
    script = page.split("<script>", 1)[1].rsplit("</script>", 1)[0]
    assert "</script" not in script and script.count("var frames = [") == 1
    listed = json.loads(re.search(r"values = (\[.*?\]);", script).group(1))
    assert listed == values


def test_player_needs_one_value_per_frame() -> None:
    with pytest.raises(ValueError, match="one value per frame"):
        Player(_frames(2), ["only one"], "a", "text")
    with pytest.raises(ValueError, match="at least one frame"):
        Player([], [], "a", "text")


def test_frames_have_one_size_and_differ() -> None:
    frames = _frames(2)
    assert frames[0] != frames[1]
    assert frames[0][16:24] == frames[1][16:24]  # the same width and height


def test_rope_rotation_score_is_the_same_in_every_frame() -> None:
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 6, dtype=torch.float64, generator=gen)
    player = rope_rotation_player(q, k, offset=2, positions=[2, 5, 9], base=100.0)
    table = player.table
    assert len(player.frames) == 3 and table["t"].tolist() == [2, 5, 9]
    assert (table["t"] - table["s"]).eq(2).all()
    assert (table["score"] - table["score"][0]).abs().max() < 1e-12
    pairs = table[["pair 0", "pair 1", "pair 2"]]
    assert torch.allclose(torch.tensor(pairs.sum(axis=1).to_numpy()),
                          torch.tensor(table["score"].to_numpy()), atol=1e-12)
    assert (pairs - pairs.iloc[0]).abs().max().max() < 1e-12
    assert table["score, key at s = 0"].nunique() == 3  # that key's distance changes
    # the first frame has s = 0: both keys are the same there
    assert table["score, key at s = 0"][0] == pytest.approx(table["score"][0], abs=1e-12)
    assert len(set(player.frames)) == 3


def test_rope_rotation_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="same even length"):
        rope_rotation_player(torch.zeros(5), torch.zeros(5), offset=0, positions=[0])
    with pytest.raises(ValueError, match="offset"):
        rope_rotation_player(torch.ones(4), torch.ones(4), offset=3, positions=[1, 4])


def test_attention_by_length_player_shows_the_given_shares() -> None:
    profiles = {s: {L: torch.linspace(1, 0.1, L) / L for L in (4, 8)}
                for s in ("rope", "alibi")}
    shares = {"rope": {4: 0.0, 8: 0.5}, "alibi": {4: 0.0, 8: 0.2}}
    player = attention_by_length_player(profiles, shares, train_length=4, layer=1)
    assert len(player.frames) == 2 and player.frames[0] != player.frames[1]
    assert player.values == ["L = 4 = 1 L_train", "L = 8 = 2 L_train"]
    assert player.table.loc[8, "RoPE"] == 0.5 and player.table.loc[8, "ALiBi"] == 0.2
    with pytest.raises(ValueError, match="same window lengths"):
        attention_by_length_player(profiles, {"rope": {4: 0.0}, "alibi": {4: 0.0}},
                                   train_length=4, layer=1)
    with pytest.raises(ValueError, match="train_length"):
        attention_by_length_player(profiles, shares, train_length=5, layer=1)


def test_context_extension_wavelengths() -> None:
    player = context_extension_player(16, 10000.0, 128, [1, 4], METHODS, COLORS)
    waves = player.table
    plain = torch.tensor(waves.loc[("RoPE", 1.0)].to_numpy())
    theta = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    assert torch.allclose(plain, 2 * math.pi / theta, rtol=1e-6)
    pi_4 = torch.tensor(waves.loc[("PI", 4.0)].to_numpy())
    assert torch.allclose(pi_4, 4 * plain, rtol=1e-6)
    for name in ("NTK", "YaRN", "Llama 3"):  # pair 0 kept, the slowest pair κ λ
        row = torch.tensor(waves.loc[(name, 4.0)].to_numpy())
        assert row[0] == pytest.approx(plain[0].item(), rel=1e-6)
        assert row[-1] == pytest.approx(4 * plain[-1].item(), rel=1e-6)
    for name in METHODS.values():  # κ = 1 changes nothing
        assert torch.allclose(torch.tensor(waves.loc[(name, 1.0)].to_numpy()), plain,
                              rtol=1e-6)
    assert player.values == ["κ = 1", "κ = 4"] and player.frames[0] != player.frames[1]
    with pytest.raises(ValueError, match="κ"):
        context_extension_player(16, 10000.0, 128, [0.5], METHODS, COLORS)


def test_the_player_has_a_play_button_and_says_when_its_script_cannot_run() -> None:
    """Jupyter drops the scripts of an untrusted notebook: the hint, in the HTML, says what
    to do, and the script (where it runs) removes it; a play button steps on its own."""
    from posenc_book.interactive import UNTRUSTED_HINT

    page = Player(_frames(3), ["a = 1", "a = 2", "a = 3"], "a", "a number").to_html()
    assert 'class="posenc-player-play"' in page
    assert html.escape(UNTRUSTED_HINT) in page and "Trust Notebook" in UNTRUSTED_HINT
    script = page.split("<script>", 1)[1].rsplit("</script>", 1)[0]
    assert 'querySelector(".posenc-player-hint")' in script and "hint.remove()" in script
    assert "setInterval" in script
