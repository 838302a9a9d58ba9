"""The models the lessons train and profile, defined here (the course does not use torchvision).

Lessons 01, 08, 09, 12 and 13 import it; lessons 10 and 11 use it through
:mod:`course_lib.parallel.ddp` and :mod:`course_lib.parallel.ps`.

* :class:`BasicFCModel` - a multilayer perceptron for 28x28 images, hidden width adjustable.
* :class:`LeNet` - LeNet-5 with ReLU and max pooling, for 1x28x28 images (61,706 parameters).
* :class:`AlexNet` - the single-tower AlexNet of torchvision (61,100,840 parameters with 1000
  classes); its adaptive pooling lets it take inputs from 63x63 upwards.
* :class:`VGG16` - VGG-16 (configuration D of Simonyan and Zisserman, ICLR 2015; 138,357,544
  parameters with 1000 classes), the network whose FLOPs lessons 00 and 01 count.
* :class:`ResNet18` - ResNet-18 (11,689,512 parameters with 1000 classes); ``small_input=True``
  swaps the 7x7 stride-2 stem and max pool for a 3x3 stride-1 stem (the CIFAR variant) so that
  28x28 or 32x32 images keep their resolution.
"""
from __future__ import annotations

import torch
from torch import nn


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters in ``model`` (optionally only those that require grad)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


class BasicFCModel(nn.Module):
    """Flatten, then ``in_features -> hidden -> hidden -> num_classes`` with ReLU between.

    ``hidden`` is the width the lessons sweep to grow the working set.
    """

    def __init__(self, hidden: int = 128, in_features: int = 28 * 28, num_classes: int = 10):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(in_features, hidden)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(hidden, hidden)
        self.relu2 = nn.ReLU()
        self.fc3 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu1(self.fc1(self.flatten(x)))
        x = self.relu2(self.fc2(x))
        return self.fc3(x)


class LeNet(nn.Module):
    """LeNet-5 for ``in_channels`` x 28 x 28 images (the first convolution pads by 2, so the
    28x28 input plays the role of LeCun's 32x32), with ReLU and max pooling as used today."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 6, kernel_size=5, padding=2)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.relu3 = nn.ReLU()
        self.fc2 = nn.Linear(120, 84)
        self.relu4 = nn.ReLU()
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(self.relu1(self.conv1(x)))
        x = self.pool2(self.relu2(self.conv2(x)))
        x = self.relu3(self.fc1(self.flatten(x)))
        x = self.relu4(self.fc2(x))
        return self.fc3(x)


class AlexNet(nn.Module):
    """AlexNet as in torchvision (one tower; Krizhevsky et al. split it over two 3 GB GPUs).

    Five convolutions (64, 192, 384, 256, 256 channels) and three fully connected layers
    (4096, 4096, ``num_classes``). Expects inputs of at least 63x63; 224x224 is the standard.
    """

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, dropout: float = 0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 64, kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


VGG16_CHANNELS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
"""VGG-16's convolution widths in order; ``"M"`` is a 2x2 max pool of stride 2 (Simonyan and
Zisserman, *Very Deep Convolutional Networks for Large-Scale Image Recognition*, ICLR 2015,
Table 1, column D)."""


class VGG16(nn.Module):
    """VGG-16: thirteen 3x3 convolutions (padding 1) with ReLU in five blocks, each block ending in
    a 2x2 max pool, then three fully connected layers (4096, 4096, ``num_classes``).

    A 224x224 input leaves the last pool as 512 x 7 x 7; the adaptive pooling keeps that shape
    for other input sizes (from 32x32 upwards).
    """

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, dropout: float = 0.5):
        super().__init__()
        layers: list[nn.Module] = []
        channels = in_channels
        for width in VGG16_CHANNELS:
            if width == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [nn.Conv2d(channels, width, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                channels = width
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and an identity (or 1x1 projection) shortcut."""

    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016): a stem, four stages of two :class:`BasicBlock` each
    (64, 128, 256, 512 channels), global average pooling and a linear classifier.

    ``small_input=False`` is the ImageNet stem (7x7 stride-2 convolution, 3x3 stride-2 max
    pool; 11,689,512 parameters with 1000 classes); ``small_input=True`` uses a 3x3 stride-1
    convolution and no max pool, for 28x28 to 32x32 images.
    """

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, small_input: bool = False):
        super().__init__()
        if small_input:
            self.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
            self.maxpool = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
        self.layer2 = nn.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
        self.layer3 = nn.Sequential(BasicBlock(128, 256, 2), BasicBlock(256, 256))
        self.layer4 = nn.Sequential(BasicBlock(256, 512, 2), BasicBlock(512, 512))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def all_models() -> dict:
    """Name -> (constructor taking no arguments, example input shape (N, C, H, W)).

    Small configurations suited to a CPU; the lessons and tests iterate over this table.
    """
    return {
        "BasicFCModel": (BasicFCModel, (2, 1, 28, 28)),
        "LeNet": (LeNet, (2, 1, 28, 28)),
        "AlexNet": (lambda: AlexNet(num_classes=10), (1, 3, 64, 64)),
        "ResNet18": (lambda: ResNet18(num_classes=10, in_channels=1, small_input=True), (1, 1, 28, 28)),
    }
