"""What a capped run's speed charge is made of, read from its logs (issue 12: caps of 0.6 and
more go over on the H200; bench/SHARES-issue12.md).

  python3 bench/speed_parts.py RESULTS-paths.json [--logs ARCHIVE] [--path P ...]

gem-schd charges a capped client's granted seconds at its speed: the cost per launch in its
calibration tails (the slowest of the latest) over the cost per launch in its grants (the
median of the latest grants' back-to-back segments, as its hook measured them).  The work a
granted second does, against the bare rate paths.py measured beside the run, is that speed
times two parts:

  beta     the bare cost per launch over the tails': how much faster a tail reads the program
           than it runs bare for seconds (H200: 1.03-1.05 for torch eager and CUDA graphs);
  epsilon  the work per granted second over the bare cost over the grants' cost: how much of
           what its segments say a granted second does (0.96 at 0.4 with 40 ms grants after
           60 ms rests, 1.01-1.02 at 0.8).

Beside them, the same costs by the program's own events (a CUDA event after each step, the
`-steps.jsonl` samples): its steps back to back in the ordinary grants and in the calibration
tails (the last 80 ms of grants of 150 ms or more), per launch.  Where the hook's grants read
slower than the events', its segments fell on a biased part of each grant (2026-12-02: at 0.8
the hook read 193.6 us a launch where the events said 186-187.5; its looks came at half the
room left, at a long grant's slow end).

The bare cost per launch is 1 / (bare steps per second x launches per step), the launches per
step read from the hook's "measured ... left out ..." lines over the run's steps, rounded to a
whole number (those lines miss a few tokens'); for a program of graph replays, per graph
replay.  The costs are the ones the run's last "calibrated:" line says.  Reads the same files
as bench/high_seconds.py: `cap-P.log`, `cap-P-schd.log`, `cap-P-steps.jsonl` and
`cap-P-grants.json`.
"""

from __future__ import annotations

import argparse
import re
import sys
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from high_seconds import (
    Grant,
    add_run_arguments,
    calibration_min_s,
    kept_runs,
    read_grants,
    read_steps,
)

EVENT_TAIL_S = 0.08  # a calibration's tail, as gem-schd reads it (gemini.core.speed.TAIL_S)
SYNC_STEP = 1.5  # a step this many times the median's or longer held a sync or a rest

# The hook's debug line at each token's end (csrc/hook/inflight_measure.c).
MEASURED = re.compile(r"measured [\d.]+ ms over (\d+) launches \((\d+) graphs, [\d.]+ ms\); "
                      r"left out: (\d+) launches \((\d+) graphs\) after gaps, [\d.]+ ms, "
                      r"(\d+) \((\d+)\) after holds")
# gem-schd's line once a calibration's readings are in (gemini.core.speed.describe).
BY_WORK = re.compile(r"calibrated: speed [\d.]+ \(by work: ([\d.]+) us per (graph launch|launch) "
                     r"in its grants(?: \(before the edit\))?, in the latest tails ([\d., ]+)")


def launches_counted(hook_log: str) -> tuple[int, int]:
    """(launches, graph launches) the hook's token-end lines counted over the run."""
    launches = graphs = 0
    for m in MEASURED.finditer(hook_log):
        launches += int(m[1]) + int(m[3]) + int(m[5])
        graphs += int(m[2]) + int(m[4]) + int(m[6])
    return launches, graphs


def latest_costs(schd_log: str) -> tuple[float, list[float], bool] | None:
    """The grants' cost per launch and the latest tails' (us), and whether per graph replay,
    from the last calibration measured by work (None: none was)."""
    found = list(BY_WORK.finditer(schd_log))
    if not found:
        return None
    m = found[-1]
    tails = [float(x) for x in m[3].replace(" ", "").strip(",").split(",") if x]
    return float(m[1]), tails, m[2] == "graph launch"


def _steps_within(ends: list[float], spans: list[tuple[float, float]]) -> list[float]:
    """The steps (from one step's end to the next's) that lie within one of `spans`, less
    those that held a sync or a rest (SYNC_STEP)."""
    steps = [(a, b - a) for a, b in pairwise(ends)
             if any(lo <= a and b <= hi for lo, hi in spans)]
    if not steps:
        return []
    typical = sorted(d for _, d in steps)[len(steps) // 2]
    return [d for _, d in steps if d < SYNC_STEP * typical]


def event_costs(samples: list[tuple[float, float]], grants: list[Grant],
                per_step: int) -> tuple[float, float] | None:
    """The mean GPU time per launch (us) of the program's steps back to back in its ordinary
    grants and in its calibrations' tails, by its own step-end events (`samples`: (time,
    steps) one a step, after the first at 0); None where either has none, or where the samples
    are not one a step."""
    if any(b - a != 1.0 for (_, a), (_, b) in pairwise(samples[1:])):
        return None  # (synced every k steps, not timed by events: JAX, Triton)
    ends = [t for t, _ in samples]
    calibration_s = calibration_min_s(grants)
    ordinary = [(g.start, g.end) for g in grants if g.length_s < calibration_s]
    tails = [(g.end - EVENT_TAIL_S, g.end) for g in grants if g.length_s >= calibration_s]
    in_grants, in_tails = _steps_within(ends, ordinary), _steps_within(ends, tails)
    if not in_grants or not in_tails or per_step < 1:
        return None
    return (1e6 * sum(in_grants) / len(in_grants) / per_step,
            1e6 * sum(in_tails) / len(in_tails) / per_step)


def speed_parts(row: dict, hook_log: str, schd_log: str, steps: float) -> dict | None:
    """beta and epsilon of one capped run (`row`: its paths.json entry), or None where a part
    is missing."""
    costs = latest_costs(schd_log)
    launches, graphs = launches_counted(hook_log)
    work = row.get("cap_work_per_granted_s")
    if costs is None or steps <= 0 or not work:
        return None
    grants_us, tails_us, per_graph = costs
    per_step = round((graphs if per_graph else launches) / steps)
    if per_step < 1 or not tails_us:
        return None
    bare_us = 1e6 / (row["cap_bare_rate"] * per_step)
    beta = bare_us / max(tails_us)
    epsilon = work / (bare_us / grants_us)
    return {"per_step": per_step, "unit": "graph replay" if per_graph else "launch",
            "bare_us": round(bare_us, 1), "tails_us": tails_us, "grants_us": grants_us,
            "speed_read": round(max(tails_us) / grants_us, 3), "beta": round(beta, 3),
            "epsilon": round(epsilon, 3), "beta_epsilon": round(beta * epsilon, 3),
            "work_per_granted_s": work, "charged_per_granted_s": row.get(
                "cap_charged_per_granted_s")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_run_arguments(p)
    args = p.parse_args(argv)
    runs = kept_runs(args, (".log", "-schd.log", "-steps.jsonl", "-grants.json"))
    if runs is None:
        return 2
    told = 0
    for name, (row, (hook, schd, steps, grants)) in runs.items():
        if hook is None or schd is None or steps is None:
            continue
        samples = read_steps(steps)
        parts = speed_parts(row, hook, schd, samples[-1][1] if samples else 0.0)
        if parts is None:
            continue
        told += 1
        events = event_costs(samples, read_grants(grants), parts["per_step"]) if grants else None
        by_events = "" if events is None else (
            f"; by its own events grants {events[0]:.1f}, tails {events[1]:.1f} (speed "
            f"{events[1] / events[0]:.3f})")
        print(f"{name}, cap {row.get('cap_target')}: bare {parts['bare_us']} us a "
              f"{parts['unit']} ({parts['per_step']} a step), tails {parts['tails_us']}, grants "
              f"{parts['grants_us']}: speed read {parts['speed_read']}, beta {parts['beta']}, "
              f"epsilon {parts['epsilon']}, beta x epsilon {parts['beta_epsilon']}; work "
              f"{parts['work_per_granted_s']} a granted second, charged "
              f"{parts['charged_per_granted_s']}{by_events}")
    if not told:
        print(f"no capped run measured by work with its logs in {args.logs}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
