"""Step 6 of grading: the feedback a student receives, one HTML page per submission.

Nothing is filtered after the fact: the feedback is built only from what may be shown. Test
cells show their visible source and the checker's verdict (the check's "expected ..., got ..."
message first, then the test cell's line; never checker code); hidden tests show only "passed"
or "a hidden test failed", because their source, arguments and expected values never leave the
checker. The student's own cells show what they printed up to the moment hidden data reached
their kernel (``execute`` withholds the rest). Student output is plain text, PNG or JPEG only
(no HTML, JavaScript, SVG or Markdown outputs, all of it escaped by the template) and markdown
cells the student wrote are shown as escaped text, so nothing a student writes runs in the
reader's browser. Math renders offline with the local MathJax of
``slides/node_modules`` copied beside the pages (``feedback/_vendor/mathjax``).
"""
from __future__ import annotations

import copy
import html
import re
import shutil
from pathlib import Path

import nbformat

from ..slides import NODE_MODULES, VENDOR_FILES
from .segments import visible_part
from .submission import _nb_meta, is_test_cell

SAFE_DATA = ("text/plain", "image/png", "image/jpeg")
MATHJAX_CONFIG = "?config=TeX-AMS_CHTML-full,Safe"
REMOTE_SCRIPT = re.compile(r"<script\b[^>]*>(?:(?!</script>).)*?https://cdnjs\.(?:(?!</script>).)*?</script>"
                           r"|<script\b[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>", re.S | re.I)


def safe_outputs(outputs: list, limit: int = 200_000) -> list:
    """Student outputs reduced to what a browser shows as text or a bitmap."""
    kept, used = [], 0
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            new = {"output_type": "stream", "name": "stdout" if out.get("name") == "stdout" else "stderr",
                   "text": str(out.get("text", ""))}
        elif kind == "error":
            new = {"output_type": "error", "ename": str(out.get("ename", ""))[:200],
                   "evalue": str(out.get("evalue", ""))[:4000],
                   "traceback": [str(t) for t in out.get("traceback", [])][:50]}
        elif kind in ("display_data", "execute_result"):
            data = {k: v for k, v in (out.get("data") or {}).items() if k in SAFE_DATA and isinstance(v, str)}
            if not data:
                continue
            new = {"output_type": kind, "data": data, "metadata": {}}
            if kind == "execute_result":
                new["execution_count"] = None
        else:
            continue
        used += len(repr(new))
        if used > limit:
            kept.append({"output_type": "stream", "name": "stdout", "text": "[further output cut]\n"})
            break
        kept.append(new)
    return kept


def feedback_notebook(nb, execution, scores: dict, total: tuple[float, float], notes: list[str], release_nb=None):
    """The notebook the student's feedback page is made from. Markdown that is not the
    release's own is shown as escaped text."""
    fb = copy.deepcopy(nb)
    trusted_text = {c.source for c in (release_nb.cells if release_nb else []) if c.cell_type != "code"}
    for index, cell in enumerate(fb.cells):
        if cell.cell_type != "code":
            if cell.source not in trusted_text:  # the student's own text: shown, never rendered
                fb.cells[index] = nbformat.v4.new_markdown_cell(
                    "<pre>" + html.escape(cell.source).replace("\n", "&#10;") + "</pre>")
            continue
        cell.execution_count = None
        if is_test_cell(cell):
            gid = _nb_meta(cell)["grade_id"]
            cell.source = visible_part(cell.source).rstrip()
            verdict = execution.verdicts.get(gid)
            got, top = scores.get(gid, (0.0, _nb_meta(cell).get("points", 0)))
            head = {"output_type": "stream", "name": "stdout", "text": f"[{gid}: {got:g} / {top:g} points]\n"}
            cell.outputs = [head, *(safe_outputs(verdict.outputs) if verdict else [])]
        else:
            cell.outputs = safe_outputs(execution.outputs.get(index, []))
        cell.outputs = [nbformat.from_dict(o) for o in cell.outputs]
    lines = [f"# Feedback: {total[0]:g} / {total[1]:g} points", ""]
    if notes:  # raw HTML with escaped text: markdown never interprets what a note quotes
        lines.append("<ul>" + "".join(f"<li>{html.escape(n).replace(chr(10), ' ')}</li>" for n in notes) + "</ul>")
    fb.cells.insert(0, nbformat.v4.new_markdown_cell("\n".join(lines)))
    return fb


def mathjax_into(feedback_root: Path) -> Path | None:
    """Copy the local MathJax beside the feedback pages (once); its folder, or None if absent."""
    target = feedback_root / "_vendor"
    entries = [(s, d) for s, d in VENDOR_FILES if s.startswith("mathjax/")]
    if any(not (NODE_MODULES / s).exists() for s, _ in entries):
        return None
    for src, dst in entries:
        if (target / dst).exists():
            continue
        (target / dst).parent.mkdir(parents=True, exist_ok=True)
        if (NODE_MODULES / src).is_dir():
            shutil.copytree(NODE_MODULES / src, target / dst)
        else:
            shutil.copy2(NODE_MODULES / src, target / dst)
    return target / "mathjax"


def render_html(fb, mathjax_url: str) -> str:
    """HTML of a feedback notebook: sanitised, no remote scripts; math from ``mathjax_url``."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    exporter.sanitize_html = False  # its escaping shows the lesson's own markdown as tags; see feedback_notebook
    exporter.mathjax_url = mathjax_url
    exporter.exclude_input_prompt = exporter.exclude_output_prompt = True
    page, _ = exporter.from_notebook_node(fb)
    # the template's own loaders for require.js and mermaid (unused here) would reach a CDN
    return REMOTE_SCRIPT.sub("", page)


def local_mathjax_url(depth: int = 2) -> str:
    """MathJax's address relative to ``feedback/<student>/<lesson>/exercises.html``."""
    have = all((NODE_MODULES / s).exists() for s, _ in VENDOR_FILES if s.startswith("mathjax/"))
    return ("../" * depth + "_vendor/mathjax/MathJax.js" + MATHJAX_CONFIG) if have else ""
