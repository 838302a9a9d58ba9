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
    'ex2_linear_ws': [
        # forgets the bias
        ("""    weights = (in_features * out_features + out_features) * bytes_per_value""",
         """    weights = in_features * out_features * bytes_per_value"""),
        # counts the weights once per sample, as if they grew with the batch
        ("""    per_sample = (in_features + out_features) * bytes_per_value""",
         "    per_sample = (in_features + out_features + in_features * out_features + out_features) "
         "* bytes_per_value"),
        # counts values, not bytes
        ("""    weights = (in_features * out_features + out_features) * bytes_per_value
    per_sample = (in_features + out_features) * bytes_per_value""",
         """    weights = in_features * out_features + out_features
    per_sample = in_features + out_features"""),
        # forgets the output: only the input grows with the batch
        ("""    per_sample = (in_features + out_features) * bytes_per_value""",
         """    per_sample = in_features * bytes_per_value"""),
        # no check that the weights fit: a negative batch
        ("""    if cache_bytes < weights + per_sample:
        return 0
""", ""),
    ],
    'ex3_budget': [
        # forgets the optimizer state
        ("""split_at_one.gradients + split_at_one.optimizer_state
    if budget < fixed + split_at_one.activations:
        return 0
    return (budget - fixed) // split_at_one.activations""", """split_at_one.gradients
    return max(0, (budget - fixed) // split_at_one.activations)"""),
        # rounds up: one sample too many
        [('def largest_batch(split_at_one, budget):', """import math


def largest_batch(split_at_one, budget):"""),
         ("""if budget < fixed + split_at_one.activations:
        return 0
    return (budget - fixed) // split_at_one.activations""",
          'return max(0, math.ceil((budget - fixed) / split_at_one.activations))')],
        # divides the whole budget by the per-sample total
        ("""fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
    if budget < fixed + split_at_one.activations:
        return 0
    return (budget - fixed) // split_at_one.activations""",
         """per_sample = (split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
                  + split_at_one.activations)
    return budget // per_sample"""),
        # negative result when even the weights do not fit
        ("""def largest_batch(split_at_one, budget):
    fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
    if budget < fixed + split_at_one.activations:
        return 0
    return (budget - fixed) // split_at_one.activations""", """def largest_batch(split_at_one, budget):
    fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
    return (budget - fixed) // split_at_one.activations"""),
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
    'ex5_estimate': [
        # mean instead of median
        ('statistics.median(step_seconds[warmup:])', 'statistics.mean(step_seconds[warmup:])'),
        # keeps the warm-up steps
        ('statistics.median(step_seconds[warmup:])', 'statistics.median(step_seconds)'),
        # drops one step too many
        ('statistics.median(step_seconds[warmup:])', 'statistics.median(step_seconds[warmup + 1:])'),
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
    # course_lib's largest batch under a budget: a training step's memory (weights, gradients,
    # Adam state, activations), not the layer's working set
    'ex2_linear_ws': ("""    weights = (in_features * out_features + out_features) * bytes_per_value
    per_sample = (in_features + out_features) * bytes_per_value
    if cache_bytes < weights + per_sample:
        return 0
    return (cache_bytes - weights) // per_sample""",
                      "    return training_memory.largest_batch_under(nn.Linear(in_features, out_features), "
                      "(in_features,), cache_bytes)"),
    # course_lib's largest batch for LeNet, whatever split it is given
    'ex3_budget': ("""    fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
    if budget < fixed + split_at_one.activations:
        return 0
    return (budget - fixed) // split_at_one.activations""", """    from course_lib.models import LeNet
    return training_memory.largest_batch_under(LeNet(), (1, 28, 28), budget)"""),
    # the record's data_fraction turned into a count: one worker too many
    'ex4_starved': ("""    loading = record.data_seconds
    training = record.seconds - record.data_seconds
    return math.ceil(loading / training - 1e-9)   # w workers keep up once w * training >= loading""",
                    """    return round(1 / (1 - record.data_fraction))"""),
    # course_lib's TrainingEstimate with the mean step time
    'ex5_estimate': ("""    return statistics.median(step_seconds[warmup:]) * steps_per_epoch * epochs""",
                     """    from course_lib.train import TrainingEstimate
    return TrainingEstimate(statistics.fmean(step_seconds[warmup:]), len(step_seconds) - warmup, warmup, 0,
                            steps_per_epoch, epochs, "cpu").total_seconds"""),
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
