"""Step 3 of grading: execute a restored notebook cell by cell in a sandboxed kernel, judge
each test cell by the kernel's reply (with the integrity guards of ``integrity``), restart
the kernel after a crash or a timeout, and describe in plain words whatever went wrong.
"""
from __future__ import annotations

import re
import secrets
import time
from pathlib import Path

from .integrity import FINGERPRINT, RESET_MACHINERY, fingerprint_changes, guarded_test
from .sandbox import Limits, SandboxKernel
from .submission import is_test_cell, _nb_meta

SIGNALS = {6: "aborted (SIGABRT)", 7: "bus error (SIGBUS)", 9: "killed (SIGKILL, often the memory limit)",
           11: "segmentation fault (SIGSEGV)", 24: "CPU time limit reached (SIGXCPU)",
           25: "file size limit reached (SIGXFSZ)"}



def _stdout(run) -> str:
    return "".join(o.get("text", "") for o in run.outputs if o.get("name") == "stdout")


def _error_output(ename: str, evalue: str) -> dict:
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": [f"{ename}: {evalue}"]}


def _describe_failure(run, number: int, limits: Limits) -> str | None:
    """A plain-words note for a cell that did not end normally (None for ordinary errors)."""
    where = f"cell {number}"
    if run.status == "timeout":
        return f"timed out in {where} (limit {limits.cell_seconds:g} s per cell)"
    if run.status == "died":
        code = run.exit_code
        sig = -code if code is not None and code < 0 else (code - 128 if code and code > 128 else None)
        if sig in SIGNALS:
            return f"kernel crashed in {where}: {SIGNALS[sig]}"
        return f"kernel exited in {where} (exit code {code}: the code ended the kernel's process, e.g. os._exit)"
    if run.ename == "MemoryError":
        return f"memory limit reached in {where} (MemoryError; limit {limits.memory_bytes / 2**30:g} GiB)"
    text = f"{run.ename}: {run.evalue}"
    if "Network is unreachable" in text or "Temporary failure in name resolution" in text or "Name or service not known" in text:
        return f"network access is blocked while grading ({where}: {text[:120]})"
    if "Read-only file system" in text or "Permission denied" in text:
        return f"{where} tried to write or read outside its own folder, which is not allowed ({text[:120]})"
    if run.ename in ("FileNotFoundError", "PermissionError", "IsADirectoryError") and re.search(
            r"'/(?!submission)[^']*'", run.evalue):
        return (f"{where} tried to use a file outside its own folder, which the sandbox does not "
                f"show ({text[:160]})")
    if run.ename == "BlockingIOError" and "Resource temporarily unavailable" in text:
        return f"process limit reached in {where} ({limits.processes} processes and threads)"
    return None


def execute_submission(nb, folder: Path, limits: Limits, slot: int = 0, sandbox: bool = True):
    """Run a restored notebook cell by cell in a sandboxed kernel whose working folder is
    ``folder``; fill in outputs; return (notes, number of test cells judged failed by the
    integrity check). Never raises for anything the student's code does."""
    notes: list[str] = []
    kernel = SandboxKernel(folder, limits, slot=slot, sandbox=sandbox)
    token = secrets.token_hex(6)
    deadline = time.monotonic() + limits.notebook_seconds
    done_ok: list[str] = []          # code of cells that ran fine, replayed after a restart
    tampered = False
    try:
        kernel.start()
        baseline = _stdout(kernel.execute(FINGERPRINT, limits.cell_seconds * 2))
        code_cells = [(i + 1, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        for pos, (number, cell) in enumerate(code_cells):
            cell.outputs, cell.execution_count = [], None
            left = deadline - time.monotonic()
            if left <= 0:
                notes.append(f"notebook time limit ({limits.notebook_seconds:g} s) reached before cell "
                             f"{number}; the remaining cells did not run")
                for _, rest in code_cells[pos:]:
                    rest.outputs = ([_error_output("TimeoutError", "not run: notebook time limit")]
                                    if is_test_cell(rest) else [])
                break
            timeout = min(limits.cell_seconds, left)
            if is_test_cell(cell):
                gid = _nb_meta(cell)["grade_id"]
                if tampered:
                    cell.outputs = [_error_output("IntegrityError", "not graded: error reporting was tampered with")]
                    continue
                kernel.execute(RESET_MACHINERY, timeout=min(10, timeout))
                changed = fingerprint_changes(baseline, _stdout(kernel.execute(FINGERPRINT, timeout)))
                if changed:
                    tampered = True
                    notes.append(f"integrity check failed at test cell {gid} (cell {number}): the code "
                                 f"replaced functions that tests rely on ({', '.join(changed[:5])}); "
                                 "this and later test cells score 0")
                    cell.outputs = [_error_output("IntegrityError", "not graded: built-in functions were replaced")]
                    continue
                canary = kernel.execute(guarded_test(cell.source, token, canary=True), timeout)
                if canary.status == "ok":
                    tampered = True
                    notes.append(f"integrity check failed at test cell {gid} (cell {number}): the kernel "
                                 "reported a test that must fail as passed, so earlier code tampered with "
                                 "error reporting; this and later test cells score 0")
                    cell.outputs = [_error_output("IntegrityError", "not graded: error reporting was tampered with")]
                    continue
                run = canary if canary.status in ("timeout", "died") else kernel.execute(
                    guarded_test(cell.source, token, canary=False), timeout)
            else:
                run = kernel.execute(cell.source, timeout)
            note = _describe_failure(run, number, limits)
            if note:
                notes.append(note)
            if run.truncated:
                notes.append(f"output of cell {number} cut at {limits.output_bytes} bytes")
            outputs = list(run.outputs)
            if is_test_cell(cell) and run.status != "ok":
                outputs = [o for o in outputs if o["output_type"] != "execute_result"]
                if not any(o["output_type"] == "error" for o in outputs):
                    outputs.insert(0, _error_output(run.ename or "TestFailed",
                                                    run.evalue or note or "the test did not pass"))
            elif run.status in ("timeout", "died"):
                outputs.append(_error_output("SandboxLimit", note))
            cell.outputs = outputs
            if run.status == "ok" and not is_test_cell(cell):
                done_ok.append(cell.source)
            if run.status in ("timeout", "died"):
                if run.status == "timeout":
                    kernel.interrupt()
                    if kernel.alive() and kernel.execute("pass", timeout=3).status == "ok":
                        continue  # the interrupt stopped it; the kernel lives on
                kernel.restart()
                baseline = _stdout(kernel.execute(FINGERPRINT, limits.cell_seconds * 2))
                for code in done_ok:  # bring back what the earlier cells defined
                    if kernel.execute(code, min(limits.cell_seconds, max(1.0, deadline - time.monotonic()))).status != "ok":
                        break
                notes.append(f"the kernel was restarted after cell {number} and the earlier cells run again")
    finally:
        kernel.close()
    return notes

