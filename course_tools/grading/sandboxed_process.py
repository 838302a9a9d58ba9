"""One sandboxed process of a submission, as the grader holds it: its scratch folders (under a
per-run folder chosen by the caller, not ``/tmp``), the process started in the sandbox with
rlimits and a CPU cgroup of its own, the watchdog's look at the whole sandbox (memory, processes,
disk), and its end. :func:`kill_all` ends every live sandbox (the grader calls it on SIGTERM).
The two kinds are ``student_kernel.SandboxKernel`` and ``checker_process.CheckerProcess``.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .cpu_share import CpuGroup
from .sandbox import (
    Limits,
    apply_rlimits,
    clear_user,
    folder_bytes,
    own_process_count,
    sandbox_argv,
    sandbox_env,
    sandbox_uid,
    systemd_scope,
    usage,
)

LIVE: set = set()             # sandboxes started and not yet stopped
STOPPING = threading.Event()  # set by kill_all: no sandbox starts any more until cleared
_LIVE_LOCK = threading.Lock()
WATCH_SECONDS = 0.25          # how often the watchdog looks


_SPAWNER: list = []           # [(pid, executor)]: the one thread this process starts its sandboxes from
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> ThreadPoolExecutor:
    """The thread every sandbox of this process is started from. bubblewrap's --die-with-parent
    (PR_SET_PDEATHSIG) fires when the *thread* that started it ends, not the process: a sandbox
    started by a grading run's pool thread was killed when the run's pool shut down, so a template
    kept for the next run (``kept_templates``) was found dead unless the main thread had started
    it. This thread lives as long as the process (one per process: a forked child makes its own)."""
    with _SPAWNER_LOCK:
        if not _SPAWNER or _SPAWNER[0][0] != os.getpid():
            _SPAWNER[:] = [(os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner"))]
        return _SPAWNER[0][1]


def kill_all(close: bool = False) -> None:
    """Kill the processes of every live sandbox of this grader (SIGTERM, crash clean-up); the
    threads that own them notice and clean up. ``close`` also closes their connections and
    scratch folders: only when no grading thread runs any more (ZeroMQ sockets are not
    thread-safe)."""
    if not close:
        STOPPING.set()
    with _LIVE_LOCK:
        live = list(LIVE)
    for box in live:
        if close:
            box.close()
        else:
            box.kill()


SIGNALS = {6: "aborted (SIGABRT)", 7: "bus error (SIGBUS)", 9: "killed (SIGKILL, often the memory limit)",
           11: "segmentation fault (SIGSEGV)", 24: "CPU time limit reached (SIGXCPU)",
           25: "file size limit reached (SIGXFSZ)"}


def signal_of(code: int | None) -> int | None:
    """The signal that ended a process with exit status ``code``: -N from Popen for the process
    itself, 128 + N from bubblewrap for its child; None for a plain exit (or no status yet)."""
    if code is None:
        return None
    return -code if code < 0 else (code - 128 if code > 128 else None)


def _last_line(stderr: bytes) -> str:
    """The last non-empty line a process wrote to stderr (a traceback's exception line)."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "nothing on stderr"



def empty_folder(folder: Path | None, keep=()) -> bool:
    """Remove everything in ``folder`` but the entries named in ``keep`` (mount points of
    read-only folders bubblewrap made there), never following a link; True when that worked.
    Only for a sandbox's folder while nothing runs in it."""
    if folder is None:
        return True
    try:
        for entry in os.scandir(folder):
            if entry.name in keep:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    except OSError:
        return False
    return True


def _drop_pending_sigint() -> None:
    """In a freshly forked child (SIGINT blocked by the parent): discard a SIGINT that reached the
    grader's process group before the child's setsid, then take SIGINT as usual again."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # ignoring a signal discards it if pending
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

class SandboxedProcess:
    """What both processes share: scratch folders, the popen with rlimits, stop and clean."""

    def __init__(self, limits: Limits, slot: int, sandbox: bool, scratch: Path | None, uid_offset: int):
        self.limits, self.sandbox, self.slot = limits, sandbox, slot
        self.uid = sandbox_uid(slot + uid_offset) if sandbox else None
        self.scratch = Path(scratch) if scratch else None
        self.work = None
        self.proc: subprocess.Popen | None = None
        self.cpu: CpuGroup | None = None     # this sandbox's CPU cgroup (see cpu_share)
        self.stderr_tail = b""

    def _new_work(self) -> Path:
        if self.scratch:
            self.scratch.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="box-", dir=self.scratch))
        os.chmod(self.work, 0o755)
        return self.work

    def _owned_dir(self, path: Path) -> Path:
        path.mkdir(exist_ok=True)
        os.chmod(path, 0o700)
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)
        return path

    def _over_limit(self, check_disk: bool) -> str:
        """Which sandbox-wide limit the processes of this sandbox exceed now ('' if none):
        resident memory and processes summed over the whole process tree (workers, and what
        exited workers left behind, included), and bytes in the folders it may write."""
        rss, threads = usage(self.proc.pid, self.limits.memory_bytes)
        if rss > self.limits.memory_bytes:
            return (f"memory limit reached ({rss / 2**30:.2f} GiB in the sandbox, "
                    f"limit {self.limits.memory_bytes / 2**30:g} GiB)")
        if threads > self.limits.processes + 8:
            return f"process limit reached ({threads} processes and threads, limit {self.limits.processes})"
        if check_disk:
            disk = sum(folder_bytes(folder, self.limits.disk_bytes) for folder in self._watched() if folder is not None)
            if disk > self.limits.disk_bytes:
                return (f"disk limit reached ({disk / 2**20:.0f} MiB written, "
                        f"limit {self.limits.disk_bytes / 2**20:g} MiB)")
        return ""

    def _popen(self, command, submission, tmp, conn_dir, read_only=(), cwd=None, pipes=False):
        if STOPPING.is_set():
            raise RuntimeError("grading was stopped")
        venv_bin = Path(sys.executable).parent
        limits = self.limits
        if self.uid is None:  # not root: the process limit counts all our processes
            limits = Limits(**{**limits.__dict__, "processes": limits.processes + own_process_count()})
        elif self.sandbox:  # this slot's user: nothing of its last sandbox may count against this one
            clear_user(self.uid)
        if self.sandbox:
            argv = sandbox_argv(command, submission, tmp, conn_dir, self.uid, read_only, self.limits)
            env = sandbox_env(venv_bin)
        else:
            argv = command
            env = {**os.environ, **{k: v for k, v in sandbox_env(venv_bin).items() if k not in ("HOME", "PATH")}}
        # a CPU share of its own, unless a systemd scope (CPUWeight) is that cgroup already
        self.cpu = CpuGroup() if not (self.sandbox and systemd_scope()) else None
        cpu = self.cpu

        def in_child():
            os.setsid()   # a session of its own: the grader's Ctrl-C (its process group) stops here
            _drop_pending_sigint()
            if cpu:
                cpu.join()
            apply_rlimits(limits)

        def start():
            # SIGINT blocked while forking: the child runs Python (threading's after-fork hooks) before
            # its setsid, and a Ctrl-C there printed a KeyboardInterrupt traceback into the grader's stderr
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                self.proc = subprocess.Popen(
                    argv, preexec_fn=in_child, env=env, cwd=None if self.sandbox else cwd,
                    stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                    stdout=subprocess.PIPE if pipes else subprocess.DEVNULL, stderr=subprocess.PIPE)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            with _LIVE_LOCK:
                LIVE.add(self)

        _spawner().submit(start).result()
        self._drainer = threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True)
        self._drainer.start()

    def _stderr_end(self) -> str:
        """The last line the exited process wrote to stderr (once the reader has caught up)."""
        self._drainer.join(timeout=2)
        return _last_line(self.stderr_tail)

    def _drain(self, stream) -> None:
        try:
            for chunk in iter(lambda: stream.read(4096), b""):
                self.stderr_tail = (self.stderr_tail + chunk)[-2000:]
        except (OSError, ValueError):
            pass

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to the sandbox's process group; nothing else (safe from a signal handler)."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # --new-session / setsid: own group
                except (ProcessLookupError, PermissionError):
                    pass
                proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (proc.stdin, proc.stdout):
                if stream:
                    try:
                        stream.close()
                    except OSError:
                        pass
        if self.cpu is not None:
            self.cpu.remove()
            self.cpu = None
        with _LIVE_LOCK:
            LIVE.discard(self)
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
            self.work = None

    close = stop
