"""A student's class shipped to worker processes (lessons 10 and 13 grade ``nn.Module`` and
optimizer containers, ``DDP`` and ``ShardedOptimizer``, run by gloo workers).

A function defined in a notebook travels to workers as its source text
(:func:`course_lib.parallel.launch.job_for`). A class does too: in the notebook,
:func:`course_lib.parallel.launch.source_text` finds it through its methods. In the grader's
checker the student's names are stand-ins that carry the source text of *functions* only; for a
class, :func:`shippable` asks the student's kernel for the text (a probe,
:func:`course_lib.checks.probe.in_student_kernel`), which is untrusted text exactly like a
function's: it runs only in the workers, and what they send back is judged in the caller.

In the grader's checker (one process per submission) a check run again on the same shipped text
with the same arguments, as a later test cell of the same exercise does to judge other
properties of the same run, reuses the first run's result (:func:`once_per_submission`): the
workers see only that text and those arguments, so the second run would repeat the first (a
fresh seed aside) at the CPU cost of another multi-process launch.
"""
from __future__ import annotations

import copy
import sys
import types

from .probe import in_student_kernel


class Shipped:
    """Stands for a student's class in the grader's checker: its name and source text."""

    def __init__(self, name: str, source: str | None):
        self.__name__ = name
        self.__course_source__ = source

    def __repr__(self) -> str:
        return f"<class {self.__name__}, shipped as its source text>"


def _source_in_student_kernel(name):
    """(runs in the student's kernel, as a probe) the source text of the notebook's ``name``:
    found through its methods' cell (``linecache``), else in the kernel's input history (``In``),
    the last cell that defines a class of that name."""
    import ast

    from course_lib.parallel.launch import source_text

    try:
        return source_text(globals()[name])
    except Exception:  # noqa: BLE001 - look in the history below
        pass
    for cell in reversed([c for c in globals().get("In", []) if isinstance(c, str)]):
        try:
            tree = ast.parse(cell)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return ast.get_source_segment(cell, node)
    return None


def shippable(cls):
    """``cls`` itself (a class defined in the notebook or in a module), or, for the grader's
    stand-in of a student's class (``__course_source__`` None: the checker holds only
    functions' texts), a :class:`Shipped` carrying the text the student's kernel reports."""
    if getattr(cls, "__course_source__", "") is not None:
        return cls
    name = getattr(cls, "__name__", None)
    source = in_student_kernel(_source_in_student_kernel)(name) if isinstance(name, str) else None
    return Shipped(str(name), source if isinstance(source, str) else None)


_RESULTS: dict = {}   # the checker's runs of shipped texts: {(text, arguments): result}


def once_per_submission(shipped, arguments: tuple, run):
    """``run()``'s result, computed once per shipped text and ``arguments`` (a copy each time)
    when ``shipped`` is the grader's stand-in (:class:`Shipped`: in the checker, which lives
    for one submission); in a notebook, where a student runs a check again to see it again,
    ``run()`` every time. A run that raises is not kept."""
    if not isinstance(shipped, Shipped):
        return run()
    key = (shipped.__name__, shipped.__course_source__, arguments)
    if key not in _RESULTS:
        _RESULTS[key] = run()
    return copy.deepcopy(_RESULTS[key])


def switch_off(*classes) -> None:
    """Make constructing any of ``classes`` (torch's own ``DistributedDataParallel``,
    ``ZeroRedundancyOptimizer``) raise in this worker: the exercise is to write the container."""
    def refused(self, *args, **kwargs):
        raise RuntimeError(f"torch's {type(self).__name__} is switched off in this check: write the container "
                           "yourself from torch.distributed's collectives")

    for cls in classes:
        cls.__init__ = refused


def switch_off_unimported(module: str, name: str) -> None:
    """:func:`switch_off` for class ``name`` of ``module`` without importing it (importing
    ``torch.distributed.optim`` costs seconds of a worker's CPU): a stand-in module whose class
    refuses to be constructed answers every later import of ``module``."""
    if module in sys.modules:
        switch_off(getattr(sys.modules[module], name))
        return
    stub = types.ModuleType(module)
    setattr(stub, name, type(name, (), {}))
    switch_off(getattr(stub, name))
    sys.modules[module] = stub
