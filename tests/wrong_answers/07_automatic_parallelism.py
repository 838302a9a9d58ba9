# format: edits
"""Plausible wrong answers for lesson 07's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_critical': [
        # the total work, not the longest chain
        ("""finish = {}

    def earliest_finish(name):
        if name not in finish:
            seconds, deps = graph[name]
            finish[name] = seconds + max((earliest_finish(d) for d in deps), default=0.0)
        return finish[name]

    return max((earliest_finish(n) for n in graph), default=0.0)""", 'return sum(seconds for seconds, _ in graph.values())'),
        # follows only the first dependency of each task
        ("""finish = {}

    def earliest_finish(name):
        if name not in finish:
            seconds, deps = graph[name]
            finish[name] = seconds + max((earliest_finish(d) for d in deps), default=0.0)
        return finish[name]

    return max((earliest_finish(n)""", """def length(name):
        seconds, deps = graph[name]
        return seconds + (length(deps[0]) if deps else 0.0)
    return max((length(n)"""),
        # the longest single task
        ("""finish = {}

    def earliest_finish(name):
        if name not in finish:
            seconds, deps = graph[name]
            finish[name] = seconds + max((earliest_finish(d) for d in deps), default=0.0)
        return finish[name]

    return max((earliest_finish(n) for n in graph),""", 'return max((seconds for seconds, _ in graph.values()),'),
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
                start = max([free[device]] + [times[d][1] for d in deps])""", """name not in times and all(d in times for d in deps):
                start = max([times[d][1] for d in deps], default=0.0)"""),
         ("""            free[device] = start + seconds
                position[device] += 1
                progressed = True
        if not progressed:
    """, """if len(times) < len(pending):
""")],
    ],
    'ex3_assign': [
        # everything on the faster device
        ('return {"prep": "cpu", "convA": "cpu", "convB": "gpu", "small": "gpu", "merge": "cpu", "log": "gpu"}',
         'return {name: "gpu" for name in ["prep", "convA", "convB", "small", "merge", "log"]}'),
        # both convolutions on the GPU, where each is faster: the CPU idles
        ('"convA": "cpu", "convB": "gpu"', '"convA": "gpu", "convB": "gpu"'),
        # the lecture's list scheduler: a good heuristic, but not optimal on this graph
        ('    return {"prep": "cpu", "convA": "cpu", "convB": "gpu", "small": "gpu", "merge": "cpu", "log": "gpu"}',
         '    return sch.list_schedule(GRAPH, ["cpu", "gpu"]).assignment()'),
    ],
    'ex4_overlap': [
        # forgets filling and draining the pipeline
        ("""def pipeline_seconds(n, c, k, overlap):
    if n == 0:
        return 0.0
    if not overlap:
        return n * (c + k)
    return max(n * c + k, c + n * k)""", """def pipeline_seconds(n, c, k, overlap):
    if not overlap:
        return n * (c + k)
    return n * max(c, k)"""),
        # assumes overlap halves the time
        ("""if n == 0:
        return 0.0
    if not overlap:
        return n * (c + k)
    return max(n * c + k, c + n * k)""", """total = n * (c + k)
    return total / 2 if overlap else total"""),
        # right formulas but one chunk of time even when there are no chunks
        ("""def pipeline_seconds(n, c, k, overlap):
    if n == 0:
        return 0.0
    if not overlap:
        return n * (c + k)
    return max(n * c + k, c + n * k)""", """def pipeline_seconds(n, c, k, overlap):
    if not overlap:
        return n * (c + k)
    return max(n * c + k, c + n * k)"""),
    ],
}
