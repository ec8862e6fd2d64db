"""Make the runs stored in results/ci-recall/: multi-key recall with near-miss distractors
at the ci scale, learned through a curriculum, measured on both of the book's metrics
(recall accuracy and perplexity) from L_train to 16 × L_train (issue 38, item 1).

Run from the repository root, one thread per process, CPU, e.g.

    PYTHONPATH=. POSENC_DEVICE=cpu OMP_NUM_THREADS=1 \\
        python tools/runs/ci_recall.py --schemes rope none alibi --seeds 0 1

Each model is trained with :func:`posenc_lib.tasks.recall.train_recall_mix` (through the
model cache) on the curriculum ``--plan`` (stages ``KkDd[cC]:STEPS``: K keys, D near-miss
distractors per queried key, chain length C, one query), then measured:

* recall: exact match per (L, depth of the queried statement, task) for L = 1, 2, 4, 8,
  16 × L_train, five depths and the tasks of ``EVAL_TASKS``; ``--draws`` independent draws
  of ``--windows`` windows each (window draws seeded by the draw, not the training seed);
* perplexity: the test NLL (nats per byte) at every L, non-overlapping windows over the
  first 16 384 test bytes (the sweep's protocol).

``--rope-base`` sets the RoPE base (item 2's sweep); ``--position-range M`` trains with
randomized positions, an ordered random subset of 0 … M − 1 per window (item 3; a learned
table gets M rows). ``--log-n`` reads each trained model
again with Qwen's log-n scaling (``logit_scaling`` ``log_length``, L0 = L_train; no
retraining) and writes ``NAME-logn.json``: both metrics under the scaling, and the
last-layer attention entropy per head by L with and without it (item 4);
``--head-temperature`` reads them with log-n slopes per head fitted at 4 × L_train on the
validation split (``fit_head_log_scaling``; ``NAME-headtemp.json``); ``--drawn-positions``
reads ``--position-range`` models with positions drawn at test time as well
(``drawn_positions``; ``NAME-drawn.json``); ``--ablate`` measures both metrics with the
attention of each layer zeroed in turn (``ablated_attention``; ``NAME-ablate.json``);
``--heads`` measures four-key recall with each head of the last layer zeroed and with that
layer limited to a window of 32 keys (``NAME-heads.json``); ``--gates`` stores what a FoX
model's forget gates learned per layer and head (``NAME-gates.json``; the
hybrids of ``VARIANTS``, item 6, ``fox``, item 5, and the partial rotations
``neox-0.25``, ``p_rope-0.25`` and ``p_rope-0.5`` are trained by naming them in
``--schemes``). Each run writes one JSON file
(configuration, results, provenance); finished runs are skipped. ``--table`` prints the
tables of ``results/ci-recall/README.md`` from the stored runs instead of running.
"""

import argparse
import contextlib
import dataclasses
import math
import re
import time
from pathlib import Path

import torch

from posenc_lib import (
    TransformerLM,
    ablated_attention,
    alibi_slopes,
    attention_entropy,
    attention_probabilities,
    drawn_positions,
    fit_head_log_scaling,
    get_scale,
    head_log_scaling,
    load_corpus,
    sliding_window,
)
from posenc_lib.records import provenance, write_json_atomic
from posenc_lib.tasks.recall import (
    RecallConfig,
    RecallMixConfig,
    RecallStage,
    recall_accuracy,
    sample_recall_windows,
)
from posenc_lib.training.evaluate import evaluate_perplexity
from posenc_lib.training.store import recall_mix_cache_key, recall_mix_cached

OUT = Path(__file__).resolve().parents[2] / "results" / "ci-recall"
CI = get_scale("ci")
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
DEFAULT_PLAN = "1k0d:1000,2k1d:1000,4k2d:1000"
EVAL_TASKS = ("1k0d", "2k1d", "4k2d", "2k0dc2")
NLL_TOKENS = 16384
WINDOW = 32  # sliding window of a hybrid's local layer: L_train / 4, as in results/ci-shipping
LOCAL_GLOBAL = ["sliding_attention", "full_attention"]
# Chapter 14's hybrids (item 6) and FoX (item 5) on the 2-layer ci model: name -> (position, ModelConfig
# overrides). Layer 0 is the local or RoPE layer, layer 1 the global one.
VARIANTS = {
    # SmolLM3's pattern (a NoPE layer among RoPE layers) at this depth: the last layer NoPE
    "rnope": ("rope", {"nope_layers": [1]}),
    # iRoPE / RNoPE-SWA: a local RoPE layer (window 32), a global NoPE layer
    "irope": ("rope", {"nope_layers": [1], "layer_types": LOCAL_GLOBAL, "sliding_window": WINDOW}),
    # Gemma 3's per-layer-type bases: local base 1e4 (window 32), global base 1e6
    "gemma3-bases": ("rope", {"layer_types": LOCAL_GLOBAL, "sliding_window": WINDOW,
                              "rope_scaling": {"sliding_attention": {"rope_theta": 10000.0},
                                               "full_attention": {"rope_theta": 1000000.0}}}),
    # the Forgetting Transformer (Lin et al. 2025): NoPE plus a learned forget gate per head (item 5)
    "fox": ("none", {"forget_gate": True}),
    # FoX started as ALiBi (gate weights 0, σ(b_h) = e^{−m_h}): the data-independent special case
    "fox-alibi-init": ("none", {"forget_gate": True, "forget_gate_init": "alibi"}),
    # partial rotation (chapter 14): GPT-NeoX's rotary_pct (the first quarter of each head
    # rotates) and p-RoPE (Barbero et al. 2025; the fastest pairs rotate, θ_i = 0 for the rest)
    "neox-0.25": ("rope", {"rope_fraction": 0.25, "rope_fraction_form": "neox"}),
    "p_rope-0.25": ("rope", {"rope_fraction": 0.25, "rope_fraction_form": "p_rope"}),
    "p_rope-0.5": ("rope", {"rope_fraction": 0.5, "rope_fraction_form": "p_rope"}),
}


def task(code: str) -> RecallConfig:
    """``KkDd[cC]``: K keys, D distractors per queried key, chain length C; one query."""
    match = re.fullmatch(r"(\d+)k(\d+)d(?:c(\d+))?", code)
    if match is None:
        raise ValueError(f"a task is KkDd or KkDdcC (e.g. 4k2d, 2k0dc2), got {code!r}")
    keys, distractors, chain = match.groups()
    return RecallConfig(num_keys=int(keys), distractors=int(distractors), chain_length=int(chain or 1))


def plan(text: str) -> tuple[RecallStage, ...]:
    """``TASK:STEPS,TASK:STEPS,…`` as stages."""
    stages = []
    for part in text.split(","):
        code, _, steps = part.partition(":")
        stages.append(RecallStage(task(code), int(steps)))
    return tuple(stages)


def config_for(scheme: str, seed: int, args: argparse.Namespace) -> RecallMixConfig:
    stages = plan(args.plan)
    overrides = {} if args.rope_base is None else {"rope_base": args.rope_base}
    position, variant = VARIANTS.get(scheme, (scheme, {}))
    position_range = getattr(args, "position_range", None)
    base = dataclasses.replace(CI.train_config(position, seed, **overrides, **variant),
                               steps=sum(s.steps for s in stages))
    if position_range is not None and scheme == "learned":  # a row for every position drawn
        base = dataclasses.replace(base, model=dataclasses.replace(
            base.model, max_positions=position_range))
    return RecallMixConfig(base, stages, fraction=args.fraction, repeat_fraction=args.repeat_fraction,
                           answer_weight=args.answer_weight, position_range=position_range)


def name(scheme: str, seed: int, args: argparse.Namespace) -> str:
    base = "" if args.rope_base is None else f"-base{args.rope_base:g}"
    position_range = getattr(args, "position_range", None)
    positions = "" if position_range is None else f"-pos{position_range}"
    return (f"{scheme}{base}{positions}-{args.plan.replace(':', 'x').replace(',', '-')}"
            f"-mix{args.fraction:g}-rep{args.repeat_fraction:g}-w{args.answer_weight:g}-seed{seed}")


def measure(model, test, args: argparse.Namespace) -> tuple[list[dict], dict]:
    """Both metrics of ``model``: recall rows per (task, draw, L, depth) and test NLL per L."""
    lengths = CI.eval_lengths
    recall = []
    for code in EVAL_TASKS:
        for draw in range(args.draws):
            for length in lengths:
                for depth in DEPTHS:
                    windows = sample_recall_windows(task(code), length, depth, args.windows, test,
                                                    seed=draw)
                    for row in recall_accuracy(model, windows):
                        recall.append({"task": code, "draw": draw, **row})
    nll = {}
    longest = getattr(model, "max_length", None)  # a learned table: nothing past its rows
    for length in lengths:
        if longest is not None and length > longest:
            nll[str(length)] = {"nll": None, "skipped": f"model's max_length is {longest}"}
            continue
        result = evaluate_perplexity(model, test, length, max_tokens=NLL_TOKENS)
        nll[str(length)] = {"nll": result.nll, "tokens_scored": result.tokens_scored}
    return recall, nll


def recall_protocol(args: argparse.Namespace) -> dict:
    return {
        "text": "test split (Persuasion), a fresh random offset per window",
        "tasks": {code: dataclasses.asdict(task(code)) for code in EVAL_TASKS},
        "lengths": list(CI.eval_lengths), "depths": list(DEPTHS), "draws": args.draws,
        "windows_per_cell_and_draw": args.windows,
        "depth": "of the statement that names the queried key; other needles uniform",
        "scoring": "exact match of every answer byte under greedy decoding "
                   "(posenc_lib.tasks.recall.recall_accuracy)",
        "window_seed": "sample_recall_windows(seed=draw): the same windows for every model",
    }


def run(scheme: str, seed: int, args: argparse.Namespace) -> dict:
    config = config_for(scheme, seed, args)
    test = load_corpus(config.base.corpus).test
    start = time.perf_counter()
    model, record = recall_mix_cached(config, "cpu", progress=False)
    train_wall = time.perf_counter() - start
    start = time.perf_counter()
    recall, nll = measure(model, test, args)
    eval_wall = time.perf_counter() - start
    return {
        "format": 1,
        "name": name(scheme, seed, args),
        "variant": scheme,
        "recipe": config.to_dict(),
        "curriculum": config.describe(),
        "model_cache_key": recall_mix_cache_key(config, "cpu"),
        "recall_protocol": recall_protocol(args),
        "recall": recall,
        "test_nll": nll,
        "nll_protocol": f"non-overlapping windows of L, first {NLL_TOKENS} test bytes, nats per byte",
        "train": {"final_loss": record.losses[-1],
                  "mean_loss_last_50": sum(record.losses[-50:]) / 50,
                  "num_parameters": record.num_parameters,
                  "train_tokens": config.base.steps * config.base.batch_size * config.base.seq_len},
        "timing": {"train_or_load_wall_s": train_wall, "eval_wall_s": eval_wall,
                   "recorded_train_wall_s": record.wall_time_s},
        "provenance": provenance("cpu"),
    }


ENTROPY_WINDOWS = 4  # test windows per L for the attention entropy
ENTROPY_QUERIES = 32  # the last queries of each window


def entropy_by_length(model, test) -> dict[str, list[float]]:
    """Last-layer attention entropy per head (nats), mean over the last 32 queries of 4
    test windows per L (consecutive, from the start of the test split)."""
    out = {}
    for length in CI.eval_lengths:
        tokens = test[: ENTROPY_WINDOWS * length].long().view(ENTROPY_WINDOWS, length)
        probs = attention_probabilities(model, tokens, len(model.blocks) - 1)
        out[str(length)] = attention_entropy(probs, skip_first=length - ENTROPY_QUERIES).tolist()
    return out


def read_again(scheme: str, seed: int, args: argparse.Namespace, suffix: str, how: dict,
               reader) -> dict:
    """The trained model of (scheme, seed) measured again on both metrics under ``reader``
    (a function model -> (model to measure, context manager factory)), no retraining."""
    config = config_for(scheme, seed, args)
    data = load_corpus(config.base.corpus)
    model, _ = recall_mix_cached(config, "cpu", progress=False)
    start = time.perf_counter()
    measured, within, extra = reader(model, data)
    with within():
        recall, nll = measure(measured, data.test, args)
        entropy = entropy_by_length(measured, data.test)
    return {
        "format": 1,
        "name": name(scheme, seed, args) + suffix,
        "variant": scheme,
        "recipe": config.to_dict(),
        "model_cache_key": recall_mix_cache_key(config, "cpu"),
        "read_out": how,
        **extra,
        "recall_protocol": recall_protocol(args),
        "recall": recall,
        "test_nll": nll,
        "nll_protocol": f"non-overlapping windows of L, first {NLL_TOKENS} test bytes, nats per byte",
        "entropy_protocol": f"last layer, per head, mean over the last {ENTROPY_QUERIES} queries "
                            f"of {ENTROPY_WINDOWS} consecutive test windows of L (nats)",
        # the log-n read-outs of results/ci-recall name their entropy "log_length"
        "entropy": {"plain": entropy_by_length(model, data.test),
                    "log_length" if how["kind"] == "log_n" else "read_out": entropy},
        "timing": {"eval_wall_s": time.perf_counter() - start},
        "provenance": provenance("cpu"),
    }


def logn_reader(config):
    """Qwen's log-n (``logit_scaling`` ``log_length``, L0 = L_train) on the trained weights."""
    rule = {"kind": "log_length", "original_max_position_embeddings": config.base.seq_len}

    def reader(model, data):
        scaled = TransformerLM(dataclasses.replace(config.model, logit_scaling=rule)).eval()
        scaled.load_state_dict(model.state_dict())
        return scaled, contextlib.nullcontext, {"eval_logit_scaling": rule}
    return reader


HEAD_FIT_LENGTH_FACTOR = 4  # the held-out fitting length: 4 × L_train


def head_temperature_reader(config):
    """Log-n with a slope per head, fitted at 4 L_train on the validation split (item 4)."""
    length = HEAD_FIT_LENGTH_FACTOR * config.base.seq_len

    def reader(model, data):
        fit = {"length": length, "split": "validation", "steps": 60, "windows": 8, "lr": 0.05,
               "seed": 0, "init": "zeros"}
        slopes = fit_head_log_scaling(model, data.validation, length, config.base.seq_len,
                                      steps=fit["steps"], windows=fit["windows"], lr=fit["lr"],
                                      seed=fit["seed"])
        return model, lambda: head_log_scaling(model, slopes, config.base.seq_len), {
            "head_fit": fit, "head_slopes": slopes.tolist(),
            "qwen_slope": 1 / math.log(config.base.seq_len)}
    return reader


def drawn_reader(config):
    """Randomized positions at test time too (Ruoss et al.'s protocol), from the training range."""
    if config.position_range is None:
        raise SystemExit("--drawn-positions reads models trained with --position-range")

    def reader(model, data):
        return model, lambda: drawn_positions(model, config.position_range, seed=0), {
            "test_positions": f"per window an ordered random subset of 0 … {config.position_range - 1}"
                              " (drawn_positions, seed 0)"}
    return reader


ATTRIBUTION_TASK = "4k2d"
ATTRIBUTION_LENGTHS = (128, 512, 2048)


def attribution_run(scheme: str, seed: int, args: argparse.Namespace) -> dict:
    """Four-key recall with one head of the last (global) layer zeroed at a time, and with
    that layer limited to a window of 32 keys: which head, and whether the far keys, carry
    retrieval (item 6). Task 4k2d, L = 1, 4, 16 × L_train; the draws and windows of
    :func:`measure`."""
    config = config_for(scheme, seed, args)
    data = load_corpus(config.base.corpus)
    model, _ = recall_mix_cached(config, "cpu", progress=False)
    last = len(model.blocks) - 1
    conditions = {"none": contextlib.nullcontext,
                  f"layer {last} window {WINDOW}": lambda: sliding_window(model, WINDOW, layers=[last])}
    for head in range(model.config.num_heads):
        conditions[f"layer {last} head {head}"] = (
            lambda head=head: ablated_attention(model, [last], heads=[head]))
    start = time.perf_counter()
    rows = []
    for label, within in conditions.items():
        with within():
            for draw in range(args.draws):
                for length in ATTRIBUTION_LENGTHS:
                    for depth in DEPTHS:
                        windows = sample_recall_windows(task(ATTRIBUTION_TASK), length, depth,
                                                        args.windows, data.test, seed=draw)
                        for row in recall_accuracy(model, windows):
                            rows.append({"condition": label, "task": ATTRIBUTION_TASK, "draw": draw, **row})
    return {
        "format": 1,
        "name": name(scheme, seed, args) + "-heads",
        "variant": scheme,
        "recipe": config.to_dict(),
        "model_cache_key": recall_mix_cache_key(config, "cpu"),
        "read_out": {"kind": "attribution", "layer": last,
                     "what": "one head of the last layer zeroed (ablated_attention), or that layer "
                             f"limited to its last {WINDOW} keys (sliding_window)"},
        "recall_protocol": {**recall_protocol(args), "tasks": {ATTRIBUTION_TASK: dataclasses.asdict(
            task(ATTRIBUTION_TASK))}, "lengths": list(ATTRIBUTION_LENGTHS)},
        "recall": rows,
        "timing": {"eval_wall_s": time.perf_counter() - start},
        "provenance": provenance("cpu"),
    }


GATE_WINDOWS = 16


def gates_run(scheme: str, seed: int, args: argparse.Namespace) -> dict:
    """What a FoX model's forget gates learned: log f per layer and head over 16 test windows
    of L_train (item 5), beside ALiBi's constant −m_h."""
    config = config_for(scheme, seed, args)
    if not config.model.forget_gate:
        raise SystemExit("--gates reads models with a forget gate (fox, fox-alibi-init)")
    data = load_corpus(config.base.corpus)
    model, _ = recall_mix_cached(config, "cpu", progress=False)
    length = config.base.seq_len
    tokens = data.test[: GATE_WINDOWS * length].long().view(GATE_WINDOWS, length)
    captured = {}
    hooks = [block.attn.forget_gate.register_forward_hook(
        lambda module, inputs, out, i=i: captured.__setitem__(i, out)) for i, block in enumerate(model.blocks)]
    with torch.no_grad():
        model(tokens)
    for hook in hooks:
        hook.remove()
    per_layer = []
    for i in range(len(model.blocks)):
        log_f = captured[i].transpose(0, 1).reshape(model.config.num_heads, -1)  # (H, windows × L)
        quantiles = torch.quantile(log_f, torch.tensor([0.1, 0.5, 0.9]), dim=1)  # (3, H)
        per_layer.append({"mean_log_f": log_f.mean(1).tolist(), "q10": quantiles[0].tolist(),
                          "median": quantiles[1].tolist(), "q90": quantiles[2].tolist()})
    return {
        "format": 1,
        "name": name(scheme, seed, args) + "-gates",
        "variant": scheme,
        "recipe": config.to_dict(),
        "model_cache_key": recall_mix_cache_key(config, "cpu"),
        "read_out": {"kind": "gates", "what": f"log f (nats per token) of every token of {GATE_WINDOWS} "
                     f"consecutive test windows of L_train, per layer and head"},
        "alibi_log_f": (-alibi_slopes(model.config.num_heads)).tolist(),
        "gates": per_layer,
        "provenance": provenance("cpu"),
    }


def ablation_runs(scheme: str, seed: int, args: argparse.Namespace) -> dict:
    """Recall and NLL with the attention of each layer zeroed in turn (item 6)."""
    config = config_for(scheme, seed, args)
    data = load_corpus(config.base.corpus)
    model, _ = recall_mix_cached(config, "cpu", progress=False)
    start = time.perf_counter()
    per_layer = {}
    for layer in range(len(model.blocks)):
        with ablated_attention(model, [layer]):
            recall, nll = measure(model, data.test, args)
        per_layer[str(layer)] = {"recall": recall, "test_nll": nll}
    return {
        "format": 1,
        "name": name(scheme, seed, args) + "-ablate",
        "variant": scheme,
        "recipe": config.to_dict(),
        "model_cache_key": recall_mix_cache_key(config, "cpu"),
        "read_out": {"kind": "ablated_attention",
                     "what": "the attention output of one layer (every head) set to zero"},
        "recall_protocol": recall_protocol(args),
        "nll_protocol": f"non-overlapping windows of L, first {NLL_TOKENS} test bytes, nats per byte",
        "ablated_layer": per_layer,
        "timing": {"eval_wall_s": time.perf_counter() - start},
        "provenance": provenance("cpu"),
    }


def tables(folder: Path) -> None:
    """Print, from the stored runs, recall accuracy per (scheme or base, task) and L —
    the mean over (seed, draw) of the share right, depths pooled, with its range — and
    the test NLL per L (mean and range over seeds)."""
    from posenc_book.stored import load_passkey_runs, recall_cells, recall_nll
    from posenc_book.tables import mean_spread_table

    runs = load_passkey_runs(folder, "*-seed[0-9].json")  # trained runs, not the -logn read-outs
    cells = recall_cells(runs)
    cells["model"] = [s if b == 10000.0 else f"{s} base {b:g}" for s, b in zip(cells.scheme, cells.rope_base)]
    per_draw = cells.groupby(["model", "task", "seed", "draw", "L"])[["correct", "queries"]].sum().reset_index()
    per_draw["accuracy"] = per_draw.correct / per_draw.queries
    per_draw["row"] = per_draw.model + ", " + per_draw.task
    show(mean_spread_table(per_draw, "row", "L", "accuracy", spread="range"))
    nll = recall_nll(runs)
    nll["model"] = [s if b == 10000.0 else f"{s} base {b:g}" for s, b in zip(nll.scheme, nll.rope_base)]
    print()
    show(mean_spread_table(nll, "model", "L", "nll", spread="range"))


def show(frame) -> None:
    """Print a table as Markdown (with ``tabulate``) or as plain text."""
    try:
        print(frame.to_markdown())
    except ImportError:  # pandas' to_markdown needs tabulate
        print(frame.to_string())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schemes", nargs="+", default=["rope", "none", "alibi"],
                        help="positions (rope, none, alibi, learned, …) or hybrids: "
                             + ", ".join(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--plan", default=DEFAULT_PLAN, help="curriculum, e.g. " + DEFAULT_PLAN)
    parser.add_argument("--fraction", type=float, default=0.375, help="recall windows per batch")
    parser.add_argument("--repeat-fraction", type=float, default=0.375, help="repeat windows per batch")
    parser.add_argument("--answer-weight", type=float, default=1.0)
    parser.add_argument("--rope-base", type=float, default=None, help="RoPE base (default the model's)")
    parser.add_argument("--position-range", type=int, default=None,
                        help="randomized positions: each window's positions drawn from 0 … M − 1")
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--windows", type=int, default=16, help="windows per (L, depth, task) and draw")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--table", action="store_true", help="print the tables of the stored runs")
    parser.add_argument("--log-n", action="store_true",
                        help="read the trained models again with log-n scaling (NAME-logn.json)")
    parser.add_argument("--head-temperature", action="store_true",
                        help="read them with per-head log-n slopes fitted at 4 L_train (NAME-headtemp.json)")
    parser.add_argument("--drawn-positions", action="store_true",
                        help="read --position-range models with positions drawn at test too (NAME-drawn.json)")
    parser.add_argument("--gates", action="store_true",
                        help="what a FoX model's forget gates learned (NAME-gates.json)")
    parser.add_argument("--heads", action="store_true",
                        help="four-key recall with each head of the last layer zeroed, and with "
                             "that layer windowed (NAME-heads.json)")
    parser.add_argument("--ablate", action="store_true",
                        help="both metrics with each layer's attention zeroed (NAME-ablate.json)")
    args = parser.parse_args()
    if args.table:
        tables(args.out)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    readers = {"log_n": ("-logn", "log_length (Qwen), L0 = L_train", logn_reader),
               "head_temperature": ("-headtemp", "per-head log-n slopes fitted at 4 L_train",
                                    head_temperature_reader),
               "drawn_positions": ("-drawn", "randomized positions at test", drawn_reader)}
    chosen = [key for key in readers if getattr(args, key)]
    for seed in args.seeds:
        for scheme in args.schemes:
            suffix = ("-ablate" if args.ablate else "-heads" if args.heads else "-gates" if args.gates
                      else readers[chosen[0]][0] if chosen else "")
            path = args.out / f"{name(scheme, seed, args)}{suffix}.json"
            if path.exists():
                print(path.name, "exists: skipped", flush=True)
                continue
            if args.ablate or args.heads or args.gates:
                make = ablation_runs if args.ablate else attribution_run if args.heads else gates_run
                write_json_atomic(path, make(scheme, seed, args))
                print(path.name, "written", flush=True)
                continue
            if chosen:
                suffix, how, make = readers[chosen[0]]
                config = config_for(scheme, seed, args)
                result = read_again(scheme, seed, args, suffix, {"kind": chosen[0], "what": how},
                                    make(config))
            else:
                result = run(scheme, seed, args)
            write_json_atomic(path, result)
            at_train = {code: sum(r["correct"] for r in result["recall"]
                                  if r["task"] == code and r["length"] == CI.seq_len)
                        for code in EVAL_TASKS}
            print(path.name, "correct at L_train", at_train, "NLL at L_train",
                  round(result["test_nll"][str(CI.seq_len)]["nll"], 3), flush=True)


if __name__ == "__main__":
    main()
