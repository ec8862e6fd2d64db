"""RoPE application: the library's kernel against other ways to write it, and a copy.

An elementwise operation is limited by memory bandwidth: its floor is the time to read
its inputs and write its output once. So each variant's time is turned into achieved
bandwidth, ``rope_bytes`` (read x, write the result, read the cos/sin tables) per
second, and compared with the bandwidth of a plain copy (``x.clone()``: read x, write a
new tensor of x's size) measured in the same run. The deterministic count of what each
eager variant does (operations, tensors allocated, bytes read and written) comes from
:func:`posenc_lib.benchmark.memory_traffic`.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import torch

from benchmarks.common import DTYPES, timing_columns
from posenc_lib.benchmark import (
    compare,
    memory_traffic,
    rope_bytes,
    rope_complex,
    rope_rotate_half_naive,
)
from posenc_lib.encodings.rope import RotaryEmbedding, apply_rope, rotate_pairs
from posenc_lib.progress import progress_bar

SHAPES = {
    "large": (1, 32, 4096, 128),  # one layer of a 7B-class model at 4096 positions
    "small": (32, 4, 128, 24),  # the book model's queries in training (scale "book")
}

NAIVE = "naive rotate-half"
BEFORE = "posenc_lib before (upcast, slices, cat)"
COPY_INTO = "copy into an existing tensor"
LIBRARY = "posenc_lib apply_rope"
MODULE = "posenc_lib RotaryEmbedding (the model's path)"
MODULE_POSITIONS = "posenc_lib RotaryEmbedding, positions given"
COMPLEX = "complex multiply (interleaved)"
COMPILED = "torch.compile(rotate_pairs)"
COMPILED_NAIVE = "torch.compile(naive rotate-half)"
COPY = "copy (x.clone())"


def _rotate_before(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    """The library's rotate-half kernel as it was at commit 039df76, to compare with."""
    compute_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(compute_dtype)
    half = x.shape[-1] // 2
    x1, x2 = xf[..., :half], xf[..., half:]
    cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)
    out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    return out.to(x.dtype)


def _variants(x: torch.Tensor, compile_kernel: bool) -> dict[str, Callable[[], object]]:
    """The calls to compare for one input ``x`` ``[batch, heads, seq, head_dim]``."""
    seq, head_dim = x.shape[-2], x.shape[-1]
    positions = torch.arange(seq, device=x.device)
    rope = RotaryEmbedding(head_dim)
    rope(x[..., :1, :], positions[-1:])  # fill the module's cos/sin cache before timing
    cos, sin = rope._cos[:seq], rope._sin[:seq]  # (seq, d/2) float32
    # the tutorial form keeps full-width tables in x's dtype (as Hugging Face's Llama)
    cos_full = torch.cat([cos, cos], dim=-1).to(x.dtype)
    sin_full = torch.cat([sin, sin], dim=-1).to(x.dtype)
    rotations = torch.polar(torch.ones_like(cos), torch.atan2(sin, cos))  # e^{i p θ}
    if x.dtype == torch.float32:

        def complex_form() -> torch.Tensor:
            return rope_complex(x, rotations)

    else:  # view_as_complex needs float32: upcast and cast back (Meta's Llama code too)

        def complex_form() -> torch.Tensor:
            return rope_complex(x.float(), rotations).to(x.dtype)

    target = torch.empty_like(x)
    variants = {
        COPY: lambda: x.clone(),
        COPY_INTO: lambda: target.copy_(
            x
        ),  # the same bytes, into memory already touched
        NAIVE: lambda: rope_rotate_half_naive(x, cos_full, sin_full),
        BEFORE: lambda: _rotate_before(x, cos, sin),
        LIBRARY: lambda: apply_rope(x, positions),
        MODULE: lambda: rope(
            x
        ),  # default positions 0 … seq − 1, as SelfAttention calls it
        MODULE_POSITIONS: lambda: rope(
            x, positions
        ),  # a lookup per call (padding, offsets)
        COMPLEX: complex_form,
    }
    if compile_kernel:
        torch._dynamo.reset()  # a fresh compilation for every case, not a recompilation
        compiled = torch.compile(rotate_pairs)
        try:
            compiled(
                x, cos, sin, interleaved=False
            )  # compile now, not in the timed rounds
        except (
            Exception
        ) as error:  # noqa: BLE001 - report and go on with the other variants
            print(
                f"torch.compile failed for {tuple(x.shape)} {x.dtype}: "
                f"{type(error).__name__}"
            )
        else:
            variants[COMPILED] = lambda: compiled(x, cos, sin, interleaved=False)
        # the tutorial form compiled: the compiler may fuse its five operations
        compiled_naive = torch.compile(rope_rotate_half_naive)
        try:
            compiled_naive(x, cos_full, sin_full)
        except Exception as error:  # noqa: BLE001
            print(
                f"torch.compile failed for {tuple(x.shape)} {x.dtype}: "
                f"{type(error).__name__}"
            )
        else:
            variants[COMPILED_NAIVE] = lambda: compiled_naive(x, cos_full, sin_full)
    return variants


def run(
    device: torch.device,
    *,
    repeats: int,
    warmup: int,
    quick: bool,
    compile_kernel: bool,
    progress: bool = True,
) -> tuple[dict, list[dict]]:
    """Every variant at every (shape, dtype); returns (configuration, rows)."""
    shapes = {"small": SHAPES["small"]} if quick else SHAPES
    cases = [(name, shape, dtype) for name, shape in shapes.items() for dtype in DTYPES]
    config = {
        "shapes": {name: list(shape) for name, shape in shapes.items()},
        "dtypes": list(DTYPES),
        "repeats": repeats,
        "warmup": warmup,
        "compile": compile_kernel,
        "bytes_model": "read x, write result, read cos and sin [seq, d/2] float32",
    }
    rows = []
    for name, shape, dtype_name in progress_bar(cases, desc="rope", enabled=progress):
        dtype = DTYPES[dtype_name]
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(
            device, dtype
        )
        variants = _variants(x, compile_kernel)
        timings = compare(variants, device, repeats=repeats, warmup=warmup)
        x_bytes = x.numel() * x.element_size()
        needed = rope_bytes(tuple(shape), dtype)
        copy_rate = 2 * x_bytes / timings[COPY].median  # bytes/s of a copy, this run
        naive_time = timings[NAIVE].median
        for variant, timing in timings.items():
            moved = 2 * x_bytes if variant in (COPY, COPY_INTO) else needed
            rate = moved / timing.median
            row = {
                "shape_name": name,
                "shape": list(shape),
                "dtype": dtype_name,
                "variant": variant,
                **timing_columns(timing),
                "bytes_needed": moved,
                "gb_per_s": rate / 1e9,
                "fraction_of_copy": rate / copy_rate,
                "speedup_over_naive": naive_time / timing.median,
            }
            if variant not in (
                COMPILED,
                COMPILED_NAIVE,
            ):  # a dispatch mode sees eager ops only
                traffic = memory_traffic(variants[variant])
                row.update(
                    operations=sum(traffic.operations.values()),
                    allocations=traffic.allocations,
                    bytes_allocated=traffic.bytes_allocated,
                    bytes_moved_model=traffic.bytes_moved,
                )
            rows.append(row)
        del x, variants
        gc.collect()
    return config, rows


COLUMNS = (
    "shape_name",
    "dtype",
    "variant",
    "median_ms",
    "q1_ms",
    "q3_ms",
    "cpu_median_ms",
    "gb_per_s",
    "fraction_of_copy",
    "speedup_over_naive",
    "allocations",
    "bytes_moved_model",
)
