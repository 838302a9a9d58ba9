"""Attacks on the grading machine itself (issue 26), written as a student would write them and
graded by the real pipeline on lesson 01 (max 14) in one batch, beside an honest control that
keeps full marks: filling the kernel's connection folder (outside the disk limit before), and
sending IOPub messages far larger than any output the grader keeps (held in the grader's own,
unlimited memory before). The checker's channel is tested directly: a restarted checker starts
with a clean channel, and an endless line is cut off instead of read quadratically.
Skipped where bubblewrap cannot run.
"""
import copy
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from scratch_course import scratch_course

from course_tools.grading import checker_process, cpu_share, sandbox, sandboxed_process, served_kernel
from course_tools.grading.grade import grade_lesson
from course_tools.grading.sandbox import Limits

LESSON = "01_hardware_foundations"
FULL = 14.0
LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, file_bytes=32 * 2**20, disk_bytes=64 * 2**20,
                cell_seconds=12, notebook_seconds=240, notebook_output_bytes=1_000_000)
pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())]

CONN_DISK = ("import os, time\n"   # the folder of the kernel's own connection file is writable
             "from ipykernel.kernelapp import IPKernelApp\n"
             "conn = os.path.dirname(IPKernelApp.instance().connection_file)\n"
             "for i in range(6):\n"
             "    open(os.path.join(conn, f'blob{i}'), 'wb').write(b'x' * 30 * 2**20)\n"
             "time.sleep(3)\n")
BIG_IOPUB = ("from IPython.display import display\n"   # 300 messages of 8 MB each: 2.4 GB in all
             "for i in range(300):\n"
             "    display({'text/plain': 'z' * 8_000_000}, raw=True)\n")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    course, source = scratch_course(root, LESSON)
    src_nb = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    honest = copy.deepcopy(src_nb)   # the instructor's version: the reference answers
    subs = {"honest": honest}
    for name, code in (("conn_disk", CONN_DISK), ("big_iopub", BIG_IOPUB)):
        nb = copy.deepcopy(honest)
        nb.cells.append(nbformat.v4.new_code_cell(code))
        subs[name] = nb
    incoming = root / "incoming"
    for student, nb in subs.items():
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    private_tmp = Path(tempfile.mkdtemp(prefix="cgm-"))
    old_tempdir, tempfile.tempdir = tempfile.tempdir, str(private_tmp)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # bytes (Linux reports KiB)
    try:
        outcomes = grade_lesson(source / LESSON, course=course, submissions=incoming, workers=2, limits=LIMITS,
                                progress=False)
    finally:
        tempfile.tempdir = old_tempdir
        shutil.rmtree(private_tmp, ignore_errors=True)
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"by": {o.student: o for o in outcomes}, "peak_growth": peak_after - peak_before}


def _reason(outcome) -> str:
    return " | ".join(str(r) for r in outcome.reasons)


def test_honest_control_keeps_full_marks(graded):
    assert graded["by"]["honest"].score == FULL


def test_connection_folder_counts_against_the_disk_limit(graded):
    outcome = graded["by"]["conn_disk"]
    assert "disk limit" in _reason(outcome), _reason(outcome)
    assert all("\n" not in str(r) for r in outcome.reasons)   # each reason is one plain line


def test_huge_iopub_messages_are_not_held_by_the_grader(graded):
    """2.4 GB of messages sent; the grader process grew by far less (its sockets drop any message
    larger than the output it could keep), and the answers before the attack still count."""
    assert graded["peak_growth"] < 2**30, f"grader grew by {graded['peak_growth'] / 2**30:.2f} GiB"
    assert graded["by"]["big_iopub"].score == FULL


def test_a_restarted_checker_starts_with_a_clean_channel(tmp_path):
    """A partial line left by the last checker (killed mid-reply) must not be glued to the new
    checker's first line (that was 'grader error: JSONDecodeError')."""
    checker = checker_process.CheckerProcess(LIMITS, slot=11, sandbox=False, scratch=tmp_path)
    checker.buffer = bytearray(b'{"op": "done", "stdout": "xxxx')
    try:
        checker.start()   # wait_ready: the first line must be the new checker's "ready"
        assert checker.alive()
    finally:
        checker.stop()


def test_an_endless_line_from_the_checker_is_cut_off(tmp_path, monkeypatch):
    """A line longer than MAX_REPLY_BYTES (bytes) ends the sender and reads as no reply, in time
    linear in what was read."""
    monkeypatch.setattr(checker_process, "MAX_REPLY_BYTES", 8 * 2**20)
    checker = checker_process.CheckerProcess(LIMITS, slot=11, sandbox=False, scratch=tmp_path)
    checker.proc = subprocess.Popen(
        [sys.executable, "-c", "import os\nwhile True:\n    os.write(1, b'y' * 65536)\n"],
        stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert checker.receive(60) is None
        assert checker.proc.wait(timeout=10) != 0   # killed, not left writing
        assert len(checker.buffer) == 0
    finally:
        if checker.proc.poll() is None:
            checker.proc.kill()
        checker.proc.wait()


# one shell that starts 40 spinning shells, each in a session of its own, and returns at once:
# where the scheduler shares the CPUs by session (autogroup), that is 40 shares against the honest one's
# (the attack used 150; fewer keep this test short, and the check below is of membership)
BUSY = ("import subprocess\n"
        "subprocess.Popen(['sh', '-c', 'for i in $(seq 40); do setsid sh -c \"while :; do :; done\" & done'])\n")


@pytest.mark.skipif(not cpu_share.available(), reason="no CPU cgroup here: " + cpu_share.describe())
def test_a_student_who_forks_busy_processes_takes_no_cpu_from_the_one_beside(tmp_path, monkeypatch):
    """Graded at once in two slots: spinning processes, each in a session of its own, in one
    student's kernel. Where the CPUs are shared by session 150 of them took 150 shares to the honest
    student's one (on this 2-core machine the pair took 101 s to grade instead of 30 s; in lesson
    11 the honest student fell from 12/12 to 2/12 by timeouts). With one CPU cgroup per sandbox
    every spinner stays in its sandbox's group, and the honest student keeps every point."""
    course, source = scratch_course(tmp_path, LESSON)
    honest = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    busy = copy.deepcopy(honest)
    busy.cells.insert(1, nbformat.v4.new_code_cell(BUSY))
    incoming = tmp_path / "incoming"
    for student, nb in (("busy", busy), ("honest", honest)):
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    in_group = []   # processes in a sandbox's CPU group when the grader stops it
    stop = sandboxed_process.SandboxedProcess.stop

    def counting_stop(self):
        if self.cpu is not None and self.alive():
            in_group.append(len(self.cpu.pids()))
        stop(self)

    end_kernel = served_kernel.ServedKernel._end_kernel

    def counting_end(self):   # a served kernel's submission ends without stopping its sandbox
        if self.cpu is not None and self.alive():
            in_group.append(len(self.cpu.pids()))
        return end_kernel(self)

    monkeypatch.setattr(sandboxed_process.SandboxedProcess, "stop", counting_stop)
    monkeypatch.setattr(sandboxed_process.SandboxedProcess, "close", counting_stop)
    monkeypatch.setattr(served_kernel.ServedKernel, "_end_kernel", counting_end)
    limits = Limits(**{**LIMITS.__dict__, "processes": 400})
    outcomes = {o.student: o for o in grade_lesson(source / LESSON, course=course, submissions=incoming,
                                                   workers=2, limits=limits, progress=False)}
    assert outcomes["honest"].score == FULL, _reason(outcomes["honest"])
    assert "timed out" not in _reason(outcomes["honest"])
    assert max(in_group, default=0) > 40, in_group   # the spinners (and the kernel) never left the group
