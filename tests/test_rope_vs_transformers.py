"""apply_rope / RotaryEmbedding against production implementations of both conventions.

* rotate-half: Hugging Face transformers' Llama rotary embedding (``LlamaRotaryEmbedding`` and
  ``apply_rotary_pos_emb``), transformers==5.23.0 as pinned in requirements.txt, built from a
  small ``LlamaConfig`` (no download);
* interleaved: an independent complex-number implementation written here, as in Meta's Llama
  code: pairs read as complex numbers and multiplied by ``torch.polar(1, p·θ_i)``.

Tolerance. Two float32 implementations round θ_i and the angle p·θ_i separately, so their angles
may differ by about 2·eps·p radians, and the outputs by that times the norm of each rotated
pair. The tests allow 2·eps·(p + 1)·‖pair‖ per element, eps the dtype's machine epsilon (the
largest ratio measured against transformers 5.23.0 in float32 is below 0.9 of it).
"""

from __future__ import annotations

import pytest
import torch

from posenc_lib import RotaryEmbedding, apply_rope, interleaved_to_half_permutation

transformers = pytest.importorskip(
    "transformers", reason="transformers (a test-only dependency, pinned in requirements.txt) is not installed"
)
from transformers import LlamaConfig  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb  # noqa: E402

Tensor = torch.Tensor
CASES = [  # (batch, heads, seq, head_dim, base, largest position)
    (1, 1, 7, 8, 10000.0, 64),
    (2, 4, 33, 64, 10000.0, 4096),
    (2, 2, 16, 128, 500000.0, 65536),
    (3, 2, 5, 16, 1000000.0, 65536),
]


def rounding_bound(x: Tensor, positions: Tensor, *, interleaved: bool) -> Tensor:
    """2·eps·(p + 1)·‖pair‖ for each element of x ``[batch, heads, seq, head_dim]``, eps of x's dtype."""
    pairs = x.unflatten(-1, (-1, 2)) if interleaved else x.unflatten(-1, (2, -1)).transpose(-1, -2)
    pair_norm = pairs.norm(dim=-1)  # (B, H, T, D/2)
    pair_norm = pair_norm.repeat_interleave(2, dim=-1) if interleaved else pair_norm.repeat(1, 1, 1, 2)
    p = positions[:, None, :, None] if positions.dim() == 2 else positions[:, None]
    return 2 * torch.finfo(x.dtype).eps * (p.to(x.dtype) + 1) * pair_norm


def hugging_face_llama(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """Rotate x ``[B, H, T, D]`` with transformers' Llama code; positions ``[B, T]``."""
    b, h, _, d = x.shape
    config = LlamaConfig(hidden_size=h * d, num_attention_heads=h, head_dim=d, rope_theta=base)
    rotary = LlamaRotaryEmbedding(config)
    cos, sin = rotary(x, positions)  # (B, T, D) each
    rotated, _ = apply_rotary_pos_emb(x, x, cos, sin)
    return rotated


def complex_interleaved(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """Interleaved RoPE as complex multiplication (Meta's form); float64 x -> complex128."""
    d = x.shape[-1]
    real = x.dtype
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=real) / d))
    angles = positions.to(real)[..., None] * inv_freq  # (B, T, D/2)
    rotation = torch.polar(torch.ones_like(angles), angles)[:, None]  # (B, 1, T, D/2) complex
    as_complex = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())  # (B, H, T, D/2)
    return torch.view_as_real(as_complex * rotation).flatten(-2)  # (B, H, T, D)


def random_case(b: int, h: int, t: int, d: int, largest: int, dtype: torch.dtype = torch.float32):
    x = torch.randn(b, h, t, d, dtype=dtype)
    positions = torch.randint(0, largest + 1, (b, t))
    positions[0, 0] = largest
    return x, positions


@pytest.mark.parametrize("b,h,t,d,base,largest", CASES)
def test_rotate_half_matches_hugging_face_llama(b: int, h: int, t: int, d: int, base: float, largest: int) -> None:
    x, positions = random_case(b, h, t, d, largest)
    expected = hugging_face_llama(x, positions, base)
    bound = rounding_bound(x, positions, interleaved=False)
    for ours in (apply_rope(x, positions, base=base), RotaryEmbedding(d, base)(x, positions)):
        assert ((ours - expected).abs() <= bound).all()


def test_hugging_face_llama_at_small_positions_to_float32_rounding() -> None:
    x = torch.randn(2, 4, 64, 64)
    positions = torch.arange(64).expand(2, 64)
    assert torch.allclose(apply_rope(x, positions), hugging_face_llama(x, positions, 10000.0), atol=1e-5, rtol=0)


def test_hugging_face_llama_keyed_as_interleaved_after_permutation() -> None:
    # a checkpoint converted from interleaved to rotate-half: permute the dims, rotate with HF
    x, positions = random_case(2, 2, 9, 32, 2048)
    perm = interleaved_to_half_permutation(32)
    ours = apply_rope(x, positions, interleaved=True)
    theirs = hugging_face_llama(x[..., perm], positions, 10000.0)
    assert ((ours[..., perm] - theirs).abs() <= rounding_bound(x[..., perm], positions, interleaved=False)).all()


@pytest.mark.parametrize("b,h,t,d,base,largest", CASES)
def test_interleaved_matches_complex_form_float64(b: int, h: int, t: int, d: int, base: float, largest: int) -> None:
    x, positions = random_case(b, h, t, d, largest, torch.float64)
    expected = complex_interleaved(x, positions, base)
    ours = apply_rope(x, positions, base=base, interleaved=True, angle_dtype=torch.float64)
    assert ((ours - expected).abs() <= rounding_bound(x, positions, interleaved=True)).all()


@pytest.mark.parametrize("b,h,t,d,base,largest", CASES)
def test_interleaved_matches_complex_form_float32(b: int, h: int, t: int, d: int, base: float, largest: int) -> None:
    x, positions = random_case(b, h, t, d, largest)
    expected = complex_interleaved(x, positions, base)
    bound = rounding_bound(x, positions, interleaved=True)
    module = RotaryEmbedding(d, base, interleaved=True)
    for ours in (apply_rope(x, positions, base=base, interleaved=True), module(x, positions)):
        assert ((ours - expected).abs() <= bound).all()
