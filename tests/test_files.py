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
