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


STOP_WITH_ENV = "GEMINI_STOP_WITH"  # a pid: stop when that process exits (launch-backend's)


def watch_launcher(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> bool:
    """With GEMINI_STOP_WITH=PID (launch-backend sets its own), `stop` is set when that process
    exits, even killed with SIGKILL: its daemons ran on, on their ports, unsupervised, and a
    new launch-backend could not start.  False: it is gone already.  (Its pid, not our
    parent's: a wrapper that forks, `sudo -u` or a shell script, may stand in between.)"""
    text = os.environ.get(STOP_WITH_ENV, "")
    if not text.isdigit():
        return True
    pid = int(text)
    try:
        exits = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError as exc:  # (a kernel before 5.3)
        log.warning("cannot watch the launcher, pid %d (%s): this daemon outlives it if it is "
                    "killed", pid, exc)
        return True

    def exited() -> None:
        loop.remove_reader(exits)
        os.close(exits)
        log.warning("the launcher that started us (pid %d) is gone: stopping", pid)
        stop.set()

    loop.add_reader(exits, exited)
    return True


def run_until_signal(serve: Callable[[asyncio.Event], Awaitable[None]]) -> int:
    """Run `serve(stop)` until it returns; a signal, or the end of the launcher it is to stop
    with (watch_launcher), sets `stop`.  Exit code 0 after a signal; 1 where that launcher was
    gone before we started."""
    gone = False

    async def main() -> None:
        nonlocal gone
        stop = asyncio.Event()
        if not watch_launcher(asyncio.get_running_loop(), stop):
            log.warning("the launcher that started us (pid %s) is gone: not starting",
                        os.environ[STOP_WITH_ENV])
            gone = True
            return
        waiter = asyncio.ensure_future(wait_for_signal())
        waiter.add_done_callback(lambda _: stop.set())
        try:
            await serve(stop)
        finally:
            waiter.cancel()

    _run(main())
    return 1 if gone else 0
