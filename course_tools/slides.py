"""Offline reveal.js decks from lecture notebooks.

nbconvert's slides exporter loads reveal.js, require.js, jQuery, MathJax and the widget
renderer from CDNs. Here every one of them comes from ``_vendor/`` beside the decks,
copied from the npm packages that the setup installs into ``slides/node_modules``, so a
deck opens in a browser with the network cut off.
"""
from __future__ import annotations

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
        target = vendor / dst
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if (NODE_MODULES / src).is_dir():
            shutil.copytree(NODE_MODULES / src, target)
        else:
            shutil.copy2(NODE_MODULES / src, target)
    shutil.copy2(SLIDES_DIR / "course.css", vendor / "course.css")
    return vendor


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
    cfg = Config()
    cfg.SlidesExporter.extra_template_basedirs = [str(SLIDES_DIR / "templates")]
    cfg.SlidesExporter.template_name = "course_reveal"
    cfg.SlidesExporter.reveal_url_prefix = f"{VENDOR}/reveal.js"
    cfg.SlidesExporter.reveal_theme = THEME
    cfg.SlidesExporter.reveal_scroll = True
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
