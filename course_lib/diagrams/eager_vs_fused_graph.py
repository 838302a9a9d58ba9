"""Lesson 05: the same computation, ``g = (a + b) + (c + d)``, run eagerly and as a compiled graph.
Eagerly, Python dispatches three operators one after another; each is its own kernel that
reads its inputs from memory and writes a temporary (``e``, ``f``) back. A compiler that sees
the whole graph fuses the three additions into one kernel: one dispatch, the four inputs read
once, one output written, no temporaries in memory."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

ALT = ("Left, eager: Python dispatches three additions one at a time; the first writes e to memory, "
       "the second writes f, the third reads e and f back and writes g: three dispatches and two "
       "temporaries. Right, compiled: the graph of the same three additions is fused into one "
       "kernel that reads a, b, c and d once and writes only g, with one dispatch.")

MEMORY = "tab:green"
KERNEL = "tab:orange"
PYTHON = "tab:gray"


def _box(ax, x, y, w, h, text, colour, size=13, alpha=0.3, style="round,pad=0.02"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, facecolor=colour, alpha=alpha,
                                edgecolor=colour, linewidth=1.6))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)


def _arrow(ax, start, end, colour="black", style="-|>"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=14, linewidth=1.3,
                                 color=colour, shrinkA=2, shrinkB=2))


def _eager(ax):
    ax.set_title("eager: 3 dispatches, 2 temporaries", fontsize=14)
    steps = [("e = a + b", "a, b", "e"), ("f = c + d", "c, d", "f"), ("g = e + f", "e, f", "g")]
    for k, (op, reads, writes) in enumerate(steps):
        x = 0.3 + k * 1.65
        _box(ax, x, 3.1, 1.4, 0.6, "dispatch", PYTHON, size=12)
        _box(ax, x, 1.9, 1.4, 0.7, op, KERNEL)
        _box(ax, x, 0.4, 1.4, 0.7, f"read {reads}\nwrite {writes}", MEMORY, size=12)
        _arrow(ax, (x + 0.7, 3.1), (x + 0.7, 2.6))
        _arrow(ax, (x + 0.7, 1.9), (x + 0.7, 1.1), style="<|-|>")
        if k:
            _arrow(ax, (x - 0.25, 3.4), (x, 3.4))
    ax.text(0.05, 3.4, "Python", fontsize=12, rotation=90, va="center", ha="right")
    ax.text(0.05, 2.25, "kernels", fontsize=12, rotation=90, va="center", ha="right")
    ax.text(0.05, 0.75, "memory", fontsize=12, rotation=90, va="center", ha="right")
    ax.set_xlim(-0.35, 5.3)
    ax.set_ylim(0.2, 4.0)
    ax.axis("off")


def _compiled(ax):
    ax.set_title("compiled: 1 dispatch, fused", fontsize=14)
    _box(ax, 1.1, 3.1, 1.6, 0.6, "dispatch", PYTHON, size=12)
    ax.add_patch(FancyBboxPatch((0.25, 1.45), 3.3, 1.4, boxstyle="round,pad=0.03", facecolor=KERNEL,
                                alpha=0.15, edgecolor=KERNEL, linewidth=2, linestyle="--"))
    ax.text(1.9, 2.62, "one fused kernel", fontsize=12, ha="center", color="saddlebrown")
    for x, name in ((0.45, "+"), (2.35, "+")):
        _box(ax, x, 1.95, 1.0, 0.45, f"{'a' if x < 1 else 'c'} {name} {'b' if x < 1 else 'd'}", KERNEL, size=12)
    _box(ax, 1.45, 1.55, 0.9, 0.35, "+", KERNEL, size=12)
    _arrow(ax, (0.95, 1.95), (1.6, 1.9))
    _arrow(ax, (2.85, 1.95), (2.2, 1.9))
    _arrow(ax, (1.9, 3.1), (1.9, 2.85))
    _box(ax, 0.45, 0.4, 2.9, 0.7, "read a, b, c, d once · write g", MEMORY, size=12)
    _arrow(ax, (1.9, 1.45), (1.9, 1.1), style="<|-|>")
    ax.set_xlim(0.0, 3.8)
    ax.set_ylim(0.2, 4.0)
    ax.axis("off")


def draw() -> plt.Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.0), width_ratios=[1.45, 1])
    _eager(left)
    _compiled(right)
    fig.tight_layout()
    return fig
