"""apply_rope and RotaryEmbedding: the relative property, conventions, shapes and errors."""

import math

import pytest
import torch

from posenc_lib import RotaryEmbedding, apply_rope, rope_inverse_frequencies


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
    assert rope._cos.dtype == torch.float32


def test_module_partial_rotary() -> None:
    rope = RotaryEmbedding(8, rotary_dim=4)
    x = torch.randn(1, 1, 5, 8)
    out = rope(x, torch.arange(5))
    assert torch.equal(out[..., 4:], x[..., 4:])
    assert torch.allclose(out[..., :4], apply_rope(x[..., :4], torch.arange(5)), atol=1e-6)
    with pytest.raises(ValueError, match="rotary_dim"):
        RotaryEmbedding(8, rotary_dim=3)
