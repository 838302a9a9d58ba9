"""A grader's command lines (issue 30), run through the real `course grade` (``cli.main``) on a
scratch course holding lesson 00 (max 10), in the order a grader might type them:

1. ``course grade 00``: the class ``nbgrader collect`` brought into ``submitted/`` (alice, with
   the exchange's timestamp.txt and submission_secret.txt);
2. ``course grade 00 --submissions incoming``: exactly that folder's students (bob answers,
   carl's notebook is broken JSON, dora's browser saved ``Exercises (1).ipynb``, erin's folder
   has no notebook), and it says that alice, collected earlier, is not graded: refused students
   have no score in the CSV and none in the gradebook, with the reason, and every score in the
   CSV is the gradebook's;
3. nonsensical limits (``--cell-timeout -1``, ``0``, ``--notebook-timeout 0``) and a lone
   notebook or one student's folder as ``--submissions`` are refused with one line, exit 1, and
   the gradebook and CSV untouched;
4. a run in which the grader fails for every student keeps every earlier score;
5. ``nbgrader release_feedback`` releases alice's page although bob, graded from a folder, has
   no exchange secret (it stopped at the first such student before).
Skipped where bubblewrap cannot run.
"""
import csv
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from course_tools import cli, grade_command, paths
from course_tools.grading import grade as grade_mod
from course_tools.grading import one_submission, sandbox

LESSON = "00_setup"
FULL = 10.0
pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())]
EXCHANGE_STAMP = "2026-01-02 03:04:05.000006 UTC"
LIMITS = ["--cell-timeout", "60", "--notebook-timeout", "300", "--memory-gib", "2", "--no-feedback"]


def _answered(source: Path, blank: Path):
    """The student version with the reference answers typed into its solution cells."""
    src, nb = nbformat.read(str(source), as_version=4), nbformat.read(str(blank), as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in src.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            c.source = "\n".join(ln for ln in answers[gid].splitlines() if "### " not in ln) + "\n"
    return nb


def _csv(root: Path) -> dict:
    with open(root / "build" / f"grades_{LESSON}.csv", newline="") as fh:
        return {row["student"]: row for row in csv.DictReader(fh)}


def _book(root: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {s.student.id: float(s.score) for s in gb.find_assignment(LESSON).submissions}


def _agree(root: Path) -> None:
    """Every CSV row's score is the gradebook's; an empty one means the gradebook has none for this
    run's student, or (a grader fault) the row names the score the gradebook keeps."""
    book = _book(root)
    for student, row in _csv(root).items():
        if row["score"]:
            assert book.get(student) == float(row["score"]), (student, row, book)
        elif "keeps the earlier score" in row["reason"]:
            assert f"keeps the earlier score {book[student]:g}" in row["reason"], (student, row, book)
        else:
            assert student not in book and row["reason"], (student, row, book)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(paths.NOTEBOOKS / LESSON, root / "notebooks" / LESSON)
    shutil.copyfile(paths.REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    mp = pytest.MonkeyPatch()
    for module, name, value in ((paths, "NOTEBOOKS", root / "notebooks"),
                                (grade_command, "NOTEBOOKS", root / "notebooks"),
                                (grade_command, "REPO", root), (grade_command, "BUILD", root / "build"),
                                (cli, "REPO", root), (cli, "RELEASE", root / "release"), (cli, "BUILD", root / "build"),
                                (grade_mod, "REPO", root), (grade_mod, "NOTEBOOKS", root / "notebooks")):
        mp.setattr(module, name, value)
    cwd = os.getcwd()
    private_tmp = Path(tempfile.mkdtemp(prefix="cgc-"))   # short: kernel sockets live there
    old_tempdir, tempfile.tempdir = tempfile.tempdir, str(private_tmp)
    try:
        assert cli.main(["release", LESSON[:2]]) == 0
        answered = _answered(root / "notebooks" / LESSON / "exercises.ipynb",
                             root / "release" / LESSON / "exercises.ipynb")
        collected = root / "submitted" / "alice" / LESSON   # as `nbgrader collect` leaves it
        collected.mkdir(parents=True)
        nbformat.write(answered, str(collected / "exercises.ipynb"))
        (collected / "timestamp.txt").write_text(EXCHANGE_STAMP)
        (collected / "submission_secret.txt").write_text("alice-secret-from-the-exchange")
        incoming = root / "incoming"
        for student in ("bob", "carl", "dora", "erin"):
            (incoming / student).mkdir(parents=True)
        nbformat.write(answered, str(incoming / "bob" / "exercises.ipynb"))
        (incoming / "carl" / "exercises.ipynb").write_text('{"cells": [')
        nbformat.write(answered, str(incoming / "dora" / "Exercises (1).ipynb"))
        (incoming / "erin" / "notes.txt").write_text("I forgot the notebook")
        yield {"root": root, "incoming": incoming, "mp": mp}
    finally:
        tempfile.tempdir = old_tempdir
        shutil.rmtree(private_tmp, ignore_errors=True)
        os.chdir(cwd)
        mp.undo()


def _grade(capsys, *args) -> tuple[int, str, str]:
    rc = cli.main(["grade", LESSON[:2], *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_graders_evening(course, capsys):
    root, incoming = course["root"], course["incoming"]
    # 1. the exchange's class
    rc, out, err = _grade(capsys, *LIMITS)
    assert rc == 0, out + err
    assert _csv(root)["alice"]["score"] == "10" and _book(root) == {"alice": FULL}
    _agree(root)
    # 2. a folder of submissions: exactly its students, and it says so
    rc, out, err = _grade(capsys, "--submissions", str(incoming), *LIMITS)
    assert rc == 0, out + err   # refused submissions are processed, not grader faults
    assert f"4 student(s) from {incoming}; 1 other(s) in submitted/ not graded (their grades are kept)" in err
    rows = _csv(root)
    assert sorted(rows) == ["bob", "carl", "dora", "erin"]
    assert rows["bob"]["score"] == "10"
    assert rows["carl"]["score"] == "" and "not valid JSON" in rows["carl"]["reason"]
    assert rows["dora"]["score"] == "" and "Exercises (1).ipynb" in rows["dora"]["reason"]
    assert rows["erin"]["score"] == "" and "missing file exercises.ipynb" in rows["erin"]["reason"]
    assert _book(root) == {"alice": FULL, "bob": FULL}
    _agree(root)
    assert "none / 10" in out and "error" not in out
    # 3. what a grader may mistype: one line each, nothing touched
    before = (root / "gradebook.db").read_bytes(), (root / "build" / f"grades_{LESSON}.csv").read_bytes()
    for args, words in ((["--cell-timeout", "-1"], "--cell-timeout -1: give seconds from 1 to 86400 (nbgrader's -1"),
                        (["--cell-timeout", "0"], "--cell-timeout 0: give seconds"),
                        (["--notebook-timeout", "0"], "--notebook-timeout 0: give seconds"),
                        (["--submissions", str(incoming / "bob")], "holds exercises.ipynb itself"),
                        (["--submissions", str(incoming / "bob" / "exercises.ipynb")], "is a file, not a folder")):
        rc, out, err = _grade(capsys, *args)
        lines = err.strip().splitlines()
        assert rc == 1 and len(lines) == 1 and words in lines[0] and lines[0].startswith("course grade:"), (args, err)
        assert "Traceback" not in err and out == ""
    assert ((root / "gradebook.db").read_bytes(), (root / "build" / f"grades_{LESSON}.csv").read_bytes()) == before


def test_a_failing_grader_keeps_every_earlier_score(course, capsys):
    root = course["root"]
    before = _book(root)
    assert before == {"alice": FULL, "bob": FULL}

    def broken(*args, **kwargs):
        raise RuntimeError("the sandbox fell over")

    working = one_submission.execute_submission
    course["mp"].setattr(one_submission, "execute_submission", broken)
    try:   # the whole class in submitted/: alice, bob, and carl, dora and erin, whose folders were taken in
        rc, out, err = _grade(capsys, *LIMITS)
    finally:
        course["mp"].setattr(one_submission, "execute_submission", working)
    assert rc == 1, out + err
    rows = _csv(root)
    assert sorted(rows) == ["alice", "bob", "carl", "dora", "erin"]
    for student in ("alice", "bob"):
        assert rows[student]["score"] == "" and "grader error: RuntimeError" in rows[student]["reason"]
        assert "the gradebook keeps the earlier score 10" in rows[student]["reason"], rows[student]
    assert rows["carl"]["score"] == "" and "not valid JSON" in rows["carl"]["reason"]
    assert _book(root) == before
    _agree(root)


def test_feedback_release_for_a_class_graded_from_folder_and_exchange(course, capsys, tmp_path):
    root = course["root"]
    # pages for both: alice from the exchange, bob from a folder (feedback on this time)
    rc, out, err = _grade(capsys, *[a for a in LIMITS if a != "--no-feedback"])
    assert rc == 0, out + err
    assert (root / "feedback" / "alice" / LESSON / "exercises.html").is_file()
    assert (root / "feedback" / "bob" / LESSON / "exercises.html").is_file()
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    done = subprocess.run([sys.executable, "-m", "nbgrader", "release_feedback", LESSON,
                           f"--Exchange.root={exchange}", "--CourseDirectory.course_id=gpu101",
                           f"--CourseDirectory.root={root}"], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    from nbgrader.utils import notebook_hash

    released = exchange / "gpu101" / "feedback"
    alice = released / f"{notebook_hash(secret='alice-secret-from-the-exchange', notebook_id='exercises')}.html"
    assert alice.is_file(), (sorted(p.name for p in released.iterdir()), done.stderr[-2000:])
    page = (root / "feedback" / "alice" / LESSON / "exercises.html").read_bytes()
    assert hashlib.sha256(alice.read_bytes()).digest() == hashlib.sha256(page).digest()
    assert len(list(released.glob("*.html"))) == 2   # bob's under a secret no one holds
