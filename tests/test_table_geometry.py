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


def test_neighbour_distances_and_the_closed_form() -> None:
    from posenc_lib import neighbour_distances, sinusoidal_offset_distance

    table = sinusoidal_encoding(50, 8)
    steps = neighbour_distances(table)
    assert steps.shape == (49,) and steps.dtype == torch.float64
    # every neighbour step of the sinusoidal table is the closed form at k = 1
    closed = sinusoidal_offset_distance(torch.tensor([1.0, 7.0], dtype=torch.float64), 8, 10000.0)
    assert torch.allclose(steps, closed[:1].expand(49), atol=1e-6)
    assert torch.allclose((table[7:] - table[:-7]).double().norm(dim=1), closed[1].expand(43), atol=1e-6)
    assert neighbour_distances(torch.tensor([[1.0], [1.0], [3.0]])).tolist() == [0.0, 2.0]
    with pytest.raises(ValueError, match="rows"):
        neighbour_distances(torch.ones(1, 4))
    with pytest.raises(ValueError, match="offsets"):
        sinusoidal_offset_distance(torch.ones(2, 2), 8, 10000.0)


def test_cosine_matrix_and_offset_structure() -> None:
    from posenc_lib import cosine_matrix, mean_by_offset, offset_r2

    rows = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]])
    C = cosine_matrix(rows)
    assert torch.allclose(C, torch.tensor([[1.0, 0, -1], [0, 1, 0], [-1, 0, 1]], dtype=torch.float64))
    assert mean_by_offset(C).tolist() == [1.0, 0.0, -1.0]
    assert offset_r2(cosine_matrix(sinusoidal_encoding(64, 16))) > 0.999  # offset only
    torch.manual_seed(0)
    assert abs(offset_r2(cosine_matrix(torch.randn(64, 16)))) < 0.1  # random rows: none
    with pytest.raises(ValueError, match="similarity"):
        mean_by_offset(torch.ones(2, 3))
    with pytest.raises(ValueError, match="P >= 3"):
        offset_r2(torch.ones(2, 2))
    with pytest.raises(ValueError, match="rows"):
        cosine_matrix(torch.ones(3))


def test_fitted_scale() -> None:
    from posenc_lib import fitted_scale

    start = torch.randn(10, 4)
    assert fitted_scale(0.5 * start, start) == pytest.approx(0.5)
    orthogonal = torch.tensor([[0.0, 1.0]])
    assert fitted_scale(orthogonal, torch.tensor([[2.0, 0.0]])) == 0.0
    with pytest.raises(ValueError, match="one shape"):
        fitted_scale(start, start[:3])
    with pytest.raises(ValueError, match="zeros"):
        fitted_scale(start, torch.zeros_like(start))


def test_pair_angles_and_low_precision_angles() -> None:
    from posenc_lib import pair_angles, sinusoidal_angle_error

    table = sinusoidal_encoding(8, 4, 100.0)
    angles = pair_angles(table)  # pair 0 turns 1 rad per position
    assert torch.allclose(angles[:4, 0], torch.arange(4, dtype=torch.float64), atol=1e-6)
    error = sinusoidal_angle_error(300, 8, 10000.0, torch.bfloat16)
    assert error.shape == (300,) and error[:257].max() < 0.1 and error[257] > 1  # 257 rounds
    assert sinusoidal_angle_error(300, 8, 10000.0, torch.float64).max() < 1e-6
    with pytest.raises(ValueError, match="even"):
        pair_angles(torch.ones(3, 5))


def test_offset_curve_shape() -> None:
    from posenc_lib import offset_curve_shape

    f = torch.tensor([4.0, 1.0, 2.0, 0.5, 3.0, -1.0, 0.0, -2.0])
    shape = offset_curve_shape(f, near=5)
    assert shape == {"first_rise": 1, "rebound_from": 3, "rebound_to": 4, "rebound": 2.5,
                     "first_negative": 5, "lowest": 7, "minimum": -2.0}
    with pytest.raises(ValueError, match="near"):
        offset_curve_shape(f, near=8)
    with pytest.raises(ValueError, match="rise"):
        offset_curve_shape(torch.tensor([3.0, 2.0, -1.0]), near=1)


def test_learned_position_table_and_offset_structure() -> None:
    from posenc_lib import ModelConfig, TransformerLM, learned_position_table, offset_structure

    model = TransformerLM(ModelConfig(position="learned", d_model=8, num_layers=1, num_heads=2, max_positions=40))
    table = learned_position_table(model)
    assert table.shape == (40, 8) and not table.requires_grad
    assert torch.equal(table, model.learned.table.weight.detach())
    with pytest.raises(ValueError, match="no learned position table"):
        learned_position_table(TransformerLM(ModelConfig(position="none", d_model=8, num_layers=1, num_heads=2)))
    from posenc_lib import cosine_matrix

    structure = offset_structure(cosine_matrix(sinusoidal_encoding(40, 16)))
    assert list(structure) == ["mean C, offset 1", "mean C, offset 8", "mean C, offsets ≥ 32",
                               "variance explained by offset"]
    assert structure["variance explained by offset"] > 0.999
    assert structure["mean C, offset 1"] > structure["mean C, offset 8"]
    rounded = offset_structure(cosine_matrix(sinusoidal_encoding(40, 16)), digits=3)
    assert rounded == {k: round(v, 3) for k, v in structure.items()}
    with pytest.raises(ValueError, match="P > 32"):
        offset_structure(torch.eye(10))


def test_sinusoidal_offset_curve_is_the_cosine_sum() -> None:
    from posenc_lib import sinusoidal_offset_curve

    f = sinusoidal_offset_curve(300, 16, 100.0)
    assert f.shape == (300,) and f.dtype == torch.float64
    k = torch.arange(300, dtype=torch.float64)
    expected = torch.cos(k[:, None] * sinusoidal_frequencies(16, 100.0)).sum(1)
    assert torch.allclose(f, expected, atol=1e-4)  # float32 table rounding
    assert math.isclose(f[0].item(), 8.0, rel_tol=1e-6)
    with pytest.raises(ValueError):
        sinusoidal_offset_curve(10, 7)


def test_initial_position_table_is_the_start_of_training_and_keeps_the_rng() -> None:
    from posenc_lib import TransformerLM, get_scale, initial_position_table, learned_position_table

    config = get_scale("ci").train_config("learned", seed=3)
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    table = initial_position_table(config)
    assert torch.equal(torch.rand(3), before)  # the caller's random state is untouched
    torch.manual_seed(config.seed)
    assert torch.equal(table, learned_position_table(TransformerLM(config.model)))
    assert table.shape == (config.model.max_positions, config.model.d_model)
    with pytest.raises(ValueError, match="learned"):
        initial_position_table(get_scale("ci").train_config("rope", seed=0))


def test_off_diagonal_and_main_direction():
    from posenc_lib import main_direction, off_diagonal

    m = torch.arange(9.0).view(3, 3)
    assert off_diagonal(m).tolist() == [1.0, 2.0, 3.0, 5.0, 6.0, 7.0]
    with pytest.raises(ValueError, match="square"):
        off_diagonal(torch.zeros(2, 3))
    p = torch.arange(10.0)
    table = torch.stack([-p, 0.01 * torch.randn(10), torch.zeros(10)], 1)  # falls along x
    coordinate, energy = main_direction(table)
    assert coordinate.dtype == energy.dtype == torch.float64
    assert coordinate[-1] > coordinate[0]  # oriented: late rows positive
    assert torch.allclose(coordinate, p.double() - 4.5, atol=0.05)
    assert energy[0] > 0.99 and math.isclose(energy.sum().item(), 1.0)
    with pytest.raises(ValueError, match="table"):
        main_direction(torch.zeros(1, 3))


def test_table_movement_of_a_scaled_table_and_a_bad_start() -> None:
    from posenc_lib import table_movement

    start = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    moved = table_movement(0.5 * start, start)
    assert moved["fitted scale c"] == 0.5 and moved["rest / trained (norm %)"] == 0.0
    assert moved["min cosine of a row with its start"] == 1.0
    assert moved["trained row norm"] == pytest.approx(moved["start row norm"] / 2, abs=2e-3)
    with pytest.raises(ValueError, match="one shape"):
        table_movement(start[:4], start)


def test_perplexity_with_rows_restores_the_table() -> None:
    from posenc_lib import ModelConfig, TransformerLM, evaluate_perplexity, perplexity_with_rows

    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(position="learned", d_model=16, num_layers=1,
                                      num_heads=2, max_positions=8)).eval()
    tokens = torch.randint(0, 256, (65,))
    table = model.learned.table.weight.detach().clone()
    as_is = evaluate_perplexity(model, tokens, 8).perplexity
    assert perplexity_with_rows(model, table.clone(), tokens, 8) == pytest.approx(as_is)
    zeroed = perplexity_with_rows(model, torch.zeros_like(table), tokens, 8)
    assert zeroed != as_is and torch.equal(model.learned.table.weight, table)
    with pytest.raises(ValueError, match="shape"):
        perplexity_with_rows(model, table[:4], tokens, 8)
    with pytest.raises(ValueError, match="no learned"):
        perplexity_with_rows(TransformerLM(ModelConfig(position="rope", d_model=16,
                             num_layers=1, num_heads=2)), table, tokens, 8)


def test_a_learned_table_lengthened_three_ways_and_put_in_a_copy_of_its_model() -> None:
    from posenc_lib import (LEARNED_FILLS, ModelConfig, TransformerLM, filled_learned_rows,
                            learned_position_table, with_learned_rows)

    trained = torch.arange(4.0)[:, None].repeat(1, 2)  # row p = [p, p], L = 4
    fills = filled_learned_rows(trained, 7)
    assert tuple(fills) == LEARNED_FILLS
    assert fills["last row copied"][:, 0].tolist() == [0, 1, 2, 3, 3, 3, 3]
    assert fills["table repeated"][:, 0].tolist() == [0, 1, 2, 3, 0, 1, 2]
    assert fills["rows interpolated"][:, 0].tolist() == [0, 0.5, 1, 1.5, 2, 2.5, 3]
    with pytest.raises(ValueError, match="num_positions"):
        filled_learned_rows(trained, 3)
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(position="learned", d_model=8, num_layers=1,
                                      num_heads=2, max_positions=4))
    state = torch.random.get_rng_state()
    rows = filled_learned_rows(learned_position_table(model), 8)["table repeated"]
    longer = with_learned_rows(model, rows)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's draws kept
    assert longer.config.max_positions == 8 and not longer.training
    assert torch.equal(learned_position_table(longer), rows)
    tokens = torch.randint(0, 256, (1, 4))
    with torch.no_grad():
        assert torch.equal(longer(tokens), model.eval()(tokens))  # same rows 0 … 3
    with pytest.raises(ValueError, match="rows"):
        with_learned_rows(model, torch.zeros(8, 3))
    with pytest.raises(ValueError, match="learned"):
        with_learned_rows(TransformerLM(ModelConfig(position="none", d_model=8,
                                                    num_layers=1, num_heads=2)), rows)
