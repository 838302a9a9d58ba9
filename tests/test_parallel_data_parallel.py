"""Data parallelism from scratch: split, allreduce, identical replicas, same step as 1 device."""
import copy

import pytest
import torch
import torch.nn.functional as F

from course_lib.models import LeNet
from course_lib.parallel import data_parallel as dp


def test_replica_devices_on_this_machine():
    devices = dp.replica_devices(3)
    assert len(devices) == 3
    if torch.cuda.device_count() < 3:
        assert all(d.type == "cpu" for d in devices)


def test_get_params_makes_independent_copies():
    model = torch.nn.Linear(3, 2)
    replicas = dp.get_params(model, [torch.device("cpu")] * 2)
    with torch.no_grad():
        replicas[0].weight.add_(1)
    assert not torch.equal(replicas[0].weight, replicas[1].weight)
    assert torch.equal(replicas[1].weight, model.weight)


def test_split_batch_uses_chunk_sizes():
    X, y = torch.arange(20.).reshape(10, 2), torch.arange(10)
    Xs, ys = dp.split_batch(X, y, [torch.device("cpu")] * 3)
    assert [len(t) for t in Xs] == [4, 4, 2] and [len(t) for t in ys] == [4, 4, 2]
    assert torch.equal(torch.cat(Xs), X) and torch.equal(torch.cat(ys), y)
    with pytest.raises(ValueError):
        dp.split_batch(X, y[:5], [torch.device("cpu")] * 2)
    with pytest.raises(ValueError):
        dp.split_batch(X[:2], y[:2], [torch.device("cpu")] * 3)


def test_allreduce_writes_the_sum_everywhere():
    data = [torch.ones(2, 3) * (i + 1) for i in range(4)]
    dp.allreduce(data)
    for t in data:
        assert torch.equal(t, torch.full((2, 3), 10.0))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_train_batch_matches_one_device_and_keeps_replicas_identical(k):
    torch.manual_seed(0)
    model = LeNet()
    X, y = torch.randn(12, 1, 28, 28), torch.randint(0, 10, (12,))
    devices = dp.replica_devices(k)
    replicas = dp.get_params(model, devices)
    single = copy.deepcopy(model)
    opt = torch.optim.SGD(single.parameters(), lr=0.1)
    for _ in range(2):
        loss = dp.train_batch(replicas, X, y, devices, lr=0.1)
        opt.zero_grad()
        reference = F.cross_entropy(single(X), y)
        reference.backward()
        opt.step()
        assert abs(loss - float(reference.detach())) < 1e-5
    assert dp.max_replica_difference(replicas) == 0.0
    for a, b in zip(replicas[0].parameters(), single.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_train_and_accuracy_on_a_learnable_problem():
    torch.manual_seed(0)
    X = torch.randn(64, 1, 28, 28)
    y = (X.mean(dim=(1, 2, 3)) > 0).long()
    batches = [(X[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    result = dp.train(LeNet(), batches, k=2, lr=0.05, epochs=4, test_batches=batches)
    assert result["replica_difference"] == 0.0
    assert len(result["losses"]) == 16 and result["seconds"] > 0
    assert result["losses"][-1] < result["losses"][0]
    assert 0.0 <= result["test_accuracy"][-1] <= 1.0
    limited = dp.train(LeNet(), batches, k=2, lr=0.05, max_steps=3)
    assert len(limited["losses"]) == 3
