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
    from posenc_lib.model.attention import CAUSAL_BLOCK, score_mask
    from posenc_lib.measure import memory_traffic

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


def test_sliding_window_mask_is_transformers_window() -> None:
    """Against transformers 5.23's ``sliding_window_causal_mask_function`` evaluated
    at every (query, key) index: the same keys are visible (exact, booleans)."""
    pytest.importorskip("transformers")
    from transformers.masking_utils import sliding_window_causal_mask_function

    from posenc_lib.model.attention import sliding_window_mask

    for window in (1, 3, 8, 40):
        rule = sliding_window_causal_mask_function(window)
        index = torch.tensor  # the mask functions take 0-d tensors
        visible = torch.tensor([[bool(rule(index(0), index(0), index(t), index(s)))
                                 for s in range(20)] for t in range(20)])
        mask = sliding_window_mask(20, 20, window)
        assert torch.equal(mask == 0, visible)
        assert set(mask.unique().tolist()) <= {0.0, float("-inf")}
    end_aligned = sliding_window_mask(3, 7, 2)  # queries at key positions 4, 5, 6
    assert (end_aligned == 0).tolist() == [[False] * 3 + [True, True, False, False],
                                          [False] * 4 + [True, True, False],
                                          [False] * 5 + [True, True]]
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        sliding_window_mask(4, 4, 0)


def test_sliding_window_layer_matches_explicit() -> None:
    """SelfAttention(sliding_window=W) against an explicit softmax with the window;
    largest difference measured 1.2e-07 (float32 kernels vs the explicit product),
    and probabilities() gives zero weight outside the window."""
    from posenc_lib.model.attention import sliding_window_mask

    torch.manual_seed(0)
    layer = SelfAttention(16, 2, sliding_window=4)
    x = torch.randn(2, 11, 16)
    q, k, v = layer.project(x)
    scores = q @ k.transpose(-2, -1) / math.sqrt(8) + sliding_window_mask(11, 11, 4)
    y = scores.softmax(-1) @ v
    expected = layer.out(y.transpose(1, 2).reshape(2, 11, 16))
    assert (layer(x) - expected).abs().max().item() < 1e-6
    weights = layer.probabilities(x)
    assert torch.equal(weights[..., 10, :7], torch.zeros(2, 2, 7))
    with pytest.raises(ValueError, match="sliding_window needs a causal layer"):
        SelfAttention(16, 2, sliding_window=4, causal=False)
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        SelfAttention(16, 2, sliding_window=0)


def test_scale_none_is_the_default_bit_for_bit() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 600, 8) for _ in range(3))
    bias = alibi_bias(3, 600, 600)
    assert torch.equal(attend(q, k, v, scale=None), attend(q, k, v))
    assert torch.equal(attend(q, k, v, bias, scale=None), attend(q, k, v, bias))
    doubled = attend(q, k, v, bias, scale=2 / math.sqrt(8))
    assert (doubled - attend(2 * q, k, v, bias)).abs().max().item() < 1e-5


@pytest.mark.parametrize("kind", ["deepseek_yarn", "log_length", "llama4_temperature"])
def test_logit_scaling_in_a_layer_matches_explicit(kind: str) -> None:
    """softmax(c_t·q_t·k_s·m/√d) with the rule's query factor c_t and softmax
    multiplier m, written out; largest difference measured 8.9e-08 (outputs) and
    3.0e-08 (probabilities)."""
    from posenc_lib.encodings.logit_scaling import (
        normalize_logit_scaling,
        query_scale,
        softmax_scale_multiplier,
    )

    params = {"deepseek_yarn": {"factor": 40.0, "mscale_all_dim": 1.0},
              "log_length": {"original_max_position_embeddings": 4},
              "llama4_temperature": {"floor_scale": 3, "attn_scale": 0.5}}[kind]
    rule = normalize_logit_scaling({"kind": kind, **params})
    torch.manual_seed(0)
    plain = SelfAttention(16, 2)
    scaled = SelfAttention(16, 2, logit_scaling=rule)
    scaled.load_state_dict(plain.state_dict())
    x = torch.randn(2, 13, 16)
    positions = torch.arange(13) + 5
    q, k, v = plain.project(x, positions)
    factor = query_scale(rule, positions)
    if factor is not None:
        q = q * factor[:, None]
    multiplier = softmax_scale_multiplier(rule)
    scores = q @ k.transpose(-2, -1) * multiplier / math.sqrt(8) + causal_mask(13, 13)
    y = scores.softmax(-1) @ v
    expected = plain.out(y.transpose(1, 2).reshape(2, 13, 16))
    got = scaled(x, positions=positions)
    assert (got - expected).abs().max().item() < 1e-6
    assert not torch.allclose(got, plain(x, positions=positions))
    weights = scaled.probabilities(x, positions=positions)
    assert torch.allclose(weights, scores.softmax(-1), atol=1e-6)


def test_window_band_is_the_one_sliding_window_rule() -> None:
    from posenc_lib.analysis.interventions import band_bias
    from posenc_lib.model.attention import local_mask, sliding_window_mask, window_band

    q, k = torch.arange(6)[:, None], torch.arange(6)[None, :]
    band = window_band(q, k, 3)
    assert band.tolist()[5] == [False, False, False, True, True, True]
    assert not band[0, 1]  # a key after the query: hidden when causal
    assert window_band(q, k, 3, causal=False)[0, 1]  # left to a causal mask otherwise
    assert torch.equal(sliding_window_mask(6, 6, 3) == 0, band)
    assert torch.equal(band_bias(6, 3) == 0, window_band(q, k, 3, causal=False))
    assert torch.equal(local_mask(None, 6, 3, torch.float32)[0, 0], sliding_window_mask(6, 6, 3))
    with pytest.raises(ValueError, match="window"):
        window_band(q, k, 0)


def test_heads_are_project_before_rope() -> None:
    from posenc_lib import RotaryEmbedding

    torch.manual_seed(0)
    attn = SelfAttention(16, 2, rotary=RotaryEmbedding(8, 10000.0))
    x = torch.randn(2, 5, 16)
    q, k, v = attn.heads(x)
    pq, pk, pv = attn.project(x)
    assert q.shape == (2, 2, 5, 8) and torch.equal(v, pv)
    assert torch.allclose(attn.rotary(q, None), pq) and torch.allclose(attn.rotary(k, None), pk)


def test_load_interleaved_as_half_gives_the_same_outputs() -> None:
    from posenc_lib import RotaryEmbedding, load_interleaved_as_half

    torch.manual_seed(0)
    source = SelfAttention(16, 2, rotary=RotaryEmbedding(8, interleaved=True))
    target = SelfAttention(16, 2, rotary=RotaryEmbedding(8))
    load_interleaved_as_half(target, source)
    x = torch.randn(2, 10, 16)
    assert (target(x) - source(x)).abs().max() < 1e-5
    with pytest.raises(ValueError, match="heads"):
        load_interleaved_as_half(SelfAttention(16, 4, rotary=RotaryEmbedding(4)), source)
