"""A paged KV cache (lesson 16; Kwon et al. 2023, "PagedAttention", section 4): two requests
that share a prompt, their block tables, and the physical blocks of the GPU's cache. The
prompt's full blocks are shared (reference count 2); the partial last block was shared too
until request B wrote into it, which copied it (copy-on-write)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, Rectangle

ALT = ("A paged KV cache with blocks of four tokens: request A and request B were forked from one "
       "eight-token prompt plus two tokens; their block tables map logical blocks 0, 1 and 2 to "
       "physical blocks of the GPU's cache; logical blocks 0 and 1 of both point to the same "
       "physical blocks 7 and 1 (reference count 2), while block 2 was shared until B appended a "
       "token, which copied it from physical block 3 to physical block 5 (copy-on-write); free "
       "blocks are grey.")

A_COLOR, B_COLOR, SHARED, FREE = "#9ecae1", "#fdae6b", "#c7e9c0", "#eeeeee"


def _tokens(ax, y, label, words, color_of):
    ax.text(-0.2, y + 0.3, label, ha="right", va="center", fontsize=12, fontweight="bold")
    for i, word in enumerate(words):
        ax.add_patch(Rectangle((i * 0.62, y), 0.6, 0.6, facecolor=color_of(i), edgecolor="black", linewidth=0.8))
        ax.text(i * 0.62 + 0.3, y + 0.3, word, ha="center", va="center", fontsize=9)


def _table(ax, x, y, label, entries):
    ax.text(x + 0.6, y + 1.95, label, ha="center", va="bottom", fontsize=11)
    for i, (block, color) in enumerate(entries):
        ax.add_patch(Rectangle((x, y + 1.3 - i * 0.6), 1.2, 0.6, facecolor=color, edgecolor="black"))
        ax.text(x + 0.6, y + 1.6 - i * 0.6, f"{i} → {block}", ha="center", va="center", fontsize=11)


def _physical(ax, x0, y0, contents):
    ax.text(x0 + 2.4, y0 + 1.45, "physical blocks in GPU memory (4 token slots each)", ha="center", fontsize=11)
    for b in range(8):
        color, text = contents.get(b, (FREE, "free"))
        col, row = b % 4, b // 4
        ax.add_patch(Rectangle((x0 + col * 1.22, y0 + 0.65 - row * 0.75), 1.15, 0.65, facecolor=color,
                               edgecolor="black"))
        ax.text(x0 + col * 1.22 + 0.575, y0 + 0.975 - row * 0.75, f"{b}: {text}", ha="center", va="center",
                fontsize=9)


def draw():
    fig, ax = plt.subplots(figsize=(11, 4.4))
    prompt = "The cat sat on the mat and then".split()
    _tokens(ax, 3.3, "A", prompt + ["it", "slept"], lambda i: SHARED if i < 8 else A_COLOR)
    _tokens(ax, 2.4, "B", prompt + ["it", "ran", "off"], lambda i: SHARED if i < 8 else B_COLOR)
    _table(ax, 7.4, 1.8, "A's block table", [(7, SHARED), (1, SHARED), (3, A_COLOR)])
    _table(ax, 9.0, 1.8, "B's block table", [(7, SHARED), (1, SHARED), (5, B_COLOR)])
    _physical(ax, 0.3, -0.2, {7: (SHARED, "ref 2"), 1: (SHARED, "ref 2"), 3: (A_COLOR, "A"),
                              5: (B_COLOR, "B's copy")})
    ax.add_patch(FancyArrowPatch((9.6, 1.8), (2.4, 0.1), arrowstyle="-|>", mutation_scale=12, color="gray"))
    ax.add_patch(FancyArrowPatch((8.0, 1.8), (4.6, 0.85), arrowstyle="-|>", mutation_scale=12, color="gray"))
    ax.text(5.6, -0.45, "after the fork, logical block 2 (\"it\") was block 3 for both;\n"
            "B's first write copied it into block 5: copy-on-write", fontsize=10, ha="left", va="center")
    ax.set_xlim(-0.9, 10.6)
    ax.set_ylim(-0.9, 4.1)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig
