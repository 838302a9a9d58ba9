"""Offline reveal.js decks from lecture notebooks, fit for a lecture hall.

nbconvert's slides exporter loads reveal.js, require.js, jQuery, MathJax and the widget
renderer from CDNs. Here every one of them comes from ``_vendor/`` beside the decks,
copied from the npm packages that the setup installs into ``slides/node_modules``, so a
deck opens in a browser with the network cut off.

Before export, a copy of the executed lecture is prepared for the screen
(``prepare_for_slides``): progress bars and other carriage-return output collapse to their
final line, consecutive prints become one block, and interactive widgets, which need a
running kernel, are disabled and labelled as such (a widget cell tagged
``live-only-on-slides``, whose figure the slide already shows statically, keeps only that
label). Cells tagged ``hide-input-on-slides`` show their output with the code folded (the
deck template in ``slides/templates``); the notebook itself keeps and executes that code.
Slides are 1280 x 720 (16:9); a taller slide is scaled to fit, down to 75 %
(below that, code is too small to read from the back row).
"""
from __future__ import annotations

import copy
import os
import re
import shutil
from pathlib import Path

from .paths import SLIDES_DIR

NODE_MODULES = SLIDES_DIR / "node_modules"
VENDOR = "_vendor"

# what each deck needs, as (source under node_modules, destination under _vendor)
VENDOR_FILES = [
    ("reveal.js/dist", "reveal.js/dist"),
    ("reveal.js/plugin/notes", "reveal.js/plugin/notes"),
    ("requirejs/require.js", "require.js"),
    ("jquery/dist/jquery.min.js", "jquery.min.js"),
    ("mathjax/MathJax.js", "mathjax/MathJax.js"),
    ("mathjax/config", "mathjax/config"),
    ("mathjax/extensions", "mathjax/extensions"),
    ("mathjax/jax/input/TeX", "mathjax/jax/input/TeX"),
    ("mathjax/jax/output/CommonHTML", "mathjax/jax/output/CommonHTML"),
    ("mathjax/jax/element", "mathjax/jax/element"),
    ("mathjax/localization/en", "mathjax/localization/en"),
    ("mathjax/fonts/HTML-CSS/TeX/woff", "mathjax/fonts/HTML-CSS/TeX/woff"),
    ("@jupyter-widgets/html-manager/dist", "html-manager"),
]

REMOTE_REF = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["'](?:https?:)?//""", re.I)
REMOTE_CSS = re.compile(r"""@import\s+(?:url\()?\s*["']?(?:https?:)?//""", re.I)
# reveal.js's 'white' theme loads its fonts from beside it; several others @import Google Fonts
THEME = "white"
WIDTH, HEIGHT = 1280, 720               # slide size in CSS pixels (16:9); reveal scales it
HIDE_INPUT = "hide-input-on-slides"     # cell tag: output shown, code folded on slides
LIVE_ONLY_TAG = "live-only-on-slides"   # cell tag: a widget whose slide already shows its figure
                                        # statically; decks show only the "live notebook" line
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# widget models a viewer would try to move; in a deck nothing recomputes when they do
CONTROLS = re.compile(r"(Slider|Dropdown|ToggleButtons?|Checkbox|RadioButtons|Select\w*|Text|"
                      r"BoundedFloatText|BoundedIntText|FloatText|IntText|Button|Play)Model$")
LIVE_ONLY = ("Live notebook only: moving this control recomputes the figure when a kernel runs "
             "(make lab, open the lecture, Alt+R).")
PROGRESS = re.compile(r"\d+%\||\d+/\d+ \[|it/s\]|s/it\]")   # a tqdm line


class SlidesUnavailable(RuntimeError):
    """The local JavaScript copies are missing (run `make course` or `make setup`)."""


def vendor_into(out_dir: Path) -> Path:
    """Copy the local JavaScript and CSS the decks need into ``out_dir/_vendor`` (once)."""
    missing = [src for src, _ in VENDOR_FILES if not (NODE_MODULES / src).exists()]
    if missing:
        raise SlidesUnavailable(
            "offline slides need local copies of reveal.js, require.js, jQuery and MathJax, "
            f"missing under {NODE_MODULES}: {', '.join(missing)}. Run `make setup` "
            "(it runs `npm ci` in slides/) and try again.")
    vendor = Path(out_dir) / VENDOR
    for src, dst in VENDOR_FILES:
        if not (vendor / dst).exists():
            _copy_whole(NODE_MODULES / src, vendor / dst)
    _copy_whole(SLIDES_DIR / "course.css", vendor / "course.css")
    return vendor


def _copy_whole(src: Path, target: Path) -> None:
    """Copy a file or folder to ``target`` under a temporary name, then rename it into place: lessons
    build their decks in parallel processes, and a second copy into a half-made folder failed
    ("File exists"). A folder another process put there first is kept."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}")
    if src.is_dir():
        shutil.rmtree(temporary, ignore_errors=True)
        shutil.copytree(src, temporary)
        try:
            os.rename(temporary, target)
        except OSError:   # there already (another build's copy)
            shutil.rmtree(temporary, ignore_errors=True)
    else:
        shutil.copy2(src, temporary)
        os.replace(temporary, target)


def _final_text(text: str) -> str:
    """What a terminal would show after ``text``: each line keeps what follows its last
    carriage return (a tqdm bar redraws itself with ``\\r``)."""
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join(lines)


def _squash_streams(outputs: list) -> list:
    """Merge consecutive stream outputs of one stream, collapse carriage-return redraws,
    and move progress bars from stderr to stdout (a finished bar is not a warning)."""
    merged = []
    for out in outputs:
        if out.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream" \
                and merged[-1]["name"] == out["name"]:
            merged[-1]["text"] += out["text"]
        else:
            merged.append(copy.deepcopy(out))
    result = []
    for out in merged:
        if out.get("output_type") == "stream":
            text = _final_text(out["text"])
            lines = [line for line in text.split("\n")]
            if out["name"] == "stderr":
                bars = [line for line in lines if PROGRESS.search(line)]
                rest = [line for line in lines if line.strip() and not PROGRESS.search(line)]
                if bars:
                    result.append({"output_type": "stream", "name": "stdout", "text": bars[-1].strip() + "\n"})
                if rest:
                    result.append({"output_type": "stream", "name": "stderr", "text": "\n".join(rest) + "\n"})
                continue
            out["text"] = text
        result.append(out)
    tidy = []  # a bar moved to stdout joins the prints around it
    for out in result:
        if out.get("output_type") == "stream" and tidy and tidy[-1].get("output_type") == "stream" \
                and tidy[-1]["name"] == out["name"]:
            tidy[-1]["text"] += out["text"]
        else:
            tidy.append(out)
    return tidy


def _widget_models(nb) -> dict:
    return nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def _controls_under(model_id: str, models: dict, seen: set | None = None) -> list[str]:
    """Ids of the control models (sliders, dropdowns, ...) in the widget tree of ``model_id``."""
    seen = set() if seen is None else seen
    if model_id in seen or model_id not in models:
        return []
    seen.add(model_id)
    model = models[model_id]
    found = [model_id] if CONTROLS.search(model.get("model_name", "")) else []
    state = model.get("state", {})
    refs = []
    for value in state.values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item.startswith("IPY_MODEL_"):
                refs.append(item[len("IPY_MODEL_"):])
    for ref in refs:
        found += _controls_under(ref, models, seen)
    return found


def prepare_for_slides(notebook):
    """A copy of an (executed) notebook made ready for the screen (see the module's
    docstring); the notebook passed in is not changed."""
    nb = copy.deepcopy(notebook)
    models = _widget_models(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if LIVE_ONLY_TAG in cell.metadata.get("tags", []):
            cell.outputs = [_live_only_note()]
            continue
        cell.outputs = _squash_streams(cell.get("outputs", []))
        controls = []
        for out in cell.outputs:
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view:
                controls += _controls_under(view.get("model_id", ""), models)
        if controls:
            for model_id in controls:
                models[model_id].setdefault("state", {})["disabled"] = True
            cell.outputs.append(_live_only_note(LIVE_ONLY + " Shown here at its starting values."))
    return nb


def _live_only_note(text: str = LIVE_ONLY) -> dict:
    return {"output_type": "display_data", "metadata": {}, "data": {
        "text/html": f'<p class="course-live-only">{text}</p>', "text/plain": text}}


def notebook_html(notebook: Path, target: Path, slides_dir: Path) -> Path:
    """Write ``target``, an HTML rendering of an executed notebook that a browser opens
    offline: MathJax, require.js and the widget renderer come from ``slides_dir/_vendor``
    (the decks' copies; ``vendor_into`` makes them)."""
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    vendor = vendor_into(slides_dir)
    rel = Path(os.path.relpath(vendor, Path(target).parent)).as_posix()
    cfg = Config()
    cfg.HTMLExporter.require_js_url = f"{rel}/require.js"
    cfg.HTMLExporter.jquery_url = f"{rel}/jquery.min.js"
    cfg.HTMLExporter.mathjax_url = f"{rel}/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
    cfg.HTMLExporter.widget_renderer_url = f"{rel}/html-manager/embed-amd.js"
    nb = nbformat.read(str(notebook), as_version=4)
    if "widgets" in nb.metadata:
        widget_fonts_into(Path(target).parent)
    html, _ = HTMLExporter(config=cfg, template_name="lab").from_notebook_node(nb)
    remote = remote_references(html)
    if remote:
        raise RuntimeError(f"{notebook} as HTML would load from the network: {remote[:3]}")
    Path(target).write_text(html, encoding="utf-8")
    return Path(target)


def widget_fonts_into(page_dir: Path) -> None:
    """The widget renderer loads its icon fonts from ``@jupyter-widgets/`` beside the page
    that shows widgets: copy them there (once)."""
    fonts = Path(page_dir) / "@jupyter-widgets"
    if fonts.is_dir():
        return
    fonts.mkdir(parents=True)
    for font in (NODE_MODULES / "@jupyter-widgets/html-manager/dist").iterdir():
        if font.suffix in (".woff2", ".woff", ".ttf", ".eot", ".svg"):
            shutil.copy2(font, fonts / font.name)


def remote_references(html: str) -> list[str]:
    """Tags (and CSS ``@import`` rules) in ``html`` or a style sheet that would load
    something over the network."""
    return [m.group(0) for m in REMOTE_REF.finditer(html)] + \
        [m.group(0) for m in REMOTE_CSS.finditer(html)]


def build_deck(notebook, out_dir: Path, name: str) -> Path:
    """Write ``out_dir/<name>.slides.html``, a reveal.js deck that needs no network.

    ``notebook`` is a path or an executed ``nbformat`` node (so plots and outputs show).
    Raises ``RuntimeError`` if the deck still references a remote URL.
    """
    import nbformat
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vendor_into(out_dir)
    if not hasattr(notebook, "cells"):
        notebook = nbformat.read(str(notebook), as_version=4)
    notebook = prepare_for_slides(notebook)
    if "widgets" in notebook.metadata:
        widget_fonts_into(out_dir)
    cfg = Config()
    cfg.SlidesExporter.extra_template_basedirs = [str(SLIDES_DIR / "templates")]
    cfg.SlidesExporter.template_name = "course_reveal"
    cfg.SlidesExporter.reveal_url_prefix = f"{VENDOR}/reveal.js"
    cfg.SlidesExporter.reveal_theme = THEME
    cfg.SlidesExporter.reveal_scroll = False     # slides are fitted instead (see the template)
    cfg.SlidesExporter.reveal_width = str(WIDTH)
    cfg.SlidesExporter.reveal_height = str(HEIGHT)
    cfg.SlidesExporter.reveal_number = "c/t"
    cfg.SlidesExporter.require_js_url = f"{VENDOR}/require.js"
    cfg.SlidesExporter.jquery_url = f"{VENDOR}/jquery.min.js"
    cfg.SlidesExporter.mathjax_url = f"{VENDOR}/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
    cfg.SlidesExporter.widget_renderer_url = f"{VENDOR}/html-manager/embed-amd.js"
    cfg.SlidesExporter.exclude_input_prompt = True
    cfg.SlidesExporter.exclude_output_prompt = True
    html, _ = SlidesExporter(config=cfg).from_notebook_node(notebook)
    theme_css = (out_dir / VENDOR / "reveal.js" / "dist" / "theme" / f"{THEME}.css").read_text()
    remote = remote_references(html) + remote_references(theme_css)
    if remote:
        raise RuntimeError(f"deck {name} would load from the network: {remote[:3]}")
    path = out_dir / f"{name}.slides.html"
    path.write_text(html, encoding="utf-8")
    return path


def count_slides(notebook) -> int:
    """Number of horizontal plus vertical slides the notebook's metadata asks for."""
    import nbformat

    if not hasattr(notebook, "cells"):
        notebook = nbformat.read(str(notebook), as_version=4)
    kinds = [c.metadata.get("slideshow", {}).get("slide_type", "-") for c in notebook.cells]
    count = sum(1 for k in kinds if k in ("slide", "subslide"))
    if kinds and kinds[0] not in ("slide", "subslide"):
        count += 1  # content before the first slide marker forms a slide of its own
    return count
