"""Statements and control flow of the course's SIMT engine (lessons 03 and 04): one warp executes a
kernel's statements under an active mask.

A branch whose condition differs between lanes runs both paths, each with the lanes that took it
(divergence); a loop runs until its last lane leaves it; ``break``, ``continue`` and ``return`` take
lanes out of the mask (:class:`Frame`). An assignment under a mask changes a variable only for the
active lanes. ``cuda.syncthreads()`` hands control back to the block (:mod:`course_lib.simt.launch`),
which runs the other warps up to the same barrier in the order the chosen schedule gives.
"""
from __future__ import annotations

import ast

import numpy as np

from . import memory
from .expressions import _BINOPS
from .values import WARP, Local, Unsupported, _broadcast, range_marker, truth, vec


class Frame:
    """The state of one function call in one warp: variables and which lanes left (return, break,
    continue)."""

    __slots__ = ("env", "returned", "loops", "off", "full", "result")

    def __init__(self, exists):
        self.env: dict = {}
        self.returned = np.zeros(WARP, dtype=bool)
        self.loops: list = []          # [broken, continued] per enclosing loop
        self.off = None                # lanes out of play (returned | broken | continued), None if none
        self.full = exists             # lanes that still run this function
        self.result = None

    def update(self) -> None:
        off = self.returned.copy()
        if self.loops:
            off |= self.loops[-1][0] | self.loops[-1][1]
        self.off = off if off.any() else None
        self.full = self.full & ~self.returned


class Statements:
    """Mixin of :class:`~course_lib.simt.warp.Warp`: running a block of statements under a mask,
    branches and loops with divergence, barriers, and assignment to names and array elements."""

    def block_(self, stmts, mask):
        frame, record = self.frame, self.launch.traffic
        for stmt in stmts:
            cur = mask if frame.off is None else mask & ~frame.off
            active = np.count_nonzero(cur)
            if not active:
                return
            if record is not None and not isinstance(stmt, (ast.For, ast.While)):
                record.instruction(active)
            kind = type(stmt)
            if kind is ast.If:
                yield from self.if_(stmt, cur)
            elif kind is ast.For:
                yield from self.for_(stmt, cur)
            elif kind is ast.While:
                yield from self.while_(stmt, cur)
            elif stmt in self.source.barriers:
                yield from self.barrier_(stmt, cur)
            else:
                self.simple(stmt, cur)

    def simple(self, stmt, m) -> None:
        kind = type(stmt)
        if kind is ast.Assign:
            value = self.eval(stmt.value, m)
            for target in stmt.targets:
                self.assign(target, value, m)
        elif kind is ast.AugAssign:
            self.augassign(stmt, m)
        elif kind is ast.Expr:
            self.eval(stmt.value, m)
        elif kind is ast.Return:
            frame = self.frame
            if stmt.value is not None:
                value = self.eval(stmt.value, m)
                frame.result = value if frame.result is None else np.where(m, value, frame.result)
            frame.returned |= m
            frame.update()
        elif kind is ast.Break:
            self.frame.loops[-1][0] |= m
            self.frame.update()
        elif kind is ast.Continue:
            self.frame.loops[-1][1] |= m
            self.frame.update()
        elif kind is ast.Pass:
            pass
        elif kind is ast.Assert:
            ok = truth(self.eval(stmt.test, m))
            if not np.all(ok[m] if vec(ok) else ok):
                raise AssertionError(f"{self.where(stmt)}: assert {self.source.text(stmt.test)} failed")
        elif kind is ast.Raise:
            stub = "NotImplementedError" in self.source.text(stmt)
            raise Unsupported(f"{self.where(stmt)}: a kernel cannot raise (`{self.source.text(stmt)}`)"
                              + (": it is not answered yet, write it where it says # YOUR CODE HERE" if stub else ""))
        else:
            raise Unsupported(f"{self.where(stmt)}: the SIMT engine does not run `{type(stmt).__name__}`")

    # ------------------------------------------------------------ control flow
    def if_(self, stmt, m):
        cond = truth(self.eval(stmt.test, m))
        if not vec(cond):
            yield from self.block_(stmt.body if cond else stmt.orelse, m)
            return
        yes, no = m & cond, m & ~cond
        n_yes, n_no = np.count_nonzero(yes), np.count_nonzero(no)
        if self.launch.traffic is not None:
            self.launch.traffic.branch(self.source, stmt, n_yes, n_no if stmt.orelse else 0, n_no)
        if n_yes:
            yield from self.block_(stmt.body, yes)
        if n_no and stmt.orelse:
            yield from self.block_(stmt.orelse, no)

    def _loop(self, body, m, step):
        """Run ``body`` while ``step(active)`` gives lanes; ``step`` sets the loop variable."""
        frame = self.frame
        frame.loops.append([np.zeros(WARP, dtype=bool), np.zeros(WARP, dtype=bool)])
        frame.update()
        try:
            active = m
            while True:
                active = active & ~frame.loops[-1][0] & ~frame.returned
                frame.loops[-1][1][:] = False
                frame.update()
                if not active.any():
                    break
                active = step(active)
                if active is None or not active.any():
                    break
                if self.launch.traffic is not None:
                    self.launch.traffic.instruction(np.count_nonzero(active))
                yield from self.block_(body, active)
        finally:
            frame.loops.pop()
            frame.update()

    def while_(self, stmt, m):
        if stmt.orelse:
            raise Unsupported(f"{self.where(stmt)}: `while ... else` is not supported")

        def step(active):
            cond = truth(self.eval(stmt.test, active))
            return (active if cond else None) if not vec(cond) else active & cond

        yield from self._loop(stmt.body, m, step)

    def for_(self, stmt, m):
        it = stmt.iter
        if (stmt.orelse or not isinstance(it, ast.Call) or not isinstance(it.func, ast.Name)
                or self.lookup(it.func.id, it) is not range_marker or it.keywords):
            raise Unsupported(f"{self.where(stmt)}: a kernel's for loop must be `for v in range(...)`")
        args = [self.eval(a, m) for a in it.args]
        start, stop, stride = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
        if not any(vec(a) for a in (start, stop, stride)):
            values = iter(range(int(start), int(stop), int(stride)))

            def step(active):
                value = next(values, None)
                if value is None:
                    return None
                self.assign(stmt.target, value, active)
                return active
        else:
            current = _broadcast(start).astype(np.int64)
            stop, stride = _broadcast(stop), _broadcast(stride)
            first = [True]

            def step(active):
                if not first[0]:
                    current[active] += stride[active]
                first[0] = False
                inside = np.where(stride > 0, current < stop, current > stop)
                active = active & inside
                if active.any():
                    self.assign(stmt.target, current.copy(), active)
                return active

        yield from self._loop(stmt.body, m, step)

    def barrier_(self, stmt, m):
        """``cuda.syncthreads()`` (and ``_count``/``_and``/``_or``) as a statement or assignment."""
        call = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            raise Unsupported(f"{self.where(stmt)}: cuda.syncthreads* must be a statement of its own "
                              "(or `v = cuda.syncthreads_count(...)`)")
        op = call.func.attr
        if op not in ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or"):
            raise Unsupported(f"{self.where(stmt)}: unknown barrier cuda.{op}")
        pred = None
        if op != "syncthreads":
            p = truth(self.eval(call.args[0], m))
            pred = (_broadcast(p) & m)
        self.intervals[m] += 1
        result = yield (op, pred, m, stmt)
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self.assign(target, result, m)

    # ------------------------------------------------------------- assignment
    def full(self, m) -> bool:
        """True when ``m`` holds every lane still running this function (a plain replace then)."""
        return m is self.frame.full or not (self.frame.full & ~m).any()

    def set_name(self, name: str, value, m) -> None:
        env = self.frame.env
        old = env.get(name)
        if old is None or self.full(m) or (not vec(value) and not vec(old) and _same(value, old)):
            env[name] = value
        elif isinstance(value, (memory.Array, Local, tuple)) or isinstance(old, (memory.Array, Local, tuple)):
            if value is not old:
                raise Unsupported(f"{self.source.name}: `{name}` holds different arrays or tuples in different "
                                  "lanes of a warp")
        else:
            env[name] = np.where(m, value, old)

    def assign(self, target, value, m) -> None:
        kind = type(target)
        if kind is ast.Name:
            self.set_name(target.id, value, m)
        elif kind is ast.Tuple:
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise Unsupported(f"{self.where(target)}: cannot unpack this value into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v, m)
        elif kind is ast.Subscript:
            arr = self.eval(target.value, m)
            self.store(arr, self.index(target.slice, m), value, m, target)
        else:
            raise Unsupported(f"{self.where(target)}: cannot assign to `{self.source.text(target)}`")

    def augassign(self, stmt, m) -> None:
        op = _BINOPS[type(stmt.op)]
        target = stmt.target
        if isinstance(target, ast.Name):
            old = self.lookup(target.id, target)
            value = self.binop(op, old, self.eval(stmt.value, m), m, stmt.op)
            self.set_name(target.id, value, m)
        elif isinstance(target, ast.Subscript):
            arr = self.eval(target.value, m)
            index = self.index(target.slice, m)
            old = self.load(arr, index, m, target)
            value = self.binop(op, old, self.eval(stmt.value, m), m, stmt.op)
            self.store(arr, index, value, m, target)
        else:
            raise Unsupported(f"{self.where(stmt)}: cannot update `{self.source.text(target)}`")


def _same(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return False
