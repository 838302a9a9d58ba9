"""The asyncio kernel client of the course's notebook runs (``course build``, the lecture tests,
the exercises' trial runs): jupyter_client's ``AsyncKernelClient`` whose channels wait for a
message in polls of at most ``POLL_SLICE_SECONDS``.

Why: pyzmq's asyncio poll waits for the socket's file descriptor to become readable, and ZeroMQ
signals that descriptor on an edge (a state change), not a level. When a wake-up is missed, a
reply that has arrived sits unread until the poll's own time-out runs out, where pyzmq looks at
the socket once more and finds it (``zmq._future._AsyncPoller.poll``). Seen here: lecture 11's
build waited 600 s (nbclient's cell time-out) for a cell that had finished, and then went on
"ok" at 616.9 s; the lecture test, at its 300 s. Polling in slices makes that look happen every
second, so a missed wake-up costs at most one slice instead of a cell's whole time-out; a message
that is noticed is read at once, as before.
"""
from __future__ import annotations

import time
import typing as t
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from traitlets import Type

POLL_SLICE_SECONDS = 1.0   # longest single poll of a channel, s


class SlicedPollChannel(AsyncZMQSocketChannel):
    """An ``AsyncZMQSocketChannel`` whose ``get_msg`` polls at most ``POLL_SLICE_SECONDS`` at a
    time until a message is ready or ``timeout`` (s; ``None``: no limit) has passed."""

    async def get_msg(self, timeout: float | None = None) -> dict[str, t.Any]:  # type: ignore[override]
        assert self.socket is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_SLICE_SECONDS if deadline is None else deadline - time.monotonic()
            wait_ms = max(0, int(min(left, POLL_SLICE_SECONDS) * 1000))
            if await self.socket.poll(wait_ms):
                return await self._recv()
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty


class SlicedPollKernelClient(AsyncKernelClient):
    """``AsyncKernelClient`` whose shell, IOPub, stdin and control channels are ``SlicedPollChannel``s."""

    shell_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    iopub_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    stdin_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    control_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
