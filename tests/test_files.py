"""Result files: write_atomic (the destination holds the old file or the whole new one, never a
half), the records of a run, and ResultFiles (resuming planned runs from their files)."""

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


def test_result_files_skip_stored_runs_store_new_ones_and_refuse_another_configuration(tmp_path) -> None:
    from dataclasses import asdict, dataclass

    from posenc_lib.records import ResultFiles

    @dataclass(frozen=True)
    class Run:
        name: str
        steps: int

        def to_dict(self) -> dict:
            return asdict(self)

    plan = [Run("a", 1), Run("b", 1)]
    first = ResultFiles(plan[:1], tmp_path / "out")  # the folder is created
    assert first.todo == plan[:1] and first.done == "0 of 1 already done"
    first.store(plan[0], {"run": plan[0].to_dict(), "value": 1})
    again = ResultFiles(plan, tmp_path / "out")
    assert again.todo == plan[1:] and again.done == "1 of 2 already done"
    again.store(plan[1], {"run": plan[1].to_dict(), "value": 2})
    assert [r["value"] for r in again.in_plan_order()] == [1, 2]
    assert ResultFiles(plan, tmp_path / "out", overwrite=True).todo == plan
    with pytest.raises(FileExistsError, match="different configuration; use a new --out or --overwrite"):
        ResultFiles([Run("a", 2)], tmp_path / "out")
