"""The whole of ``course grade LESSON``: intake, the lesson's plan, each submission in its own
sandboxes (trusted checker + student kernel), feedback, and the results of one shard; then
(unsharded, or with ``--merge``) the gradebook and one CSV row per student.

Each student is graded on its own: nothing a submission does can stop the others, and the
CSV is written even when the grader is stopped (SIGTERM, or SIGINT: Ctrl-C at its terminal; the
students not yet graded say so), after which it ends as that signal asks.
Scratch folders live under ``build/grading/.scratch-<host>-<random>-<pid>`` (or ``$TMPDIR/course-grade-...``
when that path is too long for Unix sockets) and are removed at the end, when stopped, and (for
a grader that was killed outright) by the next run.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from tqdm import tqdm

from ..paths import GRADED_NOTEBOOK, NOTEBOOKS, REPO
from . import sandboxed_process
from .cells import grade_id, ids_of_test_cells, is_test_cell, max_score, points
from .execute import Execution, Verdict, error_output, execute_submission
from .feedback import feedback_notebook, local_mathjax_url, mathjax_into, render_html, safe_outputs
from .intake import (
    STUDENT_NAME,
    SubmissionProblem,
    class_rows,
    copy_files,
    folder_problem,
    import_submissions,
    inspect_folder,
    notebook_notes,
    odd_folder_name,
    read_timestamp,
)
from .nbgrader_course import CourseDir, GradingError, student_version
from .plan import lesson_facts, lesson_plan, reference_notebook
from .results import Outcome, merge, shard_dir, write_shard
from .sandbox import SLOTS, Limits, SandboxUnavailable, bubblewrap, sandbox_uid, why_no_sandbox
from .submission import lesson_marks, read_submission, refuse_other_lesson, restore_test_cells
from .wire import valid_text


class Stopped(Exception):
    """The grader received SIGTERM or SIGINT."""


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


def _record(outcome: Outcome, nb, ex: Execution, ctx: dict) -> None:
    """One graded run into ``outcome`` (points per test cell, score, notes) and the shard
    folder (graded notebook; feedback page when asked). The score is what the verdicts earned
    whatever becomes of the files (``_write_graded``, ``_write_feedback``): what the student's
    code wrote is the student's, so a file it spoils is never a grader error that would keep an
    earlier score."""
    outcome.reasons += ex.notes
    worth = {grade_id(c): points(c) for c in nb.cells if is_test_cell(c)}
    scores = {g: (p if ex.verdicts.get(g) and ex.verdicts[g].passed else 0.0, p) for g, p in worth.items()}
    outcome.cells = {g: s for g, (s, _) in scores.items()}
    outcome.score = sum(outcome.cells.values())
    _write_graded(outcome, nb, ex, ctx["out"] / "graded" / f"{outcome.student}.ipynb")
    scores = {g: (outcome.cells[g], top) for g, (_, top) in scores.items()}   # 0 if nothing could be written
    if ctx["feedback"]:
        _write_feedback(outcome, nb, ex, scores, ctx)


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


def _write_feedback(outcome: Outcome, nb, ex: Execution, scores: dict, ctx: dict) -> None:
    """The student's feedback page in the shard folder (UTF-8; a character that cannot be, as its
    escape); a page that cannot be made or written is left out, and ``outcome`` says so."""
    page = ctx["out"] / "feedback" / f"{outcome.student}.html"
    try:
        fb = feedback_notebook(nb, ex, scores, (outcome.score, ctx["max_score"]), outcome.reasons, ctx["blank_nb"])
        page.write_text(render_html(fb, local_mathjax_url()), encoding="utf-8", errors="backslashreplace")
    except Exception as exc:  # noqa: BLE001 - the score stands; the reason says the page is missing
        page.unlink(missing_ok=True)
        outcome.reasons.append(f"no feedback page: it could not be written ({type(exc).__name__}: "
                               f"{' '.join(str(exc).split())[:200]})")


def grade_one(student: str, ctx: dict, slot: int) -> Outcome:
    """Grade one student's folder in submitted/; write its graded notebook and feedback page
    into the shard folder. Never raises."""
    start = time.perf_counter()
    outcome = Outcome(student, max_score=ctx["max_score"])   # a shard's own lines show it too
    folder = ctx["course"].root / "submitted" / student / ctx["lesson"]
    try:
        outcome.reasons += ctx.get("intake_notes", {}).get(student, [])
        files = inspect_folder(folder)
        outcome.reasons += notebook_notes(files)  # exercises.ipynb, or the near match named when missing
        nb, notes = read_submission(folder / f"{GRADED_NOTEBOOK}.ipynb")  # metadata checked and reduced
        nb = valid_text(nb)  # its JSON may spell lone surrogates, which no kernel message or file can hold
        outcome.reasons += notes
        refuse_other_lesson(nb, ctx["lesson"], ctx["lesson_marks"])
        nb, notes = restore_test_cells(nb, ctx["source_nb"], ctx["blank_nb"])
        outcome.reasons += notes
        stamp, note = read_timestamp(folder)
        outcome.timestamp = stamp.isoformat() if stamp else ""
        outcome.reasons += [note] if note else []
        uid = sandbox_uid(slot) if ctx["sandbox"] else None
        work = Path(os.path.join(ctx["scratch"], f"sub-{slot}-{os.urandom(4).hex()}"))
        try:
            copy_files(folder, work / "submission", files, uid)
            ex = execute_submission(nb, work / "submission", ctx["limits"], ctx["facts"], slot, ctx["sandbox"],
                                    ctx["scratch"])
        finally:
            shutil.rmtree(work, ignore_errors=True)
        _record(outcome, nb, ex, ctx)
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


def _lesson_context(course: CourseDir, lesson: str, blank_nb, limits: Limits, sandbox: bool, feedback: bool,
                    scratch: Path, out: Path) -> dict:
    """What grading each student of the lesson shares: its source notebook and ``blank_nb``, the
    trusted student version (``student_version``, never ``release/``), what marks each lesson's
    notebook as its own, test cells and maximum score, the limits, and where scratch and results go."""
    source_nb = nbformat.read(str(course.source / lesson / f"{GRADED_NOTEBOOK}.ipynb"), as_version=4)
    return {"course": course, "lesson": lesson, "source_nb": source_nb, "blank_nb": blank_nb,
            "lesson_marks": _lessons_marks(course, lesson, source_nb), "limits": limits,
            "sandbox": sandbox, "scratch": scratch, "out": out, "feedback": feedback,
            "cell_ids": ids_of_test_cells(source_nb), "max_score": max_score(source_nb)}


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


def _reference_runner(ctx: dict):
    """``run_reference(facts)`` for ``plan.lesson_plan``: the reference solution graded in slot 0."""
    course, lesson = ctx["course"], ctx["lesson"]

    def reference(facts):
        ref_dir, source = ctx["scratch"] / "reference", course.source / lesson
        try:
            files = inspect_folder(source)
        except SubmissionProblem:
            files = [(f"{GRADED_NOTEBOOK}.ipynb", (source / f"{GRADED_NOTEBOOK}.ipynb").stat().st_size)]
        copy_files(source, ref_dir, files, sandbox_uid(0) if ctx["sandbox"] else None)
        nb = reference_notebook(ctx["source_nb"], ctx["blank_nb"])
        try:
            ex = execute_submission(nb, ref_dir, ctx["limits"], facts, 0, ctx["sandbox"], ctx["scratch"])
        finally:
            shutil.rmtree(ref_dir, ignore_errors=True)
        ctx["reference_run"] = (nb, ex)
        return ex

    return reference


def _grade_all(ctx: dict, todo: list[str], workers: int, stop: threading.Event, done: dict, progress: bool) -> None:
    """Grade ``todo`` in up to ``workers`` slots at once (each slot has its own sandbox users);
    results go into ``done`` unless ``stop`` was set meanwhile."""
    slots = list(range(min(max(1, workers), SLOTS)))
    lock = threading.Lock()

    def job(student: str) -> None:
        if stop.is_set():
            return
        with lock:
            slot = slots.pop()
        try:
            result = grade_one(student, ctx, slot)
            if not stop.is_set():
                done[student] = result
        finally:
            with lock:
                slots.append(slot)

    with ThreadPoolExecutor(max_workers=len(slots)) as pool:
        futures = [pool.submit(job, s) for s in todo]
        for f in tqdm(futures, desc=f"grading {ctx['lesson']}", unit="submission", disable=not progress):
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


def _grade_shard(ctx: dict, mine: list[str], refused: dict, reference_student: str | None, workers: int,
                 stop: threading.Event, done: dict, progress: bool) -> None:
    """The lesson's plan (which refuses a reference that misses a point in the checker), then
    this shard's students into ``done``: the reference student from the plan's own run, the
    refused with their reasons, the rest graded in sandbox slots."""
    lesson_plan(ctx["course"].root, ctx["lesson"], ctx["source_nb"], ctx["blank_nb"], _reference_runner(ctx))
    ctx["facts"] = lesson_facts(ctx["source_nb"])
    if reference_student in mine and "reference_run" in ctx:
        done[reference_student] = Outcome(reference_student, max_score=ctx["max_score"])
        _record(done[reference_student], *ctx["reference_run"], ctx)
    done.update({s: Outcome(s, score=float("nan"), status="refused", reasons=[refused[s]], max_score=ctx["max_score"])
                 for s in mine if s in refused})
    _grade_all(ctx, [s for s in mine if s not in done], workers, stop, done, progress)


def grade_lesson(lesson_dir: Path, course: CourseDir | None = None, submissions: Path | None = None,
                 workers: int = 1, limits: Limits | None = None, sandbox: bool = True,
                 progress: bool = True, feedback: bool = True, shard: tuple[int, int] = (0, 1),
                 merge_after: bool | None = None, reference_student: str | None = None) -> list[Outcome]:
    """Grade one lesson's submissions (those of shard ``shard[0]`` of ``shard[1]``, by index in
    the sorted list of students); merge when unsharded (or ``merge_after``). Returns this
    shard's outcomes, or the merged ones. Raises GradingError for a fault of the grader,
    SandboxUnavailable when ``sandbox`` is asked for and cannot be had. The steps: take the
    submissions in, check the lesson's one judge on its reference (``plan``), grade each student
    in a sandbox slot, write this shard's results, merge them into the gradebook and CSV.
    ``reference_student`` (the build's round trip) names a student whose submission is the
    reference solution: when the plan graded the reference in this run, that run is their grade
    (recorded as any student's) rather than a second run of the same notebook."""
    lesson = lesson_dir.name
    limits = limits or Limits()
    course = course or CourseDir(REPO, NOTEBOOKS)
    index, count = shard
    if sandbox and not bubblewrap():
        raise SandboxUnavailable(why_no_sandbox())
    blank_nb = student_version(course, lesson)   # GradingError before anything is taken in
    refused, intake_notes, everyone = _take_in(course, lesson, submissions, progress, shard)
    mine = [s for i, s in enumerate(everyone) if i % count == index]
    scratch, out = _shard_folders(course, lesson, index, count)
    ctx = {**_lesson_context(course, lesson, blank_nb, limits, sandbox, feedback, scratch, out),
           "intake_notes": intake_notes}
    done: dict[str, Outcome] = {}
    stop, received = threading.Event(), []
    previous = _on_sigterm(stop, received)
    try:
        failure = _grade_and_write_shard(ctx, mine, refused, reference_student, workers, stop, done, progress)
        merged = None
        if merge_after if merge_after is not None else count == 1:
            if feedback:
                mathjax_into(course.root / "feedback")
            merged = merge(course, lesson, ctx["cell_ids"], ctx["max_score"])
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


def _grade_and_write_shard(ctx: dict, mine: list[str], refused: dict, reference_student: str | None, workers: int,
                           stop: threading.Event, done: dict, progress: bool) -> str:
    """``_grade_shard``, then this shard's results written whatever happened: a student not graded
    says why (stopped by a signal, or the grader's fault: returned, "" when none)."""
    complete, failure, stopped_by = False, "", None
    sandboxed_process.STOPPING.clear()
    try:
        _grade_shard(ctx, mine, refused, reference_student, workers, stop, done, progress)
        complete = True
    except Stopped as exc:
        sandboxed_process.kill_all()
        stopped_by = signal.Signals[str(exc)]
    except (SandboxUnavailable, GradingError) as exc:  # the grader's own fault: say so in every row
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        stop.set()   # from here a signal waits until the results are written
        sandboxed_process.kill_all(close=True)  # the pool has finished: no thread uses a sandbox any more
        sandboxed_process.STOPPING.clear()
        by = f" ({STOP_SIGNALS[stopped_by]})" if stopped_by else ""   # else a fault that ends the grader
        why = (f"grader error: {failure[:300]}" if failure
               else f"not graded: the grader was stopped{by} before this submission")
        done.update({s: Outcome(s, status="error", score=float("nan"), max_score=ctx["max_score"], reasons=[why])
                     for s in mine if s not in done})
        write_shard(ctx["out"], [done[s] for s in mine], complete)
        shutil.rmtree(ctx["scratch"], ignore_errors=True)
    return failure


def merge_lesson(lesson_dir: Path, course: CourseDir | None = None) -> list[Outcome]:
    """``course grade LESSON --merge``: the shards of the last run into gradebook and CSV."""
    course = course or CourseDir(REPO, NOTEBOOKS)
    lesson = lesson_dir.name
    source_nb = nbformat.read(str(course.source / lesson / f"{GRADED_NOTEBOOK}.ipynb"), as_version=4)
    student_version(course, lesson)  # the gradebook knows the lesson
    mathjax_into(course.root / "feedback")
    return merge(course, lesson, ids_of_test_cells(source_nb), max_score(source_nb))
