"""How fast does a program run in the time it is given, when it is given only part of it?
No gemini at all: the program itself works ON ms and then sleeps (or spins) OFF ms, over and
over, as under a 0.4 cap (issue 12: the launch-bound loop under a 0.4 cap does 0.29-0.37 of its
bare rate, though the hook holds the token 40 % of the time).

  python3 bench/duty_cycle.py [--path launch-bound] [--seconds 6] [--cycles 36:54,100:150]

For each cycle ON:OFF it reports the steps per second *while working* (steps / time on) beside
the rate of a continuous run, with the off time spent asleep and spent spinning on the CPU
(`--off`).  Ratio < 1 while asleep but ~1 while spinning: the host (CPU idle states, frequency)
slows a program that sleeps 60 % of each period, whoever makes it sleep.  Ratio > 1 either way:
the GPU runs faster when it idles part of the time (its power-limited clock: the median SM clock
and power draw of each run are recorded where nvidia-smi is found).  `--profile ON:OFF` adds
that cycle once more with a sync after every step, and the rate in each stretch of the working
time (0-2 ms after it starts, 2-5, 5-10, ...) against the same per-step syncing run
continuously: how soon after an idle gap the GPU's speed falls back to its continuous one.
Writes one JSON object to stdout (and to --out DIR/<gpu>-<date>-duty-cycle.json when --out is
given).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import path_app  # bench/ is on sys.path (above)
from common import ClockSampler

PROFILE_EDGES_MS = [0, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]


def continuous(work, seconds: float, per_sync: int = 20) -> float:  # type: ignore[no-untyped-def]
    """Steps per second, syncing every `per_sync` steps (20: every ~50 ms; 1: the profile's
    and --sync-each-step's reference)."""
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(per_sync):
            work.step()
        work.sync()
        steps += per_sync
    return steps / (time.perf_counter() - t0)


def cycled(work, seconds: float, on_s: float, off_s: float, spin: bool,  # type: ignore[no-untyped-def]
           each_step: bool = False) -> dict:
    """Work `on_s`, pause `off_s` (asleep, or spinning), repeat; the rate while working.
    Without `each_step` the program queues steps for `on_s` and then syncs: a GPU program's
    working time is then as long as its queue (up to the driver's limit of queued launches)."""
    steps, worked, t_end = 0, 0.0, time.perf_counter() + seconds
    first_steps: list[float] = []  # the first step's time in each period (a warm-up cost?)
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < on_s:
            work.step()
            n += 1
            if each_step:
                work.sync()
            if n == 1:
                first_steps.append(time.perf_counter() - t0)
        work.sync()
        worked += time.perf_counter() - t0
        steps += n
        pause_end = time.perf_counter() + off_s
        if spin:
            while time.perf_counter() < pause_end:
                pass
        else:
            time.sleep(off_s)
    first_steps.sort()
    return {"on_ms": on_s * 1e3, "off_ms": off_s * 1e3, "off": "spin" if spin else "sleep",
            "rate_while_on": steps / worked if worked else 0.0,
            "first_step_ms_p50": first_steps[len(first_steps) // 2] * 1e3 if first_steps else 0.0}


def profile(work, seconds: float, on_s: float, off_s: float) -> list[dict]:  # type: ignore[no-untyped-def]
    """Work `on_s` syncing every step, sleep `off_s`, repeat; steps per second in each stretch
    of time since the working time began (PROFILE_EDGES_MS), a step counted where it ended."""
    edges = [e for e in PROFILE_EDGES_MS if e < on_s * 1e3] + [on_s * 1e3]
    steps = [0] * (len(edges) - 1)
    periods, t_end = 0, time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < on_s:
            work.step()
            work.sync()
            done_ms = (time.perf_counter() - t0) * 1e3
            for i in range(len(steps)):
                if edges[i] <= done_ms < edges[i + 1]:
                    steps[i] += 1
                    break
        periods += 1
        time.sleep(off_s)
    return [{"from_ms": a, "to_ms": b, "rate": n / (periods * (b - a) / 1e3)}
            for a, b, n in zip(edges[:-1], edges[1:], steps, strict=True)]


def gpu_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name(0).lower().replace("nvidia ", "").replace(" ", "-")
    except Exception:  # no torch / no GPU: the dry-run path
        return "cpu"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--path", default="launch-bound", choices=path_app.PATHS)
    p.add_argument("--seconds", type=float, default=6.0, help="length of each measurement")
    p.add_argument("--cycles", default="36:54,100:150", help="ON:OFF milliseconds, comma-separated")
    p.add_argument("--off", default="both", choices=["sleep", "spin", "both"],
                   help="how the program spends its off time")
    p.add_argument("--sync-each-step", action="store_true",
                   help="sync after every step, the continuous runs too: the working time is "
                        "then ON ms, not ON ms and a full launch queue")
    p.add_argument("--profile", default=None, metavar="ON:OFF",
                   help="one more cycle, synced every step: its rate in each stretch of the "
                        "working time")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    work = path_app.make(args.path)
    path_app.warm_up(work, 1.0)
    clock = ClockSampler(period_ms=20)
    clock.start()

    def measured(run, *run_args):  # type: ignore[no-untyped-def]
        """run(work, *run_args), and the GPU's clock meanwhile."""
        t0 = time.monotonic()
        value = run(work, *run_args)
        return value, clock.over(t0, time.monotonic())

    per_sync = 1 if args.sync_each_step else 20
    bare, bare_clock = measured(continuous, args.seconds, per_sync)
    rows = []
    spins = {"sleep": [False], "spin": [True], "both": [False, True]}[args.off]
    for cycle in args.cycles.split(","):
        on_ms, off_ms = (float(v) for v in cycle.split(":"))
        for spin in spins:
            r, r_clock = measured(cycled, args.seconds, on_ms / 1e3, off_ms / 1e3, spin,
                                  args.sync_each_step)
            r["ratio"] = round(r["rate_while_on"] / bare, 4) if bare else 0.0
            rows.append({**r, **r_clock})
    after, after_clock = measured(continuous, args.seconds, per_sync)
    out = {"device": gpu_name(), "date": time.strftime("%Y-%m-%d %H:%M:%S"), "path": args.path,
           "command": "python3 bench/duty_cycle.py " + " ".join(argv or sys.argv[1:]),
           "continuous_rate": [round(bare, 2), round(after, 2)],
           "continuous_clock": [bare_clock, after_clock], "cycles": rows}
    if args.profile:
        on_ms, off_ms = (float(v) for v in args.profile.split(":"))
        synced = continuous(work, args.seconds, per_sync=1)
        stretches = profile(work, max(args.seconds, 4 * (on_ms + off_ms) / 1e3), on_ms / 1e3,
                            off_ms / 1e3)
        out["profile"] = {"on_ms": on_ms, "off_ms": off_ms, "synced_rate": round(synced, 2),
                          "stretches": [{**s, "ratio": round(s["rate"] / synced, 4)}
                                        for s in stretches]}
    clock.stop()
    text = json.dumps(out, indent=1)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        (args.out / f"{out['device']}-{stamp}-duty-cycle.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
