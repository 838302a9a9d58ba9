"""A parameter server over ``torch.distributed.rpc`` (lesson 11): rank 0 holds LeNet's
parameters, ranks 1..m are workers that *pull* the parameters, compute a gradient on
their own data and *push* it back.

- **synchronous**: the server waits until every worker has pushed for the current
  version, averages the gradients and updates once. Every gradient was computed on the
  current parameters (staleness 0), and every step waits for the slowest worker.
- **asynchronous**: the server applies each gradient as it arrives. Nobody waits, but a
  gradient may have been computed on parameters that other workers have updated since:
  its *staleness* is how many updates happened between its pull and its push.

:func:`run` starts the processes (through :mod:`.launch`, with a deadline), trains in
both modes one after the other and returns, per mode, the wall time (seconds), the
staleness of every pushed gradient, the losses and the final test accuracy.
"""
from __future__ import annotations

import os
import threading
import time

import torch
import torch.distributed.rpc as rpc
import torch.nn.functional as F

from .ddp import load_data, make_model
from .launch import launch

_SERVERS: dict = {}


class ParameterServer:
    """Holds the parameters (a list of tensors) and applies pushed gradients with SGD."""

    def __init__(self, params: list[torch.Tensor], lr: float, workers: int, mode: str,
                 wait_seconds: float = 60.0):
        if mode not in ("sync", "async"):
            raise ValueError("mode is 'sync' or 'async'")
        self.params = [p.detach().clone() for p in params]
        self.lr, self.workers, self.mode = lr, workers, mode
        self.version = 0
        self.pending: list = []
        self.staleness: list[int] = []
        self.cond = threading.Condition()
        self.wait_seconds = wait_seconds

    def pull(self):
        """``(version, parameters)``: the version number counts the updates so far."""
        with self.cond:
            return self.version, [p.clone() for p in self.params]

    def _apply(self, grads) -> None:
        for p, g in zip(self.params, grads):
            p -= self.lr * g
        self.version += 1

    def push(self, grads: list[torch.Tensor], version_seen: int) -> int:
        """Receive one worker's gradients computed on version ``version_seen``; returns the
        version after the update (sync mode: after the whole round)."""
        with self.cond:
            self.staleness.append(self.version - version_seen)
            if self.mode == "async":
                self._apply(grads)
                return self.version
            self.pending.append(grads)
            round_started = self.version
            if len(self.pending) == self.workers:
                mean = [sum(gs) / self.workers for gs in zip(*self.pending)]
                self.pending = []
                self._apply(mean)
                self.cond.notify_all()
            elif not self.cond.wait_for(lambda: self.version > round_started,
                                        timeout=self.wait_seconds):
                raise TimeoutError("synchronous round never completed: a worker is missing")
            return self.version


def _pull(mode: str):
    return _SERVERS[mode].pull()


def _push(mode: str, grads, version: int) -> int:
    return _SERVERS[mode].push(grads, version)


def _worker_loop(mode: str, model, X, y, steps: int, batch_size: int, delay: float) -> list:
    losses = []
    gen = torch.Generator().manual_seed(int(os.environ["RANK"]))
    for _ in range(steps):
        version, params = rpc.rpc_sync("ps", _pull, args=(mode,))
        with torch.no_grad():
            for p, v in zip(model.parameters(), params):
                p.copy_(v)
        idx = torch.randint(0, len(X), (batch_size,), generator=gen)
        model.zero_grad()
        loss = F.cross_entropy(model(X[idx]), y[idx])
        loss.backward()
        losses.append(float(loss.detach()))
        if delay:
            time.sleep(delay)  # this worker is slower (a busier GPU, a longer batch)
        rpc.rpc_sync("ps", _push, args=(mode, [p.grad for p in model.parameters()], version))
    return losses


def ps_worker(modes=("sync", "async"), steps: int = 20, batch_size: int = 32, lr: float = 0.05,
              slow_delay: float = 0.02, n_train: int = 1024, rpc_timeout: float = 60.0,
              data=None) -> dict:
    """One process of the parameter-server demo (rank 0 serves, the others train).

    Worker ``r`` sleeps ``slow_delay * (r - 1)`` seconds per step, so workers differ in
    speed as real ones do. Rank 0 returns per mode: ``seconds``, ``staleness`` (one per
    pushed gradient), ``updates`` and ``accuracy`` on the test set; workers return losses.
    """
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # TCP (libuv) and plain copies only: TensorPipe's default shared-memory transport and CMA
    # channel busy-poll. Measured on the course's 2-core CPU machine, ``run(workers=2,
    # steps=25)`` took 6.1 s of CPU in 3.2 s with them and 1.1 s of CPU in 1.7 s without.
    # The tensors are CPU tensors, so nothing needs the CUDA channels.
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
        rpc_timeout=rpc_timeout, num_worker_threads=max(8, 2 * world), _transports=["uv"], _channels=["basic"])
    name = "ps" if rank == 0 else f"worker{rank}"
    train, test, _ = data if data is not None else load_data(n_train, None)
    result = {}
    if rank == 0:
        for mode in modes:
            _SERVERS[mode] = ParameterServer(list(make_model("lenet").parameters()), lr,
                                             world - 1, mode, wait_seconds=rpc_timeout)
    rpc.init_rpc(name, rank=rank, world_size=world, rpc_backend_options=options)
    if rank != 0:
        X, y = train.tensors[0][rank - 1::world - 1], train.tensors[1][rank - 1::world - 1]
        model = make_model("lenet")
        for mode in modes:
            start = time.perf_counter()
            losses = _worker_loop(mode, model, X, y, steps, batch_size,
                                  slow_delay * (rank - 1))
            result[mode] = {"losses": losses, "seconds": time.perf_counter() - start}
    rpc.shutdown()  # waits until every process is done
    if rank == 0:
        model = make_model("lenet")
        for mode in modes:
            server = _SERVERS[mode]
            with torch.no_grad():
                for p, v in zip(model.parameters(), server.params):
                    p.copy_(v)
                pred = model(test.tensors[0]).argmax(1)
            result[mode] = {"staleness": server.staleness, "updates": server.version,
                            "accuracy": float((pred == test.tensors[1]).float().mean())}
    return result


def run(workers: int = 2, steps: int = 20, slow_delay: float = 0.02, timeout: float = 120.0,
        **options) -> dict:
    """Start 1 server and ``workers`` workers; return ``{mode: figures}`` where the figures
    combine the server's (staleness, updates, accuracy) and the workers' (seconds, losses)."""
    if options.get("data") is None:
        options["data"] = load_data(options.get("n_train", 1024), None)
    results = launch(ps_worker, workers + 1, steps=steps, slow_delay=slow_delay,
                     timeout=timeout, **options)
    combined = {}
    for mode, server in results[0].items():
        combined[mode] = dict(server)
        combined[mode]["seconds"] = max(r[mode]["seconds"] for r in results[1:])
        combined[mode]["losses"] = [r[mode]["losses"] for r in results[1:]]
    return combined
