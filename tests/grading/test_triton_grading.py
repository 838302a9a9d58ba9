"""Lesson 14's Triton kernels judged outside the student's process: a ``@triton.jit``
kernel crosses to the trusted checker as source text (``kernel_helpers._course_jit`` marks it ``lang:
triton``), passes ``triton_source``'s whitelist or is refused with a plain reason, and is run
there in Triton's interpreter, its bytes counted and its addresses bounds-checked by
``course_lib.triton_traffic``.

Unit tests: the reference kernels pass the whitelist and, rebuilt, give their results and byte
counts; each forbidden construct is refused with its reason; names from outside must be numbers
or other checked Triton functions; a lecture kernel is refused up to what ``library_copy`` says.
Attack tests: lesson 14 submissions graded in one batch by the real ``grade_lesson``: kernels
with imports, attribute chains, ``tl`` rebinding, a huge block and an infinite loop; a cell that
patches the counting helper in the student's kernel; kernels that overwrite their inputs, or get
them as tl.constexpr torch tensors; the honest submission keeps full marks and every test cell
is judged by the checker. Lesson 15's attacks: test_triton_grading_attention.py.
"""
import base64
import copy
import html
import json
import linecache
import re
from pathlib import Path
from unittest import mock

import nbformat
import pytest
import torch
from scratch_course import cell, edited, grade_class, not_passed_in_checker, solutions

from course_lib import triton_traffic

triton_traffic.prepare()   # before Triton loads: the interpreter without a GPU
triton = pytest.importorskip("triton")

from course_tools.grading import checker, kernel_helpers, sandbox, wire  # noqa: E402
from course_tools.grading.gpu_kernels import kernel_source, triton_source  # noqa: E402
from course_tools.grading.gpu_kernels.kernel_source import Builder, Refused  # noqa: E402
from course_tools.grading.sandbox import Limits  # noqa: E402

LESSON = "14_triton"
FULL = 14.0


SOLUTIONS = solutions(LESSON)
REFERENCE = {re.search(r"def (\w+)\(", code).group(1): code for code in SOLUTIONS.values()}


def _payload(source: str) -> list:
    return ["gpu_kernel", {"source": source, "device": False, "lang": "triton", "deps": {}}]


def _build(sources: dict, held: dict | None = None) -> dict:
    kinds = {name: _payload(src) for name, src in sources.items()}
    return Builder(kinds, held or {}, wire.decode).all()


def _kernel(body: str, params: str = "x_ptr, out_ptr, n, BLOCK: tl.constexpr", decorator: str = "@triton.jit") -> str:
    return f"{decorator}\ndef student_kernel({params}):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())


# ------------------------------------------------------------------------- the whitelist
def test_the_four_reference_kernels_pass_the_whitelist():
    assert sorted(REFERENCE) == ["add_kernel", "bias_gelu_kernel", "matmul_kernel", "softmax_kernel"]
    for name, src in REFERENCE.items():
        checked = triton_source.check(name, src)
        assert checked.func == name and checked.free == {}, (name, checked.free)


REFUSED = {
    "import": ("import os\ntl.store(out_ptr, 1.0)", "uses `import`"),
    "dunder attribute": ("y = x_ptr.__class__", "the name `__class__`"),
    "attribute chain": ("y = x_ptr.dtype.element_ty.name", "the attribute `.name`"),
    "tl.extra": ("y = tl.extra.cuda.libdevice.exp(1.0)", "`tl.extra.cuda.libdevice.exp`"),
    "inline asm": ('y = tl.inline_asm_elementwise("mov", "=r", [n], tl.int32, True, 1)',
                   "`tl.inline_asm_elementwise`"),
    "the library's softmax": ("y = tl.softmax(tl.load(x_ptr + tl.arange(0, BLOCK)))", "`tl.softmax`"),
    "device print": ('tl.device_print("x", n)', "`tl.device_print`"),
    "atomics": ("tl.atomic_add(out_ptr, 1.0)", "`tl.atomic_add`"),
    "block pointers": ("p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))", "`tl.make_block_ptr`"),
    "tl rebinding": ("tl = n\ntl.store(out_ptr, 1.0)", "`tl` as a variable name"),
    "tl as a value": ("lang = tl\nlang.store(out_ptr, 1.0)", "`tl` itself as a value"),
    "a method call": ("p = x_ptr.data_ptr()", "the method `.data_ptr`"),
    "calling a variable": ("f = n\nf()", "a call of its variable `f`"),
    "lambda": ("f = lambda: 1", "`lambda`"),
    "comprehension": ("y = [i for i in range(3)]", "a comprehension"),
    "with": ("with n:\n    pass", "`with`"),
    "try": ("try:\n    pass\nexcept Exception:\n    pass", "`try`"),
    "raise": ("raise ValueError()", "`raise`"),
    "global": ("global n", "`global`"),
    "a bounded slice": ("y = n[1:2]", "a slice with bounds"),
    "a bytes constant": ("y = b'x'", "a constant of type bytes"),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_forbidden_constructs_are_refused_with_their_reason(what):
    body, reason = REFUSED[what]
    with pytest.raises(Refused) as info:
        triton_source.check("student_kernel", _kernel(body))
    assert reason in str(info.value), str(info.value)


@pytest.mark.parametrize("source, reason", [
    (_kernel("pass", decorator="@triton.autotune(configs=[], key=[])\n@triton.jit"), "@triton.autotune"),
    (_kernel("pass", decorator="@triton.jit(debug=True)"), "use a bare @triton.jit"),
    (_kernel("pass", decorator="@cuda.jit"), "use a bare @triton.jit"),
    (_kernel("pass", params="x_ptr, n=3"), "default values"),
    (_kernel("pass", params="x_ptr, n: int"), "the only annotation allowed is tl.constexpr"),
    (_kernel("pass", params="x_ptr, *rest"), "default values, *args"),
    (_kernel("pass", params="tl, n"), "`tl` as a parameter name"),
    ("x = 1\n" + _kernel("pass"), "not one plain function definition"),
    ("def (", "does not parse"),
    ("", "could not read"),
])
def test_malformed_definitions_and_decorators_are_refused(source, reason):
    with pytest.raises(Refused) as info:
        triton_source.check("student_kernel", source)
    assert reason in str(info.value), str(info.value)


def test_names_from_outside_must_be_numbers_or_checked_triton_functions():
    uses = _kernel("tl.store(out_ptr, tl.load(x_ptr) * SCALE)")
    ok = _build({"student_kernel": uses}, held={"SCALE": 3.0})["student_kernel"]
    x, out = torch.tensor([2.0]), torch.zeros(1)
    triton_traffic.count(ok, (1,), x, out, 1, BLOCK=1)
    assert out.item() == 6.0
    assert "a module" in str(_build({"student_kernel": uses}, held={"SCALE": torch})["student_kernel"])
    assert "does not know" in str(_build({"student_kernel": uses})["student_kernel"])
    calls = _kernel("tl.store(out_ptr, helper(tl.load(x_ptr)))")
    helper = "@triton.jit\ndef helper(v):\n    return v * 2.0 + 1.0\n"
    built = _build({"student_kernel": calls, "helper": helper})["student_kernel"]
    triton_traffic.count(built, (1,), x, out, 1, BLOCK=1)
    assert out.item() == 5.0
    refused = _build({"student_kernel": calls}, held={"helper": print})["student_kernel"]
    assert isinstance(refused, Refused) and "calls `helper`" in str(refused)


def test_reference_kernels_rebuilt_give_their_results_and_counts():
    built = _build(REFERENCE)
    assert not [n for n, b in built.items() if isinstance(b, Refused)], built
    x = torch.randn(6, 37)
    out = torch.zeros_like(x)
    traffic = triton_traffic.count(built["softmax_kernel"], (6,), x, out, 37, 37, BLOCK=64)
    assert torch.allclose(out, torch.softmax(x, dim=1), atol=1e-6)
    assert (traffic.bytes_loaded, traffic.bytes_stored) == (4 * 6 * 37, 4 * 6 * 37)
    a, b, c = torch.randn(20, 40).half(), torch.randn(40, 24).half(), torch.zeros(20, 24)
    traffic = triton_traffic.count(built["matmul_kernel"], (2, 2), a, b, c, 20, 24, 40, *a.stride(), *b.stride(),
                                   *c.stride(), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    assert torch.allclose(c, a.float() @ b.float(), atol=1e-3)
    assert traffic.bytes_loaded == 2 * (2 * 20 * 40 + 2 * 40 * 24) and traffic.bytes_stored == 4 * 20 * 24


def test_an_unmasked_kernel_rebuilt_cannot_reach_memory_outside_its_tensors():
    reach = _kernel("tl.store(out_ptr + 100000 + tl.arange(0, BLOCK), tl.load(x_ptr + tl.arange(0, BLOCK)))")
    built = _build({"student_kernel": reach})["student_kernel"]
    with pytest.raises(triton_traffic.OutOfBounds, match="tl.store"):
        triton_traffic.count(built, (1,), torch.zeros(8), torch.zeros(8), 8, BLOCK=8)
    huge = _kernel("y = tl.arange(0, 1 << 18)")
    with pytest.raises(ValueError, match="a graded block has at most"):
        triton_traffic.count(_build({"student_kernel": huge})["student_kernel"], (1,), torch.zeros(8),
                             torch.zeros(8), 8, BLOCK=8)


def test_triton_kernels_cross_the_wire_as_source():
    """The kernel side (run here with a stand-in for IPython) describes a ``@triton.jit`` kernel
    by its source, marked ``lang: triton``, with the numbers it uses; the checker side installs
    the kernel rebuilt in the interpreter, which computes and counts as the original."""
    helpers = {"__name__": "_course_wire"}
    code = Path(wire.__file__).read_text() + kernel_helpers.KERNEL_HELPERS
    exec(compile(code, "<course helpers>", "exec"), helpers)  # noqa: S102 - as kernel_helpers.HELPERS does
    cell = "SCALE = 2.0\n\n\n" + _kernel("tl.store(out_ptr, tl.load(x_ptr) * SCALE)")
    filename = "<notebook cell 3>"
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    user = {"__name__": "__main__", "triton": triton, "tl": triton.language}
    exec(compile(cell, filename, "exec"), user)  # noqa: S102 - a student's cell
    helpers["get_ipython"] = lambda: type("Shell", (), {"user_ns": user})()
    printed = []
    with mock.patch("builtins.print", lambda *a, **k: printed.append(a[0])):
        helpers["_course_names"]("@tok:", ["student_kernel"])
    kinds = json.loads(base64.b64decode(printed[-1][len("@tok:"):]))
    kind, payload = kinds["student_kernel"]
    assert kind == "gpu_kernel" and payload["lang"] == "triton" and payload["source"].startswith("@triton.jit")
    assert wire.decode(payload["deps"]["SCALE"][1]) == 2.0
    ns = {}
    checker.install(ns, kinds, channel=None, wire=wire, kernel_source=kernel_source)
    out = torch.zeros(1)
    traffic = triton_traffic.count(ns["student_kernel"], (1,), torch.tensor([4.0]), out, 1, BLOCK=1)
    assert out.item() == 8.0 and (traffic.bytes_loaded, traffic.bytes_stored) == (4, 4)


# ------------------------------------------------------------------------- attacks, graded
ATTACK_IMPORT = SOLUTIONS["ex1_add"].replace("    mask = offs < n\n", "    import os\n    mask = offs < n\n")
ATTACK_CHAIN = SOLUTIONS["ex2_softmax"].replace("    row = tl.program_id(0)\n",
                                                "    row = tl.program_id(0) + x_ptr.__class__.__len__(x_ptr)\n")
ATTACK_REBIND = SOLUTIONS["ex3_gelu"].replace("    rows = tl.program_id(0)", "    tl = tl\n    rows = tl.program_id(0)")
ATTACK_HUGE = SOLUTIONS["ex4_matmul"].replace("    rk = tl.arange(0, BLOCK_K)\n",
                                              "    rk = tl.arange(0, BLOCK_K)\n    waste = tl.arange(0, 1 << 18)\n")
FOREVER = SOLUTIONS["ex1_add"].replace("    mask = offs < n\n",
                                      "    i = 0\n    while True:\n        i += 1\n    mask = offs < n\n")
TWICE = SOLUTIONS["ex2_softmax"].replace(
    "    num = tl.exp(z)\n",
    '    num = tl.exp(tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf")) - tl.max(x, axis=0))\n')
OVERWRITE_ADD = SOLUTIONS["ex1_add"].replace(   # never writes out; x + y == 0 == out afterwards
    "    tl.store(out_ptr + offs, x + y, mask=mask)",
    "    tl.store(x_ptr + offs, x * 0.0, mask=mask)\n    tl.store(y_ptr + offs, y * 0.0, mask=mask)")
OVERWRITE_SOFTMAX = SOLUTIONS["ex2_softmax"].replace(   # the softmax written over its input too
    "    tl.store(out_ptr", "    tl.store(x_ptr + row * row_stride + cols, num / tl.sum(num, axis=0), mask=mask)\n"
                           "    tl.store(out_ptr")
PATCH_COUNT = """
from course_lib import triton_traffic as _tt
_real = _tt.count
def _fake(kernel, grid, *args, **meta):
    traffic = _real(kernel, grid, *args, **meta)
    traffic.loaded = {k: v // 2 for k, v in traffic.loaded.items()}
    return traffic
_tt.count = _fake
count = _fake
"""

# Issue 35: a tensor parameter annotated tl.constexpr receives the torch tensor itself. The GELU
# zeroes its inputs through it (the test's expected value, computed from them afterwards, is then
# what the kernel stores) and loads its output, still zeros, for the bytes the budget asks; the
# matmul is computed by torch, 0 bytes counted. 6 points before the fix (13 of 14 with the same
# edit to every kernel).
CONSTEXPR_GELU = edited(
    SOLUTIONS["ex3_gelu"],
    ("def bias_gelu_kernel(x_ptr, b_ptr,", "def bias_gelu_kernel(x_ptr: tl.constexpr, b_ptr: tl.constexpr,"),
    ("    rows = ", "    x_ptr *= 0.0\n    b_ptr *= 0.0\n    rows = "),
    ("tl.load(x_ptr + offs", "tl.load(out_ptr + offs"), ("tl.load(b_ptr + cols", "tl.load(out_ptr + cols"))
CONSTEXPR_MATMUL = """@triton.jit
def matmul_kernel(a_ptr: tl.constexpr, b_ptr: tl.constexpr, c_ptr: tl.constexpr, M, N, K, stride_am, stride_ak,
                  stride_bk, stride_bn, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    if tl.program_id(0) + tl.program_id(1) == 0:
        c_ptr += a_ptr.to(c_ptr.dtype) @ b_ptr.to(c_ptr.dtype)
"""
# Issue 35, item 7: a load at the address 2**64 - 4, reached by pointer arithmetic from the
# address `.to(tl.int64)` gives: `addr + 4` wrapped to 0 and the bounds check let it through, and
# the checker died (SIGSEGV) on the load; the feedback said "the test did not finish in time"
WRAPS_ADD = SOLUTIONS["ex1_add"].replace(
    "    y = tl.load(y_ptr + offs, mask=mask)\n",
    "    y = tl.load(y_ptr + (0 - 4 - y_ptr.to(tl.int64)) // 4)   # the address 2**64 - 4\n")
# Issue 39, item 4: lanes masked at row_stride, not n_cols. Only a hidden test had rows whose block reaches
# their padding (the visible one's rows were 16 long, BLOCK 16), and its feedback said "a hidden test
# failed"; the visible test now fails too, and the hidden one is named by its label, never its data
WIDE_MASK = SOLUTIONS["ex2_softmax"].replace("mask = cols < n_cols", "mask = cols < row_stride")
HIDDEN_LABEL = "hidden test failed: padded rows of other widths and strides: values, padding untouched"
# cell_seconds: FOREVER's kernel spins in the checker until the cell's deadline, once for each of ex1's two test
# cells, so the class costs about 2 * cell_seconds CPU-s more; an honest test cell here takes under 0.3 CPU-s
LIMITS = Limits(memory_bytes=2**31, cpu_seconds=300, processes=256, file_bytes=32 * 2**20, disk_bytes=64 * 2**20,
                cell_seconds=5, notebook_seconds=400)


def _submissions(blank) -> dict:
    honest = copy.deepcopy(blank)
    for gid, code in SOLUTIONS.items():
        cell(honest, gid).source = code

    def with_cells(cells: dict, *inserted):
        nb = copy.deepcopy(honest)
        for gid, code in cells.items():
            cell(nb, gid).source = code
        for at, code in enumerate(inserted):
            nb.cells.insert(2 + at, nbformat.v4.new_code_cell(code))
        return nb

    return {"honest": honest,
            "a_refused": with_cells({"ex1_add": ATTACK_IMPORT, "ex2_softmax": TWICE, "ex3_gelu": ATTACK_REBIND,
                                     "ex4_matmul": ATTACK_HUGE}, PATCH_COUNT),
            "forever": with_cells({"ex1_add": FOREVER, "ex2_softmax": ATTACK_CHAIN}),
            "wraps": with_cells({"ex1_add": WRAPS_ADD, "ex2_softmax": WIDE_MASK}),
            "overwrites": with_cells({"ex1_add": OVERWRITE_ADD, "ex2_softmax": OVERWRITE_SOFTMAX,
                                      "ex3_gelu": CONSTEXPR_GELU, "ex4_matmul": CONSTEXPR_MATMUL})}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not sandbox.bubblewrap():
        pytest.skip("no sandbox: " + sandbox.why_no_sandbox())
    root = tmp_path_factory.mktemp("course")
    # honest is the reference solution: graded once, by the plan's own run of it (reference_student)
    return {**grade_class(root, LESSON, _submissions, LIMITS, reference_student="honest"), "root": root}


@pytest.mark.timeout(900)
def test_every_test_cell_of_lesson_14_is_judged_by_the_checker(graded):
    assert not_passed_in_checker(graded["root"], LESSON) == [], graded["plan"]


@pytest.mark.timeout(900)
def test_honest_triton_kernels_keep_full_marks(graded):
    o = graded["by"]["honest"]
    assert (o.score, o.max_score) == (FULL, FULL), (o.score, o.reason, o.cells)


@pytest.mark.timeout(900)
def test_refused_kernels_earn_nothing_and_say_why(graded):
    o = graded["by"]["a_refused"]
    refused = [g for g in o.cells if g.split("_")[0] in ("ex1", "ex3", "ex4")]
    assert len(refused) == 8 and all(o.cells[g] == 0 for g in refused), o.cells
    pages = graded["pages"]["a_refused"] + graded["pages"]["forever"]
    for reason in ("add_kernel uses `import`", "softmax_kernel uses the name `__len__`",
                   "bias_gelu_kernel uses `tl` as a variable name", "a graded block has at most"):
        assert reason in pages, reason
    assert all(graded["by"]["forever"].cells[g] == 0 for g in ("ex2_visible", "ex2_stable", "ex2_budget"))


@pytest.mark.timeout(900)
def test_kernels_that_write_over_their_inputs_earn_nothing(graded):
    """Issue 26: a test computes its expected value from the inputs after the launch, so a kernel
    that zeroes x and y (out == x + y == 0) or writes the softmax into x as well would pass;
    a store into an input now stops the kernel in the checker and says so."""
    o = graded["by"]["overwrites"]
    assert all(v == 0 for g, v in o.cells.items() if g.startswith(("ex1", "ex2"))), o.cells
    page = graded["pages"]["overwrites"]
    assert "a tl.store into `x_ptr`, an input: expected stores only into `out_ptr`" in page


@pytest.mark.timeout(900)
def test_tensors_for_constexpr_parameters_earn_nothing(graded):
    """Issue 35: kernels whose tensor parameters are annotated tl.constexpr got the checker's
    own torch tensors: the GELU zeroed the test's inputs (and stored zeros), the matmul was
    computed by torch with 0 bytes counted, for 6 points; such a launch is now refused."""
    o = graded["by"]["overwrites"]          # its exercises 1 and 2 overwrite their inputs (above)
    assert o.score == 0, (o.score, o.reason, o.cells)
    page = html.unescape(graded["pages"]["overwrites"])
    for kernel, param in (("bias_gelu_kernel", "x_ptr"), ("matmul_kernel", "a_ptr")):
        assert f"{kernel}'s parameter `{param}` receives a tensor but is annotated `tl.constexpr`" in page, kernel


@pytest.mark.timeout(900)
def test_an_address_that_wraps_past_2_to_the_64_is_out_of_bounds(graded):
    """The bounds check compares addresses without adding to them: the load at 2**64 - 4 is
    outside every tensor, said so in the feedback; the checker lives on (no crash, no time-out)."""
    o = graded["by"]["wraps"]
    honest = graded["by"]["honest"].cells
    # ex2_visible and ex2_stable: its softmax is masked at row_stride (below), and both test padded rows
    lost = ("ex1_visible", "ex1_budget", "ex2_visible", "ex2_stable")
    assert o.cells == {g: 0 if g in lost else p for g, p in honest.items()}, (o.reason, o.cells)
    page = html.unescape(graded["pages"]["wraps"])
    assert "outside the tensors it was given (the first at address 0xfffffffffffffffc, element -" in page
    assert "at add_kernel, line 6: `y = tl.load(y_ptr + (0 - 4 - y_ptr.to(tl.int64)) // 4)" in page   # its line
    assert "did not finish in time" not in page and "checker stopped" not in page + o.reason


@pytest.mark.timeout(900)
def test_a_mask_at_the_row_stride_fails_the_visible_test_and_names_the_hidden_one(graded):
    """Issue 39, item 4: the softmax masked at row_stride loses ex2_visible on its visible rows
    (12 values, 20 apart: BLOCK 16 reaches the padding); the feedback names the hidden test that
    failed by its label and shows none of its data (the check's name, shapes or values)."""
    page = html.unescape(graded["pages"]["wraps"])
    assert "softmax_kernel on 4 rows of 12 values, 20 apart (row_stride = 20, BLOCK = 16): " in page
    assert HIDDEN_LABEL in page
    for data in ("3 rows of 33 values", "40 apart", "columns 33 to 39", "torch.randn(3, 40)"):
        assert data not in page, data


@pytest.mark.timeout(900)
def test_patching_the_count_in_the_students_kernel_changes_no_budget(graded):
    """A softmax that loads its row twice (right values, twice the bytes) with the counting
    helper patched in the student's kernel to halve the bytes: the budget cell still fails."""
    o = graded["by"]["a_refused"]
    assert o.cells["ex2_budget"] == 0 and o.cells["ex2_visible"] == 1 and o.cells["ex2_stable"] == 1, o.cells
    assert o.score == 2, (o.score, o.reason, o.cells)


@pytest.mark.timeout(900)
def test_a_triton_kernel_that_never_ends_is_stopped_by_the_cell_deadline(graded):
    o = graded["by"]["forever"]
    assert o.cells["ex1_visible"] == 0 and o.cells["ex1_budget"] == 0, o.cells
    assert o.score == FULL - 3 - 4, (o.score, o.reason, o.cells)   # ex2 refused; ex3, ex4 after the restart
    assert "did not finish in time" in graded["pages"]["forever"]


def test_a_lecture_kernel_under_other_names_is_refused():
    """The cheat of calling (or pasting) the lecture's kernel from course_lib instead of writing
    one: refused whatever the kernel and its variables are called, whatever its numbers and
    docstring, with statements added that do nothing. What the refusal does not hold (issue 35,
    as ``library_copy`` says): a copy with one working statement changed passes this check, and
    is graded on what it computes, like any kernel."""
    import inspect
    import textwrap

    from course_lib import triton_kernels

    kernel = triton_kernels.relu_kernel
    source = textwrap.dedent(inspect.getsource(getattr(kernel, "fn", kernel)))   # JIT or interpreted function
    parameters = source.split("):", 1)[0].split("(", 1)[1]
    names = sorted(set(re.findall(r"\b[a-z_]+\b", parameters)) - {"tl", "constexpr"})
    renamed = source.replace("def relu_kernel", "def my_relu")
    for n in names:
        renamed = re.sub(rf"\b{n}\b", f"{n}_mine", renamed)
    load = "    v = tl.load(x_ptr_mine + idx, mask=inside)\n"
    assert load in renamed
    refused = {"renamed": renamed,
               "a number changed": renamed.replace("tl.maximum(v, 0.0)", "tl.maximum(v, 0.5)"),
               "another docstring": renamed.replace('"""out[i] = max(x[i], 0)', '"""My own ReLU'),
               "an unused assignment": renamed.replace(load, load + "    unused = idx * 2 + tl.program_id(0)\n"),
               "pass and a bare expression": renamed.replace(load, load + "    pass\n    idx + 1\n")}
    for what, text in refused.items():
        assert text != source, what
        with pytest.raises(triton_source.Refused, match=r"course_lib.triton_kernels.relu_kernel \(its names, numbers"):
            triton_source.check("my_relu", text)
    passes = {"one working statement added": renamed.replace(load, load + "    v = v + 0.0\n"),
              "an operator changed": renamed.replace("tl.maximum(v, 0.0)", "tl.minimum(v, 0.0)")}
    for what, text in passes.items():
        assert text != renamed, what
        triton_source.check("my_relu", text)
