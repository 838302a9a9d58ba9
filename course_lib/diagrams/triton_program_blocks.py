"""Triton's grid of programs over a tensor (lesson 14). Left: a 1-D tensor of n = 10
elements cut into blocks of BLOCK = 4; program p owns offsets p * BLOCK + tl.arange(0, BLOCK),
and the last program's lanes 10 and 11 are masked off (offs < n is false there). Right: a
6 x 10 matrix cut into 4 x 4 tiles; program (i, j) owns one tile, built from rows[:, None]
and cols[None, :], and the tiles on the bottom and right edges are partly masked."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

ALT = ("Triton's grid of programs. Left: a vector of 10 elements split into three programs of "
       "4 lanes each; program p handles offsets p times BLOCK plus 0 to 3, and the last program's "
       "two lanes past the end are masked off. Right: a 6 by 10 matrix split into 4 by 4 tiles, "
       "a 2 by 3 grid of programs; the tiles on the bottom and right edges have masked lanes.")

N, BLOCK = 10, 4                     # the 1-D example
ROWS, COLS, TILE = 6, 10, 4          # the 2-D example
COLORS = ("#9ecae1", "#a1d99b", "#fdd0a2", "#dadaeb", "#fcbba1", "#c7e9c0")
MASKED = "#f0f0f0"


def _cell(ax, x, y, color, masked, label=None):
    ax.add_patch(Rectangle((x, y), 1, 1, facecolor=MASKED if masked else color, edgecolor="black",
                           linewidth=0.8, hatch="///" if masked else None))
    if label is not None:
        ax.text(x + 0.5, y + 0.5, label, ha="center", va="center", fontsize=12,
                color="#888888" if masked else "black")


def _vector(ax):
    programs = -(-N // BLOCK)
    for p in range(programs):
        y = -p * 1.4 - 1
        for lane in range(BLOCK):
            offs = p * BLOCK + lane
            _cell(ax, lane, y, COLORS[p], offs >= N, str(offs))
        ax.add_patch(Rectangle((0, y), BLOCK, 1, fill=False, edgecolor="black", linewidth=2.5))
        ax.text(-0.3, y + 0.5, f"program_id(0) = {p}", ha="right", va="center", fontsize=12)
    ax.text(BLOCK + 0.3, -programs * 1.4 + 0.9, "masked:\nno load,\nno store", fontsize=12, va="center",
            color="#555555")
    ax.text(-4.6, -programs * 1.4 - 0.3, "offs = pid * BLOCK + tl.arange(0, BLOCK)\nmask = offs < n", fontsize=12,
            va="top", family="monospace")
    ax.set_title(f"1-D: n = {N}, BLOCK = {BLOCK}: {programs} programs", fontsize=13)
    ax.set_xlim(-4.7, BLOCK + 2.2)
    ax.set_ylim(-programs * 1.4 - 2.2, 0.6)


def _matrix(ax):
    grid_rows, grid_cols = -(-ROWS // TILE), -(-COLS // TILE)
    for r in range(grid_rows * TILE):
        for c in range(grid_cols * TILE):
            i, j = r // TILE, c // TILE
            _cell(ax, c, -r - 1, COLORS[(i * grid_cols + j) % len(COLORS)], r >= ROWS or c >= COLS)
    for i in range(grid_rows):
        for j in range(grid_cols):
            ax.add_patch(Rectangle((j * TILE, -(i + 1) * TILE), TILE, TILE, fill=False, edgecolor="black",
                                   linewidth=2.5))
            ax.text(j * TILE + TILE / 2, -i * TILE - 1.5, f"({i}, {j})", ha="center", va="center",
                    fontsize=13, fontweight="bold")
    ax.add_patch(Rectangle((0, -ROWS), COLS, ROWS, fill=False, edgecolor="#d62728", linewidth=2.5))
    ax.text(grid_cols * TILE + 0.3, -ROWS / 2, f"red: the\n{ROWS} x {COLS}\nmatrix", color="#d62728", fontsize=12,
            va="center")
    ax.text(0, -grid_rows * TILE - 0.4, "mask = (rows[:, None] < n_rows)\n     & (cols[None, :] < n_cols)",
            fontsize=12, va="top", family="monospace")
    ax.set_title(f"2-D: tiles of {TILE} x {TILE}, grid = ({grid_rows}, {grid_cols}) programs (i, j)", fontsize=13)
    ax.set_xlim(-0.3, grid_cols * TILE + 3.2)
    ax.set_ylim(-grid_rows * TILE - 2.4, 0.9)


def draw():
    """The figure: the 1-D grid with its masked tail, and the 2-D grid of tiles."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [1, 1.25]})
    _vector(axes[0])
    _matrix(axes[1])
    for ax in axes:
        ax.set_aspect("equal")
        ax.axis("off")
    fig.tight_layout()
    return fig
