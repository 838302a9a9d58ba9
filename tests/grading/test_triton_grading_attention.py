"""Lesson 15's fused attention kernel (Exercise 2) attacked through the kernels the trusted
checker runs for the student in Triton's interpreter (``course_lib.triton_traffic``; lesson 14's
attacks and the whitelist's unit tests are in test_triton_grading.py). One batch graded by the
real ``grade_lesson``: a kernel whose q, k, v are tl.constexpr (the interpreter handed it the
checker's torch tensors, to zero), and a kernel with no key loop that holds every key in one
block, over the exercise's bound on blocks (one BLOCK_M x BLOCK_D tile per tensor). Each attacker
is the blank release with only the kernel and exercise 3's byte formula answered (exercise 3's
count runs the kernel once the formula answers), so it must earn the formula's 2 points and
nothing else; the reference is graded, in full, by the plan's own run.
"""
import copy
import html

import pytest
from scratch_course import cell, edited, grade_class, not_passed_in_checker, solutions

from course_lib import triton_traffic

triton_traffic.prepare()   # before Triton loads: the interpreter without a GPU
pytest.importorskip("triton")

from course_tools.grading import sandbox  # noqa: E402
from course_tools.grading.sandbox import Limits  # noqa: E402

LESSON = "15_attention"
SOLUTIONS = solutions(LESSON)
ATTENTION_CELLS = ("ex2_visible", "ex2_causal", "ex2_ragged", "ex2_stable", "ex2_lse", "ex2_budget", "ex3_counted")
# Issue 35: q, k and v as tl.constexpr: zeroed through the torch tensors (o = 0 is then right) and the
# loads taken from o, still zeros, for the honest kernel's bytes; all of ex2 and ex3 before the fix.
CONSTEXPR_ATTENTION = edited(
    SOLUTIONS["ex2_attention"],
    ("def attention_kernel(q_ptr, k_ptr, v_ptr,",
     "def attention_kernel(q_ptr: tl.constexpr, k_ptr: tl.constexpr, v_ptr: tl.constexpr,"),
    ("    rows = ", "    q_ptr *= 0.0\n    k_ptr *= 0.0\n    v_ptr *= 0.0\n    rows = "),
    ("tl.load(q_ptr", "tl.load(o_ptr"), ("tl.load(k_ptr", "tl.load(o_ptr"), ("tl.load(v_ptr", "tl.load(o_ptr"))
# Issue 35: no key loop and no online softmax: all keys in one block of 128, wider than any test's
# sequence, loaded up to the causal end (the honest kernel's bytes), one softmax; full marks before
# the exercise bounded its blocks (no tensor over BLOCK_M * BLOCK_D elements).
ONE_BLOCK_ATTENTION = """@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, n, d, scale, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    keys = tl.arange(0, 128)
    end = n
    if CAUSAL:
        end = tl.minimum((tl.program_id(0) + 1) * BLOCK_M, n)
    q_mask = (rows[:, None] < n) & (cols[None, :] < d)
    kv_mask = (keys[:, None] < end) & (cols[None, :] < d)
    q = tl.load(q_ptr + rows[:, None] * d + cols[None, :], mask=q_mask, other=0.0)
    k = tl.load(k_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)
    v = tl.load(v_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
    valid = keys[None, :] < n
    if CAUSAL:
        valid = valid & (keys[None, :] <= rows[:, None])
    s = tl.where(valid, s, -float("inf"))
    m = tl.max(s, axis=1)
    p = tl.exp(s - m[:, None])
    o = tl.dot(p, v, input_precision="ieee") / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + rows[:, None] * d + cols[None, :], o, mask=q_mask)
    tl.store(lse_ptr + rows, m + tl.log(tl.sum(p, axis=1)), mask=rows < n)
"""
LIMITS = Limits(memory_bytes=2**31, cpu_seconds=600, processes=256, file_bytes=32 * 2**20, disk_bytes=64 * 2**20,
                   cell_seconds=120, notebook_seconds=600)


def _submissions(blank) -> dict:
    """Two attackers: the blank with only exercise 2's kernel and exercise 3's formula answered
    (the other exercises fail at once, with no interpreter run: exercises 4 and 5 of two honest
    notebooks were about 4 CPU-s of the module's 25). No honest student: ``course grade`` first
    grades the reference in the checker and refuses to go on unless it passes every test cell
    (the blank's zero is test_wrong_answers')."""
    def attention(kernel: str):
        nb = copy.deepcopy(blank)
        cell(nb, "ex2_attention").source = kernel
        cell(nb, "ex3_bytes").source = SOLUTIONS["ex3_bytes"]
        return nb

    return {"constexpr": attention(CONSTEXPR_ATTENTION), "one_block": attention(ONE_BLOCK_ATTENTION)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not sandbox.bubblewrap():
        pytest.skip("no sandbox: " + sandbox.why_no_sandbox())
    root = tmp_path_factory.mktemp("course")
    return {**grade_class(root, LESSON, _submissions, LIMITS), "root": root}


@pytest.mark.timeout(900)
def test_tensors_for_constexpr_parameters_earn_nothing(graded):
    """Issue 35: q, k and v annotated tl.constexpr reached the kernel as the checker's torch
    tensors; zeroed, they made o = 0 right, for every point of exercises 2 and 3's count. Such a
    launch is now refused, and says why."""
    assert not_passed_in_checker(graded["root"], LESSON) == [], graded["plan"]
    o = graded["by"]["constexpr"]
    assert all(o.cells[g] == 0 for g in ATTENTION_CELLS), o.cells
    assert o.score == 2, (o.score, o.cells)  # the formula of 3 (ex3_visible); every other exercise is blank
    assert ("attention_kernel's parameter `q_ptr` receives a tensor but is annotated `tl.constexpr`"
            in html.unescape(graded["pages"]["constexpr"]))


@pytest.mark.timeout(900)
def test_one_block_of_every_key_is_refused(graded):
    """Issue 35: the spec's key loop and online softmax, enforced by the bound on blocks that
    the exercise states: a kernel holding every key in one block (full marks with the honest
    kernel's bytes before) stops at its first tensor as wide as all the keys."""
    o = graded["by"]["one_block"]
    assert all(o.cells[g] == 0 for g in ATTENTION_CELLS), o.cells
    assert o.score == 2, (o.score, o.cells)
    page = html.unescape(graded["pages"]["one_block"])
    assert ("makes a tensor of 2048 elements (shape (128, 16)); a graded block has at most 256 elements in this "
            "launch") in page
