"""Kernels that cheat the tests of lessons 03 and 04 (issue 26, attacks 1 and 2), graded as a class
by the real ``grade_lesson``, one batch per lesson.

1. **Overwriting the inputs.** A kernel that zeroes ``x`` (or sets ``y = -alpha * x``) and never
   writes ``out`` passed, because the test computed its expected value from the input arrays
   after the launch: 19/19 in lesson 03, 12/22 in lesson 04. The test cells now launch through
   ``course_lib.checks.kernel_launch.launch_checked``: the kernel gets copies, the expected values
   come from the arrays the test generated, and an input that comes back changed fails the cell
   with a message naming it.
2. **Reading through atomics.** ``cuda.atomic.add(a, i, 0.0)`` returned ``a[i]`` but was counted
   as an atomic only, so naive kernels met every read budget (19/19 where plain reads score
   9/19). The SIMT engine now counts every atomic as one atomic and as the read and the write
   it makes.

Issue 35 added lesson 03's transposes to the input-overwriting kernels (every one of its eight
kernel exercises now scores 0; the attack's one point is ``blocks_needed``'s, the one exercise
that is plain Python, written honestly), and naive transposes diluted with one lane's cheap
rewrites (item 5) or run one lane at a time, which must lose the cells that judge sectors per
warp and bank conflicts.

Per lesson the class is: the reference (full marks; ``honest``, the plan's own run of it, graded
once), the blank release (0), the input-overwriting kernels (only the non-kernel exercises'
points), naive kernels reading through atomics (every correctness cell, no budget cell of those
exercises: what plain naive reads earn) and, in lesson 03, the diluted and the one-lane-at-a-time
transposes and the pool kernel without its barrier (a race), each the blank with only that kernel
answered (as the other attack classes: no second run of the lesson's other kernels). A few cheap unit tests of
``launch_checked`` come first, and one of a checker that dies (its signal reported, not a
time-out). Skipped (the graded part) where bubblewrap cannot run.
"""
import copy
import html
import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import numpy as np
import pytest
from scratch_course import not_passed_in_checker, scratch_course

from course_lib import hardware
from course_lib.checks.core import CheckFailed
from course_lib.checks.kernel_launch import launch_checked
from course_tools.grading import sandbox
from course_tools.grading.execute import execute_submission
from course_tools.grading.grade import grade_lesson
from course_tools.grading.plan import lesson_facts
from course_tools.grading.sandbox import Limits
from course_tools.paths import NOTEBOOKS

cuda = hardware.numba_cuda()   # before anything imports numba.cuda: it decides GPU or simulator
LIMITS = Limits(memory_bytes=2**30, cpu_seconds=300, processes=256, file_bytes=32 * 2**20, disk_bytes=64 * 2**20,
                cell_seconds=20, notebook_seconds=400)


# ------------------------------------------------------------------ the check helper itself
@cuda.jit
def _axpy_into_y(alpha, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = -alpha * x[i]


@cuda.jit
def _axpy_through_atomics(alpha, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = alpha * cuda.atomic.add(x, i, 0.0) + cuda.atomic.add(y, i, 0.0)


def test_launch_checked_never_hands_the_callers_arrays_to_the_kernel():
    x, y = np.arange(1.0, 41.0), np.ones(40)
    keep_x, keep_y = x.copy(), y.copy()
    with pytest.raises(CheckFailed, match=r"_axpy_into_y changed its input `y` \(argument 3\): expected the inputs "
                                          r"left as they were .* got 40 of 40 elements changed, first at \[0\]: "
                                          r"was 1, now 2"):
        launch_checked(_axpy_into_y, 1, 64, (-2.0, x, y, np.zeros(40)))
    np.testing.assert_array_equal(x, keep_x)
    np.testing.assert_array_equal(y, keep_y)


def test_launch_checked_returns_the_output_and_counts_atomics_as_reads_and_writes():
    x, y = np.arange(40.0), np.ones(40)
    out, counts = launch_checked(_axpy_through_atomics, 1, 64, (2.0, x, y, np.zeros(40)), count=True)
    np.testing.assert_array_equal(out, 2.0 * x + y)
    assert counts.of_thread((0,), (7,)) == {"global_reads": 2, "global_writes": 3, "shared_reads": 0,
                                            "shared_writes": 0, "atomics": 2, "shared_atomics": 0}
    np.testing.assert_array_equal(launch_checked(_axpy_through_atomics, 1, 64, (2.0, x, y, np.zeros(40))), 2 * x + y)


def test_a_checker_that_dies_says_so_with_its_signal():
    """Issue 35, item 7: a checker that crashes while judging a cell (a Triton kernel once did it
    through an address that wrapped past 2**64; here a test cell reads address 0) fails that cell
    saying the checker stopped and with which signal, in the cell and in the student's reasons,
    never "did not finish in time"; a fresh checker judges the cells after it."""
    def test_cell(gid: str, code: str):
        return nbformat.v4.new_code_cell(code, metadata={"nbgrader": {"grade_id": gid, "grade": True, "solution": False,
                                                                      "locked": True, "points": 1}})

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), test_cell("crash", "import ctypes\nctypes.string_at(0)"),
                test_cell("after", "assert sum([1, 2]) == 3")]
    sandboxed = bool(sandbox.bubblewrap())
    scratch = Path(tempfile.mkdtemp(prefix="course-die-"))   # short: the kernel's sockets live under it
    try:
        folder = scratch / "submission"
        folder.mkdir()
        uid = sandbox.sandbox_uid(0) if sandboxed else None
        if uid is not None:   # the student's folder belongs to the sandbox user, as course grade gives it
            os.chown(folder, uid, uid)
        ex = execute_submission(nb, folder, LIMITS, lesson_facts(nb), slot=0, sandbox=sandboxed, scratch=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    crash = ex.verdicts["crash"]
    assert not crash.passed and ex.verdicts["after"].passed, ex.verdicts
    assert [(o["ename"], o["evalue"]) for o in crash.outputs if o["output_type"] == "error"] == [
        ("CheckerStopped", "the checker stopped (segmentation fault (SIGSEGV)) while judging this cell")]
    note = ("the checker stopped (segmentation fault (SIGSEGV)) while judging cell 2 (test crash); a fresh checker "
            "judged the cells after it")
    assert ex.notes == [note], ex.notes


# ------------------------------------------------------------------ the class, graded for real
def _solutions_of(lesson: str) -> dict:
    """{grade_id: solution cell as a student writes it (markers removed)}."""
    nb = nbformat.read(str(NOTEBOOKS / lesson / "exercises.ipynb"), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: "\n".join(ln for ln in c.source.splitlines() if "### " not in ln) + "\n"
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def _zeroing(signature: str, body: str) -> str:
    return f"@cuda.jit\ndef {signature}:\n" + "".join(f"    {line}\n" for line in body.splitlines())


ZERO_A = "col, row = cuda.grid(2)\nif row < a.shape[0] and col < a.shape[1]:\n    a[row, col] = 0.0"
TRANSPOSES = {"ex7_naive": "transpose_naive_kernel", "ex7_tiled": "transpose_tiled_kernel"}
# Issue 35, item 5: the naive transpose (writes down a column of out: 32 sectors per warp access
# where 4 would do) with one lane rewriting its element ~30 times per warp of the launch, each
# rewrite 1 sector where 1 would do: summed over the site that hid the column writes (ideal + 1
# per access), 6/6 on these cells where the kernel without the loop scores 3/6
DILUTE = ("    reps = 1\n    if row == 0 and col == 0:\n        reps = 30 * a.shape[0] * (a.shape[1] // 32 + 1)\n"
          "    for r in range(reps):\n")
INSIDE = "if row < a.shape[0] and col < a.shape[1]:\n"
STAGED = ("tile = cuda.shared.array((TILE, {}), float32)\ntx = cuda.threadIdx.x\nty = cuda.threadIdx.y\n"
          "col, row = cuda.grid(2)\n" + INSIDE + "    tile[ty, tx] = a[row, col]\ncuda.syncthreads()\n")
DILUTED = {   # the tile without conflicts, the write naive
    "ex7_tiled": _zeroing("transpose_tiled_kernel(a, out)",
                          STAGED.format("33") + INSIDE + DILUTE + "        out[col, row] = tile[ty, tx]"),
}
# ... and going one lane at a time (`if cuda.laneid == k`), which judging each warp access alone
# would pass: every access 1 sector (1 pass) where 1 would do, 32 for one warp's 32 words
ONE_LANE_AT_A_TIME = "    for k in range(32):\n        if cuda.laneid == k:\n"
SERIALIZED = {   # the padded tile, read and written one lane at a time
    "ex7_tiled": _zeroing("transpose_tiled_kernel(a, out)",
                          STAGED.format("33") + "out_row = cuda.blockIdx.x * TILE + ty\n"
                          "out_col = cuda.blockIdx.y * TILE + tx\n"
                          "if out_row < out.shape[0] and out_col < out.shape[1]:\n" + ONE_LANE_AT_A_TIME
                          + "            out[out_row, out_col] = tile[tx, ty]"),
}
BLOCKS_NEEDED = ("def blocks_needed(n, threads_per_block):\n"
                 "    return (n + threads_per_block - 1) // threads_per_block\n\n\n")
ATTACKS = {
    "03_simt_programming_model": {
        "full": 34.0,
        # overwrite an input so that the expected value computed from it is the zeros `out` holds
        "overwrite": {
            "ex1_axpy": BLOCKS_NEEDED + _zeroing("axpy_kernel(alpha, x, y, out)",
                                                 "i = cuda.grid(1)\nif i < x.size:\n    y[i] = -alpha * x[i]"),
            "ex2_pool": _zeroing("pool3_kernel(x, out)", "i = cuda.grid(1)\nif i < x.size:\n    x[i] = 0.0"),
            "ex3_tiled": _zeroing("tiled_matmul_kernel(a, b, c)",
                                  "col, row = cuda.grid(2)\nif col == 0 and row < a.shape[0]:\n"
                                  "    for k in range(a.shape[1]):\n        a[row, k] = 0.0"),
            "ex4_dot": _zeroing("dot_kernel(x, y, partial)", "i = cuda.grid(1)\nif i < x.size:\n    x[i] = 0.0"),
            "ex5_rowsum": _zeroing("row_sums_kernel(a, out)", "for col in range(cuda.threadIdx.x, a.shape[1], R):\n"
                                   "    a[cuda.blockIdx.x, col] = 0.0"),
            "ex6_scan": _zeroing("block_scan_kernel(x, out)", "i = cuda.grid(1)\nif i < x.size:\n    x[i] = 0.0"),
            **{gid: _zeroing(f"{name}(a, out)", ZERO_A) for gid, name in TRANSPOSES.items()},
            "ex8_warp_rows": _zeroing("warp_row_sums_kernel(a, out)", "row = cuda.grid(1) // 32\n"
                                      "if row < a.shape[0]:\n"
                                      "    for col in range(cuda.grid(1) % 32, a.shape[1], 32):\n"
                                      "        a[row, col] = 0.0"),
        },
        # blocks_needed and the occupancy functions, the exercises that are not kernels (plain Python,
        # run in the student's kernel): their points are the attack notebook's honest functions'
        # (issue 35, item 9)
        "overwrite_keeps": {"ex1_blocks": 1, "ex9_named": 1, "ex9_limits": 1, "ex9_block": 1},
        # naive kernels (right values) whose global reads are atomics adding 0
        "atomic": {
            "ex2_pool": _zeroing("pool3_kernel(x, out)",
                                 "i = cuda.grid(1)\nif i < x.size:\n"
                                 "    left = cuda.atomic.add(x, i - 1, 0.0) if i > 0 else 0.0\n"
                                 "    right = cuda.atomic.add(x, i + 1, 0.0) if i + 1 < x.size else 0.0\n"
                                 "    out[i] = left + cuda.atomic.add(x, i, 0.0) + right"),
            "ex3_tiled": _zeroing("tiled_matmul_kernel(a, b, c)",
                                  "col, row = cuda.grid(2)\nif row < c.shape[0] and col < c.shape[1]:\n"
                                  "    acc = 0.0\n    for k in range(a.shape[1]):\n        acc += "
                                  "cuda.atomic.add(a, (row, k), 0.0) * cuda.atomic.add(b, (k, col), 0.0)\n"
                                  "    c[row, col] = acc"),
            "ex5_rowsum": _zeroing("row_sums_kernel(a, out)",
                                   "row = cuda.blockIdx.x\nif cuda.threadIdx.x == 0:\n    acc = 0.0\n"
                                   "    for col in range(a.shape[1]):\n"
                                   "        acc += cuda.atomic.add(a, (row, col), 0.0)\n"
                                   "    out[row] = acc"),
        },
        # ex3_edges too: its hidden test counts the global writes of a 9 x 10 product (90), and
        # every atomic add of 0 into a and b is a write
        "atomic_loses": ["ex2_budget", "ex3_budget", "ex3_edges", "ex5_budget"],
        # the cells that judge sectors per warp and bank conflicts (the diluted kernel's loop re-reads
        # the tile too: 1 pass each, thousands for one warp's 32 words)
        "traffic": {"diluted": DILUTED, "serialized": SERIALIZED},
        "traffic_loses": ["ex7_sectors", "ex7_conflicts"],
        # the cells that judge the tiled transpose (the traffic students answer nothing else)
        "traffic_judged": ["ex7_tiled_test", "ex7_sectors", "ex7_conflicts"],
        "message": "axpy_kernel changed its input `y` (argument 3)",
        # issue 39: a pool kernel without its barrier (a race) fails its cells in one line
        "race": {"ex2_pool": "\n".join(line for line in _solutions_of("03_simt_programming_model")["ex2_pool"]
                                       .splitlines() if "cuda.syncthreads()" not in line) + "\n"},
        "unanswered": "NotAnswered: axpy_kernel is not answered yet: write it where it says # YOUR CODE HERE",
    },
    "04_cupy_and_numba": {
        "full": 22.0,
        "overwrite": {
            "ex5_bias_relu": _zeroing("bias_relu_kernel(a, bias, out)",
                                      "col, row = cuda.grid(2)\nif row < out.shape[0] and col < out.shape[1]:\n"
                                      "    a[row, col] = -bias[col]"),
            "ex6_conv1d": _zeroing("conv1d_kernel(x, w, out)", "t = cuda.threadIdx.x\nif t < w.size:\n    w[t] = 0.0"),
            "ex7_nearest": _zeroing("nearest_kernel(x, y, out)", "i = cuda.grid(1)\nif i < x.shape[0]:\n"
                                    "    for k in range(D):\n        x[i, k] = y[0, k]"),
            "ex8_histogram": _zeroing("shared_histogram_kernel(x, lo, hi, counts)",
                                      "i = cuda.grid(1)\nif i < x.size:\n    x[i] = hi + 1.0"),
        },
        "overwrite_keeps": {gid: None for gid in ("ex1_visible", "ex1_clip", "ex1_module", "ex2_visible",
                                                  "ex2_rounding", "ex3_visible", "ex3_memory", "ex4_visible",
                                                  "ex4_no_win")},
        "atomic": {
            "ex6_conv1d": _zeroing("conv1d_kernel(x, w, out)",
                                   "i = cuda.grid(1)\nif i < out.size:\n    acc = 0.0\n    for k in range(K):\n"
                                   "        acc += cuda.atomic.add(w, k, 0.0) * cuda.atomic.add(x, i + k, 0.0)\n"
                                   "    out[i] = acc"),
            "ex7_nearest": _zeroing("nearest_kernel(x, y, out)",
                                    "i = cuda.grid(1)\nif i < x.shape[0]:\n    best = math.inf\n"
                                    "    for j in range(y.shape[0]):\n        dist = 0.0\n        for k in range(D):\n"
                                    "            gap = "
                                    "cuda.atomic.add(x, (i, k), 0.0) - cuda.atomic.add(y, (j, k), 0.0)\n"
                                    "            dist += gap * gap\n        best = min(best, dist)\n    out[i] = best"),
            "ex8_histogram": _zeroing("shared_histogram_kernel(x, lo, hi, counts)",
                                      "bins = cuda.shared.array(B, int32)\nt = cuda.threadIdx.x\nif t < B:\n"
                                      "    bins[t] = 0\ncuda.syncthreads()\ni = cuda.grid(1)\nif i < x.size:\n"
                                      "    v = cuda.atomic.add(x, i, 0.0)\n    if lo <= v < hi:\n"
                                      "        cuda.atomic.add(bins, min(int((v - lo) / (hi - lo) * B), B - 1), 1)\n"
                                      "cuda.syncthreads()\nif t < B:\n    cuda.atomic.add(counts, t, bins[t])"),
        },
        "atomic_loses": ["ex6_budget", "ex7_budget", "ex8_budget"],
        "message": "bias_relu_kernel changed its input `a` (argument 1)",
        "unanswered": "NotAnswered: bias_relu_kernel is not answered yet: write it where it says # YOUR CODE HERE",
    },
}


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _submissions(lesson: str, blank) -> dict:
    honest = copy.deepcopy(blank)
    for gid, code in _solutions_of(lesson).items():
        _cell(honest, gid).source = code

    def edited(cells: dict):
        nb = copy.deepcopy(honest)
        for gid, code in cells.items():
            _cell(nb, gid).source = code
        return nb

    def only(cells: dict):   # the blank with only ``cells`` answered
        nb = copy.deepcopy(blank)
        for gid, code in cells.items():
            _cell(nb, gid).source = code
        return nb

    attacks = ATTACKS[lesson]
    students = {"honest": honest, "blank": blank, "overwrite": edited(attacks["overwrite"]),
                "atomic": edited(attacks["atomic"])}
    for student, cells in attacks.get("traffic", {}).items():
        students[student] = only(cells)
    if "race" in attacks:
        students["race"] = only(attacks["race"])
    return students


@pytest.fixture(scope="module", params=list(ATTACKS))
def graded(request, tmp_path_factory):
    if not sandbox.bubblewrap():
        pytest.skip("no sandbox: " + sandbox.why_no_sandbox())
    lesson = request.param
    root = tmp_path_factory.mktemp("course")
    course, source = scratch_course(root, lesson)
    blank = nbformat.read(str(root / "release" / lesson / "exercises.ipynb"), as_version=4)
    incoming = root / "incoming"
    for student, nb in _submissions(lesson, blank).items():
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    # one slot (a second one's kernel and checker templates cost CPU-s the suite's busy cores do not
    # give back); honest is the reference solution, graded once, by the plan (reference_student)
    outcomes = grade_lesson(source / lesson, course=course, submissions=incoming, workers=1, limits=LIMITS,
                            progress=False, reference_student="honest")
    pages = {p.parent.parent.name: p.read_text() for p in (root / "feedback").glob(f"*/{lesson}/exercises.html")}
    return {"lesson": lesson, "by": {o.student: o for o in outcomes}, "pages": pages,
            "not_passed_in_checker": not_passed_in_checker(course.root, lesson), **ATTACKS[lesson]}


@pytest.mark.timeout(900)
def test_reference_full_blank_zero_and_every_cell_judged_by_the_checker(graded):
    honest, blank = graded["by"]["honest"], graded["by"]["blank"]
    assert (honest.score, honest.max_score) == (graded["full"], graded["full"]), (honest.reason, honest.cells)
    assert blank.score == 0, blank.cells
    assert graded["not_passed_in_checker"] == []


@pytest.mark.timeout(900)
def test_kernels_that_overwrite_their_inputs_earn_only_the_other_exercises(graded):
    o = graded["by"]["overwrite"]
    keeps = graded["overwrite_keeps"]
    honest = graded["by"]["honest"].cells
    assert {g: p for g, p in o.cells.items() if p} == {g: honest[g] for g in keeps}, o.cells
    assert o.score == sum(honest[g] for g in keeps), (o.score, o.cells)
    assert graded["message"] in graded["pages"]["overwrite"]
    assert "expected the inputs left as they were" in graded["pages"]["overwrite"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("student", ["diluted", "serialized"])
def test_uncoalesced_transposes_padded_or_one_lane_at_a_time_lose_the_traffic_cells(graded, student):
    """Issue 35, item 5: the naive transpose padded with one lane's thousands of 1-sector rewrites,
    or run one lane at a time (both behind a padded tile), scored full
    marks on these cells; judged warp by warp it keeps only its values (ex7_tiled_test). The
    blank with only this kernel answered: nothing earned outside its cells."""
    if "traffic" not in graded:
        pytest.skip(f"{graded['lesson']} grades no sectors per warp")
    o = graded["by"][student]
    honest = graded["by"]["honest"].cells
    lost, judged = graded["traffic_loses"], graded["traffic_judged"]
    assert o.cells == {g: (0 if g in lost else p) if g in judged else 0 for g, p in honest.items()}, o.cells
    assert o.cells["ex7_tiled_test"] == 1, o.cells
    page = html.unescape(graded["pages"][student])
    assert "sectors per warp (4 hold the bytes this warp asks for at this line" in page
    assert "one warp ran this line" in page


@pytest.mark.timeout(900)
def test_kernels_reading_through_atomics_miss_their_read_budgets(graded):
    """Naive kernels reading every element with ``cuda.atomic.add(a, i, 0.0)``: right values, so
    every correctness cell passes; every budget cell of those exercises fails (and a hidden count
    of global writes, since an atomic writes), exactly those."""
    o = graded["by"]["atomic"]
    honest = graded["by"]["honest"].cells
    lost = {g: honest[g] for g in graded["atomic_loses"]}
    assert o.cells == {g: 0 if g in lost else p for g, p in honest.items()}, o.cells
    assert o.score == graded["full"] - sum(lost.values()), (o.score, o.cells)


@pytest.mark.timeout(900)
def test_a_blank_and_a_race_say_so_in_one_line_in_the_feedback(graded):
    """Issue 39, item 3: each test cell of the blank release says in one line which kernel is not
    answered yet (the whitelist said it "uses `raise`"); lesson 03's pool kernel without its
    barrier (the blank with only that kernel answered) loses its exercise's cells, saying
    "expected no shared-memory race" with the race, and earns nothing; no feedback shows a
    traceback of the checker or the library."""
    blank = html.unescape(graded["pages"]["blank"])
    assert graded["unanswered"] in blank and "uses `raise`" not in blank
    pages = [blank]
    if "race" in graded:
        o, honest = graded["by"]["race"], graded["by"]["honest"].cells
        assert o.cells == {g: 0 for g in honest}, o.cells   # ex2's to the race; every other exercise is blank
        pages.append(html.unescape(graded["pages"]["race"]))
        assert ("CheckFailed: pool3_kernel: expected no shared-memory race, got: shared-memory race in block"
                in pages[-1])
    assert not any("Traceback" in page or "course_lib/" in page for page in pages)
