"""Ring attention on four ranks (lesson 17; Liu et al. 2023): every rank keeps its query chunk
and, at each of four steps, computes against the key/value chunk it holds, then passes that chunk
to the next rank round the ring. Under a causal mask with contiguous chunks, rank r has work at
r + 1 of the steps only (chunks after its own are invisible), so the last rank sets the time;
zig-zag chunks (r and 2W - 1 - r) give every rank the same work."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, Rectangle

ALT = ("Left: four ranks on a ring, each passing its key and value chunk to the next. Right: a grid "
       "of ranks by steps for a causal mask with contiguous chunks; at step s rank r holds the "
       "key/value chunk of rank r - s; cells where that chunk comes after the rank's own are idle, "
       "so rank 0 works one step, rank 3 all four; below, with zig-zag chunks every rank works the "
       "same number of chunk pairs.")

WORLD = 4
RANK_COLORS = ("#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc")


def _ring(ax):
    radius = 1.25
    centers = [(radius * math.sin(2 * math.pi * r / WORLD), radius * math.cos(2 * math.pi * r / WORLD))
               for r in range(WORLD)]
    for r, (x, y) in enumerate(centers):
        ax.add_patch(Circle((x, y), 0.42, facecolor=RANK_COLORS[r], edgecolor="black", linewidth=1.2))
        ax.text(x, y + 0.08, f"rank {r}", ha="center", va="center", fontsize=11, fontweight="bold")
        ax.text(x, y - 0.17, f"$Q_{r}$ stays", ha="center", va="center", fontsize=10)
    for r in range(WORLD):
        (x0, y0), (x1, y1) = centers[r], centers[(r + 1) % WORLD]
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), connectionstyle="arc3,rad=-0.25", arrowstyle="-|>",
                                     mutation_scale=16, shrinkA=30, shrinkB=30, linewidth=1.5, color="black"))
    ax.text(0, 0, "K, V\nchunks\npass on", ha="center", va="center", fontsize=11)
    ax.set_xlim(-2.0, 2.0)
    ax.set_ylim(-2.0, 2.0)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("isend to rank r + 1, irecv from rank r - 1", fontsize=11)


def _grid(ax):
    for r in range(WORLD):
        for s in range(WORLD):
            source = (r - s) % WORLD
            busy = source <= r
            color = RANK_COLORS[source] if busy else "white"
            ax.add_patch(Rectangle((s, WORLD - 1 - r), 1, 1, facecolor=color, edgecolor="black",
                                   hatch=None if busy else "//"))
            label = f"$K_{source}V_{source}$" + (" ◣" if busy and source == r else "")
            ax.text(s + 0.5, WORLD - 0.5 - r, label if busy else "idle", ha="center", va="center", fontsize=10,
                    bbox=None if busy else {"facecolor": "white", "edgecolor": "none", "pad": 1})
        ax.text(WORLD + 0.15, WORLD - 0.5 - r, f"{r + 1} of {WORLD}", ha="left", va="center", fontsize=10)
    for s in range(WORLD):
        ax.text(s + 0.5, WORLD + 0.2, f"step {s}", ha="center", va="bottom", fontsize=10)
    for r in range(WORLD):
        ax.text(-0.1, WORLD - 0.5 - r, f"rank {r}", ha="right", va="center", fontsize=10)
    ax.text(WORLD / 2, -0.45, "causal, contiguous chunks: rank 3 works 4 steps, rank 0 one\n"
            "(◣ = the diagonal block, half masked); zig-zag chunks r and 7 - r: 9 block pairs each",
            ha="center", va="top", fontsize=10)
    ax.set_xlim(-1.1, WORLD + 1.1)
    ax.set_ylim(-1.4, WORLD + 0.7)
    ax.set_aspect("equal")
    ax.axis("off")


def draw():
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.6), gridspec_kw={"width_ratios": [1, 1.35]})
    _ring(left)
    _grid(right)
    fig.tight_layout()
    return fig
