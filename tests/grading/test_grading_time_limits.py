"""The per-cell time limit bounds the student's code, not the lesson's own opening cells.

A grading machine loaded by a whole class (or a test suite) can take longer than the per-cell
limit to import the course's libraries; the import cell is the instructor's, read-only and run
before any of the student's functions exist, so a slow one must not fail a submission. Only the
notebook's time bounds those cells; the student's cells keep the per-cell limit.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import nbformat

from course_tools.grading import sandbox
from course_tools.grading.execute import execute_submission
from course_tools.grading.plan import lesson_facts
from course_tools.grading.sandbox import Limits

LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, cell_seconds=2, notebook_seconds=60)
SLOW_IMPORT = "import time\ntime.sleep(4)\nREADY = True"


def _cell(code: str, **nbgrader):
    meta = {"nbgrader": {"grade_id": nbgrader.pop("gid"), "locked": False, "schema_version": 3, "task": False,
                         **nbgrader}} if nbgrader else {}
    return nbformat.v4.new_code_cell(code, metadata=meta)


def _execute(nb):
    sandboxed = bool(sandbox.bubblewrap())
    scratch = Path(tempfile.mkdtemp(prefix="course-time-"))   # short: the kernel's sockets live under it
    try:
        folder = scratch / "submission"
        folder.mkdir()
        if sandboxed:   # the student's folder belongs to the sandbox user, as course grade gives it
            uid = sandbox.sandbox_uid(0)
            os.chown(folder, uid, uid)
        return execute_submission(nb, folder, LIMITS, lesson_facts(nb), slot=0, sandbox=sandboxed, scratch=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_a_slow_opening_cell_runs_to_its_end_and_the_students_slow_cell_times_out():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell(SLOW_IMPORT),                                                        # the lesson's import cell: 4 s
        _cell("def answer():\n    return 42\n", gid="ex1", solution=True, grade=False),
        _cell("assert READY and answer() == 42", gid="ex1_test", solution=False, grade=True, points=1),
        _cell("import time\ntime.sleep(4)", gid="ex2", solution=True, grade=False),  # the student's: 4 s
        _cell("assert answer() == 42", gid="ex2_test", solution=False, grade=True, points=1),
    ]
    ex = _execute(nb)
    assert ex.verdicts["ex1_test"].passed, ex.verdicts          # the import cell was not cut at 2 s
    # the student's sleep is cut at the cell's limit; the kernel restarts with the import cell run
    # again (its notebook time, not the cell's), so the next test still finds READY and answer
    assert ex.notes[0] == "timed out in cell 4 (limit 2 s per cell)", ex.notes
    assert ex.verdicts["ex2_test"].passed, (ex.verdicts, ex.notes)
    assert not any("cell 1" in note for note in ex.notes), ex.notes
