"""Step 7 of grading: results. Each shard of a class writes its students' outcomes, graded
notebooks and feedback pages into ``build/grading/<lesson>/shards/<I>-of-<N>/``; the merge reads
every shard of one run and writes, per student, the gradebook entry (nbgrader's own
``SaveAutoGrades``, so manual grades survive), ``autograded/<student>/<lesson>/``,
``feedback/<student>/<lesson>/exercises.html``, and then one CSV for the class.

A student whose new submission was refused (not a notebook, a link, a missing or renamed
file, ...) has no score afterwards, in the gradebook (an earlier score is removed, never shown
as new) or in the CSV, whose reason says why. A student the grader could not grade (its own
fault, or it was stopped) keeps whatever the gradebook held: the CSV shows no score and says
which one the gradebook keeps. A score in the CSV is always the one the gradebook holds. Nothing is half written:
the gradebook is updated in a copy (the live one locked against other writers meanwhile) that
replaces it in one rename, and the CSV is written to a temporary file renamed in place. A
student whose grades the gradebook refuses gets a grader error in their row, the others are
recorded; a merge that fails as a whole, or is stopped (SIGTERM) before the copy is in place,
leaves the gradebook as it was and a CSV that says nobody was recorded (never the old scores),
and keeps the shards for ``course grade LESSON --merge``. The new CSV is written in full (to its
temporary file) before the gradebook copy replaces the live one, and renamed right after it, so
a CSV that cannot be written leaves both as they were. A student graded whose graded notebook
could not be written (``grade._record`` says why) is recorded with 0. Text is written as UTF-8,
any character that cannot be (a lone surrogate) as its ``\\ud800`` escape, so no student text can
make a write fail. A process that kept a gradebook
connection open across the merge writes to the replaced file: run the formgrader after it.
CSV cells a spreadsheet would run as a formula (leading ``= + - @``, tab, carriage return)
get a leading ``'`` (OWASP's rule for CSV injection).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import shutil
import signal
import sqlite3
import stat
import threading
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from ..paths import GRADED_NOTEBOOK
from .intake import STUDENT_NAME
from .nbgrader_course import CourseDir, GradingError
from .utf8 import valid_text


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
        """The reasons as one line of valid UTF-8 (a CSV row, a terminal line per student)."""
        if self.reasons:
            return valid_text(" ".join("; ".join(self.reasons).split()))
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
    """SIGTERM and SIGINT wait until the block is done (main thread only); the block gets the
    list of signals received meanwhile, to stop early if it can."""
    pending: list = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    old = {s: signal.signal(s, lambda n, f: pending.append(n)) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield pending
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for s in pending:
            signal.raise_signal(s)


def save_grades(course: CourseDir, lesson: str, student: str, graded_nb, timestamp) -> None:
    """The student's test results into the gradebook, as ``nbgrader autograde`` would; with
    ``graded_nb`` None, a submission without results (every test cell 0)."""
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
    if graded_nb is None:
        return
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


def earlier_score(course: CourseDir, lesson: str, student: str) -> tuple[float, str] | None:
    """(score, submission time) the gradebook holds for the student's lesson, or None."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(course.db_url) as gb:
        try:
            sub = gb.find_submission(lesson, student)
        except MissingEntry:
            return None
        return float(sub.score), f"{sub.timestamp:%Y-%m-%d %H:%M} UTC" if sub.timestamp else "at an unknown time"


def read_scores(course: CourseDir, lesson: str, student: str) -> tuple[float, float, dict]:
    """(score, max score, {grade_id: points}) from the gradebook (manual grades included)."""
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        sub = gb.find_submission_notebook(GRADED_NOTEBOOK, lesson, student)
        cells = {g.name: float(g.score) for g in sub.grades}
        return float(sub.score), float(sub.max_score), cells


class _Stopped(Exception):
    """A signal arrived while the gradebook copy was being written."""


def merge(course: CourseDir, lesson: str, cell_ids: list[str], max_score: float) -> list[Outcome]:
    """Merge every shard of the last run of ``lesson`` (see the module docstring). Raises
    GradingError, after writing a CSV that says so, when the merge fails as a whole."""
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
    entries = []
    for folder in folders:
        for data in json.loads((folder / "outcomes.json").read_text())["outcomes"]:
            o = Outcome(**data)
            o.max_score = max_score
            entries.append((o, folder))
    entries.sort(key=lambda e: e[0].student)
    csv_path = course.root / "build" / f"grades_{lesson}.csv"
    outcomes, staged = [o for o, _ in entries], []
    with held_signals() as pending:
        try:   # the CSV written in full before the gradebook copy replaces the live one
            _record_gradebook(course, lesson, entries, pending,
                              lambda: staged.append(_staged_csv(csv_path, outcomes, cell_ids)))
        except BaseException as exc:  # noqa: BLE001 - nobody recorded: the CSV says so, never old scores
            for tmp in staged:
                tmp.unlink(missing_ok=True)
            # raises GradingError, unless stopped: then leaving held_signals ends the process as the signal asks
            return _failed_merge(csv_path, lesson, entries, cell_ids, max_score, exc)
        _csv_in_place(staged[0], csv_path, lesson)
        unwritten = _copy_pages(course, lesson, entries)
        if unwritten:  # their rows say which files are missing (the scores are those just written)
            try:
                write_grades_csv(csv_path, outcomes, cell_ids)
            except OSError:
                unwritten.append("(nor the CSV's rows saying so)")
    if unwritten:
        raise GradingError(f"graded copies or feedback pages of {', '.join(unwritten[:5])} could not be written "
                           "(the gradebook and CSV are written; see their rows)")
    shutil.rmtree(root, ignore_errors=True)
    return outcomes


def _failed_merge(csv_path: Path, lesson: str, entries: list, cell_ids: list[str], max_score: float,
                  exc: BaseException) -> list[Outcome]:
    """The rows of a merge that recorded nobody (the gradebook unchanged), written as the CSV;
    raises GradingError saying why unless ``exc`` is _Stopped. When even that CSV cannot be
    written, the previous one stays (it agrees with the unchanged gradebook) and the error says so."""
    why = ("the grader was stopped during the merge" if isinstance(exc, _Stopped)
           else f"the merge failed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})")
    rows = [Outcome(o.student, score=float("nan"), max_score=max_score, seconds=o.seconds, status="error",
                    reasons=[(f"not recorded: {why}; the gradebook is unchanged; run course grade {lesson} "
                              "--merge again")]) for o, _ in entries]
    try:
        write_grades_csv(csv_path, rows, cell_ids)
    except OSError as csv_exc:
        why += f"; {csv_path} could not be written either ({csv_exc.strerror or csv_exc}): it is the previous run's"
    if isinstance(exc, _Stopped):
        return rows
    raise GradingError(valid_text(f"merge of {lesson} failed, nothing recorded: {why}")) from exc


def _csv_in_place(staged: Path, csv_path: Path, lesson: str) -> None:
    """The staged CSV renamed over the class's CSV, right after the gradebook's rename."""
    try:
        staged.replace(csv_path)
    except OSError as exc:
        staged.unlink(missing_ok=True)
        raise GradingError(f"the gradebook is recorded, but {csv_path} could not be replaced ({exc.strerror or exc}); "
                           f"run course grade {lesson} --merge again") from exc


def _record_gradebook(course: CourseDir, lesson: str, entries: list, pending: list, before_replace=None) -> None:
    """Every student's result into a copy of the gradebook, then ``before_replace()`` (which may
    raise: the live gradebook stays as it was), then the copy in place of the live one (one
    rename). The live gradebook is locked against other writers from the copy to the rename;
    raises _Stopped, leaving it untouched, when ``pending`` receives a signal first."""
    live = course.root / "gradebook.db"
    course.settings()  # a course without a gradebook gets an empty one first
    for old in live.parent.glob("gradebook.db.merge-*.tmp"):  # left by a merge killed outright
        pid = old.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            old.unlink(missing_ok=True)
    work = live.with_name(f"gradebook.db.merge-{os.getpid()}-{os.urandom(3).hex()}.tmp")
    lock = sqlite3.connect(live, timeout=60, isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")  # readers go on reading the old gradebook; writers wait
        source, target = sqlite3.connect(live, timeout=60), sqlite3.connect(work)
        try:  # a reader of its own: a backup from the locking connection itself waits forever
            source.backup(target)
        finally:
            source.close()
            target.close()
        copy = dataclasses.replace(course, gradebook=work)
        for o, folder in entries:
            if pending:
                raise _Stopped()
            _record_student(copy, lesson, o, folder)
        if before_replace is not None:
            before_replace()
        if pending:
            raise _Stopped()
        mode = os.stat(live)
        os.chmod(work, stat.S_IMODE(mode.st_mode))
        if os.geteuid() == 0:
            os.chown(work, mode.st_uid, mode.st_gid)
        os.replace(work, live)
    finally:
        lock.close()
        work.unlink(missing_ok=True)


def _record_student(book: CourseDir, lesson: str, o: Outcome, folder: Path) -> None:
    """One student's result (``o``, its shard's ``folder``) into the gradebook of ``book``, and
    ``o``'s score made what the gradebook holds: a graded notebook's scores (0 without one: it
    could not be written, and its reason says why); none for a refused submission; for a student
    the grader failed, the earlier score is kept and the row says so. A folder whose name is no
    student id (refused) never reaches the gradebook."""
    from nbgrader.utils import parse_utc

    if not STUDENT_NAME.fullmatch(o.student):
        o.score, o.cells = (float("nan"), {}) if o.status == "refused" else (o.score, o.cells)
        return
    if o.status == "graded":
        graded = folder / "graded" / f"{o.student}.ipynb"
        try:
            nb = nbformat.read(str(graded), as_version=4) if graded.exists() else None
            if nb is None:
                drop_grades(book, lesson, o.student)
            save_grades(book, lesson, o.student, nb, parse_utc(o.timestamp) if o.timestamp else None)
            o.score, o.max_score, o.cells = read_scores(book, lesson, o.student)
        except Exception as exc:  # noqa: BLE001 - this student's row says so; the others are recorded
            o.status, o.score, o.cells = "error", float("nan"), {}
            o.reasons.append(f"grader error: the gradebook refused the grades ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:200]}); it holds no score for this lesson")
            drop_grades(book, lesson, o.student)  # whatever half of it was written goes
        return
    if o.status == "refused":  # the new submission has no score: nor has the gradebook
        drop_grades(book, lesson, o.student)
        o.score, o.cells = float("nan"), {}
    else:  # not graded, for the grader's reason: an earlier score stays, and the row says so
        o.score, o.cells = float("nan"), {}
        kept = earlier_score(book, lesson, o.student)
        o.reasons.append(f"the gradebook keeps the earlier score {kept[0]:g} (submitted {kept[1]})" if kept
                         else "the gradebook holds no score for this lesson")


def _copy_pages(course: CourseDir, lesson: str, entries: list) -> list[str]:
    """Each student's graded notebook into ``autograded/`` and feedback page into ``feedback/``
    (an old page is removed); the students whose files could not be written (their rows say so)."""
    unwritten = []
    for o, folder in entries:
        if not STUDENT_NAME.fullmatch(o.student) or o.status == "error":
            continue  # not graded this time: the pages of the score the gradebook keeps stay
        try:
            graded = folder / "graded" / f"{o.student}.ipynb"
            if o.status == "graded" and graded.exists():
                target = course.root / "autograded" / o.student / lesson
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(graded, target / f"{GRADED_NOTEBOOK}.ipynb")
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
                _feedback_release_files(target, o)
        except OSError as exc:
            unwritten.append(o.student)
            o.reasons.append(f"grader error: graded copy or feedback page not written ({exc.strerror or exc})")
    return unwritten


def _feedback_release_files(target: Path, o: Outcome) -> None:
    """The two files ``nbgrader release_feedback`` reads beside every page, for a student graded
    from a folder (``--submissions``) rather than the exchange: it stops at the first page without
    them, and the exchange students after it got no feedback. Such a student never submitted
    through the exchange, so no secret of theirs exists: a fresh random one files the page under
    a name no one can fetch (hand these students their page yourself)."""
    if not (target / "timestamp.txt").exists():
        (target / "timestamp.txt").write_text(o.timestamp.replace("T", " ") + " UTC" if o.timestamp else
                                              "1970-01-01 00:00:00.000000 UTC")
    if not (target / "submission_secret.txt").exists():
        (target / "submission_secret.txt").write_text(os.urandom(16).hex())


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"-?\d+(\.\d*)?(e[+-]?\d+)?|-?inf|nan")


def csv_cell(value) -> str:
    """``value`` as CSV text a spreadsheet shows and never runs: text that starts like a formula
    (``= + - @``, tab, carriage return) gets a leading ``'`` (OWASP); plain numbers stay."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) and not NUMBER.fullmatch(text) else text


def write_grades_csv(path: Path, outcomes: list[Outcome], cell_ids: list[str] = ()) -> Path:
    """student, score, max_score, seconds, reason, then the points of each test cell: written to a
    temporary file renamed in place (``_staged_csv``)."""
    tmp = _staged_csv(path, outcomes, cell_ids)
    try:
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _staged_csv(path: Path, outcomes: list[Outcome], cell_ids: list[str]) -> Path:
    """The CSV of ``outcomes`` written in full, as UTF-8 (a character that cannot be, as its
    ``\\ud800`` escape) and synced, to a temporary file beside ``path``; that file's path.
    Nothing is left behind when writing fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{os.urandom(3).hex()}.tmp")
    try:
        with tmp.open("w", newline="", encoding="utf-8", errors="backslashreplace") as fh:
            writer = csv.writer(fh)
            writer.writerow([csv_cell(c) for c in ["student", "score", "max_score", "seconds", "reason", *cell_ids]])
            for o in outcomes:
                row = [o.student, "" if o.score != o.score else f"{o.score:g}", f"{o.max_score:g}", f"{o.seconds:g}",
                       o.reason, *(f"{o.cells[c]:g}" if c in o.cells else "" for c in cell_ids)]
                writer.writerow([csv_cell(c) for c in row])
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp
