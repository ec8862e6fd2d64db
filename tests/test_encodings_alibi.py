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
