"""Two clients taking turns on the fake GPU: how their tokens meet at each hand-over.

  python3 bench/pair_fake.py [--rounds 2] [--seconds 8] [--no-hand-over-at-arrival] [--out DIR]

Each round starts fresh daemons with two uncapped clients, a 0.3 and b 0.7, and runs the fake
GPU's test client (`gem_client work`, 0.2 ms kernels in bursts of 25, a sync after each) as
both at once under the hook, with its debug log.  bench/handovers.py then reads the two logs:
each token handed over, its end by its own hook's clock less the next holder's receipt of its
token (the overlap), for the tokens whose overuse was over 1 ms and for the rest.  The fake GPU
runs the two clients' kernels in queue order, not in time slices, so it shows when tokens end,
not what a real GPU makes of an overlap (bench/handovers.py says what that was on the H200).
The daemons, the hook and the fake GPU are this tree's: to weigh a daemon change, run it from a
worktree of the old revision too, interleaved (bench/cap_fake.py says how); the daemons inherit
the environment, so `GEMINI_TIME_FROM_GRANT=1 python3 bench/pair_fake.py` weighs that option.

On 2026-12-05 (the development machine, 8 s, twice 2 rounds each way, interleaved) the tokens'
median overlap per round was -0.02 to +0.01 ms with the pod managers of bf6fdcf and -0.41 to
-0.22 ms with those of 27ae716, which timed every token from its grant
(`bench/results/fake-gpu-20261205-0317*-pair-fake-*.json`); with ca8a23b, -0.008 to +0.012 ms
by default and -0.191 to -0.089 with --hand-over-at-arrival (`…-0421*-pair-fake-*.json`; on by
default since 2026-12-05 22:00).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Backend, Client, Procs, fake_gpu_segment, fake_work_app, print_and_write
from handovers import case_overlaps, split_summary


def one_round(procs: Procs, app: list[str], env: dict[str, str],
              timing: dict) -> dict[str, str]:
    """The two clients' hook logs, as `pairs-fake-<client>.log` (bench/handovers.py's names)."""
    backend = Backend(procs, [Client("a", 0.3, 1.0), Client("b", 0.7, 1.0)], timing,
                      tag="pair-fake")
    try:
        apps = {name: procs.spawn(app, {**env, **backend.hook_env(name), "GEMINI_LOG": "debug"},
                                  f"app-{name}") for name in ("a", "b")}
        for p in apps.values():
            p.proc.wait(timeout=120)
        return {f"pairs-fake-{name}.log": p.drain() for name, p in apps.items()}
    finally:
        backend.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--hand-over-at-arrival", action=argparse.BooleanOptionalAction,
                   default=True, help="gem-schd --[no-]hand-over-at-arrival (default: on)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    timing = {} if args.hand_over_at_arrival else {"hand_over_at_arrival": False}
    rounds = []
    with fake_gpu_segment() as gpu, Procs() as procs:
        app, env = fake_work_app(args.seconds, gpu)
        for _ in range(args.rounds):
            logs = one_round(procs, app, env, timing)
            by_client = case_overlaps(logs).get("pairs-fake", {})
            every = [1e3 * o for rows in by_client.values() for o, _ in rows]
            if not every:
                print("no hand-over in this round's hook logs (did both clients run?)",
                      file=sys.stderr)
                return 1
            rounds.append({"by_client": {c: split_summary(rows, 1.0)
                                         for c, rows in by_client.items()},
                           "overlap_ms_median": round(statistics.median(every), 3),
                           "overlap_ms_max": round(max(every), 3), "handovers": len(every)})
            print(f"overlap median {rounds[-1]['overlap_ms_median']} ms, max "
                  f"{rounds[-1]['overlap_ms_max']} ms, {len(every)} hand-overs", flush=True)
    out = {"device": "fake-gpu", "fake_gpu": env["GEMINI_FAKE_GPU"],
           "date": time.strftime("%Y-%m-%d %H:%M"),
           "command": "python3 bench/pair_fake.py " + " ".join(argv or sys.argv[1:]),
           "root": str(Path(__file__).resolve().parents[1]),
           "hand_over_at_arrival": args.hand_over_at_arrival, "rounds": rounds}
    print_and_write(out, args.out, "pair-fake")
    return 0


if __name__ == "__main__":
    sys.exit(main())
