"""The three ALiBi attention implementations agree (float32, max abs difference ≤ 1e-5)."""

import pytest
import torch

from posenc_lib import alibi_slopes
from posenc_lib.model.alibi_attention import (
    DEFAULT_IMPLEMENTATION,
    ALIBI_IMPLEMENTATIONS,
    alibi_attention,
    alibi_attention_explicit,
)


@pytest.mark.parametrize("heads", [1, 2, 4, 6, 8, 12])
@pytest.mark.parametrize("causal", [True, False])
def test_implementations_agree(heads: int, causal: bool) -> None:
    q, k, v = (torch.randn(2, heads, 37, 16) for _ in range(3))
    reference = alibi_attention(q, k, v, causal=causal, implementation="explicit")
    for name in ALIBI_IMPLEMENTATIONS:
        out = alibi_attention(q, k, v, causal=causal, implementation=name)
        assert out.shape == q.shape and out.dtype == torch.float32
        assert (out - reference).abs().max().item() <= 1e-5, name


@pytest.mark.parametrize("name", ALIBI_IMPLEMENTATIONS)
def test_end_aligned_queries_match_last_rows(name: str) -> None:
    q, k, v = (torch.randn(1, 6, 20, 8) for _ in range(3))
    full = alibi_attention(q, k, v, implementation=name)
    tail = alibi_attention(q[:, :, -5:], k, v, implementation=name)
    assert (full[:, :, -5:] - tail).abs().max().item() <= 1e-5


def test_explicit_matches_the_formula_by_hand() -> None:
    # One head, three positions, q = k = 0: the scores are the bias alone.
    m = alibi_slopes(1)[0].item()
    q = k = torch.zeros(1, 1, 3, 4)
    v = torch.eye(3, 4).view(1, 1, 3, 4)  # value j is the unit vector e_j, so out = the weights
    weights = alibi_attention_explicit(q, k, v)[0, 0, :, :3]
    row = torch.tensor([torch.exp(torch.tensor(-2 * m)), torch.exp(torch.tensor(-m)), torch.tensor(1.0)])
    assert torch.allclose(weights[2], row / row.sum(), atol=1e-7)
    assert torch.allclose(weights[0], torch.tensor([1.0, 0.0, 0.0]))


def test_custom_slopes_and_default_choice() -> None:
    q, k, v = (torch.randn(1, 3, 9, 8) for _ in range(3))
    slopes = torch.tensor([0.5, -0.5, 0.0])
    outs = [alibi_attention(q, k, v, slopes, implementation=n) for n in ALIBI_IMPLEMENTATIONS]
    assert all((o - outs[0]).abs().max().item() <= 1e-5 for o in outs)
    assert DEFAULT_IMPLEMENTATION["cpu"] in ALIBI_IMPLEMENTATIONS
    assert DEFAULT_IMPLEMENTATION["cuda"] in ALIBI_IMPLEMENTATIONS
    default = alibi_attention(q, k, v, slopes)
    assert torch.equal(default, alibi_attention(q, k, v, slopes, implementation=DEFAULT_IMPLEMENTATION["cpu"]))


def test_errors() -> None:
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match="implementation must be one of"):
        alibi_attention(q, q, q, implementation="triton")
    with pytest.raises(ValueError, match="batch, heads, seq, head_dim"):
        alibi_attention(q[0], q[0], q[0])
    with pytest.raises(ValueError, match=r"slopes must be \[heads=2\]"):
        alibi_attention(q, q, q, torch.ones(3))
    with pytest.raises(ValueError, match="must not outnumber"):
        alibi_attention(q, q[:, :, :2], q[:, :, :2])
