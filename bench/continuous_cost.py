"""A program's GPU time per launch when it runs continuously alone under the hook (uncapped),
beside its bare step rate (issue 12: what a capped client's calibration tails should read).

  python3 bench/continuous_cost.py [PATH] [--seconds 10]

Runs bench/path_app.py PATH (default torch-compile-graphs, k = 34 steps between syncs) bare,
then under the hook as the only client (`solo 1.0 1.0 16GiB`, gem-schd -v), and reads the
GPU time and launches the hook measured in the last part of each of its grants from the
scheduler's "asks for a token (..., ran N launches in X ms)" lines (or "N graph launches",
where the hook counts a program of replays in them).  Prints plain text.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import GIB, PY, Backend, Client, Procs, base_env, pct, run_app
from paths import build_hook


def run_path(procs: Procs, path: str, env: dict[str, str], seconds: float) -> str:
    """path_app's steps per second over one run, or why there is none."""
    r = run_app(procs, [PY, "bench/path_app.py", path, "--seconds", f"{seconds:g}", "--no-wait",
                        "--k", "34"], env, path, 300)
    if not r.get("done"):
        return str(r)
    return f"{r['steps'] / (r['t_end'] - r['t0']):.1f} steps/s"


def runs_in(log: str) -> dict[str, list[tuple[int, float]]]:
    """The runs the scheduler's log says its client's hook measured, (count, ms) by unit:
    "launches", or "graph launches" (wire.RUN_GRAPHS)."""
    runs: dict[str, list[tuple[int, float]]] = {}
    for n, unit, ms in re.findall(r"ran (\d+) ((?:graph )?launches) in ([\d.]+) ms", log):
        runs.setdefault(unit, []).append((int(n), float(ms)))
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("path", nargs="?", default="torch-compile-graphs")
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    print(json.dumps(build_hook())[:200], flush=True)
    procs = Procs()
    print("bare", run_path(procs, args.path, base_env(), args.seconds), flush=True)
    backend = Backend(procs, [Client("solo", 1.0, 1.0, 16 * GIB)], tag="continuous", verbose=True)
    try:
        hooked = {**base_env(), **backend.hook_env("solo")}
        print("solo", run_path(procs, args.path, hooked, args.seconds), flush=True)
        log = backend.schd.drain()
    finally:
        backend.stop()
    for unit, runs in runs_in(log).items():
        per = [ms / n * 1000 for n, ms in runs if n >= 8]
        if per:
            median = statistics.median(per)
            print(f"solo grants' runs in {unit}: {len(per)}, GPU time per {unit[:-1]} median "
                  f"{median:.1f} us, p10 {pct(per, 0.1):.1f}, p90 {pct(per, 0.9):.1f}")
    for line in [x for x in log.splitlines() if "asks for a token" in x][-3:]:
        print(line)


if __name__ == "__main__":
    main()
