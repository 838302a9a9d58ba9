"""The template of ``warm_kernels`` (run by path, ``python warm_template.py``): it imports ipykernel,
torch, NumPy and pyplot once, then forks one Jupyter kernel per request of its owner.

It speaks over its stdin, an AF_UNIX SOCK_SEQPACKET socket, one JSON object a message (see
``_serve``). It runs no notebook code and no torch operation, so it has one thread when it forks;
each kernel it forks gets SIGKILL when the template dies (``PR_SET_PDEATHSIG``), and the template
kills its kernels and exits when its owner's end of the socket closes.
"""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import select
import signal
import socket
import sys
import traceback

PRELOAD = ("torch", "numpy", "matplotlib.pyplot", "ipykernel.kernelapp", "ipykernel.ipkernel")
INLINE = "module://matplotlib_inline.backend_inline"   # the backend ipykernel sets when none is
MAX_MESSAGE = 1 << 20      # bytes of one control message (the environment is the largest part)
PR_SET_PDEATHSIG = 1



def _send(sock: socket.socket, obj: dict) -> None:
    sock.send(json.dumps(obj).encode())


def _become_kernel(sock: socket.socket, req: dict, fds: list, ready: int, kernels: dict) -> None:
    """In the forked child: become ``python -m ipykernel_launcher`` as the ordinary launch would
    have started it; never returns."""
    code = 1
    try:
        os.setsid()
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != req["template"]:   # the template died before the line above
            os._exit(1)
        os.write(ready, b"k")                 # the template answers "forked" only now
        os.close(ready)
        os.close(sock.detach())
        for fd in kernels:                    # pidfds of the template's other kernels
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)   # as Python sets it at start
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.environ["JPY_PARENT_PID"] = str(os.getppid())
        sys.argv = list(req["argv"])
        sys.orig_argv = list(req["orig_argv"])
        # random states that an import seeds from the OS: a fork would repeat the template's
        # (Python's random reseeds itself at a fork)
        numpy, torch = sys.modules.get("numpy"), sys.modules.get("torch")
        if numpy is not None:
            numpy.random.seed()
        if torch is not None:
            torch.default_generator.seed()    # the CPU generator; CUDA's start in this process
        kernelapp = sys.modules["ipykernel.kernelapp"]   # preloaded
        try:
            kernelapp.launch_new_instance()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        # what a normal exit runs, without the interpreter's teardown (1 s of CPU after torch)
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed stream at exit
                pass
    except BaseException:  # noqa: BLE001 - anything: the kernel ends with code 1
        traceback.print_exc()
    finally:
        os._exit(code)


def _fork(sock: socket.socket, req: dict, fds: list, kernels: dict) -> None:
    """Fork one kernel for a ``fork`` request; answer ``forked`` with its pid, or ``failed``."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        _become_kernel(sock, req, fds, ready_w, kernels)
    os.close(ready_w)
    for fd in set(fds):
        os.close(fd)
    started = os.read(ready_r, 1) == b"k"
    os.close(ready_r)
    kernels[os.pidfd_open(pid)] = pid
    if started:
        _send(sock, {"op": "forked", "id": req.get("id"), "pid": pid})
    else:
        _send(sock, {"op": "failed", "id": req.get("id"), "error": "the forked kernel ended before it started"})


def _serve(sock: socket.socket) -> None:
    """Preload, answer ``ready``, then serve until the owner closes its end. Requests:
    ``{"op": "fork", "id", "template", "argv", "orig_argv", "cwd", "env"}`` with three file
    descriptors (stdin, stdout, stderr); answers: ``forked`` (``pid``) or ``failed`` (``error``),
    and ``ended`` (``pid``, ``code``: exit code, negative for a signal) once a kernel is reaped."""
    for name in PRELOAD:
        __import__(name)
    _send(sock, {"op": "ready", "pid": os.getpid()})
    kernels: dict = {}   # pidfd -> pid, kernels that have not ended yet
    while True:
        readable, _, _ = select.select([sock, *kernels], [], [])
        for fd in readable:
            if fd is sock:
                try:
                    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 3)
                except OSError:
                    data, fds = b"", []
                if not data:   # the owner is gone: so are its kernels
                    for pid in kernels.values():
                        try:
                            os.killpg(pid, signal.SIGKILL)
                        except OSError:
                            pass
                    os._exit(0)
                req = json.loads(data)
                if req.get("op") == "fork" and len(fds) == 3:
                    _fork(sock, req, fds, kernels)
                else:
                    for extra in fds:
                        os.close(extra)
                    _send(sock, {"op": "failed", "id": req.get("id"), "error": "not a fork request"})
            else:
                pid = kernels.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                _send(sock, {"op": "ended", "pid": pid, "code": os.waitstatus_to_exitcode(status)})


def _template_main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p != here]   # as the launcher removes its own entry
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # the owner's Ctrl-C; it closes the socket
    # ipykernel reads JPY_PARENT_PID when it is imported (the parent poller's default): the
    # kernels' parent is this process
    os.environ["JPY_PARENT_PID"] = str(os.getpid())
    if not os.environ.get("MPLBACKEND"):
        os.environ["MPLBACKEND"] = INLINE                # as ipykernel sets it, before pyplot reads it
    sock = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        _serve(sock)
    finally:
        os._exit(1)


if __name__ == "__main__":
    _template_main()
