"""What a scheduling decision costs the scheduler's core (issue 12: the token round trip; a node
with many capped clients).  No sockets, no GPU: tests/unit/sim.py's saturating clients drive
gemini.core.scheduler on a virtual clock, and the wall time spent inside the core's handlers is
divided by the requests it answered.

  python3 bench/schd_cost.py [--clients 1,4,16] [--seconds 30] [--root DIR] [--whole-walk]
                             [--long-bursts] [--no-shared-turns]

Each case runs N clients capped at 0.8 / N (each saturates; with --clock the GPU's clock is
fed, so calibrations run too) for --seconds of virtual time, with the launchers' quotas.
--root imports gemini and the simulator from another checkout (an older commit's tree:
`git archive COMMIT gemini tests | tar -x -C DIR`), for an A/B on one machine; --whole-walk
walks the windows whole (the room's horizon unbounded); --long-bursts: clients that never sync
(5 s bursts, not 40 ms), so that a capped client alone goes into lone turns, and capped
neighbours into shared ones (gem-schd's default since 2026-12-07; --no-shared-turns: not; a
--root from before then needs --shared-turns; not with --clock: its hooks measure no launches,
so its clients are read by the clock, and turns are not for them).  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path


def _timed(handler, spent: list[float]):  # type: ignore[no-untyped-def]
    """`handler`, adding the wall time it takes to spent[0]."""
    def timed(*args):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return handler(*args)
        finally:
            spent[0] += time.perf_counter() - t
    return timed


def run_case(n: int, seconds: float, clock: bool, rounds: int, burst_ms: float = 40.0,
             shared_turns: bool | None = None) -> dict:
    from gemini.core.launch import BackendArgs
    from gemini.core.scheduler import Timing
    from tests.unit.sim import GpuClock, Sim

    d = BackendArgs("", "")  # the launchers' quotas and window
    timing = Timing(d.base_quota / 1000, d.min_quota / 1000, d.window / 1000,
                    **({} if shared_turns is None else {"shared_turns": shared_turns}))
    per_request: list[float] = []
    for _ in range(rounds):
        specs = [(f"c{i}", 0.8 / n / 2, 0.8 / n) for i in range(n)]
        sim = Sim(specs, timing=timing, burst_ms=burst_ms, clock=GpuClock() if clock else None,
                  gpu_wait=0.2)
        spent = [0.0]
        for handler in ("on_request", "on_deadline", "on_clock"):
            setattr(sim.core, handler, _timed(getattr(sim.core, handler), spent))
        for name, _, _ in specs:
            sim.start(name)
        sim.run_until(seconds)
        requests = sum(c.req_id for c in sim.clients.values())
        per_request.append(spent[0] / requests * 1e6)
    return {"clients": n, "requests_per_virtual_s": round(requests / seconds, 1),
            "grants": sim.grants, "us_per_request": round(statistics.median(per_request), 1),
            "us_per_request_runs": [round(x, 1) for x in per_request]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", default="1,4,16")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    p.add_argument("--clock", action="store_true", help="feed the GPU's clock (calibrations)")
    p.add_argument("--whole-walk", action="store_true")
    p.add_argument("--long-bursts", action="store_true", help="5 s bursts: lone turns")
    p.add_argument("--shared-turns", action=argparse.BooleanOptionalAction, default=None,
                   help="gem-schd --[no-]shared-turns (default: the --root's own; a --root from "
                   "before 2026-12-07 has none)")
    args = p.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    if args.whole_walk:
        from gemini.core.scheduler import SchedulerCore
        SchedulerCore._room_horizon_s = math.inf  # type: ignore[assignment, misc]
    from gemini.core.scheduler import Timing  # (the --root's)

    cases = [run_case(int(n), args.seconds, args.clock, args.rounds,
                      5000.0 if args.long_bursts else 40.0, args.shared_turns)
             for n in args.clients.split(",")]
    print(json.dumps({"host": platform.node(), "python": platform.python_version(),
                      "date": time.strftime("%Y-%m-%d %H:%M:%S"), "root": str(args.root),
                      "whole_walk": args.whole_walk, "clock": args.clock,
                      "long_bursts": args.long_bursts,
                      "shared_turns": getattr(Timing(), "shared_turns", False)
                      if args.shared_turns is None else args.shared_turns,
                      "command": " ".join(sys.argv), "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
