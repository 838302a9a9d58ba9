import time

import pytest
import torch
import torch.utils.benchmark as tb

from course_lib.timing import Timing, benchmark, format_seconds, synchronize


def test_timing_statistics():
    t = Timing("x", [1.0, 2.0, 3.0, 4.0, 100.0])
    assert t.median == 3.0
    assert t.min == 1.0
    assert t.iqr == pytest.approx(2.0)
    assert "median 3 s" in str(t)


def test_format_seconds_picks_units():
    assert format_seconds(2.5) == "2.5 s"
    assert format_seconds(0.0123) == "12.3 ms"
    assert format_seconds(4.2e-6) == "4.2 us"
    assert format_seconds(8e-10) == "0.8 ns"


def test_warmup_and_repeat_counts():
    calls = []
    timing = benchmark(lambda: calls.append(1), warmup=3, repeat=4, number=5)
    assert len(calls) == 3 + 4 * 5
    assert len(timing.times) == 4 and timing.number == 5


def test_warmup_keeps_a_slow_first_call_out():
    state = {"n": 0}

    def slow_first():
        state["n"] += 1
        time.sleep(0.2 if state["n"] == 1 else 0.001)

    timing = benchmark(slow_first, warmup=1, repeat=5, number=1)
    assert timing.median < 0.05


def test_number_is_chosen_for_fast_functions():
    timing = benchmark(lambda: None, repeat=3, min_repeat_time=0.01)
    assert timing.number > 100
    assert timing.median < 1e-4


def test_agrees_with_torch_utils_benchmark():
    a = torch.randn(256, 256)
    b = torch.randn(256, 256)
    ours = benchmark(lambda: torch.mm(a, b), repeat=7).median
    theirs = tb.Timer("torch.mm(a, b)", globals={"a": a, "b": b}).blocked_autorange(min_run_time=0.5).median
    assert 1 / 3 < ours / theirs < 3


def test_synchronize_accepts_cpu_and_none():
    synchronize(None)
    synchronize("cpu")
    synchronize(torch.device("cpu"))
