"""Naive attention against FlashAttention's tiling (lesson 15). Left: the three naive kernels
write the N x N scores S and probabilities P to the GPU's main memory (HBM) and read them
back. Right: one program holds a block of queries Q_i on chip and streams the blocks K_j, V_j
past it; each BLOCK_M x BLOCK_N tile of scores lives only in registers/shared memory, folded
into a running maximum m, sum l and accumulator acc (the online softmax); O_i is written once."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

ALT = ("Two panels. Left, naive attention: three kernels, where S = Q K transpose and P = softmax(S), "
       "both N by N per head, are written to the GPU's main memory and read back. Right, "
       "FlashAttention: one program keeps query block Q1 on chip and streams key and value blocks "
       "K0 to K3 and V0 to V3 through it; each score tile stays in on-chip memory, folded into a "
       "running max m, sum l and accumulator, and only the output block O1 is written to memory.")

BLOCKS = 4                   # query and key blocks drawn
ROW, STEP = 1, 2             # the program (query block) drawn, and the key block it is at
HBM, CHIP, DONE, NOW, NEXT = "#fcbba1", "#c6dbef", "#d9f0d3", "#fd8d3c", "#ffffff"


def _arrow(ax, start, end, color="black", bend=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, color=color, linewidth=1.6,
                                 connectionstyle=f"arc3,rad={bend}"))


def _naive(ax):
    ax.add_patch(Rectangle((0.3, -4), 4, 4, facecolor=HBM, edgecolor="#a50f15", linewidth=2))
    ax.text(2.3, -1.5, "S = QKᵀ/√d\nP = softmax(S)", ha="center", va="center", fontsize=13)
    ax.text(2.3, -2.9, "N x N per head,\nin HBM", ha="center", va="center", fontsize=13, fontweight="bold")
    ax.add_patch(Rectangle((-0.9, -4), 0.6, 4, facecolor="white", edgecolor="black", linewidth=1.5))
    ax.text(-0.6, -2, "Q", ha="center", va="center", fontsize=13)
    ax.add_patch(Rectangle((0.3, 0.3), 4, 0.6, facecolor="white", edgecolor="black", linewidth=1.5))
    ax.text(2.3, 0.6, "Kᵀ", ha="center", va="center", fontsize=13)
    steps = ("1: write S", "2: read S,\n    write P", "3: read P, V,\n    write O")
    for k, text in enumerate(steps):
        ax.text(4.6, -0.5 - 1.35 * k, text, fontsize=12, va="center")
    ax.text(2.0, -4.5, "N = 16k, 16 heads, bf16:\nS and P are 8 GiB each", ha="center", va="top", fontsize=12)
    ax.set_title("naive: three kernels", fontsize=13)
    ax.set_xlim(-1.1, 7.2)
    ax.set_ylim(-5.9, 1.2)


def _tiled(ax):
    for i in range(BLOCKS):
        for j in range(BLOCKS):
            color = NEXT
            if i == ROW:
                color = NOW if j == STEP else (DONE if j < STEP else NEXT)
            ax.add_patch(Rectangle((j, -i - 1), 1, 1, facecolor=color, edgecolor="#777777", linewidth=1,
                                   linestyle="--"))
        ax.add_patch(Rectangle((-1.0, -i - 1), 0.7, 1, facecolor=CHIP if i == ROW else "white",
                               edgecolor="black", linewidth=1.5))
        ax.text(-0.65, -i - 0.5, f"Q{i}", ha="center", va="center", fontsize=12)
        ax.add_patch(Rectangle((i, 0.3), 1, 0.7, facecolor=CHIP if i == STEP else "white", edgecolor="black",
                               linewidth=1.5))
        ax.text(i + 0.5, 0.65, f"K{i}ᵀ", ha="center", va="center", fontsize=12)
        ax.add_patch(Rectangle((i, -BLOCKS - 1.0), 1, 0.7, facecolor=CHIP if i == STEP else "white",
                               edgecolor="black", linewidth=1.5))
        ax.text(i + 0.5, -BLOCKS - 0.65, f"V{i}", ha="center", va="center", fontsize=12)
    ax.add_patch(Rectangle((0, -ROW - 1), BLOCKS, 1, fill=False, edgecolor="black", linewidth=2.5))
    ax.text(STEP + 0.5, -ROW - 0.5, f"S{ROW}{STEP}", ha="center", va="center", fontsize=12, fontweight="bold")
    ax.text(BLOCKS / 2, -3.0, "score tiles: on chip only,\nnever written to HBM", ha="center", va="center",
            fontsize=12, color="#555555", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    box = FancyBboxPatch((5.0, -3.9), 3.6, 4.6, boxstyle="round,pad=0.1", facecolor=CHIP, edgecolor="#08519c",
                         linewidth=2)
    ax.add_patch(box)
    lines = (f"program {ROW}, on chip:", f"Q{ROW}: loaded once", f"K{STEP}, V{STEP}: streamed in",
             f"S{ROW}{STEP} = Q{ROW} K{STEP}ᵀ (tl.dot)", "m: running max", "l: running sum",
             "acc += P V, rescaled", "   when m grows")
    for k, text in enumerate(lines):
        ax.text(5.15, 0.4 - 0.55 * k, text, fontsize=12, va="center", fontweight="bold" if k == 0 else "normal")
    _arrow(ax, (STEP + 0.5, 1.0), (4.95, 0.5), "#08519c", bend=-0.35)
    _arrow(ax, (STEP + 0.5, -BLOCKS - 1.0), (4.95, -3.5), "#08519c", bend=0.35)
    _arrow(ax, (6.8, -4.0), (6.8, -4.9))
    ax.text(6.8, -5.1, f"O{ROW} = acc / l: written once", ha="center", va="top", fontsize=12)
    ax.set_title(f"fused (FlashAttention): program {ROW} at key block {STEP}", fontsize=13)
    ax.set_xlim(-1.1, 8.9)
    ax.set_ylim(-5.9, 1.2)


def draw():
    """The figure: the N x N matrices of the naive kernels beside the fused kernel's tiles."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), gridspec_kw={"width_ratios": [1, 1.25]})
    _naive(axes[0])
    _tiled(axes[1])
    for ax in axes:
        ax.set_aspect("equal")
        ax.axis("off")
    fig.tight_layout()
    return fig
