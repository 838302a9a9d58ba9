"""A Python environment for a copy of the course, for tests that run `course` on a copy rather
than on this checkout (its own build/, gradebook, submissions and feedback): the hub's
instructor (tests/browser/test_hub.py) and a Slurm cluster's jobs (tests/grading/test_grading_slurm.py).

``course_tools.paths`` takes the course folder from where ``course_tools`` lies, and this
checkout's .venv holds an editable install of it: run from that .venv, `course` in a copy would
import this checkout's code, and the grading sandbox (which shows its Python only the course's
own ``course_lib``) could not import ``course_lib`` at all. ``linked_venv`` gives the copy a
.venv of its own, hard links to this one's files, whose scripts and editable install point at
the copy."""
import os
import shutil
import subprocess
from pathlib import Path

from course_tools.paths import REPO


def link_or_copy(source: Path, target: Path) -> None:
    """A tree of hard links to ``source`` (quick), or a copy where it lies on another file system."""
    if subprocess.run(["cp", "-al", str(source), str(target)], capture_output=True, check=False).returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)


def rewrite(path: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in a text file through a new file, so that a hard link to
    the original (this checkout's .venv) is left as it was."""
    text = path.read_text()
    fresh = path.with_name(path.name + ".copy-test")
    fresh.write_text(text.replace(old, new))
    shutil.copymode(path, fresh)
    os.replace(fresh, path)


def linked_venv(dest: Path) -> Path:
    """``dest/.venv``: this checkout's .venv as hard links (``link_or_copy``), its scripts' ``#!``
    lines and its editable install of course_lib and course_tools pointing at ``dest``."""
    venv = dest / ".venv"
    link_or_copy(REPO / ".venv", venv)
    old_venv, old_repo = str(REPO / ".venv"), str(REPO)
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            head = script.open("rb").read(200)
            if head.startswith(b"#!") and old_venv.encode() in head:
                rewrite(script, old_venv, str(venv))
    for site in venv.glob("lib/python3*/site-packages"):
        for finder in [*site.glob("__editable__*finder.py"), *site.glob("__editable__*.pth")]:
            if old_repo in finder.read_text():
                rewrite(finder, f"'{old_repo}/", f"'{dest}/")
                rewrite(finder, f"{old_repo}\n", f"{dest}\n")
    return venv


def copy_gradebook_cache(source: Path, dest: Path) -> None:
    """The empty gradebook ``source`` made once for its nbgrader version (``nbgrader_course.
    empty_gradebook``'s cache, ``build/cache/empty-gradebook-nbgrader-<version>.db``) copied into the
    course copy ``dest``, as in a course that made one before: making it asks alembic in a
    subprocess (about 2.5-4 CPU-s). Nothing is copied when ``source`` has none."""
    for cached in (source / "build" / "cache").glob("empty-gradebook-nbgrader-*.db"):
        (dest / "build" / "cache").mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached, dest / "build" / "cache" / cached.name)
