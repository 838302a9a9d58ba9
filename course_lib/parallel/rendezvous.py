"""Where the processes of one launch meet: ports on localhost and the rendezvous store.

A port chosen by binding port 0 and released again can be handed to another program (gloo
binds port 0 for every connection it listens on) before the process meant to use it binds it.
So :func:`free_port` picks below the OS's ephemeral range, and :func:`workers_store` is held by
the launching process from before any worker starts, as ``torchrun``'s agent holds its store.
A worker joins with :func:`init_process_group`.
"""
from __future__ import annotations

import datetime
import random
import socket
import os
from pathlib import Path

import torch
import torch.distributed as dist


def ephemeral_ports() -> tuple[int, int]:
    """The range the OS picks ports from when a program binds port 0 (Linux's default if unknown)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A TCP port on localhost that nothing listens on right now, chosen at random below the
    OS's ephemeral range: a program that binds port 0 (gloo does, for every connection it
    listens on) can never be given it while it waits to be used (e.g. by ``torchrun``)."""
    low, _ = ephemeral_ports()
    candidates = range(10_000, low) if low > 11_000 else range(low, 65_536)
    for _ in range(200):
        port = random.choice(candidates)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def workers_store(timeout: float):
    """The key-value store the workers of one launch meet at, held by the launching process (as
    ``torchrun``'s agent holds it): it listens, on a port the OS chose, before any worker starts
    and until they have all ended, so no other program can take that port in between. Workers
    join it as clients (``TORCHELASTIC_USE_AGENT_STORE``, set by :func:`_worker_env`)."""
    return dist.TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=timeout),
                         wait_for_workers=False)


def init_process_group(backend: str | None = None, timeout: float = 30.0):
    """Join the process group described by the environment (as ``torchrun`` sets it).

    ``backend`` defaults to NCCL when this machine has a CUDA GPU for every local process
    (``LOCAL_WORLD_SIZE``), gloo on the CPU otherwise: NCCL refuses two ranks on one GPU.
    ``timeout`` (seconds) bounds every collective, so a missing peer becomes an error.
    Returns ``(rank, world_size, device)``.
    """
    if backend is None:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        enough = torch.cuda.is_available() and torch.cuda.device_count() >= local
        backend = "nccl" if enough else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count()
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    return rank, world, device
