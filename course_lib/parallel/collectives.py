"""Allreduce three ways over ``torch.distributed`` send/recv, and their cost (lessons 10, 11).

Allreduce turns one tensor per process into their element-wise sum, on every process.
Three schedules, all written with ``dist.send`` / ``dist.recv`` only:

- :func:`naive_allreduce`: everybody sends to rank 0, rank 0 adds and sends the sum back.
  Rank 0's link carries ``2 (n-1)`` full tensors: time grows with ``n``.
- :func:`tree_allreduce`: a binomial tree reduces to rank 0 in ``ceil(log2 n)`` rounds, then
  broadcasts down the same tree. ``2 log2 n`` full-tensor transfers on the critical path.
- :func:`ring_allreduce`: the tensor is cut into ``n`` chunks; ``n-1`` reduce-scatter steps
  (pass a chunk to the right neighbour, which adds its own) then ``n-1`` all-gather steps
  (pass the finished chunks around). Each link carries ``2 (n-1)/n`` of the tensor, nearly
  independent of ``n`` (A. Zhang, Z. C. Lipton, M. Li, A. J. Smola, *Dive into Deep Learning*,
  2023, section 12.7, https://d2l.ai/chapter_computational-performance/parameterserver.html).

The cost model (the same section) prices the schedules with a latency ``alpha``
(seconds per message) and a bandwidth (bytes per second) per link.
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

from .launch import init_process_group, launch

# ------------------------------------------------------------------ the ring schedule


def ring_chunk(rank: int, step: int, n: int) -> int:
    """The chunk that ``rank`` sends to ``rank + 1`` in step ``step`` (``0 ... 2 (n-1) - 1``)
    of this module's ring: in reduce-scatter step ``s`` the chunk ``rank - s``, in all-gather
    step ``s`` the chunk ``rank + 1 - s`` (the one it finished or received last), mod ``n``."""
    phase_step = step if step < n - 1 else step - (n - 1)
    offset = 0 if step < n - 1 else 1
    return (rank + offset - phase_step) % n


def ring_schedule(n: int) -> list[list[tuple[int, int, int]]]:
    """The steps of a ring allreduce on ``n`` ranks: a list of ``2 (n-1)`` steps.

    Each step is a list of ``(src, dst, chunk)`` transfers that happen at the same time:
    rank ``src`` sends its chunk number ``chunk`` (:func:`ring_chunk`) to
    ``dst = (src + 1) % n``. In the first ``n-1`` steps (reduce-scatter) the receiver *adds*
    the chunk to its own; in the last ``n-1`` steps (all-gather) it *overwrites* its copy.
    After reduce-scatter rank ``r`` holds the finished chunk ``(r + 1) % n``.
    """
    return [[(r, (r + 1) % n, ring_chunk(r, s, n)) for r in range(n)] for s in range(2 * (n - 1))]


def simulate_ring_allreduce(tensors: list[torch.Tensor], schedule=None,
                            steps: int | None = None) -> list[torch.Tensor]:
    """Run a ring schedule on a list of tensors in one process (rank ``i`` = ``tensors[i]``).

    ``schedule`` defaults to :func:`ring_schedule`; its first ``n-1`` steps add, the others
    overwrite. ``steps`` stops after that many steps (``n-1``: the state after
    reduce-scatter). Returns new tensors (the inputs are not changed); after the whole
    schedule each equals the sum of the inputs. Useful to watch a schedule and to check it
    without starting processes.
    """
    n = len(tensors)
    schedule = ring_schedule(n) if schedule is None else schedule
    chunks = [list(torch.tensor_split(t.detach().clone().reshape(-1), n)) for t in tensors]
    for step_number, step in enumerate(schedule[:steps]):
        sent = [(dst, c, chunks[src][c].clone()) for src, dst, c in step]
        for dst, c, data in sent:
            if step_number < n - 1:
                chunks[dst][c] += data
            else:
                chunks[dst][c].copy_(data)
    return [torch.cat(parts).reshape(t.shape) for parts, t in zip(chunks, tensors)]


# ------------------------------------------------------- allreduce over point-to-point


def naive_allreduce(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over all ranks in place: gather to rank 0, add, send the sum back."""
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        buffer = torch.empty_like(tensor)
        for src in range(1, n):
            dist.recv(buffer, src=src)
            tensor += buffer
        for dst in range(1, n):
            dist.send(tensor, dst=dst)
    else:
        dist.send(tensor, dst=0)
        dist.recv(tensor, src=0)
    return tensor


def tree_allreduce(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over all ranks in place with a binomial tree (reduce, then broadcast).

    Round ``d = 1, 2, 4, ...``: a rank whose number is an odd multiple of ``d`` sends its
    partial sum to ``rank - d`` and drops out; ``rank - d`` adds it. The broadcast runs the
    rounds backwards. Works for any number of ranks, not only powers of two.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    rounds = []
    d = 1
    while d < n:
        rounds.append(d)
        d *= 2
    buffer = torch.empty_like(tensor)
    for d in rounds:
        if rank % (2 * d) == d:
            dist.send(tensor, dst=rank - d)
            break
        if rank % (2 * d) == 0 and rank + d < n:
            dist.recv(buffer, src=rank + d)
            tensor += buffer
    for d in reversed(rounds):
        if rank % (2 * d) == d:
            dist.recv(tensor, src=rank - d)
        elif rank % (2 * d) == 0 and rank + d < n:
            dist.send(tensor, dst=rank + d)
    return tensor


def ring_allreduce(tensor: torch.Tensor, segment_bytes: int = 1 << 22) -> torch.Tensor:
    """Sum ``tensor`` over all ranks in place with the chunked ring of :func:`ring_schedule`.

    In every step a rank sends one chunk to ``rank + 1`` and receives one from ``rank - 1``
    at the same time. Chunks travel in segments of about ``segment_bytes``: all receives of
    a step are posted first, so the addition of segment ``j`` overlaps the arrival of
    segment ``j + 1`` (pipelining, as NCCL and gloo do). Chunks may differ in size by one
    element (``tensor_split``) or be empty.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    if n == 1:
        return tensor
    flat = tensor.view(-1) if tensor.is_contiguous() else tensor.reshape(-1).clone()
    chunks = list(torch.tensor_split(flat, n))
    right, left = (rank + 1) % n, (rank - 1) % n
    per_segment = max(1, segment_bytes // flat.element_size())
    buffer = torch.empty(max(c.numel() for c in chunks), dtype=flat.dtype, device=flat.device)
    for step_number, step in enumerate(ring_schedule(n)):
        outgoing = chunks[step[rank][2]]
        target = chunks[step[left][2]]
        reducing = step_number < n - 1
        receives = []
        for start in range(0, target.numel(), per_segment):
            # reduce-scatter: receive into a buffer, then add; all-gather: straight in place
            landing = (buffer if reducing else target)[start:min(start + per_segment, target.numel())]
            receives.append((start, landing, dist.irecv(landing, src=left)))
        sends = [dist.isend(outgoing[start:start + per_segment], dst=right)
                 for start in range(0, outgoing.numel(), per_segment)]
        for start, landing, request in receives:
            request.wait()
            if reducing:
                target[start:start + landing.numel()] += landing
        for request in sends:
            request.wait()
    if flat.data_ptr() != tensor.data_ptr():
        tensor.copy_(flat.view(tensor.shape))
    return tensor


ALLREDUCES = {"naive": naive_allreduce, "tree": tree_allreduce, "ring": ring_allreduce}


def builtin_allreduce(tensor: torch.Tensor) -> torch.Tensor:
    """``dist.all_reduce`` (sum) in place: the reference the others are checked against."""
    dist.all_reduce(tensor)
    return tensor


# ------------------------------------------------------------------ workers (spawned)


def check_worker(sizes: list[int], seed: int = 0) -> dict:
    """Worker for :func:`course_lib.parallel.launch.launch`: compare every allreduce with
    ``dist.all_reduce`` on tensors of the given sizes. Returns ``{name: max abs error}``.
    Uses the process group already there, if any (and then leaves it for the caller)."""
    owns = not dist.is_initialized()
    rank, world, _ = init_process_group("gloo")
    errors = {name: 0.0 for name in ALLREDUCES}
    for size in sizes:
        gen = torch.Generator().manual_seed(seed + 1000 * rank + size)
        x = torch.randn(size, generator=gen, dtype=torch.float64)
        expected = x.clone()
        dist.all_reduce(expected)
        for name, fn in ALLREDUCES.items():
            got = fn(x.clone())
            errors[name] = max(errors[name], float((got - expected).abs().max()) if size else 0.0)
    if owns:
        dist.destroy_process_group()
    return errors


def timing_worker(numels: list[int], names: list[str], repeat: int = 5) -> dict:
    """Worker: median seconds of each allreduce (plus ``"builtin"``) per tensor size.

    All ranks start each repeat together (a barrier); the time is the slowest rank's, as
    seen by rank 0 after a final barrier. The names take turns within each repeat, so a
    change in the machine's load affects them alike. Returns ``{name: {numel: seconds}}``.
    Uses the process group already there, if any (and then leaves it for the caller).
    """
    owns = not dist.is_initialized()
    init_process_group("gloo", timeout=120)
    fns = dict(ALLREDUCES, builtin=builtin_allreduce)
    table = {name: {} for name in names}
    for numel in numels:
        x = torch.ones(numel, dtype=torch.float32)
        times = {name: [] for name in names}
        for name in names:
            fns[name](x)  # warm-up: connections, buffers
        for _ in range(repeat):
            for name in names:
                dist.barrier()
                start = time.perf_counter()
                fns[name](x)
                dist.barrier()
                times[name].append(time.perf_counter() - start)
        for name in names:
            table[name][numel] = statistics.median(times[name])
    if owns:
        dist.destroy_process_group()
    return table


def check_and_time_worker(check_sizes: list[int], numels: list[int], names: list[str],
                          repeat: int = 5) -> dict:
    """Worker: :func:`check_worker` then :func:`timing_worker` in the same processes and the
    same process group. (A second group made in the same processes meets at the same port,
    where a slow rank could still find the first group's store: all ranks then waited for
    keys that never came, a hang seen once on a loaded machine.)"""
    init_process_group("gloo", timeout=120)
    errors = check_worker(check_sizes)
    seconds = timing_worker(numels, names, repeat)
    dist.destroy_process_group()
    return {"errors": errors, "seconds": seconds}


def check_and_measure(world_size: int, check_sizes=(0, 1, 7, 1001), numels=(10_000, 100_000, 1_000_000),
                      names=("naive", "tree", "ring", "builtin"), repeat: int = 5,
                      timeout: float = 120.0) -> dict:
    """One launch of ``world_size`` processes: the worst error of every allreduce against
    ``dist.all_reduce`` (``"errors"``) and rank 0's median seconds (``"seconds"``,
    ``{name: {numel: seconds}}``)."""
    results = launch(check_and_time_worker, world_size, list(check_sizes), list(numels),
                     list(names), repeat, timeout=timeout)
    errors = {name: max(r["errors"][name] for r in results) for name in ALLREDUCES}
    return {"errors": errors, "seconds": results[0]["seconds"]}


def check_against_builtin(world_size: int, sizes: list[int], timeout: float = 60.0) -> dict:
    """Start ``world_size`` gloo processes and return the worst error of each allreduce."""
    results = launch(check_worker, world_size, sizes, timeout=timeout)
    return {name: max(r[name] for r in results) for name in ALLREDUCES}


def measure_allreduce(world_size: int, numels: list[int], names=("ring", "builtin"),
                      repeat: int = 5, timeout: float = 120.0) -> dict:
    """Measured seconds per allreduce: ``{name: {numel: seconds}}`` (rank 0's view)."""
    return launch(timing_worker, world_size, list(numels), list(names), repeat,
                  timeout=timeout)[0]


# ------------------------------------------------------------------------ cost model


def transfer_seconds(nbytes: float, bandwidth: float, latency: float = 0.0) -> float:
    """Seconds to move ``nbytes`` over one link of ``bandwidth`` bytes/s plus ``latency`` s."""
    return latency + nbytes / bandwidth


def aggregate_on_one_gpu_seconds(nbytes: float, n: int, bandwidth: float,
                                 latency: float = 0.0) -> float:
    """The other ``n-1`` GPUs send their gradients to one GPU, one after another through that
    GPU's link, which then sends the updated parameters back the same way.

    *Dive into Deep Learning*, 12.7.1: 160 MB on 4 GPUs at 16 GB/s: 3 x 10 ms + 3 x 10 ms = 60 ms.
    """
    return 2 * (n - 1) * transfer_seconds(nbytes, bandwidth, latency)


def aggregate_on_cpu_seconds(nbytes: float, n: int, bandwidth: float,
                             latency: float = 0.0) -> float:
    """All ``n`` GPUs send to the CPU through its one link, and receive the result back.

    *Dive into Deep Learning*, 12.7.1: 4 x 10 ms + 4 x 10 ms = 80 ms.
    """
    return 2 * n * transfer_seconds(nbytes, bandwidth, latency)


def split_aggregate_seconds(nbytes: float, n: int, bandwidth: float,
                            latency: float = 0.0) -> float:
    """Cut the gradients into ``n`` parts and aggregate part ``i`` on GPU ``i``; all links
    of a full-bandwidth PCIe switch work at once, so each GPU receives ``n-1`` parts of
    ``nbytes / n`` and sends as many back.

    *Dive into Deep Learning*, 12.7.1: 3 x 40 MB / 16 GB/s = 7.5 ms, twice: 15 ms.
    """
    return 2 * (n - 1) * transfer_seconds(nbytes / n, bandwidth, latency)


def ring_allreduce_seconds(nbytes: float, n: int, bandwidth: float, latency: float = 0.0) -> float:
    """Ring allreduce: ``2 (n-1)`` steps, each moving ``nbytes / n`` over every link at once.

    ``bandwidth`` is what one GPU can send to its neighbour (all rings together). As
    ``n`` grows the time tends to ``2 nbytes / bandwidth`` (:func:`ring_allreduce_limit_seconds`).
    8 V100s on NVLink 2.0 (25 GB/s per link and direction, NVIDIA, "NVIDIA Tesla V100 GPU
    Architecture", 2017), with rings that give every GPU 3 links' worth to its neighbour:
    160 MB take ``2 x 7/8 x 160 MB / (3 x 25 GB/s)`` = 3.7 ms, 4.3 ms in the large-``n`` limit.
    """
    if n == 1:
        return 0.0
    return 2 * (n - 1) * transfer_seconds(nbytes / n, bandwidth, latency)


def ring_allreduce_limit_seconds(nbytes: float, bandwidth: float) -> float:
    """The large-``n`` limit of the ring: ``2 nbytes / bandwidth`` (seconds)."""
    return 2 * nbytes / bandwidth


def tree_allreduce_seconds(nbytes: float, n: int, bandwidth: float, latency: float = 0.0) -> float:
    """Seconds of a binomial tree: ``ceil(log2 n)`` rounds up and as many down, each a full tensor."""
    if n == 1:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * transfer_seconds(nbytes, bandwidth, latency)


def naive_allreduce_seconds(nbytes: float, n: int, bandwidth: float, latency: float = 0.0) -> float:
    """Gather to one rank and send back: the same as :func:`aggregate_on_one_gpu_seconds`."""
    return aggregate_on_one_gpu_seconds(nbytes, n, bandwidth, latency)


STRATEGIES = {
    "one GPU aggregates": aggregate_on_one_gpu_seconds,
    "CPU aggregates": aggregate_on_cpu_seconds,
    "split over all GPUs": split_aggregate_seconds,
    "ring": ring_allreduce_seconds,
    "tree": tree_allreduce_seconds,
}


def strategy_seconds(nbytes: float, n: int, bandwidth: float, latency: float = 0.0) -> dict:
    """Seconds of every strategy in :data:`STRATEGIES` for the same message and links."""
    return {name: fn(nbytes, n, bandwidth, latency) for name, fn in STRATEGIES.items()}


def fit_latency_bandwidth(numels, seconds, n: int, bytes_per_element: int = 4) -> tuple[float, float]:
    """Fit the ring model ``2 (n-1) (alpha + nbytes / (n B))`` to measured times.

    Returns ``(alpha seconds, B bytes/s)`` by least squares on the line
    ``t / (2 (n-1)) = alpha + (nbytes / n) / B``.
    """
    x = np.asarray(numels, dtype=float) * bytes_per_element / n
    y = np.asarray(seconds, dtype=float) / (2 * (n - 1))
    slope, intercept = np.polyfit(x, y, 1)
    slope = max(slope, 1e-15)
    return max(float(intercept), 0.0), float(1.0 / slope)
