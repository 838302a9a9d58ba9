"""Kernels forked from a template (course_tools/warm_kernels.py), as `course build`, the lecture
tests and nbval get them: each notebook's kernel is a fresh process that keeps nothing of the
last one (globals, module attributes, random states), runs in the notebook's folder, draws inline
images, can be interrupted, is reported when it dies, and leaves nothing running after it, nor
after its owner dies."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError, DeadKernelError

from course_tools import warm_kernels
from course_tools.build import execute_notebook
from course_tools.paths import REPO


def _run(folder: Path, *sources: str):
    """The notebook of these code cells, executed as `course build` executes a lecture."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / "notebook.ipynb"
    nbformat.write(nb, str(path))
    return execute_notebook(path, timeout=120)


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def _gone(pid: int, seconds: float = 10) -> bool:
    """The process ``pid`` has ended (a zombie counts as ended)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _template_pids() -> set:
    return {t.proc.pid for t in warm_kernels._TEMPLATES}


STATE = """import os, random, sys, numpy, torch
print(os.getpid(), os.getppid(), numpy.random.rand(), random.random(), torch.rand(1).item(),
      'leftover' in globals(), hasattr(torch, 'leftover'), 'zipapp' in sys.modules, sep='|')
leftover = 1
torch.leftover = 1
import zipapp"""


def test_each_notebook_gets_a_fresh_fork_in_its_own_folder(tmp_path):
    first = _text(_run(tmp_path, STATE).cells[0]).strip().split("|")
    (tmp_path / "other").mkdir()
    second, cwd = (_text(c).strip() for c in _run(tmp_path / "other", STATE, "import os; print(os.getcwd())").cells)
    second = second.split("|")
    assert first[1] == second[1] in {str(p) for p in _template_pids()}   # forks of one template
    assert first[0] != second[0]                                          # two processes
    assert first[2:5] != second[2:5] and all(a != b for a, b in zip(first[2:5], second[2:5]))   # random states
    assert first[5:] == second[5:] == ["False", "False", "False"]        # nothing of the last notebook
    assert cwd == str(tmp_path / "other")
    assert _gone(int(first[0])) and _gone(int(second[0]))                 # killed once done


def test_figures_are_inline_images(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")   # as the test suite sets it: execute_notebook drops it
    cell = _run(tmp_path, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]);").cells[0]
    assert [o.output_type for o in cell.outputs] == ["display_data"]
    assert "image/png" in cell.outputs[0].data


def test_an_error_is_reported_with_its_cell(tmp_path):
    with pytest.raises(CellExecutionError, match="ZeroDivisionError"):
        _run(tmp_path, "1 / 0")


def test_a_kernel_that_dies_is_reported(tmp_path):
    with pytest.raises(DeadKernelError):
        _run(tmp_path, "import os\nos._exit(3)")


def test_a_kernel_is_interrupted_and_its_exit_code_known(tmp_path):
    km = warm_kernels.WarmKernelManager(kernel_name="python3")
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}   # execute_notebook's: its template
    km.start_kernel(cwd=str(tmp_path), env=env)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        assert isinstance(km.provisioner.process, warm_kernels.ForkedKernel)
        msg_id = kc.execute("import time\nfor _ in range(600): time.sleep(0.1)")
        time.sleep(1)
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=30)
        while reply["parent_header"].get("msg_id") != msg_id:   # kernel_info's, from wait_for_ready
            reply = kc.get_shell_msg(timeout=30)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        assert km.is_alive()
        # ipykernel answers "aborted" to requests that arrive while it still aborts the queue behind
        # the interrupted cell's error (a short window, longer on a loaded machine): wait until one runs
        for _ in range(50):
            if kc.execute_interactive("pass", timeout=30)["content"]["status"] == "ok":
                break
            time.sleep(0.1)
        kc.execute("import os\nos._exit(7)")
        deadline = time.monotonic() + 30
        while km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert km.provisioner.process.poll() == 7
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


OWNER = """
import os, sys, time
from course_tools.warm_kernels import WarmKernelManager
km = WarmKernelManager(kernel_name="python3")
km.start_kernel()
kc = km.client(); kc.start_channels(); kc.wait_for_ready(timeout=60)
from course_tools import warm_kernels
print(warm_kernels._TEMPLATES[0].proc.pid, km.provisioner.pid, flush=True)
time.sleep(600)
"""


def test_nothing_is_left_running_when_the_templates_close_or_the_owner_dies(tmp_path):
    km = warm_kernels.WarmKernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path), env={k: v for k, v in os.environ.items() if k != "MPLBACKEND"})
    kernel, templates = km.provisioner.pid, _template_pids()
    warm_kernels.close_templates()
    assert _gone(kernel) and all(_gone(t) for t in templates)
    assert not km.is_alive()
    km.cleanup_resources()

    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(OWNER)], cwd=REPO, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        template, kernel = (int(p) for p in owner.stdout.readline().split())
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        assert _gone(template) and _gone(kernel)
    finally:
        owner.kill()
        owner.wait()
