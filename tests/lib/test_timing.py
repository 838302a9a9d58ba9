import time

import pytest
import torch
import torch.utils.benchmark as tb

from course_lib.hardware import cpu_info
from course_lib.roofline import measure
from course_lib.timing import Timing, benchmark, device_name, format_seconds, measured_on, synchronize


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


@pytest.fixture
def fake_cuda(monkeypatch):
    """Pretend torch sees one CUDA GPU named 'Fake H100 80GB' (no real CUDA call is made)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Fake H100 80GB")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    return "Fake H100 80GB"


def test_timing_records_device_and_threads():
    threads = torch.get_num_threads()
    t = benchmark(lambda: None, repeat=2, number=10)
    assert t.device == "cpu" and t.threads == threads
    assert t.measured_on().startswith("measured here on: ")
    assert f"{threads} thread" in t.measured_on()
    assert benchmark(lambda: None, device=None, repeat=1, number=1).device == "cpu"


def test_cpu_timing_is_never_labelled_with_the_gpu(fake_cuda):
    cpu_timing = benchmark(lambda: sum(range(100)), repeat=2, number=10)
    assert cpu_timing.device == "cpu"
    assert fake_cuda not in cpu_timing.measured_on()
    assert cpu_info().model in cpu_timing.measured_on()
    gpu_timing = benchmark(lambda: None, device="cuda", repeat=2, number=10)
    assert gpu_timing.device == "cuda:0"
    assert fake_cuda in gpu_timing.measured_on()
    assert cpu_info().model not in gpu_timing.measured_on()


def test_measured_on_for_figures_taken_without_benchmark(fake_cuda):
    assert "(CPU, 3 threads of " in measured_on("cpu", threads=3)
    assert fake_cuda not in measured_on("cpu")
    assert fake_cuda in measured_on(torch.device("cuda", 0))
    assert device_name(None) == "cpu" and device_name("cuda") == "cuda:0"


def test_roofline_of_the_cpu_is_labelled_with_the_cpu(fake_cuda):
    roof = measure(device="cpu", n=32, nbytes=2**16)
    assert fake_cuda not in roof.device and "CPU" in roof.device
