"""Lesson 02: two memories and the link between them. A tensor lives in host DRAM or in GPU
memory; ``.to()`` across the PCIe link makes a new tensor in the other memory, ``.to()`` to
where the tensor already is returns the tensor itself; pageable host memory is first staged in
a pinned buffer, pinned memory is read by the GPU's copy engine directly (DMA)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from ..hardware import device_specs, pcie_generations

ALT = ("Host memory with a CPU on the left and GPU memory with its SMs on the right, joined by a "
       "PCIe x16 link: x.to('cuda') copies a host tensor over the link into a new GPU tensor, "
       "y.to('cpu') copies it back, x.to('cpu') of a host tensor returns x itself with no copy, and "
       "pageable memory passes through a pinned staging buffer while pinned memory is read directly.")


def _box(ax, x, y, w, h, text, colour, size=12, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.03", facecolor=colour,
                                edgecolor="black", linewidth=1.3))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight)


def _arrow(ax, a, b, colour="black", rad=0.0, style="-|>"):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=16, color=colour,
                                 linewidth=1.8, connectionstyle=f"arc3,rad={rad}"))


def draw() -> plt.Figure:
    pcie = {g["generation"]: 16 * g["lane_bytes_per_s"] / 1e9 for g in pcie_generations()}
    h100 = next(r for r in device_specs() if r["device"] == "NVIDIA H100 SXM5")
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.1, 4.7)
    ax.axis("off")
    for x, title, colour in ((0.1, "host: CPU + DRAM", "#dde8f5"), (6.3, "device: GPU + HBM", "#fde3c8")):
        ax.add_patch(FancyBboxPatch((x, 0.5), 3.6, 3.55, boxstyle="round,pad=0.05", facecolor=colour,
                                    edgecolor="black", linewidth=1.5))
        ax.text(x + 1.8, 4.3, title, ha="center", fontsize=13, weight="bold")
    ax.add_patch(FancyBboxPatch((4.15, 0.5), 1.7, 3.55, boxstyle="round,pad=0.03", facecolor="#eeeeee",
                                edgecolor="black", linewidth=1.2))
    ax.text(5.0, 4.3, "PCIe x16 link", ha="center", fontsize=13, weight="bold")
    ax.text(5.0, 0.95, f"4.0: {pcie['PCIe 4.0']:.0f} GB/s\n5.0: {pcie['PCIe 5.0']:.0f} GB/s\neach way",
            ha="center", va="center", fontsize=12)
    # row 1: pageable memory goes through a pinned staging buffer
    _box(ax, 0.35, 3.15, 1.45, 0.65, "x (pageable)", "white")
    _box(ax, 2.15, 3.15, 1.35, 0.65, "pinned\nbuffer", "#fff3c4")
    _box(ax, 6.55, 3.15, 3.1, 0.65, "x.to('cuda'): a new tensor", "white")
    _arrow(ax, (1.85, 3.47), (2.1, 3.47))
    _arrow(ax, (3.55, 3.47), (6.5, 3.47), "tab:blue")
    ax.text(5.0, 3.6, "staged copy", ha="center", fontsize=12, color="tab:blue")
    # row 2: pinned memory is read by the GPU's copy engine directly
    _box(ax, 0.35, 2.15, 1.45, 0.65, "p (pinned)", "#fff3c4")
    _box(ax, 6.55, 2.1, 3.1, 0.75, "p.to('cuda',\n     non_blocking=True)", "white")
    _arrow(ax, (1.85, 2.47), (6.5, 2.47), "tab:green")
    ax.text(5.0, 2.6, "DMA, async", ha="center", fontsize=12, color="tab:green")
    # row 3: back to the host, and the case with no copy at all
    _box(ax, 6.55, 1.15, 3.1, 0.65, "y (in GPU memory)", "white")
    _box(ax, 0.35, 1.15, 1.45, 0.65, "y.to('cpu')", "white")
    _arrow(ax, (6.5, 1.47), (1.85, 1.47), "tab:red")
    ax.text(2.85, 1.6, "copy back", ha="center", fontsize=12, color="tab:red")
    ax.text(1.9, 0.75, "x.to('cpu') is x itself: no copy", ha="center", fontsize=12, style="italic")
    ax.text(5.0, 0.05, f"PCIe 5.0 is {h100['bandwidth_gbs'] / pcie['PCIe 5.0']:.0f}x slower than an H100's HBM "
            f"({h100['bandwidth_gbs'] / 1e3:.2f} TB/s): "
            "copy once, keep tensors on the GPU", ha="center", fontsize=12, style="italic")
    return fig
