"""DistributedDataParallel (lesson 10): one process per device, launched from a notebook
or by ``torchrun``, gradients averaged by DDP while the backward pass is still running.

- :func:`train_worker` is the whole training script of one rank: join the process group
  (gloo on CPUs, NCCL on GPUs), wrap the model in ``DistributedDataParallel``, read this
  rank's share of the data (``DistributedSampler``), train, then evaluate with every rank
  scoring its share of the test set and ``all_gather`` combining the counts.
- :func:`train` starts it on ``k`` processes from a notebook (:mod:`.launch`, with a
  deadline); ``python -m course_lib.parallel.ddp`` runs the same function under ``torchrun``
  (:func:`torchrun_command` writes the command line, one or several machines).
- :func:`bucket_worker` records the gradient buckets DDP sends, in the order they become
  ready during ``backward``: the overlap of communication with computation.
- the check of lesson 10's graded DDP step lives in :mod:`course_lib.checks.ddp`.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from ..data import load_dataset
from ..models import LeNet, ResNet18
from .launch import WorkerTimeout, free_port, init_process_group, launch

try:  # DDP's default bucket cap, 25 MiB (a private name, which some torch releases lack: 2.11)
    from torch.nn.parallel.distributed import _DEFAULT_BUCKET_CAP_MB
except ImportError:
    _DEFAULT_BUCKET_CAP_MB = 25


def make_model(name: str = "lenet", seed: int = 0) -> nn.Module:
    """A freshly initialised model (the same on every rank for the same ``seed``):
    ``"lenet"`` or ``"resnet18"`` (the small-input ResNet-18 of :mod:`course_lib.models`)."""
    torch.manual_seed(seed)
    if name == "lenet":
        return LeNet()
    if name == "resnet18":
        return ResNet18(num_classes=10, in_channels=1, small_input=True)
    raise ValueError(f"unknown model {name!r}: 'lenet' or 'resnet18'")


def load_data(n_train: int | None = None, n_test: int | None = None):
    """Training and test ``TensorDataset`` of 1x28x28 digits (MNIST from the cache, else
    scikit-learn's digits resized; never downloads), cut to ``n_train``/``n_test`` images.
    Returns ``(train, test, notice)``."""
    data = load_dataset("mnist", allow_download=False, verbose=False)
    train, test = data.train.tensors, data.test.tensors
    train = TensorDataset(*(t[:n_train] for t in train))
    test = TensorDataset(*(t[:n_test] for t in test))
    return train, test, data.notice


def evaluate_all_ranks(model: nn.Module, test: TensorDataset, device, batch_size: int = 500):
    """Every rank scores its own share of ``test``; ``all_gather`` brings every rank's
    ``[correct, seen]`` to every rank. Returns ``(accuracy, per_rank_counts)``.

    Rank ``r`` takes examples ``r, r + world, ...`` (the order of a ``DistributedSampler``
    without shuffling) but, unlike the sampler, does not pad with repeats, so every test
    example is counted exactly once.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    indices = list(range(rank, len(test), world))
    X, y = test.tensors[0][indices], test.tensors[1][indices]
    correct = 0
    model.eval()
    with torch.no_grad():
        for start in range(0, len(indices), batch_size):
            pred = model(X[start:start + batch_size].to(device)).argmax(1).cpu()
            correct += int((pred == y[start:start + batch_size]).sum())
    model.train()
    mine = torch.tensor([correct, len(indices)], dtype=torch.int64, device=device)
    gathered = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    table = torch.stack(gathered).cpu()  # one row (correct, seen) per rank
    right, seen = table.sum(dim=0).tolist()
    return right / max(seen, 1), [tuple(row) for row in table.tolist()]


def train_worker(model_name: str = "lenet", epochs: int = 1, batch_size: int = 64,
                 lr: float = 0.05, n_train: int | None = 1024, n_test: int | None = 500,
                 max_steps: int | None = None, backend: str | None = None, data=None) -> dict:
    """One rank's training run. ``batch_size`` is per rank (the global batch is
    ``world_size`` times larger). Returns losses, accuracy, per-rank test counts, the wall
    time of the training loop (seconds) and a checksum of the parameters (equal on every
    rank: DDP keeps the replicas identical)."""
    rank, world, device = init_process_group(backend)
    train, test, notice = data if data is not None else load_data(n_train, n_test)
    model = DDP(make_model(model_name).to(device),
                device_ids=[device.index] if device.type == "cuda" else None)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=batch_size, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses, steps = [], 0
    start = time.perf_counter()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every rank
        for X, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(X.to(device)), y.to(device))
            loss.backward()  # DDP averages the gradients across ranks during backward
            optimizer.step()
            losses.append(float(loss.detach()))
            steps += 1
            if max_steps is not None and steps >= max_steps:
                break
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    acc, counts = evaluate_all_ranks(model.module, test, device)
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    # release DDP's reducer before the process group goes: freed later (when this frame is
    # cleared), the reducer would be the group's last owner, and the group's destructor joins
    # gloo's threads while holding the GIL, which a thread still freeing the evaluation's
    # all_gather needs (a hang seen in lecture 10)
    del model, optimizer
    dist.destroy_process_group()
    return {"rank": rank, "world_size": world, "device": str(device), "losses": losses,
            "accuracy": acc, "counts": counts, "seconds": seconds, "checksum": checksum,
            "steps": steps, "data": notice}


def train(k: int = 2, timeout: float = 120.0, **options) -> list[dict]:
    """Run :func:`train_worker` on ``k`` processes from a notebook; results by rank.

    The data is loaded once here and shipped to the workers (each would otherwise load it
    again). Raises :class:`~course_lib.parallel.launch.WorkerFailed` or ``WorkerTimeout``
    (after killing every worker) instead of hanging."""
    if options.get("data") is None:
        options["data"] = load_data(options.get("n_train", 1024), options.get("n_test", 500))
    return launch(train_worker, k, timeout=timeout, **options)


# --------------------------------------------------------------------- buckets


def bucket_worker(model_name: str = "resnet18", bucket_cap_mb: float | None = None,
                  batch_size: int = 2, iterations: int = 2) -> dict:
    """Run DDP backward passes and record every gradient bucket DDP all-reduces.

    ``bucket_cap_mb=None`` keeps DDP's defaults, which in torch 2.13 are buckets closed once
    they reach 25 MiB and a first bucket closed at 1 MiB (``_DEFAULT_BUCKET_CAP_MB`` in
    ``torch/nn/parallel/distributed.py``, ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``);
    an explicit cap applies to the first bucket too. The first iteration uses one bucket for
    everything; from the second on, DDP has rebuilt its buckets in the order the gradients
    arrived. A communication hook sees each bucket when it becomes ready, while ``backward``
    is still computing the gradients of earlier layers. Returns the last iteration's buckets
    in that order as ``(index, numel, seconds since backward started)``, the backward's
    duration (seconds) and the two limits in MiB (``first_bucket_mib``, ``bucket_cap_mib``).
    """
    rank, world, device = init_process_group()
    model = DDP(make_model(model_name).to(device), bucket_cap_mb=bucket_cap_mb,
                device_ids=[device.index] if device.type == "cuda" else None)
    seen = []
    started = [0.0]

    def hook(state, bucket):
        seen.append((bucket.index(), bucket.buffer().numel(), time.perf_counter() - started[0]))
        work = dist.all_reduce(bucket.buffer(), async_op=True)
        return work.get_future().then(lambda fut: fut.value()[0] / world)

    model.register_comm_hook(None, hook)
    x = torch.randn(batch_size, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (batch_size,), device=device)
    for _ in range(iterations):  # after the first, DDP re-buckets in arrival order
        seen.clear()
        loss = F.cross_entropy(model(x), y)
        started[0] = time.perf_counter()
        loss.backward()
        backward_seconds = time.perf_counter() - started[0]
    sizes = [p.numel() for p in model.parameters()]
    cap_mib = _DEFAULT_BUCKET_CAP_MB if bucket_cap_mb is None else bucket_cap_mb
    first_mib = dist._DEFAULT_FIRST_BUCKET_BYTES / 2**20 if bucket_cap_mb is None else cap_mib
    dist.barrier()
    del model  # release DDP's reducer before the process group goes
    dist.destroy_process_group()
    return {"buckets": seen, "backward_seconds": backward_seconds,
            "parameters": sum(sizes), "tensors": len(sizes), "device": str(device),
            "first_bucket_mib": first_mib,
            "bucket_cap_mib": cap_mib}


def buckets(bucket_cap_mb: float | None = None, model_name: str = "resnet18", k: int = 2,
            timeout: float = 90.0) -> dict:
    """Rank 0's record from :func:`bucket_worker` on ``k`` processes."""
    return launch(bucket_worker, k, model_name=model_name, bucket_cap_mb=bucket_cap_mb,
                  timeout=timeout)[0]


# ----------------------------------------------------------------- torchrun


def torchrun_command(nproc_per_node: int = 2, nnodes: int = 1, node_rank: int = 0,
                     master_addr: str = "127.0.0.1", master_port: int = 29500,
                     args: tuple[str, ...] = ()) -> list[str]:
    """The ``torchrun`` command that starts :func:`main` on this machine.

    On several machines run it once per machine with the same ``nnodes``, ``master_addr``
    (the address of node 0, reachable from the others) and ``master_port``, and
    ``node_rank`` = 0, 1, ... ``nnodes - 1``.
    """
    return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}",
            f"--nproc-per-node={nproc_per_node}", f"--node-rank={node_rank}",
            f"--master-addr={master_addr}", f"--master-port={master_port}",
            "-m", "course_lib.parallel.ddp", *args]


def run_torchrun(nproc_per_node: int = 2, args: tuple[str, ...] = (), timeout: float = 120.0) -> dict:
    """Run :func:`torchrun_command` on this machine and return rank 0's JSON result.

    torchrun and its workers form one process group; on timeout the whole group is
    killed and :class:`WorkerTimeout` is raised, so no process is left behind.
    """
    cmd = torchrun_command(nproc_per_node, master_port=free_port(), args=args)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               TORCH_CPP_LOG_LEVEL="ERROR")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise WorkerTimeout(f"torchrun did not finish in {timeout:g} s; its process group "
                            "was killed") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"torchrun exited with code {proc.returncode}:\n{out[-1500:]}")
    return json.loads(lines[-1])


def main(argv=None) -> None:
    """Entry point for ``torchrun ... -m course_lib.parallel.ddp``: train and print rank 0's
    result as one JSON line."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--model", default="lenet", choices=["lenet", "resnet18"])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--n-train", type=int, default=1024)
    parser.add_argument("--max-steps", type=int, default=None)
    opts = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    result = train_worker(opts.model, opts.epochs, opts.batch_size, opts.lr, opts.n_train,
                          max_steps=opts.max_steps)
    if result["rank"] == 0:
        result.pop("losses")
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
    # leave without interpreter finalization, where torch.distributed's C++ threads can abort a
    # process that has finished its work ("terminate called without an active exception",
    # pytorch/pytorch#190489; seen here under torchrun on a busy 2-core machine); as launch does
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
