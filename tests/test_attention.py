"""attention: equal to an explicit softmax(q kᵀ/√d + bias + mask) v; permutation equivariance."""

import math

import pytest
import torch

from posenc_lib import SelfAttention, alibi_bias, attend, causal_mask


def explicit(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores + causal_mask(q.shape[-2], k.shape[-2])
    if bias is not None:
        scores = scores + bias
    return scores.softmax(-1) @ v


@pytest.mark.parametrize("heads", [1, 4, 6])
def test_matches_explicit_with_and_without_bias(heads: int) -> None:
    q, k, v = (torch.randn(2, heads, 9, 8) for _ in range(3))
    assert torch.allclose(attend(q, k, v), explicit(q, k, v), atol=1e-5)
    bias = alibi_bias(heads, 9, 9)
    assert torch.allclose(attend(q, k, v, bias), explicit(q, k, v, bias), atol=1e-5)


def test_end_aligned_queries_match_last_rows() -> None:
    q, k, v = (torch.randn(1, 2, 7, 4) for _ in range(3))
    full = attend(q, k, v)
    tail = attend(q[:, :, -3:], k, v)
    assert torch.allclose(full[:, :, -3:], tail, atol=1e-6)


def test_errors() -> None:
    with pytest.raises(ValueError, match="batch, heads, seq, head_dim"):
        attend(torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4))
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="bias"):
        attend(q, q, q, torch.zeros(2, 4, 4))


def test_unmasked_self_attention_is_permutation_equivariant() -> None:
    # Without a mask or positions, permuting the tokens permutes the outputs.
    layer = SelfAttention(16, 4, causal=False)
    x = torch.randn(2, 7, 16)
    perm = torch.randperm(7)
    assert torch.allclose(layer(x)[:, perm], layer(x[:, perm]), atol=1e-6)
    causal = SelfAttention(16, 4)  # the causal mask breaks the symmetry
    assert not torch.allclose(causal(x)[:, perm], causal(x[:, perm]), atol=1e-3)


@pytest.mark.parametrize("causal", [True, False])
def test_probabilities_reproduce_forward(causal: bool) -> None:
    # The weights SelfAttention.probabilities reports are the ones forward applies (through SDPA).
    from posenc_lib import RotaryEmbedding

    layer = SelfAttention(16, 4, rotary=RotaryEmbedding(4), causal=causal).eval()
    x, bias = torch.randn(2, 7, 16), alibi_bias(4, 7, 7)
    with torch.no_grad():
        weights = layer.probabilities(x, bias)  # (B, H, T, T)
        assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 7), atol=1e-6)
        _, _, v = layer.project(x)
        y = (weights @ v).transpose(1, 2).reshape(2, 7, 16)
        assert torch.allclose(layer.out(y), layer(x, bias), atol=1e-5)


def test_long_causal_mask_runs_block_by_block_and_equals_one_call() -> None:
    from posenc_lib.attention import CAUSAL_BLOCK, score_mask
    from posenc_lib.benchmark import memory_traffic

    torch.manual_seed(0)
    t = 2 * CAUSAL_BLOCK + 77  # three blocks, the last one partial
    q, k, v = (torch.randn(1, 2, t, 8, dtype=torch.float64) for _ in range(3))
    bias = alibi_bias(2, t, t, dtype=torch.float64)
    one_call = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=score_mask(bias, t, t, dtype=torch.float64))
    assert torch.allclose(attend(q, k, v, bias), one_call, atol=1e-12)
    tail = attend(q[:, :, -100:], k, v, bias[:, -100:])  # queries end-aligned to keys
    assert torch.allclose(tail, one_call[:, :, -100:], atol=1e-12)
    q32, k32, v32, bias32 = q.float(), k.float(), v.float(), bias.float()
    kernels = memory_traffic(lambda: attend(q32, k32, v32, bias32)).operations
    assert kernels["_scaled_dot_product_flash_attention_for_cpu"] == 3
    # a bias that is learned still gets its gradient through every block
    learned, reference = bias.clone().requires_grad_(), bias.clone().requires_grad_()
    weights = torch.randn(1, 2, t, 8, dtype=torch.float64)
    (attend(q, k, v, learned) * weights).sum().backward()
    mask = score_mask(reference, t, t, dtype=torch.float64)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    (sdpa(q, k, v, attn_mask=mask) * weights).sum().backward()
    assert torch.allclose(learned.grad, reference.grad, atol=1e-12)
    assert learned.grad[:, -1].abs().sum() > 0  # the last block's rows too


@pytest.mark.parametrize(
    ("q_len", "k_len", "error", "message"),
    [
        (-2, 4, ValueError, r"q_len must be an integer >= 0, got q_len=-2"),
        (2, -1, ValueError, r"k_len must be an integer >= 0, got k_len=-1"),
        (2.5, 4, TypeError, r"q_len must be an integer >= 0, got q_len=2.5"),
        (2, "4", TypeError, r"k_len must be an integer >= 0"),
        (True, 4, TypeError, r"q_len must be an integer"),
    ],
)
def test_causal_mask_bad_lengths_fail_in_words(q_len, k_len, error, message) -> None:
    with pytest.raises(error, match=message):
        causal_mask(q_len, k_len)


def test_causal_mask_of_zero_queries_is_empty() -> None:
    assert causal_mask(0, 3).shape == (0, 3)
