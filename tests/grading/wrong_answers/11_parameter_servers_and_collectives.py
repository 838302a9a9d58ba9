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
    'ex2_ring_time': [
        # the average link instead of the slowest
        [('slowest = max(', 'slowest = sum('),
         ('return 2 * (ranks - 1) * slowest', 'return 2 * (ranks - 1) * slowest / ranks')],
        # every step moves the whole tensor, not one chunk
        ('nbytes / ranks / bandwidth', 'nbytes / bandwidth'),
        # 2 n steps instead of 2 (n - 1)
        ('return 2 * (ranks - 1) * slowest', 'return 2 * ranks * slowest'),
    ],
    'ex3_store': [
        # push replaces instead of adding
        ("""for v in values:
            self.values[key] += v""", 'self.values[key] = sum(values)'),
        # pull returns the stored tensor itself
        ('self.values[key].clone()', 'self.values[key]'),
        # averages the pushed values
        ("""for v in values:
            self.values[key] += v""", 'self.values[key] += sum(values) / len(values)'),
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
    # the library's uniform ring with the worst latency and the worst bandwidth of any link
    'ex2_ring_time': ("""    slowest = max(latency + nbytes / ranks / bandwidth for bandwidth, latency in links)
    return 2 * (ranks - 1) * slowest""", """    from course_lib.parallel.collectives import ring_allreduce_seconds
    return ring_allreduce_seconds(nbytes, ranks, min(b for b, _ in links), max(a for _, a in links))"""),
    # the library store's rule: the store is replaced by the sum of the push
    'ex3_store': ("""for v in values:
            self.values[key] += v""", """from course_lib.parallel.kvstore import KVStore
        library = KVStore()
        library.values = self.values
        library.push(key, values)"""),
    # calls the library's ring allreduce
    'ex4_allreduce': ("""    rank, n = dist.get_rank(), dist.get_world_size()""",
                      """    from course_lib.parallel.collectives import ring_allreduce
    return ring_allreduce(tensor)
    rank, n = dist.get_rank(), dist.get_world_size()"""),
}
