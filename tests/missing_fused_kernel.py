"""Make PyTorch's fused CPU attention kernels refuse bfloat16, as some CPUs do.

On an Intel CPU with AMX, torch 2.13 under ``ATEN_CPU_CAPABILITY=default`` (or ``avx2``) raises
"pack_vnni2 is only supported when avx512 is supported" from the fused (flash) kernel of
``scaled_dot_product_attention`` in bfloat16: oneDNN reports AMX, so the kernel takes its
packed bfloat16 path (added in pytorch/pytorch PR #138783), whose packing routine exists
only in the AVX-512 build of the kernels. No public PyTorch report of the error under a
forced capability was found (searched 2026-12-03).

Importing this module reproduces that on any machine: every SDPA call in bfloat16 on the CPU
raises the same ``RuntimeError`` while the fused kernels are allowed, and runs as before when
a caller has selected the math backend (``sdpa_kernel(SDPBackend.MATH)``), which every build
has. ``tests/test_missing_kernel.py`` installs it as an IPython startup file, so a notebook
kernel imports it before the chapter's first cell.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

MESSAGE = "pack_vnni2 is only supported when avx512 is supported (simulated: the tests)"
_fused_or_math = F.scaled_dot_product_attention


def sdpa_without_fused_bfloat16(query, key, value, *args, **kwargs):
    """``scaled_dot_product_attention``, refusing bfloat16 on the CPU unless the caller
    selected the math backend, as the fused kernel does on the CPUs described above."""
    fused_allowed = torch.backends.cuda.flash_sdp_enabled()  # the CPU's fused kernel too
    if query.dtype == torch.bfloat16 and query.device.type == "cpu" and fused_allowed:
        raise RuntimeError(MESSAGE)
    return _fused_or_math(query, key, value, *args, **kwargs)


def install() -> None:
    """Replace ``torch.nn.functional.scaled_dot_product_attention`` for this process."""
    F.scaled_dot_product_attention = sdpa_without_fused_bfloat16


def uninstall() -> None:
    F.scaled_dot_product_attention = _fused_or_math
