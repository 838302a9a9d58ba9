"""Autograding with nbgrader, one step per module, in the order a submission meets them:

1. ``nbgrader_course``: the course directory; release and the build's round trip through nbgrader.
2. ``intake`` and ``submission``: the folder (regular files with plain names only, anything else
   refused with the reason, nothing copied), then the notebook: read it, keep well-formed
   metadata, restore the test cells from the source.
3. ``sandbox``, ``cpu_share`` and ``sandboxed_process``: bubblewrap, rlimits, systemd scopes or
   CPU cgroups and the watchdog around the two processes of each submission,
   ``student_kernel`` (the student's IPython kernel) and ``checker_process`` (the trusted
   ``checker``).
4. ``plan``: per lesson, the one judge checked: the reference solution must pass every test cell
   in the trusted checker (plain data through ``wire``), or the lesson is refused.
5. ``execute``: run one submission: student cells in its kernel, every test cell in the checker.
6. ``feedback``: the student's HTML page, built only from what may be shown.
7. ``results``: per shard, outcomes; the merge writes the gradebook and one CSV.
8. ``grade``: the whole ``course grade`` command.
"""
import importlib

# where each public name lives; imported on first use, so that a command that only needs a
# constant (``course grade --workers 33`` refusing) does not wait for nbgrader and torch
_WHERE = {"grade_lesson": "grade", "merge_lesson": "grade",
          "CourseDir": "nbgrader_course", "GradingError": "nbgrader_course", "release": "nbgrader_course", "ReleaseKept": "nbgrader_course",
          "round_trip": "nbgrader_course", "score": "nbgrader_course",
          "Outcome": "results", "write_grades_csv": "results",
          "Limits": "sandbox", "SandboxUnavailable": "sandbox", "bubblewrap": "sandbox",
          "limits_in_force": "sandbox", "why_no_sandbox": "sandbox",
          "SubmissionProblem": "submission", "is_test_cell": "submission"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value
