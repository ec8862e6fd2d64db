"""T5 bucketed relative bias: bucket boundaries (Raffel et al. 2020 §2.1) and the module's shape."""

import torch

from posenc_lib import T5RelativePositionBias, t5_relative_position_bucket


def test_causal_buckets() -> None:
    distance = torch.arange(0, 300)
    buckets = t5_relative_position_bucket(-distance)  # keys behind the query
    assert torch.equal(buckets[:16], torch.arange(16))  # exact for small distances
    # log-spaced from 16 on; the last bucket starts where the log rounds to it (113) and takes all beyond 128
    assert buckets[112] == 30 and torch.all(buckets[113:] == 31)
    assert torch.all(buckets[1:] >= buckets[:-1])  # monotone
    assert torch.all(t5_relative_position_bucket(torch.arange(1, 10)) == 0)  # future keys: bucket 0


def test_bidirectional_halves() -> None:
    buckets = t5_relative_position_bucket(torch.tensor([-3, 3]), bidirectional=True)
    assert buckets.tolist() == [3, 16 + 3]


def test_module_shape_and_zero_init() -> None:
    bias = T5RelativePositionBias(4)
    out = bias(3, 5)
    assert out.shape == (4, 3, 5) and torch.all(out == 0)


def test_for_positions_matches_the_default_grid() -> None:
    from posenc_lib import T5RelativePositionBias

    bias = T5RelativePositionBias(3)
    torch.nn.init.normal_(bias.bias.weight)
    p = torch.arange(7)[None]
    assert torch.equal(bias.for_positions(p, p)[0], bias(7, 7))
    assert torch.equal(bias.for_positions(p + 100, p + 100)[0], bias(7, 7))  # offsets only
