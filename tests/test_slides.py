"""Offline decks: nothing is referenced from the network; the vendored files are in place."""

import pytest

from course_tools import slides
from course_tools.paths import lesson_dirs

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
        assert "dist/theme/white.css" in html
    for rel in ("reveal.js/dist/reveal.js", "require.js", "jquery.min.js", "mathjax/MathJax.js",
                "course.css", "html-manager/embed-amd.js"):
        assert (out / "_vendor" / rel).exists(), rel


def test_remote_reference_detector():
    assert slides.remote_references('<script src="https://cdn.x/y.js"></script>')
    assert slides.remote_references("<link href='//cdn.x/y.css'>")
    assert not slides.remote_references('<script src="_vendor/y.js"></script>')
    assert slides.remote_references("@import url(https://fonts.googleapis.com/css?family=Lato);")
    assert not slides.remote_references("@import url(./fonts/source-sans-pro/source-sans-pro.css);")


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



# Rendering in a real browser (every slide, console errors, failed requests, the slide count,
# screenshots, and RISE inside JupyterLab) is tested in tests/test_browser.py.
