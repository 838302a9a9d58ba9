"""The `course` command and the machinery only it uses; the lessons never import this package.

- ``cli``: the command line (doctor, build, lab, slides, release, grade, bench).
- ``paths``: where the repository's lessons, build folder and slide theme are.
- ``build``: executes, slides, releases and round-trip-grades lessons; the index page.
- ``slides``: offline reveal.js decks.
- ``grading``: the autograding pipeline (see its docstring), sandbox included.
- ``benchmarks``: one module per ``course bench`` group.
- ``loopback``: brings up 127.0.0.1 where the network namespace left it down.

``course_lib`` (what lessons import) never imports ``course_tools``, and ``course_tools`` is
not visible to student code inside the grading sandbox.
"""
