"""A slot's student kernels served from one template (``served_kernel``: the kernels of one
``course grade`` run): the template, in the slot's sandbox, imported ipykernel and the lesson's
modules once (``kernel_template``), and each submission's kernel is a fork of it, so a class pays
those imports once per slot (about 4 s of CPU a submission on the course's 2-core machine).

Between two submissions the grader kills every process of the sandbox but bubblewrap's and the
template (it knows them from outside, by the process tree, and checks that none is left), the
template removes what was left in System V IPC and ``/dev/shm``, and the grader empties the
submission folder, ``/tmp`` (but the mount points bubblewrap made there) and the connection
folder; anything short of that stops the sandbox, and the next submission starts a fresh one.

Without a sandbox (``sandbox=False``: the build's round trip, whose reference and blank release
are the instructor's own code, so one template shared by them is acceptable) the template runs
as a plain subprocess with the same rlimits, its kernels in the submission folder itself
(``kernel_template --folder``), and between two submissions the grader kills the kernel's
process tree (the template's descendants) from outside and empties the same folders; the
machine's ``/dev/shm`` and System V IPC are not the template's to clean. That saves the build a
kernel's imports per submission, and a killed kernel no interpreter finalization.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from .sandbox import Limits, _process_table, _read_only_paths, descendants, kill_until_gone
from .sandboxed_process import SandboxedProcess, empty_folder
from .student_kernel import SandboxKernel

TEMPLATE = Path(__file__).resolve().parent / "kernel_template.py"   # run in the sandbox by path
MAX_CONTROL_BYTES = 2**16     # longest line the template may send


class ServedKernel(SandboxKernel):
    """A sandboxed kernel forked from a template that ran ``preload`` (import statements) once;
    its submission folder is its own (``prepare``), and ``finish`` ends one submission's kernel."""

    def __init__(self, limits: Limits, slot: int, scratch: Path | None, preload: str, sandbox: bool = True):
        super().__init__(None, limits, slot, sandbox, scratch)
        self.preload = preload
        self.template_pid = None  # the template's process id outside the sandbox, while it runs
        self.baseline: set = set()   # the sandbox's processes before any kernel (bubblewrap's, the template)
        self.kernel_fd = None     # a pidfd of the kernel that runs now
        self.end_code = None      # its exit code once the template said it ended (negative: a signal)
        self.buffer = b""         # bytes the template sent past its last full line

    def start(self) -> None:
        if not (self.template_pid and SandboxedProcess.alive(self)):
            self._start_template()
        conn_file = self._connection_file()
        self._send({"op": "fork", "connection": conn_file})
        forked = self._receive(self.limits.startup_seconds)
        if not forked or forked.get("op") != "forked":
            self.stop()
            raise RuntimeError(f"the kernel did not start: {self._stderr_end()}")
        children = [pid for pid, (parent, _, _) in _process_table().items() if parent == self.template_pid]
        try:
            self.kernel_fd = os.pidfd_open(children[0]) if len(children) == 1 else None
        except OSError:
            self.kernel_fd = None
        self.end_code = None
        self._connect(conn_file)
        self.kept = self.baseline | set(children[:1])

    def prepare(self) -> Path:
        """A served kernel's submission folder, empty, for the next submission's files (a new
        folder, and so a new sandbox, when the last one could not be emptied)."""
        folder = self.submission
        if folder is not None and folder.is_dir() and not any(os.scandir(folder)):
            return folder
        self.stop()   # the sandbox shows the folder it was started with
        if folder is not None:
            shutil.rmtree(folder.parent, ignore_errors=True)
        self.submission = self._owned_dir(Path(self._mkdtemp("kernel-")) / "submission")
        return self.submission

    def add_preload(self, code: str) -> None:
        """Import statements the template has not run yet: run now when it runs, and at its start
        otherwise (a template kept for the next lesson: ``kept_templates``)."""
        new = [line for line in code.splitlines() if line not in self.preload.splitlines()]
        if not new:
            return
        self.preload = "\n".join([*self.preload.splitlines(), *new])
        if self.template_pid and SandboxedProcess.alive(self):
            self._send({"op": "preload", "code": "\n".join(new)})
            done = self._receive(max(self.limits.startup_seconds, 120.0))
            if not (done and done.get("op") == "done"):
                self.stop()

    def _mkdtemp(self, prefix: str) -> str:
        if self.scratch:
            self.scratch.mkdir(parents=True, exist_ok=True)
        path = tempfile.mkdtemp(prefix=prefix, dir=self.scratch)
        os.chmod(path, 0o755)
        return path

    def _start_template(self) -> None:
        self.stop()
        work = self._new_work()
        self.conn, self.tmp = self._owned_dir(work / "conn"), self._owned_dir(work / "tmp")
        command = [str(Path(sys.executable).parent / "python"), "-u", str(TEMPLATE)]
        if not self.sandbox:   # a plain subprocess: its kernels' folder is the submission folder itself
            command += ["--folder", str(self.submission)]
        self._popen(command, self.submission, self.tmp, self.conn, read_only=[TEMPLATE], cwd=self.submission,
                    pipes=True)
        hello = self._receive(self.limits.startup_seconds)
        if hello and hello.get("op") == "template":
            self._send({"op": "preload", "code": self.preload})
            done = self._receive(max(self.limits.startup_seconds, 120.0))
            if done and done.get("op") == "done":
                self.baseline = set(descendants(self.proc.pid))
                if not self.sandbox:   # the process started is the template itself
                    self.template_pid = self.proc.pid
                    return
                pythons = [pid for pid in self.baseline if _comm(pid).startswith("python")]
                if len(pythons) == 1:
                    self.template_pid = pythons[0]
                    return
        self.stop()
        raise RuntimeError(f"the kernel's template did not start: {self._stderr_end()}")

    def _send(self, obj: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, AttributeError, ValueError):
            pass   # the template is gone: the answer does not come

    def _receive(self, timeout: float) -> dict | None:
        """The template's next message, or None (none in ``timeout`` seconds, or it is gone)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc is None or len(self.buffer) > MAX_CONTROL_BYTES:
                return None
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    return None
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        return msg if isinstance(msg, dict) else None

    def _end_kernel(self) -> bool:
        """Kill a served kernel and everything of the submission's in the sandbox; True when the
        template lives on with nothing else left (and the sandbox may serve again)."""
        self._stop_client()
        if self.kernel_fd is not None:
            os.close(self.kernel_fd)
            self.kernel_fd = None
        if not (self.template_pid and SandboxedProcess.alive(self)):
            return False
        if kill_until_gone(lambda: set(descendants(self.proc.pid)) - self.baseline, 5):
            return False
        deadline = time.monotonic() + 5
        while True:   # the template's "ended" (unless exit_code read it), then "idle"
            msg = self._receive(max(0.1, deadline - time.monotonic()))
            if not msg or msg.get("op") not in ("ended", "idle"):
                return False
            if msg["op"] == "idle":
                return msg.get("clean") is True and set(descendants(self.proc.pid)) == self.baseline

    def finish(self) -> None:
        """One submission's kernel is done with: a served kernel's sandbox stays for the slot's
        next submission when it could be cleared (``_end_kernel``) and its folders emptied; any
        other kernel is stopped."""
        self.output_total, self.limit_hit = 0, ""
        if not self._end_kernel():
            self.stop()
            return
        if not self._emptied(self.submission):
            self.stop()

    def _emptied(self, *more: Path) -> bool:
        """``/tmp`` (but the mount points bubblewrap made there), the connection folder and ``more``
        emptied; True when that worked."""
        return (empty_folder(self.tmp, self.read_only_mounts()) and empty_folder(self.conn)
                and all(empty_folder(folder) for folder in more))

    def read_only_mounts(self) -> set:
        """The entries of the sandbox's ``/tmp`` folder that bubblewrap made as mount points (for
        the read-only folders and the connection folder, when they lie under ``/tmp``): emptying
        the folder must keep them, or the mounts vanish inside the sandbox."""
        paths = [*_read_only_paths([TEMPLATE]), self.conn] if self.conn is not None else _read_only_paths([TEMPLATE])
        return {p.parts[2] for p in paths if len(p.parts) > 2 and p.parts[1] == "tmp"}

    def stop(self) -> None:
        if self.kernel_fd is not None:
            os.close(self.kernel_fd)
            self.kernel_fd = None
        self.template_pid, self.baseline, self.buffer = None, set(), b""
        super().stop()

    def close(self) -> None:
        self.stop()
        if self.submission is not None:   # the kernel's own folder
            shutil.rmtree(self.submission.parent, ignore_errors=True)
            self.submission = None

    def restart(self) -> None:
        """A fresh kernel: a new fork, the submission folder kept."""
        if self._end_kernel() and self._emptied():
            self.start()
            return
        self.stop()
        self.start()

    def alive(self) -> bool:
        """The kernel runs: its own process, not only its sandbox."""
        if not super().alive():
            return False
        fd = self.kernel_fd
        return fd is not None and not select.select([fd], [], [], 0)[0]

    def exit_code(self) -> int | None:
        """How the kernel ended: its exit code (negative, or 128 + N from bubblewrap: signal N);
        None while it runs or when unknown."""
        if self.template_pid and SandboxedProcess.alive(self):
            if self.end_code is None:
                msg = self._receive(2)
                if msg and msg.get("op") == "ended" and type(msg.get("code")) is int:
                    self.end_code = msg["code"]
            return self.end_code
        return self.proc.returncode if self.proc is not None else None

    def interrupt(self) -> None:
        """SIGINT to the kernel (a KeyboardInterrupt in the running cell)."""
        if not self.alive():
            return
        try:
            signal.pidfd_send_signal(self.kernel_fd, signal.SIGINT)
        except OSError:
            pass

def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return ""


def served_kernel(limits: Limits, lesson: dict, slot: int, sandbox: bool, scratch: Path | None) -> ServedKernel:
    """A kernel for one slot's submissions, each forked from one template that imported ipykernel
    and the modules the lesson's setup cells import; in bubblewrap, or without a sandbox as a plain
    subprocess (only for the instructor's own code: see the module's docstring). Put each
    submission's files into ``prepare()``, pass the kernel to ``execute_submission``."""
    from .checker_process import import_statements

    return ServedKernel(limits, slot, scratch, import_statements(code for _, code in lesson["setup"]), sandbox)
