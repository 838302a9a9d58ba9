# format: edits
"""Plausible wrong answers for lesson 06's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
``LIBRARY_CALLS`` holds, for every solution cell, the shortest answer that calls the closest
``course_lib`` function (what a student who reads the library would submit); it must lose points.
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
    'ex2_logged_run': [
        # the lecture's one-wait formula over all n tasks, plus a hand-back per read: the groups overlap
        ("""    total = 0.0
    for start in range(0, n, every):""", """    reads = -(-n // every)
    return max(t1 + n * t2, n * t1 + t2) + reads * t3 if n else 0.0
    total = 0.0
    for start in range(0, n, every):"""),
        # the textbook's backend-bound formula for each group: wrong when the frontend is the slower
        ('max(t1 + issued * t2, issued * t1 + t2)', '(t1 + issued * t2)'),
        # the last, shorter group counted as a full one
        ('issued = min(every, n - start)', 'issued = every'),
        # a wait after every task, as if every result were read
        ('    total = 0.0\n', '    return n * (t1 + t2 + t3)\n'),
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
    'ex5_predict': [
        # the earlier work forgotten: synchronize-after reads the same as synchronize-both
        ('"sync_after": backend_done(earlier_s)', '"sync_after": backend_done(0.0)'),
        # the broken timer reads the backend's time, not the launches
        ('{"broken": len(tasks) * issue_s', '{"broken": sum(tasks)'),
        # the issue cost ignored: every task starts as soon as the previous one ends
        ('            busy_until = max(busy_until, (k + 1) * issue_s) + seconds',
         '            busy_until = busy_until + seconds'),
        # the earlier work added after the tasks instead of before them (wrong when the frontend is slower)
        ('"sync_after": backend_done(earlier_s)', '"sync_after": earlier_s + backend_done(0.0)'),
    ],
}

LIBRARY_CALLS = {
    # timing.benchmark cannot synchronize an AsyncBackend: it times the launches
    'ex1_timer': ('''    times = []
    for _ in range(repeat):
        device.synchronize()
        start = time.perf_counter()
        fn()
        device.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)''', '''    from course_lib.timing import benchmark
    return benchmark(fn, device=device, repeat=repeat).median'''),
    # run_tasks measures each group on an AsyncBackend: a measurement, not the model's prediction
    'ex2_logged_run': ('    total = 0.0\n', '''    from course_lib.async_queue import run_tasks
    return sum(run_tasks(min(every, n - start), t1, t2, t3, mode="async").seconds for start in range(0, n, every))
    total = 0.0
'''),
    # AsyncBackend's own bound, on a backend of its own: the caller's backend is never bounded
    'ex3_bound': ('''    values = []
    for i, task in enumerate(tasks):
        if i >= max_in_flight:
            values[i - max_in_flight].item()
        values.append(backend.submit(task))
    return values''', '''    bounded = AsyncBackend(max_in_flight=max_in_flight)
    return [bounded.submit(task) for task in tasks]'''),
    # the backend's synchronize, then every loss read: one wait for all, then a sync point per read
    'ex4_logging': ('''    logged = []
    for i, step in enumerate(steps):
        loss = backend.submit(step)
        if (i + 1) % every == 0:
            logged.append(loss.item())
    return logged''', '''    values = [backend.submit(step) for step in steps]
    backend.synchronize()
    return [value.item() for value in values][every - 1::every]'''),
    # async_queue.run_tasks measures one run of equal tasks instead of predicting the readings
    'ex5_predict': ('''    def backend_done(busy_until):
        for k, seconds in enumerate(tasks):
            busy_until = max(busy_until, (k + 1) * issue_s) + seconds
        return busy_until

    return {"broken": len(tasks) * issue_s, "sync_after": backend_done(earlier_s),
            "sync_both": backend_done(0.0)}''', '''    from course_lib.async_queue import run_tasks
    report = run_tasks(len(tasks), issue_s, max(tasks, default=0.0), 0.0)
    return {"broken": report.frontend_seconds, "sync_after": earlier_s + report.seconds,
            "sync_both": report.seconds}'''),
}
