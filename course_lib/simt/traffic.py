"""The memory-traffic model of the course's SIMT engine (lessons 03 and 04): what each warp-level
access costs, where in the source it is, and why.

For every global or shared access of a warp (one load or store instruction for the active lanes) the
engine records the lanes, the byte addresses, the array and the source line. From those:

- **global memory** (CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory"; Programming
  Guide, "Device Memory Accesses"): a warp's access is served in 32-byte sectors of 128-byte lines.
  ``sectors`` is the number of distinct 32-byte sectors the active lanes' bytes fall in, ``lines``
  the number of distinct 128-byte lines, ``ideal_sectors`` the fewest sectors that could hold the
  distinct bytes requested (ceil(bytes / 32)); efficiency = ideal / actual. A coalesced float32 warp
  access is 4 sectors (128 bytes); a stride-32 one is 32 sectors for the same 128 useful bytes.
  Each site also keeps its **worst warp** (in one block): the sectors one warp moved over all the
  times it ran that line, against the fewest sectors that hold the distinct bytes it asked for
  there. That is the measure a grader judges by: a sum or an average over the site can be padded
  with cheap extra accesses (one lane rewriting one element in a loop adds 1 sector and 1 ideal
  sector per access), and per access a column can be walked one lane at a time (32 accesses of 1
  sector each, each as few as possible); per warp both move 32 or more sectors for 128 bytes.
- **shared memory** (Best Practices Guide, "Shared Memory and Memory Banks"; Programming Guide,
  compute capability 5.x and later, "Shared Memory"): 32 banks, successive 4-byte words in
  successive banks. The conflict degree of an access is the largest number of *distinct* words that
  fall in one bank (lanes reading the same word are served by one broadcast: no conflict); the access
  takes that many passes (wavefronts); a site keeps the worst degree of any one warp access
  (``max_degree``) and its worst warp's passes over all its accesses at that line, against the
  fewest passes its distinct words need (one per 32). Accesses wider than 4 bytes are modelled as
  served in phases, 8-byte accesses as two half-warps and 16-byte ones as four quarter-warps, each
  phase at least one pass (an assumption of this model: the guides document only 4-byte words per
  bank).
- **divergence**: a branch whose lanes split runs both paths one after the other; the model counts
  warp-level instructions (one per statement a warp executes) and the lanes active in each, and for
  each branch the fraction of lanes idle on its paths.
- **shuffles**: ``cuda.shfl_*_sync`` counted per warp (:mod:`~course_lib.simt.shuffles`; a warp adds 32 values in 5).

Where it differs from a GPU (see also :mod:`course_lib.simt.prediction`): no L1 or L2 cache is modelled
(a sector fetched twice counts twice here, where a cache may serve the second fetch), instructions
are statements, not SASS instructions, and lanes run in lock-step, while since Volta the lanes of a
warp may be scheduled independently (Programming Guide, "SIMT Architecture"; the race detector does
not rely on lock-step).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .races import ATOMIC, READ, WRITE

SECTOR = 32          # bytes in a sector of a global-memory access
LINE = 128           # bytes in a cache line
BANKS = 32           # shared-memory banks
BANK_WORD = 4        # bytes per bank word
VERBS = {READ: "reads", WRITE: "writes", ATOMIC: "updates atomically"}


@dataclass
class Site:
    """One array access in the source (a subscript at a line, read or written), summed over every
    warp that executed it. Byte counts in bytes; ``strides`` counts the distance (in elements)
    between neighbouring active lanes of each warp access (None: irregular). ``max_degree``: the
    worst bank conflict of one shared warp access. The worst warp (one warp of one block, over
    every time it ran this line; the one with the most cost beyond its ideal): ``worst_cost``
    sectors moved (global) or passes (shared), ``worst_ideal`` the fewest that hold the distinct
    bytes (words) it asked for, ``worst_accesses`` its warp accesses, ``worst_pattern`` the lane
    pattern of its first one."""

    line: int
    text: str
    array: str
    space: str
    how: int
    itemsize: int
    row_elements: int | None
    warp_accesses: int = 0
    lanes: int = 0
    bytes_requested: int = 0
    sectors: int = 0
    lines: int = 0
    ideal_sectors: int = 0
    wavefronts: int = 0
    ideal_wavefronts: int = 0
    max_degree: int = 0
    worst_cost: int = 0
    worst_ideal: int = 0
    worst_accesses: int = 0
    worst_pattern: object = None
    strides: Counter = field(default_factory=Counter)

    @property
    def verb(self) -> str:
        return VERBS[self.how]

    @property
    def sectors_per_access(self) -> float:
        return self.sectors / self.warp_accesses if self.warp_accesses else 0.0

    @property
    def ideal_per_access(self) -> float:
        return self.ideal_sectors / self.warp_accesses if self.warp_accesses else 0.0

    @property
    def efficiency(self) -> float:
        """Useful / moved: ideal sectors over sectors (global) or ideal passes over passes (shared)."""
        if self.space == "global":
            return self.ideal_sectors / self.sectors if self.sectors else 1.0
        return self.ideal_wavefronts / self.wavefronts if self.wavefronts else 1.0

    @property
    def stride(self):
        """The most common lane-to-lane distance in elements (None when the lanes do not step evenly)."""
        found = self.strides.most_common(1)[0][0] if self.strides else None
        return found if isinstance(found, int) else None

    def pattern(self, found=None) -> str:
        """How the threads of a warp walk through the array, in words: ``found`` (a pattern of
        :func:`lane_pattern`), by default the site's most common one."""
        if found is None:
            found = self.strides.most_common(1)[0][0] if self.strides else ("scattered", 1)
        if isinstance(found, tuple):
            shared = f", {found[-1]} threads per element" if found[-1] > 1 else ""
            if found[0] == "runs":
                return f"threads of a warp touch runs of {found[1]} neighbouring elements{shared}"
            return f"threads of a warp touch scattered elements{shared}"
        s = found
        if s == 0:
            return "all threads of a warp touch the same element (a broadcast)"
        if s == 1:
            return "neighbouring threads touch neighbouring elements"
        if self.row_elements and s == self.row_elements:
            return "threads of a warp step along a column"
        return f"neighbouring threads are {s} elements ({s * self.itemsize} bytes) apart"

    def worst_warp(self) -> str:
        """How the worst warp went through the array at this line, in words."""
        if self.worst_accesses <= 1:
            return self.pattern(self.worst_pattern)
        return f"one warp ran this line {self.worst_accesses} times"

    def fold_warp(self, accesses: int, cost: int, ideal: int, pattern) -> None:
        """Take one warp's total at this line (cost, its ideal) as the worst if it is."""
        if self.worst_pattern is None or cost - ideal > self.worst_cost - self.worst_ideal:
            self.worst_cost, self.worst_ideal, self.worst_accesses = cost, ideal, accesses
            self.worst_pattern = pattern

    def sentence(self) -> str:
        """The report line for this site."""
        where = f"line {self.line} {self.verb} {self.text}"
        if self.space == "global":
            per, ideal = self.sectors_per_access, self.ideal_per_access
            if self.sectors <= self.ideal_sectors:
                return f"{where}: {per:.3g} sectors per warp, as few as possible: {self.pattern()}"
            text = (f"{where}: {per:.3g} sectors per warp where {ideal:.3g} would do "
                    f"({100 * self.efficiency:.0f} % of the bytes moved are used): {self.pattern()}")
            if self.worst_cost - self.worst_ideal > per - ideal:   # an average hides a worse warp
                text += f"; the worst warp {self.worst_cost} where {self.worst_ideal} would do: {self.worst_warp()}"
            return text
        if self.max_degree <= 1:
            return f"{where}: no bank conflict: {self.pattern()}"
        return (f"{where}: {self.max_degree}-way bank conflict ({self.wavefronts / self.warp_accesses:.3g} "
                f"passes per warp where {self.ideal_wavefronts / self.warp_accesses:.3g} would do): {self.pattern()}")


@dataclass
class Branch:
    """One ``if`` in the source, over every warp that reached it: how often its lanes split, and
    the lanes that ran each path (``paths``: path executions, 1 or 2 per warp)."""

    line: int
    text: str
    warps: int = 0
    divergent: int = 0
    lanes_on_paths: int = 0
    paths: int = 0

    @property
    def idle_fraction(self) -> float:
        """Fraction of the lanes of the warps running its paths that sat idle (0.5 for an even/odd split)."""
        return 1.0 - self.lanes_on_paths / (32 * self.paths) if self.paths else 0.0

    def sentence(self) -> str:
        return (f"line {self.line} `{self.text}` splits {self.divergent} of {self.warps} warps; "
                f"{100 * self.idle_fraction:.0f} % of the lanes are idle on its paths")


class Traffic:
    """Everything the traffic model records during one launch."""

    def __init__(self):
        self.sites: dict = {}
        self.branches: dict = {}
        self.warp_instructions = 0
        self.active_lane_instructions = 0
        self.flops = {4: 0, 8: 0}           # floating-point operations by operand size (bytes)
        self.touched: list = []             # (global array, element offsets, how) of every warp access
        self.shapes: dict = {}              # access pattern -> its costs (warps repeat patterns)
        self.warps: dict = {}               # (id of a site, warp) -> its tally so far in the running block
        self.shuffles: Counter = Counter()  # (block index, warp number) -> warp shuffles it ran

    # ------------------------------------------------------------ recording
    def instruction(self, active: int) -> None:
        self.warp_instructions += 1
        self.active_lane_instructions += active

    def flop(self, lanes: int, size: int) -> None:
        self.flops[size] = self.flops.get(size, 0) + lanes

    def branch(self, source, node, lanes_then: int, lanes_else: int, lanes_not_taken: int) -> None:
        found = self.branches.get(node)
        if found is None:
            found = self.branches[node] = Branch(source.line(node), "if " + source.text(node.test))
        found.warps += 1
        found.divergent += bool(lanes_then and lanes_not_taken)
        for lanes in (lanes_then, lanes_else):
            if lanes:
                found.lanes_on_paths += lanes
                found.paths += 1

    def access(self, source, node, arr, how: int, lanes: np.ndarray, offs: np.ndarray, warp=None) -> None:
        """One warp-level access of ``arr`` at element offsets ``offs`` by ``lanes`` of the warp
        ``warp`` (any key that tells the warps of the running block apart; see :meth:`end_block`)."""
        key = (node, how)
        site = self.sites.get(key)
        if site is None:
            row = arr.strides[0] if arr.ndim == 2 else None
            site = self.sites[key] = Site(source.line(node), source.text(node), arr.name, arr.space, how,
                                          arr.itemsize, row)
        site.warp_accesses += 1
        site.lanes += lanes.size
        first = int(offs[0])
        start = arr.base + first * arr.itemsize
        key = (arr.space, arr.itemsize, start % LINE, lanes.tobytes(), (offs - first).tobytes())
        shape = self.shapes.get(key)
        if shape is None:
            shape = self.shapes[key] = access_shape(arr.space, arr.itemsize, lanes, arr.base + offs * arr.itemsize)
        pattern, distinct, sectors, lines, degree, passes, ideal = shape
        site.strides[pattern] += 1
        site.bytes_requested += distinct * arr.itemsize
        if arr.space == "global":
            site.sectors += sectors
            site.lines += lines
            site.ideal_sectors += ideal
            self.touched.append((arr, offs, how))
        else:
            site.wavefronts += passes
            site.ideal_wavefronts += ideal
            site.max_degree = max(site.max_degree, degree)
        cost = sectors if arr.space == "global" else passes
        tally = self.warps.get((id(site), warp))
        if tally is None:
            self.warps[(id(site), warp)] = [site, 1, cost, ideal, pattern, [arr.base + offs * arr.itemsize]]
        else:
            tally[1] += 1
            tally[2] += cost
            tally[5].append(arr.base + offs * arr.itemsize)

    def end_block(self) -> None:
        """Fold the running block's warps into their sites' worst warp (:meth:`Site.fold_warp`):
        a warp that ran a line once is judged on that access; one that ran it several times on
        everything it moved there against the fewest sectors (passes) its distinct bytes need."""
        for site, accesses, cost, ideal, pattern, addrs in self.warps.values():
            if accesses > 1:
                ideal = warp_ideal(site.space, site.itemsize, np.concatenate(addrs))
            site.fold_warp(accesses, cost, ideal, pattern)
        self.warps.clear()

    # -------------------------------------------------------------- summaries
    def global_sites(self) -> list[Site]:
        return sorted((s for s in self.sites.values() if s.space == "global"), key=lambda s: (s.line, s.how != READ))

    def shared_sites(self) -> list[Site]:
        return sorted((s for s in self.sites.values() if s.space == "shared"), key=lambda s: (s.line, s.how != READ))

    @property
    def sectors(self) -> int:
        """32-byte sectors moved by all global accesses (atomics count twice: read and write)."""
        return sum(s.sectors * (2 if s.how == ATOMIC else 1) for s in self.global_sites())

    @property
    def ideal_sectors(self) -> int:
        return sum(s.ideal_sectors * (2 if s.how == ATOMIC else 1) for s in self.global_sites())

    @property
    def distinct_sectors(self) -> int:
        """Sectors of global memory read at least once plus sectors written at least once: the DRAM
        traffic if a cache caught every reuse (each sector read in once, written back once)."""
        parts: dict = {}
        for arr, offs, how in self.touched:
            for direction in {WRITE: (WRITE,), READ: (READ,), ATOMIC: (READ, WRITE)}[how]:
                parts.setdefault((arr.ident, direction), (arr, []))[1].append(offs)
        return sum(np.unique((arr.base + np.concatenate(offsets) * arr.itemsize) // SECTOR).size
                   for arr, offsets in parts.values())

    @property
    def global_efficiency(self) -> float:
        return self.ideal_sectors / self.sectors if self.sectors else 1.0

    @property
    def idle_fraction(self) -> float:
        """Fraction of lane slots idle over all warp instructions (divergence and partial warps)."""
        if not self.warp_instructions:
            return 0.0
        return 1.0 - int(self.active_lane_instructions) / (32 * self.warp_instructions)

    @property
    def max_shuffles_per_warp(self) -> int:   # the most shuffles one warp of the launch ran
        return max(self.shuffles.values(), default=0)

    def divergent_branches(self) -> list[Branch]:
        return sorted((b for b in self.branches.values() if b.divergent), key=lambda b: b.line)

    def summary(self) -> dict:
        """The figures a grader can set a bar on: global sector efficiency (ideal / moved sectors),
        the worst shared-memory conflict degree, the number of divergent branches (an ``if`` whose lanes
        split in at least one warp), the fraction of lane slots idle, sectors moved, FLOPs."""
        shared = self.shared_sites()
        return {"global_sector_efficiency": self.global_efficiency,
                "sectors": self.sectors, "ideal_sectors": self.ideal_sectors,
                "max_bank_conflict": max((s.max_degree for s in shared), default=0),
                "shared_efficiency": (sum(s.ideal_wavefronts for s in shared) / sum(s.wavefronts for s in shared)
                                      if any(s.wavefronts for s in shared) else 1.0),
                "divergent_branches": len(self.divergent_branches()),
                "divergent_warp_branches": sum(b.divergent for b in self.branches.values()),
                "idle_lane_fraction": float(self.idle_fraction),
                "flops": int(sum(self.flops.values()))}

    def report(self) -> str:
        """Every global and shared access site and every divergent branch, one sentence each."""
        lines = [s.sentence() for s in self.global_sites() + self.shared_sites()]
        lines += [b.sentence() for b in self.divergent_branches()]
        lines.append(f"{100 * (1 - self.idle_fraction):.0f} % of lane slots did work over "
                     f"{self.warp_instructions} warp instructions; global sector efficiency "
                     f"{100 * self.global_efficiency:.0f} %")
        return "\n".join(lines)


def access_shape(space: str, itemsize: int, lanes: np.ndarray, addrs: np.ndarray) -> tuple:
    """(pattern, distinct elements, sectors, lines, conflict degree, passes, ideal sectors or passes)
    of one warp-level access at byte addresses ``addrs`` (see :func:`lane_pattern`)."""
    values = addrs.tolist()
    distinct = len(set(values))
    pattern = lane_pattern(lanes, addrs, itemsize, distinct)
    if space == "global":
        sectors = len({a // SECTOR for a in values})
        lines = len({a // LINE for a in values})
        return pattern, distinct, sectors, lines, 1, 0, -(-distinct * itemsize // SECTOR)
    degree, passes, ideal = bank_passes(lanes, addrs, itemsize)
    return pattern, distinct, 0, 0, degree, passes, ideal


def warp_ideal(space: str, itemsize: int, addrs: np.ndarray) -> int:
    """The fewest 32-byte sectors (global) or shared-memory passes (32 distinct 4-byte words a
    pass) that hold the distinct elements at byte addresses ``addrs``."""
    distinct = np.unique(addrs)
    if space == "global":
        return -(-distinct.size * itemsize // SECTOR)
    words = np.unique((distinct // BANK_WORD)[:, None] + np.arange(max(1, itemsize // BANK_WORD))[None, :])
    return max(1, -(-words.size // BANKS))


def lane_pattern(lanes: np.ndarray, addrs: np.ndarray, itemsize: int, distinct: int):
    """How the active lanes' addresses step: an int k when each lane is k elements after the one
    before it (0: a broadcast), ("runs", n, share) when they form runs of n neighbouring elements
    (each element read by ``share`` lanes), else ("scattered", share)."""
    if lanes.size < 2:
        return 0
    d_addr, d_lane = np.diff(addrs), np.diff(lanes)
    steps = d_addr // (d_lane * itemsize)
    if np.all(steps * d_lane * itemsize == d_addr) and np.all(steps == steps[0]):
        return int(steps[0])
    share = lanes.size // distinct if lanes.size % distinct == 0 else 1
    firsts = addrs[::share] if share > 1 and np.all(addrs.reshape(-1, share) == addrs[::share, None]) else addrs
    breaks = np.flatnonzero(np.diff(firsts) != itemsize)
    runs = np.diff(np.concatenate([[0], breaks + 1, [firsts.size]]))
    if runs.size > 1 and np.all(runs == runs[0]) and runs[0] > 1:
        return ("runs", int(runs[0]), share)
    return ("scattered", share)


def bank_passes(lanes: np.ndarray, addrs: np.ndarray, itemsize: int) -> tuple[int, int, int]:
    """(conflict degree, passes, ideal passes) of one warp-level shared access.

    Lanes are split into phases (1 for <= 4-byte elements, 2 half-warps for 8-byte, 4 quarter-warps
    for 16-byte); in each phase the degree is the largest number of distinct 4-byte words in one of
    the 32 banks (1 when every word is in its own bank or the lanes share words: broadcast)."""
    words_per = max(1, itemsize // BANK_WORD)
    phases = max(1, itemsize // BANK_WORD)
    per_phase = 32 // phases
    degree, passes, ideal = 1, 0, 0
    first_words = addrs // BANK_WORD
    for p in range(phases):
        sel = (lanes // per_phase) == p
        if not sel.any():
            continue
        words = np.unique((first_words[sel][:, None] + np.arange(words_per)[None, :]).ravel())
        worst = int(np.bincount(words % BANKS, minlength=BANKS).max())
        degree = max(degree, worst)
        passes += worst
        ideal += max(1, math.ceil(words.size / BANKS))
    return degree, passes, ideal
