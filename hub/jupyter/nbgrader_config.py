"""nbgrader settings every user of the course's JupyterHub shares: the course id and the
exchange, the folder through which assignments go out and submissions and feedback come back.

The hub puts this folder on each single-user server's JUPYTER_CONFIG_PATH (see
hub/jupyterhub_config.py), so nbgrader's command line, the students' assignment list and the
instructor's formgrader all read it. The instructor's course directory (the repository,
nbgrader_config.py at its root) adds the rest: source folder, gradebook, time limits.
Values come from the environment the hub gives each server, with the defaults nbgrader's
documentation uses for one course on one machine.
"""
import os

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "gpu-course")
# world-writable with the sticky bit (mode 1777); hub/run_hub.py creates it
c.Exchange.root = os.environ.get("COURSE_EXCHANGE_ROOT", "/srv/nbgrader/exchange")
# who a student is, as the hub logged them in (COURSE_STUDENT_ID, set for students by
# hub/jupyterhub_config.py): nbgrader would otherwise take the server's account name, which is
# the same for every student of a one-account try-out (two students' submissions collided as
# "root"); submissions, feedback and the assignment list then use the hub's name
if os.environ.get("COURSE_STUDENT_ID"):
    c.CourseDirectory.student_id = os.environ["COURSE_STUDENT_ID"]
