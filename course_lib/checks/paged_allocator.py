"""Lesson 16's paged block allocator, judged op by op from snapshots of its state.

A test runs a list of operations on the student's allocator (in the student's kernel, through a
probe) and records after each one a *snapshot*: ``{"result", "tables", "lengths", "refcount",
"free"}`` (``result`` is what the call returned, or ``"MemoryError"``). :func:`check_run` judges
every transition from the snapshots alone and names the first operation that breaks a rule;
:func:`random_ops` draws valid operation sequences (with pressure on memory).

The rules (the exercise's statement): ``allocate(s)`` makes an empty table; ``fork(p, c)`` gives
``c`` the very blocks of ``p`` (each block's count + 1, no block taken); ``append(s)`` makes room
for one token and returns ``(block, offset, copied_from)``: a new block (the lowest-numbered free
one) when the last block is full or the table empty, a copy of the last block into a new one when
that block is partial and shared (``copied_from`` = the old block, whose count drops by one),
otherwise the last block itself; ``free(s)`` drops the table and frees every block no table
holds any more. ``MemoryError`` only when a block is needed and none is free, the state then
unchanged. Always: each block is free or held (never both), its count is the number of table
entries naming it, and a table holds ``ceil(length / block_size)`` blocks.
"""
from __future__ import annotations

import random

from .core import CheckFailed

OPS = ("allocate", "append", "fork", "free")


def random_ops(seed: int, n: int, max_live: int = 6) -> list:
    """``n`` valid operations ``[name, *sequence ids]`` on sequences named by ints."""
    rng, live, next_id, ops = random.Random(seed), [], 0, []
    for _ in range(n):
        roll = rng.random()
        if not live or (roll < 0.12 and len(live) < max_live):
            ops.append(["allocate", next_id])
            live.append(next_id)
            next_id += 1
        elif roll < 0.25 and len(live) < max_live:
            ops.append(["fork", rng.choice(live), next_id])
            live.append(next_id)
            next_id += 1
        elif roll < 0.33:
            seq = rng.choice(live)
            ops.append(["free", seq])
            live.remove(seq)
        else:
            ops.append(["append", rng.choice(live)])
    return ops


def _fail(step, op, what):
    raise CheckFailed(f"after operation {step} {op}: {what}")


def _invariants(step, op, snap, num_blocks, block_size):
    tables, counts, free = snap["tables"], snap["refcount"], snap["free"]
    if len(counts) != num_blocks:
        _fail(step, op, f"refcount has {len(counts)} entries, expected one per block ({num_blocks})")
    held = [b for t in tables.values() for b in t]
    for b in range(num_blocks):
        n = held.count(b)
        if counts[b] != n:
            _fail(step, op, f"block {b} is in {n} table entries but its refcount is {counts[b]}")
        if (b in free) == (n > 0):
            _fail(step, op, f"block {b} is {'both free and in a table' if n else 'neither free nor in any table'}")
    if len(set(free)) != len(free):
        _fail(step, op, f"a block is free twice: {sorted(free)}")
    for seq, table in tables.items():
        if len(set(table)) != len(table):
            _fail(step, op, f"sequence {seq}'s table names a block twice: {table}")
        want = -(-snap["lengths"][seq] // block_size)
        if len(table) != want:
            _fail(step, op, f"sequence {seq} holds {snap['lengths'][seq]} tokens in {len(table)} blocks, not {want}")


def _append(step, op, before, after, block_size):
    seq = op[1]
    table, length = before["tables"][seq], before["lengths"][seq]
    last_full = length % block_size == 0
    shared = not last_full and before["refcount"][table[-1]] > 1
    if after["result"] == "MemoryError":
        if (last_full or shared) and not before["free"]:
            return
        _fail(step, op, "MemoryError although no block was needed or one was free")
    if (last_full or shared) and not before["free"]:
        _fail(step, op, "a block was needed and none was free: expected MemoryError")
    new = min(before["free"]) if (last_full or shared) else table[-1]
    expect_table = table + [new] if last_full else table[:-1] + [new]
    if after["tables"][seq] != expect_table:
        _fail(step, op, f"table {after['tables'][seq]}, expected {expect_table}"
              + (" (copy-on-write of a shared partial block)" if shared else ""))
    expected = [new, length % block_size, table[-1] if shared else None]
    if list(after["result"]) != expected:
        _fail(step, op, f"returned {after['result']}, expected (block, offset, copied_from) = {tuple(expected)}")
    if after["lengths"][seq] != length + 1:
        _fail(step, op, f"length {after['lengths'][seq]}, expected {length + 1}")


def _transition(step, op, before, after, block_size):
    name = op[0]
    if name == "append":
        return _append(step, op, before, after, block_size)
    if after["result"] == "MemoryError":
        _fail(step, op, f"{name} raised MemoryError; it never needs a free block")
    tables = {k: list(v) for k, v in before["tables"].items()}
    if name == "allocate":
        tables[op[1]] = []
    elif name == "fork":
        tables[op[2]] = list(tables[op[1]])
    elif name == "free":
        del tables[op[1]]
    if after["tables"] != tables:
        _fail(step, op, f"tables {after['tables']}, expected {tables}")
    if name == "fork" and sorted(after["free"]) != sorted(before["free"]):
        _fail(step, op, "fork took or freed a block: it only shares the parent's blocks")


def check_run(ops: list, snapshots: list, num_blocks: int, block_size: int) -> int:
    """Judge a run: ``snapshots[i]`` is the state after ``ops[i]``. Raises ``CheckFailed``
    naming the first broken rule; returns the number of operations judged."""
    before = {"tables": {}, "lengths": {}, "refcount": [0] * num_blocks, "free": list(range(num_blocks))}
    if len(snapshots) != len(ops):
        raise CheckFailed(f"{len(snapshots)} snapshots for {len(ops)} operations")
    for step, (op, after) in enumerate(zip(ops, snapshots)):
        after = {**after, "tables": {k: list(v) for k, v in after["tables"].items()}}
        if after["result"] == "MemoryError" and (after["tables"], after["refcount"], sorted(after["free"])) != (
                before["tables"], before["refcount"], sorted(before["free"])):
            _fail(step, op, "the state changed although the call raised MemoryError")
        try:
            _transition(step, op, before, after, block_size)
            _invariants(step, op, after, num_blocks, block_size)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            _fail(step, op, f"the state is not what the rules describe ({type(exc).__name__}: {exc})")
        before = after
    return len(ops)
