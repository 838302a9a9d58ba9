"""Every lecture runs top to bottom, and its slides work in a real browser: headless Chromium
(the system's, driven by Playwright) with every request that would leave this machine refused.

* Each lecture is executed here once per test run, in a fresh kernel as `course build` does
  (any cell that raises fails the test, naming the cell). Under `make test` this is the
  lectures' notebook test: the root conftest keeps nbval from running them a second time
  (`pytest notebooks/NN_name/lecture.ipynb` still runs one through nbval). The deck tests
  below reuse these executed notebooks.

* Each lesson's offline deck (built from the executed lecture, as `course build` does):
  reveal.js starts, it has exactly the slides the notebook's metadata asks for, every slide
  can be shown with all its fragments, nothing overflows the slide, no text is cut (no
  element scrolls or spills sideways), no line of text lies under the navigation arrows or
  the slide number (the deck's fit script keeps text clear of them), nothing is logged as a
  console error, no request fails and none goes to the network. Each slide is checked in one call
  into the page (shown, waited for, measured), in one tab that opens the decks in turn. A
  screenshot of each slide that does not fit is kept under ``build/slide-screenshots/<lesson>/``,
  and one of every slide when ``COURSE_SLIDE_SCREENSHOTS=1`` is set, for people to look at: a
  screenshot of every slide in every run cost a sixth to a quarter of a deck's CPU (measured).
* A lecture opened in JupyterLab as a RISE slideshow renders its slides.

The browser tests are skipped, with the reason, where Chromium or Playwright is missing
(`make test` installs Debian's chromium when it runs as root); the lectures still run.
"""
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from free_ports import free_port_range

from course_tools import slides
from course_tools.paths import REPO, lesson_dirs

LESSONS = lesson_dirs()
CELL_SECONDS = 300   # the longest lecture cell takes about 30 s on the 2-core machine
SCREENSHOTS = REPO / "build" / "slide-screenshots"
# what "fits" means, measured in the browser on the slide shown with all its fragments:
# every element inside the slide's box, and no element that hides part of its text
FIT_CHECK = """() => {
  const section = document.querySelector('.reveal .slides section.present:not(.stack)')
               || document.querySelector('.reveal .slides section.present');
  const box = document.querySelector('.reveal .slides').getBoundingClientRect();
  const problems = [];
  const name = el => el.tagName.toLowerCase() + (el.className && typeof el.className === 'string'
      ? '.' + el.className.trim().split(/\\s+/).slice(0, 2).join('.') : '');
  const text = el => (el.innerText || el.getAttribute('alt') || '').trim().slice(0, 60);
  for (const el of [section, ...section.querySelectorAll('*')]) {
    if (el.closest('details:not([open]) > :not(summary)') || el.closest('aside.notes')) continue;
    if (el.closest('.MathJax_CHTML, .MJX_Assistive_MathML, .mjx-chtml')) continue;  // MathJax's own hidden copy
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.bottom > box.bottom + 2 || r.top < box.top - 2 || r.right > box.right + 2 || r.left < box.left - 2)
      problems.push(`${name(el)} outside the slide: "${text(el)}"`);
    const style = getComputedStyle(el);
    const clips = ['hidden', 'scroll', 'auto', 'clip'];
    if ((el.scrollWidth > el.clientWidth + 2 && clips.includes(style.overflowX)) ||
        (el.scrollHeight > el.clientHeight + 2 && clips.includes(style.overflowY)) ||
        (style.textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth + 1))
      problems.push(`${name(el)} cuts its content: "${text(el)}"`);
  }
  // lines of text under the navigation controls the room sees (arrows, slide number)
  const shown = el => getComputedStyle(el).visibility === 'visible' && parseFloat(getComputedStyle(el).opacity) > 0;
  const controls = [...document.querySelectorAll('.reveal .controls button, .reveal .slide-number')]
      .filter(shown).map(el => el.getBoundingClientRect()).filter(r => r.width > 0 && r.height > 0);
  const under = [];
  const texts = document.createTreeWalker(section, NodeFilter.SHOW_TEXT);
  for (let node = texts.nextNode(); node; node = texts.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || el.closest('details:not([open]) > :not(summary)') || el.closest('aside.notes'))
      continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const line of range.getClientRects())
      if (controls.some(c => line.left < c.right && line.right > c.left && line.top < c.bottom && line.bottom > c.top))
        under.push(node.textContent.trim().slice(0, 60));
  }
  return {problems: [...new Set(problems)].slice(0, 5), zoom: section.style.zoom || '1', under: [...new Set(under)]};
}"""
# resolves once MathJax (v2) has typeset everything queued
MATH_TYPESET = "new Promise(done => window.MathJax && MathJax.Hub ? MathJax.Hub.Queue(done) : done())"
# screenshots are JPEG: about a third less browser CPU per slide than PNG (measured), as legible
SHOT_QUALITY = 85
ALL_SCREENSHOTS = os.environ.get("COURSE_SLIDE_SCREENSHOTS", "") not in ("", "0")   # of every slide, not only misfits
MIN_ZOOM = 0.75   # the deck's own floor for fitting a tall slide (slides/templates/course_reveal):
                  # below it code is under 16 px on a 720 px slide, unreadable from the back row
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
REVEAL = "_vendor/reveal.js/dist/reveal.js"
# one slide, as the room sees it last, in one call into the page (a round trip per step, and
# Playwright's polling on every animation frame, cost more CPU than the checks): show slide
# [h, v], wait until reveal is on it, show every fragment, wait for MathJax and for the deck to
# have fitted the slide to what it finally holds (images loaded), then 50 ms; return the slide
# number shown and the fit check
SHOW_AND_MEASURE = f"""async ([h, v]) => {{
  const reveal = require('{REVEAL}');
  const until = async (ok, ms, what) => {{
    const end = Date.now() + ms;
    while (!ok()) {{
      if (Date.now() > end) throw new Error(`slide ${{h}}/${{v}}: waited ${{ms}} ms for ${{what}}`);
      await new Promise(done => setTimeout(done, 20));
    }}
  }};
  reveal.slide(h, v);
  await until(() => reveal.getIndices().h === h, 30000, 'reveal to show it');
  while (reveal.nextFragment());
  await ({MATH_TYPESET});
  await until(() => !window.courseFitPending && [...document.images].every(i => i.complete), 10000,
              'the deck to fit it');
  await new Promise(done => setTimeout(done, 50));
  return {{shown: document.querySelector('.reveal .slide-number')?.textContent || '', fit: ({FIT_CHECK})()}};
}}"""


def chromium_path() -> str | None:
    """The Chromium binary itself (Debian's /usr/bin/chromium is a shell wrapper): Debian's headless
    shell (package chromium-headless-shell, the build Playwright itself runs for headless Chromium)
    where installed, as tests/browser/test_hub.py does: the same Blink at the same version, without
    the full browser's UI drawn for nobody; the decks of lessons 07, 12 and 15 cost about 10 % less
    CPU with it (24.3 -> 21.7 CPU-s, two A/B rounds on the loaded 2-core machine). Otherwise the full
    browser's binary."""
    for candidate in ("/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium",
                      shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _skip_reason() -> str | None:
    if not chromium_path():
        return "Chromium is not installed (`make test` installs Debian's chromium when run as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (pip install -e '.[dev]')"
    return None


needs_browser = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")
EXECUTED: dict[str, nbformat.NotebookNode] = {}   # lesson name -> lecture executed by this run


class Watch:
    """Console errors, uncaught page errors, failed requests and requests refused for
    leaving this machine, for one page."""

    def __init__(self, page, allowed_prefix: str = "file://"):
        self.reset()
        self.allowed = allowed_prefix
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        page.route("**/*", self._route)

    def reset(self):
        """Forget what was seen so far (the page is about to open another deck)."""
        self.errors, self.failed, self.remote = [], [], []

    def _route(self, route):
        url = route.request.url
        if url.startswith((self.allowed, "file://", "data:", "blob:")):
            route.continue_()
        else:
            self.remote.append(url)
            route.abort("internetdisconnected")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_lecture_runs_top_to_bottom(lesson):
    from course_tools.build import execute_notebook

    # a cell still running after CELL_SECONDS is interrupted: the test then fails naming the cell and the
    # line it hung on (the KeyboardInterrupt's traceback), before pytest's own time-out ends the worker;
    # a reply that had come but was not noticed (seen with lecture 11) is read then, and the run goes on
    EXECUTED[lesson.name] = execute_notebook(lesson / "lecture.ipynb", timeout=CELL_SECONDS, interrupt_on_timeout=True)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


def _executed_lecture(lesson: Path):
    """The lecture with its outputs (they decide whether a slide fits): as this run executed
    it, else `course build`'s executed copy when it is current, else executed now."""
    from course_tools.build import execute_notebook
    from course_tools.cli import _executed_copy

    if lesson.name in EXECUTED:
        return EXECUTED[lesson.name]
    copy = _executed_copy(lesson, REPO / "build")
    return nbformat.read(str(copy), as_version=4) if copy else execute_notebook(lesson / "lecture.ipynb")


@pytest.fixture(scope="module")
def deck_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("decks")


@pytest.fixture(scope="module")
def deck_tab(browser):
    """One 1280 x 720 browser tab that opens the decks one after the other: the renderer process
    and the compiled reveal.js and MathJax are kept from one deck to the next, about 2 s of CPU
    per deck less than a fresh context each (measured). Before a test has it, the previous deck
    is unloaded (about:blank: whatever its unloading logs or aborts is heard then) and forgotten,
    so each test's Watch holds its own deck's messages only. A tab that closed (a crash) is replaced."""
    context = browser.new_context(viewport={"width": 1280, "height": 720}, offline=False)
    tab = {}

    def page_and_watch():
        if "page" not in tab or tab["page"].is_closed():
            tab["page"] = context.new_page()
            tab["watch"] = Watch(tab["page"])
        else:
            tab["page"].goto("about:blank")
        tab["watch"].reset()
        return tab["page"], tab["watch"]

    yield page_and_watch
    context.close()


@needs_browser
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_deck_steps_through_every_slide_offline(deck_tab, deck_dir, lesson):
    deck = slides.build_deck(_executed_lecture(lesson), deck_dir, lesson.name)
    expected = slides.count_slides(lesson / "lecture.ipynb")
    shots = SCREENSHOTS / lesson.name
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    page, watch = deck_tab()
    page.goto(deck.as_uri())
    page.wait_for_selector(".reveal.ready", state="attached", timeout=60_000)
    if "MathJax" in deck.read_text():   # its first typesetting can end after the deck is ready
        page.wait_for_function("() => window.MathJax && MathJax.isReady", timeout=30_000)   # started up
    total = page.evaluate(f"require('{REVEAL}').getTotalSlides()")
    assert total == expected, f"deck has {total} slides, the notebook's metadata asks for {expected}"
    page.evaluate(f"require('{REVEAL}').configure({{transition: 'none', backgroundTransition: 'none'}})")
    indices = page.evaluate(f"require('{REVEAL}').getSlides().map(s => require('{REVEAL}').getIndices(s))")
    assert len(indices) == expected
    misfits = []
    for number, where in enumerate(indices, start=1):
        # the slide with every fragment shown: what the room sees last
        step = page.evaluate(SHOW_AND_MEASURE, [where["h"], where["v"] or 0])
        shown, fit = step["shown"], step["fit"]
        assert "".join(shown.split()) == f"{number}/{expected}", shown
        if fit["under"]:
            fit["problems"].append(f"under the navigation controls: {fit['under']}")
        misfit = fit["problems"] or float(fit["zoom"]) < MIN_ZOOM
        if misfit:
            misfits.append(f"slide {number} (zoom {fit['zoom']}): {'; '.join(fit['problems'])}")
        if misfit or ALL_SCREENSHOTS:
            page.screenshot(path=str(shots / f"slide-{number:02d}.jpg"), type="jpeg", quality=SHOT_QUALITY)
    assert misfits == [], f"slides that do not fit (screenshots in {shots}):\n" + "\n".join(misfits)
    page.wait_for_timeout(300)  # late MathJax or font loads still get reported
    lecture = nbformat.read(str(lesson / "lecture.ipynb"), as_version=4)
    if any("plt." in c.source for c in lecture.cells if c.cell_type == "code"):
        assert page.evaluate("document.querySelectorAll('.reveal .jp-RenderedImage img').length") > 0, \
            "the lecture draws figures but the deck shows none"
    diagrams = page.evaluate("[...document.querySelectorAll('.reveal img.course-diagram')].map(i => i.alt)")
    assert diagrams and all(len(alt) > 20 for alt in diagrams), \
        f"every lecture shows at least one diagram with alternative text (course_lib.diagrams.show); got {diagrams}"
    if any("$" in c.source for c in lecture.cells if c.cell_type == "markdown"):
        assert page.evaluate("document.querySelectorAll('.MathJax_CHTML, .mjx-chtml').length") > 0, \
            "math was not typeset"
    assert watch.remote == [], f"the deck tried to reach the network: {watch.remote[:3]}"
    assert watch.failed == [], f"requests failed: {watch.failed[:3]}"
    assert watch.errors == [], f"console errors: {watch.errors[:3]}"
    assert len(list(shots.glob("*.jpg"))) == (expected if ALL_SCREENSHOTS else 0)


@pytest.fixture(scope="module")
def jupyter_lab(tmp_path_factory):
    """JupyterLab on a free localhost port with a token, serving a copy of one lecture (01's:
    its title slide holds a folded code cell)."""
    root = tmp_path_factory.mktemp("lab")
    lesson = LESSONS[1]
    shutil.copy2(lesson / "lecture.ipynb", root / "lecture.ipynb")
    port, token = free_port_range(1), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(root / ".jupyter"), "JUPYTER_RUNTIME_DIR": str(root / ".runtime")}
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(root / "lab.log", "w")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"jupyter lab did not start: {(root / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.5)
    yield {"base": base, "token": token, "notebook": lesson / "lecture.ipynb"}
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@needs_browser
def test_lecture_renders_as_a_rise_slideshow_in_jupyterlab(browser, jupyter_lab):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    watch = Watch(page, allowed_prefix=jupyter_lab["base"])
    page.goto(f"{jupyter_lab['base']}/rise/lecture.ipynb?token={jupyter_lab['token']}")
    page.wait_for_selector(".reveal .slides section", state="attached", timeout=120_000)
    page.wait_for_function("document.querySelectorAll('.reveal .slides section').length > 1", timeout=60_000)
    page.wait_for_timeout(1000)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "rise-lecture.png"))
    title = nbformat.read(str(jupyter_lab["notebook"]), as_version=4).cells[0].source.splitlines()[0].lstrip("# ")
    first = page.inner_text(".reveal .slides section.present")
    assert title[:30].lower() in first.lower(), "the first slide does not show the lesson title"
    folded = next(c.source for c in nbformat.read(str(jupyter_lab["notebook"]), as_version=4).cells
                  if "hide-input-on-slides" in c.metadata.get("tags", []))
    # a folded cell shows at most its first line, as JupyterLab's click-to-open placeholder
    assert folded.splitlines()[1] not in first, f"the title slide shows the folded set-up code: {first[-300:]!r}"
    context.close()
    assert [e for e in watch.errors if "uncaught" in e] == [], watch.errors[:3]


# a demonstration left out here ("Skipped: needs 2 CUDA GPUs", "... skipped here"), not the
# lessons' own word for work a kernel leaves out ("the skipped tiles")
SKIPPED = re.compile(r"^\s*skipped\b|\bskipped(:| here\b| on this\b| \(no)", re.IGNORECASE | re.MULTILINE)
EVIDENCE = re.compile(r"recorded on|arXiv|\((?:[^()]*\b)?(?:19|20)\d\d\)")   # a recorded GPU figure or a citation


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_no_lecture_cell_prints_only_skipped(lesson):
    """Where a demonstration cannot run here (no GPU, one GPU where it needs two), the cell says
    what a GPU showed: a figure recorded on a real GPU (course_lib.recorded) or a cited one."""
    lecture = _executed_lecture(lesson)
    bare = []
    for number, cell in enumerate(lecture.cells, start=1):
        text = "".join(o.get("text", "") + "".join(o.get("data", {}).get("text/plain", ""))
                       for o in cell.get("outputs", []))
        if SKIPPED.search(text) and not EVIDENCE.search(text):
            bare.append(f"cell {number}: {text.strip()[:120]!r}")
    assert bare == [], "cells that print that they skipped, with no recorded or cited figure:\n" + "\n".join(bare)
