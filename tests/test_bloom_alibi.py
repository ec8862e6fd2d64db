"""ALiBi against Hugging Face transformers' BLOOM (build_alibi_tensor, computed in float32).

transformers is a test-only dependency; these tests are skipped where it is missing.
"""

import pytest
import torch

from posenc_lib import alibi_bias_from_mask, alibi_slopes

bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom",
                            reason="transformers (test-only dependency) is not installed")


def bloom_alibi(mask: torch.Tensor, heads: int) -> torch.Tensor:
    """BLOOM's key-only bias m_h·p(j), reshaped to [batch, heads, 1, seq]."""
    out = bloom.build_alibi_tensor(mask, heads, torch.float32)  # (B·H, 1, S)
    return out.view(mask.shape[0], heads, 1, mask.shape[1])


@pytest.mark.parametrize("n", range(1, 33))
def test_slopes_match_bloom(n: int) -> None:
    # With one unpadded key at position 1, BLOOM's bias is exactly its slope.
    theirs = bloom_alibi(torch.ones(1, 2, dtype=torch.long), n)[0, :, 0, 1]
    assert torch.allclose(alibi_slopes(n), theirs, rtol=1e-6, atol=0)


@pytest.mark.parametrize("heads", [4, 6])
def test_padding_aware_bias_matches_bloom_on_a_left_padded_batch(heads: int) -> None:
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    ours = alibi_bias_from_mask(heads, mask)  # (B, H, T, S)
    theirs = bloom_alibi(mask, heads).expand_as(ours)
    t = mask.shape[1]
    allowed = torch.ones(t, t).tril().bool()[None, None] & mask.bool()[:, None, None, :]  # causal + padding
    allowed = allowed & mask.bool()[:, None, :, None]  # real queries only
    scores = torch.randn(2, heads, t, t)

    def attention(b):
        return (scores + b).masked_fill(~allowed, float("-inf")).softmax(-1).nan_to_num(0.0)

    # Under the causal and padding masks the two differ by a constant per row: same softmax.
    assert torch.allclose(attention(ours), attention(theirs), atol=1e-6)
    # Real keys of the padded row get the same distances as the unpadded row's first keys.
    assert torch.allclose(ours[0, :, 3:, 3:], ours[1, :, :4, :4])
