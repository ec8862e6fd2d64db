"""rope_kernel: the cache-blocked kernel against the textbook form, blocks, out= and the
model's path (RotaryEmbedding), whose numbers every cached model depends on."""

import pytest
import torch

from posenc_lib import RotaryEmbedding, apply_rope, apply_rope_blocked, rotate_pairs, rotate_pairs_blocked
from posenc_lib.encodings import rope_kernel

# the book model's queries in training and at 4 × L_train, and a 7B-class layer's
TRAINING_SHAPES = [(32, 4, 128, 24), (8, 4, 512, 24)]


def _inputs(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    grad_out = torch.randn(shape, generator=g).to(dtype)
    angles = torch.arange(shape[-2], dtype=torch.float32)[:, None] * torch.rand(shape[-1] // 2, generator=g)
    return x, grad_out, angles.cos(), angles.sin()


@pytest.mark.parametrize("shape", [*TRAINING_SHAPES, (1, 8, 1024, 128)])  # the last one blocked
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("interleaved", [False, True])
def test_textbook_forward_is_bitwise_the_kernel(shape, dtype, interleaved) -> None:
    x, _, cos, sin = _inputs(shape, dtype)
    textbook = rotate_pairs(x, cos, sin, interleaved=interleaved)
    kernel = rotate_pairs_blocked(x, cos, sin, interleaved=interleaved)
    assert textbook.dtype == kernel.dtype == dtype and torch.equal(textbook, kernel)


@pytest.mark.parametrize("shape", TRAINING_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_model_path_keeps_the_kernel_forward_and_backward(shape, dtype) -> None:
    """RotaryEmbedding (the model's path) gives bitwise the kernel's output and gradient.

    The gradient of the textbook form is autograd's sum of two products (g_a cos + g_b sin),
    the kernel's a fused multiply-add: on a CPU with FMA they can differ in the last bit,
    so the module stays on the kernel and trained models keep their numbers."""
    x, grad_out, _, _ = _inputs(shape, dtype)
    rope = RotaryEmbedding(shape[-1])
    rope(x)  # fill the cache for seq positions
    cos, sin = rope.cache[0][: shape[-2]], rope.cache[1][: shape[-2]]
    grads = []
    for rotate in (rope, lambda t: rotate_pairs_blocked(t, cos, sin, interleaved=False)):
        leaf = x.clone().requires_grad_()
        out = rotate(leaf)
        out.backward(grad_out)
        grads.append((out.detach(), leaf.grad))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
    assert torch.equal(grads[0][0], rotate_pairs(x, cos, sin, interleaved=False))


@pytest.mark.parametrize("interleaved", [False, True])
def test_kernel_gradient_is_the_inverse_rotation(interleaved) -> None:
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64, requires_grad=True)
    positions = torch.arange(5) * 7
    assert torch.autograd.gradcheck(lambda t: apply_rope_blocked(t, positions, interleaved=interleaved), (x,))
    grad = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    (x_grad,) = torch.autograd.grad(apply_rope_blocked(x, positions, interleaved=interleaved), x, grad)
    torch.testing.assert_close(x_grad, apply_rope(grad, -positions, interleaved=interleaved))


def test_learned_angles_take_the_textbook_form() -> None:
    x, _, cos, sin = _inputs((2, 4, 33, 16), torch.float32)
    out = rotate_pairs_blocked(x, cos.requires_grad_(), sin, interleaved=False)
    assert out.requires_grad and torch.equal(out.detach(), rotate_pairs(x, cos, sin, interleaved=False))
    out.sum().backward()
    assert cos.grad is not None


def _rope_both_ways(monkeypatch, x, positions, **kwargs):
    """apply_rope_blocked in one pass over all of x, and block by block (tiny blocks)."""
    monkeypatch.setattr(rope_kernel, "BLOCKED_FROM", 1 << 62)
    whole = apply_rope_blocked(x, positions, **kwargs)
    monkeypatch.setattr(rope_kernel, "BLOCKED_FROM", 0)
    monkeypatch.setattr(rope_kernel, "BLOCK_BYTES", 3 * x.shape[-1] * 4)  # 3 rows
    return whole, apply_rope_blocked(x, positions, **kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("seq", [2, 7])  # blocks of whole slices, blocks along seq
def test_blocks_give_bitwise_the_same_result(monkeypatch, dtype, interleaved, seq) -> None:
    g = torch.Generator().manual_seed(seq)
    x = torch.randn(2, 3, seq, 8, generator=g).to(dtype)
    for positions in (torch.arange(seq) + 5, torch.randint(-9, 99, (2, seq), generator=g)):
        whole, blocked = _rope_both_ways(monkeypatch, x, positions, interleaved=interleaved)
        assert blocked.dtype == dtype and torch.equal(whole, blocked)
        assert torch.equal(blocked, apply_rope(x, positions, interleaved=interleaved))


def test_blocks_give_bitwise_the_same_gradient(monkeypatch) -> None:
    x = torch.randn(2, 3, 7, 8, requires_grad=True)
    grad_out = torch.randn(2, 3, 7, 8)
    grads = []
    for blocked_from in (1 << 62, 0):
        monkeypatch.setattr(rope_kernel, "BLOCKED_FROM", blocked_from)
        monkeypatch.setattr(rope_kernel, "BLOCK_BYTES", 3 * 8 * 4)
        (grad,) = torch.autograd.grad(apply_rope_blocked(x, torch.arange(7)), x, grad_out)
        grads.append(grad)
    assert torch.equal(*grads)


@pytest.mark.parametrize("blocked_from", [1 << 62, 0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_out_and_in_place(monkeypatch, blocked_from, dtype) -> None:
    monkeypatch.setattr(rope_kernel, "BLOCKED_FROM", blocked_from)
    monkeypatch.setattr(rope_kernel, "BLOCK_BYTES", 3 * 8 * 4)
    x = torch.randn(2, 3, 7, 8).to(dtype)
    positions = torch.arange(7)
    expected = apply_rope(x, positions)
    out = torch.empty_like(x)
    assert apply_rope_blocked(x, positions, out=out) is out and torch.equal(out, expected)
    y = x.clone()
    assert apply_rope_blocked(y, positions, out=y) is y and torch.equal(y, expected)


def test_out_errors() -> None:
    x = torch.randn(1, 2, 5, 8)
    positions = torch.arange(5)
    for bad in (torch.empty(1, 2, 5, 6), torch.empty_like(x, dtype=torch.float64),
                torch.empty(1, 2, 8, 5).transpose(-1, -2)):
        with pytest.raises(ValueError, match="out must"):
            apply_rope_blocked(x, positions, out=bad)
    with pytest.raises(ValueError, match="does not record gradients"):
        apply_rope_blocked(x.requires_grad_(), positions, out=torch.empty(1, 2, 5, 8))
    with torch.no_grad():
        apply_rope_blocked(x, positions, out=torch.empty(1, 2, 5, 8))


def test_apply_rope_blocked_checks_its_input_as_apply_rope() -> None:
    with pytest.raises(ValueError, match="floating-point"):
        apply_rope_blocked(torch.ones(1, 2, 5, 8, dtype=torch.long), torch.arange(5))
    with pytest.raises(ValueError, match="angle_dtype"):
        apply_rope_blocked(torch.ones(1, 2, 5, 8), torch.arange(5), angle_dtype=torch.int32)


def test_rotate_passes_writes_the_rotation() -> None:
    x, _, cos, sin = _inputs((2, 3, 7, 8), torch.float32)
    out = torch.empty_like(x)
    rope_kernel.rotate_passes(x, cos, sin, out, False, 1.0)
    assert torch.equal(out, rotate_pairs(x, cos, sin, interleaved=False))
    rope_kernel.rotate_passes(out, cos, sin, x_back := torch.empty_like(x), False, -1.0)
    torch.testing.assert_close(x_back, x)
