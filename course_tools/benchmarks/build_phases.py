"""Where the time of `make course` goes: `course build` of every lesson into a scratch
folder, as `make course` runs it (lessons in parallel, ``build.default_workers``), with the
seconds of each phase summed over lessons:

* ``execute_lecture``: running lecture.ipynb top to bottom in a fresh kernel;
* ``slides``: the offline deck, made from that executed notebook (not executed again);
* ``release_and_grading``: nbgrader's student version, then the round trip (reference and
  blank graded as students are, every test cell judged by the trusted checker; the reference
  runs once for the lesson's plan, then as a student beside the blank);
* ``html``: the executed notebooks rendered as web pages for build/index.html.

``release_alone_seconds`` times nbgrader's release of every lesson on its own, so the
grading round trip's share is ``release_and_grading`` minus it. The wall time is what a
user waits for (set-up of .venv on a fresh clone excluded: it depends on the network).
Target (issue 12): the whole `make course` within 300 s on 2 cores; the ratio
``parallel_speedup`` (lesson seconds summed / wall) shows what the workers bring.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path


def _release_alone(root: Path) -> float:
    from ..grading.nbgrader_course import CourseDir, release
    from ..paths import lesson_dirs

    source = root / "source"
    lessons = lesson_dirs()
    for lesson in lessons:
        shutil.copytree(lesson, source / lesson.name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    course = CourseDir(root, source)
    start = time.perf_counter()
    for lesson in lessons:
        release(course, lesson.name)
    return time.perf_counter() - start


def run() -> dict:
    from ..build import PHASES, build, default_workers, ok
    from ..paths import lesson_dirs

    lessons = lesson_dirs()
    workers = default_workers(len(lessons))
    root = Path(tempfile.mkdtemp(prefix="course-bench-build-"))
    try:
        start = time.perf_counter()
        rows = build(None, root / "build", progress=lambda m: None, workers=workers)
        wall = time.perf_counter() - start
        figures = {"cpu_cores": os.cpu_count(), "workers": workers, "lessons": len(rows),
                   "lessons_ok": sum(ok(r) for r in rows)}
        for phase in PHASES:
            figures[f"{phase}_seconds_summed"] = round(sum(r["phases"].get(phase, 0.0) for r in rows), 1)
        lesson_seconds = sum(r["seconds"] for r in rows)
        figures["lesson_seconds_summed"] = round(lesson_seconds, 1)
        slowest = max(rows, key=lambda r: r["seconds"])
        figures["slowest_lesson"] = f"{slowest['lesson']} ({slowest['seconds']:.0f} s)"
        figures["build_wall_seconds (make course target <= 300 on 2 cores)"] = round(wall, 1)
        figures["parallel_speedup"] = round(lesson_seconds / wall, 2)
        figures["release_alone_seconds"] = round(_release_alone(root / "release-only"), 1)
        return figures
    finally:
        shutil.rmtree(root, ignore_errors=True)
