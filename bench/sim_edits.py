"""A cap edited beside a capped neighbour, at every phase of their turns, on the scheduler's
simulator (issue 12: a cap must hold over short windows through a config edit too).  No
sockets, no GPU: tests/unit/sim.py's saturating clients and power-limited GPU clock drive
gemini.core.scheduler on a virtual clock, with the launchers' quotas and gem-schd's defaults.

  python3 bench/sim_edits.py [--seeds 1,2] [--phases 10] [--b-starts 0.001] [--trio]
                             [--root DIR] [--no-shared-turns] [--clock-flat-at-edit]

a is capped at 0.3 throughout; b, capped at 0.3, is raised to 0.6, and, capped at 0.6,
lowered to 0.3, at 10 s + k × 50 ms (k < --phases: the phases of a half-second turn).  b
starts each of --b-starts seconds after a (their places in the turns; 0.001 puts b's grant
0.28 s before a's, 0.2-0.4 after it).  --trio adds three capped at 0.2, 0.3 and 0.3, b raised
to 0.4 (c starting twice b's start after a, and a millisecond).  For
each edit, each client's lowest and highest 1 s window of work (sliding by 50 ms) over the 6 s
from the edit on, against its cap after it; per case and client, the worst and the median of
the lowest over the phases and seeds.  On the GPU an edit lands at one phase per run
(bench/paths.py's edit cases), so a run's number is one draw of these.  --root imports gemini
and the simulator from another checkout (`git archive COMMIT gemini tests | tar -x -C DIR`).
--clock-flat-at-edit: at the edit each client's clock in its grants reads as its continuous
one, as NVML's did on the H100 (2026-12-07 22:12: 1942 MHz in b's grants, 1937 continuously,
against a speed of 1.077 by work), so a speed read by the clock then says 1.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

# Each case: the caps before the edit and after it.
EDITS = [({"a": 0.3, "b": 0.3}, {"a": 0.3, "b": 0.6}), ({"a": 0.3, "b": 0.6}, {"a": 0.3, "b": 0.3})]
TRIO = ({"a": 0.2, "b": 0.3, "c": 0.3}, {"a": 0.2, "b": 0.4, "c": 0.3})
EDIT_AT_S = 10.0
PHASE_S = 0.05
AFTER_S = 6.0
STEP_S = 0.05


def run_edit(before: dict[str, float], after: dict[str, float], at: float, seed: int,
             shared_turns: bool | None, b_start: float = 0.001,
             clock_flat: bool = False) -> dict[str, tuple[float, float]]:
    """Each client's lowest and highest 1 s window of work from the edit at `at` on."""
    import dataclasses

    from tests.unit.sim import GpuClock, Sim  # (from --root, where given)
    from tests.unit.test_scheduler import LAUNCHER, config

    timing = LAUNCHER if shared_turns is None else dataclasses.replace(
        LAUNCHER, shared_turns=shared_turns)
    sim = Sim([(n, cap, cap) for n, cap in before.items()], timing=timing, burst_ms=5000.0,
              seed=seed, clock=GpuClock(), launch_s=0.0002, gpu_wait=0.8)
    for i, name in enumerate(before):  # (a at 0, b at b_start, c at twice that and 1 ms)
        sim.start(name, i * b_start + (0.001 if i > 1 else 0.0))
    sim.run_until(at)
    if clock_flat:
        for clocks in sim.core.speed._clocks.values():
            clocks.in_grants = clocks.continuous
    sim.configure(config(*[(n, cap, cap, 1 << 30) for n, cap in after.items()]))
    end = at + AFTER_S + 1.0
    sim.run_until(end)
    assert sim.clock is not None
    sim.clock.advance(end, sim.running)
    out = {}
    for name in after:
        windows = [sim.clock.work(name, at + j * STEP_S, at + j * STEP_S + 1.0)
                   for j in range(round(AFTER_S / STEP_S))]
        out[name] = (min(windows), max(windows))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="1,2")
    p.add_argument("--phases", type=int, default=10)
    p.add_argument("--b-starts", default="0.001", help="b's start after a's, seconds (a list)")
    p.add_argument("--trio", action="store_true", help="and a trio's raise")
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    p.add_argument("--shared-turns", action=argparse.BooleanOptionalAction, default=None,
                   help="gem-schd --[no-]shared-turns (default: the --root's own)")
    p.add_argument("--clock-flat-at-edit", action="store_true",
                   help="the clock reads no speed-up at the edit (the docstring)")
    args = p.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    seeds = [int(s) for s in args.seeds.split(",")]
    starts = [float(s) for s in args.b_starts.split(",")]
    cases = []
    for before, after in EDITS + ([TRIO] if args.trio else []):
        runs = []
        for k in range(args.phases):
            at = EDIT_AT_S + k * PHASE_S
            for seed in seeds:
                for start in starts:
                    windows = run_edit(before, after, at, seed, args.shared_turns, start,
                                       args.clock_flat_at_edit)
                    runs.append({"edit_at_s": round(at, 3), "seed": seed, "b_start_s": start,
                                 "windows": {n: [round(x, 4) for x in w]
                                             for n, w in windows.items()}})
        summary = {}
        for name, cap in after.items():
            lows = [r["windows"][name][0] - cap for r in runs]
            summary[name] = {"cap": cap, "worst_low_pp": round(100 * min(lows), 2),
                             "median_low_pp": round(100 * statistics.median(lows), 2)}
        cases.append({"before": before, "after": after, "b_before": before["b"],
                      "b_after": after["b"], "summary": summary, "runs": runs})
    print(json.dumps({"root": str(args.root), "seeds": seeds, "phases": args.phases,
                      "b_starts": starts, "shared_turns": args.shared_turns,
                      "clock_flat_at_edit": args.clock_flat_at_edit, "cases": cases},
                     indent=1))


if __name__ == "__main__":
    main()
