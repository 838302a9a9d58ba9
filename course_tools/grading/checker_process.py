"""The trusted checker (``checker.py``) in its sandbox, spoken to over pipes: started before
any student code; its replies read with bounded size in linear time; watched like the student's
kernel while the grader waits (the student's code runs in its worker processes).
"""
from __future__ import annotations

import ast
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from .sandbox import SLOTS, Limits, _read_only_paths, descendants, kill_until_gone
from .sandboxed_process import SIGNALS, WATCH_SECONDS, SandboxedProcess, empty_folder, signal_of
from .utf8 import valid_text

MAX_REPLY_BYTES = 96 * 2**20  # longest line the checker may send (a reply holds values of up to 32 MiB)


class CheckerProcess(SandboxedProcess):
    """The trusted checker (see ``checker``), sandboxed, spoken to over pipes."""

    def __init__(self, limits: Limits, slot: int = 0, sandbox: bool = True, scratch: Path | None = None,
                 preload: str | None = None):
        super().__init__(limits, slot, sandbox, scratch, uid_offset=SLOTS)
        # a served checker: forked from a template that ran ``preload`` (import statements) once
        # and serves the slot's submissions one after another (see checker.serve_checkers; without
        # a sandbox the template is told --plain and the grader ends each checker from outside)
        self.preload = preload
        self.template_up = False    # a template runs in this sandbox (the served checker is its child)
        self.read_only = [Path(__file__).resolve().parent]   # bound read-only besides Python and the course
        self.buffer = bytearray()   # bytes read past the last full line
        self.scanned = 0            # bytes of ``buffer`` already searched for a newline
        self.tmp: Path | None = None
        self.limit_hit = ""         # the sandbox-wide limit the watchdog enforced while waiting
        self.broke = ""             # why the grader stopped a checker whose reply it could not read
        self.closed = False         # its output reached end of file (it exited, or is exiting)
        self.watch_at = self.disk_at = 0.0   # when the watchdog next looks at the sandbox, and at its disk

    def _watched(self) -> tuple:
        return (self.tmp,)

    def start(self, wait: bool = True) -> None:
        """Start the checker (a served one: fork it from the template, started first when none
        runs); with ``wait`` False, call :meth:`wait_ready` before using it."""
        self.limit_hit = self.broke = ""
        self.watch_at = time.monotonic() + WATCH_SECONDS
        self.disk_at = time.monotonic() + 1.0
        fresh = not (self.template_up and self.alive())
        if fresh:
            here = Path(__file__).resolve().parent
            self.buffer, self.scanned = bytearray(), 0   # a restarted checker starts with a clean channel
            tmp = self.tmp = self._owned_dir(self._new_work() / "tmp")
            self.closed = False
            command = [str(Path(sys.executable).parent / "python"), "-I", "-u", str(here / "checker.py")]
            template = ["--template"] + ([] if self.sandbox else ["--plain"]) if self.preload is not None else []
            self._popen(command + template, None, tmp, None,
                        read_only=self.read_only, cwd=tmp, pipes=True)
            self.template_up = self.preload is not None
            if self.template_up:
                self.send({"op": "preload", "code": self.preload})
        if self.template_up:
            try:
                self.send({"op": "fork"})
            except OSError:   # the template ended since it was last seen alive: a fresh one (once)
                if fresh:
                    raise
                self.stop()
                self.start(wait)
                return
        if wait:
            self.wait_ready()

    def add_preload(self, code: str) -> None:
        """Import statements the template has not run yet: sent now when it runs (its ``done`` is
        read by ``wait_ready``), and run at its start otherwise (``kept_templates``)."""
        new = [line for line in code.splitlines() if line not in (self.preload or "").splitlines()]
        if not new:
            return
        self.preload = "\n".join([*(self.preload or "").splitlines(), *new])
        if self.template_up and self.alive():
            try:
                self.send({"op": "preload", "code": "\n".join(new)})
            except OSError:
                self.stop()

    def wait_ready(self) -> None:
        """Wait for the checker's ``ready`` (after a new template's own messages)."""
        ready = self.receive(self.limits.startup_seconds)
        while ready and ready.get("op") in ("template", "done") and self.template_up:
            ready = self.receive(self.limits.startup_seconds)
        if not ready or ready.get("op") != "ready":
            raise RuntimeError(f"the checker did not start: {self._stderr_end()}")

    def finish(self) -> None:
        """One submission's checker is done with: a served checker exits and, when its template
        says it ended clean (see ``checker.serve_checkers``), the template and its sandbox stay for
        the slot's next submission, the scratch emptied; anything else stops the sandbox."""
        if not (self.template_up and self.alive() and not self.limit_hit and not self.broke):
            self.stop()
            return
        if not self.sandbox:
            # no sandbox (the instructor's own code): the checker and whatever it started are the
            # template's descendants, killed from outside while they are still in its tree (no
            # finalization); the plain template reports what it reaped (see checker.serve_checkers)
            if kill_until_gone(lambda: set(descendants(self.proc.pid)), 5):
                self.stop()
                return
        else:
            try:
                self.send({"op": "exit"})
            except OSError:
                self.stop()
                return
        idle = self.receive(10)
        if not (idle and idle.get("op") == "idle" and idle.get("clean") is True):
            self.stop()
            return
        # a read-only folder under /tmp (a clone there) is bound onto a folder bubblewrap made in
        # this scratch: removing that folder here would take the mount away inside the sandbox
        mounts = {p.parts[2] for p in _read_only_paths(self.read_only) if len(p.parts) > 2 and p.parts[1] == "tmp"}
        if not empty_folder(self.tmp, mounts):   # what cannot be emptied is not served again
            self.stop()

    def stop(self) -> None:
        self.template_up = False
        super().stop()

    close = stop

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
        while (end := self.buffer.find(b"\n", self.scanned)) < 0:
            self.scanned = len(self.buffer)
            if len(self.buffer) > MAX_REPLY_BYTES:
                self.broke = f"a reply longer than {MAX_REPLY_BYTES // 2**20} MiB"
                self.kill()
                self.buffer, self.scanned = bytearray(), 0
                return None
            now = time.monotonic()
            left = deadline - now
            if left <= 0 or self.proc is None:
                return None
            if self.sandbox and now > self.watch_at and self.alive():  # at most every WATCH_SECONDS
                self.limit_hit = self._over_limit(now > self.disk_at)
                self.watch_at = now + WATCH_SECONDS
                self.disk_at = now + 1.0 if now > self.disk_at else self.disk_at
                if self.limit_hit:
                    self.kill()
                    return None
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, WATCH_SECONDS if self.sandbox else 1.0))
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    self.closed = True
                    return None
                self.buffer += chunk
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        self.scanned = 0
        try:   # the text of a reply may be the student's (an exception's message): made valid UTF-8
            return valid_text(json.loads(line))
        except ValueError:          # not the checker's JSON: treat as a checker that broke
            self.broke = "a reply that is not JSON"
            self.kill()
            return None

    def ended(self) -> str:
        """How the checker ended, in words ("segmentation fault (SIGSEGV)", "exit code 1"), or ""
        while it runs. Once its output closed, waits up to 2 s for the exit status."""
        if self.broke:
            return f"the grader stopped it: {self.broke}"
        proc = self.proc
        if proc is None:
            return ""
        try:
            code = proc.wait(timeout=2) if self.closed else proc.poll()
        except subprocess.TimeoutExpired:
            return ""
        if code is None:
            return ""
        sig = signal_of(code)
        if sig is not None:
            return SIGNALS.get(sig, f"signal {sig}")
        return f"exit code {code}"


def served_checker(limits: Limits, lesson: dict, slot: int, sandbox: bool, scratch: Path | None) -> CheckerProcess:
    """A checker for one slot's submissions, each forked from one template that imported the
    modules the lesson's setup cells import (``checker.serve_checkers``): a class pays those
    imports once per slot, not once per student. Without a sandbox (the build's round trip: the
    instructor's own code, so a template shared by its submissions is acceptable) the template is a
    plain subprocess with the same rlimits, and each checker is killed from outside when done
    with (``CheckerProcess.finish``). Pass it to ``execute_submission`` for each."""
    preload = import_statements(code for _, code in lesson["setup"])
    return CheckerProcess(limits, slot, sandbox, scratch, preload=preload)


def import_statements(codes) -> str:
    """The top-level ``import`` and ``from ... import`` statements of the given cells' code, one
    per line (cells that do not parse add nothing)."""
    lines = []
    for code in codes:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        lines += [ast.unparse(node) for node in tree.body if isinstance(node, ast.Import)
                  or isinstance(node, ast.ImportFrom) and node.module != "__future__" and not node.level]
    return "\n".join(dict.fromkeys(lines))
