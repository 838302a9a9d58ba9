"""Make sure the loopback interface works.

Jupyter kernels, nbgrader and torch.distributed (gloo, rpc) all talk over 127.0.0.1. On a
machine whose network is cut with ``unshare -n`` the new network namespace starts with its
loopback interface *down*, so every kernel start would time out. As root in such a namespace
we can bring it up: that touches no outside network.
"""
from __future__ import annotations

import shutil
import socket
import subprocess


def loopback_works(timeout: float = 1.0) -> bool:
    """True when a TCP connection to a listener on 127.0.0.1 succeeds."""
    try:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            with socket.create_connection(server.getsockname(), timeout=timeout):
                return True
    except OSError:
        return False


def ensure_loopback() -> bool:
    """Bring 127.0.0.1 up if it is down and we are allowed to; return whether it works."""
    if loopback_works():
        return True
    ip = shutil.which("ip") or "/sbin/ip"
    try:
        subprocess.run([ip, "link", "set", "lo", "up"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        print("course: the loopback interface (127.0.0.1) is down and cannot be brought up; "
              "Jupyter kernels and torch.distributed need it (run `ip link set lo up` as root).")
        return False
    print("course: the loopback interface was down (a network namespace with no network?); "
          "brought it up so kernels can start. No outside network is used.")
    return loopback_works()
