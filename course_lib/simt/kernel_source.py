"""A Numba CUDA kernel as the course's SIMT engine reads it (lessons 03 and 04): its Python syntax
tree, the file lines of its statements, and the names it takes from outside (resolved once).

The engine runs the kernel's *source*, so the same ``@cuda.jit`` function still compiles with Numba
for a real GPU. Works for kernels defined in files, in notebook cells (IPython keeps their source
in ``linecache``) and for kernels the grading checker rebuilds from source (also in ``linecache``).
"""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import weakref

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def python_function(kernel):
    """The plain Python function behind a ``@cuda.jit`` kernel or device function (real or simulated)."""
    return getattr(kernel, "py_func", kernel)


def is_device_function(obj) -> bool:
    """True for a ``@cuda.jit(device=True)`` function (Numba's dispatcher or the simulator's)."""
    return bool(getattr(obj, "_device", False) or (getattr(obj, "targetoptions", None) or {}).get("device"))


class KernelSource:
    """The parsed kernel: ``tree`` (its ``FunctionDef``), ``params``, ``first_line`` (file line of
    the ``def``'s first decorator), ``filename``, ``lines`` (the source lines), ``names`` (its global
    and closure values) and ``barriers`` (the statement nodes that contain a ``cuda.syncthreads*``
    call, where a warp may have to wait for the others)."""

    def __init__(self, fn):
        self.fn = fn
        code = fn.__code__
        self.filename, self.first_line = code.co_filename, code.co_firstlineno
        try:
            text = inspect.getsource(fn)
        except (OSError, TypeError):
            lines = linecache.getlines(self.filename)
            if not lines:
                raise ValueError(f"the SIMT engine cannot read the source of {fn.__name__}") from None
            text = "".join(inspect.getblock(lines[self.first_line - 1:]))
        text = textwrap.dedent(text)
        module = ast.parse(text)
        self.tree = next(n for n in module.body if isinstance(n, ast.FunctionDef))
        self.lines = text.splitlines()
        self.joined = "\n".join(self.lines)
        self.texts: dict = {}
        self.params = [a.arg for a in self.tree.args.args]
        self.names = dict(fn.__globals__)
        if fn.__closure__:
            self.names.update({n: c.cell_contents for n, c in zip(code.co_freevars, fn.__closure__)})
        self.barriers = _barrier_statements(self.tree)
        self.name = fn.__name__
        self.shared_names = {a.value: a.targets[0].id for a in ast.walk(self.tree)
                             if isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
                             and isinstance(a.targets[0], ast.Name)}
        self.resolved: dict = {}   # name -> the engine's view of a global (filled by the launch)

    def line(self, node) -> int:
        """The file line of a node (the line numbers a student sees in the editor)."""
        return self.first_line + getattr(node, "lineno", 1) - 1

    def text(self, node) -> str:
        """The source text of a node (one line), as the kernel's author wrote it."""
        found = self.texts.get(node)
        if found is None:
            if getattr(node, "end_lineno", None) == getattr(node, "lineno", 0):   # one line: slice it (fast)
                raw = self.lines[node.lineno - 1].encode()
                segment = raw[node.col_offset:node.end_col_offset].decode()
            else:
                segment = ast.get_source_segment(self.joined, node)
            found = self.texts[node] = segment if segment is not None else ast.unparse(node)
        return found


def _is_barrier_call(node) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return (isinstance(func, ast.Attribute) and func.attr.startswith("syncthreads")
            and isinstance(func.value, ast.Name))


def _barrier_statements(tree) -> set:
    """Statement nodes (compound ones included) inside which a ``cuda.syncthreads*`` call is."""
    return {s for s in ast.walk(tree) if isinstance(s, ast.stmt) and s is not tree
            and any(_is_barrier_call(n) for n in ast.walk(s))}


def kernel_source(kernel) -> KernelSource:
    """The :class:`KernelSource` of a kernel or device function, parsed once per function."""
    fn = python_function(kernel)
    found = _CACHE.get(fn)
    if found is None:
        found = _CACHE[fn] = KernelSource(fn)
    return found
