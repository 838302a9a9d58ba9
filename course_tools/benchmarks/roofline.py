"""This machine's two roofline ceilings: peak matmul FLOP/s and copy bandwidth."""
from __future__ import annotations


def run() -> dict:
    from course_lib.hardware import device_label
    from course_lib.roofline import measure_bandwidth, measure_peak_flops

    peak, peak_t = measure_peak_flops(2048)
    bw, bw_t = measure_bandwidth(256 * 2**20)
    return {
        "device": device_label(),
        "peak_flops": peak,
        "peak_flops_iqr_fraction": peak_t.iqr / peak_t.median,
        "copy_bandwidth_bytes_per_s": bw,
        "copy_bandwidth_iqr_fraction": bw_t.iqr / bw_t.median,
        "ridge_flop_per_byte": peak / bw,
    }
