import json
import subprocess
import sys

import pytest

from course_tools import benchmarks, cli


def run_course(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "course_tools.cli", *args], check=False,
                          capture_output=True, text=True, timeout=timeout)


def test_doctor_json_without_gpu_says_simulator_and_numpy(has_gpu):
    done = run_course("doctor", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    if has_gpu:
        pytest.skip("this machine has a GPU")
    assert info["numba_cuda"] == "simulator"
    assert info["array_module"] == "numpy"
    assert info["cuda_gpus"] == []


def test_doctor_text():
    done = run_course("doctor")
    assert done.returncode == 0
    assert "CPU" in done.stdout and "Numba CUDA" in done.stdout


def test_unknown_lesson_is_a_clear_error():
    done = run_course("build", "--lessons", "99", "--out", "/tmp/nowhere-course")
    assert done.returncode != 0
    assert "no lesson '99'" in done.stderr


def test_parser_knows_every_command():
    p = cli.parser()
    for cmd in ("doctor", "build", "lab", "slides", "release", "grade", "bench"):
        assert p.parse_args([cmd] + (["00"] if cmd == "grade" else [])).command == cmd


def test_bench_groups_discovered_and_roofline_group_runs():
    assert {"roofline", "lessons", "build_phases"} <= set(benchmarks.groups())
    done = run_course("bench", "--json", "--only", "roofline")
    assert done.returncode == 0, done.stderr
    fig = json.loads(done.stdout)["roofline"]
    assert fig["peak_flops"] > 0 and fig["copy_bandwidth_bytes_per_s"] > 0
    assert fig["ridge_flop_per_byte"] == pytest.approx(fig["peak_flops"] / fig["copy_bandwidth_bytes_per_s"])


def test_bench_unknown_group_is_an_error():
    with pytest.raises(SystemExit, match="no group"):
        benchmarks.run(["nope"], progress=lambda m: None)


# ---- bad input: one plain line on stderr, a non-zero exit, never a traceback ----

def _plain_failure(done_or_rc, stderr: str) -> str:
    rc = done_or_rc.returncode if hasattr(done_or_rc, "returncode") else done_or_rc
    assert rc != 0
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("course "), stderr
    return last


def test_grade_with_several_lessons_is_refused():
    done = run_course("grade", "01,03")
    last = _plain_failure(done, done.stderr)
    assert "expected one lesson, got 2" in last and len(done.stderr.strip().splitlines()) == 1


def test_grade_with_a_missing_submissions_folder_is_refused(tmp_path):
    done = run_course("grade", "00", "--submissions", str(tmp_path / "nowhere"))
    assert "no such folder" in _plain_failure(done, done.stderr)


@pytest.mark.parametrize("args", [("grade", "99"), ("slides", "99"), ("release", "99"),
                                  ("build", "--lessons", "00,99")])
def test_unknown_lessons_are_refused_by_every_command(args):
    done = run_course(*args)
    assert "no lesson '99'. Lessons: 00_" in _plain_failure(done, done.stderr)


@pytest.fixture
def broken_course(tmp_path, monkeypatch):
    """A notebooks/ folder whose only lesson has files that are not notebooks."""
    from course_tools import paths

    lesson = tmp_path / "notebooks" / "98_broken"
    lesson.mkdir(parents=True)
    (lesson / "lecture.ipynb").write_text("{ this is not json")
    (lesson / "exercises.ipynb").write_text("")
    monkeypatch.setattr(paths, "NOTEBOOKS", tmp_path / "notebooks")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_release_of_a_corrupt_notebook_is_one_line(broken_course, capsys, monkeypatch):
    monkeypatch.setattr(cli, "REPO", broken_course)
    rc = cli.main(["release", "98"])
    err = capsys.readouterr().err
    assert "not a readable notebook" in err
    assert "no student version for 98_broken" in _plain_failure(rc, err)


def test_slides_of_a_corrupt_lecture_is_one_line(broken_course, capsys):
    rc = cli.main(["slides", "98", "--out", str(broken_course / "out")])
    err = capsys.readouterr().err
    assert "98_broken: FAILED" in err and "not a readable notebook" in err
    assert "no deck for 98_broken" in _plain_failure(rc, err)


def test_slides_without_the_javascript_packages_say_how_to_get_them(broken_course, capsys, monkeypatch):
    from course_tools import slides

    monkeypatch.setattr(slides, "NODE_MODULES", broken_course / "no_node_modules")
    rc = cli.main(["slides", "98", "--out", str(broken_course / "out")])
    err = capsys.readouterr().err
    assert "make setup" in _plain_failure(rc, err) and len(err.strip().splitlines()) == 1


def test_build_reports_a_corrupt_lesson_in_its_table_and_fails(broken_course, capsys):
    rc = cli.main(["build", "--lessons", "98", "--out", str(broken_course / "out"), "--workers", "1"])
    captured = capsys.readouterr()
    assert "1 of 1 lessons not ok: 98_broken" in _plain_failure(rc, captured.err)
    row = [line for line in captured.out.splitlines() if line.startswith("98_broken")]
    assert row and " NO " in row[0] and "lecture:" in row[0] and "grading:" in row[0]
    summary = json.loads((broken_course / "out" / "summary.json").read_text())
    assert summary["lessons"][0]["title"] == "98_broken"  # the folder's name: no heading to read


def test_workers_must_be_positive():
    done = run_course("build", "--workers", "0", "--out", "/tmp/nowhere-course")
    assert "--workers must be 1 or more" in _plain_failure(done, done.stderr)


def test_grade_workers_stay_within_the_sandbox_slots():
    # slot N's kernel and slot N - 32's checker would share a sandbox user, and a slot's next
    # sandbox kills what runs under its user
    for workers in ("0", "33"):
        done = run_course("grade", "00", "--workers", workers)
        assert "--workers must be between 1 and 32" in _plain_failure(done, done.stderr)


# ---- course lab: as root, with the user's own arguments, opened on the student versions ----

def test_lab_passes_its_arguments_to_jupyter():
    args = cli._parse(["lab", "--port", "9999", "--no-browser"])
    assert args.command == "lab" and args.extra == ["--port", "9999", "--no-browser"]
    cmd = cli.lab_command(args.extra, uid=1000)
    assert cmd[-3:] == ["--port", "9999", "--no-browser"] and "--allow-root" not in cmd


def test_lab_as_root_allows_root_once():
    assert cli.lab_command([], uid=0).count("--allow-root") == 1
    assert cli.lab_command(["--allow-root"], uid=0).count("--allow-root") == 1


def test_lab_opens_on_the_release_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "RELEASE", tmp_path / "release")
    assert not any("default_url" in a for a in cli.lab_command([], uid=1000))
    (tmp_path / "release" / "00_setup").mkdir(parents=True)
    (tmp_path / "release" / "00_setup" / "exercises.ipynb").write_text("{}")
    assert "--LabApp.default_url=/lab/tree/release" in cli.lab_command([], uid=1000)


def test_course_lab_runs_jupyter_with_the_given_flag(tmp_path, monkeypatch, capfd):
    from course_tools.paths import lesson_dirs

    for lesson in lesson_dirs():  # every student version present: nothing to release first
        (tmp_path / lesson.name).mkdir()
        (tmp_path / lesson.name / "exercises.ipynb").write_text("{}")
    monkeypatch.setattr(cli, "RELEASE", tmp_path)
    monkeypatch.setattr(cli, "BUILD", tmp_path / "build")
    assert cli.main(["lab", "--version"]) == 0
    out = capfd.readouterr().out.strip()
    assert out and out[0].isdigit(), out  # jupyter lab printed its version: the flag got there
    assert (tmp_path / "build" / "lab-config" / "labconfig" / "page_config.json").is_file()


def test_lab_config_comes_first_and_keeps_the_users(tmp_path):
    config = cli.lab_config(tmp_path / "lab-config")
    assert json.loads((config / "jupyter_server_config.json").read_text()) == cli.LAB_SERVER_CONFIG
    assert json.loads((config / "labconfig" / "page_config.json").read_text()) == cli.LAB_PAGE_CONFIG
    assert cli.lab_environment(config, {"HOME": "/h"}) == {"HOME": "/h", "JUPYTER_CONFIG_PATH": str(config)}
    assert cli.lab_environment(config, {"JUPYTER_CONFIG_PATH": "/mine"})["JUPYTER_CONFIG_PATH"] == f"{config}:/mine"


JUPYTER_READS = """
import json
from jupyter_core.paths import jupyter_path
from jupyter_server.serverapp import ServerApp
from jupyterlab_server.config import get_page_config
app = ServerApp()
app.initialize(argv=[], find_extensions=True, new_httpserver=False)
lab = app.extension_manager.extension_apps["jupyterlab"].pop()
page_config = get_page_config(jupyter_path("labextensions"), app_settings_dir=None)
print(json.dumps({"extensions": sorted(n for n, e in app.extension_manager.extensions.items() if e.enabled),
                  "news_url": lab.news_url, "update_check": lab.check_for_updates_class.__name__,
                  "disabled": page_config["disabledExtensions"]}))
"""


def test_lab_turns_off_the_news_popup_and_the_formgrader_as_the_hub_does(tmp_path):
    """Jupyter itself, given `course lab`'s environment, resolves its configuration: no news
    (pop-up, feed, update check) and none of nbgrader's instructor tools, on the server or the page."""
    env = cli.lab_environment(cli.lab_config(tmp_path / "lab-config"))
    done = subprocess.run([sys.executable, "-c", JUPYTER_READS], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "jupyterlab" in seen["extensions"] and "nbgrader.server_extensions.assignment_list" in seen["extensions"]
    instructor_tools = {"nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list"}
    assert not instructor_tools & set(seen["extensions"])
    assert (seen["news_url"], seen["update_check"]) == ("", "NeverCheckForUpdate")
    assert {"@jupyterlab/apputils-extension:announcements", "@jupyter/nbgrader:formgrader",
            "@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:course-list"} <= set(seen["disabled"])


@pytest.fixture
def student_course(tmp_path, monkeypatch):
    """A course folder holding lesson 00 with the repository's nbgrader_config.py, as the
    `course` command sees its own checkout."""
    import shutil

    from course_tools import grade_command, paths

    shutil.copytree(paths.NOTEBOOKS / "00_setup", tmp_path / "notebooks" / "00_setup")
    shutil.copyfile(paths.REPO / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    for module, name, value in ((paths, "NOTEBOOKS", tmp_path / "notebooks"),
                                (grade_command, "NOTEBOOKS", tmp_path / "notebooks"), (grade_command, "REPO", tmp_path),
                                (cli, "REPO", tmp_path), (cli, "RELEASE", tmp_path / "release")):
        monkeypatch.setattr(module, name, value)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_release_never_overwrites_a_students_answers(student_course, capsys):
    import nbformat

    released = student_course / "release" / "00_setup" / "exercises.ipynb"
    assert cli.main(["release", "00"]) == 0 and released.is_file()
    capsys.readouterr()
    # running cells is not work: outputs alone do not stop a new release
    nb = nbformat.read(str(released), as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    nbformat.write(nb, str(released))
    assert cli.main(["release", "00"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    # the student answers an exercise, saves, and the instructor (or `make lab`'s user) releases again
    nb = nbformat.read(str(released), as_version=4)
    stub = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code")
    stub.source = "# my answer, an hour of work\nanswer = 42\n"
    nbformat.write(nb, str(released))
    saved = released.read_bytes()
    rc = cli.main(["release", "00"])
    err = capsys.readouterr().err
    assert released.read_bytes() == saved   # the edit is intact
    last = _plain_failure(rc, err)
    assert "not replaced, because they hold work: 00_setup" in last
    assert "release/00_setup/exercises.ipynb differs from the student version" in err
    assert "course release 00 --force" in err
    assert list(released.parent.glob("exercises.yours-*")) == []
    # --force writes the new version and moves the student's file out of release/, where
    # `nbgrader release_assignment` would send it to the whole class: the folder holds only the exercises
    assert cli.main(["release", "00", "--force"]) == 0
    err = capsys.readouterr().err
    kept = list((student_course / "build" / "kept" / "00_setup").glob("exercises.yours-*.ipynb"))
    assert len(kept) == 1 and kept[0].read_bytes() == saved
    assert f"release/00_setup/exercises.ipynb moved to build/kept/00_setup/{kept[0].name}" in err
    assert "an hour of work" not in released.read_text()
    assert sorted(p.name for p in released.parent.iterdir()) == ["exercises.ipynb"]
    # a file an earlier version kept in release/ leaves it at the next release, named as it was
    (released.parent / "exercises.yours-20250101-120000.ipynb").write_bytes(saved)
    assert cli.main(["release", "00"]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in released.parent.iterdir()) == ["exercises.ipynb"]
    assert (kept[0].parent / "exercises.yours-20250101-120000.ipynb").read_bytes() == saved


def test_build_and_readme_say_what_release_does(tmp_path):
    from pathlib import Path

    from course_tools import build

    (tmp_path / "out" / "rel" / "00_setup").mkdir(parents=True)
    (tmp_path / "out" / "rel" / "00_setup" / "exercises.ipynb").write_text("{}")
    (tmp_path / "release" / "00_setup").mkdir(parents=True)   # already there: may hold work
    lines = build.publish_releases([{"lesson": "00_setup", "release": "rel"}], tmp_path / "out", tmp_path / "release")
    assert lines[0].startswith("kept ") and "replaces it only if it holds no one's work" in lines[0], lines
    assert "regenerates" not in lines[0]
    readme = (Path(cli.__file__).resolve().parent.parent / "README.md").read_text()
    assert "course release NN --force" in readme and "never overwrite" not in readme


def test_doctor_reports_the_grading_sandbox():
    from course_tools.grading import sandbox

    done = run_course("doctor", "--json")
    box = json.loads(done.stdout)["sandbox"]
    assert box["bubblewrap_usable"] == bool(sandbox.bubblewrap())
    assert (box["why_not"] is None) == box["bubblewrap_usable"]
    assert box["cgroups"]["version"] in ("v1", "v2", "hybrid", "none")
    assert ("systemd scope" in box["limits"]) == bool(sandbox.systemd_scope())
    assert "watchdog" in box["limits"] or "systemd scope" in box["limits"]
    text = run_course("doctor").stdout
    assert "sandbox bubblewrap" in text and "user namespaces:" in text and "cgroups " in text
    assert ("course grade runs every submission in this sandbox" in text) == box["bubblewrap_usable"]


def test_doctor_says_grading_refuses_without_bubblewrap():
    from course_tools.doctor import _sandbox_lines

    lines = _sandbox_lines({"bubblewrap": None, "bubblewrap_version": None, "bubblewrap_usable": False,
                            "why_not": "bubblewrap (bwrap) is not installed.", "root": False,
                            "user_namespaces": {"max_user_namespaces": 0, "unprivileged_userns_clone": False},
                            "cgroups": {"version": "v2", "controllers": ["cpu", "memory"]},
                            "limits": "the grader's watchdog per sandbox"})
    assert lines[0] == "sandbox bubblewrap not installed"
    assert "user namespaces: off for unprivileged users; cgroups v2 (cpu, memory)" in lines[1]
    assert lines[-1].strip() == "course grade refuses to grade (exit 2): bubblewrap (bwrap) is not installed."


@pytest.mark.parametrize("args, words", [
    (["--cell-timeout", "-1"], "--cell-timeout -1: give seconds from 1 to 86400 (nbgrader's -1 for 'no limit'"),
    (["--cell-timeout", "0"], "--cell-timeout 0: give seconds from 1 to 86400"),
    (["--notebook-timeout", "0"], "--notebook-timeout 0: give seconds from 10 to 86400"),
    (["--memory-gib", "0"], "--memory-gib 0: give GiB from 1 to 1024"),
    (["--cell-timeout", "inf"], "--cell-timeout inf: give seconds"),
    (["--cell-timeout", "1000"], "--notebook-timeout 900 is shorter than --cell-timeout 1000"),
])
def test_grade_refuses_nonsensical_limits_in_one_line(args, words, capsys):
    rc = cli.main(["grade", "00", *args])
    err = capsys.readouterr().err
    assert words in _plain_failure(rc, err) and len(err.strip().splitlines()) == 1, err
    assert "nothing was graded" in err


def test_a_lone_notebook_or_one_students_folder_is_not_a_submissions_folder(tmp_path, capsys):
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "exercises.ipynb").write_text("{}")
    for path, words in ((tmp_path / "alice", "holds exercises.ipynb itself, as one student's folder does"),
                        (tmp_path / "alice" / "exercises.ipynb", "is a file, not a folder")):
        rc = cli.main(["grade", "00", "--submissions", str(path)])
        err = capsys.readouterr().err
        assert words in _plain_failure(rc, err) and len(err.strip().splitlines()) == 1, err
