"""course_lib.devices: choosing and describing devices, copy semantics, transfer costs."""
from unittest import mock

import pytest
import torch

from course_lib import devices


def test_default_device_follows_torch_accelerator():
    assert devices.default_device("meta") == torch.device("meta")
    with mock.patch("torch.accelerator.current_accelerator", return_value=torch.device("cuda")):
        assert devices.default_device() == torch.device("cuda")
    with mock.patch("torch.accelerator.current_accelerator", return_value=None):
        assert devices.default_device() == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert devices.default_device().type == expected


def test_device_properties():
    cpu = devices.device_properties("cpu")
    assert cpu["type"] == "cpu" and cpu["memory_bytes"] > 0 and cpu["cores"] >= 1
    meta = devices.device_properties("meta")
    assert meta == {"type": "meta", "index": None, "name": "meta", "memory_bytes": None}
    if torch.cuda.is_available():
        gpu = devices.device_properties("cuda")
        assert gpu["memory_bytes"] > 0 and "." in gpu["compute_capability"]


def test_same_storage_follows_to_semantics():
    u = torch.arange(4.0)
    assert devices.same_storage(u, u.to("cpu"))
    assert devices.same_storage(u, u[1:])
    assert not devices.same_storage(u, u.to(torch.float64))
    assert not devices.same_storage(u, u.clone())


def test_module_device():
    assert devices.module_device(torch.nn.Linear(2, 2)) == torch.device("cpu")
    assert devices.module_device(torch.nn.Linear(2, 2).to("meta")) == torch.device("meta")
    assert devices.module_device(torch.nn.ReLU()) == torch.device("cpu")


def test_transfer_benchmark():
    results = devices.transfer_benchmark(sizes_bytes=(4096, 65536), repeat=2)
    kinds = {r.kind for r in results}
    assert kinds == ({"pageable", "pinned"} if torch.cuda.is_available() else {"host-to-host"})
    for r in results:
        assert r.nbytes in (4096, 65536) and r.seconds > 0
        assert r.bandwidth == pytest.approx(r.nbytes / r.seconds)


def test_pcie_constant():
    assert devices.PCIE_GEN3_X16_BYTES_PER_S == pytest.approx(15.75e9, rel=1e-3)


def test_the_declared_torch_floor_has_the_apis_the_course_uses():
    """pyproject.toml and environment.yml ask for a torch that has what course_lib calls:
    torch.accelerator.current_accelerator(check_available=...) (2.7) and the public
    torch.distributed.fsdp.fully_shard (2.6)."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    floors = [re.search(r'"torch>=(\d+)\.(\d+)', (repo / "pyproject.toml").read_text()),
              re.search(r"pytorch-gpu>=(\d+)\.(\d+)", (repo / "environment.yml").read_text())]
    assert all(floors), "torch's floor is not declared"
    assert all((int(m.group(1)), int(m.group(2))) >= (2, 7) for m in floors), [m.group(0) for m in floors]
    import inspect

    import torch

    assert "check_available" in inspect.signature(torch.accelerator.current_accelerator).parameters
