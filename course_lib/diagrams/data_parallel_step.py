"""Lesson 09: one data-parallel SGD step on three devices. The batch is cut into slices,
every device computes the gradient of its slice on its own full copy of the parameters,
the gradients are summed (allreduce) and every copy applies the same update."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

ALT = ("One data-parallel training step on three devices: a batch of 12 examples is split into "
       "three slices of 4, each device holds a full copy of the parameters w and computes the "
       "gradient g_i of its slice, an allreduce sums g_0 + g_1 + g_2, and every device applies "
       "the same update w - lr * sum, so the copies stay identical.")

DEVICES = 3
COLOURS = ("tab:blue", "tab:orange", "tab:green")


def _box(ax, x, y, w, h, text, colour="white", edge="black", size=13):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02",
                                facecolor=colour, edgecolor=edge, linewidth=1.5))
    ax.text(x, y, text, ha="center", va="center", fontsize=size)


def _arrow(ax, start, end, colour="black"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=16,
                                 color=colour, linewidth=1.5))


def draw() -> plt.Figure:
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 4.6)
    ax.axis("off")
    # the batch, cut into three coloured slices
    for x, title in ((0.9, "1. split"), (3.35, "2. local gradients"), (7.45, "3. sum"),
                     (9.25, "4. same update")):
        ax.text(x, 4.35, title, ha="center", fontsize=13, weight="bold")
    for i, colour in enumerate(COLOURS):
        y = 3.6 - i * 1.3
        _box(ax, 0.9, y, 1.3, 0.9, f"slice {i}:\n4 of 12", colour=colour, size=12)
        ax.patches[-1].set_alpha(0.35)
    ys = [3.6 - i * 1.3 for i in range(DEVICES)]
    for i, (y, colour) in enumerate(zip(ys, COLOURS)):
        _arrow(ax, (1.6, y), (2.35, y), colour)
        _box(ax, 3.35, y, 1.9, 0.95, f"device {i}\nfull copy of w", edge=colour)
        _arrow(ax, (4.3, y), (5.0, y), colour)
        _box(ax, 5.55, y, 1.0, 0.7, f"$g_{i}$", colour=colour, size=14)
        ax.patches[-1].set_alpha(0.35)
        _arrow(ax, (6.05, y), (6.85, 2.3), colour)
    _box(ax, 7.45, 2.3, 1.2, 1.6, "allreduce\n$g_0+g_1$\n$+g_2$", colour="#eeeeee", size=13)
    for y in ys:
        _arrow(ax, (8.05, 2.3), (8.55, y))
        _box(ax, 9.25, y, 1.35, 0.8, "w - lr $\\cdot$ sum", size=12)
    ax.text(5.0, 0.05, "every copy applies the same update: the replicas stay identical",
            ha="center", fontsize=13, style="italic")
    return fig
