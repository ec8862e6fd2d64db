"""posenc_book.stored: passkey runs as a long table, and pooling the seeds that retrieve."""

from __future__ import annotations

import json

import pytest

from posenc_book.stored import (
    load_passkey_runs,
    passkey_cells,
    passkey_run_shares,
    pooled_passkey_accuracy,
)


def _run(scheme: str, seed: int, right_at_train: int) -> dict:
    rows = [{"length": L, "depth": d, "correct": right_at_train if L == 8 else 1,
             "trials": 4, "needle_starts": [0, 2], "answer_start": 6}
            for L in (8, 16) for d in (0.0, 1.0)]
    rows.append({"length": 32, "depth": 0.0, "correct": None, "trials": 4,
                 "needle_starts": [], "answer_start": 0})
    return {"recipe": {"base": {"seed": seed, "model": {"position": scheme}}},
            "passkey": rows}


def test_cells_and_pooling_keep_the_seeds_that_meet_the_bar(tmp_path) -> None:
    runs = {"rope-0": _run("rope", 0, 4), "rope-1": _run("rope", 1, 3),
            "alibi-0": _run("alibi", 0, 1), "alibi-1": _run("alibi", 1, 0)}
    for name, run in runs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(run))
    assert list(load_passkey_runs(tmp_path, "rope-*.json")) == ["rope-0", "rope-1"]
    cells = passkey_cells(load_passkey_runs(tmp_path))
    assert len(cells) == 16 and set(cells.L) == {8, 16}  # the unrun cell left out
    assert cells.needle_to_answer.iloc[0] == 5.0
    shares = passkey_run_shares(cells, 8)
    assert shares.loc[("rope", 0)].tolist() == [1.0, True, True]
    assert shares.loc[("rope", 1)].tolist() == [0.75, False, False]
    assert shares.loc[("alibi", 1)].kept  # no alibi run meets the bar: all kept
    pooled = pooled_passkey_accuracy(cells, 8, by=("L",))
    assert pooled.loc[("rope", 8)].tolist() == [8, 8, 1.0]  # seed 0 only
    assert pooled.loc[("alibi", 8)].tolist() == [2, 16, 0.125]  # both seeds
    with pytest.raises(ValueError, match="bar"):
        passkey_run_shares(cells, 8, bar=90)
    with pytest.raises(ValueError, match="train_length"):
        passkey_run_shares(cells, 128)
    with pytest.raises(FileNotFoundError, match="nothing"):
        load_passkey_runs(tmp_path, "nothing*.json")


def test_stretched_passkey_share_pools_the_depths_of_one_row() -> None:
    import pytest

    from posenc_book.stored import stretched_passkey_share

    cells = [{"correct": 3, "trials": 4}, {"correct": 1, "trials": 4}]
    run = {"rows": [{"method": "yarn", "length": 256, "passkey": cells}],
           "fine_tuned_rows": [{"method": "yarn", "length": 256, "passkey": cells[:1]}]}
    assert stretched_passkey_share(run, "yarn", 256) == 0.5
    assert stretched_passkey_share(run, "yarn", 256, fine_tuned=True) == 0.75
    with pytest.raises(ValueError, match="0 rows for method='none'"):
        stretched_passkey_share(run, "none", 256)


def test_kept_seeds_and_the_ledger_note_name_the_pooled_seeds(tmp_path) -> None:
    from posenc_book.ledger import seeds_note
    from posenc_book.stored import kept_seeds

    runs = {"rope-0": _run("rope", 0, 4), "rope-1": _run("rope", 1, 4),
            "alibi-0": _run("alibi", 0, 4), "alibi-1": _run("alibi", 1, 0),
            "none-0": _run("none", 0, 0)}
    shares = passkey_run_shares(passkey_cells(runs), 8)
    assert kept_seeds(shares) == {"alibi": [0], "none": [0], "rope": [0, 1]}
    assert seeds_note(shares, "alibi") == "seed 0 (seed 1: no key at 1×): "
    assert seeds_note(shares, "none") == "seed 0, the only one run: "
    assert seeds_note(shares, "rope") == "seeds 0 and 1: "
    with pytest.raises(KeyError, match="t5"):
        seeds_note(shares, "t5")
    with pytest.raises(ValueError, match="kept"):
        kept_seeds(shares.drop(columns="kept"))


def test_end_of_window_loss_pools_the_draws_at_each_length() -> None:
    from posenc_book.stored import end_of_window_loss

    run = {"copy_gain": [{"length": 16, "nll_unseen": 1.0}, {"length": 16, "nll_unseen": 2.0},
                         {"length": 8, "nll_unseen": 0.5}, {"length": 32, "nll_unseen": None}]}
    assert end_of_window_loss(run).to_dict() == {8: 0.5, 16: 1.5}
    with pytest.raises(ValueError, match="copy_gain"):
        end_of_window_loss({"copy_gain": []})


def _recipe_run(scheme: str, seed: int, right_at_train: int, **model) -> dict:
    run = _run(scheme, seed, right_at_train)
    run["recipe"].update({"fraction": 0.25, "repeat_fraction": 0.5})
    run["recipe"]["base"].update({"steps": 100})
    run["recipe"]["base"]["model"].update(model)
    run["test_nll_at_L_train"] = {"nll": 1.234}
    run["copy_gain"] = [
        {"length": 8, "distance": 2, "gain": 0.5, "gain_vs_unseen": 0.1, "nll_first": 2.0,
         "nll_unseen": 1.5},
        {"length": 16, "distance": 2, "gain": 0.25, "gain_vs_unseen": None,
         "nll_first": 2.5, "nll_unseen": None}]
    return run


def test_passkey_runs_overview_names_recipes_and_keys_right() -> None:
    from posenc_book.stored import passkey_runs_overview

    runs = {"a": _recipe_run("rope", 1, 3), "b": _recipe_run("rope", 0, 4),
            "c": _recipe_run("learned", 0, 0, learned_init="sinusoidal")}
    table = passkey_runs_overview(runs, 8)
    assert table.index.names == ["steps", "passkey share", "repeat share", "scheme", "seed"]
    assert [key[3:] for key in table.index] == [
        ("Learned (sinusoidal start)", 0), ("RoPE", 0), ("RoPE", 1)]
    assert table["right at L_train"].tolist() == ["0/8", "8/8", "6/8"]
    assert set(table["test NLL at L_train (nats/byte)"]) == {"1.23"}
    with pytest.raises(ValueError, match="train_length=64"):
        passkey_runs_overview(runs, 64)


def test_share_map_and_pooled_means_read_the_pooled_cells() -> None:
    import numpy as np

    from posenc_book.stored import passkey_share_map

    runs = {"r0": _run("rope", 0, 4), "r1": _run("rope", 1, 2)}
    cells = passkey_cells(runs)
    cells["distance"] = cells.needle_to_answer + 1
    pooled = pooled_passkey_accuracy(cells, 8, bar=0.5, means=("distance",))
    assert pooled.loc[("rope", 8, 0.0)].tolist() == [6, 8, 0.75, 6.0]
    grid = passkey_share_map(pooled.loc["rope"], [1.0, 0.0, 0.5], [8, 16, 32])
    assert grid.shape == (3, 3) and grid[1, :2].tolist() == [0.75, 0.25]
    assert np.isnan(grid[2]).all() and np.isnan(grid[:, 2]).all()  # no such depth or L
    long = cells[cells.run == "r0"][["L", "depth", "correct", "trials"]]  # as columns
    assert passkey_share_map(long, [0.0], [8, 16]).tolist() == [[1.0, 0.25]]
    with pytest.raises(ValueError, match="trials"):
        passkey_share_map(long.drop(columns="trials"), [0.0], [8])
    with pytest.raises(ValueError, match="means"):
        pooled_passkey_accuracy(cells, 8, means=("nowhere",))


def test_copy_gain_and_stretched_cells_are_long_tables() -> None:
    from posenc_book.stored import copy_gain_cells, stretched_passkey_cells

    draws = copy_gain_cells({("rope", 0): _recipe_run("rope", 0, 4)})
    assert draws.columns.tolist() == ["run", "scheme", "seed", "L", "r", "gain",
                                      "gain_vs_unseen", "nll_first", "nll_unseen"]
    assert draws.run.tolist() == [("rope", 0), ("rope", 0)]
    assert draws.nll_unseen.isna().tolist() == [False, True]  # None: not measured
    assert draws.gain_vs_unseen.dtype == float
    cells = [{"depth": 0.0, "correct": 3, "trials": 4}, {"depth": 1.0, "correct": 1,
                                                         "trials": 4}]
    run = {"rows": [{"method": "none", "length": 8, "test_nll": 1.5, "passkey": cells}],
           "fine_tuned_rows": [{"method": "yarn", "length": 8, "test_nll": 1.25,
                                "passkey": cells[:1]}]}
    frame = stretched_passkey_cells(run)
    assert frame["fine-tune"].tolist() == ["untuned", "untuned", "fine-tuned"]
    assert frame.method.tolist() == ["none", "none", "yarn"]
    assert frame.nll.tolist() == [1.5, 1.5, 1.25]
    with pytest.raises(KeyError):
        stretched_passkey_cells({"rows": []})
