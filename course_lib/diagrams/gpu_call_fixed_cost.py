"""Lesson 04: why small problems lose on a GPU. One GPU call of the distance matrix pays fixed
costs (Python and the kernel launch, copying the points in) before its kernel runs, and
copying the n x n result back grows with n squared too; a CPU call starts at once and grows
with n squared. Schematic: the widths are made up to show the shape, not measured."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

ALT = ("Left: timelines of one distance-matrix call at a small and a large n. On the CPU the call "
       "is one compute bar. On the GPU it is a fixed launch cost, a copy of the points to the "
       "device, a short kernel and a copy of the n by n result back; at small n the fixed parts "
       "make the GPU slower, at large n its fast kernel wins. Right: time against n on log axes, "
       "the CPU line steep from the origin, the GPU line flat at the fixed cost then rising, "
       "crossing at the crossover size.")

COLOURS = {"CPU compute": "tab:blue", "launch + Python": "tab:gray", "copy to device": "tab:green",
           "GPU kernel": "tab:orange", "copy result back": "tab:olive"}


def _timelines(ax):
    # (label, [(part, width), ...]) in arbitrary time units, chosen to show the two regimes
    rows = [("CPU, small n", [("CPU compute", 1.0)]),
            ("GPU, small n", [("launch + Python", 2.0), ("copy to device", 0.6), ("GPU kernel", 0.3),
                              ("copy result back", 0.5)]),
            ("CPU, large n", [("CPU compute", 9.0)]),
            ("GPU, large n", [("launch + Python", 2.0), ("copy to device", 0.7), ("GPU kernel", 1.3),
                              ("copy result back", 2.2)])]
    for y, (_, parts) in enumerate(reversed(rows)):
        left = 0.0
        for part, width in parts:
            ax.barh(y, width, left=left, height=0.6, color=COLOURS[part], edgecolor="black", alpha=0.75)
            left += width
    ax.set_yticks(range(len(rows)), [label for label, _ in reversed(rows)], fontsize=13)
    ax.set_xticks([])
    ax.set_xlabel("time of one call (schematic) →", fontsize=13)
    ax.set_title("what one call pays", fontsize=14)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c, alpha=0.75) for c in COLOURS.values()]
    ax.legend(handles, list(COLOURS), fontsize=12, loc="upper right", framealpha=0.95)
    ax.set_xlim(0, 9.5)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _curves(ax):
    n = np.logspace(1, 4.3, 200)
    cpu = 2e-8 * n ** 2
    gpu = 2e-2 + 2.5e-10 * n ** 2 + 4e-9 * n ** 2      # fixed + kernel + result copy
    ax.loglog(n, cpu, color=COLOURS["CPU compute"], lw=3, label="CPU: grows as n²")
    ax.loglog(n, gpu, color=COLOURS["GPU kernel"], lw=3, label="GPU: fixed cost,\nthen grows")
    cross = n[np.argmax(gpu < cpu)]
    ax.axvline(cross, color="black", ls="--", lw=1.5)
    ax.text(cross * 1.15, 2e-4, "crossover", fontsize=13, rotation=90, va="bottom")
    ax.text(14, 0.03, "fixed cost per call", fontsize=12, color="dimgray")
    ax.set_xlabel("problem size n (log)", fontsize=13)
    ax.set_ylabel("seconds per call (log)", fontsize=13)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.minorticks_off()
    ax.set_title("time against size", fontsize=14)
    ax.legend(fontsize=12, loc="lower right")


def draw() -> plt.Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.3), width_ratios=[1.35, 1])
    _timelines(left)
    _curves(right)
    fig.tight_layout()
    return fig
