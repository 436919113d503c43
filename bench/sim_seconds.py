"""A capped client's 1 s windows on the scheduler's simulator (issue 12: "± 5 points over any
1 s").  No sockets, no GPU: tests/unit/sim.py's saturating clients, its power-limited GPU clock
fed (so calibrations run), the launchers' quotas, drive gemini.core.scheduler on a virtual clock.

  python3 bench/sim_seconds.py [--seconds 40] [--seeds 1,2,3,4] [--root DIR] [--shared]
                               [--no-lone-turns] [--[no-]shared-turns]

For each case (one client capped at 0.2, 0.3, 0.4, 0.5 or 0.7 alone; two capped at 0.3; 0.4
and 0.5; three at 0.2, 0.3 and 0.3, started together) and seed, each client's lowest and
highest 1 s window of work (sliding by 50 ms, from 2 s on) less its cap, in points, and its
share over the run.  --root imports gemini and the simulator from another checkout (`git
archive COMMIT gemini tests | tar -x -C DIR`), for an A/B on one machine.  Prints one JSON
object.  The work is the simulator's, not a GPU's: where its numbers and the GPU's differ, the
GPU's count (bench/paths.py).

--shared: uncapped clients sharing by work instead (gem-schd's default): a pair at 0.3/0.7 and a
trio at 0.2/0.3/0.5, each of alike programs and of different ones (a light program and a
power-hungry one, as Triton and JAX on an H100: tests/unit/test_shared_speed.py's OWN), whose
hooks measure their launches; each client's worst 1 s window (sliding by 50 ms) from 1 s on,
and from SHARED_FROM_S (after the first calibrations), and its worst 10 s window (sliding by
0.5 s), in points off its target.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

CASES = [(0.2,), (0.3,), (0.4,), (0.5,), (0.7,), (0.3, 0.3), (0.4, 0.5), (0.2, 0.3, 0.3)]
FROM_S = 2.0
STEP_S = 0.05
SHARED_CASES = [(0.3, 0.7), (0.2, 0.3, 0.5)]
SHARED_FROM_S = 8.0


def ran_shared_turns(args: argparse.Namespace) -> bool:
    """Were the capped clients in shared turns (where asked for none: the --root's default)?"""
    from gemini.core.scheduler import Timing

    default = getattr(Timing(), "shared_turns", False)
    return args.lone_turns and (default if args.shared_turns is None else args.shared_turns)


def run_case(caps: tuple[float, ...], seed: int, seconds: float,
             lone_turns: bool = True, shared_turns: bool | None = None) -> list[dict]:
    from tests.unit.sim import GpuClock, Sim  # (from --root, where given)
    from tests.unit.test_scheduler import LAUNCHER

    names = "abc"[:len(caps)]
    timing = dataclasses.replace(LAUNCHER, lone_turns=lone_turns,
                                 **({} if shared_turns is None else {"shared_turns": shared_turns}))
    sim = Sim([(n, c, c) for n, c in zip(names, caps, strict=True)], timing=timing,
              burst_ms=5000.0, seed=seed, clock=GpuClock(), launch_s=0.0002)
    for i, n in enumerate(names):
        sim.start(n, 0.001 * i)
    sim.run_until(seconds)
    assert sim.clock is not None
    sim.clock.advance(seconds, sim.running)
    out = []
    steps = int((seconds - FROM_S - 1.0) / STEP_S) + 1
    for n, cap in zip(names, caps, strict=True):
        works = [sim.clock.work(n, FROM_S + k * STEP_S, FROM_S + k * STEP_S + 1.0)
                 for k in range(steps)]
        out.append({"client": n, "cap": cap, "low_pp": round(100 * (min(works) - cap), 2),
                    "high_pp": round(100 * (max(works) - cap), 2),
                    "share": round(sim.clock.work(n, FROM_S, seconds) / (seconds - FROM_S), 4)})
    return out


def run_shared_case(shares: tuple[float, ...], alike: bool, seed: int,
                    seconds: float) -> list[dict]:
    from tests.unit.test_shared_speed import OWN, run_together

    names = ["light", "hungry", "light2"][:len(shares)]
    sim, _ = run_together([(n, r, 1.0) for n, r in zip(names, shares, strict=True)],
                          {} if alike else OWN, seconds=seconds, seed=seed)
    assert sim.clock is not None

    def worst(n: str, target: float, width: float, start: float, step: float) -> float:
        count = int((seconds - start - width) / step) + 1
        return round(100 * max(abs(sim.clock.work(n, start + k * step, start + k * step + width)
                                   / width - target) for k in range(count)), 2)

    return [{"client": n, "target": r, "worst_1s_pp": worst(n, r, 1.0, 1.0, STEP_S),
             "worst_1s_after_pp": worst(n, r, 1.0, SHARED_FROM_S, STEP_S),
             "worst_10s_pp": worst(n, r, 10.0, 1.0, 0.5)}
            for n, r in zip(names, shares, strict=True)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--seeds", default="1,2,3,4")
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    p.add_argument("--shared", action="store_true",
                   help="uncapped pairs and trios sharing by work, not caps")
    p.add_argument("--lone-turns", action=argparse.BooleanOptionalAction, default=True,
                   help="gem-schd --[no-]lone-turns (the caps; default: on, as gem-schd's; a "
                   "--root from before 2026-12-06 has none, and one before 2026-12-07 has it off "
                   "by default)")
    p.add_argument("--shared-turns", action=argparse.BooleanOptionalAction, default=None,
                   help="gem-schd --[no-]shared-turns (the capped pairs and trio; default: the "
                   "--root's own, on since 2026-12-07 where lone turns are; a --root from "
                   "before 2026-12-07 02:00 has none)")
    args = p.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    seeds = [int(s) for s in args.seeds.split(",")]
    results = []
    if args.shared:
        for shares in SHARED_CASES:
            for alike in (True, False):
                for seed in seeds:
                    results.append({"shares": shares, "alike": alike, "seed": seed,
                                    "clients": run_shared_case(shares, alike, seed,
                                                               args.seconds)})
        print(json.dumps({"root": str(args.root), "seconds": args.seconds, "seeds": seeds,
                          "shared": True, "results": results}, indent=1))
        return
    for caps in CASES:
        for seed in seeds:
            results.append({"caps": caps, "seed": seed,
                            "clients": run_case(caps, seed, args.seconds, args.lone_turns,
                                                args.shared_turns)})
    print(json.dumps({"root": str(args.root), "seconds": args.seconds, "seeds": seeds,
                      "lone_turns": args.lone_turns, "shared_turns": ran_shared_turns(args),
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
