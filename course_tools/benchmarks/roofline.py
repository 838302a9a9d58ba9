"""This machine's two roofline ceilings, peak matmul FLOP/s and copy bandwidth: the CPU's,
and the first CUDA GPU's (``gpu_*`` keys) when there is one. Each set names its device."""
from __future__ import annotations

import torch

from course_lib.hardware import describe_device
from course_lib.roofline import measure_bandwidth, measure_peak_flops


def ceilings(device: str, n: int = 2048, nbytes: int = 256 * 2**20) -> dict:
    """Peak matmul FLOP/s (n x n float32) and copy bandwidth (bytes/s) of ``device``."""
    peak, peak_t = measure_peak_flops(n, device=device)
    bw, bw_t = measure_bandwidth(nbytes, device=device)
    return {
        "device": describe_device(peak_t.device, threads=peak_t.threads),
        "peak_flops": peak,
        "peak_flops_iqr_fraction": peak_t.iqr / peak_t.median,
        "copy_bandwidth_bytes_per_s": bw,
        "copy_bandwidth_iqr_fraction": bw_t.iqr / bw_t.median,
        "ridge_flop_per_byte": peak / bw,
    }


def run() -> dict:
    figures = ceilings("cpu")
    if torch.cuda.is_available():
        # 8192^3 keeps an H100 busy ~20 ms per matmul: near its limit, unlike 2048^3
        figures.update({f"gpu_{k}": v for k, v in ceilings("cuda:0", n=8192, nbytes=2**30).items()})
    return figures
