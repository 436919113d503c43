"""Running a daemon until SIGINT/SIGTERM, restoring the signal handlers afterwards."""

from __future__ import annotations

import asyncio
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


def run_until_signal(serve: Callable[[asyncio.Event], Awaitable[None]]) -> int:
    """Run `serve(stop)` until it returns; a signal sets `stop`.  Exit code 0 after a signal."""

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
