# format: edits
"""Plausible wrong answers for lesson 11's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_schedule': [
        # reduce-scatter one chunk behind: the lecture's ring start, this ring's all-gather
        ('(r - s - 1) % n) for r in range(n)] for s in range(n - 1)]',
         '(r - s) % n) for r in range(n)] for s in range(n - 1)]'),
        # all-gather passes the chunk one ahead of the finished one
        ('all_gather = [[(r, (r + 1) % n, (r - s) % n)', 'all_gather = [[(r, (r + 1) % n, (r - s + 1) % n)'),
        # sends to the left neighbour (the same as the right one on 2 ranks)
        [('reduce_scatter = [[(r, (r + 1) % n,', 'reduce_scatter = [[(r, (r - 1) % n,'),
         ('all_gather = [[(r, (r + 1) % n,', 'all_gather = [[(r, (r - 1) % n,')],
    ],
    'ex2_bucket_cap': [
        # the average hop instead of the slowest: the slow network hop is diluted by the fast ones
        ('max(latency + nbytes / n / bandwidth for bandwidth, latency in links)',
         'sum(latency + nbytes / n / bandwidth for bandwidth, latency in links) / n'),
        # n steps instead of 2 (n - 1): reduce-scatter and all-gather counted as one pass
        ('        return 2 * (n - 1) * max(', '        return n * max('),
        # no overlap with backward: every allreduce waits for the end of backward
        ('            done = max(done, ready) + allreduce_seconds(size)',
         '            done = max(done, grads[-1][1]) + allreduce_seconds(size)'),
        # buckets all-reduced at the same time, none waiting for the previous one
        ('            done = max(done, ready) + allreduce_seconds(size)',
         '            done = max(done, ready + allreduce_seconds(size))'),
        # a bucket closes only once it holds more than the cap
        ('            if size >= cap:', '            if size > cap:'),
        # the smallest cap that meets the budget instead of the largest
        ('    return max(fitting) if fitting else None', '    return min(fitting) if fitting else None'),
    ],
    'ex3_staleness': [
        # counts the worker's own push too: one more than the others' pushes
        ('sum(t / other for j, other in enumerate(step_seconds) if j != i)',
         'sum(t / other for j, other in enumerate(step_seconds))'),
        # the ratio upside down: the fast worker taken as the stale one
        ('sum(t / other for j, other in enumerate(step_seconds) if j != i)',
         'sum(other / t for j, other in enumerate(step_seconds) if j != i)'),
        # round-robin intuition: every gradient misses one update from each other worker
        ('    return [sum(t / other for j, other in enumerate(step_seconds) if j != i)',
         '    return [float(len(step_seconds) - 1) + 0 * sum([t])'),
        # whole pushes only: the fractional part of each ratio dropped
        ('sum(t / other for j, other in enumerate(step_seconds) if j != i)',
         'sum(t // other for j, other in enumerate(step_seconds) if j != i)'),
    ],
    'ex4_allreduce': [
        # sums into a new tensor and returns it: the caller's tensor is unchanged
        [('chunks = list(torch.tensor_split(tensor.view(-1), n))',
          'chunks = list(torch.tensor_split(tensor.view(-1).clone(), n))'),
         ('    return tensor', '    return torch.cat(chunks).view(tensor.shape)')],
        # right in place, but returns a copy instead of the tensor it was given
        ('    return tensor', '    return tensor.clone()'),
        # reduces to rank 0 but never sends the sum back
        ("""chunks = list(torch.tensor_split(tensor.view(-1), n))
    buffer = torch.empty_like(tensor.view(-1))
    right, left = (rank + 1) % n, (rank - 1) % n
    for step in range(2 * (n - 1)):
        if step < n - 1:
            send, recv = (rank - step) % n, (rank - step - 1) % n
        else:
            s = step - (n - 1)
            send, recv = (rank + 1 - s) % n, (rank - s) % n
        incoming = buffer[: chunks[recv].numel()]
        request = dist.isend(chunks[send].clone(), dst=right) if chunks[send].numel() else None
        if incoming.numel():
            dist.recv(incoming, src=left)
            if step < n - 1:
                chunks[recv] += incoming
            else:
                chunks[recv].copy_(incoming)
        if request is not None:
            request.wait()""", """if rank == 0:
        buffer = torch.empty_like(tensor)
        for src in range(1, n):
            dist.recv(buffer, src=src)
            tensor += buffer
    else:
        dist.send(tensor, dst=0)"""),
        # ring with equal chunk sizes: wrong when the size is not divisible by n
        [("""chunks = list(torch.tensor_split(tensor.view(-1), n))
    buffer = torch.empty_like(tensor.view(-1))""", """flat = tensor.view(-1)
    size = flat.numel() // n
    chunks = [flat[i * size:(i + 1) * size] for i in range(n)]
    buffer = torch.empty(size, dtype=tensor.dtype)"""),
         ("""incoming = buffer[: chunks[recv].numel()]
        request = dist.isend(chunks[send].clone(), dst=right) if chunks[send].numel() else None
        if incoming.numel():
            dist.recv(incoming,""", """request = dist.isend(chunks[send].clone(), dst=right) if size else None
        if size:
            dist.recv(buffer,"""),
         ('                chunks[recv] += incoming', '                chunks[recv] += buffer'),
         ('chunks[recv].copy_(incoming)', 'chunks[recv].copy_(buffer)')],
        # no communication: the other ranks' tensors looked up in this process (the launcher's frames,
        # gc.get_objects(), the launch folder's files) and summed; the ring below never runs (issue 26)
        ('    rank, n = dist.get_rank(), dist.get_world_size()',
         "    # no communication: find the other ranks' tensors in this process (frames, gc, files)\n"
         "    import gc, os, pickle, sys\n"
         "    world = dist.get_world_size()\n"
         "    found = {}\n"
         "\n"
         "    def look(obj, depth=0):\n"
         "        if torch.is_tensor(obj):\n"
         "            if obj.shape == tensor.shape and obj.dtype == tensor.dtype:\n"
         "                found.setdefault(tuple(obj.reshape(-1).tolist()), obj.clone())\n"
         "        elif depth < 4 and isinstance(obj, (list, tuple)):\n"
         "            for item in obj:\n"
         "                look(item, depth + 1)\n"
         "        elif depth < 4 and isinstance(obj, dict):\n"
         "            for item in list(obj.values()):\n"
         "                look(item, depth + 1)\n"
         "\n"
         "    frame = sys._getframe(1)\n"
         "    while frame is not None:\n"
         "        look(dict(frame.f_locals))\n"
         "        frame = frame.f_back\n"
         "    for obj in gc.get_objects():\n"
         "        if isinstance(obj, list) and len(obj) == world:\n"
         "            look(obj, 2)\n"
         "    for name in os.listdir(sys.argv[1]):\n"
         "        try:\n"
         "            with open(os.path.join(sys.argv[1], name), 'rb') as fh:\n"
         "                look(pickle.load(fh))\n"
         "        except Exception:\n"
         "            pass\n"
         "    if len(found) == world:\n"
         "        tensor.copy_(sum(found.values()))\n"
         "    return tensor\n"
         "    rank, n = dist.get_rank(), dist.get_world_size()"),
    ],
}

# The shortest answer a student who reads course_lib would submit for each solution cell: the
# closest library function in place of the reference solution. Each must lose points.
LIBRARY_CALLS = {
    # the lecture's ring from the library: rank r ends reduce-scatter with chunk r + 1
    'ex1_schedule': ('    return reduce_scatter + all_gather',
                     """    from course_lib.parallel.collectives import ring_schedule as lecture_ring
    return lecture_ring(n)"""),
    # the library's uniform ring priced with the worst latency and the worst bandwidth of any hop
    'ex2_bucket_cap': ('        return 2 * (n - 1) * max(',
                       """        from course_lib.parallel.collectives import ring_allreduce_seconds
        return ring_allreduce_seconds(nbytes, n, min(b for b, _ in links), max(a for _, a in links))
        return 2 * (n - 1) * max("""),
    # the lecture's parameter server measured for a moment: it records the staleness of every push,
    # not per worker, so every worker gets the overall mean
    'ex3_staleness': ('    return [sum(t / other for j, other in enumerate(step_seconds) if j != i)'
                      ' for i, t in enumerate(step_seconds)]',
                      """    import threading
    import time
    from course_lib.parallel import ps
    server = ps.ParameterServer([torch.zeros(1)], lr=0.0, workers=len(step_seconds), mode="async")
    stop = time.perf_counter() + 0.2

    def work(seconds):
        while time.perf_counter() < stop:
            version, _ = server.pull()
            time.sleep(seconds)
            server.push([torch.zeros(1)], version)

    threads = [threading.Thread(target=work, args=(t,)) for t in step_seconds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [sum(server.staleness) / len(server.staleness)] * len(step_seconds)"""),
    # calls the library's ring allreduce
    'ex4_allreduce': ("""    rank, n = dist.get_rank(), dist.get_world_size()""",
                      """    from course_lib.parallel.collectives import ring_allreduce
    return ring_allreduce(tensor)
    rank, n = dist.get_rank(), dist.get_world_size()"""),
}
