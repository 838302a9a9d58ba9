"""Offline decks: nothing loads from the network, and (where Chromium is installed) a deck
renders styled slides with typeset math in a headless browser with no network."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib import slides
from course_lib.grading import lesson_dirs

LESSONS = lesson_dirs()


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    out = tmp_path_factory.mktemp("decks")
    return out, {lesson.name: slides.build_deck(lesson / "lecture.ipynb", out, lesson.name)
                 for lesson in LESSONS}


def test_decks_reference_only_local_files(decks):
    out, paths = decks
    for name, path in paths.items():
        html = path.read_text()
        assert slides.remote_references(html) == [], name
        assert "_vendor/reveal.js/dist/reveal.js" in html
        assert "_vendor/mathjax/MathJax.js" in html
    for rel in ("reveal.js/dist/reveal.js", "require.js", "jquery.min.js", "mathjax/MathJax.js",
                "course.css", "html-manager/embed-amd.js"):
        assert (out / "_vendor" / rel).exists(), rel


def test_remote_reference_detector():
    assert slides.remote_references('<script src="https://cdn.x/y.js"></script>')
    assert slides.remote_references("<link href='//cdn.x/y.css'>")
    assert not slides.remote_references('<script src="_vendor/y.js"></script>')


def test_count_slides():
    import nbformat

    nb = nbformat.v4.new_notebook()
    for kind in ("slide", "-", "fragment", "subslide", "notes", "slide"):
        nb.cells.append(nbformat.v4.new_markdown_cell("x", metadata={"slideshow": {"slide_type": kind}}))
    assert slides.count_slides(nb) == 3


def test_missing_vendor_files_give_a_clear_message(monkeypatch, tmp_path):
    monkeypatch.setattr(slides, "NODE_MODULES", tmp_path / "nothing")
    with pytest.raises(slides.SlidesUnavailable, match="make setup"):
        slides.vendor_into(tmp_path / "out")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(not CHROMIUM, reason="Chromium not installed (make test installs it as root)")
def test_deck_renders_offline_in_headless_chromium(decks, tmp_path):
    out, paths = decks
    deck = paths[LESSONS[-1].name] if len(LESSONS) < 2 else paths[LESSONS[1].name]
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--proxy-server=127.0.0.1:9",
           "--virtual-time-budget=15000", "--dump-dom", deck.as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    assert 'class="reveal' in dom and "ready" in dom, "reveal.js did not initialise"
    assert "slide-number" in dom
    if "$" in Path(deck).read_text():
        assert "mjx-chtml" in dom or "MathJax_CHTML" in dom, "math was not typeset"
