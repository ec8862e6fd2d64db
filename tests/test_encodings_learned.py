"""LearnedPositionalEmbedding: x + table[:seq], and a clear error past the table."""

import pytest
import torch

from posenc_lib import LearnedPositionalEmbedding


def test_adds_first_rows() -> None:
    emb = LearnedPositionalEmbedding(10, 4)
    x = torch.randn(2, 6, 4)
    assert torch.equal(emb(x), x + emb.table.weight[:6])


def test_too_long_names_both_numbers() -> None:
    emb = LearnedPositionalEmbedding(8, 4)
    with pytest.raises(ValueError, match=r"9.*max_positions=8"):
        emb(torch.zeros(1, 9, 4))


def test_wrong_rank_or_width() -> None:
    emb = LearnedPositionalEmbedding(8, 4)
    with pytest.raises(ValueError, match="batch, seq, d_model"):
        emb(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="d_model=4"):
        emb(torch.zeros(1, 3, 5))


@pytest.mark.parametrize("args", [(0, 4), (4, 0)])
def test_bad_sizes(args: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        LearnedPositionalEmbedding(*args)
