"""RoPE application: the library's cache-blocked kernel (:mod:`posenc_lib.encodings.rope_kernel`,
the model's path) against other ways to write it, and against the machine's memory bandwidth.

An elementwise operation is limited by memory bandwidth: its floor is the time to read
its inputs and write its output once. So each variant's time is turned into achieved
bandwidth, ``rope_bytes`` (read x, write the result, read the cos/sin tables) per
second, and divided by the machine's achievable bandwidth measured in the same run and
in the same rounds: a copy of 64 MiB of float32 into a tensor that already exists
(``BANDWIDTH``), with a STREAM-style triad ``a = b + s·c`` on three such tensors beside
it. Both are larger than the caches of the machine the book ran on (32 MiB L3). A copy
into a *new* tensor (``x.clone()``) is timed too: it also pays for fresh memory, and
``page_faults`` counts the minor page faults one call causes. The deterministic count
of what each eager variant does (operations, tensors allocated, bytes read and written
if nothing stayed in a cache) comes from :func:`posenc_lib.measure.memory_traffic`.
"""

from __future__ import annotations

import resource
from collections.abc import Callable

import torch

from tools.benchmarks.common import DTYPES, Rounds, timing_columns
from posenc_lib.measure import RopeVariant, memory_traffic, rope_bytes
from posenc_lib.encodings import rope_kernel
from posenc_lib.encodings.rope import RotaryEmbedding, rope_complex, rope_rotate_half_naive
from posenc_lib.encodings.rope_kernel import apply_rope_blocked, rotate_passes

SHAPES = {
    "large": (1, 32, 4096, 128),  # one layer of a 7B-class model at 4096 positions
    "small": (32, 4, 128, 24),  # the book model's queries in training (scale "book")
}
STREAM_NUMEL = 16 * 2**20  # float32 elements of each yardstick tensor: 64 MiB

COPY = RopeVariant.COPY
COPY_INTO = RopeVariant.COPY_INTO
TRIAD = RopeVariant.TRIAD
NAIVE = RopeVariant.NAIVE
BEFORE = RopeVariant.BEFORE
PASSES = RopeVariant.PASSES
LIBRARY = RopeVariant.LIBRARY
LIBRARY_OUT = RopeVariant.LIBRARY_OUT
LIBRARY_IN_PLACE = RopeVariant.LIBRARY_IN_PLACE
IN_CACHE = RopeVariant.IN_CACHE
MODULE = RopeVariant.MODULE
MODULE_POSITIONS = RopeVariant.MODULE_POSITIONS
COMPLEX = RopeVariant.COMPLEX
COMPLEX_OUT = RopeVariant.COMPLEX_OUT
COMPILED_INTO = RopeVariant.COMPILED_INTO
COMPILED_NAIVE = RopeVariant.COMPILED_NAIVE
YARDSTICKS = (COPY, COPY_INTO, TRIAD)


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


def _four_passes(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The library's kernel as it was at commit bf5fcbc: x upcast as a whole, a new
    float32 result, four passes over all of it, one cast back."""
    x_c = x.float()
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    rotate_passes(x_c, cos, sin, out, False, 1.0)
    return out if out.dtype == x.dtype else out.to(x.dtype)


def _fused(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    """Rotate-half as one expression written into ``out``: a compiler may make it one
    loop that reads x once and writes out once."""
    half = x.shape[-1] // 2
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    rotated = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    return out.copy_(rotated)


def _in_cache(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> Callable[[], None]:
    """The library's blocked loop without its memory traffic: the four passes (with the
    up- and down-casts of bfloat16) on one block of x that stays in the cache, run as
    many times as x has blocks. Its time is what the arithmetic and the calls cost."""
    d = x.shape[-1]
    rows = max(1, rope_kernel.BLOCK_BYTES * torch.get_num_threads() // (d * 4))
    flat = x.reshape(-1, x.shape[-2], d)
    seq = x.shape[-2]
    if seq >= rows:
        block, c, s = flat[0, :rows], cos[:rows], sin[:rows]
    else:
        block, c, s = flat[: max(1, rows // seq)], cos, sin
    repeats = -(-x.numel() // block.numel())  # ceil
    block = block.clone()
    result = torch.empty(block.shape, dtype=torch.float32, device=x.device)
    final = torch.empty_like(block)
    source = block if block.dtype == torch.float32 else torch.empty_like(result)

    def call() -> None:
        for _ in range(repeats):
            if source is not block:
                source.copy_(block)
            rotate_passes(source, c, s, result, False, 1.0)
            if final.dtype != torch.float32:
                final.copy_(result)

    return call


def _minor_faults(fn: Callable[[], object]) -> int:
    """Minor page faults of the process during one call of ``fn`` (fresh memory is
    mapped page by page the first time it is written)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _variants(
    x: torch.Tensor, compile_kernel: bool, large: bool
) -> dict[str, Callable[[], object]]:
    """The calls to compare for one input ``x`` ``[batch, heads, seq, head_dim]``."""
    seq, head_dim = x.shape[-2], x.shape[-1]
    positions = torch.arange(seq, device=x.device)
    rope = RotaryEmbedding(head_dim)
    rope(x[..., :1, :], positions[-1:])  # fill the module's cos/sin cache before timing
    cos, sin = (table[:seq] for table in rope.cache)  # (seq, d/2) float32
    # the tutorial form keeps full-width tables in x's dtype (as Hugging Face's Llama)
    cos_full = torch.cat([cos, cos], dim=-1).to(x.dtype)
    sin_full = torch.cat([sin, sin], dim=-1).to(x.dtype)
    rotations = torch.polar(torch.ones_like(cos), torch.atan2(sin, cos))  # e^{i p θ}
    if x.dtype == torch.float32:

        def complex_form() -> torch.Tensor:
            return rope_complex(x, rotations)

        complex_out = torch.empty_like(x)

        def complex_into() -> torch.Tensor:  # one pass: read x, write an existing tensor
            pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
            target = torch.view_as_complex(complex_out.unflatten(-1, (-1, 2)))
            return torch.mul(pairs, rotations, out=target)

    else:  # view_as_complex needs float32: upcast and cast back (Meta's Llama code too)

        def complex_form() -> torch.Tensor:
            return rope_complex(x.float(), rotations).to(x.dtype)

    generator = torch.Generator().manual_seed(1)
    a = torch.empty(STREAM_NUMEL, device=x.device)
    b, c = (
        torch.randn(STREAM_NUMEL, generator=generator).to(x.device) for _ in range(2)
    )
    target = torch.empty_like(b)
    buffer, rotated_in_place = torch.empty_like(x), x.clone()
    variants = {
        COPY: lambda: x.clone(),
        COPY_INTO: lambda: target.copy_(b),
        TRIAD: lambda: torch.add(b, c, alpha=3.0, out=a),
        NAIVE: lambda: rope_rotate_half_naive(x, cos_full, sin_full),
        BEFORE: lambda: _rotate_before(x, cos, sin),
        PASSES: lambda: _four_passes(x, cos, sin),
        # the kernel (rope_kernel); the names are those of the stored runs
        LIBRARY: lambda: apply_rope_blocked(x, positions),
        LIBRARY_OUT: lambda: apply_rope_blocked(x, positions, out=buffer),
        LIBRARY_IN_PLACE: lambda: apply_rope_blocked(
            rotated_in_place, positions, out=rotated_in_place
        ),
        IN_CACHE: _in_cache(x, cos, sin),
        MODULE: lambda: rope(x),  # default positions 0 … seq − 1, as the model calls it
        MODULE_POSITIONS: lambda: rope(x, positions),  # a lookup per call
        COMPLEX: complex_form,
    }
    if x.dtype == torch.float32:
        variants[COMPLEX_OUT] = complex_into
    if compile_kernel and large:
        torch._dynamo.reset()  # a fresh compilation for every case, not a recompilation
        for name, fn, args in (
            (COMPILED_INTO, _fused, (x, cos, sin, buffer)),
            (COMPILED_NAIVE, rope_rotate_half_naive, (x, cos_full, sin_full)),
        ):
            compiled = torch.compile(fn)
            try:
                compiled(*args)  # compile now, not in the timed rounds
            except Exception as error:  # noqa: BLE001 - report, go on with the others
                print(
                    f"torch.compile failed for {tuple(x.shape)} {x.dtype}: "
                    f"{type(error).__name__}"
                )
            else:
                variants[name] = lambda compiled=compiled, args=args: compiled(*args)
    return variants


def run(rounds: Rounds, *, compile_kernel: bool) -> tuple[dict, list[dict]]:
    """Every variant at every (shape, dtype); returns (configuration, rows)."""
    shapes = {"small": SHAPES["small"]} if rounds.quick else SHAPES
    cases = [(name, shape, dtype) for name, shape in shapes.items() for dtype in DTYPES]
    config = {
        "shapes": {name: list(shape) for name, shape in shapes.items()},
        "dtypes": list(DTYPES),
        **rounds.config(),
        "compile": compile_kernel,
        "compiled_shapes": ["large"] if compile_kernel else [],
        "bytes_model": "read x, write result, read cos and sin [seq, d/2] float32",
        "bandwidth": "copy of 64 MiB float32 into an existing tensor, same rounds",
        "block_bytes_per_thread": rope_kernel.BLOCK_BYTES,
        "blocked_from_bytes": rope_kernel.BLOCKED_FROM,
        "threads": torch.get_num_threads(),
    }
    rows = []
    stream_bytes = STREAM_NUMEL * 4
    for name, shape, dtype_name in rounds.cases(cases, desc="rope"):
        dtype = DTYPES[dtype_name]
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(
            rounds.device, dtype
        )
        variants = _variants(x, compile_kernel, name == "large")
        timings = rounds.compare(variants)
        x_bytes = x.numel() * x.element_size()
        needed = rope_bytes(tuple(shape), dtype)
        bandwidth = 2 * stream_bytes / timings[COPY_INTO].median  # bytes/s, this run
        naive_time = timings[NAIVE].median
        moved_by = {COPY: 2 * x_bytes, COPY_INTO: 2 * stream_bytes, TRIAD: 3 * stream_bytes}
        for variant, timing in timings.items():
            moved = moved_by.get(variant, needed)
            rate = moved / timing.median
            row = {
                "shape_name": name,
                "shape": list(shape),
                "dtype": dtype_name,
                "variant": variant,
                **timing_columns(timing),
                "bytes_needed": moved,
                "gb_per_s": rate / 1e9,
                "fraction_of_bandwidth": rate / bandwidth,
                "speedup_over_naive": naive_time / timing.median,
                "page_faults": _minor_faults(variants[variant]),
            }
            if variant not in (COMPILED_INTO, COMPILED_NAIVE):
                # a dispatch mode sees eager operations only
                traffic = memory_traffic(variants[variant])
                row.update(
                    operations=sum(traffic.operations.values()),
                    allocations=traffic.allocations,
                    bytes_allocated=traffic.bytes_allocated,
                    bytes_moved_model=traffic.bytes_moved,
                )
            rows.append(row)
        del x, variants  # collected before the next case
    return config, rows


COLUMNS = (
    "shape_name",
    "dtype",
    "variant",
    "median_ms",
    "q1_ms",
    "q3_ms",
    "gb_per_s",
    "fraction_of_bandwidth",
    "speedup_over_naive",
    "page_faults",
    "allocations",
)
