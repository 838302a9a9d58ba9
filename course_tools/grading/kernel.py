"""The two sandboxed processes of one submission, as the grader sees them:

* :class:`SandboxKernel`: the student's IPython kernel (ZeroMQ over Unix sockets); runs the
  student's cells; every output is collected with per-cell and per-notebook caps; a watchdog
  kills it when the whole sandbox passes its memory, process or disk limit.
* :class:`CheckerProcess`: the trusted checker (``checker.py``) over pipes; started first.

Scratch folders live under a per-run folder chosen by the caller (not ``/tmp``), and
:func:`kill_all` ends every live sandbox (the grader calls it on SIGTERM).
"""
from __future__ import annotations

import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import zmq

from .cpu_share import CpuGroup
from .sandbox import (SLOTS, CellRun, Limits, _apply_rlimits, _own_process_count, clear_user, descendants,
                      folder_bytes, is_kernel_python, sandbox_argv, sandbox_env, sandbox_uid, systemd_scope, usage)

LIVE: set = set()             # sandboxes started and not yet stopped
STOPPING = threading.Event()  # set by kill_all: no sandbox starts any more until cleared
_LIVE_LOCK = threading.Lock()
WATCH_SECONDS = 0.25          # how often the watchdog looks
MAX_REPLY_BYTES = 96 * 2**20  # longest line the checker may send (a reply holds values of up to 32 MiB)
MESSAGES_PER_WAKE = 200       # output messages taken in one go before the deadline is looked at again


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


def _last_line(stderr: bytes) -> str:
    """The last non-empty line a process wrote to stderr (a traceback's exception line)."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "nothing on stderr"


def _grader_context(limits: Limits) -> zmq.Context:
    """The grader's one ZeroMQ context, whose sockets refuse any message longer than twice the
    output a notebook may keep (bytes; a longer one could never be kept, so it is dropped at the
    socket: ZeroMQ closes that connection instead of buffering it), so the student's output held in
    the grader's memory is bounded by ZeroMQ's queue (1000 messages, RCVHWM) x that size per kernel;
    a smaller queue drops an honest kernel's idle status under a flood of short prints)."""
    context = zmq.Context.instance()
    cap = 2 * max(limits.output_bytes, limits.notebook_output_bytes) + 2**16
    # graders in one process share the context: the largest cap any of them needs wins
    context.setsockopt(zmq.MAXMSGSIZE, max(cap, context.sockopts.get(zmq.MAXMSGSIZE, 0)))
    return context


class _Box:
    """What both processes share: scratch folders, the popen with rlimits, stop and clean."""

    def __init__(self, limits: Limits, slot: int, sandbox: bool, scratch: Path | None, uid_offset: int):
        self.limits, self.sandbox = limits, sandbox
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
            return f"memory limit reached ({rss / 2**30:.2f} GiB in the sandbox, limit {self.limits.memory_bytes / 2**30:g} GiB)"
        if threads > self.limits.processes + 8:
            return f"process limit reached ({threads} processes and threads, limit {self.limits.processes})"
        if check_disk:
            disk = sum(folder_bytes(folder, self.limits.disk_bytes) for folder in self._watched() if folder is not None)
            if disk > self.limits.disk_bytes:
                return f"disk limit reached ({disk / 2**20:.0f} MiB written, limit {self.limits.disk_bytes / 2**20:g} MiB)"
        return ""

    def _popen(self, command, submission, tmp, conn_dir, read_only=(), cwd=None, pipes=False):
        if STOPPING.is_set():
            raise RuntimeError("grading was stopped")
        venv_bin = Path(sys.executable).parent
        limits = self.limits
        if self.uid is None:  # not root: the process limit counts all our processes
            limits = Limits(**{**limits.__dict__, "processes": limits.processes + _own_process_count()})
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
        self.proc = subprocess.Popen(
            argv, preexec_fn=lambda: (os.setsid(), cpu and cpu.join(), _apply_rlimits(limits)), env=env,
            cwd=None if self.sandbox else cwd, stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
            stdout=subprocess.PIPE if pipes else subprocess.DEVNULL, stderr=subprocess.PIPE)
        with _LIVE_LOCK:
            LIVE.add(self)
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


class SandboxKernel(_Box):
    """An IPython kernel for one submission, in bubblewrap (or, if ``sandbox`` is False,
    in a plain subprocess with the same rlimits: only for code the grader trusts)."""

    def __init__(self, submission: Path, limits: Limits, slot: int = 0, sandbox: bool = True,
                 scratch: Path | None = None):
        super().__init__(limits, slot, sandbox, scratch, uid_offset=0)
        self.submission = Path(submission)
        self.client = None
        self.output_total = 0     # bytes of output kept so far in this notebook
        self.conn = None          # the kernel's connection folder (set by start)
        self.limit_hit = ""       # which sandbox-wide limit the watchdog enforced last

    def start(self) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        work = self._new_work()
        conn_dir, self.tmp = self._owned_dir(work / "conn"), self._owned_dir(work / "tmp")
        self.conn = conn_dir      # writable by the student (the kernel's sockets): counted as disk
        conn_file, _ = write_connection_file(str(conn_dir / "kernel.json"), ip=str(conn_dir / "k"),
                                             transport="ipc")
        if self.uid is not None:
            os.chown(conn_file, self.uid, self.uid)
        # no --IPKernelApp.matplotlib=inline: ipykernel makes the inline backend the default
        # anyway (MPLBACKEND), and the flag imports pyplot at start (0.4 s of CPU per kernel)
        kernel = [str(Path(sys.executable).parent / "python"), "-m", "ipykernel_launcher", "-f", conn_file,
                  "--HistoryManager.enabled=False"]
        self._popen(kernel, self.submission, self.tmp, conn_dir, cwd=self.submission)
        # one ZeroMQ context for every client of this grader: a client's own context would be
        # terminated by the garbage collector, which blocks for ever if any socket of it is open
        self.client = BlockingKernelClient(context=_grader_context(self.limits))
        self.client.load_connection_file(conn_file)
        self.client.start_channels()
        deadline = time.monotonic() + self.limits.startup_seconds
        while True:  # wait for the kernel to answer kernel_info
            if self.proc.poll() is not None:
                raise RuntimeError(f"the kernel did not start (exit code {self.proc.returncode}): "
                                   f"{self._stderr_end()}")
            try:
                self.client.wait_for_ready(timeout=2)
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the kernel did not start in time") from None

    def stop(self) -> None:
        if self.client is not None:
            try:
                self.client.stop_channels()
            except Exception:  # noqa: BLE001 - already gone
                pass
            self.client = None
        super().stop()

    close = stop

    def restart(self) -> None:
        self.stop()
        self.start()

    def interrupt(self) -> None:
        """SIGINT to the kernel (a KeyboardInterrupt in the running cell)."""
        if not self.alive():
            return
        if self.sandbox:  # the kernel is the only ipykernel python in its sandbox
            for pid in descendants(self.proc.pid):
                if is_kernel_python(pid):
                    try:
                        os.kill(pid, signal.SIGINT)
                    except (ProcessLookupError, PermissionError):
                        pass
        else:
            self.proc.send_signal(signal.SIGINT)

    def _watched(self) -> tuple:
        """The folders whose bytes count against the disk limit."""
        return (self.submission, self.tmp, self.conn)

    def execute(self, code: str, timeout: float, keep: bool = True) -> CellRun:
        """Run ``code``; collect outputs (capped; only stdout text when ``keep`` is False) and
        the execute_reply's status. The status comes from the kernel's reply on the shell
        channel, not from what the cell displayed, so hiding tracebacks does not hide a failure."""
        kc = self.client
        msg_id = kc.execute(code, store_history=False, allow_stdin=False, stop_on_error=False)
        run = CellRun(status="pending")
        run.text = ""
        kept, reply, idle = 0, None, False
        iopub, shell = kc.iopub_channel, kc.shell_channel
        # sleep in zmq_poll until a message arrives or the next check is due: polling each
        # channel with short timeouts cost the grader 3 % of a core per kernel while it waited
        poller = zmq.Poller()
        poller.register(iopub.socket, zmq.POLLIN)
        poller.register(shell.socket, zmq.POLLIN)
        start = time.monotonic()
        deadline, watch, disk_at = start + timeout, start + WATCH_SECONDS, start + 1.0
        while reply is None or not idle:
            now = time.monotonic()
            if now > deadline:
                run.status = "timeout"
                return run
            if not self.alive():
                run.status, run.exit_code = "died", self.proc.returncode
                return run
            if self.sandbox and now > watch:
                watch = now + WATCH_SECONDS
                self.limit_hit = self._over_limit(now > disk_at)
                disk_at = now + 1.0 if now > disk_at else disk_at
                if self.limit_hit:
                    self.stop()
                    run.status, run.exit_code = "died", None
                    return run
            wake = min(deadline, watch if self.sandbox else now + WATCH_SECONDS)  # alive() is checked as often
            ready = dict(poller.poll(max(0, int((wake - now) * 1000))))
            for _ in range(MESSAGES_PER_WAKE if iopub.socket in ready else 0):  # then the deadline again
                try:
                    msg = iopub.get_msg(timeout=0)
                except queue.Empty:
                    break
                if msg.get("parent_header", {}).get("msg_id") == msg_id:
                    kept = self._collect(run, msg, kept, keep)
                    if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                        idle = True
            while reply is None and shell.socket in ready:
                try:
                    answer = shell.get_msg(timeout=0)
                except queue.Empty:
                    break
                if answer.get("parent_header", {}).get("msg_id") == msg_id:
                    reply = answer["content"]
        run.status = "ok" if reply.get("status") == "ok" else "error"
        if run.status == "error":
            run.ename = run.ename or str(reply.get("ename", ""))
            run.evalue = run.evalue or str(reply.get("evalue", ""))
        return run

    def _collect(self, run: CellRun, msg: dict, kept: int, keep: bool) -> int:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "error":
            run.ename, run.evalue = str(content.get("ename", ""))[:200], str(content.get("evalue", ""))[:4000]
        if not keep:
            if kind == "stream" and content.get("name") == "stdout" and len(run.text) < 48 * 2**20:
                run.text += content.get("text", "")
            return kept
        if kind not in ("stream", "display_data", "execute_result", "error"):
            return kept
        size = len(repr(content))
        if kept + size > self.limits.output_bytes or self.output_total + size > self.limits.notebook_output_bytes:
            run.truncated = True
            return kept
        self.output_total += size
        if kind == "stream":
            if run.outputs and run.outputs[-1].get("output_type") == "stream" and run.outputs[-1]["name"] == content["name"]:
                run.outputs[-1]["text"] += content["text"]
            else:
                run.outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
        elif kind == "error":
            run.outputs.append({"output_type": "error", "ename": content.get("ename", ""),
                                "evalue": content.get("evalue", ""),
                                "traceback": list(content.get("traceback", []))[:50]})
        else:
            out = {"output_type": kind, "data": content.get("data", {}), "metadata": content.get("metadata", {})}
            if kind == "execute_result":
                out["execution_count"] = content.get("execution_count")
            run.outputs.append(out)
        return kept + size


class CheckerProcess(_Box):
    """The trusted checker (see ``checker``), sandboxed, spoken to over pipes."""

    def __init__(self, limits: Limits, slot: int = 0, sandbox: bool = True, scratch: Path | None = None):
        super().__init__(limits, slot, sandbox, scratch, uid_offset=SLOTS)
        self.buffer = bytearray()   # bytes read past the last full line
        self.scanned = 0            # bytes of ``buffer`` already searched for a newline
        self.tmp: Path | None = None
        self.limit_hit = ""         # the sandbox-wide limit the watchdog enforced while waiting

    def _watched(self) -> tuple:
        return (self.tmp,)

    def start(self, wait: bool = True) -> None:
        """Start the checker; with ``wait`` False, call :meth:`wait_ready` before using it."""
        here = Path(__file__).resolve().parent
        self.buffer, self.scanned = bytearray(), 0   # a restarted checker starts with a clean channel
        tmp = self.tmp = self._owned_dir(self._new_work() / "tmp")
        self.limit_hit = ""
        command = [str(Path(sys.executable).parent / "python"), "-I", "-u", str(here / "checker.py")]
        self._popen(command, None, tmp, None, read_only=[here], cwd=tmp, pipes=True)
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        ready = self.receive(self.limits.startup_seconds)
        if not ready or ready.get("op") != "ready":
            raise RuntimeError(f"the checker did not start: {self._stderr_end()}")

    def send(self, obj: dict) -> None:
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def receive(self, timeout: float) -> dict | None:
        """The next message, or None when none came in ``timeout`` seconds or the checker died.
        The read costs time linear in the bytes read (each byte is searched for a newline once),
        and a line longer than :data:`MAX_REPLY_BYTES` bytes stops the checker (None), so no reply
        holds more than that much of the grader's memory. While it waits, a sandboxed checker is
        watched as the student's kernel is (the student's code runs in its worker processes):
        past a sandbox-wide limit it is killed, :attr:`limit_hit` says which, and None returns."""
        deadline = time.monotonic() + timeout
        disk_at = time.monotonic() + 1.0
        while (end := self.buffer.find(b"\n", self.scanned)) < 0:
            self.scanned = len(self.buffer)
            if len(self.buffer) > MAX_REPLY_BYTES:
                self.kill()
                self.buffer, self.scanned = bytearray(), 0
                return None
            now = time.monotonic()
            left = deadline - now
            if left <= 0 or self.proc is None:
                return None
            if self.sandbox and self.alive():
                self.limit_hit = self._over_limit(now > disk_at)
                disk_at = now + 1.0 if now > disk_at else disk_at
                if self.limit_hit:
                    self.kill()
                    return None
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, WATCH_SECONDS if self.sandbox else 1.0))
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    return None
                self.buffer += chunk
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        self.scanned = 0
        try:
            return json.loads(line)
        except ValueError:          # not the checker's JSON: treat as a checker that broke
            self.kill()
            return None
