"""Offline decks: nothing is referenced from the network; the vendored files are in place.

On one lesson's deck here, built without a browser: ``build_deck`` itself refuses a deck that
references the network, and tests/notebooks/test_lectures.py builds every lesson's deck from its
executed lecture (outputs included) and opens it in Chromium with the network refused."""

import pytest

from course_tools import slides
from course_tools.paths import lesson_dirs

LESSONS = lesson_dirs()


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    out = tmp_path_factory.mktemp("decks")
    return out, {lesson.name: slides.build_deck(lesson / "lecture.ipynb", out, lesson.name)
                 for lesson in LESSONS[:1]}


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


def test_decks_built_at_once_in_several_processes_share_one_complete_vendor_folder(monkeypatch, tmp_path):
    """`course build` makes decks in parallel processes; each copies what the decks need into the
    same ``_vendor`` folder when it is missing (a second copy into a half-made folder once failed
    16_serving's deck with "File exists")."""
    import multiprocessing

    modules = tmp_path / "node_modules"
    for name in ("a", "b"):
        for i in range(300):
            (modules / name / "dir" / f"{i}.js").parent.mkdir(parents=True, exist_ok=True)
            (modules / name / "dir" / f"{i}.js").write_text("x" * 1000)
    (modules / "one.js").write_text("one")
    monkeypatch.setattr(slides, "NODE_MODULES", modules)
    monkeypatch.setattr(slides, "VENDOR_FILES", (("a", "a"), ("b", "nested/b"), ("one.js", "one.js")))
    start = multiprocessing.get_context("fork").Barrier(6)

    def copy():
        start.wait()
        slides.vendor_into(tmp_path / "out")

    workers = [multiprocessing.get_context("fork").Process(target=copy) for _ in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0] * 6
    vendor = tmp_path / "out" / "_vendor"
    assert sorted(p.name for p in vendor.iterdir()) == ["a", "course.css", "nested", "one.js"]
    assert len(list((vendor / "a" / "dir").iterdir())) == len(list((vendor / "nested" / "b" / "dir").iterdir())) == 300


def _code_cell(source, outputs=(), tags=()):
    import nbformat

    cell = nbformat.v4.new_code_cell(source, metadata={"slideshow": {"slide_type": "slide"}})
    cell.outputs = list(outputs)
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def test_progress_bars_become_their_final_line():
    import nbformat

    bar = [nbformat.v4.new_output("stream", name="stderr", text=f"\r{k * 25}%|##| {k}/4 [00:0{k}<00:00, 2.0it/s]")
           for k in range(5)]
    bar.append(nbformat.v4.new_output("stream", name="stdout", text="loss 0.31\n"))
    bar.append(nbformat.v4.new_output("stream", name="stderr", text="UserWarning: careful\n"))
    nb = nbformat.v4.new_notebook(cells=[_code_cell("train()", bar)])
    outputs = slides.prepare_for_slides(nb).cells[0].outputs
    assert [(o["name"], o["text"]) for o in outputs] == [
        ("stdout", "100%|##| 4/4 [00:04<00:00, 2.0it/s]\nloss 0.31\n"),
        ("stderr", "UserWarning: careful\n")]
    assert len(nb.cells[0].outputs) == 7  # the notebook itself is left alone


def test_interactive_widgets_are_disabled_and_labelled_in_decks():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[_code_cell("interact(f)", [nbformat.v4.new_output(
        "display_data", data={slides.WIDGET_VIEW: {"model_id": "box", "version_major": 2, "version_minor": 0}})])])
    nb.metadata["widgets"] = {slides.WIDGET_STATE: {"state": {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_slider", "IPY_MODEL_out"]}},
        "slider": {"model_name": "FloatSliderModel", "state": {"value": 1.0}},
        "out": {"model_name": "OutputModel", "state": {}}}}}
    ready = slides.prepare_for_slides(nb)
    state = ready.metadata["widgets"][slides.WIDGET_STATE]["state"]
    assert state["slider"]["state"]["disabled"] is True and "disabled" not in state["out"]["state"]
    assert "Live notebook only" in ready.cells[0].outputs[-1]["data"]["text/html"]
    plain = nbformat.v4.new_notebook(cells=[_code_cell("print(1)", [nbformat.v4.new_output("stream", text="1\n")])])
    assert len(slides.prepare_for_slides(plain).cells[0].outputs) == 1
    nb.cells[0].metadata["tags"] = [slides.LIVE_ONLY_TAG]  # its figure is already on the slide
    (only,) = slides.prepare_for_slides(nb).cells[0].outputs
    assert "Live notebook only" in only["data"]["text/plain"]


def test_tagged_code_is_folded_and_its_output_kept(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[
        _code_cell("import secret_setup_code", [nbformat.v4.new_output("stream", text="setup done\n")],
                   tags=[slides.HIDE_INPUT]),
        _code_cell("visible_point = 42")])
    html = slides.build_deck(nb, tmp_path, "folded").read_text()
    fold = html.index('<details class="course-fold">')
    assert fold < html.index("secret_setup_code") < html.index("</details>") < html.index("setup done")
    assert "visible_point" in html[html.index("</details>"):]


def test_executed_notebook_renders_as_offline_html(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title $x^2$"),
                                         _code_cell("answer_marker = 1")])
    (tmp_path / "executed").mkdir()
    nbformat.write(nb, str(tmp_path / "executed" / "lecture.ipynb"))
    page = slides.notebook_html(tmp_path / "executed" / "lecture.ipynb", tmp_path / "executed" / "lecture.html",
                                tmp_path / "slides")
    html = page.read_text()
    assert slides.remote_references(html) == []
    assert "../slides/_vendor/mathjax/MathJax.js" in html and "answer_marker" in html
    assert (tmp_path / "slides" / "_vendor" / "mathjax" / "MathJax.js").exists()


# Rendering in a real browser (every slide, console errors, failed requests, the slide count,
# screenshots, and RISE inside JupyterLab) is tested in tests/notebooks/test_lectures.py.
