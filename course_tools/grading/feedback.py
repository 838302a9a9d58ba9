"""Step 6 of grading: the feedback a student receives, one HTML page per submission.

Nothing is filtered after the fact: the feedback is built only from what may be shown. Test
cells show their visible source and the checker's verdict (the check's "expected ..., got ..."
message first, then the test cell's line; never checker code); hidden tests show only each
hidden test's label (what it checks, written in the notebook as ``# hidden test: ...``) with
passed, failed or not run (``execute.hidden_outputs``), because their source, arguments, expected
values and the checker's messages about them never leave the grader. The student's own cells
show what they printed up to the moment hidden data reached their kernel (``execute`` withholds
the rest). Student output is plain text, PNG or JPEG only
(no HTML, JavaScript, SVG or Markdown outputs, all of it escaped by the template) and markdown
cells the student wrote are shown as escaped text, so nothing a student writes runs in the
reader's browser. Math renders offline with the local MathJax of
``slides/node_modules`` copied beside the pages (``feedback/_vendor/mathjax``).

A page loads nothing from the network: the notebook it is made from keeps no metadata but the
kernel's name (no widget state, whose loader would fetch a script from a CDN), every script of
nbconvert's template but MathJax and its configuration is removed (require.js, mermaid, the
widget renderer), and a Content-Security-Policy, the first thing in the page's head, allows
scripts, styles, fonts and images from the page's own place only (``'self'``, ``file:``),
inline images as ``data:``, the one inline script that remains by its hash, and ``eval`` (MathJax
runs its configuration with it).
"""
from __future__ import annotations

import base64
import copy
import functools
import hashlib
import html
import json
import re
import shutil
from pathlib import Path

import nbformat

from ..slides import NODE_MODULES, VENDOR_FILES
from .cells import grade_id, is_test_cell, points
from .segments import visible_part

SAFE_DATA = ("text/plain", "image/png", "image/jpeg")
MATHJAX_CONFIG = "?config=TeX-AMS_CHTML-full,Safe"
SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.S | re.I)
LINK = re.compile(r"<link\b[^>]*>", re.I)
HEAD = re.compile(r"<head\b[^>]*>", re.I)
CSS_URL_COMMENT = re.compile(r"/\*(?:(?!\*/).)*?https?://.*?\*/", re.S)
# what a feedback page may load: its own files (the local MathJax, its fonts), inline styles and
# data: images; never the network, a frame, a plugin, a form or a connection. MathJax 2 runs its
# configuration block with eval ('unsafe-eval' lets a loaded script evaluate text, loads nothing)
CSP = ("default-src 'none'; script-src 'self' file: 'unsafe-eval' {scripts}; style-src 'self' file: 'unsafe-inline'; "
       "img-src 'self' file: data:; font-src 'self' file: data:; connect-src 'none'; media-src 'none'; "
       "object-src 'none'; frame-src 'none'; worker-src 'none'; base-uri 'none'; form-action 'none'")


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
    fb.metadata = {k: copy.deepcopy(nb.metadata[k]) for k in ("kernelspec", "language_info") if k in nb.metadata}
    trusted_text = {c.source for c in (release_nb.cells if release_nb else []) if c.cell_type != "code"}
    for index, cell in enumerate(fb.cells):
        if cell.cell_type != "code":
            if cell.source not in trusted_text:  # the student's own text: shown, never rendered
                fb.cells[index] = nbformat.v4.new_markdown_cell(
                    "<pre>" + html.escape(cell.source).replace("\n", "&#10;") + "</pre>")
            continue
        cell.execution_count = None
        if is_test_cell(cell):
            gid = grade_id(cell)
            cell.source = visible_part(cell.source).rstrip()
            verdict = execution.verdicts.get(gid)
            got, top = scores.get(gid, (0.0, points(cell)))
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


@functools.lru_cache(maxsize=4096)
def _cleaned(text: str) -> str:
    from nbconvert.filters.strings import clean_html

    return clean_html(text)


def _clean_html(element) -> str:
    """nbconvert's ``clean_html`` (bleach), remembered for text seen before: a class's pages share
    most of their cells (the lesson's text and test cells), and bleach takes about half of a
    page's CPU (lesson 03's exercises: 2.0 -> 0.9 CPU-s for a page whose cells were all seen)."""
    return _cleaned(element.decode() if isinstance(element, bytes) else str(element))


@functools.lru_cache(maxsize=4096)
def _highlighted(lexer: str | None, source: str, language: str | None, metadata: str) -> str:
    from nbconvert.filters.highlight import Highlight2HTML

    return Highlight2HTML(pygments_lexer=lexer)(source, language, json.loads(metadata))


def _highlighter(lexer: str | None):
    """nbconvert's ``highlight_code`` filter (Pygments) for ``lexer``, remembered for code seen
    before, as ``_clean_html``."""
    def highlight_code(source, language=None, metadata=None):
        return _highlighted(lexer, source, language, json.dumps(metadata or {}, sort_keys=True, default=str))
    return highlight_code


def render_html(fb, mathjax_url: str) -> str:
    """HTML of a feedback notebook that loads nothing from the network (see the module
    docstring); math from ``mathjax_url`` (a relative address, or "" for none)."""
    from nbconvert import HTMLExporter

    if re.match(r"[a-z][a-z0-9+.-]*:|//", mathjax_url, re.I):
        raise ValueError(f"MathJax must be a local, relative address, not {mathjax_url!r}")
    fb = copy.copy(fb)
    fb.metadata = {k: v for k, v in fb.metadata.items() if k in ("kernelspec", "language_info")}
    language = fb.metadata.get("language_info", {})
    lexer = language.get("pygments_lexer", language.get("name"))
    exporter = HTMLExporter(template_name="lab",
                            filters={"clean_html": _clean_html, "highlight_code": _highlighter(lexer)})
    exporter.sanitize_html = False  # its escaping shows the lesson's own markdown as tags; see feedback_notebook
    exporter.mathjax_url = mathjax_url
    exporter.exclude_input_prompt = exporter.exclude_output_prompt = True
    page, _ = exporter.from_notebook_node(fb)
    return offline_page(page, mathjax_url)


def offline_page(page: str, mathjax_url: str) -> str:
    """An nbconvert page with its scripts reduced to MathJax at ``mathjax_url`` and MathJax's
    configuration, links only to local style sheets, and a Content-Security-Policy first in its
    head that holds the page to that."""
    inline = []

    def keep(match) -> str:
        attrs, body = match.group(1), match.group(2)
        src = re.search(r"\bsrc\s*=\s*[\"']([^\"']*)[\"']", attrs)
        if src and mathjax_url and html.unescape(src.group(1)) == mathjax_url and not body.strip():
            return match.group(0)
        if not src and re.search(r"\btype\s*=\s*[\"']text/x-mathjax-config[\"']", attrs):
            inline.append(body)  # MathJax runs this text itself, as an inline script
            return match.group(0)
        return ""  # require.js, mermaid, widget state and renderer: all would reach a CDN

    page = SCRIPT.sub(keep, page)
    page = LINK.sub(lambda m: "" if re.search(r"\bhref\s*=\s*[\"']?\s*(?:[a-z][a-z0-9+.-]*:|//)", m.group(0), re.I)
                    else m.group(0), page)
    page = CSS_URL_COMMENT.sub("", page)  # the template's credits: no address that looks loadable is left
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(b.encode()).digest()).decode()}'" for b in inline)
    policy = html.escape(CSP.format(scripts=hashes), quote=False).replace('"', "&quot;")
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
    head = HEAD.search(page)
    if not head:
        raise ValueError("nbconvert's page has no <head>")
    return page[:head.end()] + meta + page[head.end():]


def local_mathjax_url(depth: int = 2) -> str:
    """MathJax's address relative to ``feedback/<student>/<lesson>/exercises.html``."""
    have = all((NODE_MODULES / s).exists() for s, _ in VENDOR_FILES if s.startswith("mathjax/"))
    return ("../" * depth + "_vendor/mathjax/MathJax.js" + MATHJAX_CONFIG) if have else ""
