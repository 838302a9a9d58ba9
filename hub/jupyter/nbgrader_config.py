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
