import re
from pathlib import Path

import nbformat
import pytest
import torch

from course_lib.models import VGG16, AlexNet, BasicFCModel, LeNet, ResNet18, all_models, count_parameters
from course_lib.profile import counter_flops, profile_ops

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_alexnet_parameter_count_matches_the_standard_one():
    assert count_parameters(AlexNet()) == 61_100_840


def test_resnet18_parameter_count_matches_the_standard_one():
    assert count_parameters(ResNet18()) == 11_689_512


def test_small_input_resnet_differs_only_in_the_stem():
    # 7x7x3x64 stem weights become 3x3x3x64
    assert count_parameters(ResNet18()) - count_parameters(ResNet18(small_input=True)) == (49 - 9) * 3 * 64


def test_lenet_parameter_count():
    # conv1 6*(25+1), conv2 16*(150+1), fc 400->120->84->10
    expected = 156 + 2416 + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)
    assert count_parameters(LeNet()) == expected == 61_706


def test_basic_fc_model_hidden_width_changes_parameters():
    small, large = BasicFCModel(hidden=16), BasicFCModel(hidden=32)
    assert count_parameters(small) == 784 * 16 + 16 + 16 * 16 + 16 + 16 * 10 + 10
    assert count_parameters(large) > count_parameters(small)


def test_trainable_only_skips_frozen_parameters():
    model = LeNet()
    model.conv1.weight.requires_grad_(False)
    assert count_parameters(model, trainable_only=True) == 61_706 - 150


@pytest.mark.parametrize("name", sorted(all_models()))
def test_every_model_maps_its_example_input_to_class_scores(name):
    make, shape = all_models()[name]
    model = make().eval()
    with torch.no_grad():
        out = model(torch.randn(shape))
    assert out.shape == (shape[0], 10)
    assert torch.isfinite(out).all()


def test_resnet_small_input_keeps_resolution_in_first_stage():
    model = ResNet18(num_classes=10, in_channels=1, small_input=True).eval()
    seen = {}

    def remember(module, inputs, output):
        seen["shape"] = output.shape

    model.layer1.register_forward_hook(remember)
    with torch.no_grad():
        model(torch.randn(1, 1, 28, 28))
    assert seen["shape"] == (1, 64, 28, 28)


def test_alexnet_standard_output_shape():
    with torch.no_grad():
        out = AlexNet(num_classes=1000).eval()(torch.randn(1, 3, 224, 224))
    assert out.shape == (1, 1000)


def _vgg16_forward_flops() -> int:
    with torch.device("meta"):
        model = VGG16()
    return counter_flops(model, (1, 3, 224, 224))


def test_vgg16_parameter_count_matches_the_standard_one():
    # Simonyan and Zisserman's configuration D as torchvision builds it: 138,357,544
    with torch.device("meta"):
        model = VGG16()
    assert count_parameters(model) == 138_357_544


def test_vgg16_forward_flops_are_twice_its_multiply_adds():
    with torch.device("meta"):
        model = VGG16()
    macs = profile_ops(model, (1, 3, 224, 224)).total_macs
    assert 1.5e10 < macs < 1.6e10                  # the "1.5e10" of seed 000 is this count
    assert _vgg16_forward_flops() == 2 * macs


def _figures(text: str) -> list[float]:
    """Every ``a.bc \\times 10^{10}$ FLOPs`` and ``a.bce10`` in ``text`` (VGG-16's FLOPs)."""
    latex = [float(m) * 1e10 for m in re.findall(r"(\d+(?:\.\d+)?) \\times\s*10\^\{10\}\$? FLOPs", text)]
    code = [float(m) for m in re.findall(r"\b(\d+(?:\.\d+)?e10)\b", text)]
    return latex + code


def test_the_vgg16_figure_lesson_00_states_is_flopcountermodes_count():
    """Lesson 00's exercise 3 and its "back to training time" question quote VGG-16's forward FLOPs."""
    nb = nbformat.read(NOTEBOOKS / "00_setup" / "exercises.ipynb", as_version=4)
    stated = [float(m.group(1)) * 1e10 for c in nb.cells if c.cell_type == "markdown" and "VGG-16" in c.source
              for m in re.finditer(r"(\d+\.\d+) \\times 10\^\{10\}", c.source)]
    assert len(stated) >= 2, "lesson 00 no longer states VGG-16's forward FLOPs in the expected form"
    counted = _vgg16_forward_flops()
    for figure in stated:
        assert figure == pytest.approx(counted, rel=5e-3), (figure, counted)


def test_lesson_01_counts_vgg16_rather_than_quoting_a_figure():
    nb = nbformat.read(NOTEBOOKS / "01_hardware_foundations" / "lecture.ipynb", as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "counter_flops(" in code and "VGG16" in code
    counted = _vgg16_forward_flops()
    for cell in nb.cells:
        for figure in _figures(cell.source):
            if 1e10 <= figure < 1e11:              # a forward-pass figure of VGG-16's order
                assert figure == pytest.approx(counted, rel=5e-3), (figure, cell.source[:80])
