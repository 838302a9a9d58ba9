"""How a failed check looks in a student's notebook: the message first (what was expected, what
came back, the hint), then the student's own line(s), and none of ``course_lib``'s frames.

IPython's usual traceback for a ``CheckFailed`` raised inside a check shows the check's source
(``raise CheckFailed(msg)``), often through several library frames, with the message on the last
line. Importing ``course_lib.checks`` in an IPython kernel registers ``show_check_failure`` for
``CheckFailed`` only; every other exception keeps IPython's full traceback.
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

from .core import CheckFailed

LIBRARY = Path(__file__).resolve().parents[1]   # course_lib/
MAX_FRAMES = 3   # the student's innermost lines shown


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


def failure_lines(value: BaseException, tb) -> list[str]:
    """The lines shown for a failed check: its message, then the student's own frames (the
    cell line that called the check, and any line of theirs that it called back)."""
    lines = [f"{type(value).__name__}: {value}"]
    frames = [f for f in traceback.extract_tb(tb) if _students_frame(f.filename) and f.line]
    for frame in frames[-MAX_FRAMES:]:
        where = "your cell" if frame.filename.startswith("<") or "ipykernel_" in frame.filename else Path(frame.filename).name
        lines.append(f"  {where}, line {frame.lineno}: {frame.line}")
    return lines


def show_check_failure(shell, etype, value, tb, tb_offset=None) -> list[str]:
    """IPython custom exception handler for ``CheckFailed`` (see the module docstring)."""
    stb = failure_lines(value, tb)
    shell._showtraceback(etype, value, stb)   # the kernel sends it as the cell's error output
    return stb


def install() -> bool:
    """Register ``show_check_failure`` in the running IPython shell; False outside IPython or
    when another handler is registered already (never replaced). A running shell has imported
    IPython already; elsewhere (a worker process, the grader's checker) IPython is not imported
    for nothing (0.2 s of CPU per process)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is None or getattr(shell, "custom_exceptions", ()) not in ((), (CheckFailed,)):
        return False
    shell.set_custom_exc((CheckFailed,), show_check_failure)
    return True
