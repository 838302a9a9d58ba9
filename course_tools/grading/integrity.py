"""Guards for the test cells that the plan runs in the student's kernel (``plan``): hardened,
not sound, since whatever runs in the student's process can be rewritten by the student. How
such a test cell is run so that student code has a harder time turning a failure into a pass: the check helpers are defined afresh inside the cell from
``course_lib/checks/core.py``, a canary copy of the test that must fail is run first, the
IPython machinery a student could patch is reset (AST and input transformers, tracing
and profiling hooks, the excepthook), and a fingerprint of the functions tests
rely on is compared before each test cell.
"""
from __future__ import annotations

from pathlib import Path

import course_lib.checks.core as _checks_module

CHECK_NAMES = ("CheckFailed", "check_close", "check_array_close", "check_equal", "check_in", "check_true", "check_raises")


def _checks_source() -> str:
    """course_lib/checks/core.py as the body of a function (so its helpers stay private)."""
    text = Path(_checks_module.__file__).read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("from __future__")]
    return "\n".join("    " + ln if ln.strip() else "" for ln in lines)


def guarded_test(source: str, token: str, canary: bool) -> str:
    """A test cell's code as the grader runs it: the check helpers are defined afresh inside
    the cell from course_lib/checks/core.py (so nothing the student rebound or patched in
    ``course_lib.checks`` is used), then the test runs. The canary variant has the switch set,
    making every check and a final ``assert`` fail, and a failing check before the test's
    first statement (so a test with side effects, e.g. a push into a student's store, still
    runs once): if the kernel then reports success, the student's code has tampered with how
    errors are reported."""
    names = ", ".join(CHECK_NAMES)
    switch = 1 if canary else 0
    if canary:  # fail before the test's own statements: a test with side effects runs only once
        source = "check_true('integrity check', False, 'a failure', 'a pass')\n" + source
    return (f"def _course_checks_{token}(_canary):\n{_checks_source()}\n"
            f"    if _canary:\n"
            f"        def _ok(name):\n"
            f"            raise CheckFailed(name + ': integrity check')\n"
            f"    return {names}\n"
            f"_course_mode_{token} = {switch}\n"
            f"{names} = _course_checks_{token}(_course_mode_{token})\n"
            f"{source}\n"
            f"assert _course_mode_{token} == 0, 'integrity check'\n")


RESET_MACHINERY = """\
import sys as _course_sys, threading as _course_threading
_course_ip = get_ipython()
_course_ip.ast_transformers.clear()
_course_ip.input_transformers_post.clear()
_course_ip.input_transformers_cleanup[:] = [t for t in _course_ip.input_transformers_cleanup
                                            if getattr(t, "__module__", "").startswith("IPython.")]
_course_sys.excepthook = _course_sys.__excepthook__
_course_sys.settrace(None); _course_sys.setprofile(None)
_course_threading.settrace(None); _course_threading.setprofile(None)
del _course_sys, _course_ip, _course_threading
"""


# Identity of the functions and classes that tests rely on, printed by the kernel before any
# student code and again before each test cell; the grader compares the two texts outside.
# A curated list: libraries rebind some of their own names lazily (importing torch._dynamo,
# which the first optimizer step does, wraps torch.manual_seed), so not every callable counts.
FINGERPRINT = """\
def _course_fingerprint():
    import builtins, sys
    every = None
    compare = ["__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__float__",
               "__int__", "__abs__", "__sub__", "all", "any", "item", "tolist", "allclose", "equal", "eq"]
    wanted = {
        "builtins": every, "math": every, "operator": every, "numbers": every, "statistics": every,
        "time": ["perf_counter", "perf_counter_ns", "monotonic", "sleep", "time"],
        "unittest.mock": ["patch", "Mock", "MagicMock"],
        "numpy": ["allclose", "isclose", "array_equal", "array_equiv", "all", "any", "abs", "asarray", "array"],
        "numpy.testing": ["assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal"],
        "torch": ["allclose", "isclose", "equal", "eq", "is_tensor", "tensor", "as_tensor", "abs"],
        "torch.testing": ["assert_close"],
    }
    classes = {"numpy": "ndarray", "torch": "Tensor"}
    lines = []
    for name, keys in wanted.items():
        try:
            module = __import__(name, fromlist=["_"])
        except Exception:
            continue
        lines.append(f"module {name} {id(sys.modules.get(name))}")
        table = vars(module)
        for key in (k for k, v in list(table.items()) if callable(v)) if keys is None else keys:
            lines.append(f"{name}.{key} {id(table.get(key))}")
        if name in classes:
            cls = table.get(classes[name])
            lines.append(f"{name}.{classes[name]} {id(cls)}")
            for key in compare:
                lines.append(f"{name}.{classes[name]}.{key} {id(vars(cls).get(key)) if cls else 0}")
    return "\\n".join(lines)
print(_course_fingerprint())
del _course_fingerprint
"""


def fingerprint_changes(before: str, after: str) -> list[str]:
    """Names whose object changed or vanished between two FINGERPRINT outputs."""
    now = dict(line.rsplit(" ", 1) for line in after.splitlines() if " " in line)
    return [name for name, ident in (ln.rsplit(" ", 1) for ln in before.splitlines() if " " in ln)
            if now.get(name) != ident and name not in VOLATILE]


# rebound by ipykernel itself on every request (stdin forwarding)
VOLATILE = {"builtins.input", "builtins.raw_input", "builtins.getpass", "getpass.getpass"}

