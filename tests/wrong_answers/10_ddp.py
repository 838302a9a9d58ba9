# format: edits
"""Plausible wrong answers for lesson 10's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_step': [
        # forgets zero_grad: the second step uses accumulated gradients
        ("""def ddp_step(model, X, y, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(X), y)
    loss.backward()
    optimizer.step()
    return loss""", """def ddp_step(model, X, y, optimizer):
    loss = F.cross_entropy(model(X), y)
    loss.backward()
    optimizer.step()
    return loss"""),
        # all-reduces by hand on top of DDP: the gradients are doubled
        ('loss.backward()', """loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)"""),
        # sums the loss instead of averaging it
        ('    loss = F.cross_entropy(model(X), y)', '    loss = F.cross_entropy(model(X), y, reduction="sum")'),
    ],
    'ex2_indices': [
        # contiguous blocks instead of a stride
        ("""padded = list(range(n))
    while len(padded) < per_rank * world:
        padded += padded[: per_rank * world - len(padded)]
    return padded[rank::world]""", 'return list(range(n))[rank * per_rank:(rank + 1) * per_rank]'),
        # no padding: ranks get different counts
        ("""per_rank = -(-n // world)
    padded = list(range(n))
    while len(padded) < per_rank * world:
        padded += padded[: per_rank * world - len(padded)]
    return padded[rank::world]""", 'return list(range(rank, n, world))'),
    ],
    'ex3_accuracy': [
        # mean of the per-rank accuracies
        ('for c, _ in counts) / sum(n for _, n in counts)', '/ n for c, n in counts) / len(counts)'),
        # divides by the number of ranks times the first rank's count
        ('sum(n for _, n in counts)', '(len(counts) * counts[0][1])'),
    ],
    'ex4_buckets': [
        # model order instead of reverse order
        ('reversed(range(len(sizes))):', 'range(len(sizes)):'),
        # closes a bucket only when it overflows (>= instead of >)
        ('        if current and filled + sizes[index] > cap:', '        if current and filled + sizes[index] >= cap:'),
        # forgets the last bucket
        ("""def make_buckets(sizes, cap):
    buckets, current, filled = [], [], 0
    for index in reversed(range(len(sizes))):
        if current and filled + sizes[index] > cap:
            buckets.append(current)
            current, filled = [], 0
        current.append(index)
        filled += sizes[index]
    if current:
        buckets.append(current)
    return buckets""", """def make_buckets(sizes, cap):
    buckets, current, filled = [], [], 0
    for index in reversed(range(len(sizes))):
        if current and filled + sizes[index] > cap:
            buckets.append(current)
            current, filled = [], 0
        current.append(index)
        filled += sizes[index]
    return buckets"""),
    ],
}
