"""Published measurements the book compares with, copied from their sources (cited, not
measured): one home for each table, with the place it comes from."""

from __future__ import annotations

PRESS_2022_TABLE_1: tuple[tuple[str, int, float, float, float], ...] = (
    ("Sinusoidal", 512, 28.5, 82.1, 15.3), ("Sinusoidal", 1024, 26.0, 77.8, 19.2),
    ("Sinusoidal", 3072, 15.3, 42.4, 15.1), ("RoPE", 512, 20.0, 43.4, 17.8),
    ("RoPE", 1024, 17.7, 39.4, 22.8), ("RoPE", 3072, 11.5, 29.5, 17.8),
    ("T5 bias", 512, 14.4, 21.8, 16.9), ("T5 bias", 1024, 13.0, 20.2, 20.9),
    ("T5 bias", 3072, 4.3, 4.9, 15.9), ("ALiBi", 512, 28.3, 85.8, 15.3),
    ("ALiBi", 1024, 25.8, 76.4, 19.3), ("ALiBi", 3072, 15.5, 42.2, 15.2),
)
"""Press, Smith and Lewis (2022), *Train Short, Test Long*, Appendix Table 1: one V100 GPU,
a 16-layer model of width 1024 on WikiText-103. Rows ``(scheme, L_train, train, eval,
memory)``: training and evaluation speed in thousands of words per second (evaluation at
L = L_train), training memory in GB."""


def press_2022_speeds(relative_to: str | None = None):
    """Press et al.'s Appendix Table 1 (:data:`PRESS_2022_TABLE_1`) as a table.

    Args:
        relative_to: ``None`` for the table as published; or a scheme (e.g.
            ``"Sinusoidal"``) by whose speeds at the same ``L_train`` the ``train`` and
            ``eval`` speeds of every other scheme are divided.

    Returns:
        ``pandas.DataFrame``: as published, indexed by (``scheme``, ``L_train``) with
        columns ``train``, ``eval`` (thousand words/s) and ``memory (GB)``; relative,
        indexed by ``scheme`` (the others, in the table's order) with columns
        (``train`` | ``eval``, ``L_train``).

    Raises:
        ValueError: for a ``relative_to`` that is not a scheme of the table.
    """
    import pandas as pd

    table = pd.DataFrame(list(PRESS_2022_TABLE_1), columns=[
        "scheme", "L_train", "train", "eval", "memory (GB)"]).set_index(["scheme", "L_train"])
    if relative_to is None:
        return table
    schemes = list(dict.fromkeys(table.index.get_level_values("scheme")))
    if relative_to not in schemes:
        raise ValueError(f"relative_to must be one of {schemes}, got {relative_to!r}")
    base = table.loc[relative_to][["train", "eval"]]
    others = {s: table.loc[s][["train", "eval"]] / base for s in schemes if s != relative_to}
    return pd.concat(others, names=["scheme"]).unstack("L_train")


PRESS2022_PERPLEXITY: dict[str, dict[str, tuple[float, float, float]]] = {
    "nonoverlapping": {
        "sinusoidal": (20.05, 43.54, 132.41),
        "rope": (20.07, 21.37, 31.58),
        "t5": (19.65, 18.79, 20.41),
        "alibi": (19.73, 18.73, 18.41),
    },
    "sliding": {
        "sinusoidal": (18.35, 204.42, 306.19),
        "t5": (17.92, 18.51, 22.62),
        "alibi": (17.98, 17.92, 18.28),
    },
}
"""Perplexities cited (not measured) from Press, Smith and Lewis (2022), "Train Short,
Test Long", for L_train = 512 words on the WikiText-103 validation set, per protocol and
scheme: Table 2 (non-overlapping windows of L = 512, 1012, 2512 words) and Tables 13-15 of
Appendix B (sliding windows of stride 1, L = 512, 1024, 2048 words)."""

WT103_TOKENS: dict[str, int] = {"train": 103_227_021, "validation": 217_646}
"""Word-level tokens of WikiText-103 (cited, not measured; Merity et al. 2017, Table 1)."""

WT103_BYTES: dict[str, int] = {"train": 546_500_949, "validation": 1_159_288}
"""Bytes of the same text (cited, not measured; Hugging Face's copy, wikitext-103-raw-v1)."""

WT103_BYTES_PER_TOKEN = 5.3
"""Bytes per word token of WikiText-103, rounded: 5.29 (train) and 5.33 (validation) from
:data:`WT103_BYTES` / :data:`WT103_TOKENS`."""


def press_ratios() -> dict[str, dict[str, tuple[float, float]]]:
    """Press et al.'s perplexity ratios per word: PPL(L) / PPL(512) at their two longer
    lengths (about 2× and 4× L_train), per protocol and scheme, from
    :data:`PRESS2022_PERPLEXITY`."""
    return {p: {s: (v[1] / v[0], v[2] / v[0]) for s, v in table.items()}
            for p, table in PRESS2022_PERPLEXITY.items()}


HAVIV2022_PERPLEXITY: dict[str, dict[str, float]] = {
    "WikiText-103, 247M, L 512": {"none": 20.97, "learned": 20.42, "sinusoidal": 20.16,
                                  "alibi": 19.71},
    "Pile, 125M, L 1024": {"none": 22.15, "learned": 22.04, "sinusoidal": 21.49,
                           "alibi": 19.94},
    "Pile, 350M, L 1024": {"none": 16.87, "learned": 16.84, "sinusoidal": 16.58,
                           "alibi": 15.66},
    "Pile, 760M, L 1024": {"none": 14.29, "learned": 14.21, "sinusoidal": 14.04,
                           "alibi": 13.53},
    "Pile, 1.3B, L 1024": {"none": 13.10, "learned": 13.05, "sinusoidal": 12.93,
                           "alibi": 12.51},
    "Pile, 1.3B, L 256": {"none": 14.98, "learned": 14.94, "sinusoidal": 14.84,
                          "alibi": 14.65},
    "Pile, 1.3B, L 512": {"none": 13.82, "learned": 13.77, "sinusoidal": 13.66,
                          "alibi": 13.37},
    "Pile, 1.3B, L 2048": {"none": 12.87, "learned": 12.72, "sinusoidal": 12.62,
                           "alibi": 12.06},
}
"""Validation perplexity of causal language models without positions (NoPos) and with
learned, sinusoidal and ALiBi positions (cited, not measured; Haviv et al. 2022, Tables
1-3): setting (data, parameters, training length L in tokens) → scheme → perplexity."""


def haviv_perplexities():
    """:data:`HAVIV2022_PERPLEXITY` as a table: one row per setting, one column per scheme
    (raw names ``none``, ``learned``, ``sinusoidal``, ``alibi``), perplexities per token."""
    import pandas as pd

    return pd.DataFrame(HAVIV2022_PERPLEXITY).T
