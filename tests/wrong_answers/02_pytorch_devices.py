# format: edits
"""Plausible wrong answers for lesson 02's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_to_self': [
        # the old reference's slip: "cuda" without an index taken as any GPU, so a tensor on
        # cuda:1 would be predicted to stay put
        ('    # "cuda" without an index means the current GPU, index 0 here\n    return (device.index or 0) == (here.index or 0)',
         '    if device.index is None or here.index is None:\n        return True\n    return device.index == here.index'),
        # ignores the dtype: a dtype change also needs a new tensor
        ("""if dtype is not None and dtype != tensor.dtype:
        return False
    if device is None:
        return True
    device = torch.device(device)
    here = tensor.device
    if device.type != here.type:
        return False
    # "cuda" without an index means the current GPU, index 0 here
    return (device.index or 0) == (here.index or 0)""", 'return device is None or torch.device(device) == tensor.device'),
        # treats "no device given" as a move
        [('dtype is not None and dtype != tensor.dtype:', 'device is None:'),
         ("""if device is None:
        return True
    device = torch.device(device)
    here = tensor.device
    if device.type != here.type:
        return False
    # "cuda" without an index means the current GPU, index 0 here
    return (device.index or 0) == (here.index or 0)""", 'return torch.device(device) == tensor.device and (dtype is None or dtype == tensor.dtype)')],
        # the answer inverted: True when a copy is made
        ("""if dtype is not None and dtype != tensor.dtype:
        return False
    if device is None:
        return True
    device = torch.device(device)
    here = tensor.device
    if device.type != here.type:
        return False
    # "cuda" without an index means the current GPU, index 0 here
    return (device.index or 0) == (here.index or 0)""", """same_device = device is None or torch.device(device) == tensor.device
    same_dtype = dtype is None or dtype == tensor.dtype
    return not (same_device and same_dtype)"""),
    ],
    'ex2_standardize': [
        # the bug left in place: CPU float32 total
        ('x.new_zeros(x.shape[1])', 'torch.zeros(x.shape[1])'),
        # half fixed: right device, but still float32, which loses digits of float64 inputs
        ('x.new_zeros(x.shape[1])', 'torch.zeros(x.shape[1], device=x.device)'),
        # sample (n - 1) standard deviation instead of the population one
        ('2).mean(dim=0)', '2).sum(dim=0) / (x.shape[0] - 1)'),
    ],
    'ex3_step': [
        # forgets to move the batch to the model's device
        ("""def train_step(model, inputs, targets, optimizer):
    device = next(model.parameters()).device
    inputs, targets = inputs.to(device), targets.to(device)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()""", """def train_step(model, inputs, targets, optimizer):
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()"""),
        # returns a Python float: a synchronisation on a GPU, an error on meta
        ('loss.detach()', 'loss.item()'),
        # never takes the optimizer step
        ("""def train_step(model, inputs, targets, optimizer):
    device = next(model.parameters()).device
    inputs, targets = inputs.to(device), targets.to(device)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()""", """def train_step(model, inputs, targets, optimizer):
    device = next(model.parameters()).device
    inputs, targets = inputs.to(device), targets.to(device)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    return loss.detach()"""),
        # returns the loss still attached to the graph (keeps every step's graph alive)
        ('return loss.detach()', 'return loss'),
    ],
    'ex4_fit': [
        # the slope taken as the bandwidth (it is seconds per byte)
        ('float(1.0 / slope)', 'float(slope)'),
        # the latency forgotten in the prediction
        ('copies * latency + nbytes', 'nbytes'),
        # the latency paid once, however many copies
        ('copies * latency', 'latency'),
        # the library's link model: one transfer, so the copies' latencies are lost
        ('    return copies * latency + nbytes / bandwidth',
         '    from course_lib.parallel.collectives import transfer_seconds\n    return transfer_seconds(nbytes, bandwidth, latency)'),
    ],
}
