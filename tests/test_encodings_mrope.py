"""Multi-axis RoPE (posenc_lib.encodings.mrope) against transformers 5.23's Qwen2-VL
(chunked sections) and Qwen3-VL (interleaved sections), and the property that makes
it a relative encoding per axis."""

from __future__ import annotations

import math

import pytest
import torch

from posenc_lib.encodings.mrope import (
    MROPE_LAYOUTS,
    apply_mrope,
    mrope_angles,
    mrope_pair_axes,
    mrope_scores,
)
from posenc_lib.encodings.rope import apply_rope, rotate_pairs

EPS = torch.finfo(torch.float32).eps


def test_which_frequencies_each_axis_receives() -> None:
    """Qwen2-VL's chunks give t the fastest pairs, w the slowest; Qwen3-VL's stride-3
    interleave spreads every axis over the spectrum."""
    chunked = mrope_pair_axes([16, 24, 24])
    assert torch.equal(chunked[:16], torch.zeros(16, dtype=torch.long))
    assert torch.equal(chunked[16:40], torch.ones(24, dtype=torch.long))
    assert torch.equal(chunked[40:], torch.full((24,), 2))
    interleaved = mrope_pair_axes([24, 20, 20], "interleaved")
    assert torch.equal(torch.bincount(interleaved), torch.tensor([24, 20, 20]))
    assert interleaved[:6].tolist() == [0, 1, 2, 0, 1, 2]
    assert interleaved[60:].tolist() == [0, 0, 0, 0]  # past 3·20 all pairs are t's
    # the fastest and slowest pair of each axis (pair index: smaller = faster)
    spans = {layout: [(int((axes == a).nonzero().min()), int((axes == a).nonzero().max()))
                      for a in range(3)]
             for layout, axes in (("chunked", chunked), ("interleaved", interleaved))}
    assert spans["chunked"] == [(0, 15), (16, 39), (40, 63)]
    assert spans["interleaved"] == [(0, 63), (1, 58), (2, 59)]


@pytest.mark.parametrize(("call", "message"), [
    (lambda: mrope_pair_axes([2, 2], "zigzag"), "layout must be one of"),
    (lambda: mrope_pair_axes([2, 0, 2]), "section must be a non-empty list"),
    (lambda: mrope_pair_axes([]), "section must be a non-empty list"),
    (lambda: mrope_pair_axes([2, 2], "interleaved"), "has 3 axes"),
    (lambda: mrope_pair_axes([1, 3, 1], "interleaved"), "beyond the 5 pairs"),
    (lambda: mrope_angles(torch.zeros(3, 4, dtype=torch.long), 10, section=[2, 2, 2]),
     "sum\\(section\\)=6 must equal head_dim/2 = 5"),
    (lambda: mrope_angles(torch.zeros(2, 4, dtype=torch.long), 12, section=[2, 2, 2]),
     "positions must be \\[axes=3, seq\\]"),
    (lambda: mrope_angles(torch.zeros(3, 4), 12, section=[2, 2, 2]),
     "positions must be an integer tensor"),
    (lambda: apply_mrope(torch.zeros(2, 5, 12), torch.zeros(3, 5, dtype=torch.long),
                         section=[2, 2, 2]), "x must be \\[batch, heads, seq, head_dim\\]"),
])
def test_errors_name_the_argument(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_text_positions_reduce_to_rope() -> None:
    """Equal positions on every axis: plain RoPE, bit for bit, in both layouts."""
    torch.manual_seed(0)
    x = torch.randn(2, 2, 9, 16)
    p = torch.arange(9)
    for layout in MROPE_LAYOUTS:
        got = apply_mrope(x, p.expand(3, 9), section=[4, 2, 2], layout=layout)
        assert torch.equal(got, apply_rope(x, p))


@pytest.mark.parametrize("layout", MROPE_LAYOUTS)
def test_score_depends_only_on_the_offset_per_axis(layout: str) -> None:
    """⟨M(q, p_t), M(k, p_s)⟩ is unchanged when every axis of both positions moves by
    its own shift, and changes when one axis of one position moves. float64 angles
    (the identity is exact in exact arithmetic); largest difference measured over
    the shifts below: 2.7e-15 (chunked) and 1.8e-15 (interleaved), on scores of
    size ~10."""
    torch.manual_seed(0)
    d, section = 24, [4, 4, 4]
    q, k = torch.randn(1, 1, 1, d, dtype=torch.float64), torch.randn(1, 1, 1, d,
                                                                       dtype=torch.float64)

    def score(pq: list[int], pk: list[int]) -> float:
        aq = mrope_angles(torch.tensor(pq)[:, None], d, 1e4, section, layout,
                          dtype=torch.float64)
        ak = mrope_angles(torch.tensor(pk)[:, None], d, 1e4, section, layout,
                          dtype=torch.float64)
        rq = rotate_pairs(q, aq.cos(), aq.sin(), interleaved=False)
        rk = rotate_pairs(k, ak.cos(), ak.sin(), interleaved=False)
        return float((rq * rk).sum())

    base = score([5, 2, 7], [1, 0, 3])
    worst = 0.0
    for shift in ([3, 0, 0], [0, 11, 0], [0, 0, 40], [100, 7, 2]):
        moved = score([5 + shift[0], 2 + shift[1], 7 + shift[2]],
                      [1 + shift[0], 0 + shift[1], 3 + shift[2]])
        worst = max(worst, abs(moved - base))
    assert worst < 1e-12
    for axis in range(3):  # one axis of the query alone: the offset changes
        pq = [5, 2, 7]
        pq[axis] += 1
        assert abs(score(pq, [1, 0, 3]) - base) > 1e-6


def _hugging_face(layout: str, q: torch.Tensor, position_ids: torch.Tensor,
                  base: float, section: list[int]) -> torch.Tensor:
    if layout == "chunked":
        from transformers import Qwen2VLTextConfig
        from transformers.models.qwen2_vl.modeling_qwen2_vl import (
            Qwen2VLRotaryEmbedding as Rotary,
        )
        from transformers.models.qwen2_vl.modeling_qwen2_vl import apply_rotary_pos_emb
        config = Qwen2VLTextConfig(
            hidden_size=q.shape[-1] * 2, num_attention_heads=2,
            rope_parameters={"rope_type": "default", "rope_theta": base,
                             "mrope_section": section})
    else:
        from transformers import Qwen3VLTextConfig
        from transformers.models.qwen3_vl.modeling_qwen3_vl import (
            Qwen3VLTextRotaryEmbedding as Rotary,
        )
        from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb
        config = Qwen3VLTextConfig(
            hidden_size=q.shape[-1] * 2, num_attention_heads=2, head_dim=q.shape[-1],
            rope_parameters={"rope_type": "default", "rope_theta": base,
                             "mrope_section": section, "mrope_interleaved": True})
    cos, sin = Rotary(config)(q, position_ids)
    return apply_rotary_pos_emb(q, q, cos, sin)[0]


@pytest.mark.parametrize(("layout", "section", "base"), [
    ("chunked", [16, 24, 24], 1e6),  # Qwen2-VL-7B: head_dim 128, base 1e6
    ("interleaved", [24, 20, 20], 5e6),  # Qwen3-VL: head_dim 128, base 5e6
])
def test_matches_transformers(layout: str, section: list[int], base: float) -> None:
    """Video-like positions (t, h, w on a 4×6×5 grid, then text) through transformers'
    Qwen2-VL / Qwen3-VL rotary module and apply_rotary_pos_emb, positions up to 545.
    Largest difference measured: 1.0e-04 (chunked) and 9.4e-05 (interleaved), under
    the bound (ln(base)/2 + 6)·eps·p_max·max|q| (3.8e-03, 4.1e-03) that covers
    transformers' float32 θ_i (see test_rope_scaling_vs_transformers.py)."""
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    t, h, w = torch.meshgrid(torch.arange(4), torch.arange(6), torch.arange(5),
                             indexing="ij")
    grid = torch.stack([t.flatten(), h.flatten(), w.flatten()])  # (3, 120)
    text = torch.arange(6, 46).expand(3, 40)  # then 40 text tokens
    positions = torch.cat([grid, text], dim=1)[:, None]  # (3, B=1, 160)
    positions = torch.cat([positions, positions + 500], dim=1)  # B = 2
    q = torch.randn(2, 2, positions.shape[-1], 128)
    expected = _hugging_face(layout, q, positions, base, section)
    got = apply_mrope(q, positions, base=base, section=section, layout=layout)
    error = (got - expected).abs().max().item()
    bound = (math.log(base) / 2 + 6) * EPS * int(positions.max()) * q.abs().max().item()
    assert error < bound


def test_section_layout_and_base_from_the_dictionary() -> None:
    """A Qwen3-VL-style dictionary alone gives section, layout and base; arguments that
    agree with it change nothing, ones that disagree are refused."""
    from posenc_lib.encodings.rope_scaling import rope_scaled_frequencies

    params = {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [2, 1, 1],
              "mrope_interleaved": True}
    positions = torch.randint(0, 50, (3, 7))
    from_dict = mrope_angles(positions, 8, rope_scaling=params, dtype=torch.float64)
    explicit = mrope_angles(positions, 8, 5e6, [2, 1, 1], "interleaved",
                            dtype=torch.float64)
    assert torch.equal(from_dict, explicit)
    theta = rope_scaled_frequencies(8, 5e6, dtype=torch.float64)[0]
    axes = mrope_pair_axes([2, 1, 1], "interleaved")
    assert torch.equal(from_dict, positions.double()[axes].T * theta)
    with pytest.raises(ValueError, match="section=.*disagrees"):
        mrope_angles(positions, 8, section=[1, 2, 1], rope_scaling=params)
    with pytest.raises(ValueError, match="layout=.*disagrees"):
        mrope_angles(positions, 8, layout="chunked", rope_scaling=params)
    with pytest.raises(ValueError, match="rope_theta"):
        mrope_angles(positions, 8, 1e4, rope_scaling=params)


def test_scaling_scales_the_frequencies_then_sections_them() -> None:
    """YaRN with M-RoPE: pair i turns by p_{a(i)}·θ′_i with YaRN's θ′_i, and cos and sin
    carry its attention factor (so a rotated vector's norm grows by it)."""
    from posenc_lib.encodings.rope_scaling import rope_scaled_frequencies

    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
            "mrope_section": [4, 2, 2]}
    positions = torch.randint(0, 300, (3, 1, 9))
    theta, factor = rope_scaled_frequencies(16, None, yarn)
    assert factor > 1
    angles = mrope_angles(positions, 16, rope_scaling=yarn)
    axes = mrope_pair_axes([4, 2, 2])
    assert torch.equal(angles, positions.float()[axes].movedim(0, -1) * theta)
    x = torch.randn(1, 2, 9, 16)
    expected = rotate_pairs(x, angles[:, None].cos() * factor,
                            angles[:, None].sin() * factor, interleaved=False)
    assert torch.equal(apply_mrope(x, positions, rope_scaling=yarn), expected)
    pair_norms = x.unflatten(-1, (2, 8)).norm(dim=-2)
    rotated = apply_mrope(x, positions, rope_scaling=yarn).unflatten(-1, (2, 8))
    assert torch.allclose(rotated.norm(dim=-2), factor * pair_norms, rtol=1e-5)
    with pytest.raises(ValueError, match="frequencies \\(partial rotary\\?\\)"):
        apply_mrope(x, positions, rope_scaling={**yarn, "partial_rotary_factor": 0.5})


def test_mrope_scores_are_the_rotated_dot_products() -> None:
    """q′ · k′ as written out, invariant (to float32 rounding) under a shift per axis,
    and RoPE's scores for text positions."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 2, 3, 5, 8).unbind(0)
    p = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 1, 1, 2], [0, 1, 0, 1, 0]])
    got = mrope_scores(q, k, p, section=[2, 1, 1])
    want = apply_mrope(q, p, section=[2, 1, 1]) @ apply_mrope(k, p, section=[2, 1, 1]).mT
    assert got.shape == (2, 3, 5, 5) and torch.equal(got, want)
    shifted = mrope_scores(q, k, p + torch.tensor([[4], [9], [2]]), section=[2, 1, 1])
    assert (shifted - got).abs().max() < 1e-5
    text = torch.arange(5).expand(3, 5)
    rope = apply_rope(q, torch.arange(5)) @ apply_rope(k, torch.arange(5)).mT
    assert torch.equal(mrope_scores(q, k, text, section=[2, 1, 1]), rope)
    with pytest.raises(ValueError, match="seq"):
        mrope_scores(q, k, p[:, :4], section=[2, 1, 1])
