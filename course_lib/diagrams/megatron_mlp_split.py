"""Megatron-LM's tensor-parallel MLP on two ranks (lesson 13; Shoeybi et al. 2019, section 3):
the first weight matrix A is split by columns, the second, B, by rows; every rank holds the
whole input X, computes GELU(X A_r) and a partial product with B_r without talking to the
other, and one all-reduce (Megatron's operator g) sums the partial outputs. In the backward
pass the operator f at the input all-reduces the gradient of X instead."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

ALT = ("Megatron-LM tensor parallelism of a transformer MLP on two ranks: the first weight "
       "matrix A (d by 4d) is cut into two column blocks and the second, B (4d by d), into two "
       "row blocks; each rank multiplies the full input X by its block of A, applies GELU, "
       "multiplies by its block of B to get a partial output of shape b by d, and a single "
       "all-reduce sums the two partials into the output Z held by both ranks; in the backward "
       "pass the all-reduce moves to the input's gradient.")

RANK_COLORS = ("#9ecae1", "#fdae6b")   # rank 0, rank 1
SHARED = "#e0e0e0"


def _box(ax, x, y, w, h, text, color, size=12, bold=False):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.03", facecolor=color,
                                edgecolor="black", linewidth=1.2))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
            fontweight="bold" if bold else "normal")


def _arrow(ax, start, end):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14,
                                 color="black", linewidth=1.4))


def _weights(ax):
    """A split into column blocks, B into row blocks, above the lanes that use them."""
    ax.text(2.85, 4.85, "A (d × 4d):\nsplit by columns", ha="right", va="center", fontsize=12)
    for r, color in enumerate(RANK_COLORS):
        ax.add_patch(Rectangle((3.0 + r * 0.95, 4.35), 0.95, 1.0, facecolor=color, edgecolor="black"))
        ax.text(3.475 + r * 0.95, 4.85, f"$A_{r}$", ha="center", va="center", fontsize=13)
    ax.text(7.45, 4.85, "B (4d × d):\nsplit by rows", ha="left", va="center", fontsize=12)
    for r, color in enumerate(RANK_COLORS):
        ax.add_patch(Rectangle((6.55, 4.85 - r * 0.5), 0.7, 0.5, facecolor=color, edgecolor="black"))
        ax.text(6.9, 5.1 - r * 0.5, f"$B_{r}$", ha="center", va="center", fontsize=13)


def _lanes(ax):
    lane_y = {0: 2.55, 1: 0.75}
    h = 1.15
    for r, y in lane_y.items():
        color = RANK_COLORS[r]
        ax.text(-0.15, y + h / 2, f"rank {r}", ha="right", va="center", fontsize=13, fontweight="bold")
        _box(ax, 0.0, y, 1.3, h, "X\nb × d\n(whole)", SHARED)
        _box(ax, 1.75, y + 0.3, 0.55, 0.55, "f", "white", 13, bold=True)
        _box(ax, 2.85, y, 2.2, h, f"GELU(X $A_{r}$)\nb × 2d", color)
        _box(ax, 5.6, y, 2.5, h, f"GELU(X $A_{r}$) $B_{r}$\nb × d, partial", color)
        _box(ax, 10.7, y, 1.4, h, "Z\nb × d", SHARED)
        _arrow(ax, (1.3, y + h / 2), (1.75, y + h / 2))
        _arrow(ax, (2.3, y + h / 2), (2.85, y + h / 2))
        _arrow(ax, (5.05, y + h / 2), (5.6, y + h / 2))
        _arrow(ax, (8.1, y + h / 2), (8.6, y + h / 2))
        _arrow(ax, (10.2, y + h / 2), (10.7, y + h / 2))
    _box(ax, 8.6, 0.75, 1.6, 2.95, "g:\nall-reduce\n(sum)", "#c7e9c0", 12, bold=True)
    ax.text(2.0, 0.25, "f: nothing forward,\nall-reduce of dL/dX backward", ha="left", va="top",
            fontsize=12)
    ax.text(9.4, 0.25, "g: the one all-reduce\nof the forward pass", ha="center", va="top",
            fontsize=12)


def draw():
    fig, ax = plt.subplots(figsize=(10, 4.6))
    _weights(ax)
    _lanes(ax)
    ax.set_xlim(-1.2, 12.2)
    ax.set_ylim(-0.75, 5.5)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig
