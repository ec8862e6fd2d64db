"""Multi-key recall and variable tracking of SmolLM2-135M-Instruct (Q4_1) at 1k–8k tokens.

Issue 38, item 1: the recall task of ``posenc_lib.tasks.recall`` built with SmolLM2's
tokenizer, inside the model's trained context (8192 tokens), no RoPE scaling. Three tasks,
after RULER (Hsieh et al. 2024; cited, not measured):

* ``1k0d``: one statement, one question (a single needle; the passkey's shape);
* ``4k2d``: four keys, one asked, two near-miss distractors (keys sharing the asked key's
  first three letters) with other values;
* ``1k0dc3``: variable tracking, the asked key reaches its value through a chain of three
  statements (X1 = value, X2 = X1, X3 = X2; X3 asked).

Keys are 4 capital letters, values 6 digits (one token each in SmolLM2's vocabulary),
the wording RULER's "special magic number" (:data:`TEMPLATE`), the text between the
statements *Persuasion* at a seeded random offset. A query is right iff greedy decoding
returns its 6 digits (one forward pass, the answer fed in:
:func:`posenc_lib.pretrained.passkey.score_recall_lm`).

One file per task, ``<out>/smollm2-recall-<task>.json``, written when the task is done; a
task whose file exists is not run again (``posenc_lib.records.ResultFiles``; ``--overwrite``
runs it again). Windows of one (L, depth) are ``sample_recall_windows(seed=0)``: the same
for every run of this script.

    PYTHONPATH=. python tools/runs/pretrained_recall.py --threads 2
"""

from __future__ import annotations

import argparse
import dataclasses
import string
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from posenc_lib.pretrained.loading import SMOLLM2, load_pretrained, model_file, sha256_of, use_posenc_rope
from posenc_lib.pretrained.passkey import score_recall_lm
from posenc_lib.records import ResultFiles, provenance
from posenc_lib.tasks.recall import RecallConfig, RecallTemplate, sample_recall_windows
from posenc_lib.training.data import read_austen_book

OUT = Path(__file__).resolve().parents[2] / "results" / "pretrained" / "smollm2-recall"
TEMPLATE = RecallTemplate(
    needle=" The special magic number for {key} is {value}. ",
    link=" The special magic number for {key} is the same as for {source}. ",
    question=" What is the special magic number for {key}? The special magic number for {key} is ",
    answer="{value}",
)
TASKS = {"1k0d": (1, 0, 1), "4k2d": (4, 2, 1), "1k0dc3": (1, 0, 3)}  # keys, distractors, chain
LENGTHS = (1024, 2048, 4096, 8192)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
BOOK = "persuasion"
SEED = 0
DIGITS = 6


def task_config(code: str) -> RecallConfig:
    keys, distractors, chain = TASKS[code]
    return RecallConfig(num_keys=keys, distractors=distractors, chain_length=chain, key_length=4,
                        prefix_length=3, key_alphabet=string.ascii_uppercase, value_length=DIGITS,
                        template=TEMPLATE)


@dataclass(frozen=True)
class RecallRun:
    """One task at every (L, depth), ``windows`` windows each."""

    task: str
    windows: int

    @property
    def name(self) -> str:
        return f"smollm2-recall-{self.task}"

    def to_dict(self) -> dict:
        config = dataclasses.asdict(task_config(self.task))
        return {"model": SMOLLM2.filename, "rope": "the book's RoPE, no scaling", "task": self.task,
                "recall_config": config, "lengths": list(LENGTHS), "depths": list(DEPTHS),
                "windows_per_cell": self.windows, "window_seed": SEED,
                "text": f"read_austen_book({BOOK!r}) in SmolLM2's tokens, a seeded random offset "
                        "per window", "dtype": "float32"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--windows", type=int, default=4, help="windows per (L, depth)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--overwrite", action="store_true", help="run stored tasks again")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    files = ResultFiles([RecallRun(t, args.windows) for t in args.tasks], args.out,
                        overwrite=args.overwrite)
    if not files.todo:
        print(f"{files.done}: nothing to run")
        return 0
    start = time.perf_counter()
    model, tokenizer = load_pretrained(dtype=torch.float32)
    load_s = time.perf_counter() - start
    use_posenc_rope(model)

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    assert [tokenizer.decode([t]) for t in encode("093172")] == list("093172")  # a token a digit
    stream = torch.tensor(encode(read_austen_book(BOOK).decode("utf-8")))
    sha = sha256_of(model_file(SMOLLM2))
    for run in files.todo:
        config, rows = task_config(run.task), []
        began, cells = time.perf_counter(), [(L, d) for L in LENGTHS for d in DEPTHS]
        for length, depth in tqdm(cells, desc=f"{run.name} ({files.done})"):
            windows = sample_recall_windows(config, length, depth, run.windows, stream, seed=SEED,
                                            encode=encode)
            for w, window in enumerate(windows):
                tick = time.perf_counter()
                scored = score_recall_lm(model, window)
                seconds = time.perf_counter() - tick
                for q, (query, judged) in enumerate(zip(window.queries, scored)):
                    needle = next(n for n in window.needles if n.role == "queried" and n.query == q)
                    rows.append({"task": run.task, "length": length, "depth": depth, "window": w,
                                 "query": q, "key": query.key, "value": query.value,
                                 "needle_token": needle.start, "answer_token": query.answer_start,
                                 **judged, "seconds": round(seconds, 2)})
        files.store(run, {"run": run.to_dict(), "rows": rows,
                          "provenance": {**provenance("cpu"), "model_file_sha256": sha,
                                         "model_load_wall_s": round(load_s, 1),
                                         "wall_s": round(time.perf_counter() - began, 1)}})
        right = sum(r["correct"] for r in rows)
        print(f"{run.name}: {right}/{len(rows)} right, {time.perf_counter() - began:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
