"""Passkey retrieval of SmolLM2-135M-Instruct at 2 k … 16 k tokens, per RoPE method.

One forward pass per window (float32, CPU): a 5-digit key hidden at a depth of natural
filler text (*Persuasion*), then a question; the key counts as retrieved iff greedy
decoding returns its five digits (:func:`posenc_lib.pretrained.passkey.score_passkey_lm`).
The methods are chapter 11's, at its settings (``method_scaling``): no scaling; PI,
YaRN and Llama 3 with κ = 2 over L0 = 8192 at every length; dynamic NTK with
``factor`` 1, whose stretch is max(1, L/8192) for a window of L tokens (2 at 16 384).

Dynamic NTK at L ≤ 8192 rotates exactly as no scaling does (checked below from the
rotation tables, bit for bit), so it is run once, as no scaling, and not again.

Each forward appends one row to the output file, rewritten atomically; the jobs run in
``PLAN`` order (most useful first), so a run stopped at ``--deadline`` holds
the most useful cells. An existing file is never overwritten: ``--resume`` continues it
(same configuration; the commit of each resumed session is recorded), ``--force``
starts it again.

    PYTHONPATH=. OMP_NUM_THREADS=1 python tools/runs/pretrained_passkey.py \\
        --deadline 2026-12-02T08:58
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

from posenc_lib.training.data import read_austen_book
from posenc_lib.encodings.rope import RotaryEmbedding
from posenc_lib.records import git_commit, write_json_atomic
from posenc_lib.pretrained.long_context import METHODS, method_scaling
from posenc_lib.pretrained.passkey import score_passkey_lm
from posenc_lib.pretrained.loading import (
    SMOLLM2,
    load_pretrained,
    model_file,
    rope_config,
    sha256_of,
    use_posenc_rope,
)
from posenc_lib.tasks.retrieval import PasskeyTemplate, sample_passkeys

OUT = Path(__file__).resolve().parents[2] / "results" / "pretrained" / "smollm2-passkey.json"
L0 = SMOLLM2.context_length  # 8192
STRETCH = 2.0
DIGITS = 5
SEED = 0
BOOK = "persuasion"
TEMPLATE = PasskeyTemplate(
    needle=" The pass key is {key}. Remember it. {key} is the pass key. ",
    question=" What is the pass key? The pass key is ",
    answer="{key}",
)
LENGTHS = (2048, 4096, 8192, 12288, 16384)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
ALL = METHODS
# (lengths, depths, key indices, methods), run in this order, most useful first: the
# check that the model retrieves at 2 k; L0 at two depths; past L0 a needle far from
# the question (more than L0 tokens back), then one near it (fewer); then the other
# depths; then more keys. Dynamic NTK is
# left out at L <= L0 (it is no scaling there, see check_dynamic_is_plain).
PLAN = (
    ((2048,), (0.5,), (0, 1, 2), ("none",)),
    ((8192,), (0.25, 0.75), (0,), ALL),
    ((16384, 12288), (0.25,), (0,), ALL),
    ((16384, 12288), (0.75,), (0,), ALL),
    ((2048, 4096), (0.25, 0.75), (0,), ALL),
    ((2048, 4096, 8192), (0.0, 0.5, 1.0), (0,), ALL),
    ((16384, 12288), (0.5, 0.0, 1.0), (0,), ALL),
    (LENGTHS, DEPTHS, (1, 2), ALL),
)
KEYS_PER_CELL = 1 + max(max(keys) for _, _, keys, _ in PLAN)


def scalings() -> dict:
    """Each method's rope_scaling as chapter 11 sets it (κ = 2; dynamic: factor 1)."""
    return {m: method_scaling(m, 1.0 if m == "dynamic" else STRETCH, L0)
            for m in METHODS}


def check_dynamic_is_plain(head_dim: int, base: float, scaling: dict) -> None:
    """Dynamic NTK rotates as plain RoPE at every planned L ≤ L0, and not past it."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1, 1, max(LENGTHS), head_dim, generator=generator)
    for length in LENGTHS:
        positions = torch.arange(length)
        plain = RotaryEmbedding(head_dim, base)(x[:, :, :length], positions)
        dynamic = RotaryEmbedding(head_dim, base, rope_scaling=scaling)(
            x[:, :, :length], positions)
        assert torch.equal(plain, dynamic) == (length <= L0), length


def jobs() -> list[tuple[str, int, float, int]]:
    """(method, length, depth, key index) in run order, each once."""
    out: list[tuple[str, int, float, int]] = []
    for lengths, depths, keys, methods in PLAN:
        for k in keys:
            for length in lengths:
                for depth in depths:
                    for method in methods:
                        job = (method, length, depth, k)
                        if (method == "dynamic" and length <= L0) or job in out:
                            continue
                        out.append(job)
    return out


def config() -> dict:
    return {
        "template": {"needle": TEMPLATE.needle, "question": TEMPLATE.question,
                     "answer": TEMPLATE.answer},
        "digits": DIGITS,
        "filler_source": f"posenc_lib.training.data.read_austen_book({BOOK!r}), SmolLM2's "
                         "tokens, a seeded random offset per window "
                         f"(posenc_lib.tasks.retrieval.sample_passkeys, seed={SEED})",
        "depths": list(DEPTHS),
        "lengths": list(LENGTHS),
        "keys_per_cell": KEYS_PER_CELL,
        "methods": scalings(),
        "L0": L0,
        "stretch": {"linear": STRETCH, "yarn": STRETCH, "llama3": STRETCH,
                    "dynamic": "max(1, L / 8192) for a window of L tokens",
                    "none": 1.0},
        "identical": [{"method": "dynamic", "same_as": "none", "up_to_length": L0,
                       "why": "rotation tables equal bit for bit at every planned "
                              "L <= 8192 (asserted before the run); not run again"}],
        "plan": [{"lengths": list(ls), "depths": list(ds), "keys": list(ks),
                  "methods": list(ms)} for ls, ds, ks, ms in PLAN],
        "planned_forwards": len(jobs()),
        "dtype": "float32",
        "seed": SEED,
    }


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--resume", action="store_true",
                        help="continue an existing file (same configuration)")
    parser.add_argument("--force", action="store_true",
                        help="start again, replacing an existing file")
    parser.add_argument("--deadline", default=None,
                        help="UTC time (ISO) after which no forward is started")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    commit, dirty = git_commit()
    deadline = (datetime.datetime.fromisoformat(args.deadline).replace(
        tzinfo=datetime.timezone.utc) if args.deadline else None)
    cfg = json.loads(json.dumps(config()))  # as stored (lists, not tuples)
    if args.out.exists() and not args.force:
        stored = json.loads(args.out.read_text())
        if not args.resume:
            sys.exit(f"{args.out} exists; pass --resume to continue it or --force to "
                     "replace it")
        if stored["config"] != cfg:
            sys.exit(f"{args.out} holds another configuration; use --force")
        record = stored  # provenance keeps the first commit; each resume adds its own
        record["provenance"]["resumed"] = [
            *record["provenance"].get("resumed", []),
            {"at": now(), "commit": commit, "git_dirty": dirty,
             "rows_before": len(stored["rows"])}]
    else:
        record = {"provenance": {}, "config": cfg, "rows": []}
    load_start = time.perf_counter()
    model, tokenizer = load_pretrained(dtype=torch.float32)
    load_seconds = time.perf_counter() - load_start
    path = model_file(SMOLLM2)
    head_dim, base = rope_config(model)
    check_dynamic_is_plain(head_dim, base, cfg["methods"]["dynamic"])
    prov = record["provenance"]
    prov.update({
        "commit": prov.get("commit", commit), "git_dirty": prov.get("git_dirty", dirty),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "host": platform.node(), "cpu": cpu_name(), "threads": torch.get_num_threads(),
        "started": prov.get("started", now()), "finished": None,
        "model_file": path.name, "model_file_sha256": sha256_of(path),
        "model_load_seconds": round(load_seconds, 1),
        "load_average_at_start": list(os.getloadavg()),
        "status": "running",
    })
    write_json_atomic(args.out, record)

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    for key in ("12345", "09876"):  # one token per digit: the last 5 answer tokens
        assert [tokenizer.decode([t]) for t in encode(TEMPLATE.answer.format(key=key))
                ] == list(key)
    stream = torch.tensor(encode(read_austen_book(BOOK).decode("utf-8")))
    done = {(r["method"], r["length"], r["depth"], r["key"]) for r in record["rows"]}
    todo = jobs()
    last_seconds: dict[int, float] = {}
    cpu_start, cpu_before = time.process_time(), prov.get("process_cpu_seconds", 0.0)
    stopped = None
    for number, (method, length, depth, k) in enumerate(todo, 1):
        example = sample_passkeys(encode, length, depth, k + 1, seed=SEED,
                                  key_digits=DIGITS, filler=stream,
                                  template=TEMPLATE)[k]
        if (method, length, depth, example.key) in done:
            continue
        if deadline is not None:
            guess = max([last_seconds.get(length, 0.0)]  # or scaled from another L
                        + [s * (length / n) ** 1.5 for n, s in last_seconds.items()])
            expected = datetime.timedelta(seconds=guess)
            if datetime.datetime.now(datetime.timezone.utc) + expected > deadline:
                stopped = f"deadline {args.deadline} UTC"
                break
        use_posenc_rope(model, cfg["methods"][method])
        start = time.perf_counter()
        scored = score_passkey_lm(model, example, key_tokens=DIGITS)
        seconds = time.perf_counter() - start
        last_seconds[length] = seconds
        record["rows"].append({"method": method, "length": length, "depth": depth,
                               "key": example.key, "needle_token": example.needle_start,
                               **scored, "seconds": round(seconds, 1)})
        prov["process_cpu_seconds"] = round(
            cpu_before + time.process_time() - cpu_start, 1)
        write_json_atomic(args.out, record)
        print(f"{now()} [{number}/{len(todo)}] {method} L={length} depth={depth} "
              f"key={example.key}: {scored} {seconds:.0f} s", flush=True)
    run = len(record["rows"])
    prov["status"] = ("complete" if run == len(todo) else
                      f"stopped ({stopped or 'unknown'}): {run} of {len(todo)} "
                      "planned forwards run; the rest not run")
    prov["finished"] = now()
    write_json_atomic(args.out, record)
    print(prov["status"], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
