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
