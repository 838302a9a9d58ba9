"""Plausible wrong answers for lesson 10's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_step": [
        # forgets zero_grad: the second step uses accumulated gradients
        """def ddp_step(model, X, y, optimizer):
    loss = F.cross_entropy(model(X), y)
    loss.backward()
    optimizer.step()
    return loss
""",
        # all-reduces by hand on top of DDP: the gradients are doubled
        """def ddp_step(model, X, y, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(X), y)
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    optimizer.step()
    return loss
""",
        # sums the loss instead of averaging it
        """def ddp_step(model, X, y, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(X), y, reduction="sum")
    loss.backward()
    optimizer.step()
    return loss
""",
    ],
    "ex2_indices": [
        # contiguous blocks instead of a stride
        """def rank_indices(n, rank, world):
    per_rank = -(-n // world)
    return list(range(n))[rank * per_rank:(rank + 1) * per_rank]
""",
        # no padding: ranks get different counts
        """def rank_indices(n, rank, world):
    return list(range(rank, n, world))
""",
    ],
    "ex3_accuracy": [
        # mean of the per-rank accuracies
        """def global_accuracy(counts):
    return sum(c / n for c, n in counts) / len(counts)
""",
        # divides by the number of ranks times the first rank's count
        """def global_accuracy(counts):
    return sum(c for c, _ in counts) / (len(counts) * counts[0][1])
""",
    ],
    "ex4_buckets": [
        # model order instead of reverse order
        """def make_buckets(sizes, cap):
    buckets, current, filled = [], [], 0
    for index in range(len(sizes)):
        if current and filled + sizes[index] > cap:
            buckets.append(current)
            current, filled = [], 0
        current.append(index)
        filled += sizes[index]
    if current:
        buckets.append(current)
    return buckets
""",
        # closes a bucket only when it overflows (>= instead of >)
        """def make_buckets(sizes, cap):
    buckets, current, filled = [], [], 0
    for index in reversed(range(len(sizes))):
        if current and filled + sizes[index] >= cap:
            buckets.append(current)
            current, filled = [], 0
        current.append(index)
        filled += sizes[index]
    if current:
        buckets.append(current)
    return buckets
""",
        # forgets the last bucket
        """def make_buckets(sizes, cap):
    buckets, current, filled = [], [], 0
    for index in reversed(range(len(sizes))):
        if current and filled + sizes[index] > cap:
            buckets.append(current)
            current, filled = [], 0
        current.append(index)
        filled += sizes[index]
    return buckets
""",
    ],
}
