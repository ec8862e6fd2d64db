"""encodings.t5_bias: T5's buckets (Raffel et al. 2020 §2.1) against Hugging Face's T5.

The golden reference is ``T5Attention._relative_position_bucket`` of transformers 5.23.0
(pinned in requirements.txt, a port of Mesh TensorFlow's function). transformers is a
test-only dependency; the comparison is skipped where it is missing.
"""

import pytest
import torch

from posenc_lib import T5RelativePositionBias, t5_relative_position_bucket

# offsets key − query: every small one, then far beyond any max_distance tested here
OFFSETS = torch.cat([torch.arange(-3000, 3001), torch.tensor([-(10**6), 10**6])])


def hugging_face_t5():
    """transformers' T5 module, or skip the test where transformers is missing."""
    return pytest.importorskip(
        "transformers.models.t5.modeling_t5",
        reason="transformers (test-only dependency) is not installed",
    )


def test_causal_buckets() -> None:
    distance = torch.arange(0, 300)
    buckets = t5_relative_position_bucket(-distance)  # keys behind the query
    assert torch.equal(buckets[:16], torch.arange(16))  # exact for small distances
    # log-spaced from 16 on; the last bucket starts where the logarithm reaches it
    # (16 · 8^(15/16) ≈ 112.4, so at 113) and takes every farther distance
    assert buckets[112] == 30 and torch.all(buckets[113:] == 31)
    assert torch.all(buckets[1:] >= buckets[:-1])  # monotone
    future = t5_relative_position_bucket(torch.arange(1, 10))
    assert torch.all(future == 0)  # keys after the query: bucket 0


def test_bidirectional_halves() -> None:
    buckets = t5_relative_position_bucket(torch.tensor([-3, 3]), bidirectional=True)
    assert buckets.tolist() == [3, 16 + 3]


def test_constant_beyond_max_distance() -> None:
    for max_distance in (64, 128, 512):
        far = -torch.arange(max_distance, 20 * max_distance)
        buckets = t5_relative_position_bucket(far, max_distance=max_distance)
        assert torch.all(buckets == 31), max_distance


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(
    "buckets,far", [(32, 128), (32, 64), (16, 256), (64, 1000), (8, 20), (7, 50)]
)
def test_matches_hugging_face_t5(bidirectional: bool, buckets: int, far: int) -> None:
    t5 = hugging_face_t5()
    settings = dict(bidirectional=bidirectional, num_buckets=buckets, max_distance=far)
    theirs = t5.T5Attention._relative_position_bucket(OFFSETS, **settings)
    ours = t5_relative_position_bucket(OFFSETS, **settings)
    assert ours.dtype == torch.int64 and ours.shape == OFFSETS.shape
    assert torch.equal(ours, theirs.long())


def test_module_matches_hugging_face_compute_bias() -> None:
    t5 = hugging_face_t5()
    config = t5.T5Config(
        d_model=16,
        d_kv=4,
        num_heads=4,
        is_decoder=True,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
    )
    theirs = t5.T5Attention(config, has_relative_attention_bias=True)
    ours = T5RelativePositionBias(4)
    with torch.no_grad():
        ours.bias.weight.copy_(torch.randn(32, 4))
        theirs.relative_attention_bias.weight.copy_(ours.bias.weight)
    # a decoder (causal) attention over 300 keys, with 300 and then 7 queries
    for q_len, past in ((300, 0), (7, 293)):
        expected = theirs.compute_bias(q_len, 300, past_seen_tokens=past)[0]  # (H,T,S)
        assert torch.equal(ours(q_len, 300), expected)


def test_module_shape_and_zero_init() -> None:
    bias = T5RelativePositionBias(4)
    out = bias(3, 5)
    assert out.shape == (4, 3, 5) and torch.all(out == 0)
    assert bias.bias.weight.shape == (32, 4)


def test_for_positions_matches_the_default_grid() -> None:
    bias = T5RelativePositionBias(3)
    torch.nn.init.normal_(bias.bias.weight)
    p = torch.arange(7)[None]
    assert torch.equal(bias.for_positions(p, p)[0], bias(7, 7))
    shifted = bias.for_positions(p + 100, p + 100)[0]
    assert torch.equal(shifted, bias(7, 7))  # only offsets matter


def test_for_positions_errors() -> None:
    bias = T5RelativePositionBias(2)
    p = torch.arange(4)[None]
    with pytest.raises(ValueError, match="query_positions"):
        bias.for_positions(p.float(), p)
    with pytest.raises(ValueError, match="batch sizes"):
        bias.for_positions(p, p.expand(2, 4))


def test_bias_is_a_lookup_of_the_table() -> None:
    bias = T5RelativePositionBias(2, num_buckets=8, max_distance=20)
    with torch.no_grad():
        bias.bias.weight.copy_(torch.arange(16.0).view(8, 2))
    out = bias(4, 6)  # queries at key positions 2 … 5
    for t in range(4):
        for s in range(6):
            offset = torch.tensor(s - (t + 2))
            bucket = t5_relative_position_bucket(offset, num_buckets=8, max_distance=20)
            assert out[:, t, s].tolist() == bias.bias.weight[bucket].tolist()


def test_errors() -> None:
    offsets = torch.zeros(3, dtype=torch.long)
    with pytest.raises(ValueError, match="integer tensor"):
        t5_relative_position_bucket(torch.zeros(3))
    with pytest.raises(ValueError, match="num_buckets"):
        t5_relative_position_bucket(offsets, num_buckets=1)
    with pytest.raises(ValueError, match="num_buckets"):
        t5_relative_position_bucket(offsets, num_buckets=3, bidirectional=True)
    with pytest.raises(ValueError, match="max_distance"):
        t5_relative_position_bucket(offsets, num_buckets=32, max_distance=16)
    with pytest.raises(ValueError, match="integers"):
        t5_relative_position_bucket(offsets, max_distance=128.0)  # type: ignore
    with pytest.raises(ValueError, match="num_heads"):
        T5RelativePositionBias(0)
    with pytest.raises(ValueError, match="q_len"):
        T5RelativePositionBias(2)(5, 3)


def test_bucket_starts_are_the_first_distance_of_each_bucket() -> None:
    from posenc_lib import t5_bucket_starts

    starts = t5_bucket_starts()
    assert starts.dtype == torch.int64 and starts.shape == (32,)
    buckets = t5_relative_position_bucket(-torch.arange(0, 1000))
    for b in range(32):  # the smallest r with bucket(r) = b
        assert int(starts[b]) == int(torch.nonzero(buckets == b)[0])
    assert int(starts[-1]) == 113  # 16 · 8^(15/16) ≈ 112.4
    # few distances, many buckets: an empty bucket starts where the next one does
    many = t5_bucket_starts(num_buckets=64, max_distance=40)
    assert (many.diff() >= 0).all() and (many.diff() == 0).any()
    with pytest.raises(ValueError, match="max_distance"):
        t5_bucket_starts(max_distance=10)


def test_bucket_pair_counts_count_every_causal_pair_once() -> None:
    from posenc_lib import t5_bucket_pair_counts

    for length in (1, 7, 128, 300):
        t = torch.arange(length)
        offsets = t[None, :] - t[:, None]  # (T, S): s − t
        expected = torch.bincount(t5_relative_position_bucket(offsets[offsets <= 0]), minlength=32)
        counts = t5_bucket_pair_counts(length)
        assert torch.equal(counts, expected) and counts.dtype == torch.int64
        assert int(counts.sum()) == length * (length + 1) // 2
    assert int(t5_bucket_pair_counts(128)[31]) == 120  # r = 113 … 127: 15 + 14 + … + 1
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="length"):
            t5_bucket_pair_counts(bad)
