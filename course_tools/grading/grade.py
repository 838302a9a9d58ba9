"""The whole of ``course grade LESSON``: intake, the lesson's plan, each submission in its own
sandboxes (trusted checker + student kernel), feedback, and the results of one shard; then
(unsharded, or with ``--merge``) the gradebook and one CSV row per student.

Each student is graded on its own (``one_submission``): nothing a submission does can stop the
others, and the CSV is written even when the grader is stopped (SIGTERM, or SIGINT: Ctrl-C at its
terminal; the students not yet graded say so), after which it ends as that signal asks. What the
run shares is one ``LessonRun`` (``lesson_run``), built once; its scratch folder is removed at
the end and when stopped.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from tqdm import tqdm

from ..paths import GRADED_NOTEBOOK, NOTEBOOKS, REPO
from . import kept_templates, sandboxed_process
from .cells import ids_of_test_cells, max_score
from .feedback import mathjax_into
from .intake import STUDENT_NAME, SubmissionProblem, class_rows, folder_problem, import_submissions, odd_folder_name
from .lesson_run import GradeOptions, LessonRun, Stopped, lesson_run
from .nbgrader_course import CourseDir, GradingError, student_version
from .one_submission import grade_one, grade_reference, record
from .plan import lesson_plan
from .results import Outcome, merge, write_shard
from .sandbox import SandboxUnavailable, bubblewrap, why_no_sandbox


def _students(course: CourseDir, lesson: str) -> list[str]:
    submitted = course.root / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(p.name for p in submitted.iterdir() if not p.name.startswith(".") and os.path.lexists(p / lesson))


def _take_in(course: CourseDir, lesson: str, submissions: Path | None, progress: bool,
             shard: tuple[int, int] = (0, 1)) -> tuple[dict, dict, list]:
    """(refused {student: reason}, intake notes {student: [notes]}, every student to grade):
    ``submissions`` taken into submitted/ (exactly its students, listed once; shard ``I`` of
    ``N`` takes in only its own, those at positions ``i % N == I``, and the reasons and notes
    are theirs), else the class already there."""
    if submissions:
        try:
            folder_problem(Path(submissions))
            rows = class_rows(Path(submissions))
            refused, intake_notes, _ = import_submissions(course, lesson, Path(submissions), rows[shard[0]::shard[1]])
        except SubmissionProblem as exc:  # not a folder of student folders: bad input, nothing graded
            raise GradingError(str(exc)) from None
        taken = [row for row, _ in rows if row not in refused]   # the other shards' students too
    else:
        refused, intake_notes, taken = {}, {}, None
    present = _students(course, lesson)
    if taken is None:  # the class in submitted/ (nbgrader collect, or earlier --submissions runs)
        for name in present:  # put there by hand rather than by --submissions
            if not STUDENT_NAME.fullmatch(name):
                refused[repr(name)[1:-1]] = odd_folder_name(name)
        return refused, intake_notes, sorted({n for n in present if STUDENT_NAME.fullmatch(n)} | set(refused))
    everyone = sorted(set(taken) | set(refused))  # others in submitted/ keep what they have
    others = len({n for n in present if STUDENT_NAME.fullmatch(n)} - set(everyone))
    if progress:
        print(f"course grade {lesson}: {len(everyone)} student(s) from {submissions}"
              + (f"; {others} other(s) in submitted/ not graded (their grades are kept)" if others else ""),
              file=sys.stderr, flush=True)
    return refused, intake_notes, everyone


def _grade_all(run: LessonRun, todo: list[str], stop: threading.Event, done: dict) -> None:
    """Grade ``todo`` in the run's slots at once (each slot has its own sandbox users); results
    go into ``done`` unless ``stop`` was set meanwhile."""
    free = list(run.slots)
    lock = threading.Lock()

    def job(student: str) -> None:
        if stop.is_set():
            return
        with lock:   # the lowest free slot: slot 0's templates are warm from the plan's run of the reference
            slot = min(free, key=lambda s: s.index)
            free.remove(slot)
        try:
            result = grade_one(student, run, slot)
            if not stop.is_set():
                done[student] = result
        finally:
            with lock:
                free.append(slot)

    with ThreadPoolExecutor(max_workers=len(free)) as pool:
        futures = [pool.submit(job, s) for s in todo]
        for f in tqdm(futures, desc=f"grading {run.lesson}", unit="submission", disable=not run.progress):
            f.result()


STOP_SIGNALS = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT, Ctrl-C"}   # -> how a row names it


def _on_sigterm(stop: threading.Event, received: list) -> dict:
    """In the main thread: SIGTERM or SIGINT (Ctrl-C) stops grading (live sandboxes killed, results
    so far kept); returns the handlers to put back. Each signal is appended to ``received``; once
    ``stop`` is set (grading over, the results being written) a signal only waits there, for the
    caller to deliver once they are written (a second Ctrl-C cannot leave the last run's CSV). The
    sandboxes run in sessions of their own: a Ctrl-C at the grader's terminal reaches the grader alone."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def on_signal(signum, frame):
        received.append(signum)
        if stop.is_set():
            return
        stop.set()
        sandboxed_process.kill_all()  # the running students' kernels end now; their results are dropped
        raise Stopped(signal.Signals(signum).name)

    # a signal this process was started ignoring (a job sent to the background) stays ignored
    return {s: signal.signal(s, on_signal) for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}


def _grade_shard(run: LessonRun, mine: list[str], refused: dict, stop: threading.Event, done: dict) -> None:
    """The lesson's plan (which refuses a reference that misses a point in the checker), then
    this shard's students into ``done``: the reference student from the plan's own run, the
    refused with their reasons, the rest graded in sandbox slots."""
    lesson_plan(run.course.root, run.lesson, run.source_nb, run.blank_nb, lambda facts: grade_reference(run))
    if run.reference_student in mine and run.reference is not None:
        done[run.reference_student] = Outcome(run.reference_student, max_score=run.max_score)
        record(done[run.reference_student], run.reference.nb, run.reference.ex, run)
    done.update({s: Outcome(s, score=float("nan"), status="refused", reasons=[refused[s]], max_score=run.max_score)
                 for s in mine if s in refused})
    _grade_all(run, [s for s in mine if s not in done], stop, done)


def grade_lesson(lesson_dir: Path, course: CourseDir | None = None, **options) -> list[Outcome]:
    """Grade one lesson's submissions (those of shard ``shard[0]`` of ``shard[1]``, by index in
    the sorted list of students); merge when unsharded (or ``merge_after``). ``options`` are
    ``GradeOptions``' fields (submissions, workers, limits, sandbox, progress, feedback, shard,
    merge_after, reference_student). Returns this shard's outcomes, or the merged ones. Raises
    GradingError for a fault of the grader, SandboxUnavailable when ``sandbox`` is asked for and
    cannot be had. The steps: take the submissions in, check the lesson's one judge on its
    reference (``plan``), grade each student in a sandbox slot, write this shard's results,
    merge them into the gradebook and CSV. ``reference_student`` (the build's round trip) names
    a student whose submission is the reference solution: when the plan graded the reference in
    this run, that run is their grade (recorded as any student's) rather than a second run of
    the same notebook."""
    opts = GradeOptions(**options)
    lesson = lesson_dir.name
    course = course or CourseDir(REPO, NOTEBOOKS)
    index, count = opts.shard
    if opts.sandbox and not bubblewrap():
        raise SandboxUnavailable(why_no_sandbox())
    blank_nb = student_version(course, lesson)   # GradingError before anything is taken in
    refused, intake_notes, everyone = _take_in(course, lesson, opts.submissions, opts.progress, opts.shard)
    mine = [s for i, s in enumerate(everyone) if i % count == index]
    run = lesson_run(course, lesson, blank_nb, opts, intake_notes)
    done: dict[str, Outcome] = {}
    stop, received = threading.Event(), []
    previous = _on_sigterm(stop, received)
    try:
        failure = _grade_and_write_shard(run, mine, refused, stop, done)
        merged = None
        if opts.merge_after if opts.merge_after is not None else count == 1:
            if opts.feedback:
                mathjax_into(course.root / "feedback")
            merged = merge(course, lesson, run.cell_ids, run.max_score)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:  # results written: now end as the signal asked (default action or old handler:
        # SIGTERM's ends the process, SIGINT's raises KeyboardInterrupt, which `course grade` ends with 130)
        signal.raise_signal(received[0])
    if failure:
        raise GradingError(f"{failure} (the CSV says which students were not graded)" if merged is not None
                           else failure)
    return merged if merged is not None else [done[s] for s in mine]


def _grade_and_write_shard(run: LessonRun, mine: list[str], refused: dict, stop: threading.Event,
                           done: dict) -> str:
    """``_grade_shard``, then this shard's results written whatever happened: a student not graded
    says why (stopped by a signal, or the grader's fault: returned, "" when none)."""
    complete, failure, stopped_by = False, "", None
    sandboxed_process.STOPPING.clear()
    try:
        _grade_shard(run, mine, refused, stop, done)
        complete = True
    except Stopped as exc:
        sandboxed_process.kill_all()
        stopped_by = signal.Signals[str(exc)]
    except (SandboxUnavailable, GradingError) as exc:  # the grader's own fault: say so in every row
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        stop.set()   # from here a signal waits until the results are written
        if stopped_by is None:   # kept for this process's next run
            for served in [*run.kernels.values(), *run.checkers.values()]:
                kept_templates.take_back(served)
        run.kernels.clear()
        run.checkers.clear()
        sandboxed_process.kill_all(close=True)  # the pool has finished: no thread uses a sandbox any more
        if stopped_by is not None:   # stopped by a signal: the process ends, leaving no template or scratch
            kept_templates.close_all()
        sandboxed_process.STOPPING.clear()
        by = f" ({STOP_SIGNALS[stopped_by]})" if stopped_by else ""   # else a fault that ends the grader
        why = (f"grader error: {failure[:300]}" if failure
               else f"not graded: the grader was stopped{by} before this submission")
        done.update({s: Outcome(s, status="error", score=float("nan"), max_score=run.max_score, reasons=[why])
                     for s in mine if s not in done})
        write_shard(run.out, [done[s] for s in mine], complete)
        shutil.rmtree(run.scratch, ignore_errors=True)
    return failure


def merge_lesson(lesson_dir: Path, course: CourseDir | None = None) -> list[Outcome]:
    """``course grade LESSON --merge``: the shards of the last run into gradebook and CSV."""
    course = course or CourseDir(REPO, NOTEBOOKS)
    lesson = lesson_dir.name
    source_nb = nbformat.read(str(course.source / lesson / f"{GRADED_NOTEBOOK}.ipynb"), as_version=4)
    student_version(course, lesson)  # the gradebook knows the lesson
    mathjax_into(course.root / "feedback")
    return merge(course, lesson, ids_of_test_cells(source_nb), max_score(source_nb))
