"""Where the processes of one launch meet: ports on localhost and the rendezvous store.

A port chosen by binding port 0 and released again can be handed to another program (gloo
binds port 0 for every connection it listens on) before the process meant to use it binds it.
So :func:`free_port` picks below the OS's ephemeral range, and :func:`workers_store` is held by
the launching process from before any worker starts, as ``torchrun``'s agent holds its store.
A worker joins with :func:`init_process_group`. Each worker collects its own arguments from the
launcher's :class:`Handoff` (:func:`collect_inputs`), so no rank's inputs are ever where another
rank's code could find them.
"""
from __future__ import annotations

import datetime
import os
import random
import socket
import sys
import time
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


# -- each worker's own inputs ----------------------------------------------------------------
HANDOFF_ENV = "COURSE_LAUNCH_HANDOFF"   # where a worker asks for its inputs (a Unix socket)


class Handoff:
    """The launching process's desk where each worker collects its own inputs, and only its own.

    Arguments that differ by rank (one rank's tensors in a check) must never exist in a process
    that another rank's code can reach, nor in a file of the launch folder (every worker can read
    it). So nothing of them is written anywhere: each worker, started by the fork server (which
    never holds them either), connects to this Unix socket before it runs any job, and receives
    the pickled ``(job, args, kwargs)`` meant for it. On Linux the worker is recognized by the
    kernel's account of who connected (``SO_PEERCRED``: its process id, which the launcher got
    from the fork server), not by anything it says, so a worker asking as another rank gets
    nothing; each payload is handed out once. Elsewhere (no ``SO_PEERCRED``) the worker's own
    word (its rank) is taken: such a machine does not grade.

    The socket has a random name in Linux's abstract namespace (no file to find, no path-length
    limit) or, elsewhere, a file in ``folder``."""

    def __init__(self, folder: str):
        import secrets
        import socket

        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.by_pid = hasattr(socket, "SO_PEERCRED")
        if sys.platform.startswith("linux"):
            self.address = "@course-launch-" + secrets.token_hex(12)
            self.sock.bind("\0" + self.address[1:])
        else:
            self.address = str(Path(folder) / "handoff.sock")
            self.sock.bind(self.address)
        self.sock.listen(64)
        self.sock.setblocking(False)
        self.waiting: dict = {}   # pid (Linux) or rank -> the payload not yet collected (bytes)

    def expect(self, pid: int, rank: int, payload: bytes) -> None:
        """Hold ``payload`` for the worker with process id ``pid`` (rank ``rank``)."""
        key = pid if self.by_pid else rank
        if key in self.waiting:
            raise RuntimeError(f"two workers reported as process {pid}: the launch is stopped")
        self.waiting[key] = payload

    def serve(self, deadline: float) -> None:
        """Hand every worker that has connected by now its payload (waiting for none); a
        connection from any other process is closed unanswered. ``deadline``: ``time.monotonic()``
        seconds by which a send must be done."""
        import socket
        import struct

        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            with conn:
                try:
                    conn.settimeout(10.0)   # a worker says its rank as soon as it connects
                    claimed = int(conn.recv(16).split(b"\n")[0])   # read first: unread, close resets
                    conn.settimeout(max(1.0, deadline - time.monotonic()))
                    if self.by_pid:
                        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                        key = struct.unpack("3i", creds)[0]
                    else:
                        key = claimed
                    payload = self.waiting.pop(key, None)
                    if payload is not None:
                        conn.sendall(payload)
                except (OSError, ValueError):
                    pass   # the worker left, or a process that is no worker: it ends without inputs

    def close(self) -> None:
        self.sock.close()
        self.waiting.clear()
        if not self.address.startswith("@"):
            Path(self.address).unlink(missing_ok=True)


def collect_inputs(timeout: float = 120.0) -> bytes:
    """In a worker: the payload the launcher holds for this process (:class:`Handoff`), read
    from the socket named in the environment. ``timeout`` in seconds."""
    import socket

    address = os.environ[HANDOFF_ENV]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect("\0" + address[1:] if address.startswith("@") else address)
        sock.sendall(f"{os.environ.get('RANK', '0')}\n".encode())
        chunks = []
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
    if not chunks:
        raise RuntimeError("this worker was given no inputs by the launcher")
    return b"".join(chunks)
