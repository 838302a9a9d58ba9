"""Lesson 11: where the bytes go when four GPUs sum S bytes of gradients. With a parameter
server (a star) every gradient crosses the server's one link, which carries 4 S in and
4 S out; in a ring allreduce every link carries 2 (n-1)/n S = 1.5 S along the ring, all links at
once, and that figure hardly grows with the number of GPUs."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch

ALT = ("Two ways to sum S bytes of gradients over four GPUs. Left, a parameter server star: all "
       "four GPUs push S to one server and pull S back, so the server's link carries 4 S in and "
       "4 S out. Right, a ring: GPU 0 to 1 to 2 to 3 and back to 0, where every link carries "
       "2 (n-1)/n S = 1.5 S along the ring, all links busy at the same time.")

N = 4


def _node(ax, xy, text, colour):
    ax.add_patch(Circle(xy, 0.42, facecolor=colour, edgecolor="black", linewidth=1.5))
    ax.text(*xy, text, ha="center", va="center", fontsize=13)


def _arrow(ax, a, b, colour, rad=0.0):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=16, color=colour,
                                 linewidth=2, shrinkA=24, shrinkB=24,
                                 connectionstyle=f"arc3,rad={rad}"))


def draw() -> plt.Figure:
    fig, (star, ring) = plt.subplots(1, 2, figsize=(10, 4.5))
    for ax in (star, ring):
        ax.set_xlim(-2.6, 2.6)
        ax.set_ylim(-2.9, 2.3)
        ax.set_aspect("equal")
        ax.axis("off")
    corners = [(-1.6, 1.3), (1.6, 1.3), (1.6, -1.3), (-1.6, -1.3)]
    # star: four workers around one server; every byte goes through the server's link
    _node(star, (0, 0), "server", "#dddddd")
    for i, xy in enumerate(corners):
        _node(star, xy, f"GPU {i}", "#cfe2f3")
        _arrow(star, xy, (0, 0), "tab:red", rad=0.15)
        _arrow(star, (0, 0), xy, "tab:green", rad=0.15)
    star.set_title("parameter server (star)", fontsize=14)
    star.text(0, -2.3, "red: push S, green: pull S\nserver link: 4 S in, 4 S out", ha="center", fontsize=13)
    # ring: each GPU sends to the next; every link works all the time
    order = [corners[0], corners[1], corners[2], corners[3]]
    for i, xy in enumerate(order):
        _node(ring, xy, f"GPU {i}", "#cfe2f3")
        _arrow(ring, xy, order[(i + 1) % N], "tab:blue")
    share = 2 * (N - 1) / N
    ring.set_title("ring allreduce", fontsize=14)
    ring.text(0, 0, f"n = {N}", ha="center", va="center", fontsize=13)
    ring.text(0, -2.3, f"every link: 2 (n-1)/n S = {share:g} S,\nall links busy at once", ha="center",
              fontsize=13)
    fig.tight_layout()
    return fig
