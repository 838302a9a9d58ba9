"""What the SIMT engine counts and reports per launch (lessons 03 and 04): the access kinds, one
launch's per-thread counts, and a shared-memory race with the sentence a student reads.

The engine (:func:`course_lib.simt.run`, :func:`course_lib.simt.count_accesses`) fills these; the
Numba-simulator oracle that proves the engine (``tests/numba_oracle.py``) fills the same ones, so the
two are compared field by field (tests/lib/test_simt_agreement.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

ACCESS_KINDS = ("global_reads", "global_writes", "shared_reads", "shared_writes", "atomics",
                "shared_atomics")
"""What is counted, per thread: element reads and writes of global and of shared memory, and
atomic operations on global memory ('atomics') and on shared memory ('shared_atomics'). An atomic
(``cuda.atomic.add``, ``max``, ``cas``, ...) is a read-modify-write of one slot: it counts as one
atomic *and* as one read and one write of its memory, so reading through
``cuda.atomic.add(a, i, 0)`` costs what a plain read costs, and more."""


class SharedMemoryRace(AssertionError):
    """A kernel read or wrote a shared-memory slot that another thread of its block wrote
    between the same two barriers; the message names the threads, the array and the index."""


@dataclass(frozen=True)
class Race:
    """One racy slot: in ``block``, between barriers ``interval`` and ``interval + 1``,
    ``writer`` wrote ``array[index]`` and ``other`` read it (``kind`` 'read') or wrote it too
    (``kind`` 'write'); for ``kind`` 'atomic_read' / 'atomic_write', ``writer`` updated it
    atomically and ``other`` read / wrote it plainly."""

    block: tuple
    interval: int
    array: str
    index: tuple
    writer: tuple
    other: tuple
    kind: str

    def __str__(self) -> str:
        slot = f"{self.array}[{', '.join(str(i) for i in self.index)}]"
        done, verb = {"read": ("writes", "reads"), "write": ("writes", "also writes"),
                      "atomic_read": ("updates", "reads"), "atomic_write": ("updates", "writes")}[self.kind]
        how = " atomically" if self.kind.startswith("atomic") else ""
        where = ("before the first cuda.syncthreads()" if self.interval == 0 else
                 f"after cuda.syncthreads() number {self.interval}")
        return (f"shared-memory race in block {_short(self.block)}: thread {_short(self.writer)} "
                f"{done} {slot}{how} and thread {_short(self.other)} {verb} it with no "
                f"cuda.syncthreads() between them ({where}), so the result depends on which "
                f"thread runs first")

    @property
    def remedy(self) -> str:
        if self.kind == "write":
            return ("Let one thread write the slot, or add with cuda.atomic.add, or put a "
                    "cuda.syncthreads() between the writes.")
        return "Put a cuda.syncthreads() between the write and the read."


def _short(index: tuple) -> str:
    """(3, 0, 0) -> '(3)', (1, 2, 0) -> '(1, 2)': trailing unused dimensions dropped."""
    values = list(index)
    while len(values) > 1 and values[-1] == 0:
        values.pop()
    return "(" + ", ".join(str(v) for v in values) + ")"


@dataclass
class AccessCounts:
    """Memory accesses of one simulated launch, per thread.

    ``per_thread`` maps (blockIdx, threadIdx) (tuples of 3 ints) to a Counter over
    :data:`ACCESS_KINDS`. Every launched thread has an entry, even one that did nothing.
    ``races`` lists the shared-memory races found (empty for a correct kernel).
    """

    per_thread: dict = field(repr=False)
    races: list = field(default_factory=list)

    @property
    def threads(self) -> int:
        return len(self.per_thread)

    def _values(self, kind: str) -> list[int]:
        if kind not in ACCESS_KINDS:
            raise KeyError(f"unknown access kind {kind!r}; choose from {ACCESS_KINDS}")
        return [c[kind] for c in self.per_thread.values()]

    def max_per_thread(self, kind: str) -> int:
        """The most accesses of this kind any one thread made."""
        return max(self._values(kind), default=0)

    def mean_per_thread(self, kind: str) -> float:
        """Accesses of this kind per launched thread, on average."""
        values = self._values(kind)
        return sum(values) / len(values) if values else 0.0

    def total(self, kind: str) -> int:
        """Accesses of this kind by all threads together."""
        return sum(self._values(kind))

    def of_thread(self, block: tuple, thread: tuple) -> dict:
        """The counts of one thread; indices may be given with fewer than 3 entries."""
        key = (tuple(block) + (0,) * (3 - len(block)), tuple(thread) + (0,) * (3 - len(thread)))
        return {k: self.per_thread[key][k] for k in ACCESS_KINDS}

    def summary(self) -> dict:
        """{kind: {'max': ..., 'mean': ..., 'total': ...}} for every kind."""
        return {k: {"max": self.max_per_thread(k), "mean": self.mean_per_thread(k),
                    "total": self.total(k)} for k in ACCESS_KINDS}
