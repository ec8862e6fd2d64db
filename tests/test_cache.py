"""train_cached trains once, then loads an identical model; the key follows the configuration."""

from pathlib import Path

import torch

from posenc_lib import ModelConfig, TrainConfig, train_cached
from posenc_lib.training.store import cache_key

TINY = TrainConfig(model=ModelConfig(position="alibi", d_model=32, num_layers=1, num_heads=2), seq_len=32, batch_size=4,
                   steps=3)


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


# Fine-tuned models (chapter 11): their key covers the base and every fine-tune setting.
ROPE_TINY = TrainConfig(
    model=ModelConfig(position="rope", d_model=32, num_layers=1, num_heads=2),
    seq_len=32, batch_size=4, steps=3,
)


def test_fine_tune_cached_trains_once_and_keys_on_every_setting(tmp_path,
                                                                monkeypatch) -> None:
    from posenc_lib import FineTuneConfig, fine_tune_cached
    from posenc_lib.training.store import fine_tune_cache_key

    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    yarn = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32}
    config = FineTuneConfig(base=ROPE_TINY, seq_len=64, steps=2, batch_size=2, lr=1e-3,
                            rope_scaling=yarn)
    model_a, rec_a = fine_tune_cached(config, progress=False)
    names = sorted(p.name for p in tmp_path.glob("*.pt"))
    assert len(names) == 2 and names[0].startswith("finetune-rope-")  # base + fine-tune
    mtimes = {name: (tmp_path / name).stat().st_mtime_ns for name in names}
    model_b, rec_b = fine_tune_cached(config, progress=False)
    assert {name: (tmp_path / name).stat().st_mtime_ns for name in names} == mtimes  # loaded
    assert rec_a.losses == rec_b.losses and len(rec_a.losses) == 2
    tokens = torch.randint(0, 256, (1, 40))
    assert torch.equal(model_a(tokens), model_b(tokens))
    assert model_b.config.rope_scaling["rope_type"] == "yarn"
    for change in ({"steps": 3}, {"lr": 2e-3}, {"seq_len": 96}, {"rope_scaling": None}):
        other = FineTuneConfig(**{**config.__dict__, **change})
        assert fine_tune_cache_key(other, "cpu") != fine_tune_cache_key(config, "cpu")
    other_base = FineTuneConfig(**{**config.__dict__, "base": TrainConfig(
        model=ROPE_TINY.model, seq_len=32, batch_size=4, steps=4)})
    assert fine_tune_cache_key(other_base, "cpu") != fine_tune_cache_key(config, "cpu")


KEYS_SCRIPT = """
import json
from posenc_lib import FineTuneConfig, ModelConfig, TrainConfig
from posenc_lib.training.store import (cache_key, fine_tune_cache_key, passkey_mix_cache_key,
                                      recall_mix_cache_key)
from posenc_lib.tasks.recall import RecallConfig, RecallMixConfig, RecallStage
from posenc_lib.tasks.retrieval import PasskeyMixConfig
rope = TrainConfig(model=ModelConfig(position="rope", d_model=32, num_layers=1, num_heads=2),
                   seq_len=32, batch_size=4, steps=3)
print(json.dumps([cache_key(rope, "cpu"), passkey_mix_cache_key(PasskeyMixConfig(rope, 0.25),
                  "cpu"), fine_tune_cache_key(FineTuneConfig(rope, 64, 2, 2, 1e-3), "cpu"),
                  recall_mix_cache_key(RecallMixConfig(rope, (RecallStage(RecallConfig(num_keys=1), 3),)),
                                       "cpu")]))
"""


def _keys_of_library_at(root: Path) -> list[str]:
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(root)}
    run = subprocess.run([sys.executable, "-c", KEYS_SCRIPT], env=env, cwd=root,
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def test_a_comment_or_docstring_edit_leaves_every_key_unchanged(tmp_path) -> None:
    """The library copied, then a comment and a docstring line added to every module that
    builds or trains a model: the four kinds of key stay the same."""
    import shutil

    import posenc_lib

    source = Path(posenc_lib.__file__).parent
    shutil.copytree(source, tmp_path / "posenc_lib",
                    ignore=shutil.ignore_patterns("__pycache__", "corpora"))
    (tmp_path / "posenc_lib" / "corpora").symlink_to(source / "corpora")
    before = _keys_of_library_at(tmp_path)
    for module in (tmp_path / "posenc_lib").rglob("*.py"):
        text = module.read_text()
        module.write_text(text.replace('"""', '"""An edited docstring. ', 1)
                          + "\n# an edited comment\n")
    assert _keys_of_library_at(tmp_path) == before
    assert len(set(before)) == 4


def test_key_follows_the_config_the_corpus_and_the_training_version(monkeypatch) -> None:
    from posenc_lib.training import store as cache

    key = cache_key(TINY, "cpu")
    assert cache_key(TrainConfig(**{**TINY.__dict__, "seed": 1}), "cpu") != key
    assert cache_key(TrainConfig(**{**TINY.__dict__, "corpus": "sotu"}), "cpu") != key
    monkeypatch.setattr(cache, "TRAINING_VERSION", cache.TRAINING_VERSION + 1)
    assert cache_key(TINY, "cpu") != key
    monkeypatch.undo()
    monkeypatch.setattr(cache, "corpus_digest", lambda name: "the same name, other bytes")
    assert cache_key(TINY, "cpu") != key
    monkeypatch.undo()


def test_recall_mix_key_follows_the_curriculum() -> None:
    from posenc_lib.tasks.recall import RecallConfig, RecallMixConfig, RecallStage
    from posenc_lib.training.store import recall_mix_cache_key

    base = TrainConfig(**{**TINY.__dict__, "seq_len": 64, "steps": 4})
    one = (RecallStage(RecallConfig(num_keys=1), 4),)
    two = (RecallStage(RecallConfig(num_keys=1), 2), RecallStage(RecallConfig(num_keys=2, distractors=1), 2))
    key = recall_mix_cache_key(RecallMixConfig(base, one), "cpu")
    assert recall_mix_cache_key(RecallMixConfig(base, one), "cpu") == key
    assert recall_mix_cache_key(RecallMixConfig(base, two), "cpu") != key
    assert recall_mix_cache_key(RecallMixConfig(base, one, repeat_fraction=0.0), "cpu") != key


def test_corpus_digest_identifies_the_shipped_files() -> None:
    from posenc_lib.training.store import corpus_digest

    assert len({corpus_digest("austen"), corpus_digest("sotu")}) == 2
    assert corpus_digest("austen") == corpus_digest("austen")
    import pytest

    with pytest.raises(ValueError, match="'nope'"):
        corpus_digest("nope")
