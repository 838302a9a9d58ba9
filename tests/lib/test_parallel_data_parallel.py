"""Data parallelism from scratch: the scaffolding of lesson 09 (devices, replicas, the
training loop around a step function the lesson writes itself)."""
import copy
from unittest import mock

import torch
import torch.nn.functional as F

from course_lib.models import LeNet
from course_lib.parallel import data_parallel as dp
from course_lib.train import evaluate


def reference_step(replicas, X, y, devices, lr):
    """A data-parallel SGD step written out here (the lesson's answers are not in the library)."""
    k = len(devices)
    total = 0.0
    for replica, xs, ts, d in zip(replicas, X.chunk(k), y.chunk(k), devices):
        replica.zero_grad()
        loss = F.cross_entropy(replica(xs.to(d)), ts.to(d), reduction="sum") / len(X)
        loss.backward()
        total += loss.item()
    for params in zip(*(r.parameters() for r in replicas)):
        grad = sum(p.grad.to(devices[0]) for p in params)
        for p in params:
            p.grad.copy_(grad.to(p.device))
    with torch.no_grad():
        for replica in replicas:
            for p in replica.parameters():
                p -= lr * p.grad
    return total


def test_replica_devices_on_this_machine():
    devices = dp.replica_devices(3)
    assert len(devices) == 3
    if torch.cuda.device_count() < 3:
        assert all(d.type == "cpu" for d in devices)


def test_replica_devices_keeps_one_kind_of_device_for_a_comparison():
    with mock.patch("torch.cuda.is_available", return_value=True), \
            mock.patch("torch.cuda.device_count", return_value=2):
        assert [str(d) for d in dp.replica_devices(2)] == ["cuda:0", "cuda:1"]
        assert [str(d) for d in dp.replica_devices(1)] == ["cuda:0"]
        # a comparison of k = 1, 2, 4 on a 2-GPU machine runs every k on the CPU
        assert [str(d) for d in dp.replica_devices(1, gpus_needed=4)] == ["cpu"]
        assert [str(d) for d in dp.replica_devices(2, gpus_needed=4)] == ["cpu", "cpu"]


def test_get_params_makes_independent_copies():
    model = torch.nn.Linear(3, 2)
    replicas = dp.get_params(model, [torch.device("cpu")] * 2)
    with torch.no_grad():
        replicas[0].weight.add_(1)
    assert not torch.equal(replicas[0].weight, replicas[1].weight)
    assert torch.equal(replicas[1].weight, model.weight)
    assert dp.max_replica_difference(replicas) == 1.0


def test_train_runs_the_given_step_like_one_device():
    torch.manual_seed(0)
    model = LeNet()
    X, y = torch.randn(12, 1, 28, 28), torch.randint(0, 10, (12,))
    single = copy.deepcopy(model)
    result = dp.train(model, [(X, y)], k=3, step=reference_step, lr=0.1, epochs=2)
    for _ in range(2):
        single.zero_grad()
        F.cross_entropy(single(X), y).backward()
        with torch.no_grad():
            for p in single.parameters():
                p -= 0.1 * p.grad
    assert result["replica_difference"] == 0.0
    for a, b in zip(result["replicas"][0].parameters(), single.parameters()):
        assert torch.allclose(a.detach().cpu(), b.detach(), atol=1e-6)
    assert result["lrs"] == [0.1, 0.1]


def test_train_follows_a_learning_rate_schedule():
    seen = []

    def recording_step(replicas, X, y, devices, lr):
        seen.append(lr)
        return 0.0

    batches = [(torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,)))] * 3
    result = dp.train(LeNet(), batches, k=2, step=recording_step, lr=[0.1, 0.2], epochs=2)
    assert seen == [0.1, 0.2, 0.2, 0.2, 0.2, 0.2] == result["lrs"]
    seen.clear()
    dp.train(LeNet(), batches, k=1, step=recording_step, lr=lambda s: 0.5 * s, max_steps=3)
    assert seen == [0.0, 0.5, 1.0]


def test_train_and_accuracy_on_a_learnable_problem():
    torch.manual_seed(0)
    X = torch.randn(64, 1, 28, 28)
    y = (X.mean(dim=(1, 2, 3)) > 0).long()
    batches = [(X[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    result = dp.train(LeNet(), batches, k=2, step=reference_step, lr=0.05, epochs=4,
                      test_batches=batches)
    assert result["replica_difference"] == 0.0
    assert len(result["losses"]) == 16 and result["seconds"] > 0
    assert result["losses"][-1] < result["losses"][0]
    assert 0.0 <= result["test_accuracy"][-1] <= 1.0
    assert result["test_accuracy"][-1] == evaluate(result["replicas"][0], batches, result["devices"][0])
    limited = dp.train(LeNet(), batches, k=2, step=reference_step, lr=0.05, max_steps=3)
    assert len(limited["losses"]) == 3


def test_the_same_batches_give_the_same_curve_for_every_k():
    """Lesson 09's claim: with the same batches, initial weights and learning rate, the loss
    curve does not depend on the number of replicas (up to float32 rounding)."""
    gen = torch.Generator().manual_seed(3)
    X = torch.randn(96, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (96,), generator=gen)
    batches = [(X[i:i + 24], y[i:i + 24]) for i in range(0, 96, 24)]
    curves = {}
    for k in (1, 2, 4):
        torch.manual_seed(0)
        curves[k] = dp.train(LeNet(), batches, k=k, step=reference_step, lr=0.1, epochs=2,
                             gpus_needed=4)["losses"]
    for k in (2, 4):
        assert max(abs(a - b) for a, b in zip(curves[1], curves[k])) < 1e-5
