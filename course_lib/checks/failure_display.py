"""How a failed check looks in a student's notebook: the message first (what was expected, what
came back, the hint), then the student's own line(s), and none of ``course_lib``'s frames.

IPython's usual traceback for a ``CheckFailed`` raised inside a check shows the check's source
(``raise CheckFailed(msg)``), often through several library frames, with the message on the last
line. Importing ``course_lib.checks`` in an IPython kernel registers ``show_check_failure`` for
``CheckFailed`` (the checks', the kernel launches' and ``NotAnswered``) and ``NotImplementedError``:
a ``NotImplementedError`` raised by the release's stub in one of the notebook's cells (``raise
NotImplementedError()`` under ``# YOUR CODE HERE``) is shown as one line, "NotAnswered: NAME is not
answered yet ...", and the test's line; any other keeps IPython's full traceback, as does every
other exception.
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

from .core import CheckFailed
from .unanswered import is_stub_line, message

LIBRARY = Path(__file__).resolve().parents[1]   # course_lib/
MAX_FRAMES = 3   # the student's innermost lines shown
HANDLED = (CheckFailed, NotImplementedError)


def _students_frame(filename: str) -> bool:
    """A notebook cell (IPython names them ``<ipython-input-...>`` or a file under a
    ``ipykernel_*`` folder) or a file of the student's own, not course_lib, Python or a package."""
    if filename.startswith("<"):
        return filename.startswith("<ipython-input")
    path = Path(filename)
    if any(part.startswith("ipykernel_") for part in path.parts):
        return True
    resolved = path.resolve()
    return not (resolved.is_relative_to(LIBRARY) or "site-packages" in resolved.parts
                or "lib" in resolved.parts and any(p.startswith("python3") for p in resolved.parts))


def _where(frame) -> str:
    cell = frame.filename.startswith("<") or "ipykernel_" in frame.filename
    return "your cell" if cell else Path(frame.filename).name


def failure_lines(value: BaseException, tb) -> list[str]:
    """The lines shown for a failed check: its message, then the student's own frames (the
    cell line that called the check, and the innermost lines of theirs that it called back)."""
    frames = [f for f in traceback.extract_tb(tb) if _students_frame(f.filename) and f.line]
    return [f"{type(value).__name__}: {value}", *_shown(frames)]


def _shown(frames) -> list[str]:
    """The cell's line that was run (the outermost of the student's frames) and the innermost
    ones, at most :data:`MAX_FRAMES` in all (a kernel's line when the failure happened in it)."""
    kept = frames if len(frames) <= MAX_FRAMES else frames[:1] + frames[1 - MAX_FRAMES:]
    return [f"  {_where(f)}, line {f.lineno}: {f.line}" for f in kept]


def stub_lines(tb) -> list[str] | None:
    """The lines shown for a ``NotImplementedError`` raised by an unanswered exercise's stub in a
    notebook cell (one line naming it, then the student's lines that reached it); None when the
    innermost frame is not such a stub."""
    frames = traceback.extract_tb(tb)
    if not frames or not _students_frame(frames[-1].filename) or not is_stub_line(frames[-1].line or ""):
        return None
    callers = [f for f in frames[:-1] if _students_frame(f.filename) and f.line]
    return [f"NotAnswered: {message(frames[-1].name)}", *_shown(callers)]


def show_check_failure(shell, etype, value, tb, tb_offset=None) -> list[str]:
    """IPython custom exception handler for :data:`HANDLED` (see the module docstring)."""
    stb = failure_lines(value, tb) if isinstance(value, CheckFailed) else stub_lines(tb)
    if stb is None:   # a NotImplementedError of a library, or one the student raised on purpose
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
        return []
    shell._showtraceback(etype, value, stb)   # the kernel sends it as the cell's error output
    return stb


def install() -> bool:
    """Register ``show_check_failure`` in the running IPython shell; False outside IPython or
    when another handler is registered already (never replaced). A running shell has imported
    IPython already; elsewhere (a worker process, the grader's checker) IPython is not imported
    for nothing (0.2 s of CPU per process)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is None or getattr(shell, "custom_exceptions", ()) not in ((), (CheckFailed,), HANDLED):
        return False
    shell.set_custom_exc(HANDLED, show_check_failure)
    return True
