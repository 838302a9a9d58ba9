"""One submission graded, as a list of steps over one state (as nbgrader's autograde converter
declares its preprocessors): a student's (``STUDENT_STEPS``: intake's notes, the folder's files,
the notebook read, checked to be this lesson's, its test cells restored, its timestamp, run in
the slot's sandboxes, recorded) and the reference solution's (``REFERENCE_STEPS``: the lesson's
source folder and its solution notebook, run in the same way), which the plan grades before any
student is.

``record`` puts a graded run into its ``Outcome`` (points per test cell, score, notes) and the
shard folder: the graded notebook and, when asked, the feedback page.
"""
from __future__ import annotations

import copy
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from ..paths import GRADED_NOTEBOOK
from . import kept_templates
from .cells import grade_id, is_test_cell, points
from .checker_process import import_statements
from .execute import Execution, Verdict, error_output, execute_submission
from .feedback import feedback_notebook, local_mathjax_url, render_html, safe_outputs
from .intake import SubmissionProblem, copy_files, inspect_folder, notebook_notes, read_timestamp
from .lesson_run import LessonRun, Slot, Stopped
from .plan import reference_notebook
from .results import Outcome
from .submission import read_submission, refuse_other_lesson, restore_test_cells
from .utf8 import valid_text

REFERENCE = "reference"   # the student name the reference solution is graded under


@dataclass
class Submission:
    """One submission being graded: whose, the folder its files are read from, its outcome so
    far, and what the steps made of it (the files to copy, the notebook to run, its Execution)."""
    student: str
    folder: Path
    outcome: Outcome
    files: list = field(default_factory=list)
    nb: Any = None
    ex: Execution | None = None


def _intake_notes(sub: Submission, run: LessonRun, slot: Slot) -> None:
    sub.outcome.reasons += run.intake_notes.get(sub.student, [])


def _files(sub: Submission, run: LessonRun, slot: Slot) -> None:
    sub.files = inspect_folder(sub.folder)
    sub.outcome.reasons += notebook_notes(sub.files)  # exercises.ipynb, or the near match named when missing


def _notebook(sub: Submission, run: LessonRun, slot: Slot) -> None:
    nb, notes = read_submission(sub.folder / f"{GRADED_NOTEBOOK}.ipynb")  # metadata checked and reduced
    sub.nb = valid_text(nb)  # its JSON may spell lone surrogates, which no kernel message or file can hold
    sub.outcome.reasons += notes


def _this_lesson(sub: Submission, run: LessonRun, slot: Slot) -> None:
    refuse_other_lesson(sub.nb, run.lesson, run.lesson_marks)


def _test_cells_restored(sub: Submission, run: LessonRun, slot: Slot) -> None:
    sub.nb, notes = restore_test_cells(sub.nb, run.source_nb, run.blank_nb)
    sub.outcome.reasons += notes


def _timestamp(sub: Submission, run: LessonRun, slot: Slot) -> None:
    stamp, note = read_timestamp(sub.folder)
    sub.outcome.timestamp = stamp.isoformat() if stamp else ""
    sub.outcome.reasons += [note] if note else []


def _executed(sub: Submission, run: LessonRun, slot: Slot) -> None:
    """The notebook run on a copy of the folder's files (owned by the slot's sandbox user), by the
    slot's served checker and kernel, borrowed from ``kept_templates`` with the slot's first
    submission (templates an earlier run of this process kept, or new ones)."""
    if slot.index not in run.checkers:
        preload = import_statements(code for _, code in run.facts["setup"])
        run.checkers[slot.index] = kept_templates.lend("checker", run.limits, preload, slot.index, run.sandbox)
        run.kernels[slot.index] = kept_templates.lend("kernel", run.limits, preload, slot.index, run.sandbox)
    checker, kernel = run.checkers[slot.index], run.kernels[slot.index]
    work = slot.fresh_folder()
    folder = kernel.prepare()
    try:
        copy_files(sub.folder, folder, sub.files, slot.uid)
        sub.ex = execute_submission(sub.nb, folder, run.limits, run.facts, slot.index, run.sandbox, run.scratch,
                                    checker, kernel)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _recorded(sub: Submission, run: LessonRun, slot: Slot) -> None:
    record(sub.outcome, sub.nb, sub.ex, run)


def _reference_files(sub: Submission, run: LessonRun, slot: Slot) -> None:
    """The lesson's source folder as the reference's files (its notebook alone when the folder
    holds what a submission may not)."""
    try:
        sub.files = inspect_folder(sub.folder)
    except SubmissionProblem:
        sub.files = [(f"{GRADED_NOTEBOOK}.ipynb", (sub.folder / f"{GRADED_NOTEBOOK}.ipynb").stat().st_size)]


def _reference_notebook(sub: Submission, run: LessonRun, slot: Slot) -> None:
    sub.nb = reference_notebook(run.source_nb, run.blank_nb)


STUDENT_STEPS = (_intake_notes, _files, _notebook, _this_lesson, _test_cells_restored, _timestamp, _executed,
                 _recorded)
REFERENCE_STEPS = (_reference_files, _reference_notebook, _executed)


def grade_one(student: str, run: LessonRun, slot: Slot) -> Outcome:
    """Grade one student's folder in submitted/ (``STUDENT_STEPS``); write its graded notebook and
    feedback page into the shard folder. Never raises but ``Stopped``: a refused submission has
    no score and says why, a fault of the grader is recorded as an error."""
    start = time.perf_counter()
    outcome = Outcome(student, max_score=run.max_score)   # a shard's own lines show it too
    sub = Submission(student, run.course.root / "submitted" / student / run.lesson, outcome)
    try:
        for step in STUDENT_STEPS:
            step(sub, run, slot)
    except SubmissionProblem as exc:  # refused, or not a notebook: no score (CSV and gradebook), the reason says why
        outcome.status, outcome.reasons, outcome.score = "refused", [*outcome.reasons, str(exc)], float("nan")
        outcome.cells = {}
    except Stopped:
        raise
    except Exception as exc:  # noqa: BLE001 - the grader's own fault for this student, recorded
        outcome.status = "error"
        outcome.reasons.append(f"grader error: {type(exc).__name__}: {str(exc)[:300]}")
        outcome.score = float("nan")
    outcome.seconds = round(time.perf_counter() - start, 2)
    return outcome


def grade_reference(run: LessonRun) -> Execution:
    """``run_reference`` for ``plan.lesson_plan``: the reference solution graded in the first slot
    (``REFERENCE_STEPS``), kept as ``run.reference``; a fault raises, as the lesson cannot be graded."""
    sub = Submission(REFERENCE, run.course.source / run.lesson, Outcome(REFERENCE, max_score=run.max_score))
    for step in REFERENCE_STEPS:
        step(sub, run, run.slots[0])
    run.reference = sub
    return sub.ex


def _graded_notebook(nb, ex: Execution):
    """The restored notebook with outputs nbgrader scores: a failed test cell holds an error."""
    graded = copy.deepcopy(nb)
    for index, cell in enumerate(graded.cells):
        if cell.cell_type != "code":
            continue
        cell.execution_count = None
        if is_test_cell(cell):
            verdict = ex.verdicts.get(grade_id(cell)) or Verdict(False, [error_output("NotRun", "not run")])
            outputs = [o for o in verdict.outputs if o["output_type"] == "stream" and o["name"] == "stdout"]
            if not verdict.passed:
                errors = [o for o in verdict.outputs if o["output_type"] == "error"]
                outputs += errors[:1] or [error_output("TestFailed", "the test did not pass")]
        else:
            outputs = safe_outputs(ex.outputs.get(index, []))
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return graded


def record(outcome: Outcome, nb, ex: Execution, run: LessonRun) -> None:
    """One graded run into ``outcome`` (points per test cell, score, notes) and the shard
    folder ``run.out`` (graded notebook; feedback page when ``run.feedback``). The score is what
    the verdicts earned whatever becomes of the files (``_write_graded``, ``_write_feedback``):
    what the student's code wrote is the student's, so a file it spoils is never a grader error
    that would keep an earlier score."""
    outcome.reasons += ex.notes
    worth = {grade_id(c): points(c) for c in nb.cells if is_test_cell(c)}
    scores = {g: (p if ex.verdicts.get(g) and ex.verdicts[g].passed else 0.0, p) for g, p in worth.items()}
    outcome.cells = {g: s for g, (s, _) in scores.items()}
    outcome.score = sum(outcome.cells.values())
    _write_graded(outcome, nb, ex, run.out / "graded" / f"{outcome.student}.ipynb")
    scores = {g: (outcome.cells[g], top) for g, (_, top) in scores.items()}   # 0 if nothing could be written
    if run.feedback:
        _write_feedback(outcome, nb, ex, scores, run)


def _write_graded(outcome: Outcome, nb, ex: Execution, path: Path) -> None:
    """The graded notebook at ``path``, its text made valid UTF-8. If it cannot be written, the
    same notebook without the outputs of the student's own cells (each test cell keeps its
    verdict, so the score stands); if that cannot be written either, none: the merge records 0,
    and ``outcome`` says so."""
    bare = Execution(verdicts={g: Verdict(v.passed) for g, v in ex.verdicts.items()})
    failure = None
    for kept in (ex, bare):
        try:
            nbformat.write(valid_text(_graded_notebook(nb, kept)), str(path))
        except Exception as exc:  # noqa: BLE001 - whatever spoils the file, the reason says so
            path.unlink(missing_ok=True)
            failure = failure or f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            continue
        if kept is bare:
            outcome.reasons.append(f"the graded notebook was kept without your cells' outputs, which could not "
                                   f"be written ({failure})")
        return
    outcome.score, outcome.cells = 0.0, {g: 0.0 for g in outcome.cells}
    outcome.reasons.append(f"scored 0: the graded notebook could not be written ({failure})")


def _write_feedback(outcome: Outcome, nb, ex: Execution, scores: dict, run: LessonRun) -> None:
    """The student's feedback page in the shard folder (UTF-8; a character that cannot be, as its
    escape); a page that cannot be made or written is left out, and ``outcome`` says so."""
    page = run.out / "feedback" / f"{outcome.student}.html"
    try:
        fb = feedback_notebook(nb, ex, scores, (outcome.score, run.max_score), outcome.reasons, run.blank_nb)
        page.write_text(render_html(fb, local_mathjax_url()), encoding="utf-8", errors="backslashreplace")
    except Exception as exc:  # noqa: BLE001 - the score stands; the reason says the page is missing
        page.unlink(missing_ok=True)
        outcome.reasons.append(f"no feedback page: it could not be written ({type(exc).__name__}: "
                               f"{' '.join(str(exc).split())[:200]})")
