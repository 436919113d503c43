"""How fast does a program run in the time it is given, when it is given only part of it?
No gemini at all: the program itself works ON ms and then sleeps (or spins) OFF ms, over and
over, as under a 0.4 cap (issue 12: the launch-bound loop under a 0.4 cap does 0.29-0.37 of its
bare rate, though the hook holds the token 40 % of the time).

  python3 bench/duty_cycle.py [--path launch-bound] [--seconds 6] [--cycles 36:54,100:150]

For each cycle ON:OFF it reports the steps per second *while working* (steps / time on) beside
the rate of a continuous run, with the off time spent asleep and spent spinning on the CPU.
Ratio < 1 while asleep but ~1 while spinning: the host (CPU idle states, frequency) slows a
program that sleeps 60 % of each period, whoever makes it sleep.  Writes one JSON object to
stdout (and to --out DIR/<gpu>-<date>-duty-cycle.json when --out is given).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import path_app  # bench/ is on sys.path (above)


def continuous(work, seconds: float) -> float:  # type: ignore[no-untyped-def]
    """Steps per second, syncing every ~50 ms."""
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            work.step()
        work.sync()
        steps += 20
    return steps / (time.perf_counter() - t0)


def cycled(work, seconds: float, on_s: float, off_s: float, spin: bool) -> dict:  # type: ignore[no-untyped-def]
    """Work `on_s`, pause `off_s` (asleep, or spinning), repeat; the rate while working."""
    steps, worked, t_end = 0, 0.0, time.perf_counter() + seconds
    first_steps: list[float] = []  # the first step's time in each period (a warm-up cost?)
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < on_s:
            work.step()
            n += 1
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
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    work = path_app.make(args.path)
    path_app.warm_up(work, 1.0)
    bare = continuous(work, args.seconds)
    rows = []
    for cycle in args.cycles.split(","):
        on_ms, off_ms = (float(v) for v in cycle.split(":"))
        for spin in (False, True):
            r = cycled(work, args.seconds, on_ms / 1e3, off_ms / 1e3, spin)
            r["ratio"] = round(r["rate_while_on"] / bare, 4) if bare else 0.0
            rows.append(r)
    after = continuous(work, args.seconds)
    out = {"device": gpu_name(), "date": time.strftime("%Y-%m-%d %H:%M:%S"), "path": args.path,
           "command": "python3 bench/duty_cycle.py " + " ".join(argv or sys.argv[1:]),
           "continuous_rate": [round(bare, 2), round(after, 2)], "cycles": rows}
    text = json.dumps(out, indent=1)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        (args.out / f"{out['device']}-{stamp}-duty-cycle.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
