"""DDP training on 2 gloo processes, bucket recording, the student-step checker, torchrun
command, and the rpc parameter server (sync: no staleness, async: more updates)."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.checks.ddp import MalformedResult, check_step
from course_lib.parallel import ddp, ps


def accumulating_step(model, micro_batches, optimizer):
    """Written out here: the exercise's answer is not in the library."""
    import contextlib  # shipped as source to the workers: imports what it uses
    optimizer.zero_grad()
    total = 0.0
    for number, (X, y) in enumerate(micro_batches):
        last = number == len(micro_batches) - 1
        context = contextlib.nullcontext() if last else model.no_sync()
        with context:
            loss = F.cross_entropy(model(X), y) / len(micro_batches)
            loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def step_that_syncs_every_micro_batch(model, micro_batches, optimizer):
    optimizer.zero_grad()
    total = 0.0
    for X, y in micro_batches:
        loss = F.cross_entropy(model(X), y) / len(micro_batches)
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def step_without_zero_grad(model, micro_batches, optimizer):
    import contextlib
    total = 0.0
    for X, y in micro_batches:
        with model.no_sync() if (X, y) is not micro_batches[-1] else contextlib.nullcontext():
            loss = F.cross_entropy(model(X), y) / len(micro_batches)
            loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def step_that_rewrites_the_check_in_its_worker(model, micro_batches, optimizer):
    """Trains nothing; rewrites the check where it runs (the worker) instead."""
    import sys
    module = sys.modules["course_lib.checks.ddp"]
    for target in (module, sys.modules["course_lib.checks.worker_results"]):
        target.worst = lambda values: 0.0
    module.reference_step_params = lambda *a, **k: [p.detach().clone() for p in model.parameters()]
    return 0.0


def step_that_rewrites_its_result(model, micro_batches, optimizer):
    """Replaces what the worker sends back with data of another kind."""
    import torch
    save = torch.save
    torch.save = lambda obj, f: save({"params": "all right", "losses": [0.0, 0.0], "allreduces": [1, 1]}, f)
    return 0.0


def test_check_step_judges_in_the_caller():
    assert check_step(step_that_rewrites_the_check_in_its_worker)["max_error"] > 1e-3
    with pytest.raises(MalformedResult, match="rank 0 sent back malformed data \\(parameters\\)"):
        check_step(step_that_rewrites_its_result)


def test_ddp_training_keeps_ranks_identical_and_gathers_accuracy():
    results = ddp.train(2, epochs=1, n_train=256, n_test=101, timeout=120)
    assert [r["rank"] for r in results] == [0, 1]
    assert results[0]["checksum"] == results[1]["checksum"]
    assert sum(n for _, n in results[0]["counts"]) == 101
    assert results[0]["accuracy"] == results[1]["accuracy"]
    assert results[0]["steps"] == 2


def test_check_step_accepts_a_correct_step_and_rejects_wrong_ones():
    good = check_step(accumulating_step)
    assert good["max_error"] < 1e-6 and good["rank_difference"] == 0.0
    assert good["allreduces"] == [[1, 1], [1, 1]] and good["loss_error"] < 1e-6
    chatty = check_step(step_that_syncs_every_micro_batch)
    assert chatty["max_error"] < 1e-6  # the right parameters ...
    assert chatty["allreduces"] == [[3, 3], [3, 3]]  # ... at three times the communication
    assert check_step(step_without_zero_grad)["max_error"] > 1e-4


def test_buckets_cover_every_parameter():
    record = ddp.buckets(bucket_cap_mb=0.05, model_name="lenet")
    assert sum(numel for _, numel, _ in record["buckets"]) == record["parameters"]
    assert len(record["buckets"]) > 1


def test_default_buckets_follow_torchs_rule():
    """ResNet-18 with DDP's defaults: a first bucket of at least 1 MiB, closed as soon as it
    reaches it, then buckets of at least 25 MiB, the last one smaller."""
    record = ddp.buckets(model_name="resnet18", timeout=120)
    mib = [numel * 4 / 2**20 for _, numel, _ in record["buckets"]]
    assert sum(numel for _, numel, _ in record["buckets"]) == record["parameters"]
    assert record["first_bucket_mib"] == 1 and record["bucket_cap_mib"] == 25
    assert 1 <= mib[0] < 25 and all(size >= 25 for size in mib[1:-1]) and mib[-1] < 25


def test_torchrun_command_names_the_nodes():
    cmd = ddp.torchrun_command(4, nnodes=2, node_rank=1, master_addr="10.0.0.1", master_port=1234)
    assert "--nnodes=2" in cmd and "--node-rank=1" in cmd and "--master-addr=10.0.0.1" in cmd
    assert cmd[-1] == "course_lib.parallel.ddp"


def test_parameter_server_sync_and_async():
    result = ps.run(workers=2, steps=4, slow_delay=0.01, timeout=120)
    assert set(result) == {"sync", "async"}
    assert result["sync"]["updates"] == 4 and set(result["sync"]["staleness"]) == {0}
    assert result["async"]["updates"] == 8 and len(result["async"]["staleness"]) == 8
    assert min(result["async"]["staleness"]) >= 0


def test_parameter_server_applies_the_mean_in_sync_mode():
    server = ps.ParameterServer([torch.zeros(2)], lr=1.0, workers=1, mode="sync")
    assert server.push([torch.ones(2)], 0) == 1
    version, params = server.pull()
    assert version == 1 and torch.equal(params[0], -torch.ones(2))


def test_torchrun_runs_the_training_script():
    result = ddp.run_torchrun(2, ("--n-train", "64", "--max-steps", "1"), timeout=180)
    assert result["world_size"] == 2 and result["steps"] == 1
    assert len(result["counts"]) == 2
