"""Lesson 01: the memory hierarchy of a GPU server, from an H100's registers to the network,
each level with its size and the bandwidth of the path to it, read from the cited rows in
``data/`` (gpu_sm_limits.csv, device_specs.csv, pcie_generations.csv, interconnects.csv,
latency_numbers.csv)."""
from __future__ import annotations

import csv

import matplotlib.pyplot as plt
from matplotlib.patches import Polygon

from ..hardware import DATA_DIR, device_specs, interconnects, latency_numbers, pcie_generations

ALT = ("The memory hierarchy of a server with H100 GPUs drawn as a widening stack: per-SM registers "
       "and shared memory at the top, then the 50 MB L2 cache, 80 GB of HBM3 at 3.35 TB/s, host "
       "memory over a PCIe 5.0 x16 link of about 63 GB/s, and other GPUs over NVLink or other "
       "servers over 400 Gb/s InfiniBand at the bottom: each level down is bigger and slower.")

GPU = "NVIDIA H100 SXM5"


def levels() -> list[tuple[str, str, str]]:
    """(level, size, path to it) for each level, top (fastest) to bottom, from the data files."""
    with open(DATA_DIR / "gpu_sm_limits.csv", newline="") as fh:
        sm = next(r for r in csv.DictReader(fh) if r["device"] == GPU)
    spec = next(r for r in device_specs() if r["device"] == GPU)
    pcie5 = next(g for g in pcie_generations() if g["generation"] == "PCIe 5.0")
    links = {r["link"]: r for r in interconnects()}
    latency = {r["action"]: r["seconds"] for r in latency_numbers()}
    sms = int(sm["sms"])
    registers_kb = int(sm["registers_per_sm"]) * 4 // 1024
    return [
        ("registers", f"{registers_kb} KB per SM, {sms} SMs", "operands of every instruction"),
        ("shared memory / L1", f"up to {sm['shared_per_sm_kb']} KB per SM",
         f"~{latency['GPU shared memory access'] * 1e9:.0f} ns, inside the SM"),
        ("L2 cache", f"{sm['l2_mb']} MB, all SMs", "between the SMs and HBM"),
        ("HBM3 (GPU memory)", f"{spec['memory_gb']:.0f} GB",
         f"{spec['bandwidth_gbs'] / 1e3:.2f} TB/s, ~{latency['GPU global memory access'] * 1e9:.0f} ns"),
        ("host DRAM", "the server's RAM", f"PCIe 5.0 x16: {16 * pcie5['lane_bytes_per_s'] / 1e9:.0f} GB/s each way"),
        ("other GPUs / servers", "the cluster",
         f"NVLink 4: {links['NVLink 4 (H100 / H200)']['bytes_per_s'] / 1e9:.0f} GB/s each way;\n"
         f"InfiniBand NDR: {links['InfiniBand NDR']['bytes_per_s'] / 1e9:.0f} GB/s each way"),
    ]


def draw() -> plt.Figure:
    rows = levels()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, len(rows) * 0.72 + 0.45)
    ax.axis("off")
    colours = ("#c6dbef", "#9ecae1", "#6baed6", "#fdae6b", "#fdd0a2", "#e5e5e5")
    top = len(rows) * 0.72
    ax.text(2.6, top + 0.25, f"one {GPU.replace('NVIDIA ', '')} and the server around it",
            ha="center", fontsize=13, weight="bold")
    ax.text(7.0, top + 0.25, "the path to it", ha="center", fontsize=13, weight="bold")
    for i, (level, size, path) in enumerate(rows):
        y0, y1 = top - (i + 1) * 0.72 + 0.05, top - i * 0.72 - 0.05
        half0, half1 = 1.45 + 0.2 * (i + 1), 1.45 + 0.2 * i   # the stack widens downwards
        ax.add_patch(Polygon([(2.6 - half0, y0), (2.6 + half0, y0), (2.6 + half1, y1),
                              (2.6 - half1, y1)], closed=True, facecolor=colours[i],
                             edgecolor="black", linewidth=1.0))
        ax.text(2.6, (y0 + y1) / 2 + 0.12, level, ha="center", va="center", fontsize=12, weight="bold")
        ax.text(2.6, (y0 + y1) / 2 - 0.15, size, ha="center", va="center", fontsize=12)
        ax.text(5.35, (y0 + y1) / 2, path, ha="left", va="center", fontsize=12)
    ax.annotate("", xy=(9.85, 0.1), xytext=(9.85, top - 0.1),
                arrowprops=dict(arrowstyle="-|>", color="#444444", lw=1.5))
    ax.text(9.7, top / 2, "bigger, slower", rotation=90, ha="right", va="center", fontsize=12,
            color="#444444")
    return fig
