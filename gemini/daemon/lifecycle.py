"""Running a daemon until SIGINT/SIGTERM, restoring the signal handlers afterwards."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

log = logging.getLogger("gemini.lifecycle")


def _run(main: Coroutine[Any, Any, None]) -> None:
    """asyncio.run, on uvloop when it is installed (`pip install gemini-gpu-share[fast]`): it
    shortens a round trip through a daemon (perf-anchors §3.2).  GEMINI_EVENT_LOOP=asyncio opts
    out."""
    if os.environ.get("GEMINI_EVENT_LOOP", "uvloop") == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            log.debug("event loop: uvloop %s", uvloop.__version__)
            uvloop.run(main)
            return
    asyncio.run(main)


async def wait_for_signal() -> int:
    """Return the number of the first SIGINT or SIGTERM received."""
    loop = asyncio.get_running_loop()
    received: asyncio.Future[int] = loop.create_future()
    sigs = (signal.SIGINT, signal.SIGTERM)
    for sig in sigs:
        loop.add_signal_handler(sig, lambda s=sig: received.done() or received.set_result(s))
    try:
        return await received
    finally:
        for sig in sigs:
            loop.remove_signal_handler(sig)


STOP_WITH_ENV = "GEMINI_STOP_WITH"  # a pid: stop when that parent exits (launch-backend's)
PR_SET_PDEATHSIG = 1


def parent_gone() -> bool:
    """With GEMINI_STOP_WITH=PID (launch-backend sets its own), SIGTERM comes to us when our
    parent exits, and True if it has already: a launch-backend killed with SIGKILL left its
    daemons running on their ports, unsupervised, and a new one could not start."""
    text = os.environ.get(STOP_WITH_ENV, "")
    if not text.isdigit():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError) as exc:
        log.warning("cannot stop with the parent (%s): a daemon outlives a killed launcher", exc)
    return os.getppid() != int(text)  # (after the prctl: no exit between the two is missed)


def run_until_signal(serve: Callable[[asyncio.Event], Awaitable[None]]) -> int:
    """Run `serve(stop)` until it returns; a signal sets `stop`.  Exit code 0 after a signal
    (or at once where the parent it was to stop with is gone: parent_gone)."""
    if parent_gone():
        log.warning("the launcher that started us (pid %s) is gone: not starting",
                    os.environ[STOP_WITH_ENV])
        return 0

    async def main() -> None:
        stop = asyncio.Event()
        waiter = asyncio.ensure_future(wait_for_signal())
        waiter.add_done_callback(lambda _: stop.set())
        try:
            await serve(stop)
        finally:
            waiter.cancel()

    _run(main())
    return 0
