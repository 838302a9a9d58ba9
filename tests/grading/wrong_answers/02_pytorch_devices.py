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
        ('    # "cuda" without an index means the current GPU, index 0 here\n'
         '    return (device.index or 0) == (here.index or 0)',
         '    if device.index is None or here.index is None:\n'
         '        return True\n'
         '    return device.index == here.index'),
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
    return (device.index or 0) == (here.index or 0)""",
         'return device is None or torch.device(device) == tensor.device'),
        # treats "no device given" as a move
        [('dtype is not None and dtype != tensor.dtype:', 'device is None:'),
         ("""if device is None:
        return True
    device = torch.device(device)
    here = tensor.device
    if device.type != here.type:
        return False
    # "cuda" without an index means the current GPU, index 0 here
    return (device.index or 0) == (here.index or 0)""",
          'return torch.device(device) == tensor.device and (dtype is None or dtype == tensor.dtype)')],
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
    return (device.index or 0) == (here.index or 0)""",
         """same_device = device is None or torch.device(device) == tensor.device
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
    ],
}

# The shortest answer a student who reads course_lib would submit: the reference solution
# replaced by a call into the closest library function. Each must lose points.
LIBRARY_CALLS = {
    # devices.same_storage on the result of .to(): calls .to() (which stand-ins cannot), and a
    # CPU copy would be needed to predict a move to another GPU
    'ex1_to_self': ('''    if dtype is not None and dtype != tensor.dtype:
        return False
    if device is None:
        return True
    device = torch.device(device)
    here = tensor.device
    if device.type != here.type:
        return False
    # "cuda" without an index means the current GPU, index 0 here
    return (device.index or 0) == (here.index or 0)''', '''    from course_lib.devices import same_storage
    return same_storage(tensor, tensor.to(device, dtype))'''),
    # the running total on the course's default device: the CPU here, float32, whatever x is
    'ex2_standardize': ('x.new_zeros(x.shape[1])',
                        'torch.zeros(x.shape[1], device=__import__("course_lib.devices").devices.default_device())'),
    # train.train on a one-batch loader: moves the model to the default device and returns a History
    'ex3_step': ('''    device = next(model.parameters()).device
    inputs, targets = inputs.to(device), targets.to(device)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()''', '''    from course_lib.train import train
    return train(model, [(inputs, targets)], optimizer=optimizer, loss_fn=torch.nn.functional.mse_loss,
                 progress=False)'''),
    # the ring model's fit (two ranks halve the latency) and the one-transfer link model
    'ex4_fit': [('''    slope, intercept = np.polyfit(np.asarray(nbytes, float), np.asarray(seconds, float), 1)
    return float(intercept), float(1.0 / slope)''',
                 '''    from course_lib.parallel.collectives import fit_latency_bandwidth
    return fit_latency_bandwidth(np.asarray(nbytes, float) / 4, seconds, 2)'''),
                ('    return copies * latency + nbytes / bandwidth',
                 '    from course_lib.parallel.collectives import transfer_seconds\n'
                 '    return transfer_seconds(nbytes, bandwidth, latency)')],
}
