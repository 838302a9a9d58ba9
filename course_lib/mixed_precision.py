"""Mixed-precision training run, not described: fp32, fp16 with and without loss scaling, bf16 (lesson 12).

Mixed precision (Micikevicius et al., *Mixed Precision Training*, ICLR 2018) keeps float32
master weights and runs the matrix products in a 16-bit format under ``torch.autocast``.
float16's smallest subnormal is 2^-24 (about 6e-8): a gradient smaller than half of it rounds
to 0 in the backward pass's float16 products, and that weight learns nothing from it. Loss
scaling multiplies the loss by ``S`` before ``backward`` (every gradient grows by ``S``, above
the underflow) and divides the float32 gradients by ``S`` before the step;
``torch.amp.GradScaler`` picks ``S`` itself: it halves ``S`` and skips the step when a gradient
overflows to inf/NaN, and doubles it after ``growth_interval`` steps without overflow. bfloat16
has float32's exponent range and needs no scaler.

The task here is chosen so that its gradients are small: a regression whose targets are
about 1e-3 (a quantity in units where it is small), so its squared-error loss is about 1e-6 and
most gradient entries lie below float16's normal range. Everything runs under CPU autocast
(float16 and bfloat16 are both supported there) in a few seconds.
"""
from __future__ import annotations

import torch

MODES = ("fp32", "fp16", "fp16+scaler", "bf16")
"""Training modes: float32 throughout; float16 autocast without and with a GradScaler; bfloat16 autocast."""


def make_task(n: int = 128, features: int = 8, target_size: float = 1e-3, seed: int = 0):
    """``(x, y)``: ``n`` standard-normal inputs and targets ``target_size * sin(4 x @ w)`` (float32)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=gen)
    w = torch.randn(features, 1, generator=gen) / features ** 0.5
    return x, target_size * torch.sin(4 * x @ w)


def make_model(features: int = 8, hidden: int = 32, seed: int = 1, output_size: float = 1e-3) -> torch.nn.Module:
    """A float32 MLP ``features -> hidden -> hidden -> 1`` with tanh, the same weights for one seed;
    the last layer's initial weights are scaled by ``output_size`` so that the first outputs are as
    small as the targets (an output layer initialised near zero, as many recipes do)."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.Tanh(),
                                torch.nn.Linear(hidden, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))
    with torch.no_grad():
        model[-1].weight.mul_(output_size)
        model[-1].bias.mul_(output_size)
    return model


def _autocast(mode: str):
    dtype = {"fp16": torch.float16, "fp16+scaler": torch.float16, "bf16": torch.bfloat16}.get(mode)
    return torch.autocast("cpu", dtype=dtype, enabled=dtype is not None)


def gradients(model, x, y, mode: str, scale: float = 1.0) -> dict:
    """The float32 gradients (divided by ``scale`` again) of the mean squared error at the model's
    present weights, the forward and backward run in ``mode``'s autocast, the loss times ``scale``."""
    model.zero_grad(set_to_none=True)
    with _autocast(mode):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    (loss * scale).backward()
    return {name: p.grad.detach().clone() / scale for name, p in model.named_parameters()}


def underflow_count(model, x, y, scale: float = 1.0) -> dict:
    """Gradient entries that are not 0 in float32 and are 0 under float16 autocast (times ``scale``).

    Keys: ``underflowed``, ``nonzero_fp32`` (entries), ``fraction`` (their ratio), ``fp32`` (the
    float32 gradients as one flat tensor, for a histogram).
    """
    exact = torch.cat([g.flatten() for g in gradients(model, x, y, "fp32").values()])
    half = torch.cat([g.flatten() for g in gradients(model, x, y, "fp16", scale).values()])
    nonzero = exact != 0
    lost = int((nonzero & (half == 0)).sum())
    return {"underflowed": lost, "nonzero_fp32": int(nonzero.sum()),
            "fraction": lost / max(int(nonzero.sum()), 1), "fp32": exact}


def _zero_fraction(model) -> float:
    """Share of the model's gradient entries that are exactly 0."""
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    return float((grads == 0).float().mean())


def train(mode: str, steps: int = 300, lr: float = 3e-3, growth_interval: int = 25, task=None) -> dict:
    """Train :func:`make_model` on :func:`make_task` for ``steps`` full-batch Adam steps in ``mode``.

    Returns ``mode``, ``losses`` (float32 loss before each step), ``scales`` (the GradScaler's
    scale at each step, ``None`` without one), ``zero_fraction`` (share of gradient entries that
    are exactly 0 at each step) and ``skipped`` (steps the scaler skipped for inf/NaN gradients).
    The scaler starts at 2^16 (its default) and grows every ``growth_interval`` clean steps (2000
    by default: shortened so that a short run shows it move).
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {MODES}")
    x, y = task if task is not None else make_task()
    model = make_model(x.shape[1])
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval) if mode == "fp16+scaler" else None
    out = {"mode": mode, "losses": [], "scales": [], "zero_fraction": [], "skipped": 0}
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        with _autocast(mode):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        out["losses"].append(float(loss.detach()))
        if scaler is None:
            loss.backward()
            out["scales"].append(None)
            out["zero_fraction"].append(_zero_fraction(model))
            opt.step()
            continue
        scale = scaler.get_scale()
        scaler.scale(loss).backward()
        out["scales"].append(scale)
        out["zero_fraction"].append(_zero_fraction(model))
        scaler.step(opt)
        scaler.update()
        out["skipped"] += int(scaler.get_scale() < scale)
    return out


def compare(steps: int = 300, modes=MODES) -> dict:
    """:func:`train` in every mode on one task: ``{mode: result}``."""
    task = make_task()
    return {mode: train(mode, steps, task=task) for mode in modes}


def plot_runs(runs: dict, axes=None):
    """Loss curves (log) of every run, and the GradScaler's scale where there is one."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(9, 2.8))
    for mode, run in runs.items():
        axes[0].semilogy(run["losses"], label=mode, linestyle="--" if mode == "bf16" else "-")
        if run["scales"] and run["scales"][0] is not None:
            axes[1].semilogy(run["scales"], base=2, label=f"{mode}: GradScaler's scale")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("mean squared error")
    axes[0].legend(fontsize=8)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("loss scale S")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    return axes
