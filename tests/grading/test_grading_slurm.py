"""`course grade LESSON --slurm N` through a real Slurm cluster of one node (issue 39).

The module's cluster (fixture ``cluster``): Debian's slurm-wlm and munge, installed with
apt-get when missing; munged, slurmctld and slurmd started as root, with all they keep (munge
key and socket, state, spool, logs, pid files) in a temporary folder and on free ports: one
node, this machine with the CPUs and memory ``slurmd -C`` finds, processes tracked through
/proc and no cgroups (proctrack/linuxproc, task/none). At the end the jobs left are cancelled,
the daemons stopped by their pid files and the folder removed. Skipped, saying why, when this
is not root, Slurm is missing and apt-get cannot install it, or there is no sandbox.

The class (lesson 00, frozen): eight students, the reference, the blank, two wrong answers, a
half-done notebook and three refused (a folder named "Jane Doe", a notebook that is no JSON, one
saved as Exercises.ipynb), and a stray file at the top. A copy of the course
(its own .venv: ``course_copy.linked_venv``) submits it with ``course grade 00 --slurm 4``, as a
grader on a login node would: a job array of 4 shards that run as the node's CPUs allow, each
taking in and grading its own students in the sandbox, then the merge job after them. The
merged CSV (but its seconds) and the gradebook's scores must be those of the same class graded
on this machine in one process. The copy starts with that run's lesson plan, as a second run of
a class does, so the shards do not each grade the reference again.
"""
import copy
import csv
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from course_copy import copy_gradebook_cache, linked_venv
from free_ports import free_port_range
from scratch_course import FROZEN, cell, edited, scratch_course, solutions

from course_tools import cli
from course_tools.grade_slurm import GRADER_GIB
from course_tools.grading import sandbox
from course_tools.grading.grade import grade_lesson
from course_tools.grading.sandbox import Limits
from course_tools.paths import REPO

LESSON = "00_setup"
SHARDS = 4
LIMIT_FLAGS = ["--cell-timeout", "60", "--notebook-timeout", "300", "--memory-gib", "1"]
LIMITS = Limits(memory_bytes=2**30, cell_seconds=60, notebook_seconds=300)   # what LIMIT_FLAGS give
SHARD_MIB = (1 + GRADER_GIB) * 1024   # the memory a shard asks for: one 1 GiB sandbox and the grader
DAEMONS = ("slurmd", "slurmctld", "munged")   # stopped in this order
pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())]


def _apt_install() -> str | None:
    """Install slurm-wlm and munge with apt-get (its lists updated if it knows no such package);
    why not, or None once installed."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "slurm-wlm", "munge"]
    done = subprocess.run(install, capture_output=True, text=True, env=env, timeout=600, check=False)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, timeout=300, check=False)
        done = subprocess.run(install, capture_output=True, text=True, env=env, timeout=600, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"apt-get install slurm-wlm munge failed ({last})"
    return None


def _why_no_slurm() -> str | None:
    """Why this machine cannot run the test's cluster (None: it can, Slurm installed now)."""
    tools = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "slurmctld", "slurmd", "munged")
    if all(shutil.which(t) for t in tools):
        if os.geteuid() != 0:
            return "slurmctld and slurmd run as root in this test; not root here"
        return _why_no_address()
    if os.geteuid() != 0:
        return "Slurm is not installed and only root can install it (apt-get install slurm-wlm munge)"
    if not shutil.which("apt-get"):
        return "Slurm is not installed and there is no apt-get to install Debian's slurm-wlm and munge"
    return _apt_install()


def _why_no_address() -> str | None:
    """Slurm resolves its hosts with AI_ADDRCONFIG, which finds no IPv4 address on a machine whose
    only interface is loopback (a network namespace with ``lo`` alone): the daemons cannot start."""
    try:
        socket.getaddrinfo("127.0.0.1", None, socket.AF_INET, 0, 0, socket.AI_ADDRCONFIG)
    except socket.gaierror:
        return "this machine has no network interface but loopback, and Slurm resolves 127.0.0.1 only beside one"
    return None


def _node() -> dict:
    """This machine as Slurm sees it: ``slurmd -C``'s NodeName, CPUs and RealMemory (MiB)."""
    line = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    found = dict(word.split("=", 1) for word in line.split() if "=" in word)
    return {"name": socket.gethostname().split(".")[0], "cpus": found["CPUs"], "memory": found["RealMemory"]}


def _slurm_conf(top: Path, node: dict, port: int) -> str:
    """A one-node cluster on loopback, everything it keeps under ``top``."""
    return "\n".join([
        "ClusterName=coursetest", f"SlurmctldHost={node['name']}(127.0.0.1)",
        f"SlurmctldPort={port}", f"SlurmdPort={port + 1}", "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", f"AuthInfo=socket={top}/munge-run/socket", "CredType=cred/munge",
        f"StateSaveLocation={top}/state", f"SlurmdSpoolDir={top}/spool",
        f"SlurmctldPidFile={top}/slurmctld.pid", f"SlurmdPidFile={top}/slurmd.pid",
        f"SlurmctldLogFile={top}/slurmctld.log", f"SlurmdLogFile={top}/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none", "ReturnToService=2",
        f"NodeName={node['name']} NodeAddr=127.0.0.1 CPUs={node['cpus']} RealMemory={node['memory']} State=UNKNOWN",
        "PartitionName=grading Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""])


def _start(top: Path, env: dict) -> None:
    """munged, slurmctld and slurmd (each daemonises, writing its pid file); then wait for the
    node to be idle. RuntimeError with the logs' last lines when it is not within 60 s."""
    for name in ("munge-key", "munge-run", "state", "spool"):
        (top / name).mkdir(mode=0o700 if name == "munge-key" else 0o755)
    (top / "munge-key" / "munge.key").write_bytes(os.urandom(1024))
    os.chmod(top / "munge-key" / "munge.key", 0o600)
    node = _node()
    (top / "slurm.conf").write_text(_slurm_conf(top, node, free_port_range(2)))
    subprocess.run(["munged", "--force", f"--key-file={top}/munge-key/munge.key",
                    f"--socket={top}/munge-run/socket", f"--pid-file={top}/munged.pid",
                    f"--log-file={top}/munged.log", f"--seed-file={top}/munge-key/seed"],
                   check=True, env=env, capture_output=True)
    subprocess.run(["slurmctld", "-c"], check=True, env=env, capture_output=True)
    subprocess.run(["slurmd", "-N", node["name"]], check=True, env=env, capture_output=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=env, check=False)
        if state.stdout.strip() == "idle":
            return
        time.sleep(0.5)
    raise RuntimeError("the Slurm node is not idle after 60 s "
                       f"(sinfo: {state.stdout.strip() or state.stderr.strip()}); "
                       + _logs(top, "slurmctld.log", "slurmd.log", "munged.log"))


def _logs(folder: Path, *names: str, lines: int = 15) -> str:
    """The last lines of each log named, for a failure's message."""
    return "\n".join(f"--- {name}:\n" + "\n".join((folder / name).read_text(errors="replace").splitlines()[-lines:])
                     for name in names if (folder / name).is_file())


def _stop(top: Path, env: dict) -> None:
    """Cancel what is left of this cluster's jobs, then end each daemon by its pid file (SIGTERM,
    then SIGKILL after 30 s), waiting for it to be gone."""
    subprocess.run(["scancel", "--full", "--user=root"], env=env, capture_output=True, timeout=60, check=False)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and subprocess.run(
            ["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, check=False).stdout.strip():
        time.sleep(0.5)
    for daemon in DAEMONS:
        pid_file = top / f"{daemon}.pid"
        pid = int(pid_file.read_text().split()[0]) if pid_file.is_file() else None
        if pid is None or not Path(f"/proc/{pid}").exists():
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster():
    """{"env": the environment whose SLURM_CONF is this cluster's, "top": its folder}."""
    why = _why_no_slurm()
    if why:
        pytest.skip(why)
    if int(_node()["memory"]) < SHARD_MIB:
        pytest.skip(f"Slurm finds {_node()['memory']} MiB here; each shard of the test asks for {SHARD_MIB} MiB")
    top = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))   # short: the munge socket's path
    os.chmod(top, 0o755)
    env = {**os.environ, "SLURM_CONF": str(top / "slurm.conf")}
    try:
        _start(top, env)
        yield {"env": env, "top": top}
    finally:
        _stop(top, env)
        shutil.rmtree(top, ignore_errors=True)


def _class(blank) -> dict:
    """{path in the class folder: a notebook, or a file's text}: eight students and a stray file."""
    answers = solutions(LESSON)

    def answered(*grade_ids, **changed):
        nb = copy.deepcopy(blank)
        for gid in grade_ids:
            cell(nb, gid).source = changed.get(gid, answers[gid])
        return nb

    every = ("ex1_nbytes", "ex2_device", "ex3_training", "ex4_timer")
    no_itemsize = edited(answers["ex1_nbytes"], ("return count * np.dtype(dtype).itemsize", "return count"))
    no_backward = edited(answers["ex3_training"], ("return 3 * forward_flops", "return forward_flops"))
    return {"ann/exercises.ipynb": answered(*every), "bob/exercises.ipynb": answered(),
            "cy/exercises.ipynb": answered(*every, ex1_nbytes=no_itemsize),
            "dee/exercises.ipynb": answered(*every, ex3_training=no_backward),
            "gil/exercises.ipynb": answered("ex1_nbytes", "ex2_device"),
            "Jane Doe/exercises.ipynb": answered(*every), "kim/exercises.ipynb": '{"cells": [',
            "lee/Exercises.ipynb": answered(*every), "notes.txt": "my notes"}


def _write_class(incoming: Path, blank) -> None:
    for rel, content in _class(blank).items():
        (incoming / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            (incoming / rel).write_text(content)
        else:
            nbformat.write(content, str(incoming / rel))


def _course_copy(dest: Path) -> Path:
    """The course's code (with its compiled modules, still valid: the copies keep their times),
    the frozen lesson 00 as its only lesson, a .venv of its own (``linked_venv``) and this
    checkout's empty gradebook (``empty_gradebook``'s cache, as in a course that made one before:
    making it asks alembic in a subprocess, about 4 CPU-s of the submitting command)."""
    for name in ("course_tools", "course_lib", "data"):
        shutil.copytree(REPO / name, dest / name)
    copy_gradebook_cache(REPO, dest)
    shutil.copy2(REPO / "nbgrader_config.py", dest)
    shutil.copytree(FROZEN / LESSON, dest / "notebooks" / LESSON)
    linked_venv(dest)
    return dest


# the frozen lesson 00's timer tests measure sleeps: a machine loaded by other tests can fail
# them for an honest timer on one side and not the other, so the comparison leaves them out
# (and the score with them: it is compared without their points)
TIMED = ("ex4_visible", "ex4_hidden")


def _rows(root: Path) -> list[dict]:
    """The grades CSV, without its wall-clock column and the timed tests' columns; the score is
    what the untimed tests earned."""
    with open(root / "build" / f"grades_{LESSON}.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        if row["score"]:
            row["score"] = f"{float(row['score']) - sum(float(row[t] or 0) for t in TIMED):g}"
    return [{k: v for k, v in row.items() if k != "seconds" and k not in TIMED} for row in rows]


def _gradebook(root: Path) -> dict:
    """Each student's score in the gradebook, as the grades CSV reports it (untimed tests only)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        out = {}
        for sub in gb.find_assignment(LESSON).submissions:
            grades = gb.find_submission_notebook("exercises", LESSON, sub.student.id).grades
            out[sub.student.id] = f"{sub.score - sum(g.score for g in grades if g.name in TIMED):g}"
        return out


def _wait_for_jobs(env: dict, seconds: float) -> None:
    """Until this cluster has no job left (pending or running), at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True,
                              check=True).stdout.strip():
            return
        time.sleep(1)
    raise AssertionError(f"Slurm jobs still queued or running after {seconds:.0f} s")


def _job_state(env: dict, job: str) -> str:
    shown = subprocess.run(["scontrol", "-o", "show", "job", job], env=env, capture_output=True, text=True,
                           check=True).stdout
    return re.search(r"JobState=(\S+)", shown).group(1) + " " + re.search(r"ExitCode=(\S+)", shown).group(1)


@pytest.mark.timeout(1200)
def test_a_class_graded_in_four_slurm_shards_equals_one_machines_grading(cluster, tmp_path):
    one, _ = scratch_course(tmp_path / "one", LESSON)   # this machine, one process
    blank = nbformat.read(str(one.root / "release" / LESSON / "exercises.ipynb"), as_version=4)
    incoming = tmp_path / "incoming"
    _write_class(incoming, blank)
    # one slot: the comparison needs the grades, not parallel grading, and a second slot would
    # start a kernel and a checker template of its own (torch imported twice more, about 3 CPU-s)
    grade_lesson(one.source / LESSON, course=one, submissions=incoming, limits=LIMITS, progress=False,
                 feedback=False, workers=1)
    copy = _course_copy(tmp_path / "course")
    (copy / "build" / "grading" / LESSON).mkdir(parents=True)
    shutil.copy2(one.root / "build" / "grading" / LESSON / "plan.json", copy / "build" / "grading" / LESSON)
    submitted = subprocess.run(
        [str(copy / ".venv" / "bin" / "python"), "-m", "course_tools.cli", "grade", "00", "--slurm", str(SHARDS),
         "--submissions", str(incoming), *LIMIT_FLAGS], cwd=copy, env=cluster["env"], capture_output=True,
        text=True, timeout=300, check=False)
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    jobs = re.search(rf"Slurm job (\d+) grades {SHARDS} shard\(s\) .* job (\d+) merges them after", submitted.stdout)
    assert jobs, submitted.stdout
    array, merge = jobs.groups()
    slurm_dir = copy / "build" / "grading" / LESSON / "slurm"
    script = (slurm_dir / "shards.sbatch").read_text()
    assert "#SBATCH --array=0-3\n" in script and '--shard "$SLURM_ARRAY_TASK_ID/4"' in script
    try:
        _wait_for_jobs(cluster["env"], 900)
    finally:
        logs = _logs(slurm_dir, *[f"shard-{i}.out" for i in range(SHARDS)], "merge.out")
    assert _job_state(cluster["env"], merge) == "COMPLETED 0:0", logs
    for index in range(SHARDS):   # each task ran its shard, through to its results
        shard_log = (slurm_dir / f"shard-{index}.out").read_text()
        assert f"shard {index}/{SHARDS} done" in shard_log and " / 0 " not in shard_log, logs
    assert _rows(copy) == _rows(one.root), logs
    scores = {row["student"]: row["score"] for row in _rows(one.root)}
    assert _gradebook(copy) == _gradebook(one.root) == {s: v for s, v in scores.items() if v}
    assert scores == {"Jane Doe": "", "ann": "7", "bob": "0", "cy": "5", "dee": "4", "gil": "4", "kim": "",
                      "lee": "", "notes.txt": ""}, scores   # out of 7: the 3 timed points left out
    graded = {s for s, score in scores.items() if score}
    assert {p.parent.parent.name for p in (copy / "feedback").glob(f"*/{LESSON}/exercises.html")} == graded
    assert not (copy / "build" / "grading" / LESSON / "shards").exists()   # merged, then removed
    assert array != merge


@pytest.mark.parametrize("flags, says", [
    (["--slurm", "0"], "--slurm 0: give 1 to 1000 shards (tasks of one Slurm job array)"),
    (["--slurm", "4", "--merge"], "--slurm submits the shards and their merge itself: give it without --shard and"),
    (["--slurm", "4", "--shard", "0/4"], "--slurm submits the shards and their merge itself"),
])
def test_bad_slurm_requests_get_one_line(flags, says, capsys):
    assert cli.main(["grade", "00", *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"course grade: {says}") and len(err.strip().splitlines()) == 1, err


def test_without_sbatch_slurm_says_where_to_run(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))   # no sbatch on it
    assert cli.main(["grade", "00", "--slurm", "4"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("course grade: --slurm submits jobs with Slurm's sbatch, which is not on PATH here: run it "
                   "where you submit jobs (a login node)"), err


def test_each_shard_takes_in_only_its_own_students(tmp_path):
    """Shards started together (a job array) each copy into submitted/ only the students they
    grade, and cut the class alike: a shard that took in the whole class replaced folders that
    another shard was grading."""
    from course_tools.grading.grade import _take_in
    from course_tools.grading.nbgrader_course import CourseDir

    incoming = tmp_path / "incoming"
    for entry in ("ann", "bob", "cy", "dee", "eve", "Jane Doe"):
        (incoming / entry).mkdir(parents=True)
        (incoming / entry / "exercises.ipynb").write_text("{}")
    (incoming / "notes.txt").write_text("my notes")
    rows = ["Jane Doe", "ann", "bob", "cy", "dee", "eve", "notes.txt"]
    course = CourseDir(tmp_path / "course", tmp_path / "source")
    submitted, before = course.root / "submitted", set()
    for index in (1, 0, 2):
        refused, _, everyone = _take_in(course, LESSON, incoming, False, (index, 3))
        assert everyone == rows and set(refused) <= set(rows[index::3])
        now = {p.name for p in submitted.iterdir()}
        assert now - before == set(rows[index::3]) - set(refused)
        for student in now - before:   # while this shard grades it, no other shard replaces its copy
            (submitted / student / LESSON / "being-graded").touch()
        before = now
    assert before == {"ann", "bob", "cy", "dee", "eve"}
    assert all((submitted / student / LESSON / "being-graded").exists() for student in before)
