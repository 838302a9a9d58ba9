"""A paged KV cache: fixed-size blocks and a block table per request (lesson 16).

Kwon et al. 2023 ("Efficient Memory Management for Large Language Model Serving with
PagedAttention", SOSP, arXiv:2309.06180) cut the cache into blocks of ``block_size`` tokens; a
request's *block table* lists the physical blocks that hold its tokens in order, so its cache
need not be contiguous and grows one block at a time. This module is the bookkeeping, no
tensors (slots are counted in tokens):

- :class:`PagedKVCache`: allocate, extend, release; :meth:`PagedKVCache.fork` gives a child
  request the parent's tokens (a shared prompt, parallel samples): its *full* blocks are shared
  (a reference count per block; they are never written again), the partial last block is
  copied at once. (vLLM shares the partial block too and copies it only when one of them
  writes into it: copy-on-write, the lesson's exercise.)
- :func:`reserved_slots`: what a trace's live requests hold at each step, allocated three ways:
  contiguous up to the longest a request may grow (``max_len``), contiguous up to its own final
  length (an oracle that knows the output length), and paged.
"""
from __future__ import annotations

import math


class PagedKVCache:
    """Block tables over ``num_blocks`` blocks of ``block_size`` token slots.

    ``tables[seq]`` lists the physical blocks of request ``seq``; ``lengths[seq]`` its tokens;
    ``refcount[b]`` how many tables hold block ``b``; ``free_blocks`` the unused blocks (the
    lowest-numbered is taken first). ``MemoryError`` when a block is needed and none is free.
    """

    def __init__(self, num_blocks: int, block_size: int):
        self.block_size = block_size
        self.free_blocks = list(range(num_blocks))
        self.refcount = [0] * num_blocks
        self.tables: dict = {}
        self.lengths: dict = {}
        self.copies = 0

    def _take(self) -> int:
        if not self.free_blocks:
            raise MemoryError("no free block")
        self.free_blocks.sort()
        block = self.free_blocks.pop(0)
        self.refcount[block] = 1
        return block

    def add(self, seq, tokens: int = 0) -> None:
        """A new request ``seq`` holding ``tokens`` tokens (its prompt)."""
        if seq in self.tables:
            raise KeyError(f"request {seq!r} exists")
        self.tables[seq] = []
        self.lengths[seq] = 0
        self.extend(seq, tokens)

    def extend(self, seq, tokens: int = 1) -> None:
        """``tokens`` more tokens for ``seq``: a new block whenever the last one is full."""
        for _ in range(tokens):
            if self.lengths[seq] % self.block_size == 0:
                self.tables[seq].append(self._take())
            self.lengths[seq] += 1

    def release(self, seq) -> None:
        """``seq`` is done: each of its blocks that no other table holds is free again."""
        held = self.tables.pop(seq)
        self.lengths.pop(seq)
        for block in held:
            self.refcount[block] -= 1
        self.free_blocks.extend(block for block in held if self.refcount[block] == 0)

    def fork(self, parent, child) -> None:
        """``child`` starts with ``parent``'s tokens: full blocks shared, a partial last block copied."""
        table, length = self.tables[parent], self.lengths[parent]
        full = length // self.block_size
        for block in table[:full]:
            self.refcount[block] += 1
        self.tables[child], self.lengths[child] = list(table[:full]), length
        if full < len(table):
            self.tables[child].append(self._take())
            self.copies += 1

    def used_blocks(self) -> int:
        """Blocks held by at least one table."""
        return sum(1 for r in self.refcount if r > 0)

    def slot(self, seq, position: int) -> tuple[int, int]:
        """(physical block, offset in it) of token ``position`` of ``seq``."""
        return self.tables[seq][position // self.block_size], position % self.block_size


def reserved_slots(trace, max_len: int, block_size: int) -> dict:
    """Token slots in use and reserved at each step of ``trace`` (a list of ``(arrival_step,
    prompt_tokens, output_tokens)``; every request admitted on arrival, one token per step).

    Returns lists indexed by step: ``used`` (tokens held), ``contiguous_max`` (``max_len`` per
    live request), ``contiguous_exact`` (its final length, reserved on arrival) and ``paged``
    (``ceil(length / block_size) * block_size``)."""
    end = max(a + o for a, _, o in trace)
    out = {k: [0] * end for k in ("used", "contiguous_max", "contiguous_exact", "paged")}
    for arrival, prompt, output in trace:
        for step in range(arrival, arrival + output):
            length = prompt + step - arrival + 1
            out["used"][step] += length
            out["contiguous_max"][step] += max_len
            out["contiguous_exact"][step] += prompt + output
            out["paged"][step] += math.ceil(length / block_size) * block_size
    return out
