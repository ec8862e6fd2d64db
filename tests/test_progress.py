"""Progress bars redraw a number of times fixed by the work, not by the clock (issue 14).

In a Jupyter kernel every redraw that is flushed is one output message, and nbval fails
a cell whose messages overflow the kernel's output queue. So the count of flushes must
not grow with how slowly the work runs.
"""

import io
import itertools
import pathlib
import re

import pytest

from posenc_lib.training import progress
from posenc_lib.training.progress import MAX_REDRAWS, progress_bar
from posenc_lib.model.transformer import ModelConfig
from posenc_lib.training.train import TrainConfig, train


class FlushCounter(io.StringIO):
    """A stderr stand-in that counts flushes (one kernel message each)."""

    flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def fake_clock(seconds_per_call: float):
    """A stand-in for time.time that advances by ``seconds_per_call`` at each call."""
    ticks = itertools.count()
    return lambda: next(ticks) * seconds_per_call


@pytest.mark.parametrize("seconds_per_call", [0.0, 0.001, 1.0, 60.0])
def test_redraws_do_not_depend_on_speed(monkeypatch, seconds_per_call):
    stream = FlushCounter()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr("tqdm.std.time", fake_clock(seconds_per_call))
    for _ in progress_bar(range(100_000), desc="work"):
        pass
    # MAX_REDRAWS during the loop, plus the first draw, the last one and its newline
    assert 2 <= stream.flushes <= MAX_REDRAWS + 3
    assert "100000/100000" in stream.getvalue()


def test_a_slow_run_sends_as_many_messages_as_a_fast_one(monkeypatch):
    counts = []
    for seconds_per_call in (0.0, 100.0):
        stream = FlushCounter()
        monkeypatch.setattr("sys.stderr", stream)
        monkeypatch.setattr("tqdm.std.time", fake_clock(seconds_per_call))
        for _ in progress_bar(range(5_000), desc="work"):
            pass
        counts.append(stream.flushes)
    assert counts[0] == counts[1]


def test_a_bar_advanced_by_hand_is_bounded_too(monkeypatch):
    stream = FlushCounter()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr("tqdm.std.time", fake_clock(5.0))
    with progress_bar(desc="layers", total=1000) as bar:
        for _ in range(1000):
            bar.update(1)
    assert stream.flushes <= MAX_REDRAWS + 3


def test_a_short_bar_draws_each_item(monkeypatch):
    stream = FlushCounter()
    monkeypatch.setattr("sys.stderr", stream)
    for _ in progress_bar(range(3), desc="runs"):
        pass
    assert "3/3" in stream.getvalue()


def test_a_disabled_bar_prints_nothing(monkeypatch):
    stream = FlushCounter()
    monkeypatch.setattr("sys.stderr", stream)
    assert list(progress_bar(range(5), desc="quiet", enabled=False)) == [0, 1, 2, 3, 4]
    assert stream.getvalue() == ""


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="total must be >= 0"):
        progress_bar(desc="x", total=-1)
    with pytest.raises(ValueError, match="needs total="):
        progress_bar(iter([1, 2]), desc="x")


def test_training_bar_is_bounded_on_a_slow_clock(monkeypatch):
    config = TrainConfig(model=ModelConfig(position="alibi", d_model=32, num_layers=1, num_heads=2),
                         seq_len=32, batch_size=4, steps=200)
    stream = FlushCounter()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr("tqdm.std.time", fake_clock(10.0))  # as if each step took ten seconds
    train(config)
    assert stream.flushes <= MAX_REDRAWS + 3


def test_every_bar_in_the_library_and_benchmarks_is_a_progress_bar():
    root = pathlib.Path(__file__).resolve().parents[1]
    direct = re.compile(r"\btqdm\(")
    folders = ("posenc_lib", "tools/benchmarks")
    assert all((root / folder).is_dir() for folder in folders), folders  # a moved folder fails here
    offenders = [str(path.relative_to(root)) for folder in folders
                 for path in sorted((root / folder).rglob("*.py"))
                 if path.name != pathlib.Path(progress.__file__).name and direct.search(path.read_text())]
    assert offenders == []
