"""The book's benchmark suite: what each positional encoding costs, measured side by
side.

Run from the repository root (CPU or CUDA, nothing to change)::

    python -m tools.benchmarks all            # RoPE, attention per scheme, the model
    python -m tools.benchmarks rope --quick   # one suite, fewer sizes and repeats

Each suite prints a table and writes a JSON file under ``results/benchmarks/`` (a new
file per run, never overwritten) holding the rows, the configuration and where it ran:
device, torch version, threads, CPU model, load average before and after, date, git
commit. Every comparison is made within one run with interleaved repeats
(:func:`posenc_lib.measure.compare`): on a shared machine ratios hold, absolute times
do not. See ``tools/benchmarks/README.md``.
"""
