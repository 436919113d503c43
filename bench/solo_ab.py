"""Alone (and capped) under the hook vs bare, many short runs in turn (issue 12: "alone at bare
speed"; a cap of a program the host paces, judged against bare runs beside it).

  python3 bench/solo_ab.py [--path launch-bound] [--rounds 6] [--seconds 3] [--cpus 4-7]
                           [--variants bare,disabled,solo,solo-clock,cap] [--cap-seconds 15]
                           [--budget SECONDS] [--stats] [--out DIR]

Each round runs, in fresh processes one after the other: the program bare; with the hook
preloaded but switched off (GEMINI_HOOK_DISABLE=1: pass-through, no daemons reached); under
the hook as the only client (`solo 1.0 1.0`); with `solo-clock` in --variants, the same with the
gate's hot path reading clock_gettime instead of the time-stamp counter (GEMINI_HOOK_TICKS=0);
and, with `cap` in --variants, as a client capped
at --cap (`cap 0.4 0.4`, --cap-seconds long: one client of the same daemons all along, so its
later runs meet a scheduler that has seen it before).  Rates are steps/s of bench/path_app.py
(--no-wait).  The first three tell apart what a preloaded library costs by being there and what
the gate, the token and the markers cost.  Run to run, a program the host paces (a
launch-bound loop, torch.compile without CUDA graphs) moves by 10-40 % on a VM (H100,
2026-11-25: 457-713 steps/s in one invocation), so the answer is the median of the per-round
ratios, with their spread, and a capped run's share by work is divided by the bare run of its
own round; each round runs the variants in another order, and --cpus keeps them all on the
same CPUs.  --budget stops before a round that would end past it (by the longest round so
far): the rounds done are written, where a time limit from outside would leave nothing (a
round of 3 fresh processes takes about 20 s on the H100 for 3 s runs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    GIB,
    PY,
    Backend,
    Client,
    Procs,
    base_env,
    gpu_name,
    hook_path,
    print_and_write,
)

APP = Path(__file__).resolve().parent / "path_app.py"
VARIANTS = ("bare", "disabled", "solo")
ALL_VARIANTS = (*VARIANTS, "solo-clock", "cap")
HOOKED = ("solo", "solo-clock", "cap")  # the variants whose hook runs its gate


def rate(path: str, seconds: float, env: dict[str, str], cpus: set[int] | None = None) -> float:
    def pin() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)

    p = subprocess.run([PY, str(APP), path, "--no-wait", "--seconds", str(seconds)], env=env,
                       capture_output=True, text=True, timeout=seconds + 240, preexec_fn=pin)
    for line in reversed(p.stdout.splitlines()):
        msg = json.loads(line) if line.startswith("{") else {}
        if msg.get("done"):
            return float(msg["steps_per_s"])
        if "error" in msg:
            raise RuntimeError(msg["error"])
    raise RuntimeError(f"no result (rc {p.returncode}): {p.stderr[-800:]}")


def hook_counts(path: str, seconds: float, env: dict[str, str],
                cpus: set[int] | None) -> tuple[float, dict[str, int]]:
    """rate(), under the hook, with the hook's counts (GEMINI_HOOK_STATS, written at exit):
    the gate's ("gate.*": slow paths, holds, token requests) and the launch calls'."""
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "hook-stats.json"
        steps = rate(path, seconds, {**env, "GEMINI_HOOK_STATS": str(stats)}, cpus)
        counts = json.loads(stats.read_text()) if stats.exists() else {}
    kept = {k: v for k, v in counts.items()
            if v and (k.startswith(("gate.", "cuLaunch", "cuGraphLaunch")))}
    return steps, kept


def cpu_list(text: str) -> set[int] | None:
    """"4-7,9" -> {4, 5, 6, 7, 9}; "" -> None."""
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out or None


def variants_of(text: str) -> tuple[str, ...]:
    """"solo,cap" -> ("bare", "solo", "cap"), in ALL_VARIANTS' order; unknown names refused."""
    names = {v.strip() for v in text.split(",") if v.strip()} | {"bare"}
    unknown = names - set(ALL_VARIANTS)
    if unknown:
        raise SystemExit(f"solo_ab: unknown variant(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(ALL_VARIANTS)}")
    return tuple(v for v in ALL_VARIANTS if v in names)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--path", default="launch-bound")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--budget", type=float, default=None,
                   help="seconds: start no round that would end past this (at least one runs)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"which of {','.join(ALL_VARIANTS)} each round runs (bare always)")
    p.add_argument("--cap", type=float, default=0.4, help="the capped client's limit")
    p.add_argument("--cap-seconds", type=float, default=15.0, help="length of a capped run")
    p.add_argument("--cpus", default="", help="run the program on these CPUs only (e.g. 4-7): "
                   "where a process lands moves a launch-bound loop's rate by 10-20 %%")
    p.add_argument("--stats", action="store_true",
                   help="keep the hook's gate and launch counts of each hooked run (\"stats\")")
    args = p.parse_args(argv)
    args.variants = variants_of(args.variants)
    with Procs() as procs:
        return measure(args, procs, argv)


def measure(args: argparse.Namespace, procs: Procs, argv: list[str] | None) -> int:
    variants = args.variants
    clients = [Client("solo", 1.0, 1.0, 16 * GIB)]
    if "cap" in variants:
        clients.append(Client("cap", args.cap, args.cap, 16 * GIB))
    backend = Backend(procs, clients, tag="solo-ab")
    try:
        envs = {"bare": base_env(),
                "disabled": {**base_env(), "LD_PRELOAD": str(hook_path()),
                             "GEMINI_HOOK_DISABLE": "1"},
                "solo": {**base_env(), **backend.hook_env("solo")}}
        envs["solo-clock"] = {**envs["solo"], "GEMINI_HOOK_TICKS": "0"}
        if "cap" in variants:
            envs["cap"] = {**base_env(), **backend.hook_env("cap")}
        seconds = {v: args.cap_seconds if v == "cap" else args.seconds for v in variants}
        runs: dict[str, list[float]] = {v: [] for v in variants}
        counts: dict[str, list[dict[str, int]]] = {v: [] for v in variants if v in HOOKED}
        cpus = cpu_list(args.cpus)
        started, longest = time.monotonic(), 0.0
        for i in range(args.rounds):
            if i > 0 and args.budget is not None and \
                    time.monotonic() - started + longest > args.budget:
                print(f"budget: stopped after {i} of {args.rounds} rounds", flush=True)
                break
            round_start = time.monotonic()
            # Each round in another order: what changes over a round (a CPU's boost, a cache
            # warmed by the run before) must not favour one variant.
            n = len(variants)
            for v in variants[i % n:] + variants[:i % n]:
                if args.stats and v in HOOKED:
                    steps, kept = hook_counts(args.path, seconds[v], envs[v], cpus)
                    counts[v].append(kept)
                else:
                    steps = rate(args.path, seconds[v], envs[v], cpus)
                runs[v].append(round(steps, 2))
            print(f"round {i}: " + ", ".join(f"{v} {runs[v][-1]}" for v in variants), flush=True)
            longest = max(longest, time.monotonic() - round_start)
    finally:
        backend.stop()
    out: dict = {"device": gpu_name(), "date": time.strftime("%Y-%m-%d %H:%M"),
                 "command": "python3 bench/solo_ab.py " + " ".join(argv or sys.argv[1:]),
                 "path": args.path, "seconds": args.seconds, "cpus": args.cpus,
                 "rounds": len(runs["bare"]), "runs": runs}
    if "cap" in variants:
        out.update(cap=args.cap, cap_seconds=args.cap_seconds)
    if args.stats:
        out["stats"] = counts
    for v in variants[1:]:
        ratios = sorted(a / b for a, b in zip(runs[v], runs["bare"], strict=True))
        out[f"{v}_over_bare"] = {"median": round(statistics.median(ratios), 4),
                                 "min": round(ratios[0], 4), "max": round(ratios[-1], 4)}
    print_and_write(out, args.out, f"solo-ab-{args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
