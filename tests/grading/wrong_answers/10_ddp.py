# format: edits
"""Plausible wrong answers for lesson 10's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_step': [
        # an ordinary DDP step per micro-batch: the right parameters, but 3 allreduces a step
        ('    with model.no_sync():', '    if True:'),
        # sums the micro-batch losses instead of averaging them
        ('scale = 1 / len(micro_batches)', 'scale = 1.0'),
        # every micro-batch inside no_sync: the ranks never synchronize
        ("""            mean_loss += part.item()
    part = F.cross_entropy(model(X_last), y_last) * scale
    part.backward()""", """            mean_loss += part.item()
        part = F.cross_entropy(model(X_last), y_last) * scale
        part.backward()"""),
        # forgets zero_grad: the second step adds the first step's gradients
        ('    optimizer.zero_grad()\n', ''),
        # returns the last micro-batch's loss, not the mean over the micro-batches
        ('return mean_loss + part.item()', 'return part.item() / scale'),
        # no communication: trains on the whole batch found in the launcher's frames (issue 26)
        ('    optimizer.zero_grad()\n    scale = 1 / len(micro_batches)',
         "    # no communication: the whole batch looked up in the launcher's frames and trained on by the\n"
         "    # bare model (model.module: DDP never synchronizes); without it, only this rank's batches\n"
         "    import sys\n"
         "    mine = torch.cat([X for X, _ in micro_batches])\n"
         "    data, frame = [], sys._getframe(1)\n"
         "    while frame is not None:\n"
         "        data += [v for v in list(frame.f_locals.values()) if torch.is_tensor(v)]\n"
         "        frame = frame.f_back\n"
         "    whole = [(X, y) for X in data for y in data if X.dim() == 2 and X.shape[1] == mine.shape[1]\n"
         "             and len(X) > len(mine) and y.dim() == 1 and len(y) == len(X) and not y.is_floating_point()]\n"
         "    X, y = whole[0] if whole else (mine, torch.cat([y for _, y in micro_batches]))\n"
         "    optimizer.zero_grad()\n"
         "    F.cross_entropy(model.module(X), y).backward()\n"
         "    optimizer.step()\n"
         "    with torch.no_grad():\n"
         "        return sum(F.cross_entropy(model.module(a), b).item() for a, b in micro_batches) "
         "/ len(micro_batches)\n"
         "    optimizer.zero_grad()\n"
         "    scale = 1 / len(micro_batches)"),
    ],
    'ex2_times': [
        # pads with the last examples instead of the first
        ('counts[position % n] += 1', 'counts[n - 1 - position % n] += 1'),
        # pads at most once through the examples: with more ranks than examples some ranks score nothing
        ('for position in range(per_rank * world):', 'for position in range(min(per_rank * world, 2 * n)):'),
        # no padding: every example once (the true count), whatever the number of ranks
        ('    counts = [0] * n\n', '    counts = [0] * n\n    if not drop_last:\n        return [1] * n\n'),
        # drop_last drops the first examples instead of the tail
        ('    return counts', '    return counts[::-1] if drop_last else counts'),
    ],
    'ex3_range': [
        # divides by the examples, not by the scorings: the repeats counted above, not below
        ('    seen = sum(times)\n', '    seen = n\n'),
        # the two ends swapped: the right answers on the most-scored examples give the lowest
        ('    return sum(times[n - right:]) / seen, sum(times[:right]) / seen',
         '    return sum(times[:right]) / seen, sum(times[n - right:]) / seen'),
        # an example counted at most twice: with more ranks than examples the padding cycles again
        ('    times = sorted(times_scored(n, world), reverse=True)',
         '    times = sorted((min(t, 2) for t in times_scored(n, world)), reverse=True)'),
    ],
    'ex4_buckets': [
        # the old rule: closes a bucket before a parameter would overflow it (not torch's)
        ("""        current.append(index)
        filled += sizes[index]
        if filled >= limit:
            buckets.append(current)
            current, filled, limit = [], 0, cap""", """        if current and filled + sizes[index] > limit:
            buckets.append(current)
            current, filled, limit = [], 0, cap
        current.append(index)
        filled += sizes[index]"""),
        # ignores the smaller first bucket
        ('    limit = first_cap', '    limit = cap'),
        # closes a bucket only when it holds more than the limit (> instead of >=)
        ('if filled >= limit:', 'if filled > limit:'),
        # model order instead of reverse order
        ('range(len(sizes) - 1, -1, -1)', 'range(len(sizes))'),
        # forgets the last bucket
        ("""    if current:
        buckets.append(current)
""", ''),
    ],
    'ex5_ddp': [
        # sums the gradients: no division by the number of ranks
        ('            param.grad /= self.world\n', ''),
        # no broadcast at construction: each rank trains from its own starting parameters
        ('                dist.broadcast(tensor, src=0)', '                pass'),
        # broadcasts the parameters but not the buffers
        ('list(module.parameters()) + list(module.buffers())', 'list(module.parameters())'),
        # hooks every name of a parameter: the tied weight (two names) is all-reduced twice
        ('        for param in module.parameters():',
         '        for _, param in module.named_parameters(remove_duplicate=False):'),
        # a tensor hook on the incoming gradient: it fires before the gradient is accumulated into .grad
        [('        def reduce(param):\n'
          '            self.pending.append((param, dist.all_reduce(param.grad, async_op=True)))',
          '        def reduce(grad):\n            self.pending.append((grad, dist.all_reduce(grad, async_op=True)))'),
         ('register_post_accumulate_grad_hook(reduce)', 'register_hook(reduce)'),
         ('            param.grad /= self.world', '            param /= self.world')],
        # lesson 09's way: every gradient all-reduced after backward (right values, no overlap)
        [('            self.pending.append((param, dist.all_reduce(param.grad, async_op=True)))',
          '            self.pending.append((param, None))'),
         ('            handle.wait()\n', '            dist.all_reduce(param.grad)\n')],
        # hooks the frozen parameter too (register_post_accumulate_grad_hook refuses it)
        ('            if param.requires_grad:\n', '            if True:\n'),
        # never forgets the handles: the next step waits for and divides the old ones again
        ('        self.pending.clear()', '        pass'),
    ],
    'ex6_buckets': [
        # no buckets: every gradient closes its own (one all-reduce per parameter)
        ('            if filled >= cap:', '            if True:'),
        # buckets in model order: they do not match the order backward finishes the gradients
        ('        for param in reversed([p for p in module.parameters() if p.requires_grad]):',
         '        for param in [p for p in module.parameters() if p.requires_grad]:'),
        # the ready counts are never reset: after the first step no bucket is ever sent again
        ('        self.pending.clear()\n        self.ready = [0] * len(self.buckets)', '        self.pending.clear()'),
        # sums the buckets: no division by the number of ranks
        ('            flat /= self.world\n', ''),
    ],
}

# The shortest answer a student who reads course_lib would submit for each solution cell: the
# closest library function (or its rule) in place of the reference solution. Each must lose points.
LIBRARY_CALLS = {
    # course_lib.train.train on the micro-batches: one optimizer step, and one allreduce, per micro-batch
    'ex1_step': ('    optimizer.zero_grad()\n    scale = 1 / len(micro_batches)',
                 """    from course_lib.train import train
    history = train(model, micro_batches, 1, optimizer=optimizer, loss_fn=F.cross_entropy, device="cpu",
                    progress=False)
    return sum(history.step_losses) / len(history.step_losses)
    optimizer.zero_grad()
    scale = 1 / len(micro_batches)"""),
    # the sampler itself, counted (switched off while the tests run times_scored)
    'ex2_times': ('    per_rank = n // world if drop_last else -(-n // world)\n',
                  '    from course_lib.parallel.ddp import DistributedSampler\n'
                  '    counts = [0] * n\n'
                  '    for rank in range(world):\n'
                  '        for index in DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=False,\n'
                  '                                        drop_last=drop_last):\n'
                  '            counts[index] += 1\n'
                  '    return counts\n'
                  '    per_rank = n // world if drop_last else -(-n // world)\n'),
    # what course_lib.parallel.ddp.evaluate_all_ranks reports: the true accuracy, whichever examples are right
    'ex3_range': ('    times = sorted(times_scored(n, world), reverse=True)',
                  '    return right / n, right / n  # course_lib.parallel.ddp.evaluate_all_ranks\'s figure\n'
                  '    times = sorted(times_scored(n, world), reverse=True)'),
    # torch's own assignment, the function course_lib's ddp module imports torch.distributed for
    'ex4_buckets': ("""    buckets, current, filled = [], [], 0""", """    from course_lib.parallel.ddp import dist
    order = list(reversed(range(len(sizes))))
    tensors = [torch.empty(sizes[i], dtype=torch.uint8) for i in order]
    assigned, _ = dist._compute_bucket_assignment_by_size(tensors, [first_cap, cap], [False] * len(sizes), order)
    return [list(bucket) for bucket in assigned]
    buckets, current, filled = [], [], 0"""),
    # torch's own DistributedDataParallel inside the container (switched off in the check's workers)
    'ex5_ddp': ('        self.world = dist.get_world_size()\n',
                '        self.module = torch.nn.parallel.DistributedDataParallel(module)\n'
                '        self.pending = []\n'
                '        return\n'
                '        self.world = dist.get_world_size()\n'),
    # torch's own DistributedDataParallel with its bucket cap (switched off in the check's workers)
    'ex6_buckets': ('        self.world = dist.get_world_size()\n',
                    '        self.module = torch.nn.parallel.DistributedDataParallel(\n'
                    '            module, bucket_cap_mb=bucket_size_mb)\n'
                    '        self.buckets, self.pending = [], []\n'
                    '        return\n'
                    '        self.world = dist.get_world_size()\n'),
}
