"""Plausible wrong answers for lesson 02's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_to_self": [
        # ignores the dtype: a dtype change also needs a new tensor
        """def to_returns_self(tensor, device=None, dtype=None):
    return device is None or torch.device(device) == tensor.device
""",
        # treats "no device given" as a move
        """def to_returns_self(tensor, device=None, dtype=None):
    if device is None:
        return False
    return torch.device(device) == tensor.device and (dtype is None or dtype == tensor.dtype)
""",
        # the answer inverted: True when a copy is made
        """def to_returns_self(tensor, device=None, dtype=None):
    same_device = device is None or torch.device(device) == tensor.device
    same_dtype = dtype is None or dtype == tensor.dtype
    return not (same_device and same_dtype)
""",
    ],
    "ex2_standardize": [
        # the bug left in place: CPU float32 total
        """def standardize(x, eps=1e-5):
    total = torch.zeros(x.shape[1])
    total += x.sum(dim=0)
    mean = total / x.shape[0]
    var = ((x - mean) ** 2).mean(dim=0)
    return (x - mean) / (var.sqrt() + eps)
""",
        # half fixed: right device, but still float32, which loses digits of float64 inputs
        """def standardize(x, eps=1e-5):
    total = torch.zeros(x.shape[1], device=x.device)
    total += x.sum(dim=0)
    mean = total / x.shape[0]
    var = ((x - mean) ** 2).mean(dim=0)
    return (x - mean) / (var.sqrt() + eps)
""",
        # sample (n - 1) standard deviation instead of the population one
        """def standardize(x, eps=1e-5):
    total = x.new_zeros(x.shape[1])
    total += x.sum(dim=0)
    mean = total / x.shape[0]
    var = ((x - mean) ** 2).sum(dim=0) / (x.shape[0] - 1)
    return (x - mean) / (var.sqrt() + eps)
""",
    ],
    "ex3_step": [
        # forgets to move the batch to the model's device
        """def train_step(model, inputs, targets, optimizer):
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()
""",
        # returns a Python float: a synchronisation on a GPU, an error on meta
        """def train_step(model, inputs, targets, optimizer):
    device = next(model.parameters()).device
    inputs, targets = inputs.to(device), targets.to(device)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
""",
        # never takes the optimizer step
        """def train_step(model, inputs, targets, optimizer):
    device = next(model.parameters()).device
    inputs, targets = inputs.to(device), targets.to(device)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    return loss.detach()
""",
    ],
    "ex4_fit": [
        # the slope taken as the bandwidth (it is seconds per byte)
        """def fit_copy_cost(nbytes, seconds):
    slope, intercept = np.polyfit(np.asarray(nbytes, float), np.asarray(seconds, float), 1)
    return float(intercept), float(slope)


def copy_seconds(nbytes, latency, bandwidth):
    return latency + nbytes / bandwidth
""",
        # the latency forgotten in the prediction
        """def fit_copy_cost(nbytes, seconds):
    slope, intercept = np.polyfit(np.asarray(nbytes, float), np.asarray(seconds, float), 1)
    return float(intercept), float(1.0 / slope)


def copy_seconds(nbytes, latency, bandwidth):
    return nbytes / bandwidth
""",
    ],
}
