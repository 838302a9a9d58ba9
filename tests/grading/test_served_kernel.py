"""One slot's student kernels forked from one template (``served_kernel.served_kernel``): a class
pays ipykernel's and the lesson's imports once per slot, and no submission's kernel sees or
touches the next one's.

Each submission's kernel is a fresh fork of a template that only imported modules; when it ends,
the grader kills every other process of the sandbox from outside, the template removes what was
left in System V IPC, and the grader empties the submission folder, ``/tmp`` and the connection
folder. A kernel that dies or hangs is forked again; a submission that stops or kills the template
costs its own sandbox only: the next submission starts a fresh one. The class test at the end is
written as students would write it and graded by the real ``course grade`` in one slot.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from scratch_course import cell, grade_class, solutions

from course_tools.grading import sandbox
from course_tools.grading.checker_process import served_checker
from course_tools.grading.execute import execute_submission
from course_tools.grading.plan import lesson_facts
from course_tools.grading.sandbox import Limits
from course_tools.grading.served_kernel import served_kernel

LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, cell_seconds=8, notebook_seconds=60)
# the run whose cell forks a process that spins until the cell's deadline: what is tested is that
# it is gone before the next cell, not the deadline's size (at 8 s it spun ~8 CPU-s on an idle machine)
SHORT_CELLS = dataclasses.replace(LIMITS, cell_seconds=4)
pytestmark = pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())

# what a kernel can see of an earlier submission, printed as one line the tests read
LOOK = """\
import glob, json, os
seen = sorted(p for p in os.listdir('/tmp') if p != '.ipython' and os.stat('/tmp/' + p).st_uid != 0)
seen += glob.glob('/tmp/.ipython/profile_default/startup/*.py')
seen += sorted(os.listdir('.'))
seen += [p for p in os.listdir('/proc') if p.isdigit() and open(f'/proc/{p}/cmdline', 'rb').read().startswith(b'sleep')]
seen += ['json state'] if hasattr(json, 'LEFT_BY_AN_EARLIER_KERNEL') else []
seen += ['shm'] if len(open('/proc/sysvipc/shm').read().splitlines()) > 1 else []
print('SEEN', seen)
"""
LEAVE = """\
import ctypes, json, subprocess
json.LEFT_BY_AN_EARLIER_KERNEL = True
open('/tmp/left-by-an-earlier-kernel', 'w').write('x')
open('left-by-an-earlier-kernel', 'w').write('x')
subprocess.Popen(['setsid', 'sh', '-c', 'sleep 1000 &'])
ctypes.CDLL(None).shmget(4711, 4096, 0o1666)
"""


def _notebook(*codes: str):
    nb = nbformat.v4.new_notebook()
    meta = {"grade_id": "ex1", "locked": False, "schema_version": 3, "task": False, "solution": True, "grade": False}
    test = {**meta, "grade_id": "ex1_test", "solution": False, "grade": True, "points": 1}
    nb.cells = [nbformat.v4.new_code_cell("import json\nfrom pathlib import Path"),
                *[nbformat.v4.new_code_cell(code) for code in codes],
                nbformat.v4.new_code_cell("def answer():\n    return 42\n", metadata={"nbgrader": meta}),
                nbformat.v4.new_code_cell("assert answer() == 42", metadata={"nbgrader": test})]
    return nb


@pytest.fixture
def slot():
    """(run a notebook as the slot's next submission, under ``LIMITS`` unless given others; the slot's
    served kernel)."""
    scratch = Path(tempfile.mkdtemp(prefix="course-skernel-"))
    facts = lesson_facts(_notebook())
    checker = served_checker(LIMITS, facts, 0, True, scratch)
    kernel = served_kernel(LIMITS, facts, 0, True, scratch)

    def run(nb, limits=LIMITS):
        folder = kernel.prepare()
        (folder / "notes.txt").write_text("the student's own file")
        uid = sandbox.sandbox_uid(0)
        if uid is not None:
            os.chown(folder / "notes.txt", uid, uid)
        # the lesson's facts, not the notebook's: the cells added before the exercise are the student's
        return execute_submission(nb, folder, limits, facts, 0, True, scratch, checker, kernel)

    yield run, kernel
    kernel.close()
    checker.stop()
    shutil.rmtree(scratch, ignore_errors=True)


def _seen(ex) -> str:
    return next(o["text"] for outs in ex.outputs.values() for o in outs if o.get("text", "").startswith("SEEN"))


def test_each_submission_gets_a_fresh_fork_of_one_template(slot):
    run, kernel = slot
    first = run(_notebook(LOOK, LEAVE))
    assert first.verdicts["ex1_test"].passed, (first.notes, first.verdicts)
    assert _seen(first) == "SEEN ['notes.txt']\n"
    template = kernel.template_pid
    second = run(_notebook(LOOK))
    assert second.verdicts["ex1_test"].passed
    assert _seen(second) == "SEEN ['notes.txt']\n", "something of the earlier submission was left"
    assert kernel.template_pid == template, "the clean sandbox was not served again"


def test_a_kernel_that_dies_or_hangs_is_forked_again_from_the_same_template(slot):
    run, kernel = slot
    run(_notebook())
    template = kernel.template_pid
    died = run(_notebook("import os\nos._exit(3)"))
    assert any("exit code 3" in note for note in died.notes) and died.verdicts["ex1_test"].passed
    crashed = run(_notebook("import ctypes\nctypes.string_at(0)"))
    assert any("segmentation fault" in note for note in crashed.notes) and crashed.verdicts["ex1_test"].passed
    hung = run(_notebook("import time\ntime.sleep(60)"))
    assert any("timed out in cell 2" in note for note in hung.notes) and hung.verdicts["ex1_test"].passed
    assert kernel.template_pid == template


def test_what_a_timed_out_cell_forked_is_gone_before_the_next_cell(slot):
    """The interrupt stops the cell, not the processes it forked: a busy fork and a detached sleep
    would take the CPU and memory of the student's later cells (a fork bomb's copies took the
    memory limit of a later cell, whose exercise then lost its points)."""
    run, kernel = slot
    forks = ("import os, subprocess, time\nsubprocess.Popen(['setsid', 'sh', '-c', 'sleep 1000 &'])\n"
             "busy = os.fork()\nif busy == 0:\n    os.setsid()\n    while True:\n        pass\ntime.sleep(60)")
    # the busy fork is the kernel's child: killed, it stays a zombie (Z) until the kernel ends
    count = ("try:\n    state = open(f'/proc/{busy}/stat').read().rsplit(')', 1)[1].split()[0]\n"
             "except OSError:\n    state = 'gone'\nprint('BUSY FORK', 'ended' if state in ('Z', 'gone') else state)")
    ex = run(_notebook(forks, LOOK, count), SHORT_CELLS)
    assert any("timed out in cell 2" in note for note in ex.notes), ex.notes
    assert not any("restarted" in note for note in ex.notes), ex.notes   # the kernel lived on
    assert _seen(ex) == "SEEN ['notes.txt']\n", "a process the timed-out cell forked is still running"
    printed = "".join(o.get("text", "") for outs in ex.outputs.values() for o in outs)
    assert "BUSY FORK ended\n" in printed, printed
    assert ex.verdicts["ex1_test"].passed


@pytest.mark.parametrize("attack", ["os.kill(os.getppid(), signal.SIGSTOP)", "os.kill(os.getppid(), signal.SIGKILL)",
                                    "os.kill(os.getppid(), signal.SIGTERM); os.kill(os.getppid(), signal.SIGINT)"])
def test_a_submission_that_signals_the_template_costs_only_its_own_sandbox(slot, attack):
    run, kernel = slot
    run(_notebook())
    run(_notebook(f"import os, signal\n{attack}\nimport time\ntime.sleep(0.5)"))
    after = run(_notebook(LOOK))
    assert after.verdicts["ex1_test"].passed and _seen(after) == "SEEN ['notes.txt']\n"


def test_the_template_cannot_be_read_or_written_through_proc(slot):
    run, _ = slot
    ex = run(_notebook("import os\nfor path, mode in ((f'/proc/{os.getppid()}/mem', 'rb'), "
                       "(f'/proc/{os.getppid()}/fd/0', 'w'), (f'/proc/{os.getppid()}/environ', 'rb')):\n"
                       "    try:\n        open(path, mode)\n        print('OPENED', path)\n"
                       "    except OSError as exc:\n        print(type(exc).__name__)\n"))
    printed = "".join(o.get("text", "") for outs in ex.outputs.values() for o in outs)
    assert "OPENED" not in printed and printed.count("PermissionError") == 3, printed


LESSON = "01_hardware_foundations"
CLASS_LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, cell_seconds=12, notebook_seconds=240)
# a startup file IPython runs in every kernel it starts with this profile: were /tmp (IPYTHONDIR)
# not emptied between submissions, the next student's kernel would run it and lose every point
STARTUP = ("import os\nos.makedirs('/tmp/.ipython/profile_default/startup', exist_ok=True)\n"
           "open('/tmp/.ipython/profile_default/startup/00-zero.py', 'w').write("
           "'import builtins\\nbuiltins.round = lambda *a, **k: 0\\n')\n")


def test_a_class_graded_in_one_slot_keeps_each_kernel_to_itself(tmp_path):
    """``course grade`` with one worker: a student who leaves processes, files, IPC, module state
    and an IPython startup file behind and then stops the template, and a student who does the
    same without stopping it, are each followed by an honest student who prints what is left and
    keeps full marks."""
    answers = solutions(LESSON)

    def submissions(blank):
        def honest(*extra):
            nb = nbformat.from_dict(nbformat.from_dict(blank))
            for gid, code in answers.items():
                cell(nb, gid).source = code
            nb.cells[1:1] = [nbformat.v4.new_code_cell(code) for code in extra]
            return nb
        stop = "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)"
        return {"a_leaves_and_stops": honest(LEAVE, STARTUP, stop),
                "b_honest": honest(LOOK), "c_leaves": honest(LEAVE, STARTUP), "d_honest": honest(LOOK)}

    graded = grade_class(tmp_path, LESSON, submissions, CLASS_LIMITS, workers=1)
    by = graded["by"]
    full = by["b_honest"].max_score
    assert {s: by[s].score for s in by} == {"a_leaves_and_stops": full, "b_honest": full, "c_leaves": full,
                                            "d_honest": full}, {s: by[s].reasons for s in by}
    for student in ("b_honest", "d_honest"):
        nb = nbformat.read(str(tmp_path / "autograded" / student / LESSON / "exercises.ipynb"), 4)
        printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        assert "SEEN ['exercises.ipynb', 'timestamp.txt']" in printed, printed   # its own files only
