"""The named scales: ci is what notebooks print (its training fields are frozen); book and gpu
train on the larger corpus; the sliding stride follows the divisor."""

import pytest

from posenc_lib import SCALES, TrainConfig, get_scale
from posenc_lib.training.scales import Scale


def test_ci_trains_exactly_as_before() -> None:
    # Other chapters' stored outputs depend on these models: the config must not drift.
    assert SCALES["ci"].train_config("rope", 0) == TrainConfig(
        model=SCALES["ci"].train_config("rope", 0).model, seq_len=128, batch_size=32, steps=300, lr=5e-3,
        warmup_steps=30, seed=0)
    assert SCALES["ci"].corpus == "austen"


@pytest.mark.parametrize("name", ["book", "gpu"])
def test_larger_scales_use_the_second_corpus_and_reach_16x(name: str) -> None:
    scale = get_scale(name)
    assert scale.train_config("alibi").corpus == "sotu"
    assert max(scale.eval_lengths) >= 16 * scale.seq_len and len(scale.seeds) >= 3


def test_errors() -> None:
    with pytest.raises(ValueError, match="unknown scale"):
        get_scale("huge")
    with pytest.raises(ValueError, match="sliding_divisor must be >= 1"):
        Scale("x", 32, 1, 2, 32, 8, 10, 1e-3, 1, (32,), 64, sliding_divisor=0)


def test_describe_scale_lists_the_settings_under_display_names() -> None:
    from posenc_lib import TransformerLM, describe_scale, load_corpus
    from posenc_lib.training.scales import SCALE_FIELDS

    ci = get_scale("ci")
    row = describe_scale("ci")
    assert list(row)[: len(SCALE_FIELDS)] == list(SCALE_FIELDS)
    assert row["L_train (bytes)"] == ci.seq_len and row["corpus"] == ci.corpus
    assert row["test bytes per evaluation"] == (ci.sweep_eval_tokens or ci.eval_tokens)
    assert row["parameters (RoPE model)"] == TransformerLM(ci.train_config("rope").model).num_parameters()
    assert row["training split (bytes)"] == load_corpus(ci.corpus).train.numel()
    with pytest.raises(ValueError, match="unknown scale"):
        describe_scale("huge")
