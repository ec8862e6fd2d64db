"""Stored passkey runs of a pretrained model: scoring one long window, and the tables.

:mod:`posenc_lib.tasks.retrieval` builds the windows
(:func:`~posenc_lib.tasks.retrieval.make_passkey`,
:func:`~posenc_lib.tasks.retrieval.sample_passkeys`). A stored run (e.g.
``results/pretrained/smollm2-passkey.json``, made by
``tools/runs/pretrained_passkey.py``) holds one row per forward pass::

    {"method": "yarn", "length": 16384, "depth": 0.5, "key": "04721",
     "needle_token": 8170, "correct": true, "digits_correct": 5, "seconds": 612.3}

:func:`score_passkey_lm` scores one window of a transformers causal LM in one forward
pass without the full logits (at 16 384 tokens they would take 3.2 GB);
:func:`passkey_table` turns rows into a method × length accuracy table or a depth ×
length map (pandas); :func:`with_identical_rows` adds the rows of a method that is
provably the same computation as another (dynamic NTK inside the trained context).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

ROW_FIELDS: tuple[str, ...] = ("method", "length", "depth", "key", "needle_token",
                               "correct", "digits_correct", "seconds")
"""The fields of one stored row, in order."""


def score_passkey_lm(model, example, key_tokens: int) -> dict:
    """Greedy exact match of one passkey window of a transformers causal LM.

    As :func:`~posenc_lib.tasks.retrieval.score_passkeys`: greedy decoding returns the answer
    iff, with the true answer fed in, the argmax at every answer position is the true
    next token; so one forward pass decides it. Only the hidden states of the answer's
    positions go through the output projection.

    Args:
        model: a transformers causal LM (``model.model`` the decoder, ``model.lm_head``
            the output projection), in eval mode.
        example: a :class:`~posenc_lib.tasks.retrieval.PasskeyExample`.
        key_tokens: how many of the answer's last tokens are the key's digits (with
            one token per digit, the number of digits).

    Returns:
        ``{"correct": bool, "digits_correct": int}``: every answer token right, and how
        many of the last ``key_tokens`` answer tokens are right (teacher-forced: each
        given the true tokens before it).

    Raises:
        ValueError: if ``key_tokens`` is not in 1 … answer tokens.
    """
    tokens = example.tokens
    answer = tokens[example.answer_start :]  # (A)
    if not 1 <= key_tokens <= answer.numel():
        raise ValueError(f"key_tokens must be in 1 … {answer.numel()} (the answer's "
                         f"tokens), got key_tokens={key_tokens}")
    (predicted,) = argmax_at_answers(model, tokens, [(example.answer_start, tokens.numel())])
    right = predicted == answer
    return {"correct": bool(right.all()),
            "digits_correct": int(right[-key_tokens:].sum())}


def argmax_at_answers(model, tokens, spans: Sequence[tuple[int, int]]) -> list:
    """The greedy next token before each answer token of a transformers causal LM, in one
    forward pass, with only those positions through the output projection.

    Args:
        model: a transformers causal LM (``model.model`` the decoder, ``model.lm_head``).
        tokens: int ``[L]``, one window.
        spans: ``[start, end)`` of each answer, 1 ≤ start < end ≤ L.

    Returns:
        One int64 ``[end − start]`` tensor (CPU) per span: the argmax after positions
        ``start − 1 … end − 2``.

    Raises:
        ValueError: for a span outside the window.
    """
    import torch

    for start, end in spans:
        if not 1 <= start < end <= tokens.numel():
            raise ValueError(f"spans must satisfy 1 <= start < end <= {tokens.numel()}, got "
                             f"({start}, {end})")
    device = next(model.parameters()).device
    with torch.no_grad():
        hidden = model.model(input_ids=tokens.long().to(device)[None]).last_hidden_state[0]
        at = torch.cat([torch.arange(start - 1, end - 1) for start, end in spans]).to(device)
        predicted = model.lm_head(hidden[at]).float().argmax(-1).cpu()
    return list(predicted.split([end - start for start, end in spans]))


def score_recall_lm(model, window) -> list[dict]:
    """Greedy exact match of each query of one recall window
    (:class:`~posenc_lib.tasks.recall.RecallWindow`, built with the model's tokenizer as
    ``encode``) of a transformers causal LM, in one forward pass.

    Returns:
        One dict per query, in the order asked: :meth:`RecallWindow.judge
        <posenc_lib.tasks.recall.RecallWindow.judge>`'s ``correct``, ``right_tokens``,
        ``tokens`` and ``distractor`` (a later query sees the true earlier answers).
    """
    predicted = argmax_at_answers(model, window.tokens, window.answer_spans)
    return [window.judge(q, p) for q, p in zip(window.queries, predicted)]


def with_identical_rows(rows: Sequence[Mapping], method: str, same_as: str,
                        up_to_length: int) -> list[dict]:
    """The rows, plus a copy of every ``same_as`` row of length ≤ ``up_to_length``
    relabelled ``method`` (its ``seconds`` set to 0: nothing ran).

    For a method that is the same computation as another at those lengths (dynamic
    NTK inside the trained context is plain RoPE), so that it was run once.

    Raises:
        ValueError: if ``method`` already has a row at such a length.
    """
    clash = [r for r in rows if r["method"] == method and r["length"] <= up_to_length]
    if clash:
        raise ValueError(f"{method!r} already has {len(clash)} rows at lengths <= "
                         f"{up_to_length}; nothing to copy")
    copies = [{**r, "method": method, "seconds": 0.0} for r in rows
              if r["method"] == same_as and r["length"] <= up_to_length]
    return [dict(r) for r in rows] + copies


def passkey_table(rows: Iterable[Mapping], index: str = "method",
                  columns: str = "length", *, values: str = "correct",
                  aggfunc: str = "mean", where: Mapping | None = None,
                  order: Sequence | None = None) -> pd.DataFrame:
    """Rows of passkey results → a table, e.g. method × length accuracy.

    Args:
        rows: dicts with (at least) the fields of :data:`ROW_FIELDS`.
        index, columns: the fields along the rows and columns of the table
            (``"method"`` × ``"length"`` for accuracy per method, ``"depth"`` ×
            ``"length"`` with ``where={"method": …}`` for one method's map).
        values: the field aggregated: ``"correct"`` (a bool: the mean is the share of
            keys returned exactly) or ``"digits_correct"``.
        aggfunc: ``"mean"``, ``"sum"`` or ``"count"`` (windows per cell).
        where: keep only rows whose fields equal these values.
        order: the index's order (e.g. the methods in the book's order); entries
            without rows are left out; by default, sorted.

    Returns:
        A DataFrame, index ``index`` and columns ``columns`` (sorted); a cell without
        rows is NaN.

    Raises:
        ValueError: if no row is left, or a field is missing from a row.
    """
    kept = []
    for row in rows:
        for field in (index, columns, values, *(where or {})):
            if field not in row:
                raise ValueError(f"a row lacks the field {field!r}: {dict(row)}")
        if all(row[k] == v for k, v in (where or {}).items()):
            kept.append(row)
    if not kept:
        raise ValueError(f"no rows left (where={dict(where or {})})")
    frame = pd.DataFrame(kept)
    frame[values] = frame[values].astype(float)
    table = frame.pivot_table(index=index, columns=columns, values=values,
                              aggfunc=aggfunc, dropna=False)
    table = table.sort_index(axis=1)
    if order is not None:
        table = table.reindex([k for k in order if k in table.index])
    return table
