"""Lesson 10: why DistributedDataParallel packs gradients into buckets. Backward produces
gradients last layer first; a bucket's allreduce starts as soon as its gradients are ready
and runs while backward computes earlier layers, so most communication hides behind
computation. Without buckets the whole allreduce waits for the end of backward."""
from __future__ import annotations

import matplotlib.pyplot as plt

ALT = ("Two timelines of one backward pass over four layers. Top: without overlap, the "
       "allreduce of all gradients starts only after the backward of layer 1 ends. Bottom: "
       "DDP closes bucket 0 (layers 4 and 3) and bucket 1 (layers 2 and 1) as their gradients "
       "become ready; each bucket's allreduce runs on a communication stream while backward "
       "continues, and the step ends earlier.")

# durations in arbitrary time units: backward of layers 4..1, allreduce of each bucket
BACKWARD = [("layer 4", 1.0), ("layer 3", 1.0), ("layer 2", 1.2), ("layer 1", 1.2)]
BUCKETS = [("bucket 0\n(layers 4, 3)", 1, 1.6), ("bucket 1\n(layers 2, 1)", 3, 1.6)]
COMPUTE, COMM = "tab:blue", "tab:orange"


def _bar(ax, y, start, length, colour, label, alpha=0.85):
    ax.broken_barh([(start, length)], (y - 0.35, 0.7), facecolors=colour, alpha=alpha,
                   edgecolor="black")
    ax.text(start + length / 2, y, label, ha="center", va="center", fontsize=12, color="white"
            if colour == COMPUTE else "black")


def draw() -> plt.Figure:
    fig, ax = plt.subplots(figsize=(10, 4.3))
    rows = {"no overlap: compute": 4.0, "no overlap: network": 3.0,
            "DDP: compute": 1.5, "DDP: network": 0.5}
    # without overlap: all of backward, then one allreduce of everything
    t, ends = 0.0, []
    for name, length in BACKWARD:
        _bar(ax, rows["no overlap: compute"], t, length, COMPUTE, name)
        t += length
        ends.append(t)
    total_comm = sum(length for _, _, length in BUCKETS)
    _bar(ax, rows["no overlap: network"], t, total_comm, COMM, "allreduce of all gradients")
    plain_end = t + total_comm
    # DDP: the same backward; each bucket's allreduce starts once its last gradient is ready
    t = 0.0
    for name, length in BACKWARD:
        _bar(ax, rows["DDP: compute"], t, length, COMPUTE, name)
        t += length
    link_free = 0.0
    for label, last_layer, length in BUCKETS:
        ready = ends[last_layer]
        start = max(ready, link_free)
        _bar(ax, rows["DDP: network"], start, length, COMM, label)
        ax.annotate("", xy=(ready, rows["DDP: network"] + 0.4), xytext=(ready, rows["DDP: compute"] - 0.4),
                    arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 1.5})
        link_free = start + length
    ddp_end = link_free
    for end, y in ((plain_end, 3.5), (ddp_end, 1.0)):
        ax.axvline(end, ymin=0, ymax=1, color="grey", linestyle=":", linewidth=1)
        ax.text(end + 0.08, y, f"step ends\nat {end:.1f}", va="center", fontsize=12)
    ax.text(ends[1] - 0.1, 0.75, "bucket 0 ready:\nits hook fires", fontsize=12, va="center",
            ha="right", style="italic")
    ax.set_yticks(list(rows.values()), list(rows.keys()), fontsize=12)
    ax.set_xlim(0, plain_end + 1.4)
    ax.set_ylim(-0.1, 4.6)
    ax.set_xlabel("time during backward (arbitrary units; gradients appear last layer first)",
                  fontsize=12)
    ax.tick_params(axis="x", labelsize=12)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig
