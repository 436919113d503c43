"""GEMINI_BUSY_POLL_MS: after each message a daemon's event loop polls instead of sleeping, for
that long, so that the next message (a renewal, the scheduler's reply) finds it awake."""

from __future__ import annotations

import asyncio
import logging
import selectors

import pytest

from gemini.daemon.server import BUSY_POLL_ENV, BusyPoll, busy_poll_from_env


class RecordingSelector(selectors.DefaultSelector):
    """Records the timeout of every select(): 0 is a turn of polling, > 0 or None a sleep."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def select(self, timeout: float | None = None):  # type: ignore[no-untyped-def]
        self.timeouts.append(timeout)
        return super().select(timeout)


def run_touched(window_s: float, end_after_s: float) -> tuple[BusyPoll, RecordingSelector, float]:
    """A loop whose poller is touched once at the start; it runs until `end_after_s`.
    Returns the poller, the selector's record, and when the poller stopped (loop time)."""
    selector = RecordingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    poll = BusyPoll(window_s)
    stopped_at: list[float] = []

    async def main() -> None:
        start = loop.time()  # (before the touch: its window starts no earlier)
        poll.touch(loop)
        done = loop.create_future()
        loop.call_at(start + end_after_s, done.set_result, None)

        def watch() -> None:  # notes when the poller gave up, from a turn of the loop
            if poll.spinning:
                loop.call_soon(watch)
            elif not stopped_at:
                stopped_at.append(loop.time() - start)

        loop.call_soon(watch)
        await done

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return poll, selector, stopped_at[0] if stopped_at else float("inf")


def test_the_loop_polls_for_the_window_then_sleeps_again():
    poll, selector, stopped = run_touched(window_s=0.05, end_after_s=0.6)
    assert poll.spins > 10  # it turned and turned without sleeping
    assert 0.05 <= stopped < 0.6  # ... for the window, and not past it
    polls = sum(1 for t in selector.timeouts if t == 0)
    assert polls > 10
    # then it slept until the end (about 0.55 s), in one select or a few
    assert max(t for t in selector.timeouts if t is not None) > 0.2, selector.timeouts[-5:]


def test_off_the_loop_never_polls():
    poll, selector, _ = run_touched(window_s=0.0, end_after_s=0.5)
    assert poll.spins == 0 and not poll.spinning
    # a few turns of asyncio's own, then one sleep to the end
    assert sum(1 for t in selector.timeouts if t == 0) < 10, selector.timeouts
    assert max(t for t in selector.timeouts if t is not None) > 0.3, selector.timeouts


@pytest.mark.parametrize(("value", "seconds"), [("", 0.0), ("20", 0.02), ("0.5", 0.0005)])
def test_the_window_comes_from_the_environment(monkeypatch, value, seconds):
    monkeypatch.setenv(BUSY_POLL_ENV, value)
    assert busy_poll_from_env() == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["fast", "-1", "1e9", "nan"])
def test_a_bad_window_is_said_and_ignored(monkeypatch, caplog, value):
    monkeypatch.setenv(BUSY_POLL_ENV, value)
    with caplog.at_level(logging.WARNING, logger="gemini.server"):
        assert busy_poll_from_env() == 0.0
    assert BUSY_POLL_ENV in caplog.text and "stays off" in caplog.text
