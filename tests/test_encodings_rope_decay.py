"""rope_decay: phases, the summation by parts and its bound, the decay curves."""

import pytest
import torch

from posenc_lib import decay_by_parts_checks, decay_curves, rope_pairs_as_complex, rope_phases
from posenc_lib.encodings.rope import _inverse_frequencies


def test_pairs_as_complex_is_the_rotate_half_layout() -> None:
    x = torch.arange(6.0)
    assert torch.equal(rope_pairs_as_complex(x), torch.complex(x[:3], x[3:]))
    with pytest.raises(ValueError, match="even"):
        rope_pairs_as_complex(torch.ones(5))


def test_phases_are_e_to_the_i_r_theta() -> None:
    distances = torch.tensor([0, 1, 7, 1000])
    theta = _inverse_frequencies(16, 500.0, torch.float64)
    expected = torch.polar(torch.ones(4, 8, dtype=torch.float64), distances[:, None].double() * theta)
    torch.testing.assert_close(rope_phases(distances, 16, 500.0), expected, rtol=0, atol=1e-12)


def _samples(n=300, d=32):
    g = torch.Generator().manual_seed(3)
    return (torch.randn(n, d, dtype=torch.float64, generator=g) for _ in range(2))


def test_checks_hold_and_the_bound_is_never_reached() -> None:
    q, k = _samples()
    checks = decay_by_parts_checks(q, k, [1, 10, 100, 1000])
    assert list(checks.index) == [1, 10, 100, 1000]
    assert checks.iloc[:, :3].all().all() and (checks["largest |Σ| / bound"] < 1).all()
    assert "|Σ| ≤ bound (all 300)" in checks.columns
    with pytest.raises(ValueError, match="float64"):
        decay_by_parts_checks(q.float(), k.float(), [1])


def test_decay_curves_start_where_the_algebra_says() -> None:
    q, k = _samples()
    curves = decay_curves(q, k, torch.tensor([0, 5, 50]))
    assert curves["bound B(r)"][0] == (16 + 1) / 2  # at r = 0 every |S_j| = j
    assert curves["|sum of phases| / (d/2)"][0] == 1
    torch.testing.assert_close(curves["q with itself"][0], torch.tensor(1.0, dtype=torch.float64))
    assert all(c.shape == (3,) for c in curves.values())


def test_decay_table_reads_each_curve_at_the_probes() -> None:
    from posenc_lib.encodings.rope_decay import decay_curves, decay_table

    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 50, 16, dtype=torch.float64, generator=gen)
    distances = torch.tensor([0, 1, 5, 10, 100])
    decay = {10000.0: decay_curves(q, k, distances, 10000.0),
             500000.0: decay_curves(q, k, distances, 500000.0)}
    table = decay_table(decay, distances, [0, 10])
    assert list(table.columns) == [0, 10] and table.columns.name == "r"
    assert table.loc[("base 500 000", "bound B(r)"), 10] == decay[500000.0]["bound B(r)"][3].item()
    assert table.loc[("base 10 000", "bound B(r)"), 0] == (8 + 1) / 2
    with pytest.raises(ValueError, match="probes"):
        decay_table(decay, distances, [2])


def test_discrimination_sum_and_its_first_negative_distance() -> None:
    """B(m) = Σ_i cos(m θ_i) (Men et al. 2024), against a direct float64 sum; the first m
    with B < 0 grows with the base, and None when none is found up to the limit."""
    from posenc_lib import discrimination_sum, first_negative_distance

    m = torch.arange(0, 300)
    thetas = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    direct = torch.cos(m[:, None].double() * thetas).sum(-1)
    assert torch.allclose(discrimination_sum(m, 16), direct, atol=1e-12)
    first = first_negative_distance(16)
    assert direct[first] < 0 and (direct[1:first] >= 0).all()
    assert [first_negative_distance(16, b) for b in (1e2, 1e3, 1e4, 1e5)] == [16, 52, 91, 279]
    assert first_negative_distance(16, 1e8, limit=100) is None
    with pytest.raises(ValueError, match="limit"):
        first_negative_distance(16, limit=0)
