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
c.Execute.timeout = 120
c.Execute.allow_errors = True
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
