"""Autograding with nbgrader, one step per module, in the order a submission meets them:

1. ``nbgrader_course``: the course directory; release, scores and the gradebook through nbgrader,
   and the grader's own student version (``build/grading/<lesson>/student.ipynb``, generated
   from the source; never ``release/``, where students work) (``round_trip``: the build's
   reference and blank, graded as students are).
2. ``intake`` and ``submission``: the folder (regular files with plain names only, anything else
   refused with the reason, nothing copied), then the notebook: read it, keep well-formed
   metadata, refuse another lesson's, restore the test cells from the source and the solution
   stubs from the grader's student version.
3. ``sandbox``, ``cpu_share`` and ``sandboxed_process``: bubblewrap, rlimits, systemd scopes or
   CPU cgroups and the watchdog around the two processes of each submission,
   ``student_kernel`` (the student's IPython kernel) and ``checker_process`` (the trusted
   ``checker``).
4. ``plan``: per lesson, the one judge checked: the reference solution must pass every test cell
   in the trusted checker (plain data through ``wire``), or the lesson is refused.
5. ``execute``: run one submission: student cells in its kernel (which first runs
   ``kernel_helpers``), every test cell in the checker (``gpu_kernels/``: the students' CUDA and
   Triton kernels checked and rebuilt there); what either sandbox says is kept as valid UTF-8
   (``utf8``).
6. ``feedback``: the student's HTML page, built only from what may be shown.
7. ``results``: per shard, outcomes; the merge writes the gradebook and one CSV.
8. ``grade``: the whole ``course grade`` command: one ``lesson_run`` (what a lesson's grading run
   holds, built once: notebooks, facts, limits, options, a slot per worker) and each submission
   graded as the steps of ``one_submission`` (the reference solution's too).

Every step reads a notebook's cells in the words of ``cells`` (a test cell, a solution cell, a
grade cell's id and points), as nbgrader's ``utils`` names them.

Import what you use from its module (``from course_tools.grading.grade import grade_lesson``):
this package imports nothing itself, so a command that needs only ``sandbox`` (``course grade
--workers 33`` refusing, ``course doctor``) does not wait for nbgrader and torch to load.
"""
