"""Attacks on what grading records (issue 26, attacks 3, 10, 11, 12), graded by the real pipeline
(``grade_lesson``, as ``course grade 01 --submissions DIR``) on lesson 01 (max 14) in one class:

- malformed nbgrader metadata (a graded markdown cell without ``grade_id``, a list-valued
  ``grade_id``, ``"nbgrader": "yes"``, metadata nested too deep to read) is only that student's
  problem: a plain reason in their row, and everyone else's CSV row and gradebook entry are
  written, on the first run and on every later one;
- a feedback page made from a notebook with ``"widgets"`` metadata loads nothing from the network
  (headless Chromium with every request that would leave refused and recorded), and its
  Content-Security-Policy blocks what a filter might miss;
- a student's own ``timestamp.txt`` (2000-01-01) does not become the submission time (the grader's
  intake time does), while a folder ``nbgrader collect`` brought in keeps the exchange's time;
- a refused folder named ``=1+1`` is written into the CSV as text a spreadsheet does not run;
- (issue 35, attacks 3 and 4) text that no file can hold: two students solve everything in the
  first run (14), then hand in the blank with a lone surrogate in what leaves their kernel, one
  in the message of the exception their function raises when the checker calls it, the other
  in messages its kernel forges (a print, and an error whose text lands in their reason; before
  them, raw messages that cannot be read or whose content is no dict) and in its notebook's own
  JSON. They score the blank's 0 (never "grader error" keeping the 14),
  their reason shows the surrogate escaped (``\\ud800``), and CSV and gradebook agree.

The second run resubmits one student's work (0 -> 14): a merge whose CSV cannot be written
changes neither gradebook nor CSV and says so; its merge is then stopped by SIGTERM (the
gradebook must stay byte for byte as it was and the CSV must show no old score), then merged
again (``course grade LESSON --merge``), and the new score must be in CSV and gradebook. A
graded notebook that cannot be written is that student's 0, recorded as such by the merge.
Skipped where bubblewrap cannot run; the browser checks where Chromium or Playwright is missing.
"""
import copy
import csv
import errno
import hashlib
import json
import math
import os
import re
import shutil
import signal
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from scratch_course import scratch_course

from course_tools.grading import one_submission, results, sandbox
from course_tools.grading.execute import Execution, Verdict
from course_tools.grading.grade import grade_lesson, merge_lesson
from course_tools.grading.nbgrader_course import GradingError
from course_tools.grading.sandbox import Limits

LESSON = "01_hardware_foundations"
FULL = 14.0
LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, file_bytes=32 * 2**20, disk_bytes=64 * 2**20,
                cell_seconds=12, notebook_seconds=240, notebook_output_bytes=1_000_000)
pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())]
CHROMIUM = next((p for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium") if Path(p).exists()), None)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
# what ipywidgets writes into a notebook saved with widget state; nbconvert's page then loads
# the widget renderer from a CDN
WIDGETS = {"application/vnd.jupyter.widget-state+json": {
    "state": {"abc123": {"model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0",
                         "model_name": "IntSliderModel", "state": {"value": 3}}},
    "version_major": 2, "version_minor": 0}}
FAKE_STAMP = "2000-01-01 00:00:00.000000 UTC"
EXCHANGE_STAMP = "2026-01-02 03:04:05.000006 UTC"
INJECTIONS = ["=1+1", "@SUM(1+1)", "+1-2"]
SURROGATE = "\ud800"   # a lone surrogate: valid in a Python str and a JSON escape, never in UTF-8
# its function raises with it when the checker calls it (the message reaches the test's verdict)
RAISES = ("def peak_flops(cores, clock_hz, simd_bits, dtype_bits=32, fma_units=2):\n"
          "    raise ValueError('no answer yet \\ud800')\n")
# its kernel sends raw messages that jupyter_client cannot read or whose content is no dict, then
# sends every message as ASCII JSON, where a lone surrogate travels as an escape (a print, and an
# error whose text lands in the reason); the notebook's JSON holds one itself (the comment)
FORGES = ("import json\n"
          "kernel = get_ipython().kernel\n"
          "parent = kernel.get_parent()['header']\n"
          "def forge(header, content):   # signed with the kernel's own key\n"
          "    kernel.session.send_raw(kernel.iopub_socket, [header, json.dumps(parent, default=str).encode(),\n"
          "                                                  b'{}', content])\n"
          "def header(**fields):\n"
          "    return json.dumps(dict(parent, **fields), default=str).encode()\n"
          "forge(b'{}', b'{}')   # no msg_id\n"
          "forge(b'{', b'{}')    # not JSON\n"
          "forge(header(msg_id='f1', msg_type='stream'), b'[1]')\n"
          "forge(header(msg_id='f2', msg_type='stream'), b'{\"text\": 5}')\n"
          "kernel.session.pack = lambda msg: json.dumps(msg, default=str).encode()\n"
          f"# {SURROGATE}\n"
          "print('printed \\ud800')\n"
          "raise PermissionError('Permission denied \\ud800')\n")


def _browser_skip() -> str | None:
    if not CHROMIUM:
        return "Chromium is not installed (`make test` installs Debian's chromium when run as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (pip install -e '.[dev]')"
    return None


def _honest(source, blank):
    nb = copy.deepcopy(blank)
    for c in source.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell = next(b for b in nb.cells if b.metadata.get("nbgrader", {}).get("grade_id") == meta["grade_id"])
            cell.source = "\n".join(ln for ln in c.source.splitlines() if "### " not in ln) + "\n"
    return nb


def _plus(nb, cell):
    nb = copy.deepcopy(nb)
    nb.cells.append(cell)
    return nb


def _write(folder: Path, nb) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / "exercises.ipynb"), version=4)


def _write_json(folder: Path, data: dict, raw_meta: str | None = None) -> None:
    """A notebook written as JSON text; ``raw_meta`` (JSON text) becomes the last cell's metadata,
    written as is (a student can save any JSON, not only what nbformat would)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data)
    if raw_meta is not None:
        marker = '"metadata": {"__raw__": 1}'
        assert text.count(marker) == 1
        text = text.replace(marker, '"metadata": ' + raw_meta)
    (folder / "exercises.ipynb").write_text(text)


def _with_solution(blank, grade_id: str, source: str):
    nb = copy.deepcopy(blank)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id).source = source
    return nb


def _write_surrogates(folder: Path, nb) -> None:
    """A notebook whose JSON spells lone surrogates as ``\\ud800`` escapes (nbformat refuses to)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "exercises.ipynb").write_text(json.dumps(nb))


def _gradebook(course, student):
    """(score, timestamp) of the student's lesson in the course's gradebook, or None."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(course.db_url) as gb:
        try:
            sub = gb.find_submission(LESSON, student)
        except MissingEntry:
            return None
        return float(sub.score), sub.timestamp


def _csv(course) -> dict:
    with open(course.root / "build" / f"grades_{LESSON}.csv", newline="") as fh:
        return {row["student"]: row for row in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    course, source = scratch_course(root, LESSON)
    src_nb = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    blank = nbformat.read(str(root / "release" / LESSON / "exercises.ipynb"), as_version=4)
    honest = _honest(src_nb, blank)
    incoming = root / "incoming"
    _write(incoming / "honest", honest)
    _write(incoming / "resubmits", blank)   # the first run: nothing done yet
    # (3) malformed nbgrader metadata, each beside full answers
    md = nbformat.v4.new_markdown_cell("Please give me the points.")
    md.metadata["nbgrader"] = {"grade": True, "points": 5, "solution": False, "locked": False, "schema_version": 3}
    _write(incoming / "md_no_grade_id", _plus(honest, md))
    listed = nbformat.v4.new_code_cell("x = 1\n")
    listed.metadata["nbgrader"] = {"grade": True, "grade_id": ["ex1_peak", "x"], "points": 100, "solution": False,
                                   "locked": False, "schema_version": 3}
    _write(incoming / "list_grade_id", _plus(honest, listed))
    yes = nbformat.v4.new_markdown_cell("yes")
    yes.metadata["__raw__"] = 1
    _write_json(incoming / "nbgrader_yes", json.loads(nbformat.writes(_plus(honest, yes))), '{"nbgrader": "yes"}')
    deep = nbformat.v4.new_code_cell("y = 2\n")
    deep.metadata["__raw__"] = 1
    depth = 100_000   # deeper than any JSON parser's recursion
    _write_json(incoming / "deep_meta", json.loads(nbformat.writes(_plus(honest, deep))),
                '{"nbgrader": ' + '{"a": ' * depth + "1" + "}" * depth + "}")
    # (10) widget state in the notebook's metadata
    widgets = copy.deepcopy(honest)
    widgets.metadata["widgets"] = WIDGETS
    _write(incoming / "widgets", widgets)
    # (11) the student's own submission time
    _write(incoming / "fake_time", honest)
    (incoming / "fake_time" / "timestamp.txt").write_text(FAKE_STAMP)
    # ... while a submission that `nbgrader collect` brought from the exchange keeps the time the
    # exchange recorded (nbgrader's own format)
    _write(root / "submitted" / "collected" / LESSON, honest)
    (root / "submitted" / "collected" / LESSON / "timestamp.txt").write_text(EXCHANGE_STAMP)
    # (12) folder names a spreadsheet would run as formulas
    for name in INJECTIONS:
        _write(incoming / name, honest)
    # (issue 35, 3 and 4) solved first; the blank with lone surrogates in the second run
    for student in ("surrogate_raise", "surrogate_forge"):
        _write(incoming / student, honest)
    before = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(seconds=1)   # UTC, as nbgrader keeps it
    private_tmp = Path(tempfile.mkdtemp(prefix="cgr-"))   # short: kernel sockets live there
    old_tempdir, tempfile.tempdir = tempfile.tempdir, str(private_tmp)
    try:
        # `course grade LESSON`: the class in submitted/, here the one student the exchange brought
        # (a later `--submissions DIR` grades exactly DIR's students, not this one)
        exchange = grade_lesson(source / LESSON, course=course, limits=LIMITS, progress=False)
        assert [o.student for o in exchange] == ["collected"]
        first = exchange + grade_lesson(source / LESSON, course=course, submissions=incoming, workers=2,
                                        limits=LIMITS, progress=False)
        assert "collected" not in {o.student for o in first[1:]}
        csv1, book1 = _csv(course), {s: _gradebook(course, s) for s in ("honest", "resubmits", "fake_time")}
        # the second run: the resubmitter's new work; the malformed folders are still in submitted/
        _write(incoming / "resubmits", honest)
        _write(incoming / "surrogate_raise", _with_solution(blank, "ex1_peak", RAISES))
        _write_surrogates(incoming / "surrogate_forge", _plus(blank, nbformat.v4.new_code_cell(FORGES)))
        second = grade_lesson(source / LESSON, course=course, submissions=incoming, workers=2, limits=LIMITS,
                              progress=False, merge_after=False)
    finally:
        tempfile.tempdir = old_tempdir
        shutil.rmtree(private_tmp, ignore_errors=True)
    return {"course": course, "root": root, "first": {o.student: o for o in first}, "csv1": csv1,
            "book1": book1, "second": {o.student: o for o in second}, "before": before, "blank": blank}


MALFORMED = ["md_no_grade_id", "list_grade_id", "nbgrader_yes"]


def test_first_run_records_everyone_and_exits_cleanly(graded):
    by = graded["first"]
    # `course grade` exits 1 only for a grader error: here none; refused folders have no score (NaN)
    assert not [o.student for o in by.values() if o.status == "error"], {s: o.reason for s, o in by.items()}
    assert sorted(s for s, o in by.items() if math.isnan(o.score)) == sorted(["deep_meta", *INJECTIONS])
    for student in ("honest", "widgets", "fake_time", "collected", *MALFORMED):
        assert by[student].score == FULL and by[student].max_score == FULL, (student, by[student].reason)
        assert "grader error" not in by[student].reason
    assert by["resubmits"].score == 0
    rows = graded["csv1"]
    assert rows["honest"]["score"] == "14" and rows["honest"]["reason"] == "graded normally"
    assert graded["book1"]["honest"][0] == FULL and graded["book1"]["resubmits"][0] == 0


@pytest.mark.parametrize("student", MALFORMED)
def test_malformed_metadata_is_that_students_plain_reason(graded, student):
    o = graded["first"][student]
    assert "malformed nbgrader metadata ignored: cell" in o.reason, o.reason
    assert "\n" not in o.reason and len(o.reason) < 300
    row = graded["csv1"][student]
    assert row["score"] == "14" and row["max_score"] == "14" and "malformed nbgrader metadata" in row["reason"]
    assert _gradebook(graded["course"], student)[0] == FULL   # no invented points, nothing lost


def test_metadata_nested_too_deep_is_refused_with_a_reason(graded):
    o = graded["first"]["deep_meta"]
    assert o.status == "refused" and math.isnan(o.score) and "nested too deeply" in o.reason, o.reason
    assert graded["csv1"]["deep_meta"]["score"] == ""   # no score in the CSV, none in the gradebook
    assert _gradebook(graded["course"], "deep_meta") is None


def test_student_timestamp_is_not_the_submission_time(graded):
    course = graded["course"]
    score, stamp = _gradebook(course, "fake_time")
    assert score == FULL and stamp is not None and stamp >= graded["before"], stamp
    assert stamp.year != 2000
    assert "own timestamp.txt (2000-01-01 00:00) was ignored" in graded["first"]["fake_time"].reason
    written = (course.root / "submitted" / "fake_time" / LESSON / "timestamp.txt").read_text()
    assert not written.startswith("2000")
    assert _gradebook(course, "collected") == (FULL, datetime(2026, 1, 2, 3, 4, 5, 6))   # the exchange's time
    assert "timestamp" not in graded["first"]["collected"].reason
    # an honest student has the grader's time too, and no note about it
    assert graded["book1"]["honest"][1] >= graded["before"] and "timestamp" not in graded["first"]["honest"].reason


def test_formula_folder_names_are_escaped_in_the_csv(graded):
    text = (graded["course"].root / "build" / f"grades_{LESSON}.csv").read_text()
    rows = graded["csv1"]
    for name in INJECTIONS:
        assert rows["'" + name]["score"] == "" and "not a plain student id" in rows["'" + name]["reason"]
        assert name not in rows
    for line in text.splitlines():
        assert not line.startswith(("=", "+", "-", "@", "\t", "\r")), line
        for cell in next(csv.reader([line])):
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or cell.lstrip("-").replace(".", "").isdigit(), cell


SURROGATE_STUDENTS = ["surrogate_raise", "surrogate_forge"]


@pytest.mark.parametrize("student", SURROGATE_STUDENTS)
def test_lone_surrogates_are_the_students_own_text_never_a_grader_error(graded, student):
    assert graded["first"][student].score == FULL   # the gradebook holds 14 from the first run
    o = graded["second"][student]
    assert o.status == "graded" and o.score == 0 and "grader error" not in o.reason, o.reason   # the blank's 0
    o.reason.encode("utf-8")
    if student == "surrogate_forge":   # the forged error's text is in the reason, the surrogate escaped
        assert "(PermissionError: Permission denied \\ud800)" in o.reason, o.reason


def _agree(course) -> None:
    """Every score in the CSV is the gradebook's (a student without one there has none)."""
    for student, row in _csv(course).items():
        if row["score"]:
            assert _gradebook(course, student)[0] == float(row["score"]), (student, row)


def test_a_csv_that_cannot_be_written_changes_nothing_and_says_so(graded, monkeypatch):
    course, root = graded["course"], graded["root"]
    files = course.root / "gradebook.db", course.root / "build" / f"grades_{LESSON}.csv"
    before = [f.read_bytes() for f in files]

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(csv, "writer", full_disk)   # every CSV this merge writes fails
    with pytest.raises(GradingError, match="nothing recorded") as failed:
        grade_merge(root)
    monkeypatch.undo()
    assert "could not be written either" in str(failed.value) and "No space left" in str(failed.value)
    assert [f.read_bytes() for f in files] == before   # the gradebook is not ahead of the CSV
    assert not list(files[0].parent.glob("gradebook.db.merge-*")) and not list(files[1].parent.glob(".grades_*.tmp"))
    _agree(course)


def test_stopped_merge_changes_nothing_then_merge_records_the_new_score(graded, monkeypatch):
    course, root = graded["course"], graded["root"]
    assert graded["second"]["resubmits"].score == FULL   # the shard holds the new result
    gradebook = course.root / "gradebook.db"
    digest = hashlib.sha256(gradebook.read_bytes()).hexdigest()
    received = []
    old = signal.signal(signal.SIGTERM, lambda n, f: received.append(n))
    real_save, saved = results.save_grades, []

    def save_then_sigterm(*args, **kwargs):   # SIGTERM arrives while the second student is written
        real_save(*args, **kwargs)
        saved.append(args[2])
        if len(saved) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(results, "save_grades", save_then_sigterm)
    try:
        rows = grade_merge(root)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert received == [signal.SIGTERM]   # held to the end of the merge, then delivered
    assert hashlib.sha256(gradebook.read_bytes()).hexdigest() == digest   # not half written
    stale = _csv(course)
    assert stale["honest"]["score"] == "" and "not recorded" in stale["honest"]["reason"]   # no old score shown
    assert {o.student for o in rows} == set(graded["second"])
    assert not list(gradebook.parent.glob("gradebook.db.merge-*"))
    monkeypatch.setattr(results, "save_grades", real_save)
    merged = {o.student: o for o in grade_merge(root)}   # course grade LESSON --merge
    assert merged["resubmits"].score == FULL and _gradebook(course, "resubmits")[0] == FULL
    rows = _csv(course)
    assert rows["resubmits"]["score"] == "14" and rows["honest"]["score"] == "14"
    for student in MALFORMED:
        assert rows[student]["score"] == "14" and "malformed nbgrader metadata" in rows[student]["reason"]
    assert rows["'=1+1"]["score"] == ""
    assert _gradebook(course, "fake_time")[1] == graded["book1"]["fake_time"][1]   # same files: same time


def test_lone_surrogates_are_escaped_in_every_record_and_csv_and_gradebook_agree(graded):
    course = graded["course"]   # after the merge of the second run (test above)
    (course.root / "build" / f"grades_{LESSON}.csv").read_bytes().decode("utf-8")   # valid UTF-8 throughout
    rows = _csv(course)
    for student in SURROGATE_STUDENTS:   # the blank's 0 in both, the 14 of the first run gone
        assert rows[student]["score"] == "0" and _gradebook(course, student)[0] == 0, rows[student]
    assert "Permission denied \\ud800" in rows["surrogate_forge"]["reason"]
    _agree(course)
    shown = {}
    for student in SURROGATE_STUDENTS:
        nb = nbformat.read(str(course.root / "autograded" / student / LESSON / "exercises.ipynb"), as_version=4)
        shown[student] = json.dumps(nb.cells, ensure_ascii=False)
        page = (course.root / "feedback" / student / LESSON / "exercises.html").read_text(encoding="utf-8")
        assert "\\ud800" in page, student
    assert "no answer yet \\\\ud800" in shown["surrogate_raise"]   # the verdict's message, escaped
    assert "printed \\\\ud800" in shown["surrogate_forge"] and "# \\\\ud800" in shown["surrogate_forge"]


def grade_merge(root: Path):
    from course_tools.grading.nbgrader_course import CourseDir
    return merge_lesson(root / "source" / LESSON, course=CourseDir(root, root / "source"))


class Watch:
    """Requests from one page: those to this machine's files pass, any other is refused and kept."""

    def __init__(self, page):
        self.remote, self.errors, self.violations = [], [], []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        page.route("**/*", self._route)

    def _route(self, route):
        url = route.request.url
        if url.startswith(("file://", "data:", "blob:")):
            route.continue_()
        else:
            self.remote.append(url)
            route.abort("internetdisconnected")


@pytest.mark.skipif(_browser_skip() is not None, reason=_browser_skip() or "")
def test_widget_feedback_page_loads_nothing_from_the_network(graded, tmp_path):
    from playwright.sync_api import sync_playwright

    page_path = graded["course"].root / "feedback" / "widgets" / LESSON / "exercises.html"
    html = page_path.read_text()
    assert '<meta http-equiv="Content-Security-Policy"' in html and "widget-state" not in html
    assert "abc123" not in html   # the widget state is not in the page
    assert not re.findall(r"""\b(?:src|href)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//""", html, re.I)
    # the same page with what a filter could miss: the policy itself must stop it
    planted = page_path.with_name("planted.html")
    planted.write_text(html.replace("</body>", '<script src="https://cdn.jsdelivr.net/npm/x.js"></script>'
                                    '<img src="https://example.com/a.png"><link rel="stylesheet" '
                                    'href="//unpkg.com/y.css"></body>'))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
            try:
                for path, blocked in ((page_path, False), (planted, True)):
                    context = browser.new_context()
                    page = context.new_page()
                    watch = Watch(page)
                    page.add_init_script("window.__csp = []; document.addEventListener('securitypolicyviolation', "
                                         "e => window.__csp.push(e.blockedURI))")
                    page.goto(path.as_uri())
                    page.wait_for_load_state("load")
                    if "_vendor/mathjax" in html:   # the local MathJax runs under the policy
                        page.wait_for_function("() => window.MathJax && MathJax.isReady", timeout=30_000)
                    page.wait_for_timeout(500)
                    violations = page.evaluate("window.__csp")
                    assert page.evaluate("document.body.innerText").count("Feedback: 14 / 14 points") == 1
                    context.close()
                    assert watch.remote == [], (path.name, watch.remote)
                    if blocked:
                        assert any(host in v for v in violations for host in ("jsdelivr", "example.com", "unpkg")), (
                            violations)
                    else:
                        assert violations == [] and not [e for e in watch.errors if "Content Security" in e], (
                            violations, watch.errors)
            finally:
                browser.close()
    finally:
        planted.unlink()


def test_a_graded_notebook_that_cannot_be_written_is_the_students_0(graded, monkeypatch):
    """Writing the graded notebook: student text that reaches it unescaped is escaped; when the
    notebook cannot be written, it is written without the student's outputs (the score stands);
    when nothing can be, the student scores 0 with the reason, and the merge records that 0
    (never the earlier score)."""
    course, root, blank = graded["course"], graded["root"], graded["blank"]
    gids = [c.metadata["nbgrader"]["grade_id"] for c in blank.cells if c.metadata.get("nbgrader", {}).get("grade")
            and c.cell_type == "code"]
    shown = next(i for i, c in enumerate(blank.cells) if c.cell_type == "code" and "nbgrader" not in c.metadata)
    ex = Execution(verdicts={g: Verdict(True) for g in gids},
                   outputs={shown: [{"output_type": "stream", "name": "stdout", "text": f"odd {SURROGATE}\n"}]})
    out = results.shard_dir(course, LESSON, 0, 1)
    (out / "graded").mkdir(parents=True, exist_ok=True)   # an earlier test may have left it
    run = SimpleNamespace(out=out, feedback=False, max_score=FULL)   # what record reads of a LessonRun
    real_write, calls = nbformat.write, []

    def write_without_outputs(nb, path, **kwargs):   # fails while a student cell has outputs
        calls.append(path)
        if any(c.cell_type == "code" and c.get("outputs") and "nbgrader" not in c.metadata for c in nb.cells):
            raise OSError(errno.EFBIG, "File too large")
        real_write(nb, path, **kwargs)

    kept = results.Outcome("honest")
    one_submission.record(kept, blank, ex, run)   # the surrogate escaped: written whole
    written = nbformat.read(str(out / "graded" / "honest.ipynb"), as_version=4)
    assert kept.score == FULL and written.cells[shown].outputs[0].text == "odd \\ud800\n"
    monkeypatch.setattr(nbformat, "write", write_without_outputs)
    bare = results.Outcome("honest")
    one_submission.record(bare, blank, ex, run)
    assert len(calls) == 2 and bare.score == FULL and "without your cells' outputs" in bare.reason, bare.reason
    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(nbformat, "write", full_disk)
    lost = results.Outcome("honest")
    (out / "graded" / "honest.ipynb").unlink()
    one_submission.record(lost, blank, ex, run)
    monkeypatch.undo()
    assert lost.score == 0 and "scored 0: the graded notebook could not be written" in lost.reason, lost.reason
    assert not (out / "graded" / "honest.ipynb").exists() and _gradebook(course, "honest")[0] == FULL
    results.write_shard(out, [lost], complete=True)
    merged = {o.student: o for o in grade_merge(root)}   # course grade LESSON --merge
    assert merged["honest"].score == 0 and _gradebook(course, "honest")[0] == 0
    assert _csv(course)["honest"]["score"] == "0" and "scored 0" in _csv(course)["honest"]["reason"]
