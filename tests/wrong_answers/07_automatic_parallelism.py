"""Plausible wrong answers for lesson 07's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_critical": [
        # the total work, not the longest chain
        """def critical_path_seconds(graph):
    return sum(seconds for seconds, _ in graph.values())
""",
        # follows only the first dependency of each task
        """def critical_path_seconds(graph):
    def length(name):
        seconds, deps = graph[name]
        return seconds + (length(deps[0]) if deps else 0.0)
    return max((length(n) for n in graph), default=0.0)
""",
        # the longest single task
        """def critical_path_seconds(graph):
    return max((seconds for seconds, _ in graph.values()), default=0.0)
""",
    ],
    "ex2_simulate": [
        # ignores dependencies on other devices
        """def simulate(graph, plan):
    times = {}
    for device, names in plan.items():
        clock = 0.0
        for name in names:
            seconds, deps = graph[name]
            times[name] = (clock, clock + seconds)
            clock += seconds
    return times
""",
        # ignores that the device is busy: starts as soon as the dependencies are done
        """def simulate(graph, plan):
    times = {}
    pending = [n for names in plan.values() for n in names]
    for _ in range(len(pending) + 1):
        for name in pending:
            seconds, deps = graph[name]
            if name not in times and all(d in times for d in deps):
                start = max([times[d][1] for d in deps], default=0.0)
                times[name] = (start, start + seconds)
    if len(times) < len(pending):
        raise ValueError("the plan deadlocks")
    return times
""",
    ],
    "ex3_assign": [
        # everything on the faster device
        """def choose_devices():
    return {name: "gpu" for name in ["prep", "convA", "convB", "small", "merge", "log"]}
""",
        # prep on the GPU: the convolutions start late
        """def choose_devices():
    return {"prep": "gpu", "convA": "gpu", "convB": "gpu", "small": "cpu", "merge": "gpu", "log": "cpu"}
""",
        # one convolution moved to the idle CPU, where it is three times slower
        """def choose_devices():
    return {"prep": "cpu", "convA": "gpu", "convB": "cpu", "small": "gpu", "merge": "gpu", "log": "gpu"}
""",
    ],
    "ex4_overlap": [
        # forgets filling and draining the pipeline
        """def pipeline_seconds(n, c, k, overlap):
    if not overlap:
        return n * (c + k)
    return n * max(c, k)
""",
        # assumes overlap halves the time
        """def pipeline_seconds(n, c, k, overlap):
    total = n * (c + k)
    return total / 2 if overlap else total
""",
        # right formulas but one chunk of time even when there are no chunks
        """def pipeline_seconds(n, c, k, overlap):
    if not overlap:
        return n * (c + k)
    return max(n * c + k, c + n * k)
""",
    ],
}
