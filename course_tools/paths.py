"""Where things are: the one module that knows the repository's layout.

Every other module of ``course_tools`` asks this one for the repository root, the lesson
folders and the build folder (the lessons themselves never need these paths).
"""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"          # nbgrader's source folder: one assignment per lesson
BUILD = REPO / "build"                  # generated: executed notebooks, decks, summaries, grades
SLIDES_DIR = REPO / "slides"            # deck template, theme and the npm packages for offline decks
LIBRARY = REPO / "course_lib"           # what the lessons import (visible inside the grading sandbox)
DATA = REPO / "data"                    # cited tables (visible inside the grading sandbox)
GRADED_NOTEBOOK = "exercises"           # the notebook of each lesson that nbgrader grades


class UnknownLesson(ValueError):
    """A lesson id that names no lesson folder; the message lists the lessons."""


def lesson_dirs(ids: str | None = None) -> list[Path]:
    """Lesson folders, in order; ``ids`` is a comma list of numbers ('00,01') or folder names.
    Raises UnknownLesson (one plain line) for an id that matches no folder."""
    every = sorted(p for p in NOTEBOOKS.iterdir() if p.is_dir() and p.name[:2].isdigit())
    if not ids:
        return every
    chosen = []
    for want in (w.strip() for w in ids.split(",") if w.strip()):
        match = [p for p in every if p.name == want or p.name.split("_")[0] == want.zfill(2)]
        if not match:
            names = ", ".join(p.name for p in every)
            raise UnknownLesson(f"no lesson '{want}'. Lessons: {names}")
        chosen.extend(m for m in match if m not in chosen)
    return chosen
