"""table_geometry: distances from the rows past L_train to the nearest trained row, checked by
hand on small tables and against a brute-force computation on the sinusoidal table."""

import math

import pytest
import torch

from posenc_lib import distance_to_trained_rows, sinusoidal_encoding, sinusoidal_frequencies


def test_a_hand_computed_plane() -> None:
    # trained rows (0, 0), (3, 0), (3, 4): neighbour distances 3 and 4, step 3.5
    table = torch.tensor([[0.0, 0.0], [3.0, 0.0], [3.0, 4.0],  # trained
                          [0.0, 1.0], [6.0, 4.0], [3.0, 2.0]])  # past L_train
    gap = distance_to_trained_rows(table, L_train=3)
    assert gap.positions.tolist() == [3, 4, 5]
    assert gap.distance.tolist() == [1.0, 3.0, 2.0]
    # (3, 2) is 2 from both (3, 0) and (3, 4): the smaller row wins the tie
    assert gap.nearest_row.tolist() == [0, 2, 1]
    assert gap.step == 3.5
    assert gap.in_steps.tolist() == pytest.approx([1 / 3.5, 3 / 3.5, 2 / 3.5], abs=1e-15)
    assert gap.distance.dtype == gap.in_steps.dtype == torch.float64
    assert gap.positions.dtype == gap.nearest_row.dtype == torch.int64


def test_the_docstring_line() -> None:
    gap = distance_to_trained_rows(torch.tensor([[0.0], [1.0], [2.0], [5.0]]), 3)
    assert (gap.distance.tolist(), gap.nearest_row.tolist(), gap.step) == ([3.0], [2], 1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_any_float_table_is_measured_in_float64(dtype: torch.dtype) -> None:
    table = torch.tensor([[0.0], [2.0], [4.0], [7.0]], dtype=dtype)
    gap = distance_to_trained_rows(table, 2)
    assert gap.distance.tolist() == [2.0, 5.0] and gap.step == 2.0
    assert gap.distance.dtype == torch.float64


def test_sinusoidal_table_matches_brute_force_across_chunks() -> None:
    # 2100 positions: rows past L_train span three chunks of 1024
    L_train, d_model, base = 16, 8, 100.0
    table = sinusoidal_encoding(2100, d_model, base)
    gap = distance_to_trained_rows(table, L_train)
    rows = table.double()
    brute = (rows[L_train:, None] - rows[None, :L_train]).norm(dim=-1)  # (P − L, L)
    assert torch.allclose(gap.distance, brute.min(dim=-1).values, rtol=0, atol=1e-12)
    picked = brute.gather(1, gap.nearest_row[:, None])[:, 0]
    assert torch.allclose(picked, gap.distance, rtol=0, atol=1e-12)
    # the step is the closed form ‖PE(s + 1) − PE(s)‖ = sqrt(2 Σ_i (1 − cos ω_i))
    omega = sinusoidal_frequencies(d_model, base)
    assert gap.step == pytest.approx(math.sqrt(2 * (1 - omega.cos()).sum()), rel=1e-6)
    # position L_train is a neighbour of L_train − 1: exactly one step away
    assert int(gap.nearest_row[0]) == L_train - 1
    assert float(gap.in_steps[0]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("L_train", [0, 1, -3, 5, 6])
def test_L_train_out_of_range(L_train: int) -> None:
    with pytest.raises(ValueError, match="L_train must lie in 2 … positions − 1 = 4"):
        distance_to_trained_rows(torch.randn(5, 4), L_train)


@pytest.mark.parametrize("L_train", [2.0, True, "3"])
def test_L_train_must_be_an_int(L_train: object) -> None:
    with pytest.raises(TypeError, match="L_train must be an int"):
        distance_to_trained_rows(torch.randn(5, 4), L_train)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "table",
    [torch.randn(6), torch.randn(2, 6, 4), torch.arange(24).reshape(6, 4)],
    ids=["1-D", "3-D", "integer"],
)
def test_table_must_be_a_float_matrix(table: torch.Tensor) -> None:
    with pytest.raises(ValueError, match=r"table must be a floating-point \[positions, d_model\]"):
        distance_to_trained_rows(table, 2)


def test_table_errors() -> None:
    with pytest.raises(TypeError, match="table must be a torch.Tensor"):
        distance_to_trained_rows([[0.0], [1.0], [2.0]], 2)  # type: ignore[arg-type]
    nan_past = torch.tensor([[0.0], [1.0], [float("nan")]])
    with pytest.raises(ValueError, match="table must be finite"):
        distance_to_trained_rows(nan_past, 2)
    with pytest.raises(ValueError, match="neighbour step is 0"):
        distance_to_trained_rows(torch.tensor([[1.0], [1.0], [3.0]]), 2)
