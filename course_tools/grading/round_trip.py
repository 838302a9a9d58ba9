"""The build's round trip: a lesson released in a scratch course, then its reference solution
and its blank release graded as two students are by ``course grade`` (the same intake, the
same trusted checker judging every test cell, nbgrader keeping the scratch gradebook). So what
``course build`` proves, "reference = max, blank = 0", is proven by the judge that grades
students, not by nbgrader's own Autograde. The reference runs once: the lesson's plan grades
it before any student, and that run is the "reference" student's grade. The real gradebook is never touched.

The scratch course grades without bubblewrap: reference and blank are the instructor's own
code, and a build must run where no sandbox can be had (a laptop, a GPU machine's image). So
both run in one slot, forked from the same kernel and checker templates, which this process keeps
for the next lesson it grades (``kept_templates``): the imports (torch, ipykernel) are paid once
per build worker, not twice per lesson.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ..paths import GRADED_NOTEBOOK
from .grade import grade_lesson
from .nbgrader_course import CourseDir, release, score
from .sandbox import Limits

STUDENTS = ("reference", "blank")


def build_limits() -> Limits:
    """The scratch course's limits: generous (the instructor's code; a lesson may load a
    model), and no address-space limit where a GPU is visible (CUDA maps far more than it uses)."""
    gpu = any(Path(p).exists() for p in ("/dev/nvidiactl", "/dev/kfd"))
    return Limits(memory_bytes=16 * 2**30, cpu_seconds=3600, gpu=gpu)


def round_trip(lesson_dir: Path, workdir: Path, limits: Limits | None = None) -> dict:
    """Release ``lesson_dir`` in a scratch course under ``workdir`` and grade its reference
    solution and its blank release through the checker; return the scores (points), the
    reasons the grader gave, and where the released and graded notebooks are. Raises
    ``GradingError`` (one line naming the cells) when the reference misses a point."""
    lesson = lesson_dir.name
    if workdir.exists():
        shutil.rmtree(workdir)
    source = workdir / "source"
    shutil.copytree(lesson_dir, source / lesson, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    course = CourseDir(workdir, source)
    released = release(course, lesson)
    for student, folder in (("reference", source / lesson), ("blank", released)):
        target = workdir / "submitted" / student / lesson
        target.mkdir(parents=True)
        shutil.copy2(folder / f"{GRADED_NOTEBOOK}.ipynb", target)
    outcomes = grade_lesson(lesson_dir, course=course, workers=len(STUDENTS), limits=limits or build_limits(),
                            sandbox=False, progress=False, feedback=False, reference_student="reference")
    reasons = {o.student: o.reasons for o in outcomes}
    ref, max_score = score(course, lesson, "reference")
    blank, _ = score(course, lesson, "blank")
    return {
        "max_score": max_score,
        "reference_score": ref,
        "blank_score": blank,
        "release": released,
        "graded_reference": workdir / "autograded" / "reference" / lesson / f"{GRADED_NOTEBOOK}.ipynb",
        "log": "; ".join(f"{student}: {' | '.join(why)}" for student, why in reasons.items() if why),
    }
