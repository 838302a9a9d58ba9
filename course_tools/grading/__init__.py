"""Autograding with nbgrader, one step per module, in the order a submission meets them
(the manner of nbgrader's own ``converters/autograde.py``):

1. ``nbgrader_course``: the course directory; release, autograde and score through nbgrader.
2. ``submission``: intake: read the student's notebook, refuse what is not one, restore
   the test cells from the source, copy the student's folder for the sandbox.
3. ``integrity``: how test cells are guarded against student code that patches checks.
4. ``sandbox``: bubblewrap and rlimits around one kernel per submission.
5. ``execute``: run the restored notebook cell by cell in that kernel, judge test cells.
6. ``feedback``: nbgrader's HTML feedback with hidden tests removed.
7. ``grade``: the whole ``course grade`` command: the steps above for every student, then
   nbgrader scores the executed notebooks and one CSV row per student is written.
"""
from .grade import Outcome, grade_lesson, write_grades_csv
from .nbgrader_course import CourseDir, GradingError, release, round_trip, score
from .sandbox import Limits, SandboxUnavailable, bubblewrap, why_no_sandbox
from .submission import SubmissionProblem, is_test_cell

__all__ = ["CourseDir", "GradingError", "Limits", "Outcome", "SandboxUnavailable", "SubmissionProblem",
           "bubblewrap", "grade_lesson", "is_test_cell", "release", "round_trip", "score",
           "why_no_sandbox", "write_grades_csv"]
