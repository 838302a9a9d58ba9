import json
import subprocess
import sys

import pytest

from course_tools import benchmarks, cli


def run_course(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "course_tools.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


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
    assert {"roofline", "lessons"} <= set(benchmarks.groups())
    done = run_course("bench", "--json", "--only", "roofline")
    assert done.returncode == 0, done.stderr
    fig = json.loads(done.stdout)["roofline"]
    assert fig["peak_flops"] > 0 and fig["copy_bandwidth_bytes_per_s"] > 0
    assert fig["ridge_flop_per_byte"] == pytest.approx(fig["peak_flops"] / fig["copy_bandwidth_bytes_per_s"])


def test_bench_unknown_group_is_an_error():
    with pytest.raises(SystemExit, match="no group"):
        benchmarks.run(["nope"], progress=lambda m: None)
