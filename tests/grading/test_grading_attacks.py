"""A class that tries to cheat (issue 16), graded in one batch by the real grading pipeline on
lesson 01 (max 14). Each attack is written as a student would write it: notebook cells added
to their release copy, or files beside it. None may earn a point, leak a byte of hidden tests,
the grader's files or a classmate's work into any feedback page, or change another student's
grade; the honest submission keeps full marks. Skipped where bubblewrap cannot run.
"""
import base64
import copy
import os
import re
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from scratch_course import not_passed_in_checker, scratch_course

from course_tools.grading import sandbox
from course_tools.grading.grade import grade_lesson
from course_tools.grading.sandbox import Limits
from course_tools.grading.segments import split_hidden, visible_part

LESSON = "01_hardware_foundations"
FULL = 14.0
LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, file_bytes=32 * 2**20, disk_bytes=64 * 2**20,
                cell_seconds=12, notebook_seconds=240, notebook_output_bytes=1_000_000)
pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())]

WRONG = {  # every function defined, every answer 0
    "ex1_peak": "def peak_flops(cores, clock_hz, simd_bits, dtype_bits=32, fma_units=2):\n    return 0.0\n",
    "ex2_intensity": "def intensity_add(itemsize=4):\n    return 0.0\n\n"
                     "def intensity_matmul(n, itemsize=4):\n    return 0.0\n",
    "ex3_roofline": "def bound(intensity, peak, bandwidth):\n    return 0\n\n"
                    "def kernel_seconds(flops, bytes_moved, peak, bandwidth):\n    return 0.0\n",
    "ex4_lines": "def lines_touched(n, stride, itemsize=4, line_bytes=64):\n    return 0\n",
    "ex5_latency": "def latency_cycles(latency_s, clock_hz):\n    return 0.0\n\n"
                   "def flops_forgone(latency_s, peak_flops):\n    return 0.0\n",
}

ATTACK_CELLS = {
    # (a) turn every test cell into `pass` before it runs, leave everything else alone
    "a_transformer": "def _skip(lines):\n    return ['pass\\n'] if any('check_' in l for l in lines) else lines\n"
                     "get_ipython().input_transformers_cleanup.append(_skip)\n",
    # (b) a tracer that jumps over the raise inside the checks
    "b_settrace": "import sys, dis\n"
                  "def _tracer(frame, event, arg):\n"
                  "    if frame.f_code.co_name in ('_fail', 'check_close', 'check_equal', 'check_true'):\n"
                  "        def _local(frame, event, arg):\n"
                  "            if event == 'line':\n"
                  "                last = max(l for _, l in dis.findlinestarts(frame.f_code) if l)\n"
                  "                try:\n"
                  "                    frame.f_lineno = last\n"
                  "                except ValueError:\n"
                  "                    pass\n"
                  "            return _local\n"
                  "        return _local\n"
                  "    return None\n"
                  "sys.settrace(_tracer)\nimport threading\nthreading.settrace(_tracer)\n",
    # (d) builtins and math shadowed in the notebook's globals
    "d_builtins": "import math\nfloat = lambda x=0: 1e12\nabs = lambda x: 0\nisinstance = lambda *a: True\n"
                  "def print(*a, **k):\n    pass\nmath.isclose = lambda *a, **k: True\n",
}

REWRITE_CHECKS = (  # (c) the student's function reaches into the caller's globals
    "import sys\n"
    "def _neuter():\n"
    "    f = sys._getframe(1)\n"
    "    while f is not None:\n"
    "        for n in list(f.f_globals):\n"
    "            if n.startswith('check_'):\n"
    "                f.f_globals[n] = lambda *a, **k: None\n"
    "        f = f.f_back\n")

ALWAYS_EQUAL = (  # (e) answers that compare equal to anything
    "class Anything(float):\n"
    "    def __eq__(self, other):\n        return True\n"
    "    def __ne__(self, other):\n        return False\n"
    "    def __float__(self):\n        return self._want if hasattr(self, '_want') else 0.0\n"
    "class AnyStr(str):\n"
    "    def __eq__(self, other):\n        return True\n"
    "    def __ne__(self, other):\n        return False\n"
    "    __hash__ = str.__hash__\n")

RECORD_ARGS = (  # an innocent-looking print(args) plus a record printed by a later cell
    "CALLS = []\n"
    "def _logged(fn):\n"
    "    def wrapper(*args, **kwargs):\n"
    "        print('called with', args, kwargs)\n"
    "        CALLS.append((fn.__name__, args, kwargs))\n"
    "        return fn(*args, **kwargs)\n"
    "    return wrapper\n")


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _solutions(source):
    out = {}
    for c in source.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("solution"):
            out[meta["grade_id"]] = "\n".join(ln for ln in c.source.splitlines() if "### " not in ln) + "\n"
    return out


def _hidden_texts(source) -> list[str]:
    """Distinctive strings found only in hidden tests (names, arguments, expected values)."""
    texts = []
    for c in source.cells:
        _, hidden = split_hidden(c.source)
        texts += re.findall(r'"([^"]{12,})"', hidden)
    shown = "\n".join(visible_part(c.source) for c in source.cells)
    return [t for t in texts + ["3.456e12", "Xeon Phi", "15.7e12 / 900e9", "BEGIN HIDDEN TESTS"] if t not in shown]


def _submissions(source, blank, root: Path):
    sol = _solutions(source)
    honest = copy.deepcopy(blank)
    for gid, code in sol.items():
        _cell(honest, gid).source = code

    def wrong(*cells):
        nb = copy.deepcopy(blank)
        for gid, code in WRONG.items():
            _cell(nb, gid).source = code
        for at, code in enumerate(cells):
            nb.cells.insert(2 + at, nbformat.v4.new_code_cell(code))
        return nb

    def plus(nb, *cells, md=()):
        nb = copy.deepcopy(nb)
        nb.cells += [nbformat.v4.new_code_cell(c) for c in cells] + [nbformat.v4.new_markdown_cell(m) for m in md]
        return nb

    subs = {"honest": honest, "blank": blank, "wrong": wrong()}
    for name, code in ATTACK_CELLS.items():
        subs[name] = wrong(code)
    c_nb = wrong(REWRITE_CHECKS)
    for gid, code in WRONG.items():
        _cell(c_nb, gid).source = code.replace("    return", "    _neuter()\n    return")
    subs["c_getframe"] = c_nb
    e_nb = wrong(ALWAYS_EQUAL)
    for gid, code in WRONG.items():
        int_answer = "return AnyStr('x')\n" if gid == "ex3_roofline" else "return Anything(0)\n"
        _cell(e_nb, gid).source = code.replace("return 0.0", "return Anything(0.0)").replace("return 0\n", int_answer)
    subs["e_always_equal"] = e_nb
    args_nb = copy.deepcopy(honest)
    args_nb.cells.insert(2, nbformat.v4.new_code_cell(RECORD_ARGS))
    for gid, code in sol.items():
        names = re.findall(r"^def (\w+)", code, re.M)
        _cell(args_nb, gid).source = code + "".join(f"{n} = _logged({n})\n" for n in names)
    subs["leak_args"] = plus(args_nb, "print(CALLS)\n")
    spy = copy.deepcopy(honest)
    spy.cells.insert(2, nbformat.v4.new_code_cell(
        "seen = []\nget_ipython().input_transformers_cleanup.append(lambda lines: (seen.extend(lines), lines)[1])\n"))
    subs["leak_base64"] = plus(spy, "import base64\nprint(base64.b64encode(''.join(seen).encode()).decode())\n")
    subs["leak_glob"] = plus(honest, "import glob\n"
                             "for p in glob.glob('/**/*.ipynb', recursive=True) "
                             "+ glob.glob('/tmp/**', recursive=True):\n"
                             "    try:\n        text = open(p).read()\n    except Exception:\n        continue\n"
                             "    print(p, [l for l in text.splitlines() "
                             "if 'assert' in l or 'check_' in l or 'HIDDEN' in l])\n")
    subs["script"] = plus(honest, "from IPython.display import HTML, Javascript, display\n"
                          "display(HTML('<script>alert(1)</script><img src=x onerror=alert(4)>'))\n"
                          "display(Javascript('alert(5)'))\nprint('<script>alert(2)</script>')\n",
                          md=["<script>alert(3)</script> **bold**"])
    subs["md_hidden"] = plus(honest, md=["### BEGIN HIDDEN TESTS\nsee above\n### END HIDDEN TESTS"])
    meta = plus(honest, "x = 1\n")
    meta.cells[-1].metadata["nbgrader"] = {}
    subs["empty_meta"] = meta
    subs["memory"] = plus(honest, "import subprocess, sys, time\n"
                          "ps = [subprocess.Popen([sys.executable, '-c', 'b = bytearray(450 * 2**20); import time; "
                          "time.sleep(60)']) for _ in range(3)]\ntime.sleep(15)\n")
    subs["disk"] = plus(honest, "for i in range(5):\n    open(f'/tmp/blob{i}', 'wb').write(b'x' * 30 * 2**20)\n"
                        "import time\ntime.sleep(3)\n")
    subs["processes"] = plus(honest, "import subprocess\n"
                             "ps = [subprocess.Popen(['sleep', '30']) for _ in range(100)]\n")
    subs["output"] = plus(honest, *["print('y' * 200_000)\n"] * 150)
    return subs, honest


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    course, source = scratch_course(root, LESSON)
    src_nb = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    blank = nbformat.read(str(root / "release" / LESSON / "exercises.ipynb"), as_version=4)
    subs, honest = _submissions(src_nb, blank, root)
    incoming = root / "incoming"
    for student, nb in subs.items():
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    secret_file = root / "grader_secret.txt"
    secret_file.write_text("GRADER-ONLY-SECRET-4711\n")
    os.chmod(secret_file, 0o600)
    # (f) symlinks instead of work; links beside the notebook to what only the grader can read
    (incoming / "f_link_notebook").mkdir()
    os.symlink(source / LESSON / "exercises.ipynb", incoming / "f_link_notebook" / "exercises.ipynb")
    os.symlink(incoming / "honest", incoming / "f_link_folder")
    (incoming / "f_link_lesson").mkdir()
    os.symlink(incoming / "honest", incoming / "f_link_lesson" / LESSON)
    links = incoming / "leak_links"
    links.mkdir()
    nbformat.write(plus_cat(honest), str(links / "exercises.ipynb"))
    for name, target in (("shadow", "/etc/shadow"), ("environ", "/proc/self/environ"),
                         ("gradebook", root / "gradebook.db"), ("secret", secret_file),
                         ("classmate", incoming / "honest"), ("zero", "/dev/zero")):
        os.symlink(target, links / name)
    pipe = incoming / "pipe"
    pipe.mkdir()
    nbformat.write(honest, str(pipe / "exercises.ipynb"))
    os.mkfifo(pipe / "fifo")
    (incoming / "bad\nname").mkdir()
    nbformat.write(honest, str(incoming / "bad\nname" / "exercises.ipynb"))
    (incoming / "timestamp").mkdir()
    nbformat.write(honest, str(incoming / "timestamp" / "exercises.ipynb"))
    (incoming / "timestamp" / "timestamp.txt").write_text("yesterday-ish, roughly \x00\x01")
    # the grader's temporary files go to a folder of this test's own (short: kernel sockets live
    # there), so that other programs' files in /tmp, a parallel test's sandboxes included, do not count
    private_tmp = Path(tempfile.mkdtemp(prefix="cga-"))
    old_tempdir, tempfile.tempdir = tempfile.tempdir, str(private_tmp)
    try:
        outcomes = grade_lesson(source / LESSON, course=course, submissions=incoming, workers=2, limits=LIMITS,
                                progress=False)
    finally:
        tempfile.tempdir = old_tempdir
    left_in_tmp = sorted(os.listdir(private_tmp))
    shutil.rmtree(private_tmp, ignore_errors=True)
    return {"course": course, "by": {o.student: o for o in outcomes}, "source": src_nb,
            "left_in_tmp": left_in_tmp, "secret": "GRADER-ONLY-SECRET-4711"}


def plus_cat(honest):
    nb = copy.deepcopy(honest)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import os\nfor name in sorted(os.listdir('.')):\n    try:\n        print(name, open(name, 'rb').read(300))\n"
        "    except Exception as exc:\n        print(name, exc)\n"))
    return nb


ZERO = ["blank", "wrong", "a_transformer", "b_settrace", "c_getframe", "d_builtins", "e_always_equal",
        "f_link_notebook", "f_link_folder", "f_link_lesson", "leak_links", "pipe", "bad\\nname"]
FULL_MARKS = ["honest", "leak_args", "leak_base64", "leak_glob", "script", "md_hidden", "empty_meta", "timestamp",
              "memory", "disk", "processes", "output"]
REASON = {"f_link_notebook": "symbolic link", "f_link_folder": "symbolic link", "f_link_lesson": "symbolic link",
          "leak_links": "symbolic link", "pipe": "named pipe", "bad\\nname": "not a plain student id",
          "timestamp": "timestamp.txt is not a date", "memory": "memory limit", "disk": "disk limit",
          "processes": "process limit", "output": "output of cell", "honest": "graded normally",
          "md_hidden": "graded normally", "empty_meta": "graded normally"}


def test_every_test_cell_is_judged_by_the_checker(graded):
    assert not_passed_in_checker(graded["course"].root, LESSON) == []


@pytest.mark.parametrize("student", ZERO)
def test_attacks_earn_nothing(graded, student):
    o = graded["by"][student]
    refused = o.status == "refused" and o.score != o.score   # refused: no score at all (NaN), the reason says why
    assert o.score == 0 or refused, (student, o.score, o.reason, o.cells)
    assert o.max_score == FULL
    if student in REASON:
        assert REASON[student] in o.reason, (student, o.reason)


@pytest.mark.parametrize("student", FULL_MARKS)
def test_honest_work_keeps_full_marks_and_a_true_reason(graded, student):
    o = graded["by"][student]
    assert o.score == FULL, (student, o.score, o.reason, o.cells)
    assert REASON.get(student, "") in o.reason, (student, o.reason)
    assert "grader error" not in o.reason


def _pages(course):
    return {p.parent.parent.name: p.read_text() for p in (course.root / "feedback").glob(f"*/{LESSON}/exercises.html")}


def test_feedback_leaks_no_hidden_test_no_secret_and_runs_no_student_script(graded):
    pages = _pages(graded["course"])
    assert "honest" in pages and "leak_args" in pages and "leak_links" not in pages
    hidden = _hidden_texts(graded["source"])
    hidden_args = ["1500000000.0", "dtype_bits': 64", "(2048,)", "(1000, 2)", "(4096, 8)"]
    shadow = Path("/etc/shadow").read_text().split(":")[0] + ":" if Path("/etc/shadow").exists() else None
    for student, html in pages.items():
        decoded = "".join(_b64(t) for t in re.findall(r"[A-Za-z0-9+/=]{40,}", html))
        for text in hidden + hidden_args + [graded["secret"]]:
            if not (student == "md_hidden" and text == "BEGIN HIDDEN TESTS"):  # its own markdown says so
                assert text not in html and text not in decoded, (student, text)
        if shadow:
            assert shadow + "$" not in html and "root:*:" not in html
        assert "<script>alert" not in html and "<img src=x" not in html, student
        assert html.count("<script") == pages["honest"].count("<script"), student  # the template's own only
        assert "https://cdn" not in html


def _b64(token: str) -> str:
    try:
        return base64.b64decode(token + "=" * (-len(token) % 4)).decode("utf-8", "replace")
    except ValueError:
        return ""


def test_failing_feedback_shows_expected_and_got_first_and_no_checker_code(graded):
    html = _pages(graded["course"])["wrong"]
    assert "peak_flops(4, 2e9, 256): expected 2.56e+11" in html
    for internal in ("_course_", "integrity check", "checker.py", "wire.py", "Cell In["):
        assert internal not in html
    assert "a hidden test failed" in html
    assert "_vendor/mathjax/MathJax.js" in html


def test_csv_has_every_student_with_per_test_points(graded):
    course = graded["course"]
    rows = (course.root / "build" / f"grades_{LESSON}.csv").read_text().splitlines()
    head = rows[0].split(",")
    assert head[:5] == ["student", "score", "max_score", "seconds", "reason"] and "ex5_hidden" in head
    assert len(rows) == 1 + len(graded["by"])


def test_nothing_left_in_tmp_or_scratch(graded):
    course = graded["course"]
    assert not list((course.root / "build" / "grading").glob(".scratch-*"))
    assert not list((course.root / "build" / "grading" / LESSON / "shards").glob("*")) if (
        course.root / "build" / "grading" / LESSON / "shards").exists() else True
    assert graded["left_in_tmp"] == []   # the grader's temporary folder, all of it


def test_refused_submissions_copied_nothing(graded):
    submitted = graded["course"].root / "submitted"
    for student in ("f_link_notebook", "f_link_folder", "f_link_lesson", "leak_links", "pipe"):
        assert not (submitted / student / LESSON).exists(), student
