"""Grading past one machine and past a crash (issue 16): two shards merged equal one run; a
re-grade never shows an old score; SIGTERM, and Ctrl-C at `course grade`'s terminal (issue 39),
leave a CSV that says what happened, a consistent gradebook and no scratch files. Lesson 01,
three kinds of submission."""
import copy
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from scratch_course import scratch_course

from course_tools.grading import sandbox
from course_tools.grading.grade import grade_lesson, merge_lesson
from course_tools.grading.nbgrader_course import CourseDir
from course_tools.grading.sandbox import Limits
from course_tools.paths import REPO

LESSON = "01_hardware_foundations"
LIMITS = Limits(memory_bytes=2**30, processes=64, cell_seconds=30, notebook_seconds=200)
pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())]


def _course(root: Path, students: dict) -> CourseDir:
    """A scratch course of the frozen lesson 01 (this tests the grader) whose ``incoming`` holds
    ``students`` ({student: "honest", "blank" or "half"}). It starts with the lesson plan of this
    process's latest scratch course (``scratch_course``), as a class's second run finds its first's:
    the reference is graded once per process, not by every course of this module."""
    course, source = scratch_course(root, LESSON)
    src = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    blank = nbformat.read(str(root / "release" / LESSON / "exercises.ipynb"), as_version=4)
    honest = copy.deepcopy(blank)
    for a, b in zip(honest.cells, src.cells):
        if b.metadata.get("nbgrader", {}).get("solution"):
            a.source = b.source
    half = copy.deepcopy(honest)
    for c in half.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") in ("ex3_roofline", "ex4_lines"):
            c.source = c.source.replace("return", "return None and")
    kinds = {"honest": honest, "blank": blank, "half": half}
    for student, kind in students.items():
        folder = root / "incoming" / student
        folder.mkdir(parents=True)
        nbformat.write(kinds[kind], str(folder / "exercises.ipynb"))
    return course


def _rows(course):
    with open(course.root / "build" / f"grades_{LESSON}.csv") as fh:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(fh)]


def _gradebook(course):
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        return {s.student.id: (s.score, s.max_score) for s in gb.find_assignment(LESSON).submissions}


STUDENTS = {"ann": "honest", "bob": "blank", "cid": "half", "dee": "honest", "eve": "half"}


def test_two_shards_merged_equal_one_run(tmp_path):
    one = _course(tmp_path / "one", STUDENTS)
    grade_lesson(one.source / LESSON, course=one, submissions=one.root / "incoming", limits=LIMITS,
                 progress=False, feedback=False)
    two = _course(tmp_path / "two", STUDENTS)
    for index in (1, 0):  # any order; each shard alone writes no CSV and no gradebook entry
        part = grade_lesson(two.source / LESSON, course=two, submissions=two.root / "incoming", limits=LIMITS,
                            progress=False, feedback=False, shard=(index, 2))
        assert len(part) in (2, 3)
        assert not (two.root / "build" / f"grades_{LESSON}.csv").exists()
    merged = merge_lesson(two.source / LESSON, course=two)
    assert [o.student for o in merged] == sorted(STUDENTS)
    assert _rows(two) == _rows(one)
    assert _gradebook(two) == _gradebook(one)
    scores = {r["student"]: float(r["score"]) for r in _rows(one)}
    assert scores["ann"] == 14 and scores["bob"] == 0 and 0 < scores["cid"] < 14


def test_merge_refuses_missing_shards(tmp_path):
    from course_tools.grading.nbgrader_course import GradingError

    course = _course(tmp_path, {"ann": "honest", "bob": "blank"})
    grade_lesson(course.source / LESSON, course=course, submissions=course.root / "incoming", limits=LIMITS,
                 progress=False, feedback=False, shard=(0, 2))
    with pytest.raises(GradingError, match="1-of-2"):
        merge_lesson(course.source / LESSON, course=course)


def test_regrade_never_shows_an_old_score(tmp_path):
    course = _course(tmp_path, {"ann": "honest", "bob": "blank"})
    first = {o.student: o.score for o in grade_lesson(course.source / LESSON, course=course, limits=LIMITS,
                                                      submissions=course.root / "incoming", progress=False)}
    assert first == {"ann": 14.0, "bob": 0.0}
    folder = course.root / "incoming" / "ann"  # ann's new submission is a link to someone's notebook
    (folder / "exercises.ipynb").unlink()
    os.symlink(course.source / LESSON / "exercises.ipynb", folder / "exercises.ipynb")
    again = {o.student: o for o in grade_lesson(course.source / LESSON, course=course, limits=LIMITS,
                                                submissions=course.root / "incoming", progress=False)}
    assert again["ann"].status == "refused" and again["ann"].score != again["ann"].score   # no score (NaN)
    assert "symbolic link" in again["ann"].reason
    assert "ann" not in _gradebook(course)
    assert not (course.root / "feedback" / "ann" / LESSON).exists()
    row = next(r for r in _rows(course) if r["student"] == "ann")
    assert row["score"] == "" and "symbolic link" in row["reason"]   # no score in the CSV either


SCRIPT = """
import sys
from pathlib import Path
from course_tools.grading.nbgrader_course import CourseDir
from course_tools.grading.grade import grade_lesson
from course_tools.grading.sandbox import Limits
root = Path(sys.argv[1])
course = CourseDir(root, root / "source")
grade_lesson(course.source / "{lesson}", course=course, submissions=root / "incoming", progress=False,
             limits=Limits(memory_bytes=2**30, processes=64, cell_seconds=30, notebook_seconds=200))
"""


def test_sigterm_leaves_a_true_csv_a_consistent_gradebook_and_no_scratch(tmp_path):
    students = {f"s{i}": "honest" for i in range(8)}
    course = _course(tmp_path, students)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(lesson=LESSON), str(course.root)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pages = course.root / "build" / "grading" / LESSON / "shards" / "0-of-1" / "feedback"
    deadline = time.monotonic() + 300  # a student's page is its last step: the first is done for sure
    while not (pages.exists() and len(list(pages.glob("*.html"))) >= 2) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    rows = _rows(course)
    assert [r["student"] for r in rows] == sorted(students), err.decode()[-2000:]
    stopped = [r for r in rows if "stopped (SIGTERM)" in r["reason"]]
    graded = [r for r in rows if r["reason"] == "graded normally"]
    assert stopped and graded and len(stopped) + len(graded) == len(rows), rows
    assert all(r["score"] == "14" for r in graded) and all(r["score"] == "" for r in stopped)
    book = _gradebook(course)
    assert set(book) == {r["student"] for r in graded}
    assert all(score == 14 for score, _ in book.values())
    assert not list((course.root / "build" / "grading").glob(".scratch-*"))
    assert not list(Path("/tmp").glob(f"course-grade-*-{proc.pid}"))
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _is_ours(p, course.root)]


def _is_ours(proc_dir: Path, root: Path) -> bool:
    try:
        return str(root).encode() in (proc_dir / "cmdline").read_bytes()
    except OSError:
        return False


COURSE_GRADE = """
import signal
import sys
from pathlib import Path
from course_tools import cli, grade_command, paths
from course_tools.grading import grade
signal.signal(signal.SIGINT, signal.default_int_handler)   # as a shell gives its foreground job
root = Path(sys.argv[1])
for module, name, value in ((paths, "NOTEBOOKS", root / "source"), (grade_command, "NOTEBOOKS", root / "source"),
                            (grade_command, "REPO", root), (grade_command, "BUILD", root / "build"),
                            (cli, "REPO", root), (cli, "RELEASE", root / "release"), (cli, "BUILD", root / "build"),
                            (grade, "REPO", root), (grade, "NOTEBOOKS", root / "source")):
    setattr(module, name, value)
sys.exit(cli.main(["grade", "01", "--submissions", str(root / "incoming"), "--cell-timeout", "30",
                   "--notebook-timeout", "200", "--memory-gib", "1"]))
"""


def test_ctrl_c_at_the_graders_terminal_leaves_a_true_csv_and_exits_130(tmp_path):
    """`course grade 01` in a terminal of its own (session and process group, as a shell's
    foreground job), Ctrl-C once the first student is graded: SIGINT goes to the whole group.
    The previous run's CSV said "graded normally" for everyone; the new one says who was not
    graded, and the command ends with one line and 130, as Ctrl-C asks."""
    students = {f"s{i}": "honest" for i in range(6)}
    course = _course(tmp_path, students)
    csv_file = course.root / "build" / f"grades_{LESSON}.csv"
    csv_file.parent.mkdir(parents=True, exist_ok=True)
    csv_file.write_text("student,score,max_score,seconds,reason\n"
                        + "".join(f"{s},14,14,1.0,graded normally\n" for s in students))   # the last run's
    proc = subprocess.Popen([sys.executable, "-c", COURSE_GRADE, str(course.root)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    pages = course.root / "build" / "grading" / LESSON / "shards" / "0-of-1" / "feedback"
    deadline = time.monotonic() + 300  # a student's page is its last step: the first is done for sure
    while not (pages.exists() and any(pages.glob("*.html"))) and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)   # what the terminal does on Ctrl-C
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1] == (f"course grade: interrupted (Ctrl-C); build/grades_{LESSON}.csv "
                                            "says which students were not graded"), err[-2000:]
    assert "Traceback" not in err
    rows = _rows(course)
    assert [r["student"] for r in rows] == sorted(students)
    stopped = [r for r in rows if r["reason"].startswith("not graded: the grader was stopped (SIGINT, Ctrl-C) "
                                                         "before this submission")]
    graded = [r for r in rows if r["reason"] == "graded normally"]
    assert stopped and graded and len(stopped) + len(graded) == len(rows), rows
    assert all(r["score"] == "14" for r in graded) and all(r["score"] == "" for r in stopped)
    assert set(_gradebook(course)) == {r["student"] for r in graded}
    assert not list((course.root / "build" / "grading").glob(".scratch-*"))
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _is_ours(p, course.root)]
