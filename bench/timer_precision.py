"""How close to its deadline the daemons' frame server calls its core, on either event loop.

  python3 bench/timer_precision.py [--deadlines 200] [--out DIR]

A core whose deadline is 12.3 ms after each of its last ones (a grant's end, say) is served by
gemini.daemon.server.FrameServer on uvloop (where installed) and on asyncio.  For each loop:
how late the core was called, by CLOCK_MONOTONIC, and how far behind that the time it was told
was (µs, p10 / p50 / p90 / p99).  No GPU, no daemon: the server in this process.

Why: the scheduler hands the token over at a grant's end by this timer.  Until 2026-12-05 it
armed the loop's timer at the deadline and told the core the loop's time: the loops wake up to
a millisecond late (epoll's timeout is whole ms; uvloop's clock too), and uvloop's time is in
whole ms.  On the development machine the deadlines came 0.56-0.97 ms late (p10-p99), so each
hand-over by the timer left the GPU to the old holder's end plus that, and the grants' books
were off by up to a millisecond either way.  (A deadline here is set just after a timer woke,
when uvloop's whole ms lag least: a grant booked at a request lags up to a ms more.)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import print_and_write

from gemini.core.actions import Action
from gemini.daemon.server import FrameServer

STEP_S = 0.0123


class DeadlineCore:
    """One deadline at a time; records how late each was met, and how stale the time told."""

    def __init__(self) -> None:
        self.deadline: float | None = None
        self.late_us: list[float] = []
        self.stale_us: list[float] = []
        self.early = 0  # calls before the deadline (told a time before it)

    def next_deadline(self) -> float | None:
        return self.deadline

    def on_deadline(self, now: float) -> list[Action]:
        true = time.monotonic()
        if self.deadline is not None and now < self.deadline:
            self.early += 1
        elif self.deadline is not None:
            self.late_us.append((true - self.deadline) * 1e6)
            self.stale_us.append((true - now) * 1e6)
            self.deadline = None
        return []


def percentiles(values: list[float]) -> list[float]:
    cuts = statistics.quantiles(values, n=100)
    return [round(cuts[k], 1) for k in (9, 49, 89, 98)]


async def measure(n: int) -> dict:
    core = DeadlineCore()
    server = FrameServer(core, lambda conn, req, now: [], lambda conn, now: [])
    for _ in range(n):
        core.deadline = server.now() + STEP_S
        server.run([])  # (the core's deadline armed, as after any event)
        while core.deadline is not None:
            await asyncio.sleep(0.001)
    return {"late_us_p10_p50_p90_p99": percentiles(core.late_us),
            "told_behind_us_p10_p50_p90_p99": percentiles(core.stale_us),
            "calls_before_the_deadline": core.early}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--deadlines", type=int, default=200)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    out: dict = {"device": "no GPU", "date": time.strftime("%Y-%m-%d %H:%M"),
                 "command": "python3 bench/timer_precision.py " + " ".join(argv or sys.argv[1:]),
                 "deadline_step_ms": STEP_S * 1e3}
    try:
        import uvloop
    except ImportError:
        out["uvloop"] = "not installed"
    else:
        out["uvloop"] = uvloop.run(measure(args.deadlines))
    out["asyncio"] = asyncio.run(measure(args.deadlines))
    print_and_write(out, args.out, "timer-precision")
    return 0


if __name__ == "__main__":
    sys.exit(main())
