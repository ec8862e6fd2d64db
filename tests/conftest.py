"""Shared fixtures: every test starts from a fixed seed."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
