"""The book's interactive figures, one function per figure (the :class:`Player`
machinery is :mod:`posenc_book.interactive`):

* :func:`rope_rotation_player`: a query and a key rotating pair by pair as the query
  position t moves with the key at s = t − r (Chapter 5);
* :func:`attention_by_length_player`: trained models' attention by distance as the
  window length L grows past L_train (Chapter 10);
* :func:`context_extension_player`: the wavelengths 2π/θ'_i of PI, NTK-aware scaling,
  YaRN and Llama 3 as the stretch factor κ moves (Chapter 11).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle
from torch import Tensor

from posenc_lib.encodings.rope import apply_rope, rope_inverse_frequencies
from posenc_lib.encodings.rope_scaling import rope_scaled_frequencies
from posenc_lib.encodings.rope_scaling import stretch_scaling
from posenc_book.interactive import Player, render_frames
from posenc_book.plotting import SCHEME_STYLE, scheme_label

def rope_rotation_player(q: Tensor, k: Tensor, *, offset: int, positions: Sequence[int],
                         base: float = 10000.0) -> Player:
    """A query and a key rotating pair by pair, the key ``offset`` positions behind.

    Frame j puts the query at t = ``positions[j]`` and the key at s = t − offset, and
    draws, for each frequency pair i (interleaved: dimensions 2i and 2i + 1, as in
    RoFormer), the rotated query pair and key pair as arrows, turned by tθ_i and sθ_i;
    a last panel plots the score q_tᵀk_s against t, beside the score of a key held at
    s = 0 for contrast.

    Args:
        q, k: float vectors ``[head_dim]`` (head_dim even, at most 8 pairs drawn).
        offset: the distance r = t − s, ≥ 0.
        positions: the query positions t of the frames, each ≥ offset.
        base: θ_i = base^(−2i/d).

    Returns:
        A :class:`Player` whose ``table`` has, per frame, t, s, the score and each
        pair's contribution (columns ``"pair 0"`` …), all in float64 (angles too).
    """
    if q.shape != k.shape or q.dim() != 1 or q.shape[0] % 2 or q.shape[0] > 16:
        raise ValueError(f"q and k must be vectors of the same even length <= 16, got "
                         f"{tuple(q.shape)} and {tuple(k.shape)}")
    if offset < 0 or min(positions) < offset:
        raise ValueError("need offset >= 0 and every position >= offset")
    d, pairs = q.shape[0], q.shape[0] // 2
    t = torch.tensor(list(positions))
    exact = {"base": base, "interleaved": True, "angle_dtype": torch.float64}
    qs = apply_rope(q.double().expand(len(t), d), t, **exact)
    ks = apply_rope(k.double().expand(len(t), d), t - offset, **exact)
    k_at_0 = apply_rope(k.double()[None], torch.zeros(1, dtype=torch.long), **exact)[0]
    by_pair = (qs * ks).view(len(t), pairs, 2).sum(-1)  # each pair's q·k
    score = by_pair.sum(-1)
    fixed_key = qs @ k_at_0
    theta = rope_inverse_frequencies(d, base).double()
    reach = max(q.view(pairs, 2).norm(dim=-1).max(), k.view(pairs, 2).norm(dim=-1).max())
    reach = 1.15 * float(reach)
    low = min(score.min().item(), fixed_key.min().item())
    high = max(score.max().item(), fixed_key.max().item())
    pad = 0.1 * (high - low or 1.0)

    def draw(fig: Figure, j: int) -> None:
        grid = fig.add_gridspec(2, pairs, height_ratios=(1.25, 1))
        for i in range(pairs):
            ax = fig.add_subplot(grid[0, i])
            ax.add_patch(Circle((0, 0), reach / 1.15, fill=False, color="#cccccc"))
            for vec, color, name in ((qs[j], "#2ca02c", "q"), (ks[j], "#9467bd", "k")):
                x, y = vec[2 * i].item(), vec[2 * i + 1].item()
                ax.annotate("", (x, y), (0, 0), arrowprops={"arrowstyle": "->",
                                                           "color": color, "lw": 2})
                ax.text(1.08 * x, 1.08 * y, name, color=color, fontsize=9,
                        ha="center", va="center")
            ax.set_xlim(-reach, reach)
            ax.set_ylim(-reach, reach)
            ax.set_aspect("equal")
            ax.set_axis_off()
            ax.set_title(f"pair {i}, $\\theta_{i}$ = {theta[i].item():.3g}\n"
                         f"q·k = {by_pair[j, i].item():.3f}", fontsize=9)
        ax = fig.add_subplot(grid[1, :])
        ax.plot(t, score, "-", color="#2ca02c", label=f"key at s = t − {offset}")
        ax.plot(t, fixed_key, "--", color="#7f7f7f", label="key held at s = 0")
        ax.plot(t[j], score[j], "o", color="#2ca02c")
        ax.plot(t[j], fixed_key[j], "o", color="#7f7f7f")
        ax.set_ylim(low - pad, high + pad)
        ax.set_xlabel("query position t")
        ax.set_ylabel("score $q^\\top k$")
        ax.legend(fontsize=8, loc="upper left", ncol=2, bbox_to_anchor=(0, 1.3))
        fig.suptitle(f"t = {t[j].item()}, s = {t[j].item() - offset}: score "
                     f"{score[j].item():.3f}", fontsize=10)
        fig.subplots_adjust(left=0.09, right=0.98, top=0.8, bottom=0.13, hspace=0.55)

    frames = render_frames(draw, len(t), figsize=(7.6, 4.0))
    table = pd.DataFrame({"t": t.tolist(), "s": (t - offset).tolist(),
                          "score": score.tolist(),
                          **{f"pair {i}": by_pair[:, i].tolist() for i in range(pairs)},
                          "score, key at s = 0": fixed_key.tolist()})
    return Player(frames, [f"t = {p}, s = {p - offset}" for p in t.tolist()],
                  "query position t (key at s = t − r)",
                  f"RoPE rotating a query and a key of head_dim {d}, pair by pair, as "
                  f"the query moves from t = {t[0].item()} to {t[-1].item()} with the "
                  f"key {offset} positions behind: each pair's arrows turn together and "
                  f"the score stays the same", table)


def attention_by_length_player(profiles: Mapping[str, Mapping[int, Tensor]],
                               shares: Mapping[str, Mapping[int, float]], *,
                               train_length: int, layer: int) -> Player:
    """Each model's attention by distance as the window length L grows.

    Args:
        profiles: ``profiles[scheme][L]``, the mean attention weight at each distance
            r = 0 … L − 1 (a 1-D tensor, e.g. from
            :func:`~posenc_lib.analysis.attention_maps.attention_by_distance` averaged over
            heads); every scheme with the same lengths L, in increasing order.
        shares: ``shares[scheme][L]``, the share of the weight on distances
            r ≥ L_train (e.g. from
            :func:`~posenc_lib.analysis.attention_maps.attention_mass_beyond`), printed in each
            panel's title to three significant digits (``#.3g``: 0.830, 0.00).
        train_length: L_train, marked on the distance axis; its profile stays on every
            frame, in grey, for comparison.
        layer: the layer the profiles come from (for the titles).

    Returns:
        A :class:`Player` with one frame per L, one panel per scheme (two columns);
        ``table`` holds ``shares``, one column per scheme, one row per L.
    """
    schemes = list(profiles)
    lengths = sorted(profiles[schemes[0]])
    if not lengths or any(sorted(profiles[s]) != lengths
                          or sorted(shares[s]) != lengths for s in schemes):
        raise ValueError("every scheme needs the same window lengths, in profiles "
                         "and in shares")
    if train_length not in lengths:
        raise ValueError(f"train_length {train_length} must be one of {lengths}")
    positive = [p[1:][p[1:] > 0] for s in schemes for p in profiles[s].values()]
    high = max(p.max().item() for p in positive)
    low = max(min(p.min().item() for p in positive), high * 1e-6)  # a readable range
    beyond = {s: {L: float(shares[s][L]) for L in lengths} for s in schemes}
    rows = math.ceil(len(schemes) / 2)

    def draw(fig: Figure, j: int) -> None:
        L = lengths[j]
        axes = fig.subplots(rows, 2, sharex=True, sharey=True, squeeze=False)
        for ax, scheme in zip(axes.flat, schemes):
            color = SCHEME_STYLE.get(scheme, {}).get("color", "black")
            trained = profiles[scheme][train_length]
            ax.plot(range(1, train_length), trained[1:], color="#bbbbbb", lw=1,
                    label=f"L = {train_length}")
            ax.plot(range(1, L), profiles[scheme][L][1:], color=color, lw=1.3,
                    label=f"L = {L}")
            ax.axvline(train_length, color="black", linestyle="--", linewidth=1)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(1, lengths[-1])
            ax.set_ylim(low / 2, high * 2)
            ax.set_title(f"{scheme_label(scheme)}: {beyond[scheme][L]:#.3g} of the "
                         f"weight past $L_\\mathrm{{train}}$", fontsize=9)
            ax.legend(fontsize=8, loc="lower left")
        for ax in axes[-1]:
            ticks = [1, 8, train_length, lengths[-1]]
            ax.set_xticks(ticks, [str(v) for v in ticks])
            # the end labels lean inwards, so one panel's last tick and the next panel's
            # first do not run together ("2048" and "1" read as "20481")
            labels = ax.get_xticklabels()
            labels[0].set_horizontalalignment("left")
            labels[-1].set_horizontalalignment("right")
            ax.set_xlabel("distance r = t − s (bytes)")
        for ax in axes[:, 0]:
            ax.set_ylabel("mean weight")
        fig.suptitle(f"window L = {L} bytes = {L // train_length} "
                     f"$L_\\mathrm{{train}}$ "
                     f"(layer {layer})", fontsize=10)
        fig.subplots_adjust(left=0.1, right=0.98, top=0.88, bottom=0.11, hspace=0.35,
                            wspace=0.08)

    frames = render_frames(draw, len(lengths), figsize=(7.6, 2.3 * rows + 0.6))
    table = pd.DataFrame(beyond).rename(columns=scheme_label).rename_axis("L (bytes)")
    return Player(frames, [f"L = {L} = {L // train_length} L_train" for L in lengths],
                  "window length L",
                  f"Mean attention weight by distance in layer {layer} of each model "
                  f"({', '.join(scheme_label(s) for s in schemes)}), on log axes, as "
                  f"the window grows from {lengths[0]} to {lengths[-1]} bytes; the "
                  f"grey line is the profile at L_train", table)


def context_extension_player(head_dim: int, base: float, train_length: int,
                             kappas: Sequence[float], methods: Mapping[str, str],
                             colors: Mapping[str, str]) -> Player:
    """Wavelengths λ'_i = 2π/θ'_i of context-extension methods as κ moves.

    The right panel plots θ'_i/θ_i with a dashed line at 1/κ: a pair at or under it
    turns, within κ·L_train positions, through no more angle than it turned within
    L_train unscaled.

    Each method is set for a window of κ·L_train by
    :func:`~posenc_lib.encodings.rope_scaling.stretch_scaling` (``dynamic`` with factor 1
    at length κ·L_train, which is NTK-aware scaling with κ).

    Args:
        head_dim, base: RoPE's d and base.
        train_length: L_train (YaRN's and Llama 3's original length L0).
        kappas: the stretch factors of the frames, each ≥ 1.
        methods: method name (``"linear"``, ``"dynamic"``, ``"yarn"``, ``"llama3"``) →
            display name.
        colors: method name → line colour.

    Returns:
        A :class:`Player`; ``table`` holds λ'_i in positions, one row per (method, κ),
        one column per pair, with the unchanged wavelengths as method ``"RoPE"``.
    """
    if min(kappas) < 1:
        raise ValueError(f"every κ must be >= 1, got {list(kappas)}")
    pairs = head_dim // 2
    theta = rope_inverse_frequencies(head_dim, base).double()
    plain = 2 * math.pi / theta
    waves: dict[tuple[str, float], Tensor] = {}
    for kappa in kappas:
        for method in methods:
            scaled, _ = rope_scaled_frequencies(
                head_dim, base, stretch_scaling(method, kappa, train_length),
                seq_len=round(kappa * train_length))
            waves[method, kappa] = 2 * math.pi / scaled.double()
    top = max(w.max().item() for w in waves.values())

    def draw(fig: Figure, j: int) -> None:
        kappa = kappas[j]
        left, right = fig.subplots(1, 2)
        left.plot(range(pairs), plain, color="#bbbbbb", lw=3, label="unchanged")
        for (method, name), marker in zip(methods.items(), "osD^v<>"):
            wave = waves[method, kappa]
            left.plot(range(pairs), wave, marker=marker, ms=4, color=colors[method],
                      label=name)
            right.plot(range(pairs), plain / wave, marker=marker, ms=4,
                       color=colors[method])
        left.axhline(train_length, color="black", linestyle=":", linewidth=1)
        left.axhline(kappa * train_length, color="black", linestyle="--", linewidth=1)
        left.text(pairs - 1, train_length / 1.25, "$L_\\mathrm{train}$", fontsize=8,
                  ha="right", va="top")
        left.text(pairs - 1, kappa * train_length * 1.15,
                  "$\\kappa\\,L_\\mathrm{train}$", fontsize=8, ha="right")
        left.set_yscale("log")
        left.set_ylim(plain.min().item() / 2, top * 2)
        left.set_ylabel("wavelength $2\\pi/\\theta'_i$ (positions)")
        right.axhline(1 / kappa, color="black", linestyle="--", linewidth=1)
        right.text(pairs - 1, 1 / kappa * 1.15, "$1/\\kappa$", fontsize=8, ha="right")
        right.set_yscale("log", base=2)
        right.set_ylim(1 / (max(kappas) * 1.3), 1.3)
        ticks = [2.0 ** -n for n in range(0, int(math.log2(max(kappas))) + 1)]
        right.set_yticks(ticks, ["1"] + [f"1/{round(1 / v)}" for v in ticks[1:]])
        right.minorticks_off()
        right.set_ylabel("$\\theta'_i\\,/\\,\\theta_i$")
        for ax in (left, right):
            ax.set_xticks(range(pairs))
            ax.set_xlabel("frequency pair i (0 = fastest)")
        left.legend(fontsize=7, loc="upper left", ncol=1)
        fig.suptitle(f"stretch factor κ = {kappa:g} (window {kappa * train_length:g} "
                     "positions)", fontsize=10)
        fig.subplots_adjust(left=0.1, right=0.98, top=0.88, bottom=0.15, wspace=0.3)

    frames = render_frames(draw, len(kappas), figsize=(7.6, 3.4))
    rows = {("RoPE", 1.0): plain}
    rows.update({(methods[m], k): w for (m, k), w in waves.items()})
    table = pd.DataFrame({key: w.tolist() for key, w in rows.items()}).T
    table.index.names = ["method", "κ"]
    table.columns = [f"pair {i}" for i in range(pairs)]
    return Player(frames, [f"κ = {k:g}" for k in kappas], "stretch factor κ",
                  "Wavelength of each RoPE frequency pair (left, log axis) and its "
                  "frequency as a share of the unchanged one (right) under PI, NTK-aware "
                  f"scaling, YaRN and Llama 3, as κ moves from {kappas[0]:g} to "
                  f"{kappas[-1]:g}", table)
