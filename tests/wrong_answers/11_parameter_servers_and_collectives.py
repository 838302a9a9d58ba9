"""Plausible wrong answers for lesson 11's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_schedule": [
        # all-gather sends the same chunks as reduce-scatter (off by one)
        """def ring_schedule(n):
    steps = []
    for s in range(n - 1):
        steps.append([(r, (r + 1) % n, (r - s) % n) for r in range(n)])
    for s in range(n - 1):
        steps.append([(r, (r + 1) % n, (r - s) % n) for r in range(n)])
    return steps
""",
        # only the reduce-scatter half
        """def ring_schedule(n):
    return [[(r, (r + 1) % n, (r - s) % n) for r in range(n)] for s in range(n - 1)]
""",
        # sends to the left neighbour
        """def ring_schedule(n):
    steps = []
    for s in range(n - 1):
        steps.append([(r, (r - 1) % n, (r - s) % n) for r in range(n)])
    for s in range(n - 1):
        steps.append([(r, (r - 1) % n, (r + 1 - s) % n) for r in range(n)])
    return steps
""",
    ],
    "ex2_sync": [
        # counts one direction only
        """def sync_seconds(strategy, nbytes, n, bandwidth):
    one = nbytes / bandwidth
    if strategy == "one_gpu":
        return (n - 1) * one
    if strategy == "cpu":
        return n * one
    return (n - 1) * one / n
""",
        # milliseconds instead of seconds
        """def sync_seconds(strategy, nbytes, n, bandwidth):
    one = nbytes / bandwidth * 1e3
    if strategy == "one_gpu":
        return 2 * (n - 1) * one
    if strategy == "cpu":
        return 2 * n * one
    return 2 * (n - 1) * one / n
""",
        # the CPU treated like one more GPU (n - 1 transfers)
        """def sync_seconds(strategy, nbytes, n, bandwidth):
    one = nbytes / bandwidth
    if strategy in ("one_gpu", "cpu"):
        return 2 * (n - 1) * one
    return 2 * (n - 1) * one / n
""",
    ],
    "ex3_store": [
        # push replaces instead of adding
        """class SumStore:
    def __init__(self):
        self.values = {}

    def init(self, key, value):
        self.values[key] = value.clone()

    def push(self, key, values):
        self.values[key] = sum(values)

    def pull(self, key):
        return self.values[key].clone()
""",
        # pull returns the stored tensor itself
        """class SumStore:
    def __init__(self):
        self.values = {}

    def init(self, key, value):
        self.values[key] = value.clone()

    def push(self, key, values):
        for v in values:
            self.values[key] += v

    def pull(self, key):
        return self.values[key]
""",
        # averages the pushed values
        """class SumStore:
    def __init__(self):
        self.values = {}

    def init(self, key, value):
        self.values[key] = value.clone()

    def push(self, key, values):
        self.values[key] += sum(values) / len(values)

    def pull(self, key):
        return self.values[key].clone()
""",
    ],
    "ex4_allreduce": [
        # reduces to rank 0 but never sends the sum back
        """def my_allreduce(tensor):
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        buffer = torch.empty_like(tensor)
        for src in range(1, n):
            dist.recv(buffer, src=src)
            tensor += buffer
    else:
        dist.send(tensor, dst=0)
    return tensor
""",
        # ring with equal chunk sizes: wrong when the size is not divisible by n
        """def my_allreduce(tensor):
    rank, n = dist.get_rank(), dist.get_world_size()
    flat = tensor.view(-1)
    size = flat.numel() // n
    chunks = [flat[i * size:(i + 1) * size] for i in range(n)]
    buffer = torch.empty(size, dtype=tensor.dtype)
    right, left = (rank + 1) % n, (rank - 1) % n
    for step in range(2 * (n - 1)):
        if step < n - 1:
            send, recv = (rank - step) % n, (rank - step - 1) % n
        else:
            s = step - (n - 1)
            send, recv = (rank + 1 - s) % n, (rank - s) % n
        request = dist.isend(chunks[send].clone(), dst=right) if size else None
        if size:
            dist.recv(buffer, src=left)
            if step < n - 1:
                chunks[recv] += buffer
            else:
                chunks[recv].copy_(buffer)
        if request is not None:
            request.wait()
    return tensor
""",
    ],
}
