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
