"""One slot's checkers forked from one template (``execute.served_checker``): a class pays the
lesson's imports once per slot, and no submission's checker sees another's.

Each submission's checker is a fresh fork of a template that only imported the lesson's modules;
when it ends, whatever it left in the sandbox is killed and its scratch emptied. A checker that
left a process behind, or started worker processes (they run student code), or was stopped at a
limit, takes its template with it: the slot's next submission starts a new one.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

from course_tools.grading import sandbox
from course_tools.grading.checker_process import import_statements, served_checker
from course_tools.grading.execute import execute_submission
from course_tools.grading.plan import lesson_facts
from course_tools.grading.sandbox import Limits

LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, cell_seconds=20, notebook_seconds=60)
pytestmark = pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())

# a test cell that passes only in a checker no earlier submission touched: a module attribute and
# a scratch file the previous checker left are both gone
UNTOUCHED = """\
import json, os
assert not hasattr(json, "LEFT_BY_AN_EARLIER_CHECKER"), "module state of an earlier submission"
assert not os.path.exists("/tmp/left-by-an-earlier-checker"), "a file of an earlier submission"
json.LEFT_BY_AN_EARLIER_CHECKER = True
open("/tmp/left-by-an-earlier-checker", "w").write("x")
assert answer() == 42
"""


def _notebook(test_code: str):
    nb = nbformat.v4.new_notebook()
    meta = {"grade_id": "ex1", "locked": False, "schema_version": 3, "task": False, "solution": True, "grade": False}
    test = {**meta, "grade_id": "ex1_test", "solution": False, "grade": True, "points": 1}
    nb.cells = [nbformat.v4.new_code_cell("import json\nfrom pathlib import Path"),
                nbformat.v4.new_code_cell("def answer():\n    return 42\n", metadata={"nbgrader": meta}),
                nbformat.v4.new_code_cell(test_code, metadata={"nbgrader": test})]
    return nb


@pytest.fixture
def slot():
    """(a run of one submission in slot 0, the slot's served checker)."""
    scratch = Path(tempfile.mkdtemp(prefix="course-served-"))
    facts = lesson_facts(_notebook(UNTOUCHED))
    checker = served_checker(LIMITS, facts, 0, True, scratch)

    def run(nb):
        folder = scratch / f"sub-{os.urandom(4).hex()}"
        folder.mkdir()
        uid = sandbox.sandbox_uid(0)
        if uid is not None:
            os.chown(folder, uid, uid)
        return execute_submission(nb, folder, LIMITS, lesson_facts(nb), 0, True, scratch, checker)

    yield run, checker
    checker.stop()
    shutil.rmtree(scratch, ignore_errors=True)


def test_the_template_preloads_the_lessons_imports_only():
    assert import_statements(["from __future__ import annotations\nimport json, os\nx = 1\n",
                              "from pathlib import Path\ndef f():\n    import sys\n", "not python("]) == \
        "import json, os\nfrom pathlib import Path"


def test_each_submission_gets_a_fresh_fork_of_one_template(slot):
    run, checker = slot
    first = run(_notebook(UNTOUCHED))
    assert first.verdicts["ex1_test"].passed, first.verdicts
    template = checker.proc.pid
    assert checker.template_up
    second = run(_notebook(UNTOUCHED))   # passes only if neither the module nor the file carried over
    assert second.verdicts["ex1_test"].passed, second.verdicts
    assert checker.template_up and checker.proc.pid == template   # served by the same template


@pytest.mark.parametrize("left", [
    "import subprocess\nsubprocess.Popen(['sleep', '30'])",        # a process left behind
    "import course_lib.parallel.fork_server as f\nf._SERVER = f",  # worker processes were started
])
def test_a_checker_that_did_not_end_clean_takes_its_template_with_it(slot, left):
    run, checker = slot
    first = run(_notebook(left + "\nassert answer() == 42"))
    assert first.verdicts["ex1_test"].passed, first.verdicts
    assert not checker.template_up and checker.proc is None     # the sandbox was stopped
    second = run(_notebook(UNTOUCHED))                            # a new template serves the next one
    assert second.verdicts["ex1_test"].passed, second.verdicts
    assert checker.template_up


def test_a_template_that_ended_between_submissions_is_replaced(slot):
    run, checker = slot
    assert run(_notebook(UNTOUCHED)).verdicts["ex1_test"].passed
    template = checker.proc
    os.killpg(template.pid, 9)      # the template and its sandbox end while the slot is between students
    template.wait(timeout=10)
    second = run(_notebook(UNTOUCHED))
    assert second.verdicts["ex1_test"].passed, second.verdicts
    assert checker.template_up and checker.proc is not template


def test_a_folder_bound_from_under_tmp_stays_bound_for_the_next_submission(slot, tmp_path):
    """A course cloned under /tmp is bound into the checker's sandbox onto folders that bubblewrap
    makes in the sandbox's scratch; emptying the scratch between two submissions must leave them."""
    run, checker = slot
    shared = Path(tempfile.mkdtemp(prefix="course-clone-", dir="/tmp"))
    try:
        (shared / "data.txt").write_text("42")
        os.chmod(shared, 0o755)
        checker.read_only.append(shared)
        reads = f"assert open({str(shared / 'data.txt')!r}).read() == '42'\nassert answer() == 42"
        for _ in range(2):
            ex = run(_notebook(reads))
            assert ex.verdicts["ex1_test"].passed, ex.verdicts
        assert checker.template_up
    finally:
        shutil.rmtree(shared, ignore_errors=True)
