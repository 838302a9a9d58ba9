"""A fork server for :func:`course_lib.parallel.launch.launch`'s workers (the launcher imports this
module; this module imports only the worker's side, :mod:`.worker`, so they form no circle).

A fresh Python process spends about 0.9 s of CPU importing ``torch`` before a worker does
anything (measured on the course's 2-core CPU machine); four workers per launch, and lessons
10, 11 and 13 launch often. So the first launch in a process starts this server: a plain
interpreter (started with ``exec``, so it holds nothing of the caller's memory) that imports
``torch`` and the worker's side once and then forks one child per worker. A child costs about
0.1 s of CPU to start.

``multiprocessing``'s own ``forkserver`` would import the caller's ``__main__`` again in every
child (in a notebook, the kernel's launcher), so this server is kept to what the launcher
needs. Protocol, one JSON object per line: the caller writes ``{"folder", "env", "log"}`` on
the server's stdin; the server answers ``{"pid": n}`` and, when a child ends,
``{"exit": n, "code": c}`` (``c`` negative for a signal, as ``subprocess`` reports it).
A child sees ``sys.argv`` as ``[worker.py, folder]``. A request may also name modules of
:data:`PRELOADABLE` under ``"preload"``: the server imports them once, before it forks, so the
children find them imported: ``torch._dynamo``, which the constructors of DDP, FSDP2's
``fully_shard`` and DTensor's ``parallelize_module`` import (1.2 s of CPU per worker otherwise;
lesson 10's graded DDP step starts two workers per check). The course's own modules are never
preloaded: a server serves many launches, and a check sees which ``course_lib`` modules a
student's function imported (``checks.collectives``), which modules that an earlier launch had
preloaded would hide.

A child starts its own session (the caller kills it and whatever it starts as one process
group), adds ``env`` to its environment, writes its output to ``log`` and runs
``worker.main(folder)`` (:mod:`.worker`), which collects that rank's job and arguments from
the caller itself: they never pass through the server. When the caller goes away (the server's
stdin closes), the server kills its children's groups and ends.

The server makes itself non-dumpable before it forks anything, and its children inherit that: a
worker (which runs a student's code in a graded check) can then neither read nor write the
server's or a sibling's memory, environment or pipes through ``/proc``, though they share a user.
"""
from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# read once, when the server's interpreter starts or loads torch
SERVER_ENV = {"PYTHONWARNINGS": "ignore", "TORCH_CPP_LOG_LEVEL": "ERROR"}
# what a request may ask the server to import before it forks (nothing else is imported there)
PRELOADABLE = ("torch._dynamo",)


class ServerGone(RuntimeError):
    """The fork server ended (killed, or it could not start)."""


class ForkServer:
    """The caller's side: start workers, learn how they ended."""

    def __init__(self):
        env = {**os.environ, **SERVER_ENV}
        root = str(Path(__file__).resolve().parents[2])   # course_lib's folder, as workers always had it
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.errors = tempfile.TemporaryFile()   # the server's own errors (e.g. torch failing to load)
        self.proc = subprocess.Popen([sys.executable, "-m", "course_lib.parallel.fork_server"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors)
        self.owner = os.getpid()           # a forked copy of the caller starts its own server
        self.codes: dict[int, int] = {}    # pid -> exit code, for children that ended
        self.buffer, self.ended = b"", False
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.owner == os.getpid() and not self.ended and self.proc.poll() is None

    def gone(self, why: str = "ended") -> ServerGone:
        """The error for a server that ended, with the end of what it wrote to stderr."""
        self.ended = True
        self.errors.seek(0)
        tail = self.errors.read().decode(errors="replace").strip()[-1500:]
        return ServerGone(f"the workers' fork server {why}" + (f":\n{tail}" if tail else ""))

    def _read(self, timeout: float) -> list[dict]:
        """Messages the server has written, waiting up to ``timeout`` s for the first."""
        out = self.proc.stdout.fileno()
        ready, _, _ = select.select([out], [], [], timeout)
        while ready and not self.ended:
            chunk = os.read(out, 1 << 16)
            self.ended = not chunk
            self.buffer += chunk
            ready, _, _ = select.select([out], [], [], 0)
        *lines, self.buffer = self.buffer.split(b"\n")
        messages = [json.loads(line) for line in lines if line]
        for msg in messages:
            if "exit" in msg:
                self.codes[msg["exit"]] = msg["code"]
        return messages

    def start(self, folder: str, env: dict, log: str, timeout: float = 60.0, preload: tuple = ()) -> int:
        """Fork one worker (after importing the modules of ``preload`` that are in
        :data:`PRELOADABLE`, in the server if it has not yet); its pid. Raises :class:`ServerGone`
        if the server has ended."""
        request = {"folder": folder, "env": env, "log": log, "preload": [m for m in preload if m in PRELOADABLE]}
        with self.lock:
            try:
                self.proc.stdin.write((json.dumps(request) + "\n").encode())
                self.proc.stdin.flush()
            except OSError:
                raise self.gone() from None
            deadline = time.monotonic() + timeout
            while not self.ended:
                started = [m["pid"] for m in self._read(max(0.0, deadline - time.monotonic())) if "pid" in m]
                if started:
                    return started[0]
                if time.monotonic() > deadline:
                    self.proc.kill()
                    raise self.gone(f"did not answer in {timeout:g} s and was stopped")
            raise self.gone()

    def exit_codes(self, pids) -> list:
        """The exit code of each worker, None for one still running. Raises :class:`ServerGone`
        when the server ended before reporting them all."""
        with self.lock:
            if not self.ended:
                self._read(0)
            codes = [self.codes.get(p) for p in pids]
            if self.ended and None in codes:
                raise self.gone()
            return codes

    def forget(self, pids) -> None:
        """Drop what is known of these workers (they have been collected)."""
        with self.lock:
            for p in pids:
                self.codes.pop(p, None)


_SERVER: ForkServer | None = None
_SERVER_LOCK = threading.Lock()


def running() -> ForkServer | None:
    """This process's fork server if one is running, else None."""
    with _SERVER_LOCK:
        return _SERVER if _SERVER is not None and _SERVER.alive() else None


def server() -> ForkServer:
    """This process's fork server, started on first use (and again if it ended)."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None or not _SERVER.alive():
            _SERVER = ForkServer()
        return _SERVER


# -- the server's side -----------------------------------------------------------------------
def _child(request: dict, channel: tuple[int, int]) -> None:
    """In the forked child: session, environment, output, then the job (never returns)."""
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fd in channel:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        if "numpy" in sys.modules:   # a fresh process would not share the server's random state
            sys.modules["numpy"].random.seed()
        from course_lib.parallel import worker

        sys.argv = [worker.__file__, request["folder"]]
    except BaseException:  # noqa: BLE001 - reported in the worker's log, its exit code 1
        import traceback

        traceback.print_exc()
        os._exit(1)
    worker.main(request["folder"])


def _preload(names) -> None:
    """Import each of ``names`` that is in :data:`PRELOADABLE` (once: then it is in sys.modules).
    A module that fails to import is left to the worker, which reports the error itself."""
    for name in names:
        if isinstance(name, str) and name in PRELOADABLE and name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the worker's own import says what went wrong
                pass


def _serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a notebook's interrupt is for the kernel only
    from course_lib.parallel import worker  # torch, once, for every child

    worker.keep_workers_out()   # and every child inherits it

    inp, out = sys.stdin.fileno(), os.dup(sys.stdout.fileno())
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)   # stray writes never reach the protocol
    os.close(null)
    children: set[int] = set()
    buffer = b""

    def say(obj) -> None:
        os.write(out, (json.dumps(obj) + "\n").encode())

    while True:
        ready, _, _ = select.select([inp], [], [], 0.02 if children else None)   # idle: sleep until asked
        if ready:
            chunk = os.read(inp, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in filter(None, lines):
                request = json.loads(line)
                _preload(request.get("preload", ()))
                pid = os.fork()
                if pid == 0:
                    _child(request, (inp, out))
                children.add(pid)
                say({"pid": pid})
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                say({"exit": pid, "code": os.waitstatus_to_exitcode(status)})
    for pid in children:   # the caller went away: so do its workers
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__":
    _serve()
    os._exit(0)   # its caller is gone: no interpreter finalization (about 1 CPU-s with torch imported)
