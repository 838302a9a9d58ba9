import pytest
import torch

from course_lib.models import AlexNet, BasicFCModel, LeNet, ResNet18, all_models, count_parameters


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
