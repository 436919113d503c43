"""Running a daemon until SIGINT/SIGTERM, restoring the signal handlers afterwards."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable


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

    asyncio.run(main())
    return 0
