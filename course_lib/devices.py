"""PyTorch devices (lesson 02; 01 and 08 too): pick one, describe it, time moving data to it.

Operations run on the device that holds their tensors. ``default_device`` gives the code
one place to decide where that is; ``device_properties`` says what it is; and
``transfer_benchmark`` times copies of growing size from host memory to the device
(pageable and pinned host memory on a GPU; a host-to-host copy on a CPU-only machine,
which is the reference the GPU's PCIe copy is compared with).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .hardware import cpu_info, ram_bytes
from .timing import benchmark

PCIE_GEN3_X16_BYTES_PER_S = 8e9 * 16 * (128 / 130) / 8
"""PCI Express 3.0 x16, one direction: 8 GT/s per lane x 16 lanes, 128b/130b encoding,
8 bits per byte (PCI-SIG PCIe 3.0 specification) = about 15.75 GB/s."""


def default_device(prefer: str | None = None):
    """The torch.device to compute on: ``prefer`` if given, else the accelerator torch was
    built for and can use (CUDA, ROCm, Apple's MPS, Intel's XPU: ``torch.accelerator``),
    else the CPU. The course's training and roofline helpers use it when given no device."""
    if prefer is not None:
        return torch.device(prefer)
    return torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")


def device_properties(device=None) -> dict:
    """What a device is: type, name, memory in bytes (None when not reported), and for
    CUDA the compute capability and number of multiprocessors."""


    device = default_device() if device is None else torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        p = torch.cuda.get_device_properties(index)
        return {"type": "cuda", "index": index, "name": p.name, "memory_bytes": int(p.total_memory),
                "compute_capability": f"{p.major}.{p.minor}",
                "multiprocessors": int(p.multi_processor_count)}
    if device.type == "cpu":
        cpu = cpu_info()
        return {"type": "cpu", "index": None, "name": cpu.model, "memory_bytes": ram_bytes(),
                "cores": cpu.physical_cores, "simd": cpu.simd}
    return {"type": device.type, "index": device.index, "name": str(device), "memory_bytes": None}


def same_storage(a, b) -> bool:
    """True when two tensors share memory (``b`` is ``a`` or a view of it), so writing
    to one changes the other."""
    return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def module_device(module):
    """The device of a module's first parameter (or buffer); CPU for a module with neither."""
    for tensor in list(module.parameters()) + list(module.buffers()):
        return tensor.device
    return torch.device("cpu")


@dataclass
class TransferResult:
    """One copy size: bytes copied, median seconds per copy, and the resulting bytes/s."""
    kind: str
    nbytes: int
    seconds: float

    @property
    def bandwidth(self) -> float:
        """Bytes per second."""
        return self.nbytes / self.seconds


def transfer_benchmark(sizes_bytes=(2**12, 2**16, 2**20, 2**24), device=None, repeat: int = 5) -> list[TransferResult]:
    """Time host-to-device copies of each size (bytes) and return one result per size and kind.

    On a CUDA device the kinds are 'pageable' (ordinary host memory, staged by the driver)
    and 'pinned' (page-locked host memory, copied by DMA directly). Without a GPU the kind
    is 'host-to-host' (a memory copy on the CPU, i.e. what ``.to()`` costs when it must copy).
    """


    device = default_device() if device is None else torch.device(device)
    results = []
    for nbytes in sizes_bytes:
        numel = max(1, int(nbytes) // 4)
        if device.type == "cuda":
            dst = torch.empty(numel, dtype=torch.float32, device=device)
            for kind, pinned in (("pageable", False), ("pinned", True)):
                src = torch.ones(numel, dtype=torch.float32, pin_memory=pinned)
                t = benchmark(lambda dst=dst, src=src, pinned=pinned: dst.copy_(src, non_blocking=pinned),
                              device=device, repeat=repeat, min_repeat_time=0.005)
                results.append(TransferResult(kind, numel * 4, t.median))
        else:
            src = torch.ones(numel, dtype=torch.float32)
            dst = torch.empty_like(src)
            t = benchmark(lambda dst=dst, src=src: dst.copy_(src), repeat=repeat, min_repeat_time=0.005)
            results.append(TransferResult("host-to-host", numel * 4, t.median))
    return results
