"""Lesson 08: the path a training batch takes from disk to the GPU's memory, with the
bandwidth of each hop: NVMe SSD -> host DRAM (pageable) -> pinned buffer -> PCIe -> HBM.
Every figure comes from the course's cited tables (``data/latency_numbers.csv``,
``data/pcie_generations.csv``, ``data/device_specs.csv``) or from a copy measured on an
H100 machine (``data/gpu_recorded.csv``), so the picture shows where a batch slows down:
the disk and the pageable copy, not the GPU's own memory."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from .. import hardware, recorded

ALT = ("The data path of a training batch as five boxes from left to right: NVMe SSD, host DRAM "
       "(pageable), a pinned host buffer, the PCIe link and the GPU's HBM, each hop labelled with "
       "its bandwidth in GB/s, from a few GB/s off the disk to thousands inside the GPU; "
       "a dashed arc shows that a copy from pageable memory is staged through a pinned buffer "
       "and runs several times slower than a copy from pinned memory.")

GIB = 2**30 / 1e9   # GB per GiB


def _nvme_gbs() -> float:
    """Sequential NVMe read (GB/s), from the 1 MB read time of the latency table."""
    row = next(r for r in hardware.latency_numbers() if r["action"].startswith("Read 1 MB sequentially from NVMe"))
    return 1e6 / row["seconds"] / 1e9


def _pcie_x16_gbs(generation: str) -> float:
    """Payload bandwidth of a x16 link, one direction (GB/s): transfers x lanes x encoding."""
    row = next(r for r in hardware.pcie_generations() if r["generation"] == generation)
    return 16 * row["lane_bytes_per_s"] / 1e9


def _hbm_gbs() -> float:
    return next(r for r in hardware.device_specs() if "H100" in r["device"])["bandwidth_gbs"]


def _box(ax, x, text, colour):
    ax.add_patch(FancyBboxPatch((x - 0.8, 1.6), 1.6, 1.2, boxstyle="round,pad=0.04",
                                facecolor=colour, alpha=0.3, edgecolor="black", linewidth=1.3))
    ax.text(x, 2.2, text, ha="center", va="center", fontsize=13)


def _hop(ax, x0, x1, label):
    ax.add_patch(FancyArrowPatch((x0 + 0.85, 2.2), (x1 - 0.85, 2.2), arrowstyle="-|>",
                                 mutation_scale=18, linewidth=2, color="black"))
    ax.text((x0 + x1) / 2, 3.05, label, ha="center", va="bottom", fontsize=12)


def draw() -> plt.Figure:
    pinned = recorded.figure("07.d2h_pinned_gibs").value * GIB
    pageable = recorded.figure("07.d2h_pageable_gibs").value * GIB
    xs = [1.0, 3.4, 5.8, 8.2, 10.6]
    fig, ax = plt.subplots(figsize=(10, 3.8))
    ax.set_xlim(0, 11.6)
    ax.set_ylim(0.2, 4.4)
    ax.axis("off")
    for x, text, colour in zip(xs, ("NVMe SSD", "host DRAM\n(pageable)", "pinned\nbuffer",
                                    "PCIe 5.0\nx16 link", "GPU HBM3\n(H100)"),
                               ("tab:gray", "tab:blue", "tab:cyan", "tab:orange", "tab:green")):
        _box(ax, x, text, colour)
    _hop(ax, xs[0], xs[1], f"read\n~{_nvme_gbs():.1f} GB/s")
    _hop(ax, xs[1], xs[2], "CPU copy\n(staging)")
    _hop(ax, xs[2], xs[3], f"DMA, pinned\n{pinned:.0f} GB/s")
    _hop(ax, xs[3], xs[4], f"link peak\n{_pcie_x16_gbs('PCIe 5.0'):.0f} GB/s")
    ax.text(xs[4], 1.35, f"{_hbm_gbs():,.0f} GB/s\ninside the GPU", ha="center", va="top", fontsize=12)
    ax.add_patch(FancyArrowPatch((xs[1], 1.55), (xs[3], 1.55), connectionstyle="arc3,rad=0.35",
                                 arrowstyle="-|>", mutation_scale=16, linestyle="--", linewidth=1.5,
                                 color="tab:red"))
    ax.text((xs[1] + xs[3]) / 2, 0.45, f"from pageable memory: staged by the driver, {pageable:.0f} GB/s",
            ha="center", fontsize=12, color="tab:red")
    ax.text(0.2, 4.3, "measured copies: H100 machine, device to host, 16 MiB (lesson 07)",
            fontsize=12, va="top", style="italic")
    return fig
