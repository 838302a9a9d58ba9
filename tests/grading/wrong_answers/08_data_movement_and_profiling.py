# format: edits
"""Plausible wrong answers for lesson 08's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_conv_flops': [
        # the forward pass only
        ("""    return forward + backward""", """    return forward"""),
        # backward as expensive as the forward pass, whatever the input needs
        ("""    backward = forward * (2 if input_grad else 1)""", """    backward = forward"""),
        # always computes the input's gradient, even for the first layer
        ("""    backward = forward * (2 if input_grad else 1)""", """    backward = 2 * forward"""),
        # counts MACs, not FLOPs (forgets the factor 2)
        ("""    forward = 2 * batch * c_out""", """    forward = batch * c_out"""),
        # forgets the padding in the output size
        ("""    h_out = (height + 2 * padding - kernel) // stride + 1
    w_out = (width + 2 * padding - kernel) // stride + 1""", """    h_out = (height - kernel) // stride + 1
    w_out = (width - kernel) // stride + 1"""),
        # ignores the stride
        ("""    h_out = (height + 2 * padding - kernel) // stride + 1
    w_out = (width + 2 * padding - kernel) // stride + 1""", """    h_out = height + 2 * padding - kernel + 1
    w_out = width + 2 * padding - kernel + 1"""),
    ],
    'ex2_cache_batch': [
        # the whole network's working set must fit, as if every layer's data were in the cache at once
        ("""    best = None
    for one, two in zip(small.layers, large.layers):""", """    best = None
    from types import SimpleNamespace
    whole = lambda p: [SimpleNamespace(name="network", total_bytes=sum(x.total_bytes for x in p.layers))]
    for one, two in zip(whole(small), whole(large)):"""),
        # only the layer with the largest working set at the larger batch is checked
        ("    for one, two in zip(small.layers, large.layers):",
         "    for one, two in [max(zip(small.layers, large.layers), key=lambda pair: pair[1].total_bytes)]:"),
        # the working set taken as proportional to the batch: the weights counted once per sample
        [("per_sample = (two.total_bytes - one.total_bytes) // (b2 - b1)", "per_sample = two.total_bytes // b2"),
         ("fixed = one.total_bytes - b1 * per_sample", "fixed = 0")],
        # no check that one sample fits: the weights alone over the cache give a negative batch
        ("fits = (cache_bytes - fixed) // per_sample if cache_bytes >= fixed + per_sample else 0",
         "fits = (cache_bytes - fixed) // per_sample"),
        # the per-sample growth measured from the larger profile alone, as if the smaller batch were 0
        ("// (b2 - b1)", "// b2"),
    ],
    'ex3_accumulation': [
        # the largest micro-batch that fits, then as many steps as needed: more samples than the recipe's
        ("""    for steps in range(1, global_batch + 1):
        if global_batch % steps == 0 and global_batch // steps <= largest:   # micro-batches of equal size
            return global_batch // steps, steps
    return None""", """    if largest == 0:
        return None
    micro = min(largest, global_batch)
    return micro, -(-global_batch // micro)"""),
        # as few steps as the largest micro-batch allows, the global batch shared out and rounded down
        ("""    for steps in range(1, global_batch + 1):
        if global_batch % steps == 0 and global_batch // steps <= largest:   # micro-batches of equal size
            return global_batch // steps, steps
    return None""", """    if largest == 0:
        return None
    steps = -(-global_batch // largest)
    return global_batch // steps, steps"""),
        # the optimizer's state forgotten
        ("fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state",
         "fixed = split_at_one.parameters + split_at_one.gradients"),
        # everything counted as growing with the micro-batch
        ("largest = (budget - fixed) // split_at_one.activations if budget >= fixed else 0",
         "largest = budget // split_at_one.total"),
    ],
    'ex4_starved': [
        # rounds down: the loop still waits a little
        ("""    return math.ceil(loading / training - 1e-9)""", """    return int(loading / training)"""),
        # rounds to the nearest: one worker short whenever the fraction is below one half
        ("""    return math.ceil(loading / training - 1e-9)""", """    return round(loading / training)"""),
        # the share of the epoch spent loading, not the ratio of loading to training
        ("""    return math.ceil(loading / training - 1e-9)""", """    return math.ceil(loading / record.seconds)"""),
        # always at least one worker, even when the run never waited
        ("""    return math.ceil(loading / training - 1e-9)""",
         """    return max(1, math.ceil(loading / training - 1e-9))"""),
    ],
    'ex5_predict_run': [
        # estimate_training_for's way: one median step time, times every step (warm-up and evaluations as plain steps)
        ("""    seconds = sum(log[:warmup]) + (total_steps - warmup) * plain + evaluations * evaluation""",
         """    seconds = statistics.median(s for _, s in timed) * total_steps"""),
        # the mean of the logged steps after the warm-up: evaluations weighed as often as the log happens to hold them
        ("""    seconds = sum(log[:warmup]) + (total_steps - warmup) * plain + evaluations * evaluation""",
         """    seconds = sum(log[:warmup]) + (total_steps - warmup) * statistics.fmean(s for _, s in timed)"""),
        # an evaluation step's whole time counted as the evaluation: its training counted twice
        ("(i + 1) % eval_every == 0) - plain", "(i + 1) % eval_every == 0)"),
        # the warm-up steps timed as plain ones
        ("sum(log[:warmup]) + (total_steps - warmup) * plain", "total_steps * plain"),
    ],

    "ex6_bottleneck": [
        # ranks operators by their whole duration (inclusive of the operators they call), not self time
        ('        if enclosing:\n            self_us[enclosing[-1]["name"]] -= op["dur"]\n', ""),
        # calls a data range as long as the step "data" (starved means longer, not as long)
        ('if in_range["data"] > in_range["step"]', 'if in_range["data"] >= in_range["step"]'),
        # ranks the record_function ranges ("step", "data") as if they were operators
        ('if e["cat"] == "cpu_op"', 'if e["cat"] in ("cpu_op", "user_annotation")'),
        # ignores threads: operators of two threads that overlap in time are taken as nested
        [('key=lambda e: (e["tid"], e["ts"], -e["dur"])', 'key=lambda e: (e["ts"], -e["dur"])'),
         ('(enclosing[-1]["tid"] != op["tid"]\n                             or enclosing[-1]["ts"]',
          '(enclosing[-1]["ts"]')],
        # subtracts an operator's time from every operator around it, not only its direct caller
        ('            self_us[enclosing[-1]["name"]] -= op["dur"]',
         '            for outer in enclosing:\n                self_us[outer["name"]] -= op["dur"]'),
    ],
    "ex7_flop_rate": [
        # counts multiply-adds, not FLOPs (forgets the factor 2)
        ("return 2 * m * k * n", "return m * k * n"),
        # reads the durations as milliseconds (the Chrome trace's unit is the microsecond)
        ("* 1e-6", "* 1e-3"),
        # takes the first matrix product in the list, not the longest
        ('top = max(products, key=lambda e: e["dur"])', "top = products[0]"),
        # counts aten::linear too: its inputs are x and the weight (n x k), not two factors
        ('("aten::mm", "aten::addmm")', '("aten::mm", "aten::addmm", "aten::linear")'),
        # takes the first two input shapes: for addmm the first one is the bias
        ('''matrices = [shape for shape in top["args"]["Input Dims"] if len(shape) == 2]
    (m, k), (_, n) = matrices[-2], matrices[-1]''', '(m, k), (_, n) = top["args"]["Input Dims"][:2]'),
    ],
    'ex8_costs': [
        # a checkpointed block keeps nothing (its input forgotten)
        ("""                      "checkpointed": batch * seq_len * d_model * bytes_per_value,   # the block's input""",
         """                      "checkpointed": 0,"""),
        # the whole forward recomputed (the last product is not redone)
        ('"recompute_flops": forward - 2 * batch * seq_len * d_ff * d_model})',
         '"recompute_flops": forward})'),
        # the checkpointed input counted in fp32 whatever the values' bytes
        ("""                      "checkpointed": batch * seq_len * d_model * bytes_per_value,   # the block's input""",
         """                      "checkpointed": batch * seq_len * d_model * 4,"""),
        # a training step's FLOPs of the block (forward and backward) taken as its recomputation
        ('"recompute_flops": forward - 2 * batch * seq_len * d_ff * d_model})',
         '"recompute_flops": 3 * forward})'),
    ],
    'ex8_plan': [
        # greedy: the most bytes saved per recomputed FLOP first, until it fits
        ("""    best = None
    for plan in itertools.product((False, True), repeat=len(costs)):
        kept = sum(c["checkpointed"] if p else c["activations"] for c, p in zip(costs, plan))
        flops = sum(c["recompute_flops"] for c, p in zip(costs, plan) if p)
        if kept <= budget and (best is None or flops < best[0]):
            best = (flops, list(plan))
    return None if best is None else best[1]""",
         """    plan = [False] * len(costs)
    kept = sum(c["activations"] for c in costs)
    order = sorted(range(len(costs)),
                   key=lambda i: -(costs[i]["activations"] - costs[i]["checkpointed"]) / costs[i]["recompute_flops"])
    for i in order:
        if kept <= budget:
            break
        plan[i] = True
        kept -= costs[i]["activations"] - costs[i]["checkpointed"]
    return plan if kept <= budget else None"""),
        # checkpoint from the first block on until it fits
        ("""    best = None
    for plan in itertools.product((False, True), repeat=len(costs)):""",
         """    for k in range(len(costs) + 1):
        plan = [i < k for i in range(len(costs))]
        if sum(c["checkpointed"] if p else c["activations"] for c, p in zip(costs, plan)) <= budget:
            return plan
    return None
    best = None
    for plan in itertools.product((False, True), repeat=len(costs)):"""),
        # a checkpointed block counted as keeping nothing
        ("""        kept = sum(c["checkpointed"] if p else c["activations"] for c, p in zip(costs, plan))""",
         """        kept = sum(0 if p else c["activations"] for c, p in zip(costs, plan))"""),
        # the budget must not be reached, only approached
        ("if kept <= budget and", "if kept < budget and"),
        # nothing fits: checkpoint everything anyway
        ("    return None if best is None else best[1]", "    return [True] * len(costs) if best is None else best[1]"),
    ],
}


# The shortest answer a student who reads course_lib would submit: the closest library call.
LIBRARY_CALLS = {
    # course_lib's FLOP counter on the layer: the forward pass only
    'ex1_conv_flops': ("""    h_out = (height + 2 * padding - kernel) // stride + 1
    w_out = (width + 2 * padding - kernel) // stride + 1
    forward = 2 * batch * c_out * h_out * w_out * c_in * kernel * kernel
    backward = forward * (2 if input_grad else 1)   # weight gradient, and input gradient if needed
    return forward + backward""",
                       "    return profile.counter_flops(nn.Conv2d(c_in, c_out, kernel, stride, padding), "
                       "(batch, c_in, height, width))"),
    # course_lib's profile of the larger batch: its largest layer, scaled as if it grew in proportion to the batch
    'ex2_cache_batch': ("""    b1, b2 = small.input_shape[0], large.input_shape[0]""",
                        """    layer = large.largest
    return cache_bytes * large.input_shape[0] // layer.total_bytes, layer.name
    b1, b2 = small.input_shape[0], large.input_shape[0]"""),
    # course_lib's largest batch for LeNet with Adam, whatever split it is given, then the fewest equal steps
    'ex3_accumulation': ("""    largest = (budget - fixed) // split_at_one.activations if budget >= fixed else 0""",
                         """    from course_lib.models import LeNet
    largest = training_memory.largest_batch_under(LeNet(), (1, 28, 28), budget)"""),
    # the record's data_fraction turned into a count: one worker too many
    'ex4_starved': ("""    loading = record.data_seconds
    training = record.seconds - record.data_seconds
    return math.ceil(loading / training - 1e-9)   # w workers keep up once w * training >= loading""",
                    """    return round(1 / (1 - record.data_fraction))"""),
    # course_lib's TrainingEstimate: the median step after the warm-up, times every step of the run
    'ex5_predict_run': ("""    evaluations = total_steps // eval_every""",
                        """    from course_lib.train import TrainingEstimate
    median = statistics.median(s for _, s in timed)
    estimate = TrainingEstimate(median, len(timed), warmup, 0, total_steps, 1, "cpu")
    return {"seconds": estimate.total_seconds, "evaluation_seconds": 0.0}
    evaluations = total_steps // eval_every"""),
    # course_lib.trace's operator totals: inclusive time, not self time
    'ex6_bottleneck': ("""    complete = [e for e in events if e.get("ph") == "X"]""",
                       """    from course_lib import trace

    loaded = trace.load_trace({"traceEvents": events}).events
    seconds = trace.summarise_ranges(loaded).seconds
    if seconds.get("data", 0.0) > seconds.get("step", 0.0):
        return "data"
    return trace.summarise_ops(loaded)[0].name
    complete = [e for e in events if e.get("ph") == "X"]"""),
    # course_lib.trace's loaded events: the longest operator of any kind, not the longest product
    'ex7_flop_rate': ('    products = [e for e in events if e.get("ph") == "X" '
                      'and e["name"] in ("aten::mm", "aten::addmm")]\n'
                      '    top = max(products, key=lambda e: e["dur"])\n'
                      '    matrices = [shape for shape in top["args"]["Input Dims"] if len(shape) == 2]\n'
                      '    (m, k), (_, n) = matrices[-2], matrices[-1]\n'
                      '    return 2 * m * k * n / (top["dur"] * 1e-6)',
                      '    from course_lib import trace\n'
                      '\n'
                      '    top = trace.summarise_ops(trace.load_trace(events).events)[0]   '
                      '# the operator with the most time\n'
                      '    matrices = [shape for e in events if e.get("name") == top.name '
                      'for shape in e["args"]["Input Dims"] if len(shape) == 2]\n'
                      '    (m, k), (_, n) = matrices[-2], matrices[-1]\n'
                      '    return 2 * m * k * n / (top.total_us / top.calls * 1e-6)'),
    # the fp32 measurement of the lecture's module (bytes_per_value ignored)
    'ex8_costs': ("""    costs = []
    for n_heads, d_ff in specs:""",
                  """    return activation_checkpointing.measured_costs(
        activation_checkpointing.BlockStack(d_model, specs), torch.randn(batch, seq_len, d_model))
    costs = []
    for n_heads, d_ff in specs:"""),
    # the lecture's plan: checkpoint from the first block until it fits
    'ex8_plan': ("""    best = None
    for plan in itertools.product((False, True), repeat=len(costs)):""",
                 """    return activation_checkpointing.checkpoint_from_first(costs, budget)
    best = None
    for plan in itertools.product((False, True), repeat=len(costs)):"""),
}
