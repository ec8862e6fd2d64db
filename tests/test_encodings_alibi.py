"""ALiBi slopes and bias against Press et al. 2022 §3 (exact values written out by hand)."""

import pytest
import torch

from posenc_lib import alibi_bias, alibi_slopes


@pytest.mark.parametrize(
    "n,expected",
    [
        (1, [2**-8]),
        (2, [2**-4, 2**-8]),
        (4, [2**-2, 2**-4, 2**-6, 2**-8]),
        (8, [2.0**-k for k in range(1, 9)]),
        # not a power of two: slopes of 4 heads, then every other slope of the 8-head sequence
        (6, [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]),
        # 12 heads: the 8-head slopes, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 from the 16-head sequence
        (12, [2.0**-k for k in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]),
    ],
)
def test_exact_slopes(n: int, expected: list[float]) -> None:
    slopes = alibi_slopes(n)
    assert slopes.dtype == torch.float32 and slopes.shape == (n,)
    assert torch.allclose(slopes.double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-7, atol=0)


@pytest.mark.parametrize("n", [0, -3])
def test_bad_head_count(n: int) -> None:
    with pytest.raises(ValueError, match="num_heads"):
        alibi_slopes(n)


def test_bias_formula_with_offset() -> None:
    bias = alibi_bias(4, 3, 5)  # 3 queries aligned to the end of 5 keys
    slopes = alibi_slopes(4)
    for h in range(4):
        for i in range(3):
            for j in range(5):
                assert bias[h, i, j] == pytest.approx(-slopes[h].item() * abs(i + 2 - j))
    assert bias.shape == (4, 3, 5)


def test_bias_errors() -> None:
    with pytest.raises(ValueError, match="q_len"):
        alibi_bias(2, 4, 3)
    with pytest.raises(ValueError, match="num_heads"):
        alibi_bias(0, 2, 2)


def test_positions_from_a_left_padded_mask() -> None:
    from posenc_lib import positions_from_mask

    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    assert positions_from_mask(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]
    assert torch.equal(positions_from_mask(mask.bool()), positions_from_mask(mask))
    with pytest.raises(ValueError, match="0/1"):
        positions_from_mask(torch.tensor([[0, 2]]))
    with pytest.raises(ValueError, match="batch, seq"):
        positions_from_mask(torch.ones(3))


def test_padding_aware_bias_equals_the_unpadded_bias() -> None:
    from posenc_lib import alibi_bias_from_mask

    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    bias = alibi_bias_from_mask(4, mask)
    assert bias.shape == (2, 4, 5, 5)
    assert torch.equal(bias[1], alibi_bias(4, 5, 5))
    assert torch.equal(bias[0, :, 2:, 2:], alibi_bias(4, 3, 3))  # the real tokens, as if alone
    tail = alibi_bias_from_mask(4, mask, q_len=2)
    assert torch.equal(tail, bias[:, :, -2:])
    with pytest.raises(ValueError, match="q_len"):
        alibi_bias_from_mask(4, mask, q_len=6)
