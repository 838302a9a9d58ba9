"""Test settings for tests/ and the notebooks (nbval): one thread for torch and BLAS (two threads
measured 20x slower), a non-interactive matplotlib backend, quiet kernels.

Lectures are executed by tests/test_lectures.py, which then checks their slides with the same
executed notebooks; nbval runs the exercises. So that no lecture runs twice in one test run,
nbval collects a lecture only when it is named on the command line
(`pytest notebooks/NN_name/lecture.ipynb`)."""
import os
from pathlib import Path

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = os.environ.get("OPENBLAS_NUM_THREADS", "1")
os.environ["MPLBACKEND"] = "Agg"
os.environ["PYTHONWARNINGS"] = "ignore"

import pytest  # noqa: E402


def pytest_configure(config):
    from course_tools.loopback import ensure_loopback

    ensure_loopback()  # notebook kernels and gloo talk over 127.0.0.1 (down under `unshare -n`)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


# The test files that take longest (each 1-5 minutes of CPU on the 2-core machine), longest
# first. `make test` runs `pytest -n 2 --dist loadfile --no-loadscope-reorder`: whole files go to
# the two workers in collection order, so starting these first keeps the run from ending with
# one long file on one worker while the other waits (xdist's own order, by number of tests,
# started test_wrong_answers.py last).
SLOWEST_FIRST = (
    "tests/test_wrong_answers.py", "tests/test_lectures.py", "tests/test_sandbox.py", "tests/test_grading.py",
    "tests/test_hub.py", "tests/test_grading_parallel_attacks.py", "tests/test_grading_shards.py",
    "tests/test_build.py", "tests/test_grading_kernels.py", "tests/test_grading_attacks.py",
    "tests/test_grading_plans.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))   # stable: others keep their order


def pytest_ignore_collect(collection_path, config):
    if collection_path.name != "lecture.ipynb" or collection_path.parent.parent.name != "notebooks":
        return None
    named = {Path(a.split("::")[0]).resolve() for a in config.invocation_params.args}
    return None if collection_path.resolve() in named else True


@pytest.fixture(scope="session")
def has_gpu():
    import torch

    return torch.cuda.is_available()
