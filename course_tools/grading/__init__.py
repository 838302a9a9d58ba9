"""Autograding with nbgrader, one step per module, in the order a submission meets them:

1. ``nbgrader_course``: the course directory; release and the build's round trip through nbgrader.
2. ``submission``: intake: regular files with plain names only (anything else refused with the
   reason, nothing copied), read the notebook, restore the test cells from the source.
3. ``sandbox`` and ``kernel``: bubblewrap, rlimits, systemd scopes or the watchdog around the two
   processes of each submission: the student's kernel and the trusted ``checker``.
4. ``plan``: per lesson, which test cells the trusted checker judges (plain data through ``wire``)
   and which run in the student's kernel under the guards of ``integrity``.
5. ``execute``: run one submission: student cells in its kernel, test cells where the plan says.
6. ``feedback``: the student's HTML page, built only from what may be shown.
7. ``results``: per shard, outcomes; the merge writes the gradebook and one CSV.
8. ``grade``: the whole ``course grade`` command.
"""
from .grade import grade_lesson, merge_lesson
from .nbgrader_course import CourseDir, GradingError, release, round_trip, score
from .results import Outcome, write_grades_csv
from .sandbox import Limits, SandboxUnavailable, bubblewrap, limits_in_force, why_no_sandbox
from .submission import SubmissionProblem, is_test_cell

__all__ = ["CourseDir", "GradingError", "Limits", "Outcome", "SandboxUnavailable", "SubmissionProblem",
           "bubblewrap", "grade_lesson", "is_test_cell", "limits_in_force", "merge_lesson", "release",
           "round_trip", "score", "why_no_sandbox", "write_grades_csv"]
