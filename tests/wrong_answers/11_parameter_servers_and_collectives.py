# format: edits
"""Plausible wrong answers for lesson 11's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_schedule': [
        # all-gather sends the same chunks as reduce-scatter (off by one)
        ('        steps.append([(r, (r + 1) % n, (r + 1 - s) % n) for r in range(n)])', '        steps.append([(r, (r + 1) % n, (r - s) % n) for r in range(n)])'),
        # only the reduce-scatter half
        ("""steps = []
    for s in range(n - 1):
        steps.append([(r, (r + 1) % n, (r - s) % n) for r in range(n)])
    for s in range(n - 1):
        steps.append([(r, (r + 1) % n, (r + 1 - s) % n) for r in range(n)])
    return steps""", 'return [[(r, (r + 1) % n, (r - s) % n) for r in range(n)] for s in range(n - 1)]'),
        # sends to the left neighbour
        [('        steps.append([(r, (r + 1) % n, (r - s) % n) for r in range(n)])', '        steps.append([(r, (r - 1) % n, (r - s) % n) for r in range(n)])'),
         ('        steps.append([(r, (r + 1) % n, (r + 1 - s) % n) for r in range(n)])', '        steps.append([(r, (r - 1) % n, (r + 1 - s) % n) for r in range(n)])')],
    ],
    'ex2_sync': [
        # counts one direction only
        [("""    if strategy == "one_gpu":
        return 2 * (n - 1) * one""", """    if strategy == "one_gpu":
        return (n - 1) * one"""),
         ("""2 * n * one
    if strategy in ("split", "ring"):
        return 2 * (n - 1) * one / n
    raise ValueError(f"unknown strategy {strategy!r}")""", """n * one
    return (n - 1) * one / n""")],
        # milliseconds instead of seconds
        [('    one = nbytes / bandwidth', '    one = nbytes / bandwidth * 1e3'),
         ("""if strategy in ("split", "ring"):
        return 2 * (n - 1) * one / n
    raise ValueError(f"unknown strategy {strategy!r}")""", 'return 2 * (n - 1) * one / n')],
        # the CPU treated like one more GPU (n - 1 transfers)
        [('== "one_gpu":', 'in ("one_gpu", "cpu"):'),
         ("""if strategy == "cpu":
        return 2 * n * one
    if strategy in ("split", "ring"):
        return 2 * (n - 1) * one / n
    raise ValueError(f"unknown strategy {strategy!r}")""", 'return 2 * (n - 1) * one / n')],
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
    ],
}
