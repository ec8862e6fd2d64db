"""Train once, reuse everywhere: a file cache of trained models keyed by what determines them.

Several chapters study the same trained models. :func:`train_cached` trains a model the first
time a configuration is asked for and loads it afterwards. The key hashes what decides the
model's numbers: its configuration (architecture, training recipe, seed), the device type, the
identity of the corpus it reads (the SHA-256 of its files), and :data:`TRAINING_VERSION`.
The library's source is not part of the key, so a docstring, a comment or a moved function
never retrains a model. Writes are atomic and guarded by a file lock, so two notebooks run in
parallel (pytest-xdist) train a shared model once, not twice.

The cache lives in ``$POSENC_CACHE_DIR`` if set, else ``~/.cache/posenc_lib``.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from posenc_lib.records import write_atomic
from posenc_lib.model.transformer import TransformerLM
from posenc_lib.training.train import FineTuneConfig, TrainConfig, TrainRecord, fine_tune, train

if TYPE_CHECKING:
    from posenc_lib.tasks.recall import RecallMixConfig
    from posenc_lib.tasks.retrieval import PasskeyMixConfig

TRAINING_VERSION = 1
"""Bump when a change to the code alters the numbers a configuration trains to: the model's
arithmetic (encodings, attention, initialisation), the training loop, the batches, the
passkey windows. Every cached model is then retrained. A forgotten bump does not pass
unnoticed: the chapters' stored outputs come from freshly trained models in CI (an empty
cache), so strict nbval fails where a reader's stale cache would have disagreed."""


@functools.cache
def corpus_digest(name: str) -> str:
    """SHA-256 over the files of the corpus ``name`` shipped in ``posenc_lib/corpora``
    (names and bytes, in name order): the identity of a model's training data.

    Raises:
        ValueError: for a corpus with no folder in ``posenc_lib/corpora``.
    """
    folder = resources.files("posenc_lib").joinpath("corpora", name)
    if not folder.is_dir():
        raise ValueError(f"corpus {name!r} has no folder in posenc_lib/corpora")
    digest = hashlib.sha256()
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.is_file():
            digest.update(entry.name.encode() + b"\0" + entry.read_bytes())
    return digest.hexdigest()


def cache_dir() -> Path:
    """Where trained models are kept (created if missing)."""
    path = Path(os.environ.get("POSENC_CACHE_DIR", Path.home() / ".cache" / "posenc_lib"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _hash_key(content: dict, corpus: str) -> str:
    """16 hex digits of SHA-256 over ``content``, the corpus' identity and
    :data:`TRAINING_VERSION`."""
    payload = json.dumps({**content, "data": corpus_digest(corpus),
                          "training_version": TRAINING_VERSION}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def cache_key(config: TrainConfig, device: torch.device | str) -> str:
    """A hex key for (configuration, device type, corpus, training version)."""
    return _hash_key({"config": config.to_dict(), "device": torch.device(device).type},
                     config.corpus)


def cached_model_path(config: TrainConfig, device: torch.device | str = "cpu") -> Path:
    """The file that holds (or will hold) the model trained from ``config`` on ``device``'s type."""
    return cache_dir() / f"{config.model.position}-{cache_key(config, device)}.pt"


def _load_or_run(path: Path, config: TrainConfig | FineTuneConfig | PasskeyMixConfig | RecallMixConfig,
                 device: torch.device,
                 run: Callable[[], tuple[TransformerLM, TrainRecord]]) -> tuple[TransformerLM, TrainRecord]:
    """Load the ``(model, record)`` stored at ``path``, or make it with ``run()`` and store it.

    The file lock makes a second process wait while the first trains, then load its result,
    so a model shared by notebooks run in parallel (pytest-xdist) is trained once.
    """
    with open(path.parent / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            saved = torch.load(path, map_location=device, weights_only=True)
            model = TransformerLM(config.model).to(device)
            model.load_state_dict(saved["state_dict"])
            model.eval()
            return model, TrainRecord(**json.loads(saved["record"]))
        model, record = run()
        payload = {
            "state_dict": model.state_dict(),
            "config": json.dumps(config.to_dict()),
            "record": json.dumps(record.to_dict()),
        }
        write_atomic(path, lambda file: torch.save(payload, file))  # a reader sees the whole file or none
        return model, record


def train_cached(config: TrainConfig, device: torch.device | str = "cpu", *,
                 progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Return the model trained from ``config`` on ``device``'s type, training it only if no
    cached copy exists.

    Returns:
        ``(model, record)`` exactly as :func:`~posenc_lib.training.train.train` returned them when the
        model was first trained; the model is in eval mode on ``device``.
    """
    device = torch.device(device)
    return _load_or_run(cached_model_path(config, device), config, device,
                        lambda: train(config, device, progress=progress))


def fine_tune_cache_key(config: FineTuneConfig, device: torch.device | str) -> str:
    """A hex key for (fine-tune config with its base, device type, corpus, training
    version)."""
    return _hash_key({"fine_tune": config.to_dict(), "device": torch.device(device).type},
                     config.base.corpus)


def fine_tune_cached(config: FineTuneConfig, device: torch.device | str = "cpu", *,
                     progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Return the model fine-tuned from ``config``, fine-tuning only if no cached copy
    exists (its base comes from :func:`train_cached`). The key covers the base
    configuration and every fine-tuning setting, so two fine-tunes never share a file.

    Returns:
        ``(model, record)``: the record is the fine-tuning run's; the model is in eval
        mode.
    """
    device = torch.device(device)
    key = fine_tune_cache_key(config, device)
    path = cache_dir() / f"finetune-{config.base.model.position}-{key}.pt"

    def run() -> tuple[TransformerLM, TrainRecord]:
        base, _ = train_cached(config.base, device, progress=progress)
        return fine_tune(base, config, device, progress=progress)

    return _load_or_run(path, config, device, run)


def _mix_key(kind: str, config: PasskeyMixConfig | RecallMixConfig, device: torch.device | str) -> str:
    return _hash_key({kind: config.to_dict(), "device": torch.device(device).type}, config.base.corpus)


def _mix_cached(kind: str, prefix: str, config: PasskeyMixConfig | RecallMixConfig,
                device: torch.device | str,
                run: Callable[[torch.device], tuple[TransformerLM, TrainRecord]]
                ) -> tuple[TransformerLM, TrainRecord]:
    """The model of a mixture run, from ``PREFIX-POSITION-KEY.pt`` or made by ``run(device)``."""
    device = torch.device(device)
    path = cache_dir() / f"{prefix}-{config.model.position}-{_mix_key(kind, config, device)}.pt"
    return _load_or_run(path, config, device, lambda: run(device))


def passkey_mix_cache_key(config: PasskeyMixConfig, device: torch.device | str) -> str:
    """A hex key for (passkey-mixture config, device type, corpus, training version)."""
    return _mix_key("passkey_mix", config, device)


def passkey_mix_cached(config: PasskeyMixConfig, device: torch.device | str = "cpu", *,
                       progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Return the model trained on the text / passkey mixture of ``config``
    (:func:`~posenc_lib.tasks.retrieval.train_passkey_mix`), training only if no cached copy
    exists.

    Returns:
        ``(model, record)``; the model is in eval mode.
    """
    from posenc_lib.tasks.retrieval import train_passkey_mix  # retrieval imports train, not cache

    return _mix_cached("passkey_mix", "passkey", config, device,
                       lambda on: train_passkey_mix(config, on, progress=progress))


def recall_mix_cache_key(config: RecallMixConfig, device: torch.device | str) -> str:
    """A hex key for (recall-mixture config with its curriculum, device type, corpus,
    training version)."""
    return _mix_key("recall_mix", config, device)


def recall_mix_cached(config: RecallMixConfig, device: torch.device | str = "cpu", *,
                      progress: bool = True) -> tuple[TransformerLM, TrainRecord]:
    """Return the model trained on the text / recall / repeat mixture of ``config``
    (:func:`~posenc_lib.tasks.recall.train_recall_mix`), training only if no cached copy
    exists.

    Returns:
        ``(model, record)``; the model is in eval mode.
    """
    from posenc_lib.tasks.recall import train_recall_mix  # recall imports train, not the store

    return _mix_cached("recall_mix", "recall", config, device,
                       lambda on: train_recall_mix(config, on, progress=progress))
