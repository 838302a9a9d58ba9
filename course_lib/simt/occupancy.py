"""Occupancy of a kernel launch on a named GPU (lessons 03 and 04): how many warps of it one SM
keeps resident, against the most it could, and what limits it.

A block runs on one SM and stays there until all its threads finish; an SM holds as many blocks as
its limits allow: threads (warps) per SM, blocks per SM, shared memory per SM (each block also costs
the 1 KB the runtime reserves on compute capability 8.0 and later) and registers per SM. The limits
are in ``data/gpu_sm_limits.csv`` with their sources (the CUDA C++ Programming Guide's table
"Technical Specifications per Compute Capability" and NVIDIA's architecture whitepapers). Registers
per thread are known only after compiling for a GPU; without them the register limit is left out
(the report says so). Registers are allocated per warp in units of 256 (Programming Guide,
"Hardware Multithreading"; the CUDA Occupancy Calculator's allocation granularity).
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass

from ..hardware import DATA_DIR

REGISTER_UNIT = 256     # registers are allocated per warp in units of this many


def gpu_limits() -> list[dict]:
    """The rows of ``data/gpu_sm_limits.csv``: numbers as floats (int-valued where whole)."""
    with (DATA_DIR / "gpu_sm_limits.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        for key, value in row.items():
            if key not in ("device", "source"):
                row[key] = float(value)
    return rows


def limits_for(gpu: str) -> dict:
    """The limits row whose device name is ``gpu`` or contains its model number (H100, A100, 4090...)."""
    rows = gpu_limits()
    for row in rows:
        if row["device"] == gpu:
            return row
    words = set(gpu.replace("-", " ").split())
    for row in rows:
        model = next((w for w in row["device"].split() if any(c.isdigit() for c in w)), None)
        if model in words:
            return row
    raise KeyError(f"no SM limits for {gpu!r} in data/gpu_sm_limits.csv; known: "
                   + ", ".join(r["device"] for r in rows))


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM for one launch shape on one GPU. ``fraction`` = resident
    warps / the SM's maximum; ``limiter`` names what capped the blocks per SM."""

    gpu: str
    threads_per_block: int
    shared_bytes_per_block: int
    registers_per_thread: int | None
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limiter: str

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm if self.max_warps_per_sm else 0.0

    def sentence(self) -> str:
        regs = ("" if self.registers_per_thread else " (registers per thread unknown here: compile on a GPU "
                "to include them)")
        return (f"on an {self.gpu}: {self.blocks_per_sm} block(s) of {self.threads_per_block} threads per SM = "
                f"{self.warps_per_sm} of {self.max_warps_per_sm} warps ({100 * self.fraction:.0f} % occupancy), "
                f"limited by {self.limiter}{regs}")


def occupancy(gpu: str, threads_per_block: int, shared_bytes_per_block: int = 0,
              registers_per_thread: int | None = None) -> Occupancy:
    """Occupancy of blocks of ``threads_per_block`` threads using ``shared_bytes_per_block`` bytes of
    shared memory (and, if known, ``registers_per_thread``) on the GPU named ``gpu``."""
    row = limits_for(gpu)
    warps = math.ceil(threads_per_block / 32)
    limits = {"warps per SM": int(row["max_warps_per_sm"] // warps) if warps else 0,
              "blocks per SM": int(row["max_blocks_per_sm"])}
    if threads_per_block > 1024:
        limits["threads per block (at most 1024)"] = 0
    if shared_bytes_per_block:
        per_block = shared_bytes_per_block + row["reserved_shared_per_block_kb"] * 1024
        limits["shared memory per SM"] = int(row["shared_per_sm_kb"] * 1024 // per_block)
        if shared_bytes_per_block > row["shared_per_block_kb"] * 1024:
            limits["shared memory per block"] = 0
    if registers_per_thread:
        per_warp = math.ceil(registers_per_thread * 32 / REGISTER_UNIT) * REGISTER_UNIT
        limits["registers per SM"] = int(row["registers_per_sm"] // (per_warp * warps))
    limiter = min(limits, key=lambda k: limits[k])
    blocks = limits[limiter]
    return Occupancy(row["device"], threads_per_block, shared_bytes_per_block, registers_per_thread, blocks,
                     blocks * warps, int(row["max_warps_per_sm"]), limiter)
