"""Step 7 of grading: results. Each shard of a class writes its students' outcomes, graded
notebooks and feedback pages into ``build/grading/<lesson>/shards/<I>-of-<N>/``; the merge reads
every shard of one run and writes, per student, the gradebook entry (nbgrader's own
``SaveAutoGrades``, so manual grades survive), ``autograded/<student>/<lesson>/``,
``feedback/<student>/<lesson>/exercises.html``, and then one CSV for the class.

A student whose submission was refused or could not be graded has no gradebook entry for the
lesson afterwards (an earlier score is removed, never shown as new). SIGTERM during the merge
is held until the student being written is complete (``held_signals``).
"""
from __future__ import annotations

import csv
import json
import shutil
import signal
import threading
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from ..paths import GRADED_NOTEBOOK
from .nbgrader_course import CourseDir, GradingError


@dataclass
class Outcome:
    """One student's result: score, per-test points and the reasons to read."""

    student: str
    score: float = 0.0
    max_score: float = 0.0
    reasons: list = field(default_factory=list)
    seconds: float = 0.0
    status: str = "graded"          # graded | refused | error
    cells: dict = field(default_factory=dict)   # grade_id -> points earned
    timestamp: str = ""

    @property
    def reason(self) -> str:
        if self.reasons:  # one line: a CSV row and a terminal line per student
            return " ".join("; ".join(self.reasons).split())
        return "graded normally" if self.status == "graded" else self.status


def shard_dir(course: CourseDir, lesson: str, index: int, count: int) -> Path:
    return course.root / "build" / "grading" / lesson / "shards" / f"{index}-of-{count}"


def write_shard(folder: Path, outcomes: list[Outcome], complete: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "outcomes.json.tmp"
    tmp.write_text(json.dumps({"complete": complete, "outcomes": [asdict(o) for o in outcomes]}, indent=1))
    tmp.replace(folder / "outcomes.json")


@contextmanager
def held_signals():
    """SIGTERM and SIGINT wait until the block is done (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending = []
    old = {s: signal.signal(s, lambda n, f: pending.append(n)) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for s in pending:
            signal.raise_signal(s)


def save_grades(course: CourseDir, lesson: str, student: str, graded_nb, timestamp) -> None:
    """The student's test results into the gradebook, as ``nbgrader autograde`` would."""
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveAutoGrades

    with Gradebook(course.db_url) as gb:
        gb.update_or_create_student(student)
    with warnings.catch_warnings(), Gradebook(course.db_url) as gb:
        warnings.simplefilter("ignore")  # SQLAlchemy's autoflush notes from inside nbgrader
        if timestamp:
            gb.update_or_create_submission(lesson, student, timestamp=timestamp)
        else:
            gb.update_or_create_submission(lesson, student)
    resources = {"nbgrader": {"notebook": GRADED_NOTEBOOK, "assignment": lesson, "student": student,
                              "db_url": course.db_url}}
    SaveAutoGrades().preprocess(graded_nb, resources)


def drop_grades(course: CourseDir, lesson: str, student: str) -> None:
    """Remove the student's submission of this lesson from the gradebook, if any."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(course.db_url) as gb:
        try:
            gb.remove_submission(lesson, student)
        except MissingEntry:
            pass


def read_scores(course: CourseDir, lesson: str, student: str) -> tuple[float, float, dict]:
    """(score, max score, {grade_id: points}) from the gradebook (manual grades included)."""
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        sub = gb.find_submission_notebook(GRADED_NOTEBOOK, lesson, student)
        cells = {g.name: float(g.score) for g in sub.grades}
        return float(sub.score), float(sub.max_score), cells


def merge(course: CourseDir, lesson: str, cell_ids: list[str], max_score: float) -> list[Outcome]:
    """Merge every shard of the last run of ``lesson`` (see the module docstring)."""
    from nbgrader.utils import parse_utc

    root = course.root / "build" / "grading" / lesson / "shards"
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []
    counts = {p.name.split("-of-")[-1] for p in folders}
    if not folders:
        raise GradingError(f"no shards of {lesson} to merge under {root}")
    if len(counts) != 1:
        raise GradingError(f"shards of different runs under {root} ({', '.join(p.name for p in folders)})")
    count = int(counts.pop())
    missing = [f"{i}-of-{count}" for i in range(count) if not (root / f"{i}-of-{count}" / "outcomes.json").exists()]
    if missing:
        raise GradingError(f"shards not finished: {', '.join(missing)} (grade them, then merge again)")
    outcomes = []
    for folder in folders:
        for data in json.loads((folder / "outcomes.json").read_text())["outcomes"]:
            o = Outcome(**data)
            o.max_score = max_score
            graded = folder / "graded" / f"{o.student}.ipynb"
            with held_signals():
                if o.status == "graded" and graded.exists():
                    nb = nbformat.read(str(graded), as_version=4)
                    save_grades(course, lesson, o.student, nb, parse_utc(o.timestamp) if o.timestamp else None)
                    o.score, o.max_score, o.cells = read_scores(course, lesson, o.student)
                    target = course.root / "autograded" / o.student / lesson
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(graded, target / f"{GRADED_NOTEBOOK}.ipynb")
                else:
                    drop_grades(course, lesson, o.student)
                    if o.status == "refused":
                        o.score = 0.0
                page = folder / "feedback" / f"{o.student}.html"
                target = course.root / "feedback" / o.student / lesson
                if target.exists():
                    shutil.rmtree(target)
                if page.exists():
                    target.mkdir(parents=True)
                    shutil.copy2(page, target / f"{GRADED_NOTEBOOK}.html")
                    # nbgrader release_feedback names the released page from these two files; only
                    # small regular files are copied (never a link into the grader's machine)
                    for name in ("timestamp.txt", "submission_secret.txt"):
                        kept = course.root / "submitted" / o.student / lesson / name
                        if kept.is_file() and not kept.is_symlink() and kept.stat().st_size < 4096:
                            shutil.copyfile(kept, target / name, follow_symlinks=False)
            outcomes.append(o)
    outcomes.sort(key=lambda o: o.student)
    write_grades_csv(course.root / "build" / f"grades_{lesson}.csv", outcomes, cell_ids)
    shutil.rmtree(root, ignore_errors=True)
    return outcomes


def write_grades_csv(path: Path, outcomes: list[Outcome], cell_ids: list[str] = ()) -> Path:
    """student, score, max_score, seconds, reason, then the points of each test cell."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max_score", "seconds", "reason", *cell_ids])
        for o in outcomes:
            writer.writerow([o.student, "" if o.score != o.score else f"{o.score:g}", f"{o.max_score:g}",
                             f"{o.seconds:g}", o.reason, *(f"{o.cells[c]:g}" if c in o.cells else "" for c in cell_ids)])
    tmp.replace(path)
    return path
