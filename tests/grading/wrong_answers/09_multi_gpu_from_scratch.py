# format: edits
"""Plausible wrong answers for lesson 09's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_split': [
        # ignores the speeds: k equal chunks (the lecture's split)
        ("""    total = sum(weights)
    bounds = [len(X) * sum(weights[:i]) // total for i in range(len(devices) + 1)]
    Xs = [X[a:b].to(d) for a, b, d in zip(bounds, bounds[1:], devices)]
    ys = [y[a:b].to(d) for a, b, d in zip(bounds, bounds[1:], devices)]""",
         """    Xs = [x.to(d) for x, d in zip(X.chunk(len(devices)), devices)]
    ys = [t.to(d) for t, d in zip(y.chunk(len(devices)), devices)]"""),
        # rounds the bounds up instead of down
        ('len(X) * sum(weights[:i]) // total', '-(-len(X) * sum(weights[:i]) // total)'),
        # forgets to check the lengths
        ("""    if len(X) != len(y) or len(weights) != len(devices):
        raise ValueError("X and y, devices and weights must have matching lengths")
""", ""),
        # calls the library's split_batch of the old lesson (no longer in course_lib)
        ("""    total = sum(weights)""",
         """    from course_lib.parallel.data_parallel import split_batch as library_split
    return library_split(X, y, devices)
    total = sum(weights)"""),
    ],
    'ex2_allreduce': [
        # reduce_scatter sums whole tensors (an allreduce), not part i on tensor i
        [('mine = torch.tensor_split(t.view(-1), k)[i]', 'mine = t.view(-1)'),
         ('mine += torch.tensor_split(other.view(-1), k)[i].to(mine.device)',
          'mine += other.view(-1).to(mine.device)')],
        # all_gather adds the finished parts instead of copying them
        ('.copy_(finished.to(other.device))', '.add_(finished.to(other.device))'),
        # builds new tensors instead of writing into the given ones
        ("""    reduce_scatter(tensors)
    all_gather(tensors)""", """    total = sum(t.clone() for t in tensors)
    tensors[:] = [total.clone() for _ in tensors]"""),
        # calls the library's allreduce of the old lesson (no longer in course_lib)
        ("""    reduce_scatter(tensors)
    all_gather(tensors)""", """    from course_lib.parallel.data_parallel import allreduce as library_allreduce
    library_allreduce(tensors)"""),
    ],
    'ex3_train': [
        # averages the slices' mean losses: wrong when the slices differ in size
        ('F.cross_entropy(replica(xs), ts, reduction="sum") / len(X)',
         'F.cross_entropy(replica(xs), ts) / len(Xs)'),
        # divides by the slice size: each replica's gradient is its slice's mean
        ('reduction="sum") / len(X)', 'reduction="sum") / len(xs)'),
        # never zeroes the gradients: later steps add up old gradients
        ('        replica.zero_grad()\n', ''),
        # calls the library's train_batch of the old lesson (no longer in course_lib)
        ("""    Xs, ys = split_batch(X, y, devices, weights)""",
         """    from course_lib.parallel.data_parallel import train_batch as library_step
    return library_step(replicas, X, y, devices, lr)"""),
    ],
    'ex4_shortest_warmup': [
        # warms up until the full rate is stable, forgetting that the ramp climbs on the way there
        ("""        if t > 0:
            room = 2 / (base_lr * curvature) - 1  # how far above base_lr the rate may climb, in units of base_lr
            if room <= 0:
                return None  # unstable at any rate the ramp can take after its first step
            warmup = max(warmup, math.ceil((k - 1) * t / room))  # low enough on the ramp at step t
""", ""),
        # reads LinearLR as a ramp from zero to k * base_lr
        ("warmup = max(warmup, math.ceil((k - 1) * t / room))",
         "warmup = max(warmup, math.ceil(k * base_lr * curvature * t / 2))"),
        # rounds the ramp's length down, and lets the full rate arrive at the last unstable step
        [("math.ceil((k - 1) * t / room)", "int((k - 1) * t / room)"),
         ("warmup = max(warmup, t + 1)", "warmup = max(warmup, t)")],
        # never gives up when the sharpness stays too high for the full rate
        ("base_lr * sharpness[0] > 2 or k * base_lr * sharpness[-1] > 2", "base_lr * sharpness[0] > 2"),
        # the lecture's warm-up of a whole epoch (here: the whole curve) whenever one is needed: stable, not the fewest
        ("    return warmup", "    return len(sharpness) if warmup else 0"),
    ],
}

# The shortest answer a student who reads course_lib would submit for each solution cell: the
# closest library function in place of the reference solution. Each must lose points.
LIBRARY_CALLS = {
    # tensor_parallel.shard_bounds cuts the rows into nearly equal blocks: the speeds are ignored
    'ex1_split': ("""    total = sum(weights)
    bounds = [len(X) * sum(weights[:i]) // total for i in range(len(devices) + 1)]
    Xs = [X[a:b].to(d) for a, b, d in zip(bounds, bounds[1:], devices)]
    ys = [y[a:b].to(d) for a, b, d in zip(bounds, bounds[1:], devices)]""",
                  """    from course_lib.parallel.tensor_parallel import shard_bounds
    blocks = [shard_bounds(len(X), i, len(devices)) for i in range(len(devices))]
    Xs = [X[a:b].to(d) for (a, b), d in zip(blocks, devices)]
    ys = [y[a:b].to(d) for (a, b), d in zip(blocks, devices)]"""),
    # collectives.simulate_ring_allreduce: right for allreduce, but its first n - 1 steps are the
    # ring's reduce-scatter (rank r finishes chunk r + 1), not part i summed on tensor i; and it
    # has no all-gather of its own
    'ex2_allreduce': [("""    k = len(tensors)
    for i, t in enumerate(tensors):
        mine = torch.tensor_split(t.view(-1), k)[i]
        for j, other in enumerate(tensors):
            if j != i:
                mine += torch.tensor_split(other.view(-1), k)[i].to(mine.device)""",
                       """    from course_lib.parallel.collectives import simulate_ring_allreduce
    for t, done in zip(tensors, simulate_ring_allreduce(tensors, steps=len(tensors) - 1)):
        t.copy_(done)"""),
                      ("""    reduce_scatter(tensors)
    all_gather(tensors)""", """    from course_lib.parallel.collectives import simulate_ring_allreduce
    for t, total in zip(tensors, simulate_ring_allreduce(tensors)):
        t.copy_(total)""")],
    # course_lib.train.train on each replica's slice: every replica steps on its own gradient,
    # nothing is summed, and the replicas drift apart
    'ex3_train': ("""    Xs, ys = split_batch(X, y, devices, weights)""", """    from course_lib.train import train
    Xs, ys = split_batch(X, y, devices, weights)
    for replica, xs, ts, d in zip(replicas, Xs, ys, devices):
        train(replica, [(xs, ts)], optimizer=torch.optim.SGD(replica.parameters(), lr=lr), device=d,
              progress=False)
    with torch.no_grad():
        return float(F.cross_entropy(replicas[0](X.to(devices[0])), y.to(devices[0])))"""),
    # data_parallel's per-step lookup (a list's last value holds): the first step at which the full rate is
    # stable, as if the rate jumped there
    'ex4_shortest_warmup': ("""    warmup = 0
    for t, curvature in enumerate(sharpness):""", """    from course_lib.parallel.data_parallel import _learning_rate
    return next(t for t in range(len(sharpness)) if k * base_lr * _learning_rate(sharpness, t) <= 2)
    warmup = 0
    for t, curvature in enumerate(sharpness):"""),
}
