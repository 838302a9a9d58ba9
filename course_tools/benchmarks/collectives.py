"""Our ring allreduce against ``dist.all_reduce`` (gloo, 4 processes, 10M float32), and the
ring cost model fitted on 2 processes predicting the time on 4."""
from __future__ import annotations


def run() -> dict:
    from course_lib.hardware import describe_device
    from course_lib.parallel import collectives as c

    numel = 10_000_000
    four = c.measure_allreduce(4, [numel], names=("ring", "builtin"), repeat=9, timeout=300)
    sizes = [250_000, 1_000_000, 4_000_000]
    two = c.measure_allreduce(2, sizes, names=("ring",), repeat=5, timeout=300)
    alpha, bandwidth = c.fit_latency_bandwidth(sizes, [two["ring"][s] for s in sizes], 2)
    modelled = c.ring_allreduce_seconds(4 * numel, 4, bandwidth, alpha)
    ring, builtin = four["ring"][numel], four["builtin"][numel]
    return {
        "device": describe_device("cpu") + "; gloo over localhost, 2 and 4 processes",
        "ring_allreduce_4proc_10M_f32_seconds": ring,
        "builtin_allreduce_4proc_10M_f32_seconds": builtin,
        "ring_over_builtin_time_ratio": ring / builtin,
        "ring_over_builtin_target_max": 1.25,
        "fitted_latency_seconds_2proc": alpha,
        "fitted_bandwidth_bytes_per_s_2proc": bandwidth,
        "modelled_ring_4proc_10M_seconds": modelled,
        "measured_over_modelled_ring_4proc": ring / modelled,
    }
