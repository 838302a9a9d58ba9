"""Step 5 of grading: run one submission. The student's cells run in the sandboxed kernel; every
test cell is judged by the trusted checker (``plan`` refuses a lesson whose reference solution
misses a point there, so there is no other judge): the student's names reach it only as plain
data, as proxy calls (``wire``), or, for GPU kernels (Numba CUDA, Triton), as source that the
checker checks and compiles itself (``kernel_source``, ``triton_source``). The visible part of a
test cell runs in notebook order; the hidden part runs after the whole notebook, so hidden
arguments reach the student's kernel only when nothing it prints can reach the feedback any more
(if the checker was restarted since, the visible parts of the test cells that passed before it,
and its own, run again first). What a test must do in the student's kernel (patch a module
around a student's function, pass it a callable or a model) it does in an ``@in_student_kernel``
function (a probe, ``course_lib.checks.probe``) whose plain-data result comes back to the checker.

Never raises for anything the student's code does: every failure is a failed test with a
reason in plain words. Every text that comes out of either sandbox (outputs, messages, names,
replies) is valid UTF-8 by the time the grader keeps it (``valid_text``, applied where the
kernel's messages, its helpers' replies and the checker's replies are read), so no student text
can make a graded notebook, feedback page or CSV unwritable.
"""
from __future__ import annotations

import base64
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cells import grade_id, is_test_cell
from .checker_process import CheckerProcess
from .kernel_helpers import HELPERS
from .sandbox import Limits
from .sandboxed_process import SIGNALS, signal_of
from .segments import failing_label, hidden_labels, split_hidden
from .student_kernel import SandboxKernel
from .utf8 import valid_text


@dataclass
class Verdict:
    """One test cell's result: passed or not, and what the feedback may show."""

    passed: bool
    outputs: list = field(default_factory=list)


@dataclass
class Execution:
    notes: list = field(default_factory=list)
    verdicts: dict = field(default_factory=dict)    # grade_id -> Verdict
    outputs: dict = field(default_factory=dict)     # index of a non-test code cell -> outputs


def error_output(ename: str, evalue: str, lines=()) -> dict:
    """A notebook error output: ``ename: evalue``, then ``lines`` (the test cell's own lines)."""
    return {"output_type": "error", "ename": ename, "evalue": evalue,
            "traceback": [f"{ename}: {evalue}", *lines]}


def _describe_failure(run, number: int, limits: Limits, limit_hit: str = "", setup: bool = False) -> str | None:
    """A plain-words note for a cell that did not end normally (None for ordinary errors);
    ``setup``: the cell is the instructor's, bounded by the notebook's time, not the cell's."""
    where = f"cell {number}"
    if run.status == "timeout":
        if setup:
            return f"timed out in {where}, one of the lesson's own cells (notebook limit {limits.notebook_seconds:g} s)"
        return f"timed out in {where} (limit {limits.cell_seconds:g} s per cell)"
    if run.status == "died":
        if limit_hit:
            return f"{limit_hit} in {where}; the sandbox was stopped"
        code = run.exit_code
        sig = signal_of(code)
        if sig in SIGNALS:
            return f"kernel crashed in {where}: {SIGNALS[sig]}"
        return f"kernel exited in {where} (exit code {code}: the code ended the kernel's process, e.g. os._exit)"
    if run.ename == "MemoryError":
        return f"memory limit reached in {where} (MemoryError; limit {limits.memory_bytes / 2**30:g} GiB)"
    text = f"{run.ename}: {run.evalue}"
    if any(words in text for words in ("Network is unreachable", "Temporary failure in name resolution",
                                       "Name or service not known")):
        return f"network access is blocked while grading ({where}: {text[:120]})"
    if "Read-only file system" in text or "Permission denied" in text:
        return f"{where} tried to write or read outside its own folder, which is not allowed ({text[:120]})"
    if run.ename in ("FileNotFoundError", "PermissionError", "IsADirectoryError") and re.search(
            r"'/(?!submission)[^']*'", run.evalue):
        return f"{where} tried to use a file outside its own folder, which the sandbox does not show ({text[:160]})"
    if run.ename == "BlockingIOError" and "Resource temporarily unavailable" in text:
        return f"process limit reached in {where} ({limits.processes} processes and threads)"
    return None


class Runner:
    """The two processes of one submission and the bookkeeping between them."""

    def __init__(self, folder: Path, limits: Limits, lesson: dict, slot: int, sandbox: bool, scratch: Path | None,
                 checker: CheckerProcess | None = None, kernel: SandboxKernel | None = None):
        self.limits, self.lesson = limits, lesson
        self.token = "@course" + secrets.token_hex(8) + ":"
        self.served = checker is not None   # the slot's checker, served by its template (see finish)
        self.checker = checker or CheckerProcess(limits, slot, sandbox, scratch)
        self.served_kernel = kernel is not None   # the slot's served kernel (see close)
        self.kernel = kernel or SandboxKernel(folder, limits, slot, sandbox, scratch)
        self.setup_done = 0           # setup cells the checker has run
        self.notes: list[str] = []    # what went wrong in proxy calls, in plain words
        self.kinds = None             # the student's names as last seen (None: ask again)
        self.where = ""               # the test cell being judged, for those notes
        self.replay: list[str] = []   # student cells that ran fine (replayed after a restart)
        self.passed: list = []        # (position, visible part) of the test cells that passed, in order
        self.generation = 0           # how many checkers were started
        self.opening = set(lesson.get("opening", ()))   # the lesson's cells before any exercise

    # -- the student's kernel ----------------------------------------------------------
    def restart_kernel(self, deadline: float) -> None:
        """A fresh kernel with the cells that ran fine run again; if running them again takes the
        sandbox past a limit once more, a fresh kernel without them (later cells then fail on
        what is missing, with their own reasons)."""
        self.kinds = None
        self.kernel.restart()
        self.kernel.execute(HELPERS, self.limits.cell_seconds, keep=False)
        for code in self.replay:
            left = max(1.0, deadline - time.monotonic())
            if not self.is_setup(code):
                left = min(self.limits.cell_seconds, left)
            if self.kernel.execute(code, left).status != "ok":
                break
        if not self.kernel.alive():
            self.kernel.restart()
            self.kernel.execute(HELPERS, self.limits.cell_seconds, keep=False)

    def is_setup(self, code: str) -> bool:
        """Whether a cell's code is one of the lesson's cells before its first exercise (imports,
        data): no student wrote it and none of their functions exist yet, so only the notebook's
        time bounds it; the per-cell limit is for the student's code, and a loaded grading machine
        must not fail a slow import."""
        return code in self.opening

    def _ask_kernel(self, code: str, timeout: float):
        """Run a helper call in the kernel (output discarded); its decoded reply or None."""
        run = self.kernel.execute(code, timeout, keep=False)
        for line in reversed(run.text.splitlines()):
            if line.startswith(self.token):
                try:   # the student's text in it (an exception's message) made valid UTF-8
                    reply = valid_text(json.loads(base64.b64decode(line[len(self.token):], validate=True)))
                except (ValueError, RecursionError):
                    return None
                return reply if isinstance(reply, dict) else None
        return {"timeout": f"limit {timeout:g} s"} if run.status == "timeout" else None

    # -- the checker -----------------------------------------------------------------------
    def start_checker(self, wait: bool = True) -> None:
        self.checker.start(wait)
        self.setup_done = 0
        self.kinds = None
        self.generation += 1      # namespaces saved in an earlier checker are gone

    def checker_run(self, code: str, deadline: float, ns: str = "", save: str = "") -> dict:
        """Run code in the checker, answering its proxy calls from the kernel; its reply."""
        names = sorted(self.lesson["names"])
        kinds = self.kinds  # what the names are changes only when a student cell has run
        if kinds is None:
            kinds = self._ask_kernel(f"_course_wire._course_names({self.token!r}, {names!r})", 30) if names else {}
            if not isinstance(kinds, dict) or "timeout" in kinds:
                kinds = {n: ["missing", None] for n in names}
            kinds = {n: v for n, v in kinds.items()
                     if n in self.lesson["names"] and isinstance(v, list) and len(v) == 2}
            self.kinds = kinds
        self.checker.send({"op": "names", "kinds": kinds, "ns": ns})
        if self.checker.receive(30) is None:
            return self._checker_lost(self._no_reply("the checker did not answer"))
        self.checker.send({"op": "run", "code": code, "ns": ns, "save": save})
        while True:
            msg = self.checker.receive(max(0.0, deadline - time.monotonic()))
            if msg is None:
                return self._checker_lost(self._no_reply(
                    f"the test did not finish in time (limit {self.limits.cell_seconds:g} s)"))
            if msg.get("op") == "done":
                return msg
            call = self._kernel_call(msg)
            if call:
                left = max(0.5, deadline - time.monotonic())
                reply = self._ask_kernel(call, left)
                if reply is None or not self.kernel.alive():
                    reply = {"error": "KernelError", "message": "your kernel stopped or sent no answer"}
                    if not self.kernel.alive():
                        self.restart_kernel(deadline)
                elif "timeout" in reply:
                    self.notes.append(f"timed out in {self.where}: {msg['name']} did not return "
                                      f"(limit {self.limits.cell_seconds:g} s per cell)")
                    self.kernel.interrupt()
                    if not (self.kernel.alive() and self.kernel.execute("pass", 3).status == "ok"):
                        self.restart_kernel(deadline)
                self.checker.send({"op": "result", **{k: v for k, v in reply.items()
                                                      if k in ("value", "error", "message", "notplain", "timeout",
                                                                "unanswered")}})

    def _kernel_call(self, msg: dict) -> str:
        """The kernel code for a checker's request: a call of one of the student's names, or a
        probe (the test cell's own function, run in the kernel); "" for anything else."""
        args = str(msg.get("args", ""))
        if msg.get("op") == "call" and msg.get("name") in self.lesson["names"]:
            return f"_course_wire._course_call({self.token!r}, {msg['name']!r}, {args!r})"
        if msg.get("op") == "probe" and str(msg.get("name", "")).isidentifier() and isinstance(msg.get("source"), str):
            return f"_course_wire._course_probe({self.token!r}, {msg['name']!r}, {msg['source']!r}, {args!r})"
        return ""

    def _no_reply(self, otherwise: str) -> str:
        """Why the checker sent no reply, in words: a sandbox limit it was stopped at, its own end
        (a crash names the signal: never reported as a time-out), else ``otherwise`` (the deadline)."""
        if self.checker.limit_hit:
            return self.checker.limit_hit
        ended = self.checker.ended()
        return f"the checker stopped ({ended}) while judging this cell" if ended else otherwise

    def _checker_lost(self, why: str) -> dict:
        """The checker timed out, died or was stopped at a limit: start a fresh one (setup cells
        run again later). The student's reasons say which, but for a time-out (the cell's own
        output says it)."""
        if self.checker.limit_hit:   # the student's code in the checker's workers went past a limit
            self.notes.append(f"{self.checker.limit_hit} in {self.where}; the checker's sandbox was stopped")
        elif why.startswith("the checker stopped"):
            self.notes.append(f"{why.replace('this cell', self.where)}; a fresh checker judged the cells after it")
        self.checker.stop()
        self.start_checker()
        ename = "CheckerStopped" if why.startswith("the checker stopped") else "TimeoutError"
        return {"op": "done", "ok": False, "ename": ename, "evalue": why, "lines": []}

    def run_setup(self, upto: int, deadline: float) -> None:
        """Run the instructor's setup cells (indices into the source) before position ``upto``."""
        for pos, code in self.lesson["setup"]:
            if self.setup_done <= pos < upto:
                self.checker_run(code, deadline)
                self.setup_done = pos + 1

    def close(self) -> None:
        if self.served_kernel:
            self.kernel.finish()
        else:
            self.kernel.close()
        if self.served:
            self.checker.finish()
        else:
            self.checker.close()


def _checker_outputs(reply: dict) -> list:
    outputs = []
    if reply.get("stdout"):
        outputs.append({"output_type": "stream", "name": "stdout", "text": reply["stdout"][-20000:]})
    if not reply.get("ok"):
        outputs.append(error_output(reply.get("ename", "Error"), reply.get("evalue", ""), reply.get("lines", [])))
    return outputs


def _test_cell(r: Runner, ex: Execution, cell, gid: str, number: int, deadline: float, timeout: float, hidden: list):
    """The visible part of a test cell judged in the checker now; its hidden part kept for the end."""
    visible, secret = split_hidden(cell.source)
    r.run_setup(r.lesson["position"].get(gid, 0), deadline)
    r.where = f"cell {number} (test {gid})"
    generation = r.generation
    reply = r.checker_run(visible, time.monotonic() + timeout, save=gid if secret else "")
    ex.notes += r.notes
    r.notes = []
    ex.verdicts[gid] = Verdict(bool(reply.get("ok")), _checker_outputs(reply))
    if reply.get("ok"):
        r.passed.append((r.lesson["position"].get(gid, 0), visible))
    if secret:
        hidden.append((gid, secret, visible, generation if r.generation == generation else None))


def _student_cell(r: Runner, ex: Execution, cell, index: int, deadline: float, timeout: float) -> None:
    """One of the student's cells run in the kernel; a cell that timed out or died leaves a
    fresh kernel with the cells before it run again."""
    number, limits = index + 1, r.limits
    r.kinds = None
    setup = r.is_setup(cell.source)
    if setup:   # the instructor's cell: the notebook's time, not the cell's, bounds it
        timeout = max(timeout, deadline - time.monotonic())
    run = r.kernel.execute(cell.source, timeout)
    note = _describe_failure(run, number, limits, r.kernel.limit_hit, setup)
    if note:
        ex.notes.append(note)
    if run.truncated:
        ex.notes.append(f"output of cell {number} cut (limits: {limits.output_bytes} bytes per cell, "
                        f"{limits.notebook_output_bytes} per notebook)")
    ex.outputs[index] = list(run.outputs) + ([error_output("SandboxLimit", note or "stopped")]
                                             if run.status in ("timeout", "died") else [])
    if run.status == "ok":
        r.replay.append(cell.source)
    if run.status == "error" and note and note.startswith("process limit reached"):
        # what a fork bomb forked lives on after its cell failed, looping and taking memory from
        # the student's later cells: the sandbox is stopped (every process in it) and started again
        r.restart_kernel(deadline)
        ex.notes.append(f"the kernel was restarted after cell {number} (its processes stopped) and the "
                        "earlier cells run again")
        return
    if run.status in ("timeout", "died"):
        if run.status == "timeout":
            r.kernel.interrupt()
            if r.kernel.alive() and r.kernel.execute("pass", timeout=3).status == "ok" and r.kernel.kill_strays():
                return  # the interrupt stopped it and what it forked is gone; the kernel lives on
        r.restart_kernel(deadline)
        ex.notes.append(f"the kernel was restarted after cell {number} and the earlier cells run again")


def _hidden_tests(r: Runner, ex: Execution, hidden: list, deadline: float) -> None:
    """The hidden parts, after the whole notebook (nothing printed any more is shown)."""
    limits = r.limits
    again = (None, 0)   # (checker generation, how many of r.passed it has run again)
    for gid, secret, visible, generation in hidden:
        left = deadline - time.monotonic()
        r.where = f"the hidden tests of {gid}"
        reply = {"ok": False, "ename": "TimeoutError", "evalue": "notebook time limit reached"}
        if generation != r.generation and not ex.verdicts[gid].passed:
            left = 0                      # failed already, and its namespace is gone
        elif left > 0 and generation != r.generation:
            # the checker that saved this cell's namespace was restarted since (a later cell ran past a
            # limit): the visible parts of the test cells that passed before it (it may use what they
            # defined) and its own run again in this one, then the hidden part
            upto, now = r.lesson["position"].get(gid, 0), r.generation
            done = again[1] if again[0] == now else 0
            while done < len(r.passed) and r.passed[done][0] < upto:
                r.run_setup(r.passed[done][0], deadline)
                r.checker_run(r.passed[done][1], time.monotonic() + min(limits.cell_seconds, left))
                done += 1
            r.run_setup(upto, deadline)
            reply = r.checker_run(visible, time.monotonic() + min(limits.cell_seconds, left), save=gid)
            again = (now, done + 1)   # its own ran too
            left = deadline - time.monotonic() if reply.get("ok") else 0
        if left > 0:
            reply = r.checker_run(secret, time.monotonic() + min(limits.cell_seconds, left), ns=gid)
        ex.notes += r.notes
        r.notes = []
        verdict = ex.verdicts[gid]
        verdict.passed = verdict.passed and bool(reply.get("ok"))
        verdict.outputs += hidden_outputs(hidden_labels(secret), reply)


NOT_SHOWN = "its inputs and expected values are not shown"


def hidden_outputs(labels: list, reply: dict) -> list:
    """What the feedback shows of a test cell's hidden tests (``labels``: ``hidden_labels`` of its
    hidden part; ``reply``: the checker's reply to running it): each hidden test's label with
    passed, failed or not run (after the one that failed), never the checker's message, which
    may hold their data; for a cell whose hidden tests carry no label, "passed" or "a hidden test
    failed"."""
    stream = {"output_type": "stream", "name": "stdout"}
    ok = bool(reply.get("ok"))
    if not labels:
        return [{**stream, "text": "hidden tests: passed\n"} if ok else
                error_output("CheckFailed", "a hidden test failed (hidden tests are not shown)")]
    names = [label for _, label in labels]
    if ok:
        return [{**stream, "text": "".join(f"hidden test passed: {name}\n" for name in names)}]
    at = reply.get("at")
    failed = failing_label(labels, at if type(at) is int else None)
    if failed is None:   # stopped before a test said which (a time limit, a checker that stopped)
        return [error_output("CheckFailed", f"a hidden test failed ({NOT_SHOWN}); the hidden tests: "
                              + "; ".join(names))]
    passed = "".join(f"hidden test passed: {name}\n" for name in names[:failed])
    outputs = [{**stream, "text": passed}] if failed else []
    later = [f"not run after it: {'; '.join(names[failed + 1:])}"] if failed + 1 < len(names) else []
    return outputs + [error_output("CheckFailed", f"hidden test failed: {names[failed]} ({NOT_SHOWN})", later)]


def execute_submission(nb, folder: Path, limits: Limits, lesson: dict, slot: int = 0, sandbox: bool = True,
                       scratch: Path | None = None, checker: CheckerProcess | None = None,
                       kernel: SandboxKernel | None = None) -> Execution:
    """Run a restored notebook as described in the module docstring. ``lesson`` holds the
    solution cells' names, the setup cells and the test cells' positions (``plan.lesson_facts``).
    ``checker``: the slot's served checker (``served_checker``), kept for its next submission
    when this one leaves it clean; None: a checker of this submission's own. ``kernel``: the
    slot's served kernel (``served_kernel.served_kernel``), whose ``prepare()`` folder is
    ``folder``, likewise; None: a kernel of this submission's own."""
    ex = Execution()
    r = Runner(folder, limits, lesson, slot, sandbox, scratch, checker, kernel)
    deadline = time.monotonic() + limits.notebook_seconds
    hidden: list = []
    try:
        r.start_checker(wait=False)  # before any student code; both start at once
        r.kernel.start()
        r.checker.wait_ready()
        r.kernel.execute(HELPERS, limits.cell_seconds, keep=False)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                ex.notes.append(f"notebook time limit ({limits.notebook_seconds:g} s) reached before cell "
                                f"{index + 1}; the remaining cells did not run")
                break
            gid = grade_id(cell) if is_test_cell(cell) else None
            if gid:
                _test_cell(r, ex, cell, gid, index + 1, deadline, min(limits.cell_seconds, left), hidden)
            else:
                _student_cell(r, ex, cell, index, deadline, min(limits.cell_seconds, left))
        _hidden_tests(r, ex, hidden, deadline)
    finally:
        r.close()
    return ex
