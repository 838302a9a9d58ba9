"""The training loop's overhead and the profiler's cost.

* One epoch of LeNet through ``course_lib.train.train`` (progress bar off) against a minimal
  hand-written PyTorch loop on the same data, same initial weights and same optimizer; runs
  alternate and the medians are compared (target: ratio at most 1.05).
* ``profile_ops`` run on the real device (forward hooks on every layer) and on the meta device
  against a plain forward pass of the same model and input.
"""
from __future__ import annotations

import copy
import statistics
import time

import torch
from torch import nn


def _hand_written_epoch(model, loader, device) -> None:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(inputs), targets).backward()
        optimizer.step()


def _timed(fn, device) -> float:
    from course_lib.timing import synchronize

    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def run(repeats: int = 7) -> dict:
    from course_lib.data import load_dataset, make_loader
    from course_lib.devices import default_device
    from course_lib.hardware import describe_device
    from course_lib.models import LeNet
    from course_lib.profile import profile_ops
    from course_lib.timing import benchmark
    from course_lib.train import train

    device = default_device()
    data = load_dataset("mnist", verbose=False)
    torch.manual_seed(0)
    initial = LeNet()

    def loader():
        return make_loader(data.train, batch_size=64, num_workers=0, seed=0, device=device)

    library, hand = [], []
    _hand_written_epoch(copy.deepcopy(initial).to(device), loader(), device)  # warm-up
    for _ in range(repeats):
        hand.append(_timed(lambda: _hand_written_epoch(copy.deepcopy(initial).to(device), loader(), device), device))
        library.append(_timed(lambda: train(copy.deepcopy(initial), loader(), device=device,
                                            progress=False), device))
    figures = {
        "device": describe_device(device),
        "dataset": data.name,
        "lenet_epoch_hand_written_seconds": min(hand),
        "lenet_epoch_course_train_seconds": min(library),
        "train_over_hand_written_ratio": min(library) / min(hand),
        "train_over_hand_written_ratio_target": "<= 1.05",
        "train_over_hand_written_ratio_of_medians": statistics.median(library) / statistics.median(hand),
    }

    model = LeNet().to(device).eval()
    x = torch.randn(64, 1, 28, 28, device=device)

    def forward():
        with torch.no_grad():
            model(x)

    plain = benchmark(forward, device=device, repeat=5).median
    hooked = benchmark(lambda: profile_ops(model, tuple(x.shape), device=device), device=device,
                       repeat=5).median
    meta = benchmark(lambda: profile_ops(model, tuple(x.shape)), repeat=5).median
    figures.update({
        "lenet_forward_batch64_seconds": plain,
        "profile_ops_on_device_seconds": hooked,
        "profile_ops_on_device_over_forward_ratio": hooked / plain,
        "profile_ops_on_meta_seconds": meta,
        "profile_ops_on_meta_over_forward_ratio": meta / plain,
    })
    return figures
