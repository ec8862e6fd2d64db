"""write_atomic: the destination holds the old file or the whole new one, never a half."""

import pytest

from posenc_lib.records import write_atomic


def test_writes_and_replaces(tmp_path) -> None:
    path = tmp_path / "result.json"
    write_atomic(path, lambda f: f.write(b"first"))
    write_atomic(path, lambda f: f.write(b"second"))
    assert path.read_bytes() == b"second"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary left behind


def test_failed_write_keeps_the_old_file(tmp_path) -> None:
    path = tmp_path / "result.json"
    write_atomic(path, lambda f: f.write(b"old"))

    def broken(f) -> None:
        f.write(b"half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_atomic(path, broken)
    assert path.read_bytes() == b"old"


def test_records_holds_the_result_format_dtype_names_and_provenance(tmp_path) -> None:
    import json

    import torch

    from posenc_lib import records

    assert records.RESULT_FORMAT == 1
    assert records.DTYPE_NAMES["float16"] is torch.float16
    assert set(records.RUN_DTYPES) == {"float32", "bfloat16"} <= set(records.DTYPE_NAMES)
    prov = records.provenance("cpu")
    assert prov["device_type"] == "cpu" and prov["torch_threads"] >= 1
    assert records.peak_memory(torch.device("cpu"))["peak_memory_bytes"] > 0
    records.write_json_atomic(tmp_path / "r.json", {"a": 1})
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1}
    with pytest.raises(ValueError):
        records.write_json_atomic(tmp_path / "r.json", {"a": float("nan")})
