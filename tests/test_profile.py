import math

import pytest
import torch
from torch import nn

from course_lib import profile
from course_lib.models import AlexNet, BasicFCModel, LeNet, ResNet18, all_models

SHAPES = {
    "BasicFCModel": [(1, 1, 28, 28), (7, 1, 28, 28)],
    "LeNet": [(1, 1, 28, 28), (5, 1, 28, 28), (64, 1, 28, 28)],
    "AlexNet": [(1, 3, 64, 64), (2, 3, 224, 224), (1, 3, 100, 80)],
    "ResNet18": [(1, 1, 28, 28), (2, 1, 32, 32)],
}


@pytest.mark.parametrize("name,shape", [(n, s) for n, shapes in SHAPES.items() for s in shapes])
def test_profile_ops_total_equals_flop_counter_mode(name, shape):
    make, _ = all_models()[name]
    model = make()
    ops = profile.profile_ops(model, shape)
    assert ops.total_flops == profile.counter_flops(model, shape)
    assert ops.total_flops == 2 * ops.total_macs > 0


def test_profile_ops_full_size_models_equal_counter():
    for model, shape in ((AlexNet(), (1, 3, 224, 224)), (ResNet18(), (1, 3, 224, 224))):
        assert profile.profile_ops(model, shape).total_flops == profile.counter_flops(model, shape)


def test_counter_on_cpu_agrees_with_meta():
    model = LeNet()
    assert profile.counter_flops(model, (2, 1, 28, 28), device="cpu") == profile.counter_flops(model, (2, 1, 28, 28))
    assert profile.profile_ops(model, (2, 1, 28, 28), device="cpu").total_flops == \
        profile.profile_ops(model, (2, 1, 28, 28)).total_flops


def test_lenet_layer_macs_by_hand():
    ops = {layer.name: layer for layer in profile.profile_ops(LeNet(), (1, 1, 28, 28)).layers}
    assert ops["conv1"].macs == 6 * 28 * 28 * 25
    assert ops["conv2"].macs == 16 * 10 * 10 * 6 * 25
    assert ops["fc1"].macs == 400 * 120
    assert ops["relu1"].macs == 0 and ops["pool1"].flops == 0
    assert ops["conv1"].output_shape == (1, 6, 28, 28)
    assert ops["conv1"].kind == "Conv2d"


def test_formulas_cover_groups_and_batched_linear():
    conv = nn.Conv2d(8, 16, 3, groups=4, padding=1)
    out = conv(torch.zeros(2, 8, 5, 5))
    assert profile.layer_macs(conv, (torch.zeros(2, 8, 5, 5),), out) == 2 * 16 * 25 * 2 * 9
    assert profile.conv_macs((16, 2, 3, 3), (2, 16, 5, 5)) == 2 * 16 * 25 * 18
    assert profile.linear_macs(10, 3, rows=4) == 120
    lin = nn.Linear(10, 3)
    x = torch.zeros(2, 4, 10)
    assert profile.layer_macs(lin, (x,), lin(x)) == 8 * 30
    assert profile.layer_macs(nn.ReLU(), (x,), x) == 0


def test_ops_table_and_plot():
    import matplotlib

    matplotlib.use("Agg")
    ops = profile.profile_ops(LeNet(), (1, 1, 28, 28))
    text = ops.table()
    assert "conv1" in text and f"{ops.total_flops:,}" in text and str(ops) == text
    ax = ops.plot()
    assert len(ax.patches) == 5  # two convolutions, three linear layers


def test_profile_ops_leaves_the_model_on_its_device():
    model = LeNet()
    profile.profile_ops(model)
    assert model.conv1.weight.device.type == "cpu"
    assert model.training


def test_layer_memory_bytes_for_lenet():
    mem = {m.name: m for m in profile.profile_layer_mem(LeNet(), (2, 1, 28, 28)).layers}
    assert mem["conv1"].input_bytes == 2 * 28 * 28 * 4
    assert mem["conv1"].output_bytes == 2 * 6 * 28 * 28 * 4
    assert mem["conv1"].weight_bytes == (6 * 25 + 6) * 4
    assert mem["fc1"].weight_bytes == (400 * 120 + 120) * 4
    assert mem["fc1"].total_bytes == mem["fc1"].input_bytes + mem["fc1"].output_bytes + mem["fc1"].weight_bytes


def test_layer_memory_in_place_and_pass_through_layers_write_nothing_new():
    layers = {m.name: m for m in profile.profile_layer_mem(AlexNet(num_classes=10), (1, 3, 64, 64)).layers}
    assert layers["features.1"].output_bytes == 0  # ReLU(inplace=True)
    assert layers["classifier.0"].output_bytes == 0  # dropout in evaluation mode
    assert layers["features.0"].output_bytes > 0


def test_layer_memory_counts_batch_norm_buffers_and_largest():
    prof = profile.profile_layer_mem(ResNet18(num_classes=10, in_channels=1, small_input=True), (1, 1, 28, 28))
    bn = next(m for m in prof.layers if m.kind == "BatchNorm2d")
    assert bn.weight_bytes == 4 * 64 * 4  # weight, bias, running mean, running variance
    assert prof.largest.total_bytes == max(m.total_bytes for m in prof.layers)


def test_layer_memory_plot_stacks_three_parts():
    import matplotlib

    matplotlib.use("Agg")
    prof = profile.profile_layer_mem(LeNet(), (1, 1, 28, 28))
    ax = prof.plot(limit_bytes=100_000, limit_label="cache")
    assert len(ax.patches) == 3 * len(prof.layers)
    assert "conv1" in prof.table() and str(prof) == prof.table()


def test_activation_bytes_of_a_linear_layer():
    # autograd keeps the input of the linear layer (for the weight gradient) only
    model = nn.Sequential(nn.Linear(10, 5))
    assert profile.activation_bytes(model, (3, 10)) == 3 * 10 * 4


def test_activation_bytes_grow_linearly_with_batch():
    a1 = profile.activation_bytes(LeNet(), (1, 1, 28, 28))
    a8 = profile.activation_bytes(LeNet(), (8, 1, 28, 28))
    assert a8 == 8 * a1


def test_activation_bytes_meta_matches_cpu():
    model = BasicFCModel(hidden=32)
    assert profile.activation_bytes(model, (4, 1, 28, 28), device="cpu") == \
        profile.activation_bytes(model, (4, 1, 28, 28))


def test_profile_mem_split_by_optimizer():
    model = LeNet()
    params = sum(p.numel() for p in model.parameters()) * 4
    adam = profile.profile_mem(model, (4, 1, 28, 28), "adam")
    assert adam.parameters == adam.gradients == params
    assert adam.optimizer_state == 2 * params
    assert profile.profile_mem(model, (4, 1, 28, 28), "sgd").optimizer_state == 0
    assert profile.profile_mem(model, (4, 1, 28, 28), "momentum").optimizer_state == params
    assert adam.total == sum(adam.as_dict().values())
    assert "MiB" in str(adam)
    with pytest.raises(ValueError):
        profile.profile_mem(model, (4, 1, 28, 28), "lion")


def test_memory_split_pie():
    import matplotlib

    matplotlib.use("Agg")
    ax = profile.profile_mem(LeNet(), (4, 1, 28, 28)).plot()
    assert len(ax.patches) == 4


def test_memory_budget_and_largest_batch():
    model = LeNet()
    fixed = profile.profile_mem(model, (1, 1, 28, 28)).total - profile.activation_bytes(model, (1, 1, 28, 28))
    per_sample = profile.activation_bytes(model, (1, 1, 28, 28))
    budget = fixed + 37 * per_sample + per_sample // 2
    assert profile.largest_batch_under(model, (1, 28, 28), budget) == 37
    assert profile.largest_batch_under(model, (1, 28, 28), fixed) == 0
    assert profile.check_memory_budget(model, (37, 1, 28, 28), budget).total <= budget
    with pytest.raises(profile.MemoryBudgetExceeded, match="smaller batch"):
        profile.check_memory_budget(model, (38, 1, 28, 28), budget)


def test_alexnet_on_two_gpus():
    story = profile.alexnet_on_two_gpus(batch_size=128)
    assert story.split.parameters == 61_100_840 * 4
    assert story.split.optimizer_state == story.split.parameters  # momentum
    assert story.per_gpu_when_split == story.split.total / 2
    assert story.layers.input_shape == (128, 3, 224, 224)
    assert story.gpu_bytes == 3 * 2**30
    assert "GiB" in story.summary()
    half = profile.alexnet_on_two_gpus(batch_size=64)
    assert math.isclose(story.split.activations, 2 * half.split.activations)


def test_profiles_follow_the_model_dtype():
    layer = nn.Linear(50, 20).half()
    for device in ("meta", "cpu"):
        mem = profile.profile_layer_mem(layer, (8, 50), device=device).layers[0]
        assert mem.weight_bytes == (50 * 20 + 20) * 2 and mem.input_bytes == 8 * 50 * 2
    assert profile.activation_bytes(nn.Sequential(nn.Linear(10, 5).half()), (3, 10)) == 3 * 10 * 2
