"""`course grade LESSON --slurm N`: one lesson graded in N shards on a Slurm cluster, then merged.

``submit`` writes two batch scripts under ``build/grading/<lesson>/slurm/`` (their text comes
from ``job_script`` alone) and submits them with ``sbatch``: ``shards.sbatch``, a job array
(``#SBATCH --array=0-<N-1>``) whose task ``I`` runs ``course grade LESSON --shard I/N`` with the
options given to ``--slurm``, and ``merge.sbatch``, submitted with
``--dependency=afterany:<array job>``, which runs ``course grade LESSON --merge`` once every task
has ended, however it ended (a shard that stopped before writing its results makes the merge
refuse, naming it, in ``merge.out``; a shard's student that could not be graded is a row that
says so). Each task asks for one CPU per ``--workers`` and the memory of its sandboxes
(``--memory-gib`` each) plus ``GRADER_GIB`` for the grader itself; a partition, account or time
limit comes from sbatch's own environment variables (``SBATCH_PARTITION``, ``SBATCH_ACCOUNT``,
``SBATCH_TIMELIMIT``), which take precedence over the scripts' lines. The course folder and the
Python environment that runs ``course`` must be at the same path on every node (shared storage).

Before submitting (nothing here runs student code): the grader's student version of the lesson
is generated and the gradebook told of the lesson, once (``student_version``), so that shards
starting together do not each write the gradebook; the shards and logs of an earlier run are
removed (the merge reads every shard folder there is).
"""
from __future__ import annotations

import math
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .command_common import CourseError
from .paths import BUILD, REPO

GRADER_GIB = 2   # GiB a job asks for besides its sandboxes: the grader's Python, nbgrader, the merge


def job_script(purpose: str, directives: dict[str, str], course_args: list[str]) -> str:
    """A batch script: a comment saying ``purpose``, one ``#SBATCH --name=value`` line per
    directive, then ``course`` (this Python, in the course folder) run with ``course_args``,
    which are shell words (quoted by the caller)."""
    return "\n".join([
        "#!/bin/bash",
        f"# {purpose}",
        *(f"#SBATCH --{name}={value}" for name, value in directives.items()),
        "set -eu",
        f"cd {shlex.quote(str(REPO))}",
        f"exec {shlex.quote(sys.executable)} -m course_tools.cli {' '.join(course_args)}",
        ""])


def shard_options(args) -> list[str]:
    """The options of ``course grade --slurm`` that each shard is run with, as shell words."""
    words = ["--workers", str(args.workers), "--cell-timeout", f"{args.cell_timeout:g}",
             "--notebook-timeout", f"{args.notebook_timeout:g}", "--memory-gib", f"{args.memory_gib:g}"]
    if args.submissions:
        words[:0] = ["--submissions", str(Path(args.submissions).resolve())]
    for flag in ("no_feedback", "gpu", "no_sandbox_i_trust_this_code"):
        if getattr(args, flag):
            words.append("--" + flag.replace("_", "-"))
    return [shlex.quote(w) for w in words]


def scripts(lesson: str, count: int, args, folder: Path) -> dict[str, str]:
    """{file name: text} of the two batch scripts that grade ``lesson`` in ``count`` shards
    (logs in ``folder``)."""
    shard_lines = {"job-name": f"grade-{lesson}", "array": f"0-{count - 1}", "output": f"{folder}/shard-%a.out",
                   "cpus-per-task": str(args.workers),
                   "mem": f"{math.ceil(args.workers * args.memory_gib + GRADER_GIB)}G"}
    if args.gpu:
        shard_lines["gres"] = "gpu:1"
    merge_lines = {"job-name": f"merge-{lesson}", "output": f"{folder}/merge.out", "cpus-per-task": "1",
                   "mem": f"{GRADER_GIB}G"}
    shard = job_script(f"written by `course grade {lesson} --slurm {count}`: task I of this array grades "
                       f"shard I of {count} (then merge.sbatch merges them)", shard_lines,
                       ["grade", shlex.quote(lesson), "--shard", f'"$SLURM_ARRAY_TASK_ID/{count}"',
                        *shard_options(args)])
    merge = job_script(f"written by `course grade {lesson} --slurm {count}`: run after every task of "
                       "shards.sbatch has ended (--dependency=afterany:<its job>)", merge_lines,
                       ["grade", shlex.quote(lesson), "--merge"])
    return {"shards.sbatch": shard, "merge.sbatch": merge}


def _sbatch(sbatch: str, words: list[str]) -> str:
    """``sbatch --parsable WORDS``: the id of the job submitted; CourseError with sbatch's own
    last line when it refuses."""
    try:
        done = subprocess.run([sbatch, "--parsable", *words], capture_output=True, text=True, timeout=120,
                              check=False)
    except subprocess.TimeoutExpired:
        raise CourseError(f"sbatch {words[-1]} did not answer in 120 s (is slurmctld up? try sinfo)") from None
    if done.returncode != 0 or not done.stdout.strip():
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise CourseError(f"sbatch {words[-1]} refused: {why}")
    return done.stdout.strip().split(";")[0]   # --parsable: "id" or "id;cluster"


def submit(lesson_dir: Path, args) -> int:
    """Submit ``args.slurm`` shards of the lesson and their merge; print the job ids, scripts and
    where the logs and grades will be. CourseError (one line) when sbatch is missing or refuses."""
    from .grading.nbgrader_course import CourseDir, student_version
    from .grading.results import shard_dir
    from .paths import NOTEBOOKS

    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise CourseError("--slurm submits jobs with Slurm's sbatch, which is not on PATH here: run it where "
                          "you submit jobs (a login node)")
    lesson, count = lesson_dir.name, args.slurm
    course = CourseDir(REPO, NOTEBOOKS)
    student_version(course, lesson)   # once, before N shards would each write the gradebook
    folder = BUILD / "grading" / lesson / "slurm"
    for old in (folder, shard_dir(course, lesson, 0, 1).parent):
        shutil.rmtree(old, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, text in scripts(lesson, count, args, folder).items():
        (folder / name).write_text(text)
    array = _sbatch(sbatch, [str(folder / "shards.sbatch")])
    try:
        merge = _sbatch(sbatch, [f"--dependency=afterany:{array}", str(folder / "merge.sbatch")])
    except CourseError as exc:
        raise CourseError(f"{exc}; the shards were submitted as job {array}: submit the merge with "
                          f"sbatch --dependency=afterany:{array} {folder / 'merge.sbatch'}") from None
    shown = folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder
    print(f"{lesson}: Slurm job {array} grades {count} shard(s) ({shown}/shards.sbatch), "
          f"job {merge} merges them after ({shown}/merge.sbatch)")
    print(f"logs: {shown}/shard-<I>.out and merge.out; squeue -j {array},{merge} shows what is left")
    print(f"when job {merge} has ended: {BUILD / f'grades_{lesson}.csv'}"
          + ("" if args.no_feedback else f" and {REPO / 'feedback'}/<student>/{lesson}/"))
    return 0
