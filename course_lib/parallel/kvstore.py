"""A (key, value) store with push and pull (lesson 11; A. Zhang, Z. C. Lipton, M. Li, A. J. Smola,
*Dive into Deep Learning*, 2023, section 12.7.4,
https://d2l.ai/chapter_computational-performance/parameterserver.html).

- ``push(key, value)`` sends gradients to the store, which *aggregates* them (sums);
  a list of values (one per GPU or worker) is summed first. If the store has an
  ``updater``, it then updates its stored value with the aggregate (an optimizer step on
  the server); otherwise the aggregate replaces the stored value.
- ``pull(key)`` returns a copy of the stored value.

Summation is a commutative reduction, so the order in which pushes arrive does not
matter. :class:`ShardedKVStore` splits every value across ``n`` servers, so with ``m``
workers each server receives ``m / n`` of the bytes that a single server would (the
``O(m)`` versus ``O(m/n)`` of that section). Both count the bytes every server receives.
"""
from __future__ import annotations

from typing import Callable

import torch


def _as_sum(value) -> torch.Tensor:
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError("push of an empty list")
        total = value[0].detach().clone()
        for v in value[1:]:
            total += v.detach().to(total.device)
        return total
    return value.detach().clone()


def _nbytes(value) -> int:
    values = value if isinstance(value, (list, tuple)) else [value]
    return sum(v.numel() * v.element_size() for v in values)


class KVStore:
    """One server. ``updater(key, aggregate, stored)`` changes ``stored`` in place."""

    def __init__(self, updater: Callable | None = None):
        self.updater = updater
        self.values: dict = {}
        self.bytes_received = 0
        self.bytes_sent = 0

    def init(self, key, value: torch.Tensor) -> None:
        """Store the initial ``value`` of ``key`` (a copy)."""
        self.values[key] = value.detach().clone()

    def push(self, key, value) -> None:
        """Aggregate ``value`` (a tensor or a list of tensors) into ``key``."""
        if key not in self.values:
            raise KeyError(f"push to key {key!r} before init")
        self.bytes_received += _nbytes(value)
        total = _as_sum(value)
        if total.shape != self.values[key].shape:
            raise ValueError(f"key {key!r} holds shape {tuple(self.values[key].shape)}, "
                             f"pushed {tuple(total.shape)}")
        if self.updater is None:
            self.values[key] = total
        else:
            self.updater(key, total, self.values[key])

    def pull(self, key) -> torch.Tensor:
        """A copy of the value stored under ``key``."""
        value = self.values[key]
        self.bytes_sent += value.numel() * value.element_size()
        return value.clone()


def sgd_updater(lr: float) -> Callable:
    """An updater doing ``stored -= lr * aggregate`` (plain SGD on the server)."""
    def update(key, aggregate, stored):
        stored -= lr * aggregate
    return update


class ShardedKVStore:
    """``num_servers`` :class:`KVStore` servers; each value is cut into ``num_servers``
    nearly equal parts (``tensor_split`` of the flattened value), part ``i`` on server ``i``."""

    def __init__(self, num_servers: int, updater: Callable | None = None):
        self.servers = [KVStore(updater) for _ in range(num_servers)]
        self.shapes: dict = {}

    def _parts(self, value: torch.Tensor):
        return torch.tensor_split(value.reshape(-1), len(self.servers))

    def init(self, key, value: torch.Tensor) -> None:
        self.shapes[key] = value.shape
        for server, part in zip(self.servers, self._parts(value)):
            server.init(key, part)

    def push(self, key, value) -> None:
        values = value if isinstance(value, (list, tuple)) else [value]
        split = [self._parts(v) for v in values]
        for i, server in enumerate(self.servers):
            server.push(key, [parts[i] for parts in split])

    def pull(self, key) -> torch.Tensor:
        return torch.cat([s.pull(key) for s in self.servers]).reshape(self.shapes[key])

    @property
    def bytes_received(self) -> list[int]:
        """Bytes each server has received so far."""
        return [s.bytes_received for s in self.servers]


def server_load_bytes(nbytes: float, workers: int, servers: int) -> float:
    """Bytes the busiest server receives when ``workers`` each push ``nbytes`` split evenly
    over ``servers``: ``workers * nbytes / servers``."""
    return workers * nbytes / servers


def push_seconds(nbytes: float, workers: int, servers: int, bandwidth: float) -> float:
    """Seconds for all pushes to arrive when every server's link has ``bandwidth`` bytes/s:
    ``O(m / n)`` for ``m`` workers and ``n`` servers."""
    return server_load_bytes(nbytes, workers, servers) / bandwidth
