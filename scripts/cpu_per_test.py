"""CPU seconds per test, every process a test starts counted (sandboxed kernels, checkers,
torchrun workers, Chromium), for finding where `make test`'s time goes.

A pytest plugin: each xdist worker moves itself into a cgroup-v1 ``cpuacct`` group of its own
(``/sys/fs/cgroup/cpuacct/cpu_per_test_<worker>``; root only), which every child joins and no
reparenting leaves, and writes one JSON line per test (node id, CPU seconds, wall seconds) to
``$CPU_PER_TEST_OUT/<worker>.jsonl`` (default ``build/cpu-per-test``). A module fixture's setup
counts in its first test, its teardown in its last. Run::

    PYTHONPATH=scripts .venv/bin/python -m pytest -p cpu_per_test -n 3 --dist loadfile --no-loadscope-reorder
    .venv/bin/python scripts/cpu_per_test.py            # CPU seconds per file and per xdist unit

``/usr/bin/time`` undercounts such a run (sandboxed processes are not its children's children
when it reads them); the cgroup does not.
"""
from __future__ import annotations

import collections
import json
import os
import sys
import time
from pathlib import Path

import pytest

GROUPS = Path("/sys/fs/cgroup/cpuacct")
OUT = Path(os.environ.get("CPU_PER_TEST_OUT", "build/cpu-per-test"))
_state: dict = {}


def _cpu_seconds() -> float:
    return int((_state["group"] / "cpuacct.usage").read_text()) / 1e9


def pytest_configure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    group = GROUPS / f"cpu_per_test_{worker}"
    group.mkdir(exist_ok=True)
    (group / "cgroup.procs").write_text(str(os.getpid()))
    OUT.mkdir(parents=True, exist_ok=True)
    _state.update(group=group, log=open(OUT / f"{worker}.jsonl", "a"))   # noqa: SIM115 - open for the run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    _state["log"].write(json.dumps({"id": item.nodeid, "cpu": _cpu_seconds() - cpu,
                                    "wall": time.monotonic() - wall}) + "\n")
    _state["log"].flush()


def summary(out: Path = OUT, top: int = 40) -> str:
    """CPU seconds per test file, the largest first, and the total."""
    by_file: collections.Counter = collections.Counter()
    for log in out.glob("*.jsonl"):
        for line in log.read_text().splitlines():
            row = json.loads(line)
            by_file[row["id"].split("::")[0]] += row["cpu"]
    lines = [f"{len(by_file)} files, {sum(by_file.values()):.0f} CPU-s in all"]
    lines += [f"{cpu:8.1f}  {name}" for name, cpu in by_file.most_common(top)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
