"""The feedback page's renderer remembers nbconvert's cleaning and highlighting of cells it saw
before (a class's pages share the lesson's cells): the page stays nbconvert's own, byte for byte,
for a notebook seen before and for one whose cells changed since."""
import copy

import nbformat
from nbconvert import HTMLExporter

from course_tools.grading import feedback
from course_tools.paths import NOTEBOOKS

MATHJAX = "_vendor/mathjax/MathJax.js"


def nbconvert_page(nb) -> str:
    """The page as nbconvert renders it without remembered filters."""
    fb = copy.copy(nb)
    fb.metadata = {k: v for k, v in nb.metadata.items() if k in ("kernelspec", "language_info")}
    exporter = HTMLExporter(template_name="lab")
    exporter.sanitize_html = False
    exporter.mathjax_url = MATHJAX
    exporter.exclude_input_prompt = exporter.exclude_output_prompt = True
    return feedback.offline_page(exporter.from_notebook_node(fb)[0], MATHJAX)


def test_remembered_filters_give_nbconvert_s_page_byte_for_byte():
    nb = nbformat.read(str(NOTEBOOKS / "00_setup" / "exercises.ipynb"), as_version=4)
    first = feedback.render_html(nb, MATHJAX)
    assert first == feedback.render_html(nb, MATHJAX) == nbconvert_page(nb)
    changed = copy.deepcopy(nb)
    code = next(c for c in changed.cells if c.cell_type == "code")
    code.source += "\nprint('<b>not bold</b>')  # a student's line\n"
    markdown = next(c for c in changed.cells if c.cell_type == "markdown")
    markdown.source += "\n\n<script>alert(1)</script> and *emphasis*"
    again = feedback.render_html(changed, MATHJAX)
    assert again == nbconvert_page(changed) and again != first
