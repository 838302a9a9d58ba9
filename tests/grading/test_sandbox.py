"""Sandboxed grading (`course grade`) against hostile and broken submissions.

Each submission below is lesson 00's reference or blank notebook with one thing done to it.
All of them are graded in one run (two workers, small limits) but for the one that burns CPU
until a limit stops it (``BURNERS``: an endless loop), graded first in a run of its own whose
cells have 5 s, not 12: what is tested is that it is stopped at the limit, not the limit's size.
The reference is the plan's own run (``reference_student``), which is the first run's: graded
in the second, it was run a second time (the plan was cached by then). Every one must get a clear
reason, no points it did not earn, and leave the other students' grades and the gradebook
alone. Skipped where bubblewrap cannot run (the message says how to install it).
"""
import copy
import dataclasses
import hashlib
import json
import os
from pathlib import Path

import nbformat
import pytest
from scratch_course import lesson_folder, not_passed_in_checker, scratch_course

from course_tools import paths
from course_tools.grading import feedback, sandbox, segments, submission
from course_tools.grading.grade import grade_lesson
from course_tools.grading.sandbox import Limits
from course_tools.grading.student_kernel import SandboxKernel

LESSON = "00_setup"
FULL = 10.0
POINTS = {"ex1": 2, "ex2": 2, "ex3": 3, "ex4": 3}
SOLUTIONS = {"ex1": "ex1_nbytes", "ex2": "ex2_device", "ex3": "ex3_training", "ex4": "ex4_timer"}
# 12 s per cell: the fork bomb must reach the process or memory limit before the cell's deadline
# even on a loaded machine (at 8 s it timed out first in one full run)
LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, cell_seconds=12,
                notebook_seconds=150)
# the submissions that run until a limit stops them, graded in a run of their own with short cells
# (the loop is called by two test cells: 2 x 5 s of CPU, not 2 x 12). Not the fork bomb: stopped at
# a 5 s deadline on a loaded machine, before the process limit, its forks lived on and took the
# memory of a later cell (ex3_visible, 0 points) in one run
BURNERS = ("loop",)
BURNER_LIMITS = dataclasses.replace(LIMITS, cell_seconds=5, notebook_seconds=90)
# the first run's students: the burners, and the reference, whose grade is the plan's own run of it
# (that run is the first's; in the second the plan is cached, and the reference ran again, ~1 CPU-s)
FIRST_RUN = (*BURNERS, "reference")

pytestmark = pytest.mark.timeout(1200)  # the module's fixture grades 19 submissions in one run
needs_bwrap = pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())

WRONG_BUT_DEFINED = {
    "ex1_nbytes": "def nbytes(shape, dtype):\n    return 0\n",
    "ex2_device": "def pick_device():\n    return 'gpu'\n",
    "ex3_training": "def training_seconds(forward_flops, samples, epochs, flops_per_second):\n    return 0.0\n",
    "ex4_timer": "def robust_time(fn, warmup=2, repeat=5):\n    return 1.0\n",
}

NEUTRALISE_CHECKS = """\
check_close = check_equal = check_true = lambda *a, **k: None
import course_lib.checks as _c
_c.check_close = _c.check_equal = _c.check_true = lambda *a, **k: None
import math, sys
math.isclose = lambda *a, **k: True
ip = get_ipython()
ip.showtraceback = lambda *a, **k: None
ip.set_custom_exc((BaseException,), lambda *a, **k: None)
sys.excepthook = lambda *a: None
"""

# reads that a test cell's @in_student_kernel functions run in the kernel, so it answers the
# visible tests' probes with the values those checks want and does nothing real. Whatever it
# answers is plain data checked in the checker, so it earns what hard-coding those values in
# robust_time would: here the visible sleep test; the hidden probes, unseen, get None
HIJACK_PROBES = """\
import unittest.mock
unittest.mock.patch = lambda *a, **k: unittest.mock.MagicMock()
canned = {"time_a_sleep": 0.01, "time_slow_first": [0.002, 6]}
def _fake_probe(token, name, source, payload):
    _course_wire._course_reply(token, {"value": _course_wire.encode(canned.get(name))})
_course_wire._course_probe = _fake_probe
"""

PATCH_KERNEL_REPLIES = """\
import ast
ip = get_ipython()
kernel = ip.kernel
_orig_execute = kernel.do_execute
async def do_execute(*args, **kwargs):
    reply = await _orig_execute(*args, **kwargs)
    reply["status"] = "ok"
    return reply
kernel.do_execute = do_execute
class DropRaises(ast.NodeTransformer):
    def visit_Raise(self, node):
        return ast.Pass()
    def visit_Assert(self, node):
        return ast.Pass()
ip.ast_transformers.append(DropRaises())
"""


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _insert_after(nb, grade_id, source):
    idx = nb.cells.index(_cell(nb, grade_id))
    nb.cells.insert(idx + 1, nbformat.v4.new_code_cell(source))


def _submissions(reference, blank, course_root):
    """{student: notebook node or raw text}."""
    subs = {"reference": reference, "blank": blank}

    def ref_with(**replace):
        nb = copy.deepcopy(reference)
        for gid, src in replace.items():
            _cell(nb, gid).source = src
        return nb

    subs["loop"] = ref_with(ex1_nbytes="def nbytes(shape, dtype):\n    while True:\n        pass\n")
    subs["memory"] = ref_with(ex3_training="big = bytearray(100 * 2**30)\n" + _cell(reference, "ex3_training").source)
    subs["forkbomb"] = ref_with(ex2_device="import os\nwhile True:\n    os.fork()\n")
    subs["exits"] = ref_with(ex3_training="import os\nos._exit(3)\n")
    subs["segfault"] = ref_with(ex4_timer="import ctypes\nctypes.string_at(0)\n")
    subs["socket"] = ref_with(ex1_nbytes="import socket\nsocket.create_connection(('93.184.216.34', 80), timeout=3)\n"
                              + _cell(reference, "ex1_nbytes").source)
    nb = copy.deepcopy(reference)
    _insert_after(nb, "ex4_hidden", f"open({str(paths.LIBRARY / 'checks' / 'core.py')!r}, 'a').write('# pwned')\n")
    subs["writes_outside"] = nb
    thief = copy.deepcopy(blank)
    reference_submission = course_root / "submitted" / "reference" / LESSON / "exercises.ipynb"
    _insert_after(thief, "ex1_nbytes",
                  "import json\n"
                  f"stolen = json.load(open({str(reference_submission)!r}))\n"
                  "for c in stolen['cells']:\n"
                  "    if 'def ' in ''.join(c['source']):\n"
                  "        exec(''.join(c['source']))\n")
    _insert_after(thief, "ex2_device", f"gradebook = open({str(course_root / 'gradebook.db')!r}, 'rb').read()\n")
    subs["reads_others"] = thief
    tampered = copy.deepcopy(blank)
    _cell(tampered, "ex1_nbytes").source = "def nbytes(shape, dtype):\n    return 0\n"
    _cell(tampered, "ex1_visible").source = "pass\n"
    _cell(tampered, "ex1_hidden").source = "pass\n"
    tampered.cells.remove(_cell(tampered, "ex3_hidden"))
    tampered.cells.remove(_cell(tampered, "ex3_visible"))
    _cell(tampered, "ex3_training").source = WRONG_BUT_DEFINED["ex3_training"]
    subs["edits_tests"] = tampered
    subs["not_json"] = '{"cells": [ this is not json'
    noisy = copy.deepcopy(reference)
    _insert_after(noisy, "ex1_hidden", "print('\\n'.join(str(i) for i in range(10**6)))\n")
    subs["million_lines"] = noisy
    for name, attack in (("fake_checks", NEUTRALISE_CHECKS), ("fake_replies", PATCH_KERNEL_REPLIES),
                         ("hijacks_probes", HIJACK_PROBES)):
        nb = ref_with(**WRONG_BUT_DEFINED)
        nb.cells.insert(2, nbformat.v4.new_code_cell(attack))
        subs[name] = nb
    subs["wrong_plain"] = ref_with(**WRONG_BUT_DEFINED)
    spy = copy.deepcopy(reference)  # records the code of every cell it sees, prints it at the end
    spy.cells.insert(2, nbformat.v4.new_code_cell(
        "seen = []\nget_ipython().input_transformers_cleanup.append(lambda lines: (seen.extend(lines), lines)[1])\n"))
    spy.cells.append(nbformat.v4.new_code_cell("print(''.join(seen))\n"))
    subs["leaks_hidden"] = spy
    return subs


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _gradebook_cells(course):
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        nb = gb.find_notebook("exercises", LESSON)
        return sorted((c.name, c.max_score) for c in nb.grade_cells), sorted(
            (c.name, c.checksum) for c in nb.source_cells)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not sandbox.bubblewrap():
        pytest.skip("no sandbox: " + sandbox.why_no_sandbox())
    root = tmp_path_factory.mktemp("course")
    course, source = scratch_course(root, LESSON)
    reference = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    blank = nbformat.read(str(root / "release" / LESSON / "exercises.ipynb"), as_version=4)
    incoming, burners = root / "incoming", root / "burners"
    for student, nb in _submissions(reference, blank, root).items():
        (burners if student in FIRST_RUN else incoming).joinpath(student).mkdir(parents=True)
        text = nb if isinstance(nb, str) else nbformat.writes(nb)
        (burners if student in FIRST_RUN else incoming).joinpath(student, "exercises.ipynb").write_text(text)
    (incoming / "missing").mkdir()
    (incoming / "missing" / "notes.txt").write_text("forgot the notebook")
    before = {"gradebook_cells": _gradebook_cells(course), "checks": _digest(paths.LIBRARY / "checks" / "core.py"),
              "source": _digest(source / LESSON / "exercises.ipynb")}
    # the burners first: the CSV is the last run's, the gradebook keeps both runs' students; the
    # second run's slot 0 forks from the templates the first gave back (``kept_templates``: the
    # same sandbox limits but for the time a cell may take), as this module's later runs do
    by = {o.student: o for o in grade_lesson(source / LESSON, course=course, submissions=burners, workers=1,
                                             limits=BURNER_LIMITS, progress=False, reference_student="reference")}
    outcomes = grade_lesson(source / LESSON, course=course, submissions=incoming, workers=2,
                            limits=LIMITS, progress=False)
    by.update({o.student: o for o in outcomes if o.student not in FIRST_RUN})
    return {"course": course, "before": before, "by": by}


ALL = tuple(POINTS)
EXPECTED = {  # student: (exercises that must score nothing, words the reason must contain)
    "reference": ((), "graded normally"),
    "blank": (ALL, "graded normally"),
    "loop": (("ex1",), "timed out in cell"),
    "memory": (("ex3",), "memory limit"),
    # whichever the forks reach first; on a machine loaded by other tests the cell's deadline
    # can come first (12 s): contained all the same, and the other students' scores are checked
    "forkbomb": (("ex2",), ("process limit", "memory limit", "timed out in cell")),
    "exits": (("ex3",), "kernel exited in cell"),
    "segfault": (("ex4",), "segmentation fault"),
    "socket": (("ex1",), "network access is blocked"),
    "writes_outside": ((), "outside its own folder"),
    "reads_others": (ALL, "outside its own folder"),
    "edits_tests": (ALL, "tampered with and restored"),
    "not_json": (ALL, "not a notebook"),
    "missing": (ALL, "missing file exercises.ipynb"),
    "million_lines": ((), "output of cell"),
    "fake_checks": (ALL, ""),
    # every test cell of lesson 00 is judged in the checker, so the kernel's faked "ok" replies
    # and dropped raises reach no verdict: the wrong answers simply fail
    "fake_replies": (ALL, "graded normally"),
    "wrong_plain": (ALL, "graded normally"),
    # canned probe answers pass what hard-coding them in robust_time would (the visible 10 ms
    # sleep); the hidden tests' probes, unseen, fail (see test_probe_hijack_...)
    "hijacks_probes": (("ex1", "ex2", "ex3"), "graded normally"),
    "leaks_hidden": ((), "graded normally"),
}
# lesson 00's timer tests measure sleeps: on a machine loaded by other tests they can fail for
# an honest submission, so a lost point there is accepted when the check says it was the timing
TIMING = {"ex4_visible": "robust_time of a 10 ms sleep", "ex4_hidden": "warm-up call excluded"}


def _cell_scores(course, student):
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        nb = gb.find_submission_notebook("exercises", LESSON, student)
        return {g.name: (g.score, g.max_score) for g in nb.grades if g.cell_type == "code" and g.max_score}


@needs_bwrap
@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_submission_gets_its_score_and_a_plain_reason(graded, student):
    outcome = graded["by"][student]
    zeroed, words = EXPECTED[student]
    assert outcome.max_score == FULL
    assert any(w in outcome.reason for w in ((words,) if isinstance(words, str) else words)), (student, outcome.reasons)
    assert "grader error" not in outcome.reason
    earned = FULL - sum(POINTS[e] for e in zeroed)
    if student in REFUSED:  # nothing to run: no score (NaN), no gradebook entry, no graded notebook
        assert outcome.status == "refused" and outcome.score != outcome.score
        assert student not in _submitted_students(graded["course"])
        return
    assert outcome.score <= earned, (student, outcome.score, outcome.reasons)  # nothing unearned
    autograded = nbformat.read(str(graded["course"].root / "autograded" / student / LESSON / "exercises.ipynb"),
                               as_version=4)
    for cell, (got, top) in _cell_scores(graded["course"], student).items():
        if cell.split("_")[0] in zeroed:
            assert got == 0, (student, cell, got)
        elif got < top:
            errors = json.dumps(_cell(autograded, cell).outputs)
            assert cell in TIMING and TIMING[cell] in errors or student == "hijacks_probes", (
                student, cell, got, outcome.reasons)


@needs_bwrap
def test_every_test_cell_is_judged_by_the_checker(graded):
    assert not_passed_in_checker(graded["course"].root, LESSON) == []


@needs_bwrap
def test_probe_hijack_earns_only_what_hard_coding_would(graded):
    scores = _cell_scores(graded["course"], "hijacks_probes")
    assert scores["ex4_hidden"][0] == 0 and scores["ex2_hidden"][0] == 0, scores
    assert graded["by"]["hijacks_probes"].score <= POINTS["ex4"] - 2, scores  # at most ex4_visible


REFUSED = ("not_json", "missing")


def _submitted_students(course):
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        return {s.student.id for s in gb.find_assignment(LESSON).submissions}


@needs_bwrap
def test_reasons_name_the_tampered_cells(graded):
    reason = graded["by"]["edits_tests"].reason
    assert "ex1_visible (edited)" in reason and "ex3_hidden (deleted)" in reason and "ex3_visible (deleted)" in reason


@needs_bwrap
def test_gradebook_course_files_and_csv_are_intact(graded):
    course, before = graded["course"], graded["before"]
    assert _gradebook_cells(course) == before["gradebook_cells"]
    assert _digest(paths.LIBRARY / "checks" / "core.py") == before["checks"]
    assert _digest(course.source / LESSON / "exercises.ipynb") == before["source"]
    rows = (course.root / "build" / f"grades_{LESSON}.csv").read_text().splitlines()
    assert rows[0].startswith("student,score,max_score,seconds,reason,ex1_visible")
    assert len(rows) == 1 + len(EXPECTED) - len(FIRST_RUN)   # the last run's students (FIRST_RUN had a run first)


@needs_bwrap
def test_feedback_never_shows_hidden_tests(graded):
    course = graded["course"]
    hidden = ["np.int8", "(2, 0, 7)", "time_one_outlier", "60000", "is available"]
    for student in ("reference", "blank", "wrong_plain", "edits_tests", "leaks_hidden"):
        html = (course.root / "feedback" / student / LESSON / "exercises.html").read_text()
        assert "BEGIN HIDDEN TESTS" not in html
        for text in hidden:
            assert text not in html, (student, text)


def test_restore_test_cells_puts_back_edited_and_deleted_cells():
    source = nbformat.read(str(lesson_folder(LESSON) / "exercises.ipynb"), as_version=4)
    student = copy.deepcopy(source)
    _cell(student, "ex2_visible").source = "pass"
    student.cells.remove(_cell(student, "ex4_hidden"))
    student.cells.insert(1, nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "grade_id": "invented", "points": 100, "solution": False}}))
    restored, notes = submission.restore_test_cells(student, source, source)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in restored.cells]
    assert ids.count("ex4_hidden") == 1 and ids.index("ex4_hidden") == ids.index("ex4_visible") + 1
    assert _cell(restored, "ex2_visible").source == _cell(source, "ex2_visible").source
    assert "invented" not in ids
    assert "ex2_visible (edited)" in notes[0] and "ex4_hidden (deleted)" in notes[0]


def test_sandbox_command_cuts_the_network_and_binds_only_what_it_needs(tmp_path):
    if not sandbox.bubblewrap():
        pytest.skip("no sandbox: " + sandbox.why_no_sandbox())
    argv = sandbox.sandbox_argv(["python"], tmp_path / "sub", tmp_path / "tmp", tmp_path / "conn",
                                uid=sandbox.SANDBOX_UID_BASE)
    assert "--unshare-net" in argv and "--unshare-pid" in argv and "--die-with-parent" in argv
    bound = [argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind")]
    assert str(paths.REPO / "notebooks") not in bound and str(paths.REPO) not in bound
    writable = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
    assert writable == [str(tmp_path / "tmp"), str(tmp_path / "conn"), str(tmp_path / "sub")]
    limits = sandbox.rlimit_values(Limits(memory_bytes=2**30, processes=64))
    import resource

    assert limits[resource.RLIMIT_AS] == (2**30, 2**30) and limits[resource.RLIMIT_NPROC] == (64, 64)
    # on a GPU the address space is not limited (CUDA reserves far more than it uses) and the
    # NVIDIA devices are bound in; without --gpu the sandbox has no GPU device
    assert resource.RLIMIT_AS not in sandbox.rlimit_values(Limits(gpu=True))
    assert "--dev-bind" not in argv


def test_feedback_outputs_keep_only_text_and_bitmaps():
    outputs = [{"output_type": "display_data", "data": {"text/html": "<script>x()</script>", "text/plain": "<b>"}},
               {"output_type": "display_data", "data": {"application/javascript": "x()"}},
               {"output_type": "stream", "name": "stdout", "text": "<script>y()</script>"}]
    kept = feedback.safe_outputs(outputs)
    assert kept[0]["data"] == {"text/plain": "<b>"} and len(kept) == 2 and kept[1]["output_type"] == "stream"


def test_grading_refuses_without_a_sandbox_unless_told(monkeypatch, capsys):
    from course_tools import cli

    monkeypatch.setattr(sandbox, "bubblewrap", lambda: None)
    assert cli.main(["grade", "00"]) == 2
    err = capsys.readouterr().err
    assert "refusing" in err and "--no-sandbox-i-trust-this-code" in err


@needs_bwrap
def test_regrading_is_idempotent_and_keeps_manual_grades(tmp_path):
    from nbgrader.api import Gradebook

    course, source = scratch_course(tmp_path / "course", LESSON)   # with the plan of the module's course, if any
    root = course.root
    incoming = tmp_path / "incoming"
    reference = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    blank = nbformat.read(str(root / "release" / LESSON / "exercises.ipynb"), as_version=4)
    _cell(reference, "ex4_timer").source = _cell(blank, "ex4_timer").source  # no timing tests: exact scores
    for student, nb in (("ann", reference), ("bob", blank)):
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    first = {o.student: o.score for o in grade_lesson(source / LESSON, course=course, submissions=incoming,
                                                      workers=1, limits=LIMITS, progress=False, feedback=False)}
    assert first == {"ann": FULL - POINTS["ex4"], "bob": 0.0}
    with Gradebook(course.db_url) as gb:
        grade = gb.find_grade("ex1_visible", "exercises", LESSON, "bob")
        grade.manual_score = 1.0
        gb.db.commit()
    again = {o.student: o.score for o in grade_lesson(source / LESSON, course=course, workers=1,
                                                      limits=LIMITS, progress=False, feedback=False)}
    assert again == {"ann": FULL - POINTS["ex4"], "bob": 1.0}


def test_a_solution_cell_turned_into_markdown_goes_back_to_the_blank_stub():
    source = nbformat.read(str(lesson_folder(LESSON) / "exercises.ipynb"), as_version=4)
    release_nb = copy.deepcopy(source)
    _cell(release_nb, "ex1_nbytes").source = "def nbytes(shape, dtype):\n    raise NotImplementedError()\n"
    student = copy.deepcopy(release_nb)
    idx = student.cells.index(_cell(student, "ex1_nbytes"))
    md = nbformat.v4.new_markdown_cell("no code", metadata=copy.deepcopy(student.cells[idx].metadata))
    student.cells[idx] = md
    restored, notes = submission.restore_test_cells(student, source, release_nb)
    cell = _cell(restored, "ex1_nbytes")
    assert cell.cell_type == "code" and "NotImplementedError" in cell.source and "BEGIN SOLUTION" not in cell.source
    assert "ex1_nbytes (edited)" in notes[0]


def test_split_hidden_parts_of_a_test_cell():
    source = ("check_equal('a', f(1), 2)\n"
              "### BEGIN HIDDEN TESTS\ncheck_equal('secret', f(7), 49)\n### END HIDDEN TESTS\n")
    visible, hidden = segments.split_hidden(source)
    assert visible == "check_equal('a', f(1), 2)\n" and "secret" in hidden and "secret" not in visible
    assert segments.visible_part(source) == visible
    nested = "for i in range(2):\n    x = i\n    ### BEGIN HIDDEN TESTS\n    y = i\n    ### END HIDDEN TESTS\n"
    assert segments.split_hidden(nested) == ("", nested)  # not at the top level: all of it is hidden


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox users exist only when the grader runs as root")
def test_sandbox_users_belong_to_nobody_else_and_to_one_grader_each(tmp_path):
    """A slot's next sandbox kills what runs under its user id, so that id must be no account's,
    no service's, and no other grader's running at the same time."""
    import pwd
    import subprocess
    import sys
    mine = {sandbox.sandbox_uid(slot) for slot in range(64)}
    assert len(mine) == 64
    accounts = {entry.pw_uid for entry in pwd.getpwall()}
    assert not mine & accounts
    assert min(mine) > 165536 * 16 and not mine & set(range(61184, 65536))  # past systemd's and subuids
    other = subprocess.run([sys.executable, "-c", "from course_tools.grading import sandbox\n"
                            "print(sandbox.sandbox_uid(0))"], capture_output=True, text=True, check=True)
    assert int(other.stdout) not in mine  # a second grader, started while this one runs
    # one whose first choice is this grader's block, with a temporary folder of its own
    ours = sandbox._user_block()
    rival = subprocess.run([sys.executable, "-c", f"import os\nos.getpid = lambda: {ours}\n"
                            "from course_tools.grading import sandbox\nprint(sandbox.sandbox_uid(0))"],
                           capture_output=True, text=True, check=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert int(rival.stdout) not in mine


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox users exist only when the grader runs as root")
def test_a_kernel_starts_although_its_slots_last_sandbox_left_processes_behind(tmp_path):
    """A killed sandbox's processes (a fork bomb's) die asynchronously; the next sandbox of the
    same slot runs as the same user, and while they last they count against its process limit.
    The CI run of stop 20 graded 'forkbomb' as 'the kernel did not start' this way."""
    import subprocess
    limits = Limits(memory_bytes=2**30, cpu_seconds=60, processes=64, cell_seconds=12, notebook_seconds=60)
    folder = tmp_path / "work"
    folder.mkdir()
    kernel = SandboxKernel(folder, limits, slot=9)
    os.chown(folder, kernel.uid, kernel.uid)
    leftovers = [subprocess.Popen(["sleep", "120"], user=kernel.uid, group=kernel.uid)
                 for _ in range(limits.processes)]
    import threading  # their reaper, as a dead sandbox's pid namespace is for its processes
    threading.Thread(target=lambda: [p.wait() for p in leftovers], daemon=True).start()
    try:
        kernel.start()
        assert kernel.execute("print(6 * 7)", 30).status == "ok"
        assert all(p.poll() is not None for p in leftovers)  # cleared before the kernel started
    finally:
        kernel.close()
        for p in leftovers:
            p.kill()
            p.wait()


def test_where_systemd_can_start_scopes_each_sandbox_gets_its_own_cgroup_limits(monkeypatch, tmp_path):
    """The systemd path, on a machine without systemd (like CI): the command line it would run."""
    monkeypatch.setattr(sandbox, "bubblewrap", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(sandbox, "systemd_scope", lambda: "/usr/bin/systemd-run")
    limits = Limits(memory_bytes=3 * 2**30, processes=77)
    argv = sandbox.sandbox_argv(["python", "-c", "pass"], None, tmp_path, None, None, limits=limits)
    assert argv[:10] == ["/usr/bin/systemd-run", "--scope", "--quiet", "-p", f"MemoryMax={3 * 2**30}",
                         "-p", "TasksMax=77", "-p", "CPUWeight=100", "--"]
    assert argv[10] == "/usr/bin/bwrap" and argv[-3:] == ["python", "-c", "pass"]
    assert "systemd scope" in sandbox.limits_in_force()
