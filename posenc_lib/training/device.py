"""Where to run: the one place that chooses a device."""

from __future__ import annotations

import os

import torch


def pick_device() -> torch.device:
    """CUDA if available, else Apple's MPS, else the CPU — unless ``$POSENC_DEVICE`` names one.

    The override exists for the tests: the notebooks' stored outputs were computed on the CPU,
    so the README's test command sets ``POSENC_DEVICE=cpu`` to reproduce them on any machine.

    Returns:
        A :class:`torch.device`.

    Raises:
        ValueError: if ``$POSENC_DEVICE`` is not a device PyTorch knows (e.g. ``"cpu"``, ``"cuda"``).
    """
    override = os.environ.get("POSENC_DEVICE")
    if override:
        try:
            return torch.device(override)
        except RuntimeError as error:
            raise ValueError("POSENC_DEVICE must name a torch device such as 'cpu' or 'cuda', "
                             f"got {override!r}") from error
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def device_name(device: torch.device | str) -> str:
    """A human-readable name: the GPU's model for CUDA, else the device type."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def start_chapter() -> torch.device:
    """What every chapter does first: seed 0, the book's style, and the device to run on.

    Seeds PyTorch's global generator with 0 (:func:`torch.manual_seed`), so a chapter's
    random draws are the same on every run; sets the book's figure and table style
    (:func:`posenc_book.plotting.use_book_style`); and picks the device
    (:func:`pick_device`, which ``$POSENC_DEVICE`` overrides).

    Returns:
        The :class:`torch.device` the chapter runs on.

    Raises:
        ValueError: if ``$POSENC_DEVICE`` is not a device PyTorch knows.
    """
    from posenc_book.plotting import use_book_style

    torch.manual_seed(0)
    use_book_style()
    return pick_device()
