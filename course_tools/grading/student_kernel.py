"""The student's IPython kernel in its sandbox (ZeroMQ over Unix sockets): runs the student's
cells; every output is collected with per-cell and per-notebook caps; the watchdog kills it when
the whole sandbox passes its memory, process or disk limit. The kernel is the student's: it can
send any message, signed with its session's key. One that cannot be read, or whose parent or
content is not a dict, is dropped; what is kept has the fields and types of a Jupyter output and
its text made valid UTF-8 (``utf8.valid_text``: a forged message may hold a lone surrogate, which
no file can hold), so nothing a kernel sends is a grader error.

A slot's kernels during one ``course grade`` run are served from a template instead
(``served_kernel``).
"""
from __future__ import annotations

import os
import queue
import signal
import sys
import time
from pathlib import Path

import zmq

from .sandbox import CellRun, Limits, descendants, is_kernel_python, kill_until_gone
from .sandboxed_process import WATCH_SECONDS, SandboxedProcess
from .utf8 import valid_text

MESSAGES_PER_WAKE = 200       # output messages taken in one go before the deadline is looked at again
UNREADABLE = (ValueError, KeyError, TypeError, AttributeError, IndexError)   # reading a forged message raises these


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


class SandboxKernel(SandboxedProcess):
    """An IPython kernel for one submission, in bubblewrap (or, if ``sandbox`` is False,
    in a plain subprocess with the same rlimits: only for code the grader trusts)."""

    def __init__(self, submission: Path | None, limits: Limits, slot: int = 0, sandbox: bool = True,
                 scratch: Path | None = None):
        super().__init__(limits, slot, sandbox, scratch, uid_offset=0)
        self.submission = Path(submission) if submission is not None else None
        self.client = None
        self.output_total = 0     # bytes of output kept so far in this notebook
        self.conn = None          # the kernel's connection folder (set by start)
        self.limit_hit = ""       # which sandbox-wide limit the watchdog enforced last
        self.kept: set = set()    # processes of the sandbox that are not strays (bubblewrap's, the kernel)

    def start(self) -> None:
        work = self._new_work()
        conn_dir, self.tmp = self._owned_dir(work / "conn"), self._owned_dir(work / "tmp")
        self.conn = conn_dir      # writable by the student (the kernel's sockets): counted as disk
        conn_file = self._connection_file()
        # no --IPKernelApp.matplotlib=inline: ipykernel makes the inline backend the default
        # anyway (MPLBACKEND), and the flag imports pyplot at start (0.4 s of CPU per kernel)
        kernel = [str(Path(sys.executable).parent / "python"), "-m", "ipykernel_launcher", "-f", conn_file,
                  "--HistoryManager.enabled=False"]
        self._popen(kernel, self.submission, self.tmp, conn_dir, cwd=self.submission)
        self._connect(conn_file)
        self.kept = set(descendants(self.proc.pid))   # in a sandbox: bubblewrap's processes and the kernel

    def _connection_file(self) -> str:
        """A new connection file (fresh key and socket names) in the connection folder."""
        from jupyter_client.connect import write_connection_file

        name = f"kernel-{os.urandom(4).hex()}"
        conn_file, _ = write_connection_file(str(self.conn / f"{name}.json"), ip=str(self.conn / name),
                                             transport="ipc")
        if self.uid is not None:
            os.chown(conn_file, self.uid, self.uid)
        return conn_file

    def _connect(self, conn_file: str) -> None:
        """A client of the kernel, once it answers kernel_info."""
        from jupyter_client import BlockingKernelClient

        # one ZeroMQ context for every client of this grader: a client's own context would be
        # terminated by the garbage collector, which blocks for ever if any socket of it is open
        self.client = BlockingKernelClient(context=_grader_context(self.limits))
        self.client.load_connection_file(conn_file)
        self.client.start_channels()
        deadline = time.monotonic() + self.limits.startup_seconds
        while True:  # wait for the kernel to answer kernel_info
            if not self.alive():
                raise RuntimeError(f"the kernel did not start (exit code {self.exit_code()}): "
                                   f"{self._stderr_end()}")
            try:
                self.client.wait_for_ready(timeout=2)
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the kernel did not start in time") from None

    def _stop_client(self) -> None:
        if self.client is not None:
            try:
                self.client.stop_channels()
            except Exception:  # noqa: BLE001 - already gone
                pass
            self.client = None

    def stop(self) -> None:
        self._stop_client()
        super().stop()

    close = stop

    def restart(self) -> None:
        self.stop()
        self.start()

    def exit_code(self) -> int | None:
        """How the kernel ended: its exit code (negative, or 128 + N from bubblewrap: signal N);
        None while it runs or when unknown."""
        return self.proc.returncode if self.proc is not None else None

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

    def kill_strays(self) -> bool:
        """Kill every process of the submission but the kernel (what a cell that timed out forked
        lives on after the interrupt stopped the cell: a fork bomb's copies loop on and take the
        memory of the student's later cells); True when none is left."""
        if self.proc is None:
            return False
        return kill_until_gone(lambda: {pid for pid in set(descendants(self.proc.pid)) - self.kept if _running(pid)},
                               5) == 0

    def _watched(self) -> tuple:
        """The folders whose bytes count against the disk limit."""
        return (self.submission, self.tmp, self.conn)

    def execute(self, code: str, timeout: float, keep: bool = True) -> CellRun:
        """Run ``code``; collect outputs (capped; only stdout text when ``keep`` is False) and
        the execute_reply's status. The status comes from the kernel's reply on the shell
        channel, not from what the cell displayed, so hiding tracebacks does not hide a failure."""
        kc = self.client
        if kc is None or not self.alive():   # stopped at a limit, or never started: nothing runs
            return CellRun(status="died", exit_code=self.exit_code())
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
                run.status, run.exit_code = "died", self.exit_code()
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
                taken, msg = _next_message(iopub, msg_id)
                if not taken:
                    break
                if msg is not None:
                    kept = self._collect(run, msg, kept, keep)
                    idle = idle or msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle"
            while reply is None and shell.socket in ready:
                taken, answer = _next_message(shell, msg_id)
                if not taken:
                    break
                reply = answer["content"] if answer is not None else None
        run.status = "ok" if reply.get("status") == "ok" else "error"
        if run.status == "error":
            run.ename = run.ename or str(reply.get("ename", ""))
            run.evalue = run.evalue or str(reply.get("evalue", ""))
        return run

    def _collect(self, run: CellRun, msg: dict, kept: int, keep: bool) -> int:
        """One output message of the cell (its content a dict of valid text) into ``run``; the
        bytes of output kept for the cell so far."""
        kind, content = msg["msg_type"], msg["content"]
        out = _output(kind, content) if kind in ("stream", "display_data", "execute_result", "error") else None
        if kind == "error":
            run.ename, run.evalue = out["ename"][:200], out["evalue"][:4000]
        if not keep:
            if kind == "stream" and out["name"] == "stdout" and len(run.text) < 48 * 2**20:
                run.text += out["text"]
            return kept
        if out is None:
            return kept
        size = len(repr(content))
        if kept + size > self.limits.output_bytes or self.output_total + size > self.limits.notebook_output_bytes:
            run.truncated = True
            return kept
        self.output_total += size
        last = run.outputs[-1] if run.outputs else {}
        if kind == "stream" and last.get("output_type") == "stream" and last["name"] == out["name"]:
            last["text"] += out["text"]
        else:
            run.outputs.append(out)
        return kept + size


def _running(pid: int) -> bool:
    """Whether a process exists and is not a zombie (killed, and not yet reaped by its parent: a
    process a kernel forked stays a zombie until the kernel ends)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _next_message(channel, msg_id: str) -> tuple[bool, dict | None]:
    """(whether a message was taken, the message): ``(False, None)`` when none waits; the message
    is None unless it answers ``msg_id`` and its content is a dict, whose text is then made valid
    UTF-8. A message jupyter_client cannot read is taken and dropped."""
    try:
        msg = channel.get_msg(timeout=0)
    except queue.Empty:
        return False, None
    except UNREADABLE:   # bad JSON, a header without msg_id, ...: the kernel's own doing
        return True, None
    parent = msg.get("parent_header")
    if not (isinstance(parent, dict) and parent.get("msg_id") == msg_id and isinstance(msg.get("content"), dict)):
        return True, None
    msg["content"] = valid_text(msg["content"])
    return True, msg


def _output(kind: str, content: dict) -> dict:
    """A kernel's output message as a notebook output of the right shape: text fields as text,
    a traceback a list of at most 50 lines, data and metadata dicts."""
    def text(key: str) -> str:
        value = content.get(key, "")
        return value if isinstance(value, str) else str(value)

    def mapping(key: str) -> dict:
        value = content.get(key)
        return value if isinstance(value, dict) else {}

    if kind == "stream":
        return {"output_type": "stream", "name": "stdout" if content.get("name") == "stdout" else "stderr",
                "text": text("text")}
    if kind == "error":
        lines = content.get("traceback")
        return {"output_type": "error", "ename": text("ename"), "evalue": text("evalue"),
                "traceback": [str(t) for t in lines[:50]] if isinstance(lines, list) else []}
    out = {"output_type": kind, "data": mapping("data"), "metadata": mapping("metadata")}
    if kind == "execute_result":
        count = content.get("execution_count")
        out["execution_count"] = count if type(count) is int else None
    return out
