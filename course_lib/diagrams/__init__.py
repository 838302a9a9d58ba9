"""Diagrams for the lectures: pictures that explain better than text (an SM, coalesced
and strided access, a ring allreduce, ...), drawn with matplotlib so they live in the
repository as code, render the same in JupyterLab and in the offline decks, and carry
alternative text for screen readers.

One module per diagram in this package, each with:
* ``ALT``: the alternative text (what the picture shows, in one or two sentences);
* ``draw() -> matplotlib.figure.Figure``: the figure, sized for a slide (at most about
  11 x 4.6 inches at 100 dpi, so it fits a 1280 x 720 slide beside a title).

A lecture shows one with ``diagrams.show("name")``.
"""
from __future__ import annotations

import importlib
import io
import pkgutil

SLIDE_DPI = 100   # pixels per inch of the PNG a lecture shows; 11 in -> 1100 px on a 1280 px slide


def names() -> list[str]:
    """Every diagram module in this package, by name."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load(name: str):
    """The diagram module ``name`` (``ValueError`` naming the known ones if there is none)."""
    if name not in names():
        raise ValueError(f"no diagram {name!r}; known: {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{name}")


def png(fig, dpi: int = SLIDE_DPI) -> bytes:
    """``fig`` as PNG bytes (tight bounding box, white background)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return buffer.getvalue()


def show(name: str) -> None:
    """Display diagram ``name`` as a PNG whose output metadata carries its ``alt`` text
    (the offline decks put it on the ``<img>``), then close the figure."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    module = load(name)
    fig = module.draw()
    try:
        display({"image/png": png(fig), "text/plain": f"[diagram] {module.ALT}"}, raw=True,
                metadata={"image/png": {"alt": module.ALT}})
    finally:
        plt.close(fig)
