"""The notebook runs' kernel client (course_tools/kernel_client.py) reads a reply whose wake-up
was missed within a poll slice; jupyter_client's own channel, waiting without a time-out, never
reads it (the lost reply of lecture 11's runs, reproduced: the socket's edge-triggered signal is
consumed before the event loop sees it)."""
import asyncio
import time
from queue import Empty
from types import SimpleNamespace

import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session

from course_tools import kernel_client
from course_tools.kernel_client import POLL_SLICE_SECONDS, SlicedPollChannel, SlicedPollKernelClient
from course_tools.warm_kernels import AsyncWarmKernelManager


async def _reply_with_missed_wakeup(channel_class, wait_seconds: float):
    """Send a reply to a channel that is already waiting (no time-out), consume the socket's
    signal before the event loop runs, and return the message read within ``wait_seconds``
    (None when none was)."""
    ctx = zmq.asyncio.Context()
    ours, kernels = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    ours.bind("inproc://reply")
    kernels.connect("inproc://reply")
    session = Session()
    try:
        waiting = asyncio.ensure_future(channel_class(ours, session).get_msg(timeout=None))
        await asyncio.sleep(0.05)                        # the poll is registered
        session.send(kernels, "execute_reply", {"status": "ok"})
        time.sleep(0.05)                                 # the reply is there; the loop has not run
        zmq.Socket.shadow(ours.underlying).get(zmq.EVENTS)   # the edge is gone: a missed wake-up
        try:
            return await asyncio.wait_for(waiting, wait_seconds)
        except asyncio.TimeoutError:
            return None
    finally:
        ours.close(linger=0)
        kernels.close(linger=0)
        ctx.term()


def test_a_reply_whose_wakeup_was_missed_is_read_at_the_next_slice():
    msg = asyncio.run(_reply_with_missed_wakeup(SlicedPollChannel, 30 * POLL_SLICE_SECONDS))
    assert msg is not None and msg["msg_type"] == "execute_reply"


def test_without_slices_the_same_reply_is_not_read():
    """The control: the situation above does lose a reply with jupyter_client's channel."""
    assert asyncio.run(_reply_with_missed_wakeup(AsyncZMQSocketChannel, 3 * POLL_SLICE_SECONDS)) is None


class _Socket:
    """Answers every poll with 'nothing yet', recording what each poll was asked to wait (ms)."""

    def __init__(self):
        self.asked = []

    async def poll(self, timeout_ms):
        self.asked.append(timeout_ms)
        await asyncio.sleep(timeout_ms / 1000 / 100)   # a hundredth of it: the test stays short
        return 0


@pytest.mark.parametrize("timeout", [0, 0.05, 2.5])
def test_a_time_out_ends_the_wait_and_no_poll_waits_longer_than_a_slice(timeout, monkeypatch):
    """On a clock that moves by what each poll was asked to wait (the channel's clock only: the
    event loop keeps the real one)."""
    clock = [0.0]
    monkeypatch.setattr(kernel_client, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    asked = []

    class Socket:
        async def poll(self, timeout_ms):
            asked.append(timeout_ms)
            clock[0] += timeout_ms / 1000
            return 0

    channel = SlicedPollChannel.__new__(SlicedPollChannel)
    channel.socket = Socket()
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=timeout))
    assert asked and max(asked) <= POLL_SLICE_SECONDS * 1000
    assert sum(asked) == pytest.approx(timeout * 1000, abs=1)


def test_notebook_runs_get_the_sliced_client():
    kc = AsyncWarmKernelManager(kernel_name="python3").client()
    assert isinstance(kc, SlicedPollKernelClient)
    assert all(getattr(kc, f"{name}_channel_class") is SlicedPollChannel
               for name in ("shell", "iopub", "stdin", "control"))
