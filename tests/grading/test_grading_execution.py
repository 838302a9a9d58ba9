"""How ``course grade`` runs one notebook: the time each cell gets, and the namespace each hidden
test part runs in.

A grading machine loaded by a whole class (or a test suite) can take longer than the per-cell
limit to import the course's libraries; the import cell is the instructor's, read-only and run
before any of the student's functions exist, so a slow one must not fail a submission. Only the
notebook's time bounds those cells; the student's cells keep the per-cell limit.

Hidden test parts run after the whole notebook, each in the namespace its cell left; a helper the
cell defined must find what the cell saw, not what later cells installed under the same name.
"""
from __future__ import annotations

import nbformat
from scratch_course import execute_directly

from course_tools.grading.sandbox import Limits

LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, cell_seconds=2, notebook_seconds=60)
SLOW_IMPORT = "import time\ntime.sleep(4)\nREADY = True"


def _cell(code: str, **nbgrader):
    meta = {"nbgrader": {"grade_id": nbgrader.pop("gid"), "locked": False, "schema_version": 3, "task": False,
                         **nbgrader}} if nbgrader else {}
    return nbformat.v4.new_code_cell(code, metadata=meta)


def _test(gid: str, code: str):
    return _cell(code, gid=gid, solution=False, grade=True, points=1)


def test_a_slow_opening_cell_runs_to_its_end_and_the_students_slow_cell_times_out():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell(SLOW_IMPORT),                                                        # the lesson's import cell: 4 s
        _cell("def answer():\n    return 42\n", gid="ex1", solution=True, grade=False),
        _test("ex1_test", "assert READY and answer() == 42"),
        _cell("import time\ntime.sleep(4)", gid="ex2", solution=True, grade=False),  # the student's: 4 s
        _test("ex2_test", "assert answer() == 42"),
    ]
    ex = execute_directly(nb, LIMITS)
    assert ex.verdicts["ex1_test"].passed, ex.verdicts          # the import cell was not cut at 2 s
    # the student's sleep is cut at the cell's limit; the kernel restarts with the import cell run
    # again (its notebook time, not the cell's), so the next test still finds READY and answer
    assert ex.notes[0] == "timed out in cell 4 (limit 2 s per cell)", ex.notes
    assert ex.verdicts["ex2_test"].passed, (ex.verdicts, ex.notes)
    assert not any("cell 1" in note for note in ex.notes), ex.notes


def test_a_hidden_part_finds_what_its_own_cell_defined_not_a_later_cells_namesake():
    """Two test cells define the same helper name (as lesson 04's ``launch_...`` helpers name a
    kernel); the first cell's hidden part, run after the second cell, must call the first's."""
    hidden = "\n### BEGIN HIDDEN TESTS\nassert measured() == {want}, measured()\n### END HIDDEN TESTS\n"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("import math"),
        _cell("def area(r):\n    return math.pi * r * r\n", gid="ex1", solution=True, grade=False),
        _test("ex1_test", "TARGET = 'first'\ndef measured():\n    return TARGET\nassert measured() == 'first'"
              + hidden.format(want="'first'")),
        _test("ex2_test", "TARGET = 'second'\ndef measured():\n    return TARGET\nassert measured() == 'second'"
              + hidden.format(want="'second'")),
        _test("ex3_test", "assert TARGET == 'second' and abs(area(1) - math.pi) < 1e-12"),
    ]
    ex = execute_directly(nb, LIMITS)
    assert {gid: v.passed for gid, v in ex.verdicts.items()} == {"ex1_test": True, "ex2_test": True,
                                                                 "ex3_test": True}, (ex.verdicts, ex.notes)


def test_without_a_sandbox_one_slot_serves_its_submissions_from_one_template_each():
    """Without bubblewrap (the build's round trip: the instructor's own code) a slot's kernels and
    checkers are still forked from one template each, so the build pays the lesson's imports once;
    what one submission's kernel left in its folder, and the processes it started, are gone before
    the next one's kernel runs, and a test cell is judged as in a fresh kernel. Given back at the
    end of a run (``kept_templates``), the same templates serve the process's next run."""
    import shutil
    import tempfile
    from pathlib import Path

    from course_tools.grading import kept_templates
    from course_tools.grading.checker_process import served_checker
    from course_tools.grading.execute import execute_submission
    from course_tools.grading.plan import lesson_facts
    from course_tools.grading.served_kernel import served_kernel

    look = ("import os, json\nprint('SEEN', sorted(os.listdir('.')), hasattr(json, 'EARLIER'), "
            "[p for p in os.listdir('/proc') if p.isdigit() and open(f'/proc/{p}/cmdline', 'rb').read() "
            "== b'sleep\\x00991\\x00'])")
    leave = ("import json, subprocess\njson.EARLIER = True\nopen('left', 'w').write('x')\n"
             "subprocess.Popen(['sleep', '991'])")
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("import json"), _cell(look), _cell(leave),
                _cell("def answer():\n    return 42\n", gid="ex1", solution=True, grade=False),
                _test("ex1_test", "assert answer() == 42")]
    scratch = Path(tempfile.mkdtemp(prefix="course-plain-"))
    facts = lesson_facts(nb)
    checker, kernel = served_checker(LIMITS, facts, 0, False, scratch), served_kernel(LIMITS, facts, 0, False, scratch)
    try:
        seen, templates = [], []
        for _ in range(2):
            folder = kernel.prepare()
            ex = execute_submission(nb, folder, LIMITS, facts, 0, False, scratch, checker, kernel)
            assert ex.verdicts["ex1_test"].passed, (ex.notes, ex.verdicts)
            seen.append(next(o["text"] for outs in ex.outputs.values() for o in outs
                             if o.get("text", "").startswith("SEEN")))
            templates.append((kernel.template_pid, checker.proc.pid))
        assert seen == ["SEEN [] False []\n"] * 2, seen
        assert templates[0] == templates[1] and None not in templates[0], "the templates were not served again"
        # given back at a run's end, they serve this process's next run, with its imports added
        kept_templates.take_back(kernel)
        kept_templates.take_back(checker)
        kernel = kept_templates.lend("kernel", LIMITS, "import math")
        checker = kept_templates.lend("checker", LIMITS, "import math")
        folder = kernel.prepare()
        ex = execute_submission(nb, folder, LIMITS, facts, 0, False, scratch, checker, kernel)
        assert ex.verdicts["ex1_test"].passed and (kernel.template_pid, checker.proc.pid) == templates[0]
    finally:
        kernel.close()
        checker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
