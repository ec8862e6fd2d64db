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


def test_start_chapter(monkeypatch) -> None:
    """Seed 0 (the same draws as torch.manual_seed(0)), the book's style, the device."""
    import matplotlib.pyplot as plt

    from posenc_book.plotting import FIGURE_DPI
    from posenc_lib import start_chapter

    monkeypatch.setenv("POSENC_DEVICE", "cpu")
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(123)
    plt.rcParams["figure.dpi"] = FIGURE_DPI + 1
    assert start_chapter() == torch.device("cpu")
    assert torch.equal(torch.rand(3), expected)
    assert plt.rcParams["figure.dpi"] == FIGURE_DPI
