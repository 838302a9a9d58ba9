"""Lesson 00: the course as a map. Lessons 00-02 (the machine and PyTorch devices) come first;
four strands build on them (kernels, one device made fast, many devices, specialised hardware);
an arrow from A to B means B uses what A teaches."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

ALT = ("A map of the course's lessons: set-up, hardware and PyTorch devices on the left "
       "feed four strands drawn as rows: kernels (SIMT, CuPy and Numba, Triton, attention), one "
       "device made fast (compilers, asynchronous execution, automatic parallelism, data movement), "
       "many devices (multi-GPU from scratch, DDP, collectives, sharding, experts and long context) "
       "and accelerators; an arrow from data movement leads into the multi-GPU strand.")

BASE = {"00": ("set-up", 3.55), "01": ("hardware", 2.35), "02": ("PyTorch\ndevices", 1.15)}
STRANDS = [  # (name, colour, y, [(lesson, title), ...])
    ("kernels", "#fde3c8", 3.85, [("03", "SIMT model"), ("04", "CuPy, Numba"), ("14", "Triton"),
                                  ("15", "attention")]),
    ("one\ndevice", "#d9f0d3", 2.75, [("05", "compilers"), ("06", "async"),
                                            ("07", "auto-parallel"), ("08", "profiling"), ("16", "serving")]),
    ("many\ndevices", "#f3d6e8", 1.65, [("09", "multi-GPU"), ("10", "DDP"), ("11", "collectives"),
                                        ("13", "sharding"), ("17", "MoE, context")]),
    ("special\nhardware", "#eeeeee", 0.55, [("12", "accelerators")]),
]
BASE_X, LABEL_X, FIRST_X, STEP_X = 0.75, 2.3, 3.65, 1.9
BOX_W, BOX_H = 1.55, 0.78


def _box(ax, x, y, text, colour):
    ax.add_patch(FancyBboxPatch((x - BOX_W / 2, y - BOX_H / 2), BOX_W, BOX_H, boxstyle="round,pad=0.03",
                                facecolor=colour, edgecolor="black", linewidth=1.2, zorder=2))
    ax.text(x, y, text, ha="center", va="center", fontsize=12, zorder=3)


def _arrow(ax, a, b, rad=0.0):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=13, color="#444444",
                                 linewidth=1.2, connectionstyle=f"arc3,rad={rad}", zorder=1))


def draw() -> plt.Figure:
    fig, ax = plt.subplots(figsize=(11, 4.5))
    ax.set_xlim(-0.1, 12.1)
    ax.set_ylim(0.05, 4.35)
    ax.axis("off")
    for lesson, (title, y) in BASE.items():
        _box(ax, BASE_X, y, f"{lesson}\n{title}", "#dde8f5")
    for upper, lower in (("00", "01"), ("01", "02")):
        _arrow(ax, (BASE_X, BASE[upper][1] - BOX_H / 2 - 0.03), (BASE_X, BASE[lower][1] + BOX_H / 2 + 0.03))
    starts = {}
    for name, colour, y, lessons in STRANDS:
        ax.text(LABEL_X, y, name, ha="center", va="center", fontsize=12, style="italic")
        for i, (lesson, title) in enumerate(lessons):
            x = FIRST_X + i * STEP_X
            _box(ax, x, y, f"{lesson}\n{title}", colour)
            if i:
                _arrow(ax, (x - STEP_X + BOX_W / 2 + 0.03, y), (x - BOX_W / 2 - 0.03, y))
        starts[lessons[0][0]] = (FIRST_X - BOX_W / 2 - 0.03, y)
    # the machine and devices feed every strand: 01 into kernels and accelerators, 02 into the rest
    _arrow(ax, (BASE_X + BOX_W / 2 + 0.03, BASE["01"][1] + 0.15), (LABEL_X - 0.5, 3.85), rad=-0.2)
    _arrow(ax, (BASE_X + BOX_W / 2 + 0.03, BASE["02"][1] + 0.15), (LABEL_X - 0.5, 2.75), rad=-0.2)
    _arrow(ax, (BASE_X + BOX_W / 2 + 0.03, BASE["02"][1]), (LABEL_X - 0.5, 1.65))
    _arrow(ax, (BASE_X + BOX_W / 2 + 0.03, BASE["01"][1] - 0.2), (LABEL_X - 0.5, 0.55), rad=0.25)
    # measuring data movement (08) comes before spreading work over many devices (09)
    x08 = FIRST_X + 3 * STEP_X
    _arrow(ax, (x08 - 0.2, 2.75 - BOX_H / 2 - 0.03), (FIRST_X + 0.2, 1.65 + BOX_H / 2 + 0.03))
    ax.text(6.8, 0.55, "arrow A → B: lesson B uses\nwhat lesson A teaches", ha="center",
            va="center", fontsize=12, color="#444444")
    return fig
