"""train_cached trains once, then loads an identical model; the key follows the configuration."""

import torch

from posenc_lib import ModelConfig, TrainConfig, train_cached
from posenc_lib.cache import cache_key

TINY = TrainConfig(model=ModelConfig(position="alibi", d_model=32, num_layers=1, num_heads=2), seq_len=32, batch_size=4, steps=3)


def test_second_call_loads_the_same_model(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    model_a, rec_a = train_cached(TINY, progress=False)
    files = sorted(p.name for p in tmp_path.glob("*.pt"))
    assert len(files) == 1 and files[0].startswith("alibi-")
    mtime = (tmp_path / files[0]).stat().st_mtime_ns
    model_b, rec_b = train_cached(TINY, progress=False)
    assert (tmp_path / files[0]).stat().st_mtime_ns == mtime  # not retrained, not rewritten
    assert rec_a.losses == rec_b.losses
    tokens = torch.randint(0, 256, (1, 20))
    assert torch.equal(model_a(tokens), model_b(tokens))


def test_key_changes_with_config_and_device() -> None:
    other = TrainConfig(model=TINY.model, seq_len=32, batch_size=4, steps=4)
    assert cache_key(TINY, "cpu") != cache_key(other, "cpu")
    assert cache_key(TINY, "cpu") != cache_key(TINY, "cuda")
    assert cache_key(TINY, "cpu") == cache_key(TINY, "cpu")
