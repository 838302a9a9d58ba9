"""An output-stationary systolic array in one cycle (lesson 12): skewed rows of A enter from
the left, skewed columns of B from the top, every processing element (PE) multiplies the
pair that meets in it and adds the product to the element of C it owns; the PEs busy in
this cycle form an anti-diagonal wavefront. Beside the grid, one PE's inside: two operand
registers that pass their values on, one multiply-accumulate (MAC), one accumulator."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

ALT = ("A 4 by 4 output-stationary systolic array at cycle 2: rows of A enter from the left "
       "and columns of B from the top, each delayed by one cycle per row or column, so that "
       "A[i,k] and B[k,j] meet in processing element (i,j) at cycle i+j+k; the busy elements "
       "form a diagonal wavefront. A second panel shows one element: a multiply-accumulate "
       "into its own accumulator, with A passed right and B passed down.")

SIZE = 4          # PEs per side
CYCLE = 2         # the cycle drawn
A_COLOR, B_COLOR, BUSY, IDLE = "#1f77b4", "#d62728", "#ffe08a", "#f2f2f2"


def _arrow(ax, start, end, color="black", width=1.6):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14,
                                 color=color, linewidth=width))


def _grid(ax):
    """The array at cycle ``CYCLE``; PE (i, j) at x = j, y = -i."""
    for i in range(SIZE):
        for j in range(SIZE):
            k = CYCLE - i - j
            busy = 0 <= k < SIZE
            ax.add_patch(Rectangle((j - 0.4, -i - 0.4), 0.8, 0.8, facecolor=BUSY if busy else IDLE,
                                   edgecolor="black", linewidth=1.2))
            label = f"k={k}" if busy else ("done" if k >= SIZE else "wait")
            ax.text(j, -i, label, ha="center", va="center", fontsize=12,
                    fontweight="bold" if busy else "normal")
            if j < SIZE - 1:
                _arrow(ax, (j + 0.4, -i), (j + 0.6, -i), A_COLOR, 1.2)
            if i < SIZE - 1:
                _arrow(ax, (j, -i - 0.4), (j, -i - 0.6), B_COLOR, 1.2)
    # operands still outside the array, nearest first: row i of A waits i cycles longer
    for i in range(SIZE):
        for place, k in enumerate(range(max(CYCLE + 1 - i, 0), SIZE)):
            ax.text(-0.95 - 0.62 * place, -i, f"$A_{{{i}{k}}}$", ha="center", va="center",
                    fontsize=13, color=A_COLOR)
    for j in range(SIZE):
        for place, k in enumerate(range(max(CYCLE + 1 - j, 0), SIZE)):
            ax.text(j, 0.85 + 0.45 * place, f"$B_{{{k}{j}}}$", ha="center", va="center",
                    fontsize=13, color=B_COLOR)
    ax.text(-3.2, 1.2, "A enters from the left:\nrow i, i cycles late", fontsize=12,
            color=A_COLOR, va="center")
    ax.text(SIZE - 0.3, 1.3, "B enters from the top:\ncolumn j, j cycles late", fontsize=12,
            color=B_COLOR, va="center")
    ax.text(1.5, -SIZE + 0.25,
            f"cycle t = {CYCLE}: PE (i, j) multiplies $A_{{ik}} B_{{kj}}$ with k = t - i - j",
            ha="center", va="center", fontsize=13)
    ax.set_xlim(-3.3, SIZE + 1.9)
    ax.set_ylim(-SIZE, 2.4)


def _pe(ax):
    """One PE: operands in and out, the MAC, the accumulator it keeps."""
    ax.add_patch(FancyBboxPatch((0.05, 0.15), 0.9, 0.7, boxstyle="round,pad=0.02",
                                facecolor=BUSY, edgecolor="black", linewidth=1.5))
    ax.text(0.5, 0.62, "c += a × b", ha="center", va="center", fontsize=14, fontweight="bold")
    ax.text(0.5, 0.36, "c stays here:\nit is C[i, j]", ha="center", va="center", fontsize=12)
    _arrow(ax, (-0.35, 0.5), (0.05, 0.5), A_COLOR)
    _arrow(ax, (0.95, 0.5), (1.35, 0.5), A_COLOR)
    _arrow(ax, (0.5, 1.25), (0.5, 0.85), B_COLOR)
    _arrow(ax, (0.5, 0.15), (0.5, -0.25), B_COLOR)
    ax.text(-0.35, 0.56, "a in", fontsize=12, color=A_COLOR, va="bottom")
    ax.text(0.98, 0.56, "a out", fontsize=12, color=A_COLOR, va="bottom")
    ax.text(0.55, 1.12, "b in", fontsize=12, color=B_COLOR)
    ax.text(0.55, -0.2, "b out", fontsize=12, color=B_COLOR)
    ax.text(0.5, -0.55, "one MAC per cycle;\nonly edge PEs\ntouch memory", ha="center",
            va="center", fontsize=12)
    ax.set_xlim(-0.4, 1.4)
    ax.set_ylim(-0.85, 1.35)


def draw():
    fig, (grid_ax, pe_ax) = plt.subplots(1, 2, figsize=(10, 4.5), gridspec_kw={"width_ratios": [2.1, 1]})
    _grid(grid_ax)
    _pe(pe_ax)
    for ax in (grid_ax, pe_ax):
        ax.set_aspect("equal")
        ax.axis("off")
    grid_ax.set_title("4 x 4 output-stationary array", fontsize=14)
    pe_ax.set_title("inside one PE", fontsize=14)
    fig.tight_layout()
    return fig
