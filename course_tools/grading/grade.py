"""The whole of ``course grade LESSON``: intake, restore, execute in the sandbox, score with
nbgrader, feedback, and one CSV row per student.
"""
from __future__ import annotations

import copy
import csv
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat
from tqdm import tqdm

from ..paths import GRADED_NOTEBOOK, NOTEBOOKS, REPO
from .execute import _error_output, execute_submission
from .feedback import generate_feedback
from .nbgrader_course import CourseDir, GradingError, ensure_assignment, score
from .sandbox import Limits, SandboxUnavailable, bubblewrap, sandbox_uid, why_no_sandbox
from .submission import SubmissionProblem, copy_for_sandbox, import_submissions, is_test_cell, read_submission, restore_test_cells

STAGING = Path("build") / "sandboxed"     # executed notebooks that nbgrader scores


@dataclass
class Outcome:
    """One student's result: score and the reasons a grader or student should read."""

    student: str
    score: float = 0.0
    max_score: float = 0.0
    reasons: list = None
    seconds: float = 0.0

    def __post_init__(self):
        self.reasons = list(self.reasons or [])

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons) if self.reasons else "graded normally"



def grade_one(student: str, lesson: str, course: CourseDir, source_nb, release_nb, limits: Limits,
              slot: int, sandbox: bool) -> Outcome:
    """Run one student's submission; write the executed notebook where nbgrader scores it."""
    start = time.perf_counter()
    outcome = Outcome(student)
    folder = course.root / "submitted" / student / lesson
    staged = course.root / STAGING / student / lesson
    if staged.exists():
        shutil.rmtree(staged)
    staged.mkdir(parents=True)
    for f in ("timestamp.txt",):
        if (folder / f).is_file():
            shutil.copy2(folder / f, staged / f)
    try:
        nb = read_submission(folder / f"{GRADED_NOTEBOOK}.ipynb")
        nb, notes = restore_test_cells(nb, source_nb, release_nb)
        outcome.reasons += notes
        uid = sandbox_uid(slot) if sandbox else None
        work = copy_for_sandbox(folder, uid)
        try:
            outcome.reasons += execute_submission(nb, work, limits, slot=slot, sandbox=sandbox)
        finally:
            shutil.rmtree(work.parent, ignore_errors=True)
    except SubmissionProblem as exc:
        outcome.reasons.append(str(exc))
        nb = copy.deepcopy(release_nb)
        for cell in nb.cells:
            if is_test_cell(cell):
                cell.outputs = [_error_output("NotGraded", str(exc))]
    except Exception as exc:  # noqa: BLE001 - the grader's own fault for this student, recorded
        outcome.reasons.append(f"grader error: {type(exc).__name__}: {str(exc)[:300]}")
        outcome.score = float("nan")
        nb = None
    if nb is not None:
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [nbformat.from_dict(o) for o in cell.outputs]
        nbformat.write(nb, str(staged / f"{GRADED_NOTEBOOK}.ipynb"))
    outcome.seconds = round(time.perf_counter() - start, 2)
    return outcome



def grade_lesson(lesson_dir: Path, course: CourseDir | None = None, submissions: Path | None = None,
                 workers: int = 1, limits: Limits | None = None, sandbox: bool = True,
                 progress: bool = True, feedback: bool = True) -> list[Outcome]:
    """Grade every submission of one lesson: sandboxed runs in parallel, then nbgrader
    scores them; write ``build/grades_<lesson>.csv`` and feedback. Raises GradingError only
    for a fault of the grader (nbgrader failing as a whole), SandboxUnavailable when
    ``sandbox`` is asked for and cannot be had."""
    lesson = lesson_dir.name
    limits = limits or Limits()
    course = course or CourseDir(REPO, NOTEBOOKS)
    if sandbox and not bubblewrap():
        raise SandboxUnavailable(why_no_sandbox())
    if submissions:
        import_submissions(course, lesson, Path(submissions))
    ensure_assignment(course, lesson)
    submitted = course.root / "submitted"
    students = sorted(p.name for p in submitted.iterdir()
                      if (p / lesson).is_dir() and not p.name.startswith(".")) if submitted.exists() else []
    source_nb = nbformat.read(str(course.source / lesson / f"{GRADED_NOTEBOOK}.ipynb"), as_version=4)
    release_nb = nbformat.read(str(course.root / "release" / lesson / f"{GRADED_NOTEBOOK}.ipynb"), as_version=4)
    staging = course.root / STAGING
    for old in staging.glob(f"*/{lesson}"):
        if old.parent.name not in students:
            shutil.rmtree(old)
    slots = list(range(max(1, workers)))
    lock = threading.Lock()

    def job(student: str) -> Outcome:
        with lock:
            slot = slots.pop()
        try:
            return grade_one(student, lesson, course, source_nb, release_nb, limits, slot, sandbox)
        finally:
            with lock:
                slots.append(slot)

    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        bar = tqdm(pool.map(job, students), total=len(students), desc=f"grading {lesson}",
                   unit="submission", disable=not progress)
        outcomes = list(bar)
    if students:
        done = course.nbgrader("autograde", lesson, "--force",
                               f"--CourseDirectory.submitted_directory={STAGING}",
                               "--Execute.enabled=False", "--ClearOutput.enabled=False",
                               timeout=max(300, 20 * len(students)))
        graded = {s for s in students if (course.root / "autograded" / s / lesson).exists()}
        if done.returncode != 0 and not graded:
            raise GradingError(f"nbgrader autograde {lesson} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        for o in outcomes:
            got, top = score(course, lesson, o.student)
            o.max_score = top
            if o.student not in graded:
                o.reasons.append("grader error: nbgrader could not score this submission")
                o.score = float("nan")
            elif o.score == o.score:  # not NaN
                o.score = got
        if feedback:
            generate_feedback(course, lesson)
    write_grades_csv(course.root / "build" / f"grades_{lesson}.csv", outcomes)
    return outcomes



def write_grades_csv(path: Path, outcomes: list[Outcome]) -> Path:
    """student, score, max_score, seconds, reason: one row per submission."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max_score", "seconds", "reason"])
        for o in outcomes:
            writer.writerow([o.student, "" if o.score != o.score else f"{o.score:g}", f"{o.max_score:g}",
                             f"{o.seconds:g}", o.reason])
    return path
