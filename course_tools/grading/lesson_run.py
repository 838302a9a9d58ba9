"""What one lesson's grading run holds, built once before any student is graded: the options
``course grade`` was given (``GradeOptions``), the lesson's notebooks and facts, the limits,
where scratch and results go, and a ``Slot`` per worker (its index, its sandbox user, the
scratch its submissions are copied into).

Scratch folders live under ``build/grading/.scratch-<host>-<random>-<pid>`` (or
``$TMPDIR/course-grade-...`` when that path is too long for Unix sockets); a grader that was
killed outright leaves its own, which the next run removes.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import nbformat

from ..paths import GRADED_NOTEBOOK
from .cells import ids_of_test_cells, max_score
from .nbgrader_course import CourseDir
from .plan import lesson_facts
from .results import shard_dir
from .sandbox import SLOTS, Limits, sandbox_uid
from .submission import lesson_marks


class Stopped(Exception):
    """The grader received SIGTERM or SIGINT."""


@dataclass
class GradeOptions:
    """How ``grade_lesson`` grades: the keyword arguments it takes, with its defaults.

    ``submissions``: a folder of student folders to take into submitted/ (None: the class already
    there); ``workers``: submissions graded at once (1 to ``sandbox.SLOTS``); ``limits``: each
    sandbox's (None: ``Limits()``); ``sandbox``: run every submission in bubblewrap; ``progress``:
    a progress bar and the intake's line on stderr; ``feedback``: write each student's feedback
    page; ``shard``: grade shard ``I`` of ``N`` (students at positions ``i % N == I``);
    ``merge_after``: merge into gradebook and CSV (None: when unsharded); ``reference_student``:
    a student whose submission is the reference solution (the build's round trip), graded by the
    plan's own run of it when there is one."""
    submissions: Path | None = None
    workers: int = 1
    limits: Limits | None = None
    sandbox: bool = True
    progress: bool = True
    feedback: bool = True
    shard: tuple[int, int] = (0, 1)
    merge_after: bool | None = None
    reference_student: str | None = None


@dataclass(frozen=True)
class Slot:
    """One worker slot: the submissions it grades one after another run as its sandbox users
    (``uid``, the kernel's, owns each copied submission; the checker's is ``SLOTS`` above it,
    see ``checker_process``) when ``sandbox``, and are copied into fresh folders under ``scratch``."""
    index: int
    sandbox: bool
    scratch: Path

    @cached_property
    def uid(self) -> int | None:
        """The slot's kernel user, looked up when first needed (the grader's block of users is
        reserved then); None without a sandbox, or when the grader is not root."""
        return sandbox_uid(self.index) if self.sandbox else None

    def fresh_folder(self) -> Path:
        """A new folder's path under the scratch (not created) for one submission's copy."""
        return Path(os.path.join(self.scratch, f"sub-{self.index}-{os.urandom(4).hex()}"))


@dataclass
class LessonRun:
    """What grading each student of the lesson shares: the lesson's source notebook and
    ``blank_nb`` (the trusted student version, ``student_version``, never ``release/``), what
    marks each lesson's notebook as its own, the facts ``execute`` needs, its test cells and
    maximum score (points), the limits and options in force, the intake's notes per student,
    the worker slots, and where scratch and this shard's results go. ``reference`` is the
    reference solution's graded submission once the plan has graded it in this run (None when
    the plan was cached). ``checkers``: each slot's served checker, started with its first
    submission (stopped with every sandbox when the run ends); ``kernels`` likewise, each
    slot's served kernel (``served_kernel.served_kernel``). Without a sandbox both are borrowed
    from ``kept_templates`` and given back when the run ends."""
    course: CourseDir
    lesson: str
    source_nb: Any
    blank_nb: Any
    lesson_marks: dict[str, set[str]]
    facts: dict
    cell_ids: list[str]
    max_score: float
    limits: Limits
    sandbox: bool
    feedback: bool
    progress: bool
    reference_student: str | None
    intake_notes: dict[str, list[str]]
    scratch: Path
    out: Path
    slots: list[Slot]
    reference: Any = field(default=None)
    checkers: dict = field(default_factory=dict)   # slot index -> its served checker (execute.served_checker)
    kernels: dict = field(default_factory=dict)    # slot index -> its served kernel


def lesson_run(course: CourseDir, lesson: str, blank_nb, options: GradeOptions, intake_notes: dict) -> LessonRun:
    """The run of shard ``options.shard`` of ``lesson``: its notebooks read, a fresh scratch
    folder and an empty shard folder made, one slot per worker."""
    scratch, out = _shard_folders(course, lesson, *options.shard)
    source_nb = nbformat.read(str(course.source / lesson / f"{GRADED_NOTEBOOK}.ipynb"), as_version=4)
    slots = [Slot(i, options.sandbox, scratch) for i in range(min(max(1, options.workers), SLOTS))]
    return LessonRun(course=course, lesson=lesson, source_nb=source_nb, blank_nb=blank_nb,
                     lesson_marks=_lessons_marks(course, lesson, source_nb), facts=lesson_facts(source_nb),
                     cell_ids=ids_of_test_cells(source_nb), max_score=max_score(source_nb),
                     limits=options.limits or Limits(), sandbox=options.sandbox, feedback=options.feedback,
                     progress=options.progress, reference_student=options.reference_student,
                     intake_notes=intake_notes, scratch=scratch, out=out, slots=slots)


def _lessons_marks(course: CourseDir, lesson: str, source_nb) -> dict[str, set[str]]:
    """``submission.lesson_marks`` of ``lesson`` and of every other lesson in the course's source
    (a notebook that cannot be read marks nothing)."""
    marks = {lesson: lesson_marks(source_nb)}
    for other in sorted(course.source.glob(f"*/{GRADED_NOTEBOOK}.ipynb")):
        if other.parent.name != lesson:
            try:
                marks[other.parent.name] = lesson_marks(json.loads(other.read_bytes()))
            except (OSError, ValueError, RecursionError):  # an unreadable lesson names no notebook
                continue
    return marks


def _clean_stale_scratch(base: Path) -> None:
    """Remove the scratch of graders on this host that no longer run (killed outright)."""
    host = socket.gethostname()[:20]
    for old in [*base.glob(f".scratch-{host}-*"), *Path(tempfile.gettempdir()).glob(f"course-grade-{host}-*")]:
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)


def scratch_folder(base: Path) -> Path:
    """This grader's scratch folder: under ``build/grading/``, or in the temporary folder when
    that path is too long for the kernels' Unix sockets (108 bytes on Linux)."""
    # host name too: shards in several pods share build/ and each pod numbers its processes from 1
    name = f"{socket.gethostname()[:20]}-{os.urandom(3).hex()}-{os.getpid()}"
    scratch = base / f".scratch-{name}"
    if len(str(scratch)) > 60:
        scratch = Path(tempfile.gettempdir()) / f"course-grade-{name}"
    return scratch


def _shard_folders(course: CourseDir, lesson: str, index: int, count: int) -> tuple[Path, Path]:
    """(a fresh scratch folder for this run, this shard's empty output folder)."""
    base = course.root / "build" / "grading"
    base.mkdir(parents=True, exist_ok=True)
    _clean_stale_scratch(base)
    scratch = scratch_folder(base)
    out = shard_dir(course, lesson, index, count)
    if out.exists():
        shutil.rmtree(out)
    (out / "graded").mkdir(parents=True)
    (out / "feedback").mkdir()
    return scratch, out
