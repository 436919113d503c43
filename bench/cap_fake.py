"""A client capped alone on the fake GPU, against the same program bare: the daemons' part.

  python3 bench/cap_fake.py [--rounds 3] [--cap 0.4] [--seconds 5] [--out DIR]

Each round runs the fake GPU's test client (`gem_client work`, 0.2 ms kernels in bursts of 25,
a sync after each) bare, then under the hook as the only client of fresh daemons capped at
--cap; its share is its kernels over the bare run's.  The daemons, the hook and the fake GPU
are this tree's: to weigh a daemon change, run it from a worktree of the old revision too
(`git worktree add /tmp/old REV`, build there, `cd /tmp/old && python3 bench/cap_fake.py`),
interleaved.  The fake GPU's clock never moves here: the share is by time.

On 2026-12-05 (the development machine, 5 s, twice 2 rounds each way, interleaved): 0.4061,
0.4061, 0.4041, 0.4055 with the daemons of 4dfc344 (whose timers woke 0.70-0.79 ms late on
uvloop, on a clock of whole ms: bench/timer_precision.py), 0.3969, 0.3984, 0.399, 0.399 with
f68e19e's (`bench/results/fake-gpu-20261205-*-cap-fake-daemons-*.json`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Backend, Client, Procs, fake_gpu_segment, fake_work_app, kernels, print_and_write


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cap", type=float, default=0.4)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    shares = []
    with fake_gpu_segment() as gpu, Procs() as procs:
        app, env = fake_work_app(args.seconds, gpu)
        for _ in range(args.rounds):
            bare = kernels(procs, app, env, "bare")
            backend = Backend(procs, [Client("cap", args.cap, args.cap)], tag="cap-fake")
            try:
                capped = kernels(procs, app, {**env, **backend.hook_env("cap")}, "cap")
            finally:
                backend.stop()
            shares.append(round(capped / bare, 4))
            print(f"share {shares[-1]}", flush=True)
    out = {"device": "fake-gpu", "fake_gpu": env["GEMINI_FAKE_GPU"],
           "date": time.strftime("%Y-%m-%d %H:%M"),
           "command": "python3 bench/cap_fake.py " + " ".join(argv or sys.argv[1:]),
           "root": str(Path(__file__).resolve().parents[1]), "cap": args.cap,
           "shares": shares, "median": statistics.median(shares)}
    print_and_write(out, args.out, "cap-fake")
    return 0


if __name__ == "__main__":
    sys.exit(main())
