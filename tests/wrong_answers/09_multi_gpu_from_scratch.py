# format: edits
"""Plausible wrong answers for lesson 09's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_split': [
        # splits the rows into pieces of k rows instead of k pieces
        ("""zip(X.chunk(k), devices)]
    ys = [t.to(d) for t, d in zip(y.chunk(k),""", """zip(X.split(k), devices)]
    ys = [t.to(d) for t, d in zip(y.split(k),"""),
        # splits along the feature dimension
        ('zip(X.chunk(k),', 'zip(X.chunk(k, dim=1),'),
        # forgets to check the lengths
        ("""def split_batch(X, y, devices):
    if X.shape[0] != y.shape[0]:
        raise ValueError("X and y differ in length")
    k = len(devices)
    Xs = [x.to(d) for x, d in zip(X.chunk(k), devices)]
    ys = [t.to(d) for t, d in zip(y.chunk(k), devices)]
    return Xs, ys""", """def split_batch(X, y, devices):
    k = len(devices)
    Xs = [x.to(d) for x, d in zip(X.chunk(k), devices)]
    ys = [t.to(d) for t, d in zip(y.chunk(k), devices)]
    return Xs, ys"""),
    ],
    'ex2_allreduce': [
        # sums into the first tensor but never broadcasts the sum back
        ("""def allreduce(tensors):
    total = tensors[0].clone()
    for t in tensors[1:]:
        total += t.to(total.device)
    for t in tensors:
        t.copy_(total.to(t.device))""", """def allreduce(tensors):
    for t in tensors[1:]:
        tensors[0] += t.to(tensors[0].device)"""),
        # averages instead of summing
        ('t.copy_(total.to(t.device))', 't.copy_(total.to(t.device) / len(tensors))'),
        # accumulates in place on tensor 0, so later copies double-count it
        [('tensors[0].clone()', 'tensors[0]'),
         ("""tensors:
        t.copy_(total.to(t.device))""", """tensors[1:]:
        t += total.to(t.device)""")],
    ],
    'ex3_train': [
        # divides by the slice size: the gradient is k times too large
        ('len(X)', 'len(xs)'),
        # forgets the allreduce: replicas drift apart
        ("""def train_batch(replicas, X, y, devices, lr):
    Xs, ys = split_batch(X, y, devices)
    total = 0.0
    for replica, xs, ts in zip(replicas, Xs, ys):
        replica.zero_grad()
        loss = F.cross_entropy(replica(xs), ts, reduction="sum") / len(X)
        loss.backward()
        total += float(loss.detach())
    for params in zip(*(r.parameters() for r in replicas)):
        allreduce([p.grad for p in params])
    with torch.no_grad():
        for replica in replicas:
            for p in replica.parameters():
                p -= lr * p.grad
    return total""", """def train_batch(replicas, X, y, devices, lr):
    Xs, ys = split_batch(X, y, devices)
    total = 0.0
    for replica, xs, ts in zip(replicas, Xs, ys):
        replica.zero_grad()
        loss = F.cross_entropy(replica(xs), ts, reduction="sum") / len(X)
        loss.backward()
        total += float(loss.detach())
    with torch.no_grad():
        for replica in replicas:
            for p in replica.parameters():
                p -= lr * p.grad
    return total"""),
        # never zeroes the gradients: they accumulate over steps
        ("""def train_batch(replicas, X, y, devices, lr):
    Xs, ys = split_batch(X, y, devices)
    total = 0.0
    for replica, xs, ts in zip(replicas, Xs, ys):
        replica.zero_grad()
        loss = F.cross_entropy(replica(xs), ts, reduction="sum") / len(X)
        loss.backward()
        total += float(loss.detach())
    for params in zip(*(r.parameters() for r in replicas)):
        allreduce([p.grad for p in params])
    with torch.no_grad():
        for replica in replicas:
            for p in replica.parameters():
                p -= lr * p.grad
    return total""", """def train_batch(replicas, X, y, devices, lr):
    Xs, ys = split_batch(X, y, devices)
    total = 0.0
    for replica, xs, ts in zip(replicas, Xs, ys):
        loss = F.cross_entropy(replica(xs), ts, reduction="sum") / len(X)
        loss.backward()
        total += float(loss.detach())
    for params in zip(*(r.parameters() for r in replicas)):
        allreduce([p.grad for p in params])
    with torch.no_grad():
        for replica in replicas:
            for p in replica.parameters():
                p -= lr * p.grad
    return total"""),
    ],
    'ex4_scale': [
        # keeps the learning rate
        ('base_lr * k', 'base_lr'),
        # splits the batch instead of growing it
        ('    return base_batch * k, base_lr * k', '    return base_batch // k, base_lr * k'),
        # square-root scaling
        ('    return base_batch * k, base_lr * k', '    return base_batch * k, base_lr * k ** 0.5'),
    ],
}
