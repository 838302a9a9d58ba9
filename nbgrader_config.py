"""nbgrader configuration: the repository root is the course directory.

Each lesson folder under notebooks/ is one assignment; its graded notebook is
exercises.ipynb (lecture.ipynb is taught, not graded). `course release` and
`course grade` run nbgrader with this file; `course build` uses a scratch copy.
"""
c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.root = "."
c.CourseDirectory.source_directory = "notebooks"
c.CourseDirectory.notebook_id = "exercises"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"

# every cell gets a time limit; a runaway cell fails, the rest of the notebook still runs
# (nbgrader 0.9's Execute always goes on after an error: its `allow_errors` is fixed to True
# and not configurable, so setting it here only made nbgrader warn on every notebook)
c.Execute.timeout = 120
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
