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

The bare cost per launch is 1 / (bare steps per second x launches per step), the launches per
step read from the hook's "measured ... left out ..." lines over the run's steps, rounded to a
whole number (those lines miss a few tokens'); for a program of graph replays, per graph
replay.  The costs are the ones the run's last "calibrated:" line says.  Reads the same files
as bench/high_seconds.py: `cap-P.log`, `cap-P-schd.log` and `cap-P-steps.jsonl`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from high_seconds import add_run_arguments, kept_runs

# The hook's debug line at each token's end (csrc/hook/inflight.c).
MEASURED = re.compile(r"measured [\d.]+ ms over (\d+) launches \((\d+) graphs, [\d.]+ ms\); "
                      r"left out: (\d+) launches \((\d+) graphs\) after gaps, [\d.]+ ms, "
                      r"(\d+) \((\d+)\) after holds")
# gem-schd's line once a calibration's readings are in (gemini.core.speed.describe).
BY_WORK = re.compile(r"calibrated: speed [\d.]+ \(by work: ([\d.]+) us per (graph launch|launch) "
                     r"in its grants, in the latest tails ([\d., ]+)")


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
    runs = kept_runs(args, (".log", "-schd.log", "-steps.jsonl"))
    if runs is None:
        return 2
    told = 0
    for name, (row, (hook, schd, steps)) in runs.items():
        if hook is None or schd is None or steps is None:
            continue
        last = [json.loads(line) for line in steps.splitlines()[-1:]]
        parts = speed_parts(row, hook, schd, last[0]["steps"] if last else 0.0)
        if parts is None:
            continue
        told += 1
        print(f"{name}, cap {row.get('cap_target')}: bare {parts['bare_us']} us a "
              f"{parts['unit']} ({parts['per_step']} a step), tails {parts['tails_us']}, grants "
              f"{parts['grants_us']}: speed read {parts['speed_read']}, beta {parts['beta']}, "
              f"epsilon {parts['epsilon']}, beta x epsilon {parts['beta_epsilon']}; work "
              f"{parts['work_per_granted_s']} a granted second, charged "
              f"{parts['charged_per_granted_s']}")
    if not told:
        print(f"no capped run measured by work with its logs in {args.logs}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
