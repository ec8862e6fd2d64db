"""Perplexity by position of a pretrained model over one long text, per RoPE method.

One *run* scores the first N tokens of a public-domain novel in a single forward pass
of the pretrained model (SmolLM2-135M-Instruct, trained context L0 = 8192 tokens), with
its RoPE replaced by posenc_lib's (:func:`~posenc_lib.pretrained.loading.use_posenc_rope`) under
one context-extension method: ``none`` (plain RoPE), ``linear`` (position
interpolation), ``dynamic`` (NTK-aware), ``yarn`` or ``llama3``, each with a ``factor``
(default N / L0, so that the last position maps inside the trained range). For ``linear``,
``yarn`` and ``llama3`` the factor is the stretch κ; for ``dynamic`` it is Hugging Face's
coefficient of the running stretch, ``factor · L / L0 − (factor − 1)`` at length L
(:func:`~posenc_lib.encodings.rope_scaling.dynamic_ntk_base`), so factor 1 stretches by
L / L0 itself. The loss is
reported per block of positions (e.g. 2048 tokens): it shows where past L0 a method
breaks down.

Each method writes one JSON file, atomically, with its configuration, per-block results
and provenance: the git commit and versions taken when the invocation started (the code
that ran, even if the checkout moves on meanwhile), the device, dtype, wall time and
peak memory, and when the method finished. An interrupted run resumes: methods with a
file are skipped. A file that holds a different
configuration is never overwritten without ``--overwrite``. Nothing in it is
CPU-specific: on a machine with CUDA it runs there (e.g. ``--tokens 32768``).

Command line::

    python tools/runs/long_context.py run --tokens 16384 --block 2048 \\
        --out results/pretrained/smollm2-persuasion-16384
    python tools/runs/long_context.py table \\
        --out results/pretrained/smollm2-persuasion-16384
"""

from __future__ import annotations

import datetime
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm  # the type of a bar

from posenc_lib.training.data import read_austen_book
from posenc_lib.training.device import pick_device
from posenc_lib.encodings.rope_scaling import STRETCH_METHODS, dynamic_stretch, method_scaling
from posenc_lib.records import RESULT_FORMAT, ResultFiles, peak_memory, provenance
from posenc_lib.records import RUN_DTYPES as DTYPES
from posenc_lib.pretrained.loading import (
    SMOLLM2,
    block_nll,
    load_pretrained,
    text_tokens,
    token_nll,
    use_posenc_rope,
)
from posenc_lib.training.progress import progress_bar

METHODS: tuple[str, ...] = STRETCH_METHODS
"""The methods, in the book's order (``none`` is plain RoPE); defined in rope_scaling."""



def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class LongContextRun:
    """One method over one text.

    Attributes:
        method: one of :data:`METHODS`.
        num_tokens: N, tokens scored from the start of the text (N − 1 predictions).
        block: positions per reported block.
        factor: the method's ``factor`` (κ, except for ``dynamic``: see the module).
        book: an Austen novel (``posenc_lib.training.data.read_austen_book``), by default
            *Persuasion*.
        dtype: the model's weights and activations, ``"float32"`` or ``"bfloat16"``.
    """

    method: str
    num_tokens: int
    block: int
    factor: float
    book: str = "persuasion"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        method_scaling(self.method, self.factor, SMOLLM2.context_length)  # checks both
        if self.num_tokens < 2 or self.block < 1:
            raise ValueError("num_tokens must be >= 2 and block >= 1, "
                             f"got {self.num_tokens}, {self.block}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, "
                             f"got dtype={self.dtype!r}")

    @property
    def name(self) -> str:
        """File stem, e.g. ``"yarn-16384"``."""
        return f"{self.method}-{self.num_tokens}"

    @property
    def rope_scaling(self) -> dict | None:
        return method_scaling(self.method, self.factor, SMOLLM2.context_length)

    def to_dict(self) -> dict:
        return json.loads(json.dumps({**asdict(self), "model_file": asdict(SMOLLM2)}))


def plan(methods: Sequence[str], num_tokens: int, block: int,
         factor: float | None = None, book: str = "persuasion",
         dtype: str = "float32") -> list[LongContextRun]:
    """One run per method; κ defaults to max(1, N/L0), N = ``num_tokens``, L0 = 8192."""
    if factor is None:
        factor = max(1.0, num_tokens / SMOLLM2.context_length)
    return [LongContextRun(m, num_tokens, block, factor, book, dtype) for m in methods]


def _layer_progress(model: torch.nn.Module, bar: tqdm) -> list:
    """Forward hooks that advance ``bar`` once per decoder layer (progress in a pass)"""

    def advance(*_) -> None:  # returns None: a hook's return value replaces the output
        bar.update(1)

    return [layer.register_forward_hook(advance) for layer in model.model.layers]


def run_method(run: LongContextRun, model: torch.nn.Module, tokens: torch.Tensor, *,
               progress: bool = True, started: dict | None = None) -> dict:
    """Score ``tokens`` with ``model`` under ``run``'s method; return the result.

    ``started`` is the :func:`~posenc_lib.records.provenance` taken when the run
    began (the commit whose code is running); by default it is taken now.
    """
    device = next(model.parameters()).device
    started = started if started is not None else provenance(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    use_posenc_rope(model, run.rope_scaling)
    bar = progress_bar(desc=f"{run.name}: layers", total=len(model.model.layers), enabled=progress)
    hooks = _layer_progress(model, bar)
    start = time.perf_counter()
    try:
        nll = token_nll(model, tokens)
    finally:
        for hook in hooks:
            hook.remove()
        bar.close()
    wall = time.perf_counter() - start
    blocks = []
    for index, mean in enumerate(block_nll(nll, run.block)):
        first = index * run.block
        last = min(first + run.block, nll.numel()) - 1
        blocks.append({"first_position": first, "last_position": last, "nll": mean,
                       "perplexity": math.exp(mean)})
    overall = nll.mean().item()
    return {
        "format": RESULT_FORMAT,
        "run": run.to_dict(),
        "name": run.name,
        "rope_scaling": run.rope_scaling,
        "provenance": {**started, "finished_utc": _now()},
        "timing": {"forward_wall_s": wall, "tokens_per_second": tokens.numel() / wall,
                   "dtype": run.dtype, **peak_memory(device)},
        "nll": overall,
        "perplexity": math.exp(overall),
        "predictions": nll.numel(),
        "blocks": blocks,
    }


def run_long_context(runs: Sequence[LongContextRun], out: Path | str, *,
                     device: torch.device | str | None = None, overwrite: bool = False,
                     progress: bool = True) -> list[dict]:
    """Run every planned method that has no result in ``out`` yet; return all results.

    The model is loaded once (only if some method is left to run).

    Raises:
        FileExistsError: if a result file holds a different configuration and
            ``overwrite`` is False.
        ValueError: if the runs disagree on the text, length or dtype (one model load
            and one text serve them all).
    """
    if len({(r.book, r.num_tokens, r.dtype) for r in runs}) > 1:
        raise ValueError("all runs must share book, num_tokens and dtype")
    files = ResultFiles(runs, out, overwrite=overwrite)
    todo = files.todo
    if todo:
        device = torch.device(device) if device is not None else pick_device()
        started = provenance(device)  # the commit and state of the code that runs
        start = time.perf_counter()
        model, tokenizer = load_pretrained(device=device, dtype=DTYPES[todo[0].dtype])
        load_wall = time.perf_counter() - start
        text = read_austen_book(todo[0].book).decode("utf-8")
        tokens = text_tokens(tokenizer, text, todo[0].num_tokens)
        bar = progress_bar(todo, desc=f"methods ({files.done})", enabled=progress)
        for run in bar:
            result = run_method(run, model, tokens, progress=progress, started=started)
            result["timing"]["model_load_wall_s"] = load_wall
            files.store(run, result)
    return files.in_plan_order()


def load_long_context_results(out: Path | str) -> list[dict]:
    """Every result file in ``out``, in :data:`METHODS` order.

    Raises:
        FileNotFoundError: if ``out`` does not exist.
    """
    out = Path(out)
    if not out.is_dir():
        raise FileNotFoundError(f"no results directory {out}")
    results = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    return sorted(results, key=lambda r: (METHODS.index(r["run"]["method"]), r["name"]))


def run_stretch(result: dict) -> float:
    """The stretch κ a stored run applied over its whole pass of N tokens.

    ``none``: 1; ``linear``, ``yarn``, ``llama3``: the factor; ``dynamic``: transformers'
    rule at L = N (:func:`~posenc_lib.encodings.rope_scaling.dynamic_stretch`).

    Args:
        result: one result (:func:`load_long_context_results`), with ``run``'s
            ``method``, ``factor`` and ``num_tokens``.
    """
    run = result["run"]
    if run["method"] == "none":
        return 1.0
    if run["method"] == "dynamic":
        return dynamic_stretch(run["factor"], run["num_tokens"], SMOLLM2.context_length)
    return run["factor"]


def long_context_blocks(results: Sequence[dict]) -> pd.DataFrame:
    """Stored long-context runs as one long table: one row per (run, block).

    Args:
        results: results (:func:`load_long_context_results`), any number of texts.

    Returns:
        A DataFrame with columns ``book``, ``method``, ``kappa`` (:func:`run_stretch`),
        ``factor``, ``block`` (0, 1, …), ``first_position``, ``last_position``, ``nll``
        and ``perplexity``, in the order of ``results``.
    """
    rows = [{"book": r["run"]["book"], "method": r["run"]["method"], "kappa": run_stretch(r),
             "factor": r["run"]["factor"], "block": i,
             "first_position": b["first_position"], "last_position": b["last_position"],
             "nll": b.get("nll"), "perplexity": b["perplexity"]}
            for r in results for i, b in enumerate(r["blocks"])]
    return pd.DataFrame(rows)


def format_block_table(results: Sequence[dict]) -> str:
    """Plain text: one row per method, perplexity per block of positions."""
    if not results:
        return "(no results)"
    blocks = results[0]["blocks"]
    spans = [f"{b['first_position']}-{b['last_position']}" for b in blocks]
    lines = ["method".ljust(9) + "".join(span.rjust(13) for span in spans)]
    for r in results:
        values = "".join(f"{b['perplexity']:13.2f}" for b in r["blocks"])
        lines.append(r["run"]["method"].ljust(9) + values)
    return "\n".join(lines)


def read_long_context_runs(root: Path | str, book: str, num_tokens: int = 16_384
                           ) -> dict[tuple[str, float], dict]:
    """Every stored run over one text, from every folder ``smollm2-{book}-{num_tokens}*``.

    Args:
        root: the folder that holds the run folders (e.g.
            ``stored_results_dir("pretrained")``).
        book: the text's name as in the folder names (``"persuasion"``, …).
        num_tokens: the length of the pass, as in the folder names.

    Returns:
        ``{(method, κ): result}``, κ the stretch over the whole pass (:func:`run_stretch`),
        each result as :func:`load_long_context_results` reads it.

    Raises:
        FileNotFoundError: if no folder matches.
        ValueError: if two stored runs have the same method and stretch.
    """
    folders = sorted(Path(root).glob(f"smollm2-{book}-{num_tokens}*"))
    if not folders:
        raise FileNotFoundError(f"no folder smollm2-{book}-{num_tokens}* in {root}")
    runs: dict[tuple[str, float], dict] = {}
    for folder in folders:
        for result in load_long_context_results(folder):
            key = (result["run"]["method"], run_stretch(result))
            if key in runs:
                raise ValueError(f"two stored runs for book={book!r}, (method, κ)={key}")
            runs[key] = result
    return runs


def block_perplexity(result: dict) -> torch.Tensor:
    """Perplexity per block of positions of one stored run: float32 ``[blocks]``.

    Raises:
        ValueError: if the result holds no blocks.
    """
    if not result.get("blocks"):
        raise ValueError(f"the result {result.get('name')!r} holds no blocks")
    return torch.tensor([b["perplexity"] for b in result["blocks"]])


def block_perplexity_at(result: dict, length: int) -> float:
    """The perplexity of the stored block that holds a window's last position, L − 1, in
    one long-context run: what a pass of ``length`` tokens meets at its end.

    A pass of N tokens makes N − 1 predictions, so the run's last block ends at position
    N − 2 (16 382 for 16 384 tokens); a window of the run's full length reads that block.

    Args:
        result: one stored run (:func:`load_long_context_results`), whose ``blocks``
            hold ``first_position``, ``last_position`` and ``perplexity``.
        length: the window length L in tokens, ≥ 1.

    Returns:
        The block's perplexity.

    Raises:
        ValueError: for ``length`` < 1 or a result without blocks.
    """
    if length < 1:
        raise ValueError(f"length must be positive, got length={length}")
    blocks = result.get("blocks")
    if not blocks:
        raise ValueError(f"the result {result.get('name')!r} holds no blocks")
    p = min(length - 1, blocks[-1]["last_position"])
    (block,) = [b for b in blocks if b["first_position"] <= p <= b["last_position"]]
    return block["perplexity"]


def transformers_dynamic_stretch(factor: float, seq_len: int, head_dim: int, base: float,
                                 context_length: int) -> torch.Tensor:
    """:func:`~posenc_lib.encodings.rope_scaling.pair_stretch` of dynamic NTK, from transformers' own
    ``ROPE_INIT_FUNCTIONS["dynamic"]`` (needs transformers), to check the library's rule.

    Args:
        factor: dynamic NTK's ``factor``.
        seq_len: the length of the pass.
        head_dim, base: the head width and RoPE base.
        context_length: the trained context (``max_position_embeddings``).

    Returns:
        float64 ``[d/2]``: θ_i / θ'_i.
    """
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from posenc_lib.encodings.rope import rope_inverse_frequencies

    config = LlamaConfig(
        hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
        max_position_embeddings=context_length,
        rope_parameters={"rope_type": "dynamic", "factor": factor, "rope_theta": base})
    theta, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, None, seq_len=seq_len)
    return rope_inverse_frequencies(head_dim, base) / theta.double()


def float32_angle_rounding(first: int, count: int, inverse_frequencies: torch.Tensor
                           ) -> tuple[float, float, int]:
    """How far float32 angles p θ_i, for positions first … first + count − 1, are off.

    Args:
        first: the first position.
        count: how many positions.
        inverse_frequencies: float32 θ_i, ``[d/2]``, taken as exact.

    Returns:
        ``(error, half_ulp, octave)``: the largest |float32 product − exact product| in
        radians; half a unit in the last place of the largest inexact angle (pairs 1 on;
        pair 0's angles p · 1 are integers); and e with that angle in [2^e, 2^(e+1)).
    """
    positions = torch.arange(first, first + count)
    exact = positions.double()[:, None] * inverse_frequencies.double()
    float32 = positions.float()[:, None] * inverse_frequencies
    error = (float32.double() - exact).abs().max().item()
    largest = float32[:, 1:].max()
    half_ulp = (torch.nextafter(largest, torch.tensor(math.inf)) - largest).item() / 2
    return error, half_ulp, math.floor(math.log2(largest))


def run_provenance_table(runs: Mapping[str, Mapping], labels: Mapping) -> pd.DataFrame:
    """Where and when each stored run was made, one row per (text, run).

    Args:
        runs: text title → {key → stored result} (:func:`read_long_context_runs`); a
            result has ``provenance`` (``git_commit``, ``finished_utc``) and ``timing``
            (``forward_wall_s``).
        labels: key → the run's name in the table; the rows follow its order.

    Returns:
        Columns "git commit" (7 characters), "finished (UTC)" (to the minute) and
        "forward pass (s)" (rounded to whole seconds), index ``(text, run)``.

    Raises:
        ValueError: if ``runs`` or ``labels`` is empty.
        KeyError: for a key of ``labels`` that a text lacks.
    """
    if not runs or not labels:
        raise ValueError(f"need runs and labels, got {len(runs)} texts, "
                         f"{len(labels)} labels")
    found = [(title, key, by_key[key]) for title, by_key in runs.items() for key in labels]
    return pd.DataFrame({
        "git commit": [r["provenance"]["git_commit"][:7] for *_, r in found],
        "finished (UTC)": [r["provenance"]["finished_utc"][:16] for *_, r in found],
        "forward pass (s)": [round(r["timing"]["forward_wall_s"]) for *_, r in found],
    }, index=pd.MultiIndex.from_tuples([(t, labels[k]) for t, k, _ in found],
                                       names=["text", "run"]))
