"""pick_device: CUDA, else MPS, else CPU — and $POSENC_DEVICE overrides it (the tests use cpu)."""

import pytest
import torch

from posenc_lib import device_name, pick_device


def test_override(monkeypatch) -> None:
    monkeypatch.setenv("POSENC_DEVICE", "cpu")
    assert pick_device() == torch.device("cpu")
    assert device_name(pick_device()) == "cpu"


def test_bad_override(monkeypatch) -> None:
    monkeypatch.setenv("POSENC_DEVICE", "abacus")
    with pytest.raises(ValueError, match="POSENC_DEVICE"):
        pick_device()


def test_default_is_a_device(monkeypatch) -> None:
    monkeypatch.delenv("POSENC_DEVICE", raising=False)
    assert pick_device().type in ("cpu", "cuda", "mps")
