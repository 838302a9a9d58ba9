"""Plausible wrong answers for lesson 06's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_timer": [
        # the broken timer: measures only the launch
        """def gpu_time(fn, device, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
""",
        # synchronizes after but not before: earlier queued work is counted
        """def gpu_time(fn, device, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        device.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
""",
        # synchronizes once, after all repeats, and divides: no per-repeat barrier
        """def gpu_time(fn, device, repeat=5):
    device.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    elapsed = time.perf_counter() - start
    device.synchronize()
    return elapsed / repeat
""",
    ],
    "ex2_model": [
        # the seed's formula only: wrong when the frontend is the bottleneck
        """def sync_seconds(n, t1, t2, t3):
    return n * (t1 + t2 + t3)


def async_seconds(n, t1, t2, t3):
    return t1 + n * t2 + t3 if n else 0.0
""",
        # forgets the first issue and the last hand-back
        """def sync_seconds(n, t1, t2, t3):
    return n * (t1 + t2 + t3)


def async_seconds(n, t1, t2, t3):
    return n * max(t1, t2)
""",
        # synchronous time without the hand-back cost
        """def sync_seconds(n, t1, t2, t3):
    return n * (t1 + t2)


def async_seconds(n, t1, t2, t3):
    if n == 0:
        return 0.0
    return max(t1 + n * t2, n * t1 + t2) + t3
""",
    ],
    "ex3_bound": [
        # off by one: waits for the previous task, so only max_in_flight - 1 overlap
        """def issue_bounded(backend, tasks, max_in_flight):
    values = []
    for i, task in enumerate(tasks):
        if i >= max_in_flight - 1 and i > 0:
            values[i - max_in_flight + 1].item()
        values.append(backend.submit(task))
    return values
""",
        # off by one the other way: one task too many in flight
        """def issue_bounded(backend, tasks, max_in_flight):
    values = []
    for i, task in enumerate(tasks):
        if i > max_in_flight:
            values[i - max_in_flight - 1].item()
        values.append(backend.submit(task))
    return values
""",
        # synchronizes after every submit: bounded, but nothing overlaps
        """def issue_bounded(backend, tasks, max_in_flight):
    values = []
    for task in tasks:
        values.append(backend.submit(task))
        backend.synchronize()
    return values
""",
    ],
    "ex4_logging": [
        # logs steps 0, every, 2*every ... (off by one)
        """def train_with_logging(backend, steps, every):
    logged = []
    for i, step in enumerate(steps):
        loss = backend.submit(step)
        if i % every == 0:
            logged.append(loss.item())
    return logged
""",
        # reads every loss (a sync point per step) and keeps only the logged ones
        """def train_with_logging(backend, steps, every):
    logged = []
    for i, step in enumerate(steps):
        value = backend.submit(step).item()
        if (i + 1) % every == 0:
            logged.append(value)
    return logged
""",
    ],
}
