# format: edits
"""Plausible wrong answers for lesson 07's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_critical': [
        # the critical path alone: forgets that the devices share the work
        ("""    return max(critical, work / devices)""", """    return critical"""),
        # the total work alone
        ("""    return max(critical, work / devices)""", """    return work"""),
        # follows only the first dependency of each task
        ("""            finish[name] = seconds + max((earliest_finish(d) for d in deps), default=0.0)""",
         """            finish[name] = seconds + (earliest_finish(deps[0]) if deps else 0.0)"""),
        # the longest single task instead of the longest chain
        ("""    critical = max((earliest_finish(n) for n in graph), default=0.0)""",
         """    critical = max((seconds for seconds, _ in graph.values()), default=0.0)"""),
    ],
    'ex2_simulate': [
        # ignores dependencies on other devices
        [("""position = {device: 0 for device in plan}
    free = {device: 0.0 for device in plan}
    while len(times) < sum(len(names) for names in plan.values()):
        progressed = False
        for device, names in plan.items():
            if position[device] == len(names):
                continue
            name = names[position[device]]""", """for device, names in plan.items():
        clock = 0.0
        for name in names:"""),
         ("""if all(d in times for d in deps):
                start = max([free[device]] + [times[d][1] for d in deps])
                times[name] = (start, start + seconds)
                free[device] = start + seconds
                position[device] += 1
                progressed = True
        if not progressed:
            raise ValueError("the plan deadlocks")""", """times[name] = (clock, clock + seconds)
            clock += seconds""")],
        # ignores that the device is busy: starts as soon as the dependencies are done
        [("""position = {device: 0 for device in plan}
    free = {device: 0.0 for device in plan}
    while len(times) < sum(len(names) for names in plan.values()):
        progressed = False
        for device, names in plan.items():
            if position[device] == len(names):
                continue
            name = names[position[device]]""", """pending = [n for names in plan.values() for n in names]
    for _ in range(len(pending) + 1):
        for name in pending:"""),
         ("""all(d in times for d in deps):
                start = max([free[device]] + [times[d][1] for d in deps])""",
          """name not in times and all(d in times for d in deps):
                start = max([times[d][1] for d in deps], default=0.0)"""),
         ("""            free[device] = start + seconds
                position[device] += 1
                progressed = True
        if not progressed:
    """, """if len(times) < len(pending):
""")],
        # never detects a deadlock: gives up silently and returns what it has
        ("""            raise ValueError("the plan deadlocks")""", """            break"""),
    ],
    'ex3_assign': [
        # everything on the faster device
        ('return {"prep": "cpu", "convA": "cpu", "convB": "gpu", "small": "gpu", "merge": "cpu", "log": "gpu"}',
         'return {name: "gpu" for name in ["prep", "convA", "convB", "small", "merge", "log"]}'),
        # both convolutions on the GPU, where each is faster: the CPU idles
        ('"convA": "cpu", "convB": "gpu"', '"convA": "gpu", "convB": "gpu"'),
    ],
    'ex4_diagnose': [
        # one overhead per chunk count: the engine that sets the pace pays n + 1 of them
        ('        return (seconds - max(compute_s + copy_s / n, compute_s / n + copy_s)) / (n + 1)',
         '        return (seconds - max(compute_s + copy_s / n, compute_s / n + copy_s)) / n'),
        # the whole gap taken for one overhead
        ('        return (seconds - max(compute_s + copy_s / n, compute_s / n + copy_s)) / (n + 1)',
         '        return seconds - max(compute_s + copy_s / n, compute_s / n + copy_s)'),
        # the compute-bound model only: wrong when the copies set the pace
        ('max(compute_s + copy_s / n, compute_s / n + copy_s)', '(compute_s + copy_s / n)'),
        # the overhead found but left out of the choice: the lecture's model picks the most chunks
        ('        c, k = compute_s / n + overhead, copy_s / n + overhead', '        c, k = compute_s / n, copy_s / n'),
        # never tries max_chunks itself
        ('range(1, max_chunks + 1)', 'range(1, max_chunks)'),
    ],
}

# The shortest answer a student who reads course_lib would submit: the closest library call.
LIBRARY_CALLS = {
    # the library's critical path, on a graph rebuilt as Tasks: only one of the two bounds
    'ex1_critical': ("""    finish = {}

    def earliest_finish(name):
        if name not in finish:
            seconds, deps = graph[name]
            finish[name] = seconds + max((earliest_finish(d) for d in deps), default=0.0)
        return finish[name]

    critical = max((earliest_finish(n) for n in graph), default=0.0)
    work = sum(seconds for seconds, _ in graph.values())
    return max(critical, work / devices)""",
                     """    tasks = [Task(name, seconds, tuple(deps)) for name, (seconds, deps) in graph.items()]
    return sch.critical_path(tasks, [f"d{i}" for i in range(devices)])[0] if tasks else 0.0"""),
    # the library's schedule for the same task -> device choice: it reorders each device's
    # tasks by priority instead of following the plan, and never reports a deadlock
    'ex2_simulate': ("""    times = {}
    position = {device: 0 for device in plan}
    free = {device: 0.0 for device in plan}
    while len(times) < sum(len(names) for names in plan.values()):
        progressed = False
        for device, names in plan.items():
            if position[device] == len(names):
                continue
            name = names[position[device]]
            seconds, deps = graph[name]
            if all(d in times for d in deps):
                start = max([free[device]] + [times[d][1] for d in deps])
                times[name] = (start, start + seconds)
                free[device] = start + seconds
                position[device] += 1
                progressed = True
        if not progressed:
            raise ValueError("the plan deadlocks")
    return times""", """    tasks = [Task(name, seconds, tuple(deps)) for name, (seconds, deps) in graph.items()]
    where = {name: device for device, names in plan.items() for name in names}
    done = sch.schedule_assignment(tasks, where, list(plan))
    return {s.task: (s.start, s.end) for s in done.slots}"""),
    # the lecture's list scheduler: a good heuristic, not optimal on this graph
    'ex3_assign': ('    return {"prep": "cpu", "convA": "cpu", "convB": "gpu", '
                   '"small": "gpu", "merge": "cpu", "log": "gpu"}',
                   '    return sch.list_schedule(GRAPH, ["cpu", "gpu"]).assignment()'),
    # sch.pipeline_seconds, the lecture's model without the per-chunk overhead the measurements show
    'ex4_diagnose': ("""    return min(range(1, max_chunks + 1), key=total)""",
                     """    return min(range(1, max_chunks + 1),
               key=lambda n: sch.pipeline_seconds(n, compute_s / n, copy_s / n, True))"""),
}
