"""Where to run: the one place that chooses a device."""

from __future__ import annotations

import torch


def pick_device() -> torch.device:
    """CUDA if available, else Apple's MPS, else the CPU.

    Returns:
        A :class:`torch.device`.
    """
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
