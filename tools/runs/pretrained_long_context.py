"""The SmolLM2 runs added for issue 24 (chapter 11), one after another on 2 threads.

Each job is what ``python tools/runs/long_context.py run`` does for one (text, κ, out),
through the same library call (:func:`posenc_lib.pretrained.long_context.run_long_context`),
except that the model is loaded once and reused by every job (the command line loads
it once per call), and each job's provenance keeps the commit and clean/dirty state
taken when this script started: the library code that runs is the code imported then.

    PYTHONPATH=. OMP_NUM_THREADS=2 python tools/runs/pretrained_long_context.py

Jobs (every one at 16 384 tokens, blocks of 2048, float32):

1. Persuasion, dynamic NTK at factor 1 (κ = 2 at 16 384 tokens, the others' stretch);
2. Northanger Abbey (a second text): none, yarn (κ = 2);
3. Northanger Abbey: dynamic NTK at factor 1;
4. Northanger Abbey: linear, llama3 (κ = 2);
5. Northanger Abbey: dynamic NTK at factor 2 (as Persuasion's stored run).
"""

import sys
import time
from pathlib import Path

import torch

import posenc_lib.pretrained.long_context as lc

OUT = Path(__file__).resolve().parents[2] / "results" / "pretrained"
JOBS = [
    ("persuasion", ["dynamic"], 1.0, "smollm2-persuasion-16384-dynamic-factor1"),
    ("northangerabbey", ["none", "yarn"], 2.0, "smollm2-northangerabbey-16384"),
    ("northangerabbey", ["dynamic"], 1.0,
     "smollm2-northangerabbey-16384-dynamic-factor1"),
    ("northangerabbey", ["linear", "llama3"], 2.0, "smollm2-northangerabbey-16384"),
    ("northangerabbey", ["dynamic"], 2.0, "smollm2-northangerabbey-16384"),
]


def main() -> int:
    torch.set_num_threads(2)
    device = torch.device("cpu")
    started = lc.provenance(device)
    keep = {k: started[k] for k in ("git_commit", "git_dirty")}
    fresh = lc.provenance
    lc.provenance = lambda dev: {**fresh(dev), **keep}
    loaded: dict = {}
    load = lc.load_pretrained

    def load_once(**kwargs):
        key = (str(kwargs.get("device")), str(kwargs.get("dtype")))
        if key not in loaded:
            loaded[key] = load(**kwargs)
        return loaded[key]

    lc.load_pretrained = load_once
    for book, methods, factor, name in JOBS:
        start = time.perf_counter()
        runs = lc.plan(methods, 16384, 2048, factor, book, "float32")
        results = lc.run_long_context(runs, OUT / name, device=device, progress=False)
        print(f"{name} {methods} factor {factor}: "
              f"{time.perf_counter() - start:.0f} s", flush=True)
        print(lc.format_block_table(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
