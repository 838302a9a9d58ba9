import json
import os
import tempfile
from pathlib import Path

import matplotlib
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from course_lib import profile, trace
from course_lib.data import SlowDataset
from course_lib.models import LeNet

matplotlib.use("Agg")


def _loader(batches=4, batch_size=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batches * batch_size, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (batches * batch_size,), generator=gen)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size)


def _event(name, start, duration, category="cpu_op", tid=1, **extra):
    return {"ph": "X", "cat": category, "name": name, "ts": start, "dur": duration, "pid": 7,
            "tid": tid, "args": extra}


@pytest.fixture(scope="module")
def lenet_profile():
    torch.manual_seed(0)
    return trace.record_training(LeNet(), _loader(), steps=3, warmup=1)


@pytest.fixture(scope="module")
def lenet_trace(lenet_profile, tmp_path_factory):
    """The Chrome trace of ``lenet_profile`` (a profile can be exported once only)."""
    return trace.export_trace(lenet_profile, tmp_path_factory.mktemp("traces") / "lenet.json")


def test_record_training_marks_data_and_step_ranges(lenet_trace):
    loaded = trace.load_trace(lenet_trace)
    totals = trace.summarise_ranges(loaded.events)
    assert totals.counts[trace.DATA_RANGE] == totals.counts[trace.STEP_RANGE] == 3
    assert totals.seconds[trace.DATA_RANGE] > 0 and totals.seconds[trace.STEP_RANGE] > 0
    assert totals.share("step") + totals.share("data") == pytest.approx(1.0)
    assert "Optimizer.step#Adam.step" in totals.seconds  # ranges torch marks itself are kept
    assert totals.share("step", among=("step", "Optimizer.step#Adam.step")) < 1.0
    steps = loaded.ranges("step")
    # every convolution of the forward pass runs inside a step range
    convs = [e for e in loaded.events if e.name == "aten::conv2d"]
    assert len(convs) == 2 * 3
    assert all(any(s.start_us <= c.start_us and c.end_us <= s.end_us for s in steps) for c in convs)


def test_load_trace_times_start_at_zero_and_memory_is_read(lenet_trace):
    path = lenet_trace
    loaded = trace.load_trace(path)
    assert min(e.start_us for e in loaded.events) == 0 or min(s.time_us for s in loaded.memory) == 0
    assert [e.start_us for e in loaded.events] == sorted(e.start_us for e in loaded.events)
    assert loaded.memory and {s.device for s in loaded.memory} == {"cpu"}
    assert any(s.change_bytes > 0 for s in loaded.memory) and any(s.change_bytes < 0 for s in loaded.memory)
    addmm = next(e for e in loaded.events if e.name == "aten::addmm")
    assert addmm.args["Input Dims"][1] == [4, 400]  # record_shapes: fc1 on a batch of 4
    assert trace.load_trace(json.loads(path.read_text())).events == loaded.events


def test_load_trace_keeps_complete_events_only():
    raw = {"traceEvents": [
        _event("b", 110.0, 5.0), _event("a", 100.0, 30.0),
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 120.0, "pid": 7, "tid": 1,
         "args": {"Total Allocated": 4096, "Bytes": 1024, "Device Type": 1, "Device Id": 0}},
        {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "python"}},
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "ts": 90.0, "id": 1}]}
    loaded = trace.load_trace(raw)
    assert [(e.name, e.start_us, e.end_us) for e in loaded.events] == [("a", 0.0, 30.0), ("b", 10.0, 15.0)]
    assert loaded.memory == [trace.MemorySample(20.0, 4096, 1024, "cuda:0")]


def test_summaries_of_a_hand_made_trace():
    events = trace.load_trace({"traceEvents": [
        _event("data", 0, 50, "user_annotation"), _event("step", 50, 150, "user_annotation"),
        _event("aten::linear", 60, 40), _event("aten::addmm", 61, 38),
        _event("aten::linear", 120, 20), _event("aten::addmm", 121, 18),
        _event("data", 200, 70, "user_annotation"), _event("ampere_sgemm", 70, 25, "kernel", tid=9)]}).events
    ops = trace.summarise_ops(events)
    assert [(op.name, op.calls, op.total_us) for op in ops] == [("aten::linear", 2, 60.0), ("aten::addmm", 2, 56.0)]
    assert [op.name for op in trace.summarise_ops(events, "kernel")] == ["ampere_sgemm"]
    ranges = trace.summarise_ranges(events)
    assert ranges.counts == {"data": 2, "step": 1}
    assert ranges.seconds["data"] == pytest.approx(120e-6)
    assert ranges.share("step") == pytest.approx(150 / 270)
    assert ranges.share("step", among=("step",)) == 1.0
    assert trace.summarise_ranges([]).share("data") == 0.0


def test_nesting_depths_per_lane():
    events = trace.load_trace({"traceEvents": [
        _event("outer", 0, 100), _event("mid", 10, 50), _event("inner", 20, 10), _event("next", 70, 20),
        _event("same-start-shorter", 0, 5), _event("kernel", 15, 40, "kernel", tid=2)]}).events
    depth = dict(zip([e.name for e in events], trace.nesting_depths(events)))
    assert depth == {"outer": 0, "same-start-shorter": 1, "mid": 1, "inner": 2, "next": 1, "kernel": 0}


def test_op_flops_agree_with_profile_ops(lenet_profile):
    rows = trace.op_flops(lenet_profile)
    convs = [r for r in rows if r.name == "aten::conv2d"]
    layers = {layer.name: layer for layer in profile.profile_ops(LeNet(), (4, 1, 28, 28)).layers}
    by_weight = {r.input_shapes[1]: r for r in convs}
    assert by_weight[(6, 1, 5, 5)].flops == layers["conv1"].flops
    assert by_weight[(16, 6, 5, 5)].flops == layers["conv2"].flops
    assert all(r.calls == 3 and r.cpu_us > 0 for r in convs)
    assert [r.cpu_us * r.calls for r in rows] == sorted((r.cpu_us * r.calls for r in rows), reverse=True)


def test_op_table_fits_a_slide(lenet_profile):
    table = trace.op_table(lenet_profile, rows=5)
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 110
    assert "Self CPU" in lines[1] and "# of Calls" in lines[1] and "%" not in lines[1]
    assert "FLOPs" in lines[1] and lines[-1].startswith("Self CPU time total")
    assert len([line for line in lines if line.strip() and line[0] not in "-S" and "Name" not in line]) == 5


def test_record_hides_profiler_notices_but_not_other_stderr(capfd):
    def work():
        os.write(2, b"a message of the profiled code\n")
        torch.ones(8) + 1

    prof = trace.record(work, steps=2, warmup=0, profile_memory=False)
    err = capfd.readouterr().err
    assert err.count("a message of the profiled code") == 2
    assert "USDT" not in err and "profiler_st" not in err
    assert any(e.key == "aten::add" for e in prof.key_averages())


def test_record_training_refuses_a_short_loader():
    with pytest.raises(ValueError, match="3 batches; 4 are needed"):
        trace.record_training(LeNet(), _loader(batches=3), steps=3, warmup=1)


def test_a_starved_loader_shows_in_the_ranges(tmp_path):
    # 60 ms per sample. What was recorded is checked, not how fast this machine was: the data
    # ranges hold at least the loader's sleeps (a lower bound whatever the load), one range per
    # recorded step; which share is larger depends on the machine (a LeNet step on 4 images took
    # about 10 ms here and 190 ms on a loaded CI machine), so the lecture shows it, measured
    slow = DataLoader(SlowDataset(TensorDataset(torch.randn(12, 1, 28, 28), torch.arange(12) % 10), 0.06),
                      batch_size=4)
    prof = trace.record_training(LeNet(), slow, steps=2, warmup=1)
    loaded = trace.load_trace(trace.export_trace(prof, tmp_path / "slow.json"))
    ranges = trace.summarise_ranges(loaded.events)
    assert ranges.counts["data"] == ranges.counts["step"] == 2, ranges.counts
    assert ranges.seconds["data"] >= 2 * 4 * 0.06  # two batches of four 60 ms sleeps


def test_activities_follow_the_device(monkeypatch):
    assert trace.activities("cpu") == [torch.profiler.ProfilerActivity.CPU]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert trace.activities("cuda") == [torch.profiler.ProfilerActivity.CPU]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a fake GPU
    assert trace.activities("cuda:0")[-1] == torch.profiler.ProfilerActivity.CUDA
    assert trace.activities("cpu") == [torch.profiler.ProfilerActivity.CPU]


def test_trace_dir_and_bare_names(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_TRACE_DIR", str(tmp_path / "traces"))
    assert trace.trace_dir() == tmp_path / "traces"
    path = trace.export_trace(trace.record(lambda: torch.ones(4) * 2, warmup=0), "step.json")
    assert path == tmp_path / "traces" / "step.json" and path.stat().st_size > 100
    monkeypatch.delenv("COURSE_TRACE_DIR")
    repo = Path(trace.__file__).resolve().parents[1]
    assert trace.trace_dir() in (repo / "build" / "traces", Path(tempfile.gettempdir()) / "course_lib_traces")


def test_plot_timeline_and_memory(lenet_trace):
    loaded = trace.load_trace(lenet_trace)
    step = loaded.ranges("step")[-1]
    ax = trace.plot_timeline(loaded.events, start_us=step.start_us, end_us=step.end_us, max_depth=3)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0].startswith("CPU thread") and len(labels) == 4
    assert ax.get_xlim() == pytest.approx((0, step.duration_us / 1e3))
    assert "step" in [t.get_text() for t in ax.texts]
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"step", "cpu_op"}
    mem = trace.plot_memory(loaded.memory, start_us=step.start_us, end_us=step.end_us)
    assert len(mem.lines[0].get_xdata()) > 10
    with pytest.raises(ValueError):
        trace.plot_timeline(loaded.events, start_us=1e12, end_us=2e12)


def test_plot_timeline_puts_gpu_streams_in_their_own_band():
    events = trace.load_trace({"traceEvents": [
        _event("step", 0, 100, "user_annotation"), _event("aten::mm", 10, 20),
        _event("cudaLaunchKernel", 12, 5, "cuda_runtime"), _event("sgemm", 20, 60, "kernel", tid=7)]}).events
    ax = trace.plot_timeline(events)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["CPU thread 1", "CPU thread 1 · 1", "CPU thread 1 · 2", "GPU stream 7"]
