# format: edits
"""Plausible wrong answers for lesson 13's exercises, as edits of the reference solutions;
each must lose points."""

WRONG_ANSWERS = {
    "ex1_zero_bytes": [
        # stage 2 forgets to shard the gradients (only stage 3 does)
        ("    if stage >= 2:\n        grads /= n_ranks", "    if stage >= 3:\n        grads /= n_ranks"),
        # always Adam's 12 bytes, whatever k says
        ("2 * n_params, k * n_params", "2 * n_params, 12 * n_params"),
        # stage 1 shards the gradients as well as the optimizer state
        ("    if stage >= 1:\n        optimizer /= n_ranks", "    if stage >= 1:\n        optimizer /= n_ranks\n        grads /= n_ranks"),
        # counts the fp32 master copy on top of k
        ("2 * n_params, k * n_params", "2 * n_params, (k + 4) * n_params"),
    ],
    "ex2_column": [
        # torch.chunk makes blocks of 3, 3, 1 for 7 features on 3 ranks, not 3, 2, 2
        ("torch.tensor_split(torch.arange(weight.shape[0]), world_size)", "torch.arange(weight.shape[0]).chunk(world_size)"),
        # splits the input features (the row-parallel split) instead of the output features
        ("w = weight[block]", "w = weight[:, block]"),
        # every rank adds the whole bias
        ("b = None if bias is None else bias[block]", "b = bias"),
    ],
    "ex3_bubble": [
        # idle steps over micro-batches, not over the whole schedule
        ("(p - 1) / (m + p - 1)", "(p - 1) / m"),
        # one step too many in the schedule's length
        ("(p - 1) / (m + p - 1)", "(p - 1) / (m + p)"),
    ],
    "ex3_1f1b": [
        # one warm-up forward too many
        ("warmup = min(p - 1 - s, m)", "warmup = min(p - s, m)"),
        # more warm-up forwards than micro-batches when p > m + 1
        ("warmup = min(p - 1 - s, m)", "warmup = p - 1 - s"),
        # the backward before the forward in the steady state
        ('            ops.append(("F", i))\n            ops.append(("B", i - warmup))',
         '            ops.append(("B", i - warmup))\n            ops.append(("F", i))'),
        # GPipe instead of 1F1B
        ("warmup = min(p - 1 - s, m)", "warmup = m"),
    ],
    "ex4_sharded_step": [
        # sums the gradients instead of averaging them
        ("    grad_shard /= world\n", ""),
        # updates the momentum with this rank's own gradient, not the reduced one
        ("momentum.mul_(beta).add_(grad_shard[:hi - lo])", "momentum.mul_(beta).add_(grad[lo:hi])"),
        # never all-gathers: the other ranks' parts of param stay old
        ("param.copy_(gathered[:n])", "param[lo:hi] = new_shard[:hi - lo]"),
        # no communication: every rank's gradient looked up in this process (the launcher's frames,
        # gc.get_objects()), the full momentum kept across steps; the sharded step never runs (issue 26)
        ('    rank, world = dist.get_rank(), dist.get_world_size()', "    # no communication: find every rank's gradient in this process (frames, gc, files)\n    import gc, os, pickle, sys\n    rank, world = dist.get_rank(), dist.get_world_size()\n    found = []\n\n    def look(obj, depth=0):\n        if isinstance(obj, (list, tuple)):\n            if (len(obj) == world and all(torch.is_tensor(t) and t.shape == grad.shape for t in obj)\n                    and any(torch.equal(t, grad) for t in obj)):\n                found.append(obj)\n            elif depth < 6:\n                for item in obj:\n                    look(item, depth + 1)\n        elif depth < 6 and isinstance(obj, dict):\n            for item in list(obj.values()):\n                look(item, depth + 1)\n\n    frames, frame = [], sys._getframe(1)\n    while frame is not None:\n        frames.append(frame)\n        frame = frame.f_back\n    for frame in reversed(frames):  # the launcher's first: every rank's data\n        look(dict(frame.f_locals))\n    for obj in gc.get_objects() if not found else ():\n        if isinstance(obj, list) and len(obj) == world:\n            look(obj, 3)\n    mean = torch.stack(list(found[0])).mean(0) if found else grad\n    full = sharded_momentum_step.__dict__.setdefault('full', {})\n    m = full.get(id(param), torch.zeros_like(param)) * beta + mean\n    full[id(param)] = m\n    n = param.numel()\n    s = -(-n // world)\n    lo, hi = min(rank * s, n), min((rank + 1) * s, n)\n    momentum.copy_(m[lo:hi])\n    param.sub_(lr * m)\n    return\n    rank, world = dist.get_rank(), dist.get_world_size()"),
    ],
}
