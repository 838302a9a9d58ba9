"""Test settings for tests/ and the notebooks (nbval): one thread for torch and BLAS (two threads
measured 20x slower), a non-interactive matplotlib backend, quiet kernels.

Lectures are executed by tests/notebooks/test_lectures.py, which then checks their slides with the same
executed notebooks; each lesson's exercises (the reference solution) by tests/grading/test_wrong_answers.py,
in the grader's sandbox, every cell required to run without an error and every test cell to pass. So that
no notebook runs twice in one test run, nbval collects a lecture or an exercises notebook only when it is
named on the command line (`pytest notebooks/NN_name/lecture.ipynb`)."""
import os
import re
from pathlib import Path

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = os.environ.get("OPENBLAS_NUM_THREADS", "1")
os.environ["MPLBACKEND"] = "Agg"
os.environ["PYTHONWARNINGS"] = "ignore"

import pytest  # noqa: E402


def pytest_configure(config):
    from course_tools.loopback import ensure_loopback

    register_lesson_markers(config)

    ensure_loopback()  # notebook kernels and gloo talk over 127.0.0.1 (down under `unshare -n`)
    if config.pluginmanager.hasplugin("nbval"):
        import nbval.kernel

        from course_tools.warm_kernels import WarmKernelManager

        # nbval's kernels forked from a template that imported torch, NumPy, pyplot and ipykernel once
        nbval.kernel.KernelManager = WarmKernelManager   # (course_tools/warm_kernels.py; nbval has no option)
    if xdist_controller(config):
        return   # runs no test: its workers start sooner without importing torch (about 2.5 CPU-s)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


def xdist_controller(config) -> bool:
    """Whether this process is pytest-xdist's controller, which hands tests to workers and runs none."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


# `make test` runs `pytest -n 3 --dist loadfile --no-loadscope-reorder`: each unit of work goes
# whole to one worker, in the order below. A unit is a test file (its module fixtures, e.g. a
# graded class, are built once; a notebook's cells share one kernel), except in PER_LESSON
# files, whose tests for one lesson form a unit of their own (a lecture's run and its deck stay
# together), so the heaviest files spread over the workers (pytest_xdist_make_scheduler). The
# longest units come first (a graded class of 20 submissions before one lesson's lecture), and in
# PER_LESSON files the later lessons (the multi-process ones, the slowest) first: the CPU then
# stays busy to the end rather than one worker finishing a long unit alone.
SLOWEST_FIRST = (   # by their seconds in a full run (2-core VM, 2026-11-26), the longest first
    "tests/grading/test_sandbox.py", "tests/browser/test_hub.py", "tests/grading/test_grading_slurm.py",
    "tests/grading/test_grading_parallel_attacks.py",
    "tests/grading/test_triton_grading.py", "tests/lib/test_simt_agreement.py",
    "tests/grading/test_grading_kernels.py", "tests/grading/test_grading_attacks.py", "tests/lib/test_parallel_zero.py",
    "tests/grading/test_grading_attacks_kernels.py",
    "tests/grading/test_triton_grading_attention.py",
    "tests/grading/test_grading_shards.py", "tests/grading/test_grading_attacks_machine.py",
    "tests/grading/test_served_kernel.py",
    "tests/tools/test_build.py",
    "tests/grading/test_grading_cli_records.py", "tests/tools/test_hub_tryout.py",
    "tests/notebooks/test_lectures.py", "tests/grading/test_wrong_answers.py",   # 10-35 s per lesson
    "tests/notebooks/test_exercise_failures.py",   # 10-15 s per lesson
    "tests/grading/test_grading_attacks_records.py", "tests/grading/test_grading.py",
    "tests/lib/test_parallel_launch.py", "tests/tools/test_cli.py", "tests/grading/test_grading_intake.py",
    "tests/lib/test_parallel_ddp_ps.py",
)
PER_LESSON = ("tests/grading/test_wrong_answers.py", "tests/notebooks/test_lectures.py",
              "tests/grading/test_grading.py", "tests/notebooks/test_exercise_failures.py")
LESSON_ID = re.compile(r"\[(\d\d_\w+)")   # a test's lesson parameter, e.g. [13_sharding_and_model_parallelism]


def work_unit(nodeid: str) -> str:
    """What goes whole to one xdist worker: the file, or in PER_LESSON files the file and lesson."""
    path = nodeid.split("::", 1)[0]
    lesson = LESSON_ID.search(nodeid) if path in PER_LESSON else None
    return f"{path}::{lesson.group(1)}" if lesson else path


LESSON_OF_ITEM = re.compile(r"(?:\[|notebooks/)(\d\d)[_-]")   # [03_simt..., [03-ex7..., notebooks/03_simt.../


def register_lesson_markers(config):
    from course_tools.paths import lesson_dirs

    for lesson in lesson_dirs():
        config.addinivalue_line("markers", f"lesson{lesson.name[:2]}: tests of lesson {lesson.name} "
                                           f"(`pytest tests/grading -m lesson{lesson.name[:2]}`)")


def mark_lessons(items):
    """Each test of one lesson gets the marker ``lessonNN``: from its lesson parameter
    (``[03_simt_programming_model]``, ``[03-ex7_tiled-wrong2]``) or its notebook's folder, or the
    ``LESSON`` its file is about (``LESSON = "14_triton"``). A number that is no lesson's (a
    parameter ``[64_...]``) marks nothing: pytest would warn of an unknown marker."""
    from course_tools.paths import lesson_dirs

    lessons = {lesson.name[:2] for lesson in lesson_dirs()}
    for item in items:
        found = LESSON_OF_ITEM.search(item.nodeid)
        if found and found.group(1) in lessons:
            item.add_marker(f"lesson{found.group(1)}")
        of_file = getattr(getattr(item, "module", None), "LESSON", None)   # a file about one lesson
        if isinstance(of_file, str) and of_file[:2].isdigit():
            item.add_marker(f"lesson{of_file[:2]}")


def pytest_collection_modifyitems(config, items):
    mark_lessons(items)
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}

    def order(item):
        path, _, lesson = work_unit(item.nodeid).partition("::")
        return rank.get(path, len(rank)), [-ord(c) for c in lesson]   # later lessons first

    items.sort(key=order)   # stable: tests keep their order within a unit


@pytest.hookimpl(optionalhook=True)   # an xdist hook: unknown when pytest runs without xdist
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, with the PER_LESSON files split by lesson (see work_unit)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileOrLesson(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return FileOrLesson(config, log)


FROZEN_LESSONS = Path(__file__).resolve().parent / "tests" / "grading" / "lessons"


def pytest_ignore_collect(collection_path, config):
    """nbval collects a lesson's lecture or exercises (run by the lecture and wrong-answer tests), or a
    frozen copy of a lesson's exercises (tests/grading/lessons/, the attack tests' fixtures, whose
    reference runs in every plan those tests grade), only when it is named on the command line."""
    if collection_path.suffix != ".ipynb":
        return None
    lesson = (collection_path.name in ("lecture.ipynb", "exercises.ipynb")
              and collection_path.parent.parent.name == "notebooks")
    if not (lesson or collection_path.resolve().is_relative_to(FROZEN_LESSONS)):
        return None
    named = {Path(a.split("::")[0]).resolve() for a in config.invocation_params.args}
    return None if collection_path.resolve() in named else True


@pytest.fixture(scope="session")
def has_gpu():
    import torch

    return torch.cuda.is_available()
