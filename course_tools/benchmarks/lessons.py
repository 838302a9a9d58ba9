"""Seconds to execute each lesson's lecture and exercises top to bottom in a fresh kernel."""
from __future__ import annotations

import time


def run() -> dict:
    from ..build import execute_notebook
    from ..paths import lesson_dirs

    figures = {}
    for lesson in lesson_dirs():
        for nb in sorted(lesson.glob("*.ipynb")):
            start = time.perf_counter()
            try:
                execute_notebook(nb)
                figures[f"{lesson.name}/{nb.stem}_seconds"] = round(time.perf_counter() - start, 2)
            except Exception as exc:  # noqa: BLE001 - reported, the others still run
                figures[f"{lesson.name}/{nb.stem}_error"] = str(exc).splitlines()[-1][:300]
    return figures
