"""Stored outputs that must not depend on which fused kernels a CPU has.

Chapter 13 compares ALiBi's float mask with ALiBi folded into the keys, in float32 and in
bfloat16. Some CPUs lack the fused kernel's bfloat16 path (``missing_fused_kernel.py`` says
which and why); the chapter selects SDPA's math backend, which every build has, so that its
table is the same everywhere. Here the missing kernel is simulated on this machine, and the
chapter is verified by nbval (strict) with it missing.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from posenc_lib import alibi_bias, attend
from posenc_lib.measure import alibi_attention_folded_keys

ROOT = Path(__file__).resolve().parents[1]
HELPER = Path(__file__).with_name("missing_fused_kernel.py")
CHAPTER = ROOT / "notebooks" / "13_cost.ipynb"

_spec = importlib.util.spec_from_file_location("missing_fused_kernel", HELPER)
missing_fused_kernel = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(missing_fused_kernel)


def _inputs(length: int = 256, dtype: torch.dtype = torch.bfloat16):
    generators = [torch.Generator().manual_seed(i) for i in range(3)]
    return [torch.randn(1, 4, length, 24, generator=g).to(dtype) for g in generators]


@pytest.fixture
def fused_bfloat16_missing():
    missing_fused_kernel.install()
    yield
    missing_fused_kernel.uninstall()


def test_the_simulation_refuses_what_the_missing_kernel_refuses(fused_bfloat16_missing) -> None:
    """bfloat16 through the fused path raises, as on the CPUs that lack it; float32, and
    bfloat16 with the math backend selected, run."""
    q, k, v = _inputs()
    with pytest.raises(RuntimeError, match="pack_vnni2"):
        alibi_attention_folded_keys(q, k, v)
    with pytest.raises(RuntimeError, match="pack_vnni2"):
        attend(q, k, v, alibi_bias(4, 256, 256))
    attend(q.float(), k.float(), v.float(), alibi_bias(4, 256, 256))
    with sdpa_kernel(SDPBackend.MATH):
        assert alibi_attention_folded_keys(q, k, v).dtype == torch.bfloat16
        assert attend(q, k, v, alibi_bias(4, 256, 256)).dtype == torch.bfloat16


def test_the_math_backend_gives_the_fused_kernels_bfloat16_errors() -> None:
    """Where the fused kernel runs (this machine), selecting the math backend changes
    neither bfloat16 error at the two digits chapter 13 prints: both upcast to float32."""
    length = 2048
    q, k, v = _inputs(length, torch.float32)
    reference = attend(q.double(), k.double(), v.double(),
                       alibi_bias(4, length, length, dtype=torch.float64))
    qb, kb, vb = q.bfloat16(), k.bfloat16(), v.bfloat16()

    def errors() -> tuple[str, str]:
        mask = attend(qb, kb, vb, alibi_bias(4, length, length))
        keys = alibi_attention_folded_keys(qb, kb, vb)
        return tuple(f"{(out.double() - reference).abs().max().item():.2g}"
                     for out in (mask, keys))

    try:
        fused = errors()
    except RuntimeError as failure:  # a CPU that lacks the kernel: nothing to compare
        pytest.skip(f"the fused bfloat16 kernel does not run here: {failure}")
    with sdpa_kernel(SDPBackend.MATH):
        assert errors() == fused == ("0.012", "1.9")


def test_chapter_13_is_unchanged_without_the_fused_bfloat16_kernel(tmp_path) -> None:
    """nbval (strict) over chapter 13 in a kernel whose fused bfloat16 attention raises:
    every stored output is reproduced. The startup file that removes the kernel leaves a
    mark, so the test knows the kernel ran with it."""
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    mark = tmp_path / "installed"
    (startup / "00-missing-fused-kernel.py").write_text(
        "import importlib.util, pathlib\n"
        f"spec = importlib.util.spec_from_file_location('missing_fused_kernel', {str(HELPER)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "module.install()\n"
        f"pathlib.Path({str(mark)!r}).write_text('installed')\n"
    )
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST_", "PYTHONBREAKPOINT"))}
    env.update(IPYTHONDIR=str(tmp_path / "ipython"), POSENC_DEVICE="cpu")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q",
         str(CHAPTER.relative_to(ROOT))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )
    assert mark.read_text() == "installed", "the kernel did not load the startup file"
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
