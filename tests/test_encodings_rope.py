"""apply_rope and RotaryEmbedding: the relative property, conventions, shapes and errors."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc_lib import (
    RotaryEmbedding,
    apply_rope,
    interleaved_to_half_permutation,
    positions_from_mask,
    rope_cos_sin,
    rope_inverse_frequencies,
    rotate_pairs,
)


def test_inverse_frequencies() -> None:
    inv = rope_inverse_frequencies(8, base=10000.0)
    assert inv.dtype == torch.float32 and inv.shape == (4,)
    expected = torch.tensor([10000.0 ** (-2 * i / 8) for i in range(4)], dtype=torch.float64)
    assert torch.allclose(inv.double(), expected, rtol=1e-7)


def test_rotate_half_by_hand() -> None:
    # head_dim 4, rotate-half pairs (0, 2) and (1, 3); θ = (1, base^-1/2)
    x = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 4)
    out = apply_rope(x, torch.tensor([1]), base=100.0)[0]
    t0, t1 = 1.0, 0.1
    expected = [1 * math.cos(t0) - 3 * math.sin(t0), 2 * math.cos(t1) - 4 * math.sin(t1),
                3 * math.cos(t0) + 1 * math.sin(t0), 4 * math.cos(t1) + 2 * math.sin(t1)]
    assert torch.allclose(out, torch.tensor(expected), atol=1e-6)


def test_interleaved_by_hand() -> None:
    x = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 4)
    out = apply_rope(x, torch.tensor([1]), base=100.0, interleaved=True)[0]
    t0, t1 = 1.0, 0.1
    expected = [1 * math.cos(t0) - 2 * math.sin(t0), 2 * math.cos(t0) + 1 * math.sin(t0),
                3 * math.cos(t1) - 4 * math.sin(t1), 4 * math.cos(t1) + 3 * math.sin(t1)]
    assert torch.allclose(out, torch.tensor(expected), atol=1e-6)


@pytest.mark.parametrize("interleaved", [False, True])
def test_dot_product_depends_only_on_offset(interleaved: bool) -> None:
    q, k = torch.randn(1, 16, dtype=torch.float64), torch.randn(1, 16, dtype=torch.float64)

    def score(m: int, n: int) -> float:
        qm = apply_rope(q, torch.tensor([m]), interleaved=interleaved)
        kn = apply_rope(k, torch.tensor([n]), interleaved=interleaved)
        return (qm * kn).sum().item()

    for offset in (0, 1, 5, 37):
        values = [score(m, m + offset) for m in (0, 3, 100, 2000)]
        # angles are float32 by contract: p·θ near 2000 rad carries ~1e-4 rad of rounding
        assert max(values) - min(values) < 2e-3


@pytest.mark.parametrize("interleaved", [False, True])
def test_preserves_norm(interleaved: bool) -> None:
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64)
    out = apply_rope(x, torch.arange(7) * 13, interleaved=interleaved)
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1))


def test_batched_positions_equal_per_sequence_calls() -> None:
    x = torch.randn(2, 3, 5, 8)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    out = apply_rope(x, positions)
    for b in range(2):
        assert torch.allclose(out[b], apply_rope(x[b : b + 1], positions[b])[0])


def test_dtype_preserved_and_angles_float32() -> None:
    x = torch.randn(1, 1, 4, 8)
    out = apply_rope(x.to(torch.bfloat16), torch.arange(4))
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.float(), apply_rope(x.to(torch.bfloat16).float(), torch.arange(4)), atol=1e-2)


def test_errors() -> None:
    with pytest.raises(ValueError, match="head_dim"):
        apply_rope(torch.randn(1, 3, 5), torch.arange(3))
    with pytest.raises(ValueError, match="positions"):
        apply_rope(torch.randn(1, 3, 4), torch.arange(4))
    with pytest.raises(ValueError, match="integer"):
        apply_rope(torch.randn(1, 3, 4), torch.arange(3.0))
    with pytest.raises(ValueError, match="head_dim"):
        rope_inverse_frequencies(7)


def test_module_matches_function_and_keeps_float32_cache() -> None:
    rope = RotaryEmbedding(8).to(torch.bfloat16)
    x = torch.randn(2, 2, 6, 8)
    positions = torch.arange(6)
    assert torch.allclose(rope(x, positions), apply_rope(x, positions), atol=1e-6)
    assert rope.cache[0].dtype == torch.float32


def test_module_partial_rotary() -> None:
    rope = RotaryEmbedding(8, rotary_dim=4)
    x = torch.randn(1, 1, 5, 8)
    out = rope(x, torch.arange(5))
    assert torch.equal(out[..., 4:], x[..., 4:])
    assert torch.allclose(out[..., :4], apply_rope(x[..., :4], torch.arange(5)), atol=1e-6)
    with pytest.raises(ValueError, match="rotary_dim"):
        RotaryEmbedding(8, rotary_dim=3)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(-70_000, 70_000), n=st.integers(-70_000, 70_000), shift=st.integers(-70_000, 70_000),
       interleaved=st.booleans())
def test_score_depends_only_on_offset_float64(m: int, n: int, shift: int, interleaved: bool) -> None:
    # with float64 angles the law holds to rounding, at any positions
    g = torch.Generator().manual_seed(abs(m) + abs(n))
    q, k = torch.randn(1, 16, dtype=torch.float64, generator=g), torch.randn(1, 16, dtype=torch.float64, generator=g)

    def score(a: int, b: int) -> float:
        qa = apply_rope(q, torch.tensor([a]), interleaved=interleaved, angle_dtype=torch.float64)
        kb = apply_rope(k, torch.tensor([b]), interleaved=interleaved, angle_dtype=torch.float64)
        return (qa * kb).sum().item()

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-8)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_kv_cache_decoding_equals_full_pass(interleaved: bool, rotary_dim: int | None) -> None:
    rope = RotaryEmbedding(8, interleaved=interleaved, rotary_dim=rotary_dim)
    x = torch.randn(2, 3, 9, 8)
    full = rope(x, torch.arange(9))
    for t in range(9):  # one token at a time, its position the cache length so far
        step = rope(x[..., t : t + 1, :], torch.tensor([t]))
        assert torch.equal(step, full[..., t : t + 1, :])
    if rotary_dim is None:  # a chunk at an offset (prefill after a prompt), through the function
        assert torch.equal(apply_rope(x[..., 4:, :], torch.arange(4, 9), interleaved=interleaved), full[..., 4:, :])


def test_positions_from_mask() -> None:
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    expected = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [0, 1, 2, 0, 0]])  # pads get 0
    assert torch.equal(positions_from_mask(mask), expected)
    assert torch.equal(positions_from_mask(mask.bool()), expected)
    with pytest.raises(ValueError, match="mask"):
        positions_from_mask(torch.ones(5))


@pytest.mark.parametrize("interleaved", [False, True])
def test_left_padding_matches_unpadded(interleaved: bool) -> None:
    rope = RotaryEmbedding(8, interleaved=interleaved)
    x = torch.randn(2, 3, 6, 8)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    out = rope(x, positions_from_mask(mask))
    assert torch.equal(out[0, :, 3:], rope(x[0:1, :, 3:], torch.arange(3))[0])  # as if run alone
    assert torch.equal(out[1], rope(x[1:2], torch.arange(6))[0])


def test_cache_extends_and_follows_function() -> None:
    rope = RotaryEmbedding(8)
    rope(torch.randn(1, 1, 4, 8), torch.arange(4))
    assert rope.cache[0].shape == (4, 4)
    x = torch.randn(1, 1, 10, 8)
    positions = torch.arange(100, 110)
    out = rope(x, positions)
    assert rope.cache[0].shape[0] >= 110 and rope.cache[0].dtype == torch.float32
    assert torch.equal(out, apply_rope(x, positions))
    rope(torch.randn(1, 1, 1, 8), torch.tensor([3]))  # a shorter request never shrinks it
    assert rope.cache[0].shape[0] >= 110


def test_module_negative_positions_match_function() -> None:
    rope = RotaryEmbedding(8)
    x = torch.randn(2, 5, 8)
    positions = torch.tensor([[-4, -1, 0, 2, 9], [-7, 3, 0, -2, 1]])
    assert torch.equal(rope(x, positions), apply_rope(x, positions))


@pytest.mark.parametrize("head_dim", [2, 8, 64])
def test_permutation_converts_interleaved_to_half(head_dim: int) -> None:
    perm = interleaved_to_half_permutation(head_dim)
    x, positions = torch.randn(2, 7, head_dim), torch.arange(7) * 31
    interleaved = apply_rope(x, positions, interleaved=True)
    assert torch.equal(apply_rope(x[..., perm], positions), interleaved[..., perm])
    # the conventions differ, except for head_dim 2 where both rotate the single pair (0, 1)
    assert torch.allclose(apply_rope(x, positions), interleaved) == (head_dim == 2)
    assert torch.equal(perm[perm.argsort()], torch.arange(head_dim))


def _bf16_error_ratio(out: torch.Tensor, reference: torch.Tensor) -> float:
    """Largest |out − reference| over each pair, in units of bf16's epsilon (2^-7) times the pair's norm."""
    pair_norm = reference.unflatten(-1, (2, -1)).norm(dim=-2).repeat(1, 2)  # rotate-half pairs (i, i + d/2)
    return ((out.double() - reference).abs() / (pair_norm * torch.finfo(torch.bfloat16).eps)).max().item()


def test_bf16_inputs_at_large_positions_stay_within_bf16_rounding() -> None:
    # float64 reference: the exact rotation of the same bf16 numbers. The library (float32 angles)
    # must stay within one bf16 epsilon of each pair's norm; angles in bf16 must not.
    x = torch.randn(64, 128).to(torch.bfloat16)
    positions = torch.randint(0, 65_537, (64,))
    positions[:2] = torch.tensor([65_535, 65_536])
    reference = apply_rope(x.double(), positions, angle_dtype=torch.float64)
    out = apply_rope(x, positions)
    module_out = RotaryEmbedding(128).to(torch.bfloat16)(x, positions)
    assert out.dtype == module_out.dtype == torch.bfloat16
    assert torch.equal(out, module_out)
    assert _bf16_error_ratio(out, reference) < 1.0
    assert _bf16_error_ratio(apply_rope(x, positions, angle_dtype=torch.bfloat16), reference) > 10.0


def test_angle_dtype_errors() -> None:
    with pytest.raises(ValueError, match="angle_dtype"):
        apply_rope(torch.randn(2, 4), torch.arange(2), angle_dtype=torch.int32)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotation_gradient_is_the_inverse_rotation(interleaved: bool) -> None:
    # float64 so gradcheck's finite differences are exact enough
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64, requires_grad=True)
    positions = torch.arange(5) * 7

    def rotate(t: torch.Tensor) -> torch.Tensor:
        return apply_rope(t, positions, interleaved=interleaved)

    assert torch.autograd.gradcheck(rotate, (x,))
    rope = RotaryEmbedding(8, interleaved=interleaved)
    assert torch.autograd.gradcheck(lambda t: rope(t, positions), (x,))
    # R is orthogonal: the backward of a rotation by p·θ is the rotation by −p·θ
    grad = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    (x_grad,) = torch.autograd.grad(rotate(x), x, grad)
    assert torch.allclose(x_grad, apply_rope(grad, -positions, interleaved=interleaved))


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotate_pairs_is_the_textbook_formula(interleaved: bool) -> None:
    # (x_a cos − x_b sin, x_b cos + x_a sin), in float64 by hand; learned angles get gradients
    x = torch.randn(2, 4, 33, 16, dtype=torch.float64)
    angles = torch.randn(33, 8, dtype=torch.float64, requires_grad=True)
    cos, sin = angles.cos(), angles.sin()
    x_a, x_b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :8], x[..., 8:])
    a, b = x_a * cos - x_b * sin, x_b * cos + x_a * sin
    expected = torch.stack([a, b], -1).flatten(-2) if interleaved else torch.cat([a, b], -1)
    out = rotate_pairs(x, cos, sin, interleaved=interleaved)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-14)
    out.sum().backward()
    assert angles.grad is not None and angles.grad.abs().sum() > 0


def test_bf16_rotation_is_computed_in_float32() -> None:
    x = torch.randn(1, 2, 512, 64).to(torch.bfloat16)
    positions = torch.arange(512) + 60_000
    out = apply_rope(x, positions)
    # float32 angles, float64 products and sums, one rounding to bfloat16
    reference = apply_rope(x.double(), positions).to(torch.bfloat16)
    assert out.dtype == torch.bfloat16
    # one bf16 rounding of the float32 result: equal to the reference almost everywhere
    assert (out == reference).float().mean() > 0.99


@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_default_positions_equal_arange_without_a_lookup(rotary_dim) -> None:
    from posenc_lib.measure import memory_traffic

    rope = RotaryEmbedding(8, rotary_dim=rotary_dim)
    x = torch.randn(2, 3, 9, 8)
    assert torch.equal(rope(x), rope(x, torch.arange(9)))
    if rotary_dim is None:  # the rotation kernel alone: one new tensor, no gathers
        operations = memory_traffic(lambda: rope(x)).operations
        assert set(operations) == {"empty", "mul", "addcmul_"}
    with pytest.raises(ValueError, match="head_dim"):
        rope(torch.randn(9, 6))


# --- Bad input fails in words; rope_cos_sin, the public cos/sin table


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_integer_x_is_refused_not_truncated(dtype: torch.dtype) -> None:
    x = torch.ones(1, 3, 8, dtype=dtype)
    with pytest.raises(ValueError, match="x must be a floating-point tensor.*truncated"):
        apply_rope(x, torch.arange(3))
    with pytest.raises(ValueError, match="x must be a floating-point tensor"):
        RotaryEmbedding(8)(x, torch.arange(3))


def test_positions_as_a_list_fail_in_words() -> None:
    x = torch.randn(1, 3, 8)
    with pytest.raises(TypeError, match=r"positions must be an integer torch.Tensor.*got list"):
        apply_rope(x, [0, 1, 2])
    with pytest.raises(TypeError, match=r"positions must be an integer torch.Tensor.*got list"):
        RotaryEmbedding(8)(x, [0, 1, 2])
    with pytest.raises(TypeError, match=r"positions must be an integer torch.Tensor.*got list"):
        rope_cos_sin([0, 1, 2], 8)
    with pytest.raises(TypeError, match=r"x must be a torch.Tensor"):
        apply_rope([[0.0] * 8], torch.arange(1))


def test_rope_cos_sin_rotates_as_apply_rope() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 40, 16)
    for positions in (torch.arange(40), torch.arange(40) + 1000, torch.randint(-50, 900, (2, 40))):
        cos, sin = rope_cos_sin(positions, 16, 500.0)
        assert cos.dtype == sin.dtype == torch.float32
        assert cos.shape == sin.shape == (*positions.shape, 8)
        if positions.dim() == 2:  # [batch, seq, d/2] -> [batch, 1, seq, d/2]
            cos, sin = cos[:, None], sin[:, None]
        ours = rotate_pairs(x, cos, sin, interleaved=False)
        # same float32 angles; cos/sin of a differently shaped tensor may take another
        # vectorised path, so allow float32 rounding
        torch.testing.assert_close(ours, apply_rope(x, positions, base=500.0), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "scaling",
    [
        None,
        {"rope_type": "linear", "factor": 4.0},
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
        {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 32},
    ],
)
def test_rope_cos_sin_is_rotary_embeddings_table(scaling: dict | None) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, 2, 100, 16)
    positions = torch.arange(100)
    rope = RotaryEmbedding(16, 10000.0, rope_scaling=scaling)
    cos, sin = rope_cos_sin(positions, 16, 10000.0, rope_scaling=scaling)
    expected = rope(x, positions)
    torch.testing.assert_close(rotate_pairs(x, cos, sin, interleaved=False), expected,
                               rtol=0, atol=2e-6)


def test_rope_cos_sin_yarn_carries_the_attention_factor() -> None:
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    cos, sin = rope_cos_sin(torch.arange(3), 64, rope_scaling=yarn)
    factor = 0.1 * math.log(4.0) + 1.0
    assert torch.allclose(cos[0], torch.full((32,), factor)) and torch.equal(sin[0], torch.zeros(32))


def test_rope_cos_sin_bad_input() -> None:
    with pytest.raises(ValueError, match="positions must be an integer tensor"):
        rope_cos_sin(torch.arange(3.0), 8)
    with pytest.raises(ValueError, match=r"positions must be \[seq\] or \[batch, seq\]"):
        rope_cos_sin(torch.zeros(1, 1, 3, dtype=torch.long), 8)
    with pytest.raises(ValueError, match="head_dim must be an even integer"):
        rope_cos_sin(torch.arange(3), 7)
    cos, sin = rope_cos_sin(torch.arange(0), 8)
    assert cos.shape == sin.shape == (0, 4)


def test_positions_from_mask_refuses_a_list() -> None:
    with pytest.raises(TypeError, match=r"attention_mask must be a torch.Tensor .*got list"):
        positions_from_mask([[0, 1, 1]])


def test_rotate_pairs_refuses_hugging_faces_full_width_tables_and_says_how_to_convert() -> None:
    """Hugging Face's cos/sin are [seq, head_dim], each angle twice (cat(freqs, freqs)):
    refused with the expected shape, the given one and the conversion, which then
    gives apply_rope's rotation."""
    x, positions = torch.randn(2, 3, 5, 8), torch.arange(5)
    angles = positions.float()[:, None] * rope_inverse_frequencies(8)  # (5, 4)
    emb = torch.cat([angles, angles], dim=-1)  # Hugging Face's layout (5, 8)
    cos_hf, sin_hf = emb.cos(), emb.sin()
    with pytest.raises(ValueError) as error:
        rotate_pairs(x, cos_hf, sin_hf, interleaved=False)
    message = str(error.value)
    for part in ("[..., 5, 4]", "(5, 8)", "Hugging Face", "cos[..., :4]"):
        assert part in message, (part, message)
    converted = rotate_pairs(x, cos_hf[..., :4], sin_hf[..., :4], interleaved=False)
    assert torch.equal(converted, apply_rope(x, positions))


def test_rotate_pairs_table_shape_errors() -> None:
    x = torch.randn(1, 2, 5, 8)
    cos, sin = rope_cos_sin(torch.arange(5), 8)
    with pytest.raises(ValueError, match="same shape"):
        rotate_pairs(x, cos, sin[:4], interleaved=False)
    with pytest.raises(ValueError, match="3 rows .* seq=5"):  # a table for another length
        rotate_pairs(x, cos[:3], sin[:3], interleaved=False)
    with pytest.raises(ValueError, match="do not broadcast"):  # batch 3 against batch 1
        rotate_pairs(x, cos.expand(3, 2, 5, 4), sin.expand(3, 2, 5, 4), interleaved=False)
    with pytest.raises(ValueError, match=r"head_dim/2\] = \[\.\.\., 5, 4\]"):
        rotate_pairs(x, cos[..., :2], sin[..., :2], interleaved=False)
    with pytest.raises(TypeError, match="torch.Tensor"):
        rotate_pairs(x, cos.tolist(), sin, interleaved=False)
    # one row broadcasts over the sequence, as before
    one = rotate_pairs(x, cos[3:4], sin[3:4], interleaved=False)
    assert torch.equal(one, apply_rope(x, torch.full((5,), 3)))


@pytest.mark.parametrize("interleaved", [False, True])
def test_seq_dim_rotates_batch_seq_heads_layout_along_the_sequence(interleaved: bool) -> None:
    """x [batch, seq, heads, head_dim] with seq == heads: the default (seq_dim=-2) reads
    the heads as the sequence, which no check can see; seq_dim=1 rotates along the
    sequence, exactly as the [batch, heads, seq, head_dim] layout does."""
    x = torch.randn(2, 4, 4, 8)  # [batch, seq=4, heads=4, head_dim]
    positions = torch.arange(10, 14)
    by_heads = x.transpose(1, 2)  # [batch, heads, seq, head_dim]
    expected = apply_rope(by_heads, positions, interleaved=interleaved).transpose(1, 2)
    assert torch.equal(apply_rope(x, positions, interleaved=interleaved, seq_dim=1),
                       expected)
    assert torch.equal(apply_rope(x, positions, interleaved=interleaved, seq_dim=-3),
                       expected)
    assert not torch.allclose(apply_rope(x, positions, interleaved=interleaved), expected)
    rope = RotaryEmbedding(8, interleaved=interleaved)
    assert torch.equal(rope(x, positions, seq_dim=1), expected)
    assert torch.equal(rope(x, seq_dim=1),
                       rope(by_heads, torch.arange(4)).transpose(1, 2))
    batched = torch.stack([positions, positions + 7])  # [batch, seq]
    assert torch.equal(rope(x, batched, seq_dim=1),
                       apply_rope(by_heads, batched, interleaved=interleaved).transpose(1, 2))
    assert torch.equal(apply_rope(x, batched, interleaved=interleaved, seq_dim=1),
                       rope(x, batched, seq_dim=1))


def test_a_layout_mismatch_with_distinct_lengths_names_seq_dim() -> None:
    x = torch.randn(2, 6, 4, 8)  # [batch, seq=6, heads=4, head_dim]
    for call in (lambda: apply_rope(x, torch.arange(6)),
                 lambda: RotaryEmbedding(8)(x, torch.arange(6))):
        with pytest.raises(ValueError, match=r"seq=4.*got shape \(6,\).*seq_dim=-2.*seq_dim=1"):
            call()
    with pytest.raises(ValueError, match=r"seq=6.*got shape \(4,\).*seq_dim=1"):
        apply_rope(x, torch.arange(4), seq_dim=1)
    for bad in (-1, 3, 4, -5):
        with pytest.raises(ValueError, match=f"seq_dim={bad}"):
            apply_rope(x, torch.arange(4), seq_dim=bad)
        with pytest.raises(ValueError, match=f"seq_dim={bad}"):
            RotaryEmbedding(8)(x, torch.arange(4), seq_dim=bad)
    with pytest.raises(TypeError, match="seq_dim must be an int"):
        apply_rope(x, torch.arange(6), seq_dim=True)
    with pytest.raises(ValueError, match="cannot be 0"):  # batch must stay in front
        apply_rope(x, torch.arange(2).expand(2, 2), seq_dim=0)
    # without batched positions the sequence may lead
    seq_first = x[0]  # [seq=6, heads=4, head_dim]
    assert torch.equal(apply_rope(seq_first, torch.arange(6), seq_dim=0),
                       apply_rope(seq_first.transpose(0, 1), torch.arange(6)).transpose(0, 1))


def test_float16_angles_refuse_positions_float16_cannot_hold() -> None:
    """float16's largest finite number is 65 504: positions past it would give NaN
    angles, so angle_dtype=float16 refuses them, naming both; 65 504 itself is finite."""
    x = torch.randn(1, 2, 2, 8)
    at_limit = apply_rope(x, torch.tensor([0, 65504]), angle_dtype=torch.float16)
    assert torch.isfinite(at_limit).all()
    for too_far in (65505, 70000, -65505):
        with pytest.raises(ValueError, match=r"angle_dtype=torch.float16.*65504.*"
                                             f"{abs(too_far)}"):
            apply_rope(x, torch.tensor([0, too_far]), angle_dtype=torch.float16)
    # the other dtypes are unaffected at the same position
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        far = apply_rope(x, torch.tensor([0, 70000]), angle_dtype=dtype)
        assert torch.isfinite(far).all()


def test_partial_rotary_factor_rotates_the_first_int_head_dim_times_f_dims() -> None:
    """rope_scaling with partial_rotary_factor f: the first r = int(head_dim·f)
    dimensions rotate with a width-r RoPE, bitwise as rotary_dim=r; the rest pass."""
    x = torch.randn(2, 3, 7, 16)
    positions = torch.arange(7) * 5
    for scaling in ({"partial_rotary_factor": 0.25},
                    {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}):
        rope = RotaryEmbedding(16, rope_scaling=scaling)
        width = int(16 * scaling["partial_rotary_factor"])
        assert rope.rotary_dim == width and rope.inv_freq.shape == (width // 2,)
        plain = {k: v for k, v in scaling.items() if k != "partial_rotary_factor"}
        same = RotaryEmbedding(16, rotary_dim=width, rope_scaling=plain)
        out = rope(x, positions)
        assert torch.equal(out, same(x, positions))
        assert torch.equal(out[..., width:], x[..., width:])
        assert torch.equal(RotaryEmbedding(16, rotary_dim=width, rope_scaling=scaling)(
            x, positions), out)  # a rotary_dim that agrees is accepted
    with pytest.raises(ValueError, match="rotary_dim=8 disagrees.*partial_rotary_factor=0.25"):
        RotaryEmbedding(16, rotary_dim=8, rope_scaling={"partial_rotary_factor": 0.25})
    assert RotaryEmbedding(8, rope_scaling={"partial_rotary_factor": 0.25}).rotary_dim == 2
    with pytest.raises(ValueError, match="rotary_dim=3"):  # int(12 · 0.25) is odd
        RotaryEmbedding(12, rope_scaling={"partial_rotary_factor": 0.25})


def test_partial_rotary_factor_with_dynamic_ntk_past_l0() -> None:
    """dynamic NTK recomputes θ′_i per length over the rotated width, as rotary_dim=r."""
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}
    x = torch.randn(1, 2, 20, 32)
    partial = RotaryEmbedding(32, rope_scaling={**scaling, "partial_rotary_factor": 0.5})
    explicit = RotaryEmbedding(32, rotary_dim=16, rope_scaling=scaling)
    for length in (6, 20, 6):
        assert torch.equal(partial(x[..., :length, :]), explicit(x[..., :length, :]))
