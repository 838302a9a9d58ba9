"""Kernel exercises judged outside the student's process (issue 16): a student's Numba CUDA
kernel crosses to the trusted checker as source text, passes ``kernel_source``'s whitelist or is
refused with a plain reason, and is compiled and counted there.

Unit tests: the reference kernels of lessons 03 and 04 pass the whitelist and give their
results and counts when rebuilt; each forbidden construct is refused with its reason; the
kernel side of the wire sends kernels and function sources as the checker expects. Attack
tests: submissions of lesson 03 written as a student would write them, graded in one batch by
the real ``grade_lesson``: kernels that fake their access counts, cells that patch the counting
helpers or IPython in the student's kernel, and a kernel that never ends, earn nothing they did
not earn honestly; the honest submission keeps full marks.
"""
import base64
import copy
import json
import linecache
import re
from pathlib import Path
from unittest import mock

import nbformat
import numpy as np
import pytest
from scratch_course import grade_class, not_passed_in_checker

from course_lib import hardware, kernels, simt
from course_tools.grading import checker, kernel_helpers, sandbox, wire
from course_tools.grading.gpu_kernels import kernel_source
from course_tools.grading.gpu_kernels.kernel_source import Builder, Refused, check
from course_tools.grading.sandbox import Limits
from course_tools.paths import NOTEBOOKS

cuda = hardware.numba_cuda()   # before anything imports numba.cuda: it decides GPU or simulator
LESSON = "03_simt_programming_model"
FULL = 34.0
CONSTANTS = {"P": 32, "WINDOW": 34, "T": 4, "R": 128, "S": 64, "K": 5, "C": 32, "TILE_LEN": 36, "D": 3, "B": 8,
             "TILE": 32, "FULL_MASK": 0xFFFFFFFF}


def _solutions(lesson: str) -> dict:
    """{grade_id: solution cell as a student writes it (markers removed)} of a lesson."""
    nb = nbformat.read(str(NOTEBOOKS / lesson / "exercises.ipynb"), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: "\n".join(ln for ln in c.source.splitlines() if "### " not in ln) + "\n"
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def _kernels(code: str) -> dict:
    """{name: source} of the ``@cuda.jit`` functions in a cell."""
    found = re.finditer(r"^(@cuda\.jit(?:\(.*?\))?\ndef (\w+)\(.*?)(?=^\S|\Z)", code, re.DOTALL | re.MULTILINE)
    return {m.group(2): m.group(1).rstrip() + "\n" for m in found}


REFERENCE = {name: src for lesson in (LESSON, "04_cupy_and_numba") for code in _solutions(lesson).values()
             for name, src in _kernels(code).items()}


def _kernel(body: str, params: str = "x, out", decorator: str = "@cuda.jit") -> str:
    return f"{decorator}\ndef student_kernel({params}):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())


# ------------------------------------------------------------------------- the whitelist
def test_the_reference_kernels_of_lessons_03_and_04_are_all_found():
    assert len(REFERENCE) == 13, sorted(REFERENCE)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_kernels_pass_the_whitelist(name):
    checked = check(name, REFERENCE[name], device=False)
    assert checked.func == name and not checked.device
    assert set(checked.free) <= set(CONSTANTS), checked.free    # only the lessons' constants from outside


REFUSED = {
    "import": ("import os\nout[0] = 1.0", "uses `import`"),
    "from import": ("from course_lib import simt\nout[0] = 1.0", "uses `import`"),
    "dunder attribute": ("x.__class__._touch = 0", "the name `__class__`"),
    "private attribute": ("out[0] = x._array[0]", "the name `_array`"),
    "underscore name": ("out[0] = _", "the name `_`"),
    "globals": ("globals()['count'] = 0", "uses `globals`"),
    "getattr": ("out[0] = getattr(x, 'base')[0]", "uses `getattr`"),
    "setattr": ("setattr(x, 'size', 0)", "uses `setattr`"),
    "vars": ("vars()", "uses `vars`"),
    "locals": ("out[0] = len(locals())", "uses `locals`"),
    "open": ("open('out.txt')", "uses `open`"),
    "eval": ("eval('1')", "uses `eval`"),
    "exec": ("exec('1')", "uses `exec`"),
    "compile": ("compile('1', 'f', 'exec')", "uses `compile`"),
    "__import__": ("__import__('os')", "the name `__import__`"),
    "type": ("out[0] = type(x)", "uses `type`"),
    "object": ("object()", "uses `object`"),
    "super": ("super()", "uses `super`"),
    "global": ("global out2\nout2 = 1", "uses `global`"),
    "nonlocal": ("nonlocal out2", "uses `nonlocal`"),
    "lambda": ("f = lambda v: v", "uses `lambda`"),
    "nested def": ("def inner():\n    pass", "uses a nested `def`"),
    "class": ("class A:\n    pass", "uses `class`"),
    "with": ("with cuda.shared:\n    pass", "uses `with`"),
    "try": ("try:\n    out[0] = 1.0\nexcept Exception:\n    pass", "uses `try`"),
    "raise": ("raise ValueError('negative')", "uses `raise`"),
    "the release's stub": ("# YOUR CODE HERE\nraise NotImplementedError()",
                           "is not answered yet: write it where it says # YOUR CODE HERE"),
    "a stub left in": ("out[0] = 1.0\nif x.size > 0:\n    x[0] = 1.0\nraise NotImplementedError",
                       "is not answered yet"),
    "yield": ("yield 1", "uses `yield`"),
    "await": ("await x", "uses `await`"),
    "comprehension": ("out[0] = sum([v for v in range(3)])", "a comprehension"),
    "f-string": ("s = f'{x}'", "an f-string"),
    "del": ("del x", "uses `del`"),
    "attribute outside the vocabulary": ("out[0] = x.dtype", "the attribute `.dtype`"),
    "method call": ("out[0] = x.sum()", "the attribute `.sum`"),
    "numpy": ("out[0] = np.sum(x)", "`np.sum`"),
    "numpy as a value": ("m = np", "`np` itself as a value"),
    "cuda outside the vocabulary": ("y = cuda.to_device(x)", "`cuda.to_device`"),
    "cuda as a value": ("c = cuda\nc.syncthreads()", "`cuda` itself as a value"),
    "math as a value": ("m = math", "`math` itself as a value"),
    "a call of a variable": ("f = min\nout[0] = f(1, 2)", "a call of its variable `f`"),
    "a computed call": ("out[0] = (min, max)[0](1, 2)", "a call of a computed function"),
    "attribute assignment": ("x.size = 3", "assignment to `.size`"),
    "rebinding the vocabulary": ("range = 3", "`range` as a variable name"),
    "cuda value called": ("cuda.threadIdx()", "`cuda.threadIdx` as a function"),
    "bytes constant": ("b = b'x'", "a constant of type bytes"),
    "slice": ("row = x[0:3]\nrow[0] = 1.0", "a slice"),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_forbidden_constructs_are_refused_with_their_reason(what):
    body, reason = REFUSED[what]
    with pytest.raises(Refused) as info:
        check("student_kernel", _kernel(body), device=False)
    assert reason in str(info.value), str(info.value)
    assert str(info.value).startswith("student_kernel")


@pytest.mark.parametrize("source, reason", [
    (_kernel("out[0] = 1.0", decorator="@numba.njit"), "decorated with `numba.njit`"),
    (_kernel("out[0] = 1.0", decorator="@cuda.jit('void(float64[:], float64[:])')"), "signature"),
    (_kernel("out[0] = 1.0", decorator="@cuda.jit(link=['x.ptx'])"), "may pass only"),
    (_kernel("out[0] = 1.0", decorator="@cuda.jit\n@cuda.jit"), "2 decorators"),
    (_kernel("out[0] = 1.0", decorator="@cuda.jit(device=True)"), "disagree"),
    (_kernel("out[0] = 1.0", params="x, out=None"), "default values"),
    (_kernel("out[0] = 1.0", params="*args"), "*args"),
    (_kernel("out[0] = 1.0", params="x, cuda"), "`cuda` as a parameter name"),
    ("import os\n" + _kernel("out[0] = 1.0"), "not one plain function definition"),
    ("@cuda.jit\nasync def student_kernel(x, out):\n    pass\n", "not one plain function definition"),
    ("@cuda.jit\ndef student_kernel(x, out)\n", "does not parse"),
    (None, "could not read"),
])
def test_malformed_definitions_and_decorators_are_refused(source, reason):
    with pytest.raises(Refused) as info:
        check("student_kernel", source, device=False)
    assert reason in str(info.value), str(info.value)


def _payload(source: str, device: bool = False, deps=None) -> dict:
    return {"source": source, "device": device, "deps": deps or {}}


def test_reference_kernels_rebuilt_give_their_results_and_counts():
    """Built as the checker builds them (constants from its namespace), run by the course's
    counting launch: axpy reads 2 values and writes 1 per element."""
    kinds = {n: ["gpu_kernel", _payload(REFERENCE[n])] for n in ("axpy_kernel", "pool3_kernel")}
    built = Builder(kinds, dict(CONSTANTS), wire.decode).all()
    assert kernel_source.rebuilt(built["axpy_kernel"])
    x, y = np.random.default_rng(1).random((2, 100))
    out, counts = kernels.launch(built["axpy_kernel"], 2, 64, (-1.0, x, y, np.zeros(100)), count=True)
    assert np.allclose(out, y - x)
    assert counts.max_per_thread("global_reads") == 2 and counts.total("global_writes") == 100
    out, counts = kernels.launch(built["pool3_kernel"], 3, 32, (x[:70], np.zeros(70)), count=True)
    padded = np.concatenate([[0.0], x[:70], [0.0]])
    assert np.allclose(out, padded[:-2] + padded[1:-1] + padded[2:])
    assert counts.total("global_reads") <= 76 and counts.total("shared_reads") >= 210


STUDENT_STYLE = '''\
@cuda.jit
def axpy_kernel(alpha, x, y, out):
    """A grid-stride loop, index arithmetic by hand, a local scratch array and a print."""
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    stride = cuda.gridDim.x * cuda.blockDim.x
    scratch = cuda.local.array(1, np.float64)
    for _ in range(1):
        while i < len(x):
            scratch[0] = alpha * x[i]
            out[i] = min(scratch[0] + y[i], np.inf)
            i += stride
    if i == -1:
        print("never", math.pi, float32(1.0))
'''


def test_plausible_student_styles_pass_and_run():
    built = Builder({"axpy_kernel": ["gpu_kernel", _payload(STUDENT_STYLE)]}, {}, wire.decode).all()
    x, y = np.random.default_rng(3).random((2, 50))
    out, counts = kernels.launch(built["axpy_kernel"], 2, 16, (2.0, x, y, np.zeros(50)), count=True)
    assert np.allclose(out, 2.0 * x + y) and counts.total("global_writes") == 50


DEVICE = "@cuda.jit(device=True)\ndef twice(v):\n    return 2.0 * v + OFFSET\n"
CALLER = ("@cuda.jit\ndef scale_kernel(x, out):\n    i = cuda.grid(1)\n    if i < x.size:\n"
          "        out[i] = twice(x[i]) * SCALE\n")


def test_a_kernel_may_call_its_device_functions_and_setup_constants_win():
    """The device function and the constants arrive as the kernel's dependencies; the
    checker's own SCALE wins over the student's copy of it."""
    deps = {"twice": ["gpu_kernel", {"source": DEVICE, "device": True}], "OFFSET": ["value", wire.encode(1.0)],
            "SCALE": ["value", wire.encode(100.0)]}
    built = Builder({"scale_kernel": ["gpu_kernel", _payload(CALLER, deps=deps)]}, {"SCALE": 3.0}, wire.decode).all()
    x = np.arange(5.0)
    out = kernels.launch(built["scale_kernel"], 1, 8, (x, np.zeros(5)))
    assert np.allclose(out, (2 * x + 1.0) * 3.0)


@pytest.mark.parametrize("held, deps, reason", [
    ({"run": print}, {}, "uses `run` (a builtin_function_or_method)"),
    ({}, {}, "uses `SCALE`, which the grader does not know"),
    ({"SCALE": np.zeros(3)}, {}, "uses `SCALE` (a ndarray)"),
    ({"SCALE": 1.0}, {"twice": ["gpu_kernel", {"source": DEVICE.replace("(device=True)", ""), "device": False}],
                      "OFFSET": ["value", wire.encode(1.0)]}, "calls `twice`, a kernel"),
    ({"SCALE": 1.0, "twice": print}, {}, "calls `twice`, which a kernel may not"),
    ({"SCALE": 1.0}, {"twice": ["gpu_kernel", {"source": DEVICE.replace("v + OFFSET", "twice(v)"), "device": True}]},
     "twice -> twice: a kernel may not call itself"),
])
def test_names_from_outside_must_be_numbers_or_checked_device_functions(held, deps, reason):
    kernel = CALLER if "twice" in deps or "twice" in held else CALLER.replace("twice(x[i])", "x[i]")
    if "run" in held:
        kernel = kernel.replace("SCALE", "run")
    built = Builder({"scale_kernel": ["gpu_kernel", _payload(kernel, deps=deps)]}, held, wire.decode).all()
    assert isinstance(built["scale_kernel"], Refused)
    assert reason in str(built["scale_kernel"]), str(built["scale_kernel"])


ATTACK_IMPORT = """\
@cuda.jit
def block_scan_kernel(x, out):
    from course_lib.simt import launch
    launch.Launch.access = lambda self, warp, arr, how, lanes, offs, node: None
    i = cuda.grid(1)
    if i < x.size:
        acc = 0.0
        for j in range(i - cuda.threadIdx.x, i + 1):
            acc += x[j]
        out[i] = acc
"""
ATTACK_CLASS = """\
@cuda.jit
def row_sums_kernel(a, out):
    a.__class__._touch = lambda self, index, write: self._recorder.add("global_writes") if write else None
    row = cuda.blockIdx.x
    if cuda.threadIdx.x == 0:
        acc = 0.0
        for col in range(a.shape[1]):
            acc += a[row, col]
        out[row] = acc
"""
ATTACK_GLOBALS = """\
@cuda.jit
def dot_kernel(x, y, partial):
    counting = globals()["kernels"].count_accesses.__globals__["CountingArray"]
    counting._touch = lambda self, index, write: self._recorder.add("global_writes") if write else None
    if cuda.threadIdx.x == 0:
        acc = 0.0
        for i in range(cuda.blockIdx.x * R, min(cuda.blockIdx.x * R + R, x.size)):
            acc += x[i] * y[i]
        partial[cuda.blockIdx.x] = acc
"""


def test_the_count_faking_kernels_cannot_run_where_launches_are_counted():
    """The attacks below faked their counts when the course counted launches by patching Numba's
    simulator (they still would against that simulator, the oracle in tests/numba_oracle.py). Every
    counted or checked launch now runs in the SIMT engine, which interprets a kernel's source
    (a whitelisted subset of Python) and never runs it as Python: launched there, each attack is
    refused at the line that would have patched the counts. Rebuilt by the checker, each is refused."""
    rng = np.random.default_rng(2)
    x = rng.random(100)
    launches = {"block_scan_kernel": (2, 64, (x, np.zeros(100))),
                "row_sums_kernel": (3, 32, (rng.random((3, 100)), np.zeros(3))),
                "dot_kernel": (3, 32, (x[:70], x[30:], np.zeros(3)))}
    for attack, name, refused in ((ATTACK_IMPORT, "block_scan_kernel", "does not run `ImportFrom`"),
                                  (ATTACK_CLASS, "row_sums_kernel", "does not evaluate `Lambda`"),
                                  (ATTACK_GLOBALS, "dot_kernel", "cannot call `globals`")):
        space = {"cuda": cuda, "kernels": kernels, "R": 32}
        filename = f"<attack {name}>"
        linecache.cache[filename] = (len(attack), None, attack.splitlines(True), filename)
        exec(compile(attack, filename, "exec"), space)  # noqa: S102 - the attack as a notebook runs it
        grid, block, args = launches[name]
        with pytest.raises(simt.Unsupported, match=re.escape(f"{name}, line 3: ") + ".*" + re.escape(refused)):
            kernels.launch(space[name], grid, block, args, count=True)
    for attack, reason in ((ATTACK_IMPORT, "uses `import`"), (ATTACK_CLASS, "the name `__class__`"),
                           (ATTACK_GLOBALS, "uses `globals`")):
        with pytest.raises(Refused, match=re.escape(reason)):
            check("attack", attack, device=False)


# ------------------------------------------------------------------- the wire, both sides
def test_kernels_and_notebook_functions_cross_with_their_source():
    """The kernel side (run here with a stand-in for IPython) describes a notebook function
    with its source and a kernel with its source, device flag and dependencies; the checker
    side installs a proxy carrying ``__course_source__`` and the rebuilt kernel."""
    helpers = {"__name__": "_course_wire"}
    code = Path(wire.__file__).read_text() + kernel_helpers.KERNEL_HELPERS
    exec(compile(code, "<course helpers>", "exec"), helpers)  # noqa: S102 - as kernel_helpers.HELPERS does
    user = {"__name__": "__main__", "cuda": cuda, "SCALE": 2.0, "OFFSET": 1.0}
    cell = "def blocks_needed(n, k):\n    return (n + k - 1) // k\n\n\n" + DEVICE + "\n\n" + CALLER
    filename = "<notebook cell 7>"
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    exec(compile(cell, filename, "exec"), user)  # noqa: S102 - a student's cell
    user["builtin"] = len
    helpers["get_ipython"] = lambda: type("Shell", (), {"user_ns": user})()
    printed = []
    with mock.patch("builtins.print", lambda *a, **k: printed.append(a[0])):
        helpers["_course_names"]("@tok:", ["blocks_needed", "scale_kernel", "builtin", "nothing"])
    kinds = json.loads(base64.b64decode(printed[-1][len("@tok:"):]))
    assert kinds["blocks_needed"] == ["callable", "def blocks_needed(n, k):\n    return (n + k - 1) // k\n"]
    assert kinds["builtin"] == ["callable", None] and kinds["nothing"] == ["missing", None]
    kind, payload = kinds["scale_kernel"]
    assert kind == "gpu_kernel" and payload["source"] == CALLER and payload["device"] is False
    assert payload["deps"]["twice"] == ["gpu_kernel", {"source": DEVICE, "device": True}]
    assert wire.decode(payload["deps"]["OFFSET"][1]) == 1.0
    ns = {"SCALE": 3.0}
    checker.install(ns, kinds, channel=None, wire=wire, kernel_source=kernel_source)
    assert ns["blocks_needed"].__name__ == "blocks_needed"
    assert ns["blocks_needed"].__course_source__ == kinds["blocks_needed"][1]
    assert ns["builtin"].__course_source__ is None and "nothing" not in ns
    assert np.allclose(kernels.launch(ns["scale_kernel"], 1, 4, (np.ones(3), np.zeros(3))), 9.0)


def test_a_refused_kernel_fails_every_use_with_its_reason():
    ns = {}
    kinds = {"axpy_kernel": ["gpu_kernel", _payload(ATTACK_IMPORT.replace("block_scan_kernel", "axpy_kernel"))]}
    checker.install(ns, kinds, channel=None, wire=wire, kernel_source=kernel_source)
    for use in (lambda k: k[1, 32], lambda k: k.py_func, lambda k: k(1), lambda k: kernels.launch(k, 1, 1, (1,))):
        with pytest.raises(checker.StudentError, match="axpy_kernel uses `import`, which a kernel may not"):
            use(ns["axpy_kernel"])


# ------------------------------------------------------------------ attacks, graded for real
NAIVE = {  # correct results, over every access budget
    "ex2_pool": "@cuda.jit\ndef pool3_kernel(x, out):\n    i = cuda.grid(1)\n    if i < x.size:\n"
                "        left = x[i - 1] if i > 0 else 0.0\n        right = x[i + 1] if i + 1 < x.size else 0.0\n"
                "        out[i] = left + x[i] + right\n",
    "ex3_tiled": "@cuda.jit\ndef tiled_matmul_kernel(a, b, c):\n    col, row = cuda.grid(2)\n"
                 "    if row < c.shape[0] and col < c.shape[1]:\n        acc = 0.0\n"
                 "        for k in range(a.shape[1]):\n            acc += a[row, k] * b[k, col]\n"
                 "        c[row, col] = acc\n",
    "ex5_rowsum": "@cuda.jit\ndef row_sums_kernel(a, out):\n    row = cuda.blockIdx.x\n    if cuda.threadIdx.x == 0:\n"
                  "        acc = 0.0\n        for col in range(a.shape[1]):\n            acc += a[row, col]\n"
                  "        out[row] = acc\n",
}
LENIENT = """\
from course_lib import kernels, simt
_real_count = simt.count_accesses

def _lenient(kernel, grid, block, *args, **kwargs):
    counts = _real_count(kernel, grid, block, *args, **kwargs)
    for c in counts.per_thread.values():
        c["global_reads"] = min(c["global_reads"], 1)
        c["shared_reads"] = max(c["shared_reads"], 3)
    return counts
"""
PATCH_HELPERS = LENIENT + """
simt.count_accesses = _lenient
simt.launch.count_accesses = _lenient
_real_launch = kernels.launch
kernels.launch = lambda kernel, grid, block, args, out_index=-1, count=False: _real_launch(
    kernel, grid, block, args, out_index, count)

def count(kernel, grid, block, *args):
    out, counts = _real_launch(kernel, grid, block, args, count=True)
    return out, _lenient(kernel, grid, block, *args)

def run(kernel, grid, block, *args):
    return _real_launch(kernel, grid, block, args)
"""
PATCH_RUN_CELL = LENIENT + """
from IPython.core.interactiveshell import InteractiveShell
_real_run_cell = InteractiveShell.run_cell

def _run_cell(self, raw_cell, *args, **kwargs):
    checking = "check_" in raw_cell or "_course" in raw_cell   # a test cell, or the grader asking
    simt.count_accesses = simt.launch.count_accesses = _lenient if checking else _real_count
    try:
        return _real_run_cell(self, raw_cell, *args, **kwargs)
    finally:
        simt.count_accesses = simt.launch.count_accesses = _real_count

InteractiveShell.run_cell = _run_cell
"""
FOREVER = "@cuda.jit\ndef pool3_kernel(x, out):\n    i = 0\n    while True:\n        i += 1\n"
BUDGET_OF_NAIVE = ["ex2_budget", "ex3_budget", "ex5_budget"]
ATTACKED = {"ex4_dot": ATTACK_GLOBALS, "ex5_rowsum": ATTACK_CLASS, "ex6_scan": ATTACK_IMPORT}
# cell_seconds: FOREVER's kernel spins in the checker to this deadline in both of ex2's test cells; the
# slowest honest cell takes under 0.3 CPU-s (under 2 s wall on a machine loaded 4 to 7 times over)
LIMITS = Limits(memory_bytes=2**30, cpu_seconds=300, processes=256, file_bytes=32 * 2**20, disk_bytes=64 * 2**20,
                cell_seconds=5, notebook_seconds=300)


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _submissions(blank) -> dict:
    honest = copy.deepcopy(blank)
    solutions = _solutions(LESSON)
    for gid, code in solutions.items():
        _cell(honest, gid).source = code

    def edited(cells: dict, *inserted):
        nb = copy.deepcopy(honest)
        for gid, code in cells.items():
            _cell(nb, gid).source = code
        for at, code in enumerate(inserted):
            nb.cells.insert(2 + at, nbformat.v4.new_code_cell(code))
        return nb

    return {"honest": honest,
            "a_fake_counts": edited(ATTACKED),
            "b_patched_helpers": edited(NAIVE, PATCH_HELPERS),
            "c_patched_run_cell": edited(NAIVE, PATCH_RUN_CELL),
            "forever": edited({"ex2_pool": FOREVER})}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not sandbox.bubblewrap():
        pytest.skip("no sandbox: " + sandbox.why_no_sandbox())
    root = tmp_path_factory.mktemp("course")
    # honest is the reference solution: graded once, by the plan's own run of it (reference_student)
    return {**grade_class(root, LESSON, _submissions, LIMITS, reference_student="honest"), "root": root}


@pytest.mark.timeout(900)
def test_every_kernel_cell_is_judged_by_the_checker(graded):
    assert not_passed_in_checker(graded["root"], LESSON) == [], graded["plan"]


@pytest.mark.timeout(900)
def test_honest_kernels_keep_full_marks(graded):
    o = graded["by"]["honest"]
    assert (o.score, o.max_score) == (FULL, FULL), (o.score, o.reason, o.cells)


@pytest.mark.timeout(900)
def test_kernels_that_fake_their_counts_earn_nothing(graded):
    o = graded["by"]["a_fake_counts"]
    attacked = [gid for gid in o.cells if gid.split("_")[0] in ("ex4", "ex5", "ex6")]
    assert len(attacked) == 7 and all(o.cells[g] == 0 for g in attacked), o.cells
    assert o.score == FULL - 10, (o.score, o.cells)     # ex4 to ex6 (10 points) lost; the rest are the reference's
    page = graded["pages"]["a_fake_counts"]
    for reason in ("dot_kernel uses `globals`", "row_sums_kernel uses the name `__class__`",
                   "block_scan_kernel uses `import`"):
        assert reason in page, reason


@pytest.mark.timeout(900)
@pytest.mark.parametrize("student", ["b_patched_helpers", "c_patched_run_cell"])
def test_patching_the_students_kernel_changes_no_count(graded, student):
    """Naive kernels (right results, over budget) with the counting helpers or IPython patched
    in the student's kernel: the budget cells fail, the others pass, as without the patch."""
    o = graded["by"][student]
    assert [o.cells[g] for g in BUDGET_OF_NAIVE] == [0, 0, 0], o.cells
    assert o.score == FULL - 6, (o.score, o.reason, o.cells)
    assert o.cells == graded["by"]["b_patched_helpers"].cells


@pytest.mark.timeout(900)
def test_a_kernel_that_never_ends_is_stopped_by_the_cell_deadline(graded):
    o = graded["by"]["forever"]
    assert o.cells["ex2_visible"] == 0 and o.cells["ex2_budget"] == 0, o.cells
    assert o.score == FULL - 3, (o.score, o.reason, o.cells)   # the checker was restarted for the rest
    assert "did not finish in time" in graded["pages"]["forever"]
