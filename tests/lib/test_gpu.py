"""What only a CUDA GPU can show: real Numba kernels, CuPy, CUDA-event timing, pinned memory, NCCL.

Every test here but the last carries the ``gpu`` marker (``pytest -m gpu tests`` runs only
these; scripts/gpu_check.sh runs them on a GPU machine) and is skipped, with its reason, on a
machine without a usable CUDA GPU. A GPU whose Numba CUDA cannot run a kernel is a failure,
not a skip: the probe's reason is the message. The last test checks, on any machine, that
scripts/gpu_check.py finds the device of every measurement a notebook makes.
"""
import importlib.util
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from course_lib import hardware
from course_lib.timing import benchmark

HAS_CUDA = torch.cuda.is_available()
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU; none here")


@pytest.fixture(scope="module")
def real_numba_cuda():
    if hardware.numba_cuda_mode() != "real":
        pytest.fail(f"this machine has a CUDA GPU, but Numba CUDA is "
                    f"'{hardware.numba_cuda_mode()}': {hardware.numba_cuda_reason()}")
    from course_lib import kernels

    return kernels


@gpu
@needs_cuda
def test_probe_kernel_runs_on_the_gpu():
    assert hardware.probe_numba_cuda_kernel() == ""
    assert hardware.numba_cuda_mode() == "real" and hardware.numba_cuda_reason() == ""


@gpu
@needs_cuda
def test_real_numba_kernels_agree_with_numpy(real_numba_cuda):
    k = real_numba_cuda
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(1000), rng.standard_normal(1000)
    np.testing.assert_allclose(k.vector_add(a, b), a + b)
    x, y = rng.random((37, 3)), rng.random((29, 3))
    expected = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(k.launch_squared_distance(x, y), expected, rtol=1e-12, atol=1e-12)
    m, n = rng.standard_normal((33, 17)).astype(np.float32), rng.standard_normal((17, 21)).astype(np.float32)
    np.testing.assert_allclose(k.matmul_naive(m, n), m @ n, rtol=1e-4, atol=1e-4)
    data = rng.random(5000)
    np.testing.assert_array_equal(k.histogram(data, 10, 0.0, 1.0), np.histogram(data, 10, (0.0, 1.0))[0])


@gpu
@needs_cuda
def test_numba_distance_keeps_its_data_on_the_device(real_numba_cuda):
    cuda = real_numba_cuda.cuda
    x = np.random.default_rng(1).random((256, 3))
    x_dev = cuda.to_device(x)
    out_dev = cuda.device_array((256, 256))
    got = real_numba_cuda.launch_squared_distance(x_dev, x_dev, out=out_dev)
    assert got is out_dev  # returned where it is: nothing copied back
    cuda.synchronize()
    np.testing.assert_allclose(got.copy_to_host(), ((x[:, None] - x[None]) ** 2).sum(-1), atol=1e-12)


@gpu
@needs_cuda
def test_cupy_distance_matches_numpy():
    if not hardware.cupy_usable():
        pytest.skip("CuPy is not installed or cannot use this GPU")
    import cupy

    from course_lib.distance import squared_distances

    x = np.random.default_rng(2).random((500, 3))
    got = squared_distances(cupy.asarray(x), None, "cupy")
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(got), squared_distances(x, None, "numpy-broadcast"), atol=1e-10)


@gpu
@needs_cuda
def test_benchmark_agrees_with_cuda_events_and_names_the_gpu():
    a = torch.randn(2048, 2048, device="cuda")
    timing = benchmark(lambda: a @ a, device="cuda", repeat=5)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        a @ a
    end.record()
    torch.cuda.synchronize()
    per_call = start.elapsed_time(end) / 1000 / 20  # elapsed_time is in milliseconds
    assert 0.5 < timing.median / per_call < 2.0
    assert timing.device == f"cuda:{torch.cuda.current_device()}"
    assert torch.cuda.get_device_name() in timing.measured_on()


@gpu
@needs_cuda
def test_cpu_work_is_labelled_with_the_cpu_on_a_gpu_machine():
    timing = benchmark(lambda: np.ones(1000).sum(), repeat=3)
    assert timing.device == "cpu"
    assert torch.cuda.get_device_name() not in timing.measured_on()
    assert hardware.cpu_info().model in timing.measured_on()


@gpu
@needs_cuda
def test_pinned_host_memory_copies_faster_than_pageable():
    from course_lib.devices import transfer_benchmark

    results = {r.kind: r for r in transfer_benchmark(sizes_bytes=(64 * 2**20,), device="cuda", repeat=5)}
    assert set(results) == {"pageable", "pinned"}
    assert results["pinned"].bandwidth > 1.2 * results["pageable"].bandwidth


def _all_reduce_rank():
    import torch
    import torch.distributed as dist

    from course_lib.parallel.launch import init_process_group

    rank, world, device = init_process_group()
    t = torch.full((4,), float(rank + 1), device=device)
    dist.all_reduce(t)
    backend = dist.get_backend()
    dist.destroy_process_group()
    return backend, str(device), t.cpu().tolist()


@gpu
@needs_cuda
def test_nccl_with_one_process():
    import torch.distributed as dist

    from course_lib.parallel.launch import launch

    if not dist.is_nccl_available():
        pytest.skip("this torch was built without NCCL")
    [(backend, device, values)] = launch(_all_reduce_rank, 1, timeout=120)  # its source travels
    assert backend == "nccl" and device.startswith("cuda")
    assert values == [1.0] * 4


def test_gpu_check_finds_the_device_of_every_measurement(tmp_path):
    script = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", script)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    lesson = tmp_path / "99_probe"
    lesson.mkdir()
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# probe"),
        nbformat.v4.new_code_cell("from course_lib.timing import benchmark, measured_on\n"
                                  "t = benchmark(lambda: None, repeat=1, number=1)\n"
                                  "print('a figure,', t.measured_on())"),
        nbformat.v4.new_code_cell("title = measured_on('cpu', threads=3)  # a plot title: never printed"),
        nbformat.v4.new_code_cell("print('measured here on: a hand-typed GPU')"),
        nbformat.v4.new_code_cell("raise ValueError('stop here')"),
    ])
    nbformat.write(nb, lesson / "lecture.ipynb")
    record = gpu_check.run_notebook(lesson / "lecture.ipynb", tmp_path, timeout=120)
    assert record["ok"] is False and record["error_cell"] == 4 and "stop here" in record["error"]
    printed = [m for m in record["measured_on"] if m["cell"] is not None]
    assert [m["cell"] for m in printed] == [1] and "(CPU, " in printed[0]["device"]
    assert [m["device"] for m in record["measured_on"] if m["cell"] is None] == [
        hardware.describe_device("cpu", threads=3)]
    assert record["unlabelled_lines"] == [{"cell": 3, "line": "measured here on: a hand-typed GPU"}]
    assert (tmp_path / "99_lecture.txt").read_text().count("--- cell") == 4
