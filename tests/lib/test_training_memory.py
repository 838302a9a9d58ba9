import math

import pytest
from torch import nn

from course_lib import training_memory
from course_lib.models import AlexNet, BasicFCModel, LeNet, ResNet18


def test_layer_memory_bytes_for_lenet():
    mem = {m.name: m for m in training_memory.profile_layer_mem(LeNet(), (2, 1, 28, 28)).layers}
    assert mem["conv1"].input_bytes == 2 * 28 * 28 * 4
    assert mem["conv1"].output_bytes == 2 * 6 * 28 * 28 * 4
    assert mem["conv1"].weight_bytes == (6 * 25 + 6) * 4
    assert mem["fc1"].weight_bytes == (400 * 120 + 120) * 4
    assert mem["fc1"].total_bytes == mem["fc1"].input_bytes + mem["fc1"].output_bytes + mem["fc1"].weight_bytes


def test_layer_memory_in_place_and_pass_through_layers_write_nothing_new():
    layers = {m.name: m for m in training_memory.profile_layer_mem(AlexNet(num_classes=10), (1, 3, 64, 64)).layers}
    assert layers["features.1"].output_bytes == 0  # ReLU(inplace=True)
    assert layers["classifier.0"].output_bytes == 0  # dropout in evaluation mode
    assert layers["features.0"].output_bytes > 0


def test_layer_memory_counts_batch_norm_buffers_and_largest():
    prof = training_memory.profile_layer_mem(ResNet18(num_classes=10, in_channels=1, small_input=True), (1, 1, 28, 28))
    bn = next(m for m in prof.layers if m.kind == "BatchNorm2d")
    assert bn.weight_bytes == 4 * 64 * 4  # weight, bias, running mean, running variance
    assert prof.largest.total_bytes == max(m.total_bytes for m in prof.layers)


def test_layer_memory_plot_stacks_three_parts():
    import matplotlib

    matplotlib.use("Agg")
    prof = training_memory.profile_layer_mem(LeNet(), (1, 1, 28, 28))
    ax = prof.plot(limit_bytes=100_000, limit_label="cache")
    assert len(ax.patches) == 3 * len(prof.layers)
    assert "conv1" in prof.table() and str(prof) == prof.table()


def test_activation_bytes_of_a_linear_layer():
    # autograd keeps the input of the linear layer (for the weight gradient) only
    model = nn.Sequential(nn.Linear(10, 5))
    assert training_memory.activation_bytes(model, (3, 10)) == 3 * 10 * 4


def test_activation_bytes_grow_linearly_with_batch():
    a1 = training_memory.activation_bytes(LeNet(), (1, 1, 28, 28))
    a8 = training_memory.activation_bytes(LeNet(), (8, 1, 28, 28))
    assert a8 == 8 * a1


def test_activation_bytes_meta_matches_cpu():
    model = BasicFCModel(hidden=32)
    assert training_memory.activation_bytes(model, (4, 1, 28, 28), device="cpu") == \
        training_memory.activation_bytes(model, (4, 1, 28, 28))


def test_profile_mem_split_by_optimizer():
    model = LeNet()
    params = sum(p.numel() for p in model.parameters()) * 4
    adam = training_memory.profile_mem(model, (4, 1, 28, 28), "adam")
    assert adam.parameters == adam.gradients == params
    assert adam.optimizer_state == 2 * params
    assert training_memory.profile_mem(model, (4, 1, 28, 28), "sgd").optimizer_state == 0
    assert training_memory.profile_mem(model, (4, 1, 28, 28), "momentum").optimizer_state == params
    assert adam.total == sum(adam.as_dict().values())
    assert "MiB" in str(adam)
    with pytest.raises(ValueError):
        training_memory.profile_mem(model, (4, 1, 28, 28), "lion")


def test_memory_split_pie():
    import matplotlib

    matplotlib.use("Agg")
    ax = training_memory.profile_mem(LeNet(), (4, 1, 28, 28)).plot()
    assert len(ax.patches) == 4


def test_memory_budget_and_largest_batch():
    model = LeNet()
    per_sample = training_memory.activation_bytes(model, (1, 1, 28, 28))
    fixed = training_memory.profile_mem(model, (1, 1, 28, 28)).total - per_sample
    budget = fixed + 37 * per_sample + per_sample // 2
    assert training_memory.largest_batch_under(model, (1, 28, 28), budget) == 37
    assert training_memory.largest_batch_under(model, (1, 28, 28), fixed) == 0
    assert training_memory.check_memory_budget(model, (37, 1, 28, 28), budget).total <= budget
    with pytest.raises(training_memory.MemoryBudgetExceeded, match="smaller batch"):
        training_memory.check_memory_budget(model, (38, 1, 28, 28), budget)


def test_alexnet_on_two_gpus():
    story = training_memory.alexnet_on_two_gpus(batch_size=128)
    assert story.split.parameters == 61_100_840 * 4
    assert story.split.optimizer_state == story.split.parameters  # momentum
    assert story.per_gpu_when_split == story.split.total / 2
    assert story.layers.input_shape == (128, 3, 224, 224)
    assert story.gpu_bytes == 3 * 2**30
    assert "GiB" in story.summary()
    half = training_memory.alexnet_on_two_gpus(batch_size=64)
    assert math.isclose(story.split.activations, 2 * half.split.activations)


def test_profiles_follow_the_model_dtype():
    layer = nn.Linear(50, 20).half()
    for device in ("meta", "cpu"):
        mem = training_memory.profile_layer_mem(layer, (8, 50), device=device).layers[0]
        assert mem.weight_bytes == (50 * 20 + 20) * 2 and mem.input_bytes == 8 * 50 * 2
    assert training_memory.activation_bytes(nn.Sequential(nn.Linear(10, 5).half()), (3, 10)) == 3 * 10 * 2


def _fake_snapshot():
    """A CUDA memory snapshot as torch.cuda.memory._snapshot() returns it, made up: 1 KiB held
    before recording, then alloc 4 KiB, alloc 2 KiB, free the 4 KiB (requested, then completed)."""
    trace = [{"action": "alloc", "addr": 0x1000, "size": 4096, "time_us": 100},
             {"action": "alloc", "addr": 0x3000, "size": 2048, "time_us": 130},
             {"action": "free_requested", "addr": 0x1000, "size": 4096, "time_us": 150},
             {"action": "free_completed", "addr": 0x1000, "size": 4096, "time_us": 151},
             {"action": "segment_alloc", "addr": 0x9000, "size": 2 << 20, "time_us": 160}]
    blocks = [{"size": 1024, "state": "active_allocated"}, {"size": 2048, "state": "active_allocated"},
              {"size": 4096, "state": "inactive"}]
    return {"segments": [{"device": 0, "blocks": blocks}], "device_traces": [trace]}


def test_allocator_timeline_of_a_snapshot():
    xs, allocated = training_memory.allocator_timeline(_fake_snapshot())
    assert xs == [0, 30, 51]
    assert allocated == [1024 + 4096, 1024 + 4096 + 2048, 1024 + 2048]
    untimed = _fake_snapshot()
    for entry in untimed["device_traces"][0]:
        del entry["time_us"]
    assert training_memory.allocator_timeline(untimed)[0] == [0, 1, 2]
    assert training_memory.allocator_timeline({"device_traces": [[]], "segments": []}) == ([], [])


def test_cuda_memory_history_without_a_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    calls = []
    assert training_memory.cuda_memory_history(lambda: calls.append(1)) is None
    assert calls == []  # nothing runs when there is nothing to record


def test_cuda_memory_history_records_and_stops(monkeypatch, tmp_path):
    """With a fake GPU: recording is switched on, the step runs, the snapshot is returned and
    pickled, and recording is switched off again."""
    import pickle

    import torch

    switched = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history",
                        lambda enabled="all", **kwargs: switched.append(enabled))
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", _fake_snapshot)
    steps = []
    snapshot = training_memory.cuda_memory_history(lambda: steps.append(1), steps=2, path=tmp_path / "s.pickle")
    assert steps == [1, 1] and switched == ["all", None]
    assert snapshot == _fake_snapshot() == pickle.loads((tmp_path / "s.pickle").read_bytes())
