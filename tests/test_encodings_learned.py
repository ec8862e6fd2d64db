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


def test_explicit_positions_pick_rows() -> None:
    emb = LearnedPositionalEmbedding(10, 4)
    x = torch.zeros(2, 3, 4)
    positions = torch.tensor([[0, 0, 1], [4, 5, 6]])
    assert torch.equal(emb(x, positions), emb.table.weight[positions])
    assert torch.equal(emb(x, torch.tensor([2, 3, 4])), emb.table.weight[2:5].expand(2, 3, 4))


def test_positions_outside_the_table_fail_in_words() -> None:
    emb = LearnedPositionalEmbedding(8, 4)
    with pytest.raises(ValueError, match=r"0 … 7"):
        emb(torch.zeros(1, 2, 4), torch.tensor([6, 8]))
    with pytest.raises(ValueError, match="integer"):
        emb(torch.zeros(1, 2, 4), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"\[seq=2\]"):
        emb(torch.zeros(1, 2, 4), torch.tensor([0, 1, 2]))


def test_init_std() -> None:
    torch.manual_seed(0)
    assert abs(LearnedPositionalEmbedding(512, 64).table.weight.std().item() - 0.02) < 0.002
    assert abs(LearnedPositionalEmbedding(512, 64, init_std=1.0).table.weight.std().item() - 1.0) < 0.05
    with pytest.raises(ValueError, match="init_std"):
        LearnedPositionalEmbedding(8, 4, init_std=0.0)
