"""The benchmark suite (tools/benchmarks/) runs end to end from its one command and stores its
results with provenance. A smoke test: one repeat, the quick sizes, nothing timed is
checked.
"""

import json
from pathlib import Path

from tools.benchmarks.__main__ import main


def test_every_suite_runs_and_saves_json(tmp_path: Path, capsys) -> None:
    argv = [
        "all",
        "--quick",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--no-compile",
        "--no-progress",
        "--device",
        "cpu",
        "--out",
        str(tmp_path),
        "--label",
        "smoke",
    ]
    assert main(argv) == 0
    files = sorted(tmp_path.glob("*.json"))
    assert [f.name.split("-")[0] for f in files] == ["attention", "model", "rope"]
    for file in files:
        record = json.loads(file.read_text())
        assert record["label"] == "smoke" and record["rows"]
        assert record["environment"]["device_type"] == "cpu"
        assert record["environment"]["torch_threads"] >= 1
        assert record["command"].startswith("python -m tools.benchmarks all --quick")
    printed = capsys.readouterr().out
    assert "RoPE application" in printed and "tokens/s" in printed
    rope = json.loads(files[2].read_text())
    variants = {row["variant"] for row in rope["rows"]}
    assert {
        "naive rotate-half",
        "posenc_lib apply_rope",
        "posenc_lib apply_rope, out= an existing tensor",
        "copy into a new tensor (x.clone())",
        "copy into an existing tensor (64 MiB float32)",
    } <= variants
