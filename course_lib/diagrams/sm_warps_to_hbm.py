"""One streaming multiprocessor (SM) of an NVIDIA H100 and the path of a load to memory
(lesson 03): four sub-partitions, each with a warp scheduler that issues one warp instruction
per clock and a 64 KB register file; the warps resident on the SM; the 256 KB of L1 data cache
and shared memory the SM's blocks share; then the L2 cache shared by all 132 SMs and the HBM.
A global access travels in 32-byte sectors, a shared one is served by 32 banks of 4-byte words.

Figures: NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 4 sub-partitions per SM,
64K 32-bit registers per SM, 256 KB combined L1/shared per SM, 50 MB L2, 132 SMs on the SXM5
part; datasheet: 80 GB HBM3 at 3.35 TB/s (data/device_specs.csv, data/gpu_sm_limits.csv)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

ALT = ("One H100 streaming multiprocessor: four sub-partitions, each with a warp scheduler issuing one "
       "warp instruction per clock and a 64 KB register file, over warps resident on the SM; below them "
       "256 KB of L1 cache and shared memory (32 banks of 4 bytes); an arrow carries 32-byte sectors to "
       "the 50 MB L2 cache shared by all 132 SMs and on to 80 GB of HBM3 at 3.35 TB/s.")

SCHED, REGS, WARPS, L1, L2, HBM = "#c6dbef", "#fdd0a2", "#e5f5e0", "#dadaeb", "#fcbba1", "#d9d9d9"


def _box(ax, x, y, w, h, color, text, size=12, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", facecolor=color,
                                edgecolor="black", linewidth=1))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, fontweight=weight)


def _arrow(ax, start, end, text, above=True):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="<->", mutation_scale=18, linewidth=2))
    mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
    ax.text(mx, my + (0.18 if above else -0.18), text, ha="center", va="bottom" if above else "top", fontsize=12)


def draw():
    """The figure: one SM on the left, L2 and HBM on the right, linked by the load path."""
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.add_patch(Rectangle((0, 0), 6.2, 5.0, facecolor="white", edgecolor="black", linewidth=2))
    ax.text(3.1, 4.75, "one SM (an H100 SXM5 has 132)", ha="center", va="center", fontsize=13, fontweight="bold")
    for k in range(4):
        x = 0.15 + k * 1.5
        _box(ax, x, 3.75, 1.4, 0.65, SCHED, "warp\nscheduler")
        _box(ax, x, 3.0, 1.4, 0.6, REGS, "registers\n64 KB")
        for w in range(2):
            ax.add_patch(Rectangle((x + 0.05 + w * 0.67, 2.3), 0.63, 0.55, facecolor=WARPS, edgecolor="black"))
            ax.text(x + 0.365 + w * 0.67, 2.575, f"w{k + 4 * w}", ha="center", va="center", fontsize=12)
    ax.text(3.1, 1.95, "resident warps (up to 64 per SM); each\nscheduler issues one warp instruction a clock",
            ha="center", va="center", fontsize=12)
    _box(ax, 0.15, 0.15, 5.9, 1.4, L1, "L1 data cache + shared memory: 256 KB per SM\n"
         "shared memory: 32 banks of 4-byte words,\na block's own scratchpad")
    _box(ax, 7.6, 3.0, 2.3, 1.4, L2, "L2 cache\n50 MB,\nall SMs share it", weight="bold")
    _box(ax, 7.6, 0.15, 2.3, 1.4, HBM, "HBM3\n80 GB\n3.35 TB/s", weight="bold")
    _arrow(ax, (6.25, 1.2), (7.55, 3.1), "")
    ax.text(6.3, 3.75, "32-byte\nsectors", fontsize=12, ha="left", va="center")
    _arrow(ax, (8.75, 2.95), (8.75, 1.6), "", above=False)
    ax.set_xlim(-0.1, 10.0)
    ax.set_ylim(-0.05, 5.1)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig
