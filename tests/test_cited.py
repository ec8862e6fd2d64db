"""posenc_book.cited: published tables, copied (cited, not measured)."""

import pytest

from posenc_book.cited import press_2022_speeds


def test_press_table_as_published_and_relative_to_sinusoidal() -> None:
    table = press_2022_speeds()
    assert table.loc[("ALiBi", 512), "eval"] == 85.8
    assert len(table) == 12 and list(table.columns) == ["train", "eval", "memory (GB)"]
    relative = press_2022_speeds("Sinusoidal")
    assert list(relative.index) == ["RoPE", "T5 bias", "ALiBi"]
    assert round(relative.loc["T5 bias", ("train", 1024)], 2) == 0.50
    with pytest.raises(ValueError, match="'NoPE'"):
        press_2022_speeds("NoPE")
