"""`course bench`: the course's performance figures, measured in one run.

Each module in this package is one group of benchmarks with a function
``run() -> dict`` returning named figures (seconds, ratios, FLOP/s, bytes/s).
Groups are discovered by name, so a lesson adds its benchmarks by adding a module.
Targets are stated as ratios measured in the same run, never as absolute times.
"""
from __future__ import annotations

import importlib
import pkgutil
import time
import traceback


def groups() -> list[str]:
    """Names of the benchmark groups, in alphabetical order."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def run(only: list[str] | None = None, progress=print) -> dict:
    """Run the chosen groups (all by default); a failing group records its error."""
    results = {}
    for name in only or groups():
        if name not in groups():
            raise SystemExit(f"course bench: no group '{name}'. Groups: {', '.join(groups())}")
        progress(f"bench {name} ...")
        start = time.perf_counter()
        try:
            figures = importlib.import_module(f"{__name__}.{name}").run()
        except Exception as exc:  # noqa: BLE001 - one broken group must not hide the others
            figures = {"error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc(limit=3)}
        figures["bench_seconds"] = round(time.perf_counter() - start, 2)
        results[name] = figures
    return results
