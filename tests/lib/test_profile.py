import pytest
import torch
from torch import nn

from course_lib import profile
from course_lib.models import AlexNet, LeNet, ResNet18, all_models

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


def test_run_hooked_sees_every_leaf_and_restores_the_model():
    model = LeNet()
    seen = []
    profile.run_hooked(model, (2, 1, 28, 28), "cpu",
                       [lambda name: lambda module, inputs, output: seen.append((name, tuple(output.shape)))])
    assert [name for name, _ in seen] == [name for name, _ in profile.leaf_modules(model)]
    assert seen[0] == ("conv1", (2, 6, 28, 28))
    assert model.training and not model.conv1._forward_hooks
    assert profile.on_device(model, "cpu") is model
    assert profile.on_device(model, "meta").conv1.weight.device.type == "meta"
    assert profile.example_input(nn.Linear(3, 2).half(), (4, 3), "cpu").dtype == torch.float16
