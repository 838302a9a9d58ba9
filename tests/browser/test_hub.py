"""A class on the course's JupyterHub, end to end in a real browser (issue 14).

The hub of hub/ runs on loopback with one instructor and two students, local accounts made
for the test. Headless Chromium (Debian's, driven by Playwright) does what people would do:

1. the instructor, who tried the exercises in release/ (answers saved there), releases lesson
   01 in a JupyterLab terminal (`course release 01 --force`, `nbgrader release_assignment`)
   into the exchange, which then holds the student version alone;
2. each student logs in, fetches it in the nbgrader assignment list, opens the notebook,
   pastes answers into the solution cells (one student the reference solutions, the other a
   wrong answer to exercise 1), saves and submits;
3. the instructor collects (`nbgrader collect`), grades in the sandbox (`course grade 01`)
   and returns the feedback (`nbgrader release_feedback`);
4. each student, still logged in, fetches their feedback in the assignment list and opens it.

Then: the right answer scores full marks and more than the wrong one, each student's
feedback shows their own score, and neither student can read the other's feedback or list
the exchange's feedback folder. Screenshots of every step go to build/hub-screenshots/.

The instructor's course directory is a copy of this repository (the files git tracks or
would track) owned by the instructor, with a hard-linked copy of .venv whose scripts point at
the copy, so `course grade` works on the copy, never on this checkout's gradebook.

Needs root (it creates the accounts), Chromium, Playwright, JupyterHub in .venv,
configurable-http-proxy in hub/node_modules, bubblewrap and git; skipped, saying which is
missing, otherwise.
"""
from __future__ import annotations

import csv
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest
from course_copy import copy_gradebook_cache, link_or_copy, linked_venv
from free_ports import free_port_range

REPO = Path(__file__).resolve().parents[2]
LESSON = "01_hardware_foundations"
COURSE_ID = "gpu-course"
SHOTS = REPO / "build" / "hub-screenshots"
INSTRUCTOR, RIGHT, WRONG = "chub-teacher", "chub-ada", "chub-bob"
# Debian's headless shell (package chromium-headless-shell), the build Playwright itself runs for
# headless Chromium, where installed: the full browser's headless mode draws browser UI nobody
# sees (a renderer of its own per context) and cost about 5 CPU-s more for this test's three
# JupyterLab pages. Otherwise the binary behind Debian's /usr/bin/chromium wrapper.
CHROMIUM = next((path for path in ("/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium")
                 if Path(path).exists()), "/usr/lib/chromium/chromium")
# --disable-webgl: without a GPU, WebGL is SwiftShader on the CPU, and JupyterLab's terminal draws
# with it when it can (shader compilation on every terminal opened, about 2 CPU-s for the
# instructor's two); without WebGL xterm.js takes its canvas renderer, showing the same text
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-webgl", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
# JupyterLab's layout at a laptop's size: fewer pixels for the headless browser to draw
VIEWPORT = {"width": 1200, "height": 760}
SPAWN_MS = 300_000  # a JupyterLab start on a busy 2-core machine


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root: the test creates three local accounts and runs JupyterHub, which starts servers as them"
    if not Path(CHROMIUM).exists():
        return "Chromium is not installed (`make test` installs Debian's chromium when run as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (pip install -e '.[dev]')"
    if not (REPO / ".venv" / "bin" / "jupyterhub-singleuser").exists():
        return "JupyterHub is not installed in .venv (make setup)"
    if not (REPO / "hub" / "node_modules" / ".bin" / "configurable-http-proxy").exists():
        return "configurable-http-proxy is not installed in hub/node_modules (make setup runs npm ci there)"
    for tool in ("bwrap", "git", "useradd", "userdel", "setpriv"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    return None


pytestmark = [pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
              pytest.mark.timeout(900)]


# -- the machine: accounts, the instructor's copy of the course, the hub ---------------------
def _run_as(user: str, argv: list[str], **kw) -> subprocess.CompletedProcess:
    """Run ``argv`` as ``user`` (uid, gid and supplementary groups of that account)."""
    entry = pwd.getpwnam(user)
    return subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups",
                           "--", *argv], capture_output=True, text=True,
                          env={"HOME": entry.pw_dir, "PATH": "/usr/bin:/bin"}, **kw)


def _remove_account(user: str) -> None:
    """Kill whatever still runs as ``user`` (a server the hub did not stop in time, its
    kernels), then delete the account and its home: userdel refuses a user with processes."""
    from course_tools.grading.sandbox import clear_user

    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return
    clear_user(uid)
    subprocess.run(["userdel", "-r", user], capture_output=True)


@pytest.fixture(scope="module")
def accounts():
    """Three local accounts with private homes (0700), removed afterwards."""
    for user in (INSTRUCTOR, RIGHT, WRONG):
        _remove_account(user)  # left by an interrupted run
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", user], check=True)
        os.chmod(pwd.getpwnam(user).pw_dir, 0o700)
    yield
    for user in (INSTRUCTOR, RIGHT, WRONG):
        _remove_account(user)


def copy_course(dest: Path, owner: str) -> Path:
    """The repository's files (tracked, or untracked and not ignored) copied to ``dest`` and
    given to ``owner``, with hub/node_modules, build/cache's empty gradebook and a hard-linked
    .venv whose scripts and editable install point at the copy. Returns ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    shutil.copytree(REPO / "hub" / "node_modules", dest / "hub" / "node_modules", symlinks=True)
    # the empty gradebook this checkout made once for its nbgrader version (nbgrader_course.
    # empty_gradebook, a cache under build/cache/ keyed by that version): `course release`
    # would make it again, asking alembic in two more processes (about 2.5 CPU-s)
    copy_gradebook_cache(REPO, dest)
    entry = pwd.getpwnam(owner)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
    os.chown(dest, entry.pw_uid, entry.pw_gid)
    venv = linked_venv(dest)  # hard links (same file system), root's and read-only to the instructor
    _runnable_base(venv, dest.parent / "python")
    return dest


def _entered_by_others(path: Path) -> bool:
    return all(p.stat().st_mode & 0o001 for p in [*path.parents, path] if p.is_dir())


def _link_but(source: Path, target: Path, empty: list[Path]) -> None:
    """``link_or_copy`` of ``source`` to ``target``, but the folders ``empty`` (inside ``source``)
    are made empty: a venv without the system's site-packages never reads its base's, which on
    this project's machines holds ~51,000 files that linking and removing again cost ~4 CPU-s."""
    inside = [e for e in empty if e.is_relative_to(source)]
    if not inside:
        link_or_copy(source, target)
        return
    target.mkdir()
    shutil.copystat(source, target)
    if source in inside:
        return
    whole = [entry for entry in source.iterdir() if not any(e.is_relative_to(entry) for e in inside)]
    if whole and subprocess.run(["cp", "-al", *map(str, whole), str(target)], capture_output=True).returncode:
        for entry in whole:  # another file system: copies, one by one
            shutil.rmtree(target / entry.name, ignore_errors=True)
            link_or_copy(entry, target / entry.name)
    for entry in source.iterdir():
        if entry not in whole:
            _link_but(entry, target / entry.name, inside)


def _runnable_base(venv: Path, spare: Path) -> None:
    """Make the copied environment's interpreter one that other accounts can run. On this
    project's machines .venv is built on pyenv's Python under /root (mode 0700), which the
    students' servers cannot start (hub/run_hub.py reports this on a real install). Then the
    interpreter's installation is hard-linked into ``spare`` and the copy's venv points at it;
    its ELF RUNPATH (the absolute path of libpython) becomes $ORIGIN/../lib, in a new file."""
    base = (venv / "bin" / "python").resolve()
    if _entered_by_others(base.parent):
        return
    prefix = base.parent.parent
    unread = [] if "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text() else \
        list(prefix.glob("lib/python3*/site-packages"))
    _link_but(prefix, spare, unread)
    exe = spare / "bin" / base.name
    old_rpath = f"{prefix}/lib".encode() + b"\0"
    data = exe.read_bytes()
    if old_rpath in data:
        new_rpath = b"$ORIGIN/../lib"
        fresh = exe.with_name(exe.name + ".hub-test")
        fresh.write_bytes(data.replace(old_rpath, new_rpath + b"\0" * (len(old_rpath) - len(new_rpath))))
        shutil.copymode(exe, fresh)
        os.replace(fresh, exe)
    for link in list((venv / "bin").iterdir()):
        if link.is_symlink() and link.resolve() == base:
            link.unlink()
            link.symlink_to(exe)
    cfg = venv / "pyvenv.cfg"
    lines = [f"home = {exe.parent}" if line.startswith("home =") else
             f"executable = {exe}" if line.startswith("executable =") else line
             for line in cfg.read_text().splitlines()]
    cfg.unlink()
    cfg.write_text("\n".join(lines) + "\n")




@pytest.fixture(scope="module")
def hub(accounts):
    """The course's hub from the instructor's copy, on loopback, with a shared password."""
    top = Path(tempfile.mkdtemp(prefix="course-hub-", dir="/tmp"))
    os.chmod(top, 0o755)
    proc, log = None, open(top / "hub.log", "w")
    try:
        course = copy_course(top / "course", INSTRUCTOR)
        port, password = free_port_range(3), secrets.token_hex(12)
        cmd = [str(course / ".venv" / "bin" / "python"), str(course / "hub" / "run_hub.py"),
               "--instructors", INSTRUCTOR, "--students", f"{RIGHT},{WRONG}", "--auth", "shared-password",
               f"--password={password}", "--port", str(port), "--exchange", str(top / "exchange"),
               "--course-id", COURSE_ID, "--state", str(top / "state")]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/hub/api", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the hub did not start: {(top / 'hub.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield {"base": base, "password": password, "course": course, "exchange": top / "exchange"}
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)  # the hub stops the users' servers and its proxy
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy2(top / "hub.log", SHOTS / "hub.log")  # the hub's and the servers' logs, for a failure
        subprocess.run(["rm", "-rf", str(top)], check=False)  # ~65,000 links: rm is cheaper than rmtree


# -- the browser ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


class Person:
    """One user in their own browser context, logged in to the hub, with JupyterLab open."""

    def __init__(self, browser, hub, user: str):
        self.user, self.hub = user, hub
        self.context = browser.new_context(viewport=VIEWPORT)
        self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=hub["base"])
        self.page = self.context.new_page()
        self.remote = []
        # only what is not the hub comes to Python (matched in Playwright's driver): a handler
        # for every request had the browser hold each of JupyterLab's hundreds of requests for
        # a round trip through the driver and this process
        elsewhere = re.compile(rf"^(?!{re.escape(hub['base'])}/|data:|blob:)")
        self.page.route(elsewhere, self._route)
        self.page.set_default_timeout(60_000)

    def _route(self, route):
        self.remote.append(route.request.url)
        route.abort("internetdisconnected")

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.jpg"), type="jpeg", quality=85)

    def log_in(self, step: str) -> None:
        page = self.page
        page.goto(f"{self.hub['base']}/hub/login")
        page.fill("#username_input", self.user)
        page.fill("#password_input", self.hub["password"])
        self.shot(f"{step}-login")
        page.click("#login_submit")
        page.wait_for_url(f"**/user/{self.user}/lab**", timeout=SPAWN_MS)
        page.wait_for_selector(".jp-LabShell", timeout=SPAWN_MS)
        # the nbgrader menu: extensions are loaded (a second login restores the last layout,
        # which may have no launcher)
        page.wait_for_selector(".lm-MenuBar-item:has-text('Nbgrader')", timeout=SPAWN_MS)

    def terminal(self, command: str, name: str, step: str, timeout: float = 600) -> str:
        """Type ``command`` into a new JupyterLab terminal; wait for it to finish; return its
        output (kept in the user's home, so the test can read why it failed)."""
        page = self.page
        page.wait_for_selector("#jp-main-dock-panel .lm-TabBar-tab")  # the layout is restored
        card = page.locator(".jp-LauncherCard[title*='terminal' i]:visible")
        if card.count() == 0:
            page.locator(".lm-TabBar-addButton:not(.lm-mod-hidden)").first.click()  # a new launcher
        card.first.click()
        screen = page.locator(".jp-Terminal .xterm-screen:visible").last
        screen.wait_for()
        screen.click()
        home = Path(pwd.getpwnam(self.user).pw_dir)
        # the command line arrives as one input event, as a paste does, then Enter: typed key by key,
        # each of its ~150-200 characters was a key event through the browser, an echo through
        # the terminal's websocket and a redraw (about 1.5 CPU-s a command)
        page.keyboard.insert_text(f"({command}) > ~/{name}.log 2>&1; echo $? > ~/{name}.rc; tail -n 25 ~/{name}.log")
        page.keyboard.press("Enter")
        deadline = time.monotonic() + timeout
        while not (home / f"{name}.rc").exists() or not (home / f"{name}.rc").read_text().strip():
            assert time.monotonic() < deadline, f"{command!r} did not finish in {timeout} s"
            page.wait_for_timeout(1000)  # not time.sleep: requests wait for the route handler
        page.wait_for_timeout(1000)
        self.shot(step)
        output = (home / f"{name}.log").read_text()
        assert (home / f"{name}.rc").read_text().strip() == "0", f"{command!r} failed:\n{output[-3000:]}"
        return output

    def open_assignment_list(self) -> None:
        page = self.page
        page.click(".lm-MenuBar-item:has-text('Nbgrader')")
        page.click(".lm-Menu-item:has-text('Assignment List')")
        page.wait_for_selector("#released_assignments_list, .list_container", state="attached")

    def close(self) -> None:
        self.context.close()
        assert self.remote == [], f"{self.user}'s browser tried to reach the network: {self.remote[:3]}"


# -- what the students write -------------------------------------------------------------------
SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*(\n|$)", re.MULTILINE)


def answers(wrong: bool) -> dict[str, str]:
    """Source of every solution cell by grade_id: the reference solution without nbgrader's
    markers, and for the wrong student exercise 1 counting a fused multiply-add as one FLOP."""
    nb = nbformat.read(str(REPO / "notebooks" / LESSON / "exercises.ipynb"), as_version=4)
    cells = {c.metadata["nbgrader"]["grade_id"]: SOLUTION_MARKERS.sub("", c.source).rstrip() for c in nb.cells
             if c.metadata.get("nbgrader", {}).get("solution")}
    if wrong:
        mistake = ("* 2 * fma_units", "* fma_units")
        assert cells["ex1_diagnose"].count(mistake[0]) == 1, "the reference of exercise 1 changed: update the test"
        cells["ex1_diagnose"] = cells["ex1_diagnose"].replace(*mistake)
    return cells


def _steady_terminal(user: str) -> None:
    """``user``'s JupyterLab setting of a terminal cursor that does not blink: the instructor's
    terminal stays on screen for minutes while the students work and `course grade` runs, and a
    blinking cursor has the headless browser draw and composite a frame twice a second (about a
    tenth of a CPU-second each second). What the terminal does and shows is the same."""
    entry = pwd.getpwnam(user)
    folder = Path(entry.pw_dir) / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "terminal-extension"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plugin.jupyterlab-settings").write_text('{"cursorBlink": false}\n')
    made = folder / "plugin.jupyterlab-settings"
    while made != Path(entry.pw_dir):
        os.chown(made, entry.pw_uid, entry.pw_gid)
        made = made.parent


def _tried_in_release(course: Path, owner: str) -> bytes:
    """The lesson's notebook with its solutions, saved by ``owner`` in the course's
    ``release/LESSON/`` as an instructor who tried the exercises there leaves it; its bytes."""
    folder = course / "release" / LESSON
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(course / "notebooks" / LESSON / "exercises.ipynb", folder / "exercises.ipynb")
    entry = pwd.getpwnam(owner)
    for path in (course / "release", folder, folder / "exercises.ipynb"):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return (folder / "exercises.ipynb").read_bytes()


def _feedback_score(html: str) -> tuple[float, float]:
    """(score, max score) from the heading of the feedback page `course grade` writes."""
    found = re.search(r"Feedback:\s*([\d.]+)\s*/\s*([\d.]+)\s*points", html)
    assert found, "no score in the feedback page"
    return float(found.group(1)), float(found.group(2))


# -- the flow -----------------------------------------------------------------------------
def test_a_class_on_the_hub_release_submit_grade_feedback(browser, hub):
    for old in [*SHOTS.glob("*.png"), *SHOTS.glob("*.jpg")]:
        old.unlink()
    course, exchange = hub["course"], hub["exchange"]

    # 1. the instructor, who tried the exercises in release/ (their answers saved there),
    # releases lesson 01 again with --force and then into the exchange: the class gets the
    # student version alone, the instructor's answers are kept outside release/
    tried = _tried_in_release(course, INSTRUCTOR)
    _steady_terminal(INSTRUCTOR)
    teacher = Person(browser, hub, INSTRUCTOR)
    teacher.log_in("01-instructor")
    teacher.shot("01-instructor-lab")
    said = teacher.terminal(f"course release 01 --force && nbgrader release_assignment {LESSON}", "release",
                            "02-instructor-release")
    outbound = exchange / COURSE_ID / "outbound" / LESSON
    assert sorted(p.name for p in outbound.iterdir()) == ["exercises.ipynb"], sorted(outbound.iterdir())
    assert "### BEGIN SOLUTION" not in (outbound / "exercises.ipynb").read_text()
    kept = list((course / "build" / "kept" / LESSON).glob("exercises.yours-*.ipynb"))
    assert [k.read_bytes() for k in kept] == [tried] and f"moved to build/kept/{LESSON}/" in said, said

    # 2. each student fetches, answers, saves and submits, and stays logged in (a JupyterLab
    # page left open costs the browser less than loading one again)
    students = {}
    for step, user, wrong in (("03", RIGHT, False), ("04", WRONG, True)):
        student = students[user] = Person(browser, hub, user)
        student.log_in(f"{step}-{user}")
        page = student.page
        if not wrong:  # students have no formgrader (hub/jupyter/students/)
            assert page.request.get(f"{hub['base']}/user/{user}/formgrader").status == 404
        student.open_assignment_list()
        row = page.locator("#released_assignments_list .list_item", has_text=LESSON)
        row.wait_for()
        student.shot(f"{step}-{user}-assignment-list")
        row.locator("button:has-text('Fetch')").click()
        fetched = page.locator("#fetched_assignments_list .list_item", has_text=LESSON)
        fetched.wait_for()
        home = Path(pwd.getpwnam(user).pw_dir)
        assert (home / LESSON / "exercises.ipynb").exists()
        # open the notebook from the list and paste each answer into its cell
        fetched.locator("a.assignment-notebooks-link").click()
        fetched.locator(".collapse a", has_text="exercises").click()
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
        released = nbformat.read(str(home / LESSON / "exercises.ipynb"), as_version=4)
        for grade_id, source in answers(wrong).items():
            index = next(i for i, c in enumerate(released.cells)
                         if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
            cell = page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell").nth(index)
            cell.scroll_into_view_if_needed()
            cell.locator(".cm-content").click()
            page.keyboard.press("Control+a")
            page.evaluate("text => navigator.clipboard.writeText(text)", source)
            page.keyboard.press("Control+v")
        page.keyboard.press("Escape")
        page.keyboard.press("Control+s")
        saved = home / LESSON / "exercises.ipynb"
        deadline = time.monotonic() + 60
        while True:
            got = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source
                   for c in nbformat.read(str(saved), as_version=4).cells}
            differ = [g for g, s in answers(wrong).items() if got.get(g, "").strip() != s.strip()]
            if not differ:
                break
            if time.monotonic() > deadline:
                student.shot(f"{step}-{user}-not-saved")
                pytest.fail(f"the answers pasted in the browser were not saved: {differ[0]} holds "
                            f"{got.get(differ[0])!r}, not {answers(wrong)[differ[0]]!r}")
            page.wait_for_timeout(1000)
        student.shot(f"{step}-{user}-answered")
        student.open_assignment_list()
        fetched = page.locator("#fetched_assignments_list .list_item", has_text=LESSON)
        fetched.locator("button:has-text('Submit')").click()
        page.locator("#submitted_assignments_list .list_item", has_text=LESSON).wait_for()
        student.shot(f"{step}-{user}-submitted")
    inbound = exchange / COURSE_ID / "inbound"
    assert sorted({p.name.split("+")[0] for p in inbound.iterdir()}) == sorted([RIGHT, WRONG])

    # 3. the instructor collects, grades in the sandbox and returns the feedback
    teacher.terminal(f"nbgrader collect {LESSON} && course grade 01 --workers 1 && "
                     f"nbgrader release_feedback {LESSON}", "grade", "05-instructor-graded")
    with open(course / "build" / f"grades_{LESSON}.csv") as f:
        grades = {row["student"]: row for row in csv.DictReader(f)}
    assert set(grades) == {RIGHT, WRONG}, grades
    teacher.page.goto(f"{hub['base']}/user/{INSTRUCTOR}/formgrader/gradebook/{LESSON}/exercises")
    links = teacher.page.locator("a[href*='/formgrader/submissions/']")
    teacher.page.wait_for_function(
        "n => document.querySelectorAll(\"a[href*='/formgrader/submissions/']\").length >= n", arg=2)
    assert {links.nth(i).text_content() for i in range(links.count())} >= {RIGHT, WRONG}
    teacher.page.click("text=Show All Names")
    teacher.page.locator(f"a:has-text('{RIGHT}')").wait_for()
    teacher.shot("06-instructor-formgrader-gradebook")
    teacher.close()

    # 4. each student fetches their own feedback
    scores = {}
    for step, user in (("07", RIGHT), ("08", WRONG)):
        student = students[user]
        page = student.page
        student.open_assignment_list()
        submitted = page.locator("#submitted_assignments_list .list_item", has_text=LESSON)
        submitted.locator("button:has-text('Fetch Feedback')").click()
        page.locator("#submitted_assignments_list a:has-text('view feedback')").first.wait_for(timeout=60_000)
        student.shot(f"{step}-{user}-feedback-fetched")
        home = Path(pwd.getpwnam(user).pw_dir)
        pages = list((home / LESSON / "feedback").glob("*/exercises.html"))
        assert len(pages) == 1, f"{user} should get exactly one feedback page, got {pages}"
        scores[user] = _feedback_score(pages[0].read_text())
        fetched_at = urllib.parse.quote(pages[0].parent.name)  # a time stamp: spaces and colons
        page.goto(f"{hub['base']}/user/{user}/files/{LESSON}/feedback/{fetched_at}/exercises.html")
        page.wait_for_selector("text=Feedback:")
        student.shot(f"{step}-{user}-feedback")
        student.close()

    right, full = scores[RIGHT]
    wrong, _ = scores[WRONG]
    assert right == full > wrong, f"right answer {right}/{full}, wrong answer {wrong}"
    assert float(grades[RIGHT]["score"]) == right and float(grades[WRONG]["score"]) == wrong, grades

    # nobody reads anybody else's feedback
    theirs = next((Path(pwd.getpwnam(RIGHT).pw_dir) / LESSON / "feedback").glob("*/exercises.html"))
    peek = _run_as(WRONG, ["cat", str(theirs)])
    assert peek.returncode != 0 and "Permission denied" in peek.stderr, peek
    listing = _run_as(WRONG, ["ls", str(exchange / COURSE_ID / "feedback")])
    assert listing.returncode != 0 and "Permission denied" in listing.stderr, listing
    assert len(list(SHOTS.glob("*.jpg"))) >= 14, sorted(SHOTS.glob("*.jpg"))
