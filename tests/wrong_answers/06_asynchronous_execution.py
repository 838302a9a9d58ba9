# format: edits
"""Plausible wrong answers for lesson 06's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_timer': [
        # the broken timer: measures only the launch
        [("""range(repeat):
        device.synchronize()""", 'range(repeat):'),
         ("""fn()
        device.synchronize()""", 'fn()')],
        # synchronizes after but not before: earlier queued work is counted
        ("""range(repeat):
        device.synchronize()""", 'range(repeat):'),
        # synchronizes once, after all repeats, and divides: no per-repeat barrier
        ("""def gpu_time(fn, device, repeat=5):
    times = []
    for _ in range(repeat):
        device.synchronize()
        start = time.perf_counter()
        fn()
        device.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)""", """def gpu_time(fn, device, repeat=5):
    device.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    elapsed = time.perf_counter() - start
    device.synchronize()
    return elapsed / repeat"""),
    ],
    'ex2_model': [
        # the textbook's formula only: wrong when the frontend is the bottleneck
        ("""if n == 0:
        return 0.0
    return max(t1 + n * t2, n * t1 + t2) + t3""", 'return t1 + n * t2 + t3 if n else 0.0'),
        # forgets the first issue and the last hand-back
        ("""if n == 0:
        return 0.0
    return max(t1 + n * t2, n * t1 + t2) + t3""", 'return n * max(t1, t2)'),
        # synchronous time without the hand-back cost
        ('t2 + t3)', 't2)'),
    ],
    'ex3_bound': [
        # off by one: waits for the previous task, so only max_in_flight - 1 overlap
        ("""max_in_flight:
            values[i - max_in_flight].item()""", """max_in_flight - 1 and i > 0:
            values[i - max_in_flight + 1].item()"""),
        # off by one the other way: one task too many in flight
        (""">= max_in_flight:
            values[i - max_in_flight].item()""", """> max_in_flight:
            values[i - max_in_flight - 1].item()"""),
        # synchronizes after every submit: bounded, but nothing overlaps
        [("""i, task in enumerate(tasks):
        if i >= max_in_flight:
            values[i - max_in_flight].item()""", 'task in tasks:'),
         ('values.append(backend.submit(task))', """values.append(backend.submit(task))
        backend.synchronize()""")],
    ],
    'ex4_logging': [
        # logs steps 0, every, 2*every ... (off by one)
        ('(i + 1)', 'i'),
        # reads every loss (a sync point per step) and keeps only the logged ones
        [('loss = backend.submit(step)', 'value = backend.submit(step).item()'),
         ('logged.append(loss.item())', 'logged.append(value)')],
    ],
}
