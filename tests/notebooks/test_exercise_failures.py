"""What a student sees in JupyterLab when a test cell of a lesson with kernels fails (issue 39,
item 3): one line saying what was expected and what came back, then the student's lines, and
none of the library's frames (course_lib's checks, the SIMT engine, Triton's interpreter).

Each lesson's blank release, made by nbgrader as ``course release`` makes it, runs in a Jupyter
kernel as a student runs it, top to bottom: every test cell fails, each with one line naming the
function or kernel that is not answered yet. Then the student answers an exercise wrongly and
runs its test cell again: lesson 03's axpy kernel without its bounds guard (an index outside the
array), pool kernel without its barrier (a shared-memory race) and dot kernel with its barrier inside
an `if` (a barrier only part of the block reaches), lesson 14's add kernel loading
``x`` without its mask (an address outside the tensor, in Triton's interpreter) and softmax kernel
masking its lanes at the row stride instead of the row's length (item 4: the visible test now has
rows whose block reaches their padding); and issue 37's blind spots, now visible tests: lesson 14's
softmax padding loaded as -1e4 (rows far below zero) and matmul taking its strides from the shape
(nn.Linear's a @ w.T), lesson 15's attention with its running max started at 0 (scores between -3e4
and -1e4). The graded side
of the same failures (the trusted checker's message in the feedback) is tested by
tests/grading/test_wrong_answers.py (every blank exercise of every lesson),
test_grading_attacks_kernels.py and test_triton_grading.py.
"""
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from scratch_course import cell, edited, solutions

from course_tools.grading.cells import is_test_cell
from course_tools.grading.nbgrader_course import CourseDir, release
from course_tools.paths import NOTEBOOKS
from course_tools.warm_kernels import AsyncWarmKernelManager

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MAX_LINES = 4   # the message and at most three of the student's lines
STUDENTS_LINE = re.compile(r"  your cell, line \d+: ")
S03, S14, S15 = solutions("03_simt_programming_model"), solutions("14_triton"), solutions("15_attention")
# (solution cell, its answer, the test cell run again, how its failure starts): wrong answers a student
# tries after the blank
RETRIED = {
    "03_simt_programming_model": [
        ("ex1_axpy", edited(S03["ex1_axpy"], ("    if i < x.size:\n        out[i]", "    out[i]")), "ex1_kernel",
         ("CheckFailed: axpy_kernel: expected every index inside its array, got: axpy_kernel, line 8: index 200 in "
          "dimension 0 is out of bounds")),
        ("ex2_pool", edited(S03["ex2_pool"], ("    cuda.syncthreads()\n", "")), "ex2_visible",
         "CheckFailed: pool3_kernel: expected no shared-memory race, got: shared-memory race in block (0)"),
        # issue 37: the barrier inside `if t < half` (the budget cell: it runs in the SIMT engine on a GPU too)
        ("ex4_dot", edited(S03["ex4_dot"], ("products[t + half]\n        cuda.syncthreads()",
                                            "products[t + half]\n            cuda.syncthreads()")), "ex4_budget",
         ("CheckFailed: dot_kernel: expected every running thread of a block at each cuda.syncthreads(), got: barrier "
          "reached by part of block (0): the `cuda.syncthreads()` at line 12 of dot_kernel was reached by 16")),
    ],
    "14_triton": [
        ("ex1_add", edited(S14["ex1_add"], ("tl.load(x_ptr + offs, mask=mask)", "tl.load(x_ptr + offs)")), "ex1_budget",
         ("OutOfBounds: program (2, 0, 0): a tl.load at add_kernel, line 5: `x = tl.load(x_ptr + offs)`: expected "
          "every lane inside a tensor, got 84 element(s) outside the tensors it was given")),
        # issue 39, item 4: lanes masked at row_stride, not n_cols (the visible test's rows were a power of
        # two long, so no lane reached their padding and only a hidden test failed)
        ("ex2_softmax", edited(S14["ex2_softmax"], ("mask = cols < n_cols", "mask = cols < row_stride")), "ex2_visible",
         "CheckFailed: softmax_kernel on 4 rows of 12 values, 20 apart (row_stride = 20, BLOCK = 16): "),
        # issue 37: padding loaded as -1e4 instead of -inf passed every test (no row was below -1e4), and a
        # matmul that takes its strides from the shape passed them all too (every operand was contiguous)
        ("ex2_softmax", edited(S14["ex2_softmax"], ('other=-float("inf"))', "other=-1.0e4)")), "ex2_stable",
         "CheckFailed: softmax_kernel on rows of 13 values around -1e4, -2e4 and -3e4 (20 apart, BLOCK = 16): "),
        ("ex4_matmul", edited(S14["ex4_matmul"], ("rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak",
                                                  "rm[:, None] * K + (k + rk)[None, :]"),
                              ("(k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn",
                               "(k + rk)[:, None] * N + rn[None, :]")),
         "ex4_visible", "CheckFailed: matmul_kernel on a @ w.T (16 x 32 @ 32 x 48; b = w.T has strides (1, 32)): "),
    ],
    "15_attention": [
        # issue 37: a running max started at 0 passed every visible test (some score of each row was above 0)
        ("ex2_attention", edited(S15["ex2_attention"], ('m = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)',
                                                        "m = tl.zeros((BLOCK_M,), dtype=tl.float32)")), "ex2_stable",
         "CheckFailed: attention_kernel on scores between -3e4 and -1e4, n = 37, causal = False: "),
    ],
}


def _released(lesson: str, root: Path) -> Path:
    """``lesson``'s folder in a scratch course's release/ at ``root``, released by nbgrader."""
    shutil.copytree(NOTEBOOKS / lesson, root / "source" / lesson)
    return release(CourseDir(root, root / "source"), lesson)


def _grade_id(c):
    return c.metadata.get("nbgrader", {}).get("grade_id")


def _errors(c) -> list[str]:
    """The error a cell shows, as lines of text (IPython's colours removed); [] if none."""
    found = [o for o in c.get("outputs", []) if o.get("output_type") == "error"]
    return [ANSI.sub("", line) for out in found for text in out["traceback"] for line in text.splitlines()]


def _as_a_student(folder):
    """The blank release with, after it, each retried answer and a copy of its test cell; run top
    to bottom in a Jupyter kernel in the lesson's folder. Returns (the blank's test cells, the
    retried test cells), executed."""
    nb = nbformat.read(str(folder / "exercises.ipynb"), as_version=4)
    blank_tests = [c for c in nb.cells if is_test_cell(c)]
    retried = []
    for _, answer, test, expected in RETRIED[folder.name]:
        nb.cells.append(nbformat.v4.new_code_cell(answer))
        retried.append(nbformat.v4.new_code_cell(cell(nb, test).source,
                                                 metadata={"retried": test, "expected": expected}))
        nb.cells.append(retried[-1])
    # a kernel forked from a template that imported torch, NumPy and ipykernel (warm_kernels), killed
    # once the last cell's outputs are in (a graceful exit of an interpreter with torch costs 1 s of CPU)
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True, shutdown_kernel="immediate",
                   kernel_manager_class=AsyncWarmKernelManager, resources={"metadata": {"path": str(folder)}}).execute()
    return blank_tests, retried


@pytest.mark.timeout(600)
@pytest.mark.parametrize("lesson", list(RETRIED))
def test_test_cells_say_in_one_line_what_failed_and_show_only_the_students_lines(lesson, tmp_path):
    blank_tests, retried = _as_a_student(_released(lesson, tmp_path))
    shown = {_grade_id(c): _errors(c) for c in blank_tests}
    assert all(shown.values()), f"test cells of the blank that do not fail: {[g for g, e in shown.items() if not e]}"
    unclear = {gid: lines for gid, lines in shown.items()
               if not (lines[0].startswith("NotAnswered: ") and " is not answered yet: write it where it says "
                       "# YOUR CODE HERE" in lines[0])}
    assert not unclear, unclear
    for c in retried:
        lines = _errors(c)
        assert lines and lines[0].startswith(c.metadata["expected"]), lines
        shown[c.metadata["retried"] + " (retried)"] = lines
    long = {gid: lines for gid, lines in shown.items()
            if len(lines) > MAX_LINES or not all(STUDENTS_LINE.match(line) for line in lines[1:])}
    assert not long, long
