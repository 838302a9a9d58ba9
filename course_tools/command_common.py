"""What every `course` subcommand shares: the one-line error, progress on stderr, and the checks
of a lesson argument and a notebook path."""
from __future__ import annotations

import sys
from pathlib import Path


class CourseError(Exception):
    """Bad input or a missing tool: `course` prints the message as one line and exits 1."""


def say(message: str) -> None:
    """Progress and per-lesson results go to stderr, so stdout stays the command's output."""
    print(message, file=sys.stderr, flush=True)


def one_lesson(ids: str) -> Path:
    """The single lesson folder that ``ids`` names; CourseError for none or several."""
    from .paths import lesson_dirs

    chosen = lesson_dirs(ids)
    if len(chosen) != 1:
        raise CourseError(f"expected one lesson, got {len(chosen)} ({', '.join(p.name for p in chosen)}): "
                          "give one lesson number such as 01")
    return chosen[0]


def notebook_problem(path: Path) -> str | None:
    """Why ``path`` cannot be used as a notebook (None when it can be read)."""
    import nbformat

    if not path.is_file():
        return f"{path} is missing"
    try:
        nbformat.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001 - any reader failure means "not a notebook"
        return f"{path} is not a readable notebook ({type(exc).__name__})"
    return None
