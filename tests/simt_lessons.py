"""Lessons 03 and 04's Numba CUDA kernels for the SIMT engine's tests: the reference solutions and
lecture kernels read from the notebooks, the stored wrong answers applied to them, and the launches
their test cells make (shapes and sizes as in the notebooks; data random)."""
from __future__ import annotations

import ast
import importlib.util
import json
import math
from pathlib import Path

import numpy as np

from course_lib import hardware, kernels

cuda = hardware.numba_cuda()
from numba import float32, float64, int32  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {"03": ROOT / "notebooks/03_simt_programming_model", "04": ROOT / "notebooks/04_cupy_and_numba"}
WRONG = {"03": ROOT / "tests/grading/wrong_answers/03_simt_programming_model.py",
         "04": ROOT / "tests/grading/wrong_answers/04_cupy_and_numba.py"}
# exercise kernels Numba's simulator cannot run, so the oracle cannot judge the engine on them (the
# engine's own tests do: tests/lib/test_simt_shuffles.py)
NO_ORACLE = {("03", "ex8_warp_rows"): "Numba's CUDA simulator has no warp shuffles (cuda.shfl_*_sync)"}


def _cells(path: Path) -> list[tuple[str | None, str]]:
    nb = json.loads(path.read_text())
    return [(c["metadata"].get("nbgrader", {}).get("grade_id"), "".join(c["source"]))
            for c in nb["cells"] if c["cell_type"] == "code"]


def _solution(source: str) -> str:
    """The cell as the wrong answers edit it: BEGIN/END SOLUTION lines removed."""
    return "".join(line for line in source.splitlines(True) if "### BEGIN SOLUTION" not in line
                   and "### END SOLUTION" not in line)


def _constants(cells) -> dict:
    """Top-level constant assignments of the notebook's setup cells (P = 32, WINDOW = P + 2, ...)."""
    space = {"math": math}
    for _, source in cells:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple)) for t in stmt.targets) \
                    and all(isinstance(n, (ast.Assign, ast.Name, ast.Constant, ast.BinOp, ast.Tuple, ast.Load,
                                           ast.operator, ast.Store)) for n in ast.walk(stmt)):
                try:
                    exec(compile(ast.Module([stmt], []), "<constants>", "exec"), space)  # noqa: S102
                except Exception:  # noqa: BLE001 - a name defined elsewhere: not a constant
                    pass
    space.pop("__builtins__", None)
    return space


def namespace(lesson: str) -> dict:
    cells = _cells(NOTEBOOKS[lesson] / "exercises.ipynb")
    return {"cuda": cuda, "float32": float32, "float64": float64, "int32": int32, "math": math, "np": np,
            "kernels": kernels, **_constants(cells)}


def solution_cells(lesson: str) -> dict:
    """{grade_id: solution source} of the exercise cells that define a @cuda.jit kernel."""
    return {gid: _solution(src) for gid, src in _cells(NOTEBOOKS[lesson] / "exercises.ipynb")
            if gid and "@cuda.jit" in src and "### BEGIN SOLUTION" in src}


def build(lesson: str, source: str, name: str, filename: str):
    """Compile a cell's source and return the kernel called ``name``; the reference kernels of
    every exercise are defined first, as in a notebook where a later cell may call an earlier
    exercise's kernel."""
    space = namespace(lesson)
    import linecache
    for gid, reference in solution_cells(lesson).items():
        where = f"<lesson {lesson} {gid} reference>"   # the engine reads a kernel's source
        linecache.cache[where] = (len(reference), None, reference.splitlines(True), where)
        exec(compile(reference, where, "exec"), space)  # noqa: S102
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), space)  # noqa: S102 - the course's own notebook cells
    return space[name]


def wrong_answers(lesson: str) -> dict:
    spec = importlib.util.spec_from_file_location(f"wrong_{lesson}", WRONG[lesson])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WRONG_ANSWERS


def apply(source: str, edits) -> str | None:
    """The source with a wrong answer's edits made, or None when an edit no longer applies."""
    for old, new in (edits if isinstance(edits, list) else [edits]):
        if source.count(old) != 1:
            return None
        source = source.replace(old, new)
    return source


def lecture_kernels() -> dict:
    """Lesson 03's lecture kernels by name (their cells compiled)."""
    found = {}
    for _, src in _cells(NOTEBOOKS["03"] / "lecture.ipynb"):
        if "@cuda.jit" in src:
            space = {"cuda": cuda, "float32": float32, "float64": float64, "np": np, "kernels": kernels,
                     "TILE": kernels.TILE, "THREADS": 64, "math": math, "rng": np.random.default_rng(0)}
            for line in src.splitlines():
                if line.startswith("THREADS =") or line.startswith("TILE ="):
                    exec(line, space)  # noqa: S102
            filename = f"<lecture 03 cell {len(found)}>"
            import linecache
            linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
            exec(compile(src, filename, "exec"), space)  # noqa: S102
            found.update({k: v for k, v in space.items() if hasattr(v, "py_func")})
    return found


# ------------------------------------------------------------------- launches
def _grid2(rows, cols, block):
    return kernels.grid_2d(rows, cols, block)


def launches(lesson: str, gid: str, ns: dict, rng) -> list[tuple]:
    """(kernel name, grid, block, args) for the launches the exercise's test cells make."""
    r = rng.random
    out = []
    if gid == "ex1_axpy":
        for n, grid in ((200, 4), (100, 2), (37, 1)):
            out.append(("axpy_kernel", grid, 64, (2.5, r(n), r(n), np.zeros(n))))
    elif gid == "ex2_pool":
        for n in (100, 70, 32):
            out.append(("pool3_kernel", kernels.blocks_for(n, ns["P"]), ns["P"], (r(n), np.zeros(n))))
    elif gid == "ex3_tiled":
        T = ns["T"]
        for m, k, n in ((8, 8, 8), (8, 12, 8), (6, 7, 5), (9, 3, 10)):
            grid, block = _grid2(m, n, (T, T))
            out.append(("tiled_matmul_kernel", grid, block, (r((m, k)).astype(np.float32), r((k, n)).astype(np.float32),
                                                             np.zeros((m, n), np.float32))))
    elif gid == "ex4_dot":
        for n in (96, 70):
            out.append(("dot_kernel", 3, ns["R"], (r(n), r(n), np.zeros(3))))
    elif gid == "ex5_rowsum":
        for rows, cols in ((5, 70), (3, 100), (4, 20)):
            out.append(("row_sums_kernel", rows, ns["R"], (r((rows, cols)), np.zeros(rows))))
    elif gid == "ex6_scan":
        for n in (64, 100):
            out.append(("block_scan_kernel", kernels.blocks_for(n, ns["S"]), ns["S"], (r(n), np.zeros(n))))
    elif gid in ("ex7_naive", "ex7_tiled"):
        name = {"ex7_naive": "transpose_naive_kernel", "ex7_tiled": "transpose_tiled_kernel"}[gid]
        # blocks of TILE x TILE threads: a few only (Numba runs one OS thread each)
        for rows, cols in ((20, 40), (7, 33)):
            grid, block = _grid2(rows, cols, (ns["TILE"], ns["TILE"]))
            out.append((name, grid, block, (r((rows, cols)).astype(np.float32), np.zeros((cols, rows), np.float32))))
    elif gid == "ex5_bias_relu":
        for rows, cols in ((10, 13), (9, 20), (1, 7)):
            grid, block = _grid2(rows, cols, (8, 8))
            out.append(("bias_relu_kernel", grid, block, (rng.normal(size=(rows, cols)), rng.normal(size=cols),
                                                          np.zeros((rows, cols)))))
    elif gid == "ex6_conv1d":
        K, C = ns["K"], ns["C"]
        for n in (100, 70, 36):
            n_out = n - K + 1
            out.append(("conv1d_kernel", kernels.blocks_for(n_out, C), C,
                        (rng.normal(size=n), rng.normal(size=K), np.zeros(n_out))))
    elif gid == "ex7_nearest":
        C, D = ns["C"], ns["D"]
        for m, n in ((40, 70), (20, 45), (33, 5)):
            out.append(("nearest_kernel", kernels.blocks_for(m, C), C, (r((m, D)), r((n, D)), np.zeros(m))))
    elif gid == "ex8_histogram":
        C, B = ns["C"], ns["B"]
        for n, lo, hi in ((150, -2.0, 2.0), (200, -1.5, 1.5), (45, -1.0, 2.0)):
            out.append(("shared_histogram_kernel", kernels.blocks_for(n, C), C,
                        (rng.normal(size=n), lo, hi, np.zeros(B, dtype=np.int32))))
    return out
