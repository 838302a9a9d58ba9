"""Sandboxed templates kept between the grading runs of one process (``kept_templates``): a test
module grades class after class, a ``course build`` worker lesson after lesson, and each run's
slots fork from the templates the process's last run gave back instead of starting their own
(about 6 CPU-s a slot: torch, ipykernel and the lesson's imports).

Two runs of the real ``grade_lesson`` on the frozen lesson 00, one slot, in the sandbox: the second
run's kernel and checker come from the first run's templates, and what the first run's student
left behind (a file in the sandbox's ``/tmp`` and in the submission folder, a process that keeps
running, a module attribute set in the kernel) is gone when the second run's student looks; both
keep full marks. Skipped where bubblewrap cannot run.
"""
import copy

import nbformat
import pytest
from scratch_course import cell, grade_class, solutions

from course_tools.grading import kept_templates, sandbox
from course_tools.grading.sandbox import Limits

LESSON = "00_setup"
LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, cell_seconds=30, notebook_seconds=150)
LEAVE = ("import json, subprocess\njson.LEFT_BY_THE_LAST_RUN = True\nopen('/tmp/left', 'w').write('x')\n"
         "open('left_here', 'w').write('x')\nsubprocess.Popen(['sleep', '987'])\n")
LOOK = ("import json, os\nprint('SEEN', os.path.exists('/tmp/left'), os.path.exists('left_here'), "
        "hasattr(json, 'LEFT_BY_THE_LAST_RUN'), [p for p in os.listdir('/proc') if p.isdigit() and "
        "open(f'/proc/{p}/cmdline', 'rb').read() == b'sleep\\x00987\\x00'])\n")

pytestmark = pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())


def _student(extra: str):
    """Lesson 00's reference answers, with ``extra`` run at the top of the first solution cell."""
    def submissions(blank):
        nb = copy.deepcopy(blank)
        for gid, source in solutions(LESSON).items():
            cell(nb, gid).source = (extra if gid == "ex1_nbytes" else "") + source
        return {"student": nb}
    return submissions


def _templates() -> dict:
    """{kind: its template's process id, None when it was stopped} of this test's sandboxed slot 0 kept now
    (a template that could not be cleared in time on a loaded machine is stopped, and the next run
    starts a fresh one: that is not what is tested here)."""
    kept = {}
    for key, served in kept_templates._KEPT:
        if key[1:] == (repr(LIMITS), 0, True):   # this test's slot 0, sandboxed
            alive = served.proc is not None and served.proc.poll() is None
            kept[key[0]] = (served.template_pid if key[0] == "kernel" else served.proc.pid) if alive else None
    return kept


def test_the_next_run_forks_from_the_last_runs_templates_and_sees_nothing_it_left(tmp_path):
    first = grade_class(tmp_path / "first", LESSON, _student(LEAVE), LIMITS)
    kept = _templates()
    assert set(kept) == {"kernel", "checker"}, f"the run gave back {kept}, not its kernel and checker"
    second = grade_class(tmp_path / "second", LESSON, _student(LOOK), LIMITS)
    after = _templates()
    assert {k: after[k] for k, pid in kept.items() if pid} == {k: pid for k, pid in kept.items() if pid}, \
        f"the second run started templates of its own: {kept} -> {after}"
    for graded in (first, second):
        outcome = graded["by"]["student"]
        assert outcome.score == outcome.max_score > 0, (outcome.score, outcome.reasons)
    looked = nbformat.read(str(tmp_path / "second" / "autograded" / "student" / LESSON / "exercises.ipynb"),
                           as_version=4)
    seen = [o["text"] for o in cell(looked, "ex1_nbytes").outputs if o.get("text", "").startswith("SEEN")]
    assert seen == ["SEEN False False False []\n"], seen
