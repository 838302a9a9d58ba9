"""Run the course on a GPU machine: what it has, the `gpu` tests, then every notebook.

usage: python scripts/gpu_check.py [--lessons 00,03] [--out build/gpu-check] [--budget 540]
                                   [--cell-timeout 300] [--no-tests] [--no-notebooks]

Run it from the repository root (scripts/gpu_check.sh sets up a machine without network first).
It writes OUT/gpu_check.json:

- ``machine``: what ``course doctor --json`` says (GPUs, array module, Numba CUDA mode and the
  reason when it is the simulator, versions);
- ``gpu_tests``: exit status, summary line and tail of ``pytest -m gpu`` over the test files that
  use the marker;
- ``traffic_model``: lesson 03's two transposes timed on the GPU beside the SIMT engine's predicted
  times for that GPU, and whether the model ranks them as the GPU does (``course bench --only simt``);
- ``notebooks``: per notebook (lecture and exercises of each lesson, exercises with their
  reference solutions): ``ok``, ``seconds``, the first error (cell index, exception), the slowest
  cells, and ``measured_on``: the device of every measurement, i.e. every label
  ``course_lib.timing.measured_on`` produced while the notebook ran (plot titles included),
  with the cells whose printed output carries it. ``unlabelled_lines`` lists printed lines that
  say "measured here on" without coming from that helper (a hand-typed label: a bug);
- ``devices``: every device named by a measurement, over all notebooks.

and OUT/NN_<name>.txt with the text of every cell's outputs. Cell indices are those of the
notebook file. Seconds are wall-clock seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat

from course_tools.build import execute_notebook

REPO = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PREFIX = "measured here on: "

RECORDER = """\
import json as _json
import course_lib.timing as _timing
_measured_on = _timing.measured_on
def _recording_measured_on(device="cpu", threads=None):
    label = _measured_on(device, threads)
    with open({log!r}, "a") as _fh:
        _fh.write(_json.dumps(label) + "\\n")
    return label
_timing.measured_on = _recording_measured_on
"""
"""Source of a cell run before the notebook's first cell: it records every label that
``course_lib.timing.measured_on`` (and so ``Timing.measured_on``) returns."""


def machine() -> dict:
    """``course doctor --json`` as a dict (its error text if it failed)."""
    done = subprocess.run([sys.executable, "-m", "course_tools.cli", "doctor", "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-2000:]}
    return json.loads(done.stdout)


def gpu_test_files() -> list[str]:
    """Test files that mark tests with ``pytest.mark.gpu``."""
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py")
                  if "mark.gpu" in p.read_text())


def gpu_tests(timeout: float) -> dict:
    """Run ``pytest -m gpu`` on the files that use the marker; exit status and summary."""
    files = gpu_test_files()
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "--continue-on-collection-errors",
           "-m", "gpu", *files]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"files": files, "returncode": None, "summary": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return {"files": files, "returncode": done.returncode, "summary": lines[-1] if lines else "",
            "tail": "\n".join(lines[-40:])}


def notebooks(lessons: list[str]) -> list[Path]:
    """lecture.ipynb and exercises.ipynb of the chosen lessons (all when none is chosen)."""
    folders = sorted(p for p in (REPO / "notebooks").iterdir() if p.is_dir() and p.name[:2].isdigit())
    if lessons:
        folders = [p for p in folders if p.name[:2] in lessons or p.name in lessons]
    return [p / name for p in folders for name in ("lecture.ipynb", "exercises.ipynb") if (p / name).exists()]


def cell_text(cell) -> str:
    """The text of a code cell's outputs: streams, plain-text results, errors."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", ""))
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}\n" + "\n".join(out.traceback))
    return ANSI.sub("", "\n".join(parts))


def labels_in(cells: list[tuple[int, str]], recorded: list[str]) -> tuple[list[dict], list[dict]]:
    """(measured_on, unlabelled_lines): which cells print which recorded label, and printed
    'measured here on' lines that match no recorded label."""
    devices = list(dict.fromkeys(label[len(PREFIX):] for label in recorded))
    found, stray = [], []
    for index, text in cells:
        for device in devices:
            if PREFIX + device in text:
                found.append({"cell": index, "device": device})
        for line in text.splitlines():
            if PREFIX in line and not any(PREFIX + d in line for d in devices):
                stray.append({"cell": index, "line": line.strip()[:300]})
    printed = {f["device"] for f in found}
    found += [{"cell": None, "device": d} for d in devices if d not in printed]  # plot titles
    return found, stray


def run_notebook(path: Path, out: Path, timeout: int) -> dict:
    """Execute one notebook in a fresh kernel in its folder; the record described above."""
    key = f"{path.parent.name}/{path.stem}"
    nb = nbformat.read(str(path), as_version=4)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        log = Path(tmp) / "labels.jsonl"
        log.touch()
        nb.cells.insert(0, nbformat.v4.new_code_cell(RECORDER.format(log=str(log))))
        start = time.perf_counter()
        record = {"notebook": key, "ok": True}
        try:  # as `course build` runs it: kernel on Unix sockets (no TCP port race), quiet log
            execute_notebook(path, timeout, nb=nb, record_timing=True)
        except Exception as exc:  # noqa: BLE001 - the record says what failed
            record["ok"] = False
            record["error"] = (ANSI.sub("", str(exc)).strip().splitlines() or [type(exc).__name__])[-1][:500]
        record["seconds"] = round(time.perf_counter() - start, 2)
        recorded = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    nb.cells.pop(0)
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    for i, c in code:
        if any(o.output_type == "error" for o in c.get("outputs", [])):
            record["error_cell"] = i
            break
    durations = []
    for i, c in code:
        ex = c.metadata.get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            seconds = (datetime.fromisoformat(ex["shell.execute_reply"].replace("Z", "+00:00"))
                       - datetime.fromisoformat(ex["iopub.execute_input"].replace("Z", "+00:00"))).total_seconds()
            durations.append({"cell": i, "seconds": round(seconds, 2)})
    record["slowest_cells"] = sorted(durations, key=lambda d: -d["seconds"])[:3]
    texts = [(i, cell_text(c)) for i, c in code]
    record["measured_on"], record["unlabelled_lines"] = labels_in(texts, recorded)
    name = f"{path.parent.name[:2]}_{path.stem}.txt"
    (out / name).write_text(f"##### {key} ok={record['ok']} {record['seconds']} s\n"
                            + "\n".join(f"--- cell {i}\n{t.rstrip()}" for i, t in texts))
    return record


def traffic_model() -> dict:
    """``course bench --only simt`` in this process: on a GPU, lesson 03's transposes timed at
    4096 x 4096 beside the SIMT engine's predicted times (issue 24's check); its error otherwise."""
    try:
        from course_tools.benchmarks import simt

        return simt.run()
    except Exception as exc:  # noqa: BLE001 - recorded in the summary, the notebooks still run
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lessons", default="", help="comma-separated lesson numbers (default: all)")
    p.add_argument("--out", default=str(REPO / "build" / "gpu-check"), help="output folder")
    p.add_argument("--budget", type=float, default=540.0,
                   help="seconds for the whole run; notebooks that would start later are not run")
    p.add_argument("--cell-timeout", type=int, default=300, help="seconds one cell may take")
    p.add_argument("--no-tests", action="store_true", help="skip pytest -m gpu")
    p.add_argument("--no-notebooks", action="store_true", help="skip the notebooks")
    p.add_argument("--no-traffic-model", action="store_true",
                   help="skip timing lesson 03's transposes against the traffic model's prediction")
    args = p.parse_args(argv)
    deadline = time.monotonic() + args.budget
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"machine": machine()}
    if not args.no_tests:
        summary["gpu_tests"] = gpu_tests(timeout=max(60.0, min(300.0, deadline - time.monotonic())))
        (out / "gpu_check.json").write_text(json.dumps(summary, indent=2))
    if not args.no_traffic_model:
        summary["traffic_model"] = traffic_model()
        (out / "gpu_check.json").write_text(json.dumps(summary, indent=2))
        print(json.dumps({"traffic_model": summary["traffic_model"]}), flush=True)
    records = []
    if not args.no_notebooks:
        for path in notebooks([x for x in args.lessons.split(",") if x]):
            left = deadline - time.monotonic()
            if left < 30:
                records.append({"notebook": f"{path.parent.name}/{path.stem}", "ok": None,
                                "error": "not run: the time budget was spent"})
                continue
            records.append(run_notebook(path, out, int(min(args.cell_timeout, left))))
            summary["notebooks"] = records  # written after every notebook: a killed run keeps its records
            (out / "gpu_check.json").write_text(json.dumps(summary, indent=2))
            print(json.dumps({k: records[-1][k] for k in ("notebook", "ok", "seconds") if k in records[-1]}),
                  flush=True)
    summary["notebooks"] = records
    summary["devices"] = sorted({m["device"] for r in records for m in r.get("measured_on", [])})
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2))
    failed = [r["notebook"] for r in records if r.get("ok") is False]
    tests_ok = args.no_tests or summary["gpu_tests"].get("returncode") in (0, 5)  # 5: none collected
    print(f"gpu_check: {len(records) - len(failed)}/{len(records)} notebooks ok; gpu tests: "
          f"{summary.get('gpu_tests', {}).get('summary', 'not run')}; summary in {out / 'gpu_check.json'}")
    return 0 if not failed and tests_ok else 1


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
