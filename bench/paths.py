"""Issue 12: caps and shares that hold over seconds on every kind of program; alone at bare speed.

  python3 bench/paths.py [--only torch-eager,cupy,pairs,rtt] [--budget 510] [--merge FILE ...]
  python3 bench/paths.py --plan [...]          estimated seconds per unit, runs nothing
  python3 bench/paths.py --merge-only --merge A.json --merge B.json     combine chunks, no GPU

For each program kind ("path", bench/path_app.py: torch-eager, cuda-graph, triton, jax,
launch-bound, torch-compile, torch-compile-graphs, cupy):
  solo  --solo-runs x (bare, then under the hook as the only client `solo 1.0 1.0 16GiB`),
        interleaved; rate = steps/s after 0.5 s of the measured run; solo_over_bare =
        median(solo) / median(bare), with the min/max of the per-pair ratios.
  cap   a fresh scheduler + pod manager, `cap 0.4 0.4 16GiB`, one client for --cap-seconds with
        GEMINI_LOG=debug: work per second / median bare rate (per_second), cap_15s, cap_60s, the
        worst 1 s and 10 s (sliding by 1 s) errors, the highest and lowest 1 s window sliding by
        50 ms, and the overuse the hook logs per token.  Then the cap is lifted (a config edit)
        and the same process runs 4 s more: cap_15s_self and cap_60s_self are its shares
        against that rate of its own (a loop its host paces differs from process to process;
        not with --cap-procs).
pairs   torch-eager clients started together, 0.3/0.7 and 0.2/0.3/0.5 (limits 1.0), each
        --pair-seconds: shares over 10 s windows (sliding by 1 s) and 1 s bins after 1 s.
        Only when named: "capped-pairs" (two clients capped at 0.3; at 0.4 and 0.5; three
        at 0.2, 0.3, 0.3), "procs-pairs" (0.5/0.5, client a of two processes, judged against
        two bare processes' work together), "late-pairs" (0.4/0.5 uncapped, and two capped at
        0.3, b starting --late-s after a: 1 s bins from b's start on) and "edit-pairs"
        (0.25/0.75, b capped at 0.3 by a config edit --edit-s after the start: 1 s bins from
        the edit on, read against the shares after it, a 0.7, b 0.3; two capped at 0.3, b
        raised to 0.6; a capped at 0.3 beside b at 0.6, b lowered to 0.3; three capped at
        0.3, 0.35 and 0.3, b lowered to 0.3; and three at 0.2, 0.3 and 0.3, b raised to
        0.4).  "pair:CASE" runs one case by its name.
rtt     the token round trip hook -> pmgr -> schd (bench/scenarios.py's S6), every 10 ms.

--only picks units: path names, "cap:PATH" (its capped run alone), "solo:PATH" (its bare/solo
runs alone), "pairs", "rtt" (default: all of them but torch-threads and graph-launch-bound,
which run only when named: torch eager's matmuls launched by two threads, a stream each, and a
loop of tiny CUDA graphs).  Every run has a time
limit; a failing row is recorded ("error") and the rest still run.  Results are written after
every unit to $OUT/<gpu>-<YYYYMMDD-HHMMSS>-paths.{json,md} (default bench/results/), and the table
is printed at the end.  Imports from gemini only through bench/common.py and bench/scenarios.py
(the daemons run as their own processes; they need watchdog and pyyaml on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import io
import itertools
import json
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    BENCH,
    BUILD,
    GIB,
    PY,
    ROOT,
    Backend,
    Client,
    ClockSampler,
    Deadline,
    GrantTracer,
    Proc,
    Procs,
    base_env,
    gpu_info,
    hook_sources_digest,
    library_id,
    pct,
    promised_shares,
    read_stats,
    slug,
)
from token_path import token_path

PATHS = ["torch-eager", "cuda-graph", "triton", "jax", "launch-bound", "torch-compile",
         "torch-compile-graphs", "cupy"]
# Run only when named in --only: not among the issue's rows.
# torch-threads: two launching threads, a stream each (the hook's lanes); graph-launch-bound:
# a loop of tiny CUDA graphs (what the gate costs a graph launch)
# torch-eager-spin: torch eager waiting by polling its stream (cuStreamQuery), never syncing
# torch-eager-long: one 16384^2 matmul a step (~11 ms on an H200), a program of long kernels
# torch-train: an eager training step of torch.compile's MLP with AdamW (light kernels among
# the matmuls); cupy-streams: CuPy's matmuls, each step on the next of 96 streams (more than
# the hook's 64 lanes)
OPTIONAL = ["torch-threads", "graph-launch-bound", "torch-eager-spin", "torch-eager-long",
            "torch-train", "cupy-streams"]
EXTRA = ["pairs", "rtt"]
# (only when named: below)
OPTIONAL_EXTRA = ["capped-pairs", "procs-pairs", "late-pairs", "edit-pairs"]
DRY = ["cpu"]  # path_app's GPU-free kind: `--only cpu,pairs,rtt --pair-path cpu` tests the plumbing
MEM = 16 * GIB
CAP_TARGET = 0.4
PAIR_CASES: dict[str, list[tuple[str, float]]] = {
    "0.3/0.7": [("a", 0.3), ("b", 0.7)],
    "0.2/0.3/0.5": [("a", 0.2), ("b", 0.3), ("c", 0.5)],
}
# Clients capped at their targets, run only when named (`--only capped-pairs`): caps that
# leave the GPU idle between them, as one cap alone does; 0.4+0.5 leaves it idle a tenth of
# the time only, where each calibration's lump has little idle time around it to go in.
CAPPED_PAIR_CASES: dict[str, list[tuple[str, float]]] = {
    "capped 0.3+0.3": [("a", 0.3), ("b", 0.3)], "capped 0.4+0.5": [("a", 0.4), ("b", 0.5)],
    "capped 0.2+0.3+0.3": [("a", 0.2), ("b", 0.3), ("c", 0.3)]}
# A client of several processes beside a client of one, run only when named (`--only
# procs-pairs`): the processes share their client's token (README: "Clients of several
# processes"); a client's work is its processes' together, against what they do bare together.
PROCS_PAIR_CASES: dict[str, list[tuple[str, float]]] = {"0.5/0.5 a x2": [("a", 0.5), ("b", 0.5)]}
PAIR_PROCS: dict[str, dict[str, int]] = {"0.5/0.5 a x2": {"a": 2}}  # (a client not named: one)
# A client that comes while another has run alone, run only when named (`--only late-pairs`):
# b starts --late-s after a, and the shares are read from b's start on, its first second
# included (a client alone once earned credit it then took back in one lump).  Uncapped, the
# two are promised 0.5 each (their requests, and the rest shared evenly: promised_shares).
LATE_PAIR_CASES: dict[str, list[tuple[str, float]]] = {
    "0.4/0.5 b late": [("a", 0.4), ("b", 0.5)], "capped 0.3+0.3 b late": [("a", 0.3), ("b", 0.3)]}
LATE_CLIENTS: dict[str, str] = {"0.4/0.5 b late": "b", "capped 0.3+0.3 b late": "b"}
# A cap lowered while its client runs, run only when named (`--only edit-pairs`): the config
# is edited --edit-s after the start, and the shares are read from the edit on, its first second
# included (a lowered cap once waited for the client's use under the old one to slide out of
# its 1 s window: nothing for 0.6 s on the simulator).  EDITS: the clients' (request, limit)
# after the edit.
EDIT_PAIR_CASES: dict[str, list[tuple[str, float]]] = {
    "0.25/0.75 b capped 0.3": [("a", 0.25), ("b", 0.75)],
    "capped 0.3+0.3 b raised to 0.6": [("a", 0.3), ("b", 0.3)],
    "capped 0.3+0.6 b lowered to 0.3": [("a", 0.3), ("b", 0.6)],
    "capped 0.3+0.35+0.3 b lowered to 0.3": [("a", 0.3), ("b", 0.35), ("c", 0.3)],
    "capped 0.2+0.3+0.3 b raised to 0.4": [("a", 0.2), ("b", 0.3), ("c", 0.3)]}
EDITS: dict[str, dict[str, tuple[float, float]]] = {
    "0.25/0.75 b capped 0.3": {"a": (0.25, 1.0), "b": (0.3, 0.3)},
    "capped 0.3+0.3 b raised to 0.6": {"a": (0.3, 0.3), "b": (0.6, 0.6)},
    "capped 0.3+0.6 b lowered to 0.3": {"a": (0.3, 0.3), "b": (0.3, 0.3)},
    "capped 0.3+0.35+0.3 b lowered to 0.3": {"a": (0.3, 0.3), "b": (0.3, 0.3), "c": (0.3, 0.3)},
    "capped 0.2+0.3+0.3 b raised to 0.4": {"a": (0.2, 0.2), "b": (0.4, 0.4), "c": (0.3, 0.3)}}
# The cases whose clients start capped at their targets (the others start uncapped).
CAPPED_CASES = {*CAPPED_PAIR_CASES, "capped 0.3+0.3 b late", "capped 0.3+0.3 b raised to 0.6",
                "capped 0.3+0.6 b lowered to 0.3", "capped 0.3+0.35+0.3 b lowered to 0.3",
                "capped 0.2+0.3+0.3 b raised to 0.4"}
ALL_PAIR_CASES = {**PAIR_CASES, **CAPPED_PAIR_CASES, **PROCS_PAIR_CASES, **LATE_PAIR_CASES,
                  **EDIT_PAIR_CASES}
PAIR_PATH = "torch-eager"
BARE_TOGETHER_S = 10.0  # --cap-procs: how long its n processes run bare together
QUICK_BARE_RUNS = 3  # bare runs made when a unit needs a bare rate this invocation has not got
RATE_SKIP_S = 0.5  # bare/solo rate: from 0.5 s into the measured run to its end
LIFTED_S = 4.0  # a capped run's process, its cap lifted: its own rate (run_capped_then_lifted)
PAIR_WARM_S = 1.0  # pairs: windows start 1 s after the start
# Rough seconds from process start to "ready" (imports, CUDA context, warm-up 1 s, calibration)
# and, once per invocation, a cold compile/autotune; for --budget and --plan only.
STARTUP_S = {"torch-eager": 6, "cuda-graph": 7, "triton": 7, "jax": 9, "launch-bound": 6,
             "torch-threads": 6, "graph-launch-bound": 7, "torch-compile": 14,
             "torch-compile-graphs": 17, "cupy": 5, "torch-eager-spin": 6,
             "torch-eager-long": 6, "torch-train": 7, "cupy-streams": 5}
COLD_S = {"triton": 5, "jax": 5, "torch-compile": 45, "torch-compile-graphs": 60}
READY_TIMEOUT_S = {"torch-compile": 300, "torch-compile-graphs": 360}
SYNC_EVERY_MS = 50.0  # workers sync about this often (path_app's k steps)
# Programs whose steps cannot be timed by CUDA events report their work only at a sync: k steps
# straddle a wait for the token, and the highest second of a 0.4 cap read 0.452-0.455 with JAX
# reporting every 62 steps, 0.442-0.444 every 13 (H100, 2026-11-25).  They sync more often.
NO_EVENTS = {"jax"}
SYNC_EVERY_MS_NO_EVENTS = 10.0
BACKEND_S = 4
# What issue 12 asks, with the numbers of the issue-4 goals (bench/README.md: S2, S3, S5, S6).
GOALS = {"solo_over_bare": 0.99, "cap_tol": 0.02, "err1_pp": 5.0, "err10_pp": 2.0,
         "rtt_p50_us": 100.0, "rtt_p99_us": 1000.0}
# What the rtt unit writes at the top level (merged as one: the newest invocation's).
RTT_KEYS = ("rtt_us_p50", "rtt_us_p99", "rtt_us_p50_busy_poll", "rtt_us_p50_all_polling", "rtt")
OVERUSE_RE = re.compile(r"overuse ([0-9.]+) ms")
# The hook as of this writing logs "token: Q ms (asked for a B ms burst, reported X ms overuse)"
# (X: the previous token's overuse) at debug level; used only when no line matches OVERUSE_RE.
OVERUSE_FALLBACK_RE = re.compile(r"reported ([0-9.]+) ms overuse")
# The hook's measure of each token's queue: "measured X ms over N launches" (launch_cost_of)
MEASURED_RE = re.compile(r"measured ([0-9.]+) ms over ([0-9]+) launches")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rnd(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


# ---- pure helpers: progress, windows, shares, overuse, merge -----------------------------------

# A worker's (time, steps) samples: lists from its own JSON, tuples from the steps files
# (high_seconds.read_steps).
Samples = Sequence[Sequence[float]]


def progress(samples: Samples, t: float) -> float:
    """Steps completed by time t, linearly interpolated between (time, steps) samples; clamped to
    the first/last sample outside them."""
    if not samples:
        return 0.0
    if t <= samples[0][0]:
        return float(samples[0][1])
    if t >= samples[-1][0]:
        return float(samples[-1][1])
    lo, hi = 0, len(samples) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if samples[mid][0] <= t:
            lo = mid
        else:
            hi = mid
    (t0, n0), (t1, n1) = samples[lo], samples[hi]
    return n0 + (n1 - n0) * (t - t0) / (t1 - t0) if t1 > t0 else float(n1)


def span_rate(samples: Samples, a: float, b: float) -> float | None:
    """Steps/s between the first sample at or after a and the last at or before b (sample to
    sample: no interpolation)."""
    inside = [s for s in samples if a - 1e-9 <= s[0] <= b + 1e-9]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def summed(series: list[list[list[float]]], t0: float, t_end: float) -> list[list[float]]:
    """Several processes' (time, steps) samples as one: their steps added up at every time any
    of them sampled, from t0 (steps 0) to t_end."""
    times = sorted({t for s in series for t, _ in s if t0 < t < t_end} | {t0, t_end})
    base = [progress(s, t0) for s in series]
    return [[t, sum(progress(s, t) - b for s, b in zip(series, base, strict=True))]
            for t in times]


SLIDE_STEP_S = 0.05  # the sliding 1 s windows of a capped run


def window_list(a: float, b: float, width: float, step: float) -> list[tuple[float, float]]:
    """Windows [a + i*step, a + i*step + width] that end by b."""
    out, i = [], 0
    while a + i * step + width <= b + 1e-9:
        out.append((a + i * step, a + i * step + width))
        i += 1
    return out


def shares(samples: Samples, wins: list[tuple[float, float]], bare: float) -> list[float]:
    return [(progress(samples, hi) - progress(samples, lo)) / (bare * (hi - lo)) for lo, hi in wins]


def own_seconds(runs: list[dict], median: float) -> list[float]:
    """Each bare run's whole 1 s bins from RATE_SKIP_S on, as a share of the `median` bare
    rate: how much the program's own work moves from one second to the next, with nothing
    sharing the GPU (a host-paced loop's by a third: its capped seconds cannot be judged
    closer than that)."""
    out: list[float] = []
    for r in runs:
        if s := r.get("samples"):
            out += shares(s, window_list(s[0][0] + RATE_SKIP_S, s[-1][0], 1.0, 1.0), median)
    return out


def own_spread(seconds: list[float]) -> float | None:
    """The farthest a bare second strays from the median rate, as a fraction of it."""
    return max(abs(x - 1.0) for x in seconds) if seconds else None


def argmax(values: list[float]) -> int | None:
    """The index of the largest value (the first of equals; None: no values)."""
    return max(range(len(values)), key=values.__getitem__) if values else None


def share_summary(values: list[float], target: float) -> dict:
    """The worst window (largest |share - target|) and the error distribution in pp."""
    if not values:
        return {"achieved": None, "error_pp_max": None, "error_pp_p90": None, "mean": None,
                "shares": []}
    errs = [abs(v - target) * 100 for v in values]
    worst = argmax(errs)
    assert worst is not None
    return {"achieved": rnd(values[worst]), "error_pp_max": rnd(errs[worst], 2),
            "error_pp_p90": rnd(pct(errs, 0.9), 2), "mean": rnd(statistics.fmean(values)),
            "shares": [rnd(v) for v in values]}


def failed_runs(bare: list[dict], solo: list[dict]) -> dict:
    """The bare and hooked runs that failed (a crash under the hook is its own result: dropped
    from the ratios, one run in five crashing still read "alone at bare speed ✅")."""
    failed = {kind: [r["error"] for r in runs if "error" in r]
              for kind, runs in (("bare", bare), ("solo", solo))}
    if not any(failed.values()):
        return {}
    said = "; ".join(f"{len(errors)} of {len(runs)} {kind} runs failed ({errors[0][:60]})"
                     for (kind, errors), runs in zip(failed.items(), (bare, solo), strict=True)
                     if errors)
    return {"bare_failed": len(failed["bare"]), "solo_failed": len(failed["solo"]),
            "runs_failed_note": said}


def sliding_summary(values: list[float], target: float) -> dict:
    """The 1 s windows sliding by SLIDE_STEP_S: the largest |share - target| (pp), the lowest
    and the highest share."""
    if not values:
        return {"error_pp_max_sliding": None, "low_sliding": None, "high_sliding": None}
    return {"error_pp_max_sliding": rnd(max(abs(v - target) for v in values) * 100, 2),
            "low_sliding": rnd(min(values)), "high_sliding": rnd(max(values))}


def cap_metrics(samples: Samples, bare: float, target: float = CAP_TARGET) -> dict:
    """A capped client's run (samples from its start, steps 0) against its bare rate."""
    t0, t_end = samples[0][0], samples[-1][0]
    dur = t_end - t0
    per_second = shares(samples, window_list(t0, t_end, 1.0, 1.0), bare)
    ten = shares(samples, window_list(t0, t_end, 10.0, 1.0), bare)
    first15 = ((progress(samples, t0 + 15) - progress(samples, t0)) / (bare * 15)
               if dur >= 15 - 1e-9 else None)
    whole = (samples[-1][1] - samples[0][1]) / (bare * dur) if dur > 0 else None
    err1 = [abs(v - target) * 100 for v in per_second]
    err10 = [abs(v - target) * 100 for v in ten]
    # The issue bounds every 1 s window, not only the whole seconds of the run: these slide by
    # SLIDE_STEP_S from the run's start, so they hold its whole seconds too (a window
    # straddling two bins may hold the end of one burst and the start of the next).
    slide = window_list(t0, t_end, 1.0, SLIDE_STEP_S)
    sliding = shares(samples, slide, bare)
    every = sliding_summary(sliding, target)
    high = argmax(sliding)
    speed = burst_speed(samples, bare)
    return {
        "cap_target": target, "cap_seconds": rnd(dur, 2), "cap_bare_rate": rnd(bare, 2),
        "cap_15s": rnd(first15), "cap_60s": rnd(whole),
        # Work per second while it ran, against bare (> 1: each step ran faster than bare, e.g.
        # a power-bound GPU clocking higher at 40 % duty), and the share of time it ran at that
        # speed: the GPU time it got, as far as its steps tell.
        "cap_burst_speed": rnd(speed),
        "cap_duty": rnd(whole / speed) if whole is not None and speed else None,
        "cap_err1_max_pp": rnd(max(err1), 2) if err1 else None,
        "cap_err1_p90_pp": rnd(pct(err1, 0.9), 2) if err1 else None,
        "cap_err1_worst_at_s": argmax(err1),
        "cap_err10_max_pp": rnd(max(err10), 2) if err10 else None,
        "cap_err10_worst_at_s": argmax(err10),
        # The worst of every 1 s window, either way (the whole seconds alone read 1.4x lower
        # at the median on the H200's kept logs, up to 3.3x: a second's two halves at 0.5 and
        # 0.1 of a 0.3 cap read 0.3).
        "cap_err1_sliding_max_pp": every["error_pp_max_sliding"],
        "cap_high1_sliding": every["high_sliding"],
        "cap_high1_sliding_at_s": rnd(slide[high][0] - t0, 2) if high is not None else None,
        "cap_low1_sliding": every["low_sliding"],
        "per_second": [rnd(v) for v in per_second],
        "cap_10s": [rnd(v) for v in ten],
    }


def burst_speed(samples: Samples, bare: float) -> float | None:
    """The median rate between consecutive samples (steps per second while working: a wait for
    the token lies between two samples, never inside one) over the bare rate."""
    rates = [(n2 - n1) / (t2 - t1) for (t1, n1), (t2, n2) in itertools.pairwise(samples)
             if n2 > n1 and t2 > t1]
    return statistics.median(rates) / bare if rates and bare > 0 else None


def pair_entries(case: str, samples: dict[str, list[list[float]]], targets: dict[str, float],
                 t0: float, t_end: float, bare: float | dict[str, float], warm: float = PAIR_WARM_S,
                 path: str = PAIR_PATH) -> list[dict]:
    """Two entries (10 s windows sliding by 1 s, 1 s bins), both starting `warm` after t0.
    `bare`: the program's bare rate, or each client's (clients running different programs)."""
    names = list(targets)
    per_client = isinstance(bare, dict)
    bare_of = bare if isinstance(bare, dict) else dict.fromkeys(names, bare)
    bins = window_list(t0 + warm, t_end, 1.0, 1.0)
    per1 = {n: shares(samples[n], bins, bare_of[n]) for n in names}
    agg1 = [sum(per1[n][i] for n in names) for i in range(len(bins))]
    # Every 1 s window, not the whole seconds alone (see cap_metrics' cap_err1_sliding_max_pp).
    slide = window_list(t0 + warm, t_end, 1.0, SLIDE_STEP_S)
    sliding = {n: shares(samples[n], slide, bare_of[n]) for n in names}
    out = []
    for width in (10, 1):
        wins = bins if width == 1 else window_list(t0 + warm, t_end, 10.0, 1.0)
        per = per1 if width == 1 else {n: shares(samples[n], wins, bare_of[n]) for n in names}
        agg = [sum(per[n][i] for n in names) for i in range(len(wins))]
        out.append({
            "case": case, "window_s": width, "path": path, "windows": len(wins),
            "bare_rate": None if per_client else rnd(bare_of[names[0]], 2),
            "clients": [{"name": n, "target": targets[n], **share_summary(per[n], targets[n]),
                         **(sliding_summary(sliding[n], targets[n]) if width == 1 else {}),
                         **({"bare_rate": rnd(bare_of[n], 2)} if per_client else {})}
                        for n in names],
            "aggregate_median": rnd(statistics.median(agg)) if agg else None,
            "aggregate_min": rnd(min(agg)) if agg else None,
            "aggregate_1s_median": rnd(statistics.median(agg1)) if agg1 else None,
        })
    return out


def reload_stamp(schd_log: str, after: float) -> float | None:
    """When gem-schd applied the first config edit at or after `after` (CLOCK_MONOTONIC, from
    its debug lines' stamps; None without them)."""
    for m in re.finditer(r"\[(\d+\.\d+)\] config reloaded", schd_log):
        if float(m.group(1)) >= after:
            return float(m.group(1))
    return None


def granted_share(grants: list[tuple[str, float, float]], name: str, a: float,
                  b: float) -> float | None:
    """The share of [a, b] that the scheduler granted `name` the token."""
    held = sum(max(0.0, min(e, b) - max(s, a)) for n, s, e in grants if n == name)
    return rnd(held / (b - a), 4) if b > a else None


def granted_per_second(grants: list[tuple[str, float, float]], name: str, a: float,
                       b: float) -> list[float | None]:
    """The share granted `name` in each whole second of [a, b] (per_second's bins): where its
    work per second wanders and these do not, the program's own pace moved under a cap that
    held (a loop its host paces: H200, 2026-12-02, granted 0.400 of every second while its work
    read 0.32-0.51 of its bare rate)."""
    return [granted_share(grants, name, lo, hi) for lo, hi in window_list(a, b, 1.0, 1.0)]


def per_granted_second(share: float | None, granted: float | None, speed_charged_s: float | None,
                       seconds: float) -> dict:
    """Work done and time charged per second granted (cap_work_per_granted_s: the share of bare
    work over the share granted; cap_charged_per_granted_s: 1 + the speed charge over the time
    granted).  Where they differ, the speed was charged wrong (work less than charged: the cap
    falls short by as much)."""
    if not share or not granted:
        return {"cap_work_per_granted_s": None, "cap_charged_per_granted_s": None}
    charged = None if speed_charged_s is None else 1.0 + speed_charged_s / (granted * seconds)
    return {"cap_work_per_granted_s": rnd(share / granted),
            "cap_charged_per_granted_s": None if charged is None else rnd(charged)}


def against_self(cap: dict, bare: float, self_rate: float | None) -> dict:
    """The cap's shares judged against the capped process's own rate once its cap was lifted
    (Bench.run_capped_then_lifted), beside the bare median's."""
    if not self_rate:
        return {}
    scale = bare / self_rate
    return {"cap_self_rate": rnd(self_rate, 2), "cap_self_over_bare": rnd(self_rate / bare),
            **{f"{k}_self": rnd(cap[k] * scale) for k in ("cap_15s", "cap_60s")
               if cap.get(k) is not None}}


# A hook's debug line's stamp (CLOCK_MONOTONIC seconds)
DEBUG_STAMP = re.compile(r"\] debug: \[(\d+\.\d+)\]")


def log_until(text: str, t: float | None) -> str:
    """A hook's log up to its first line stamped after `t` (CLOCK_MONOTONIC), all of it for
    None: the capped run's tokens, not those after its cap was lifted."""
    if t is None:
        return text
    for m in re.finditer(r"^.*?" + DEBUG_STAMP.pattern, text, re.M):
        if float(m.group(1)) > t:
            return text[:m.start()]
    return text


def log_between(text: str, start: float, end: float | None) -> str:
    """A hook's debug lines stamped from `start` to `end` (None: on to the end): the measured
    run's tokens, not its warm-up's nor those after it (a warm-up token was the whole p99 of a
    run of 100)."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if (m := DEBUG_STAMP.search(line)) and start <= float(m.group(1))
                   and (end is None or float(m.group(1)) <= end))


def overuse_of(log_text: str) -> dict:
    """parse_overuse over a hook's debug log, on its lines that speak of overuse."""
    return parse_overuse("".join(line for line in log_text.splitlines(keepends=True)
                                 if "overuse" in line))


def launch_cost_of(log_text: str) -> dict:
    """The GPU time per launch a hook measured over its tokens (its "measured X ms over N
    launches" lines): two clients of one program that differ here ran other kernels, whatever
    their shares (a JAX process that tuned itself beside a neighbour ran its matmuls 14 %
    slower than the other's, 225 us a launch against 197: H100, 2026-12-06 17:15)."""
    ms, launches = 0.0, 0
    for m in MEASURED_RE.finditer(log_text):
        ms += float(m.group(1))
        launches += int(m.group(2))
    return {"launch_cost_us": rnd(1e3 * ms / launches, 1)} if launches else {}


def read_log(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    except OSError:
        return ""


def gate_stats(path: Path) -> dict:
    """The hook's launch-gate counters ("gate.*" in its GEMINI_HOOK_STATS file), unprefixed."""
    return {k[5:]: v for k, v in read_stats(path).items() if k.startswith("gate.")}


def parse_overuse(text: str) -> dict:
    """The tracker's overuse per token ("overuse X ms": from the markers), and beside it what
    the hook reported per request ("reported X ms overuse"): the charge, which also counts what
    a sync saw run past a token that no marker showed (csrc/hook/token.c, sync_seen)."""
    reported = [float(m.group(1)) for m in OVERUSE_FALLBACK_RE.finditer(text)]
    charged = ({"overuse_reported_ms_p99": rnd(pct(reported, 0.99), 3),
                "overuse_reported_ms_max": rnd(max(reported), 3),
                "overuse_reported_ms_sum": rnd(sum(reported), 3)} if reported else {})
    vals = [float(m.group(1)) for m in OVERUSE_RE.finditer(text)]
    source = "'overuse X ms' lines"
    if not vals:
        vals = reported
        source = "fallback: 'reported X ms overuse' lines (the previous token's, per request)"
    if not vals:
        return {"overuse_ms_p50": None, "overuse_ms_p99": None, "overuse_samples": 0,
                "overuse_note": "no line matching 'overuse ([0-9.]+) ms' in the hook's debug log"}
    return {"overuse_ms_p50": rnd(pct(vals, 0.5), 3), "overuse_ms_p99": rnd(pct(vals, 0.99), 3),
            "overuse_ms_max": rnd(max(vals), 3), "overuse_samples": len(vals),
            "overuse_source": source, **charged}


def phase_of(key: str) -> str:
    return "cap" if key.startswith(("cap", "overuse")) or key == "per_second" else "solo"


def _part_ok(part: dict) -> bool:
    """Whether a phase's results stand.  A capped run's uncapped follow-up (`cap_self_*`)
    failing leaves the capped run standing (it was thrown away for the older one)."""
    return bool(part) and not any(
        k == "error" or (k.endswith(("_error", "_skipped")) and k != "cap_self_error")
        for k in part)


def merge_row(old: dict, new: dict) -> dict:
    """Per phase (solo: bare/solo runs; cap): the new results, unless they failed or were skipped
    where the old ones did not."""
    out: dict = {}
    for ph in ("solo", "cap"):
        o = {k: v for k, v in old.items() if phase_of(k) == ph}
        n = {k: v for k, v in new.items() if phase_of(k) == ph}
        out.update(n if n and (_part_ok(n) or not _part_ok(o)) else o)
    return out


def _pair_ok(e: dict) -> bool:
    return "error" not in e and "skipped" not in e


def stamped(results: dict) -> dict:
    """A copy whose rows (each phase of a path's, each pair entry) say when and with which
    hook they were measured, where they do not yet: a merged file's top-level date and
    hook_build are its last invocation's (rows of a day before were read as today's)."""
    out = copy.deepcopy(results)
    if measuring_invocations(results) > 1:
        return out  # (a file merged before rows were stamped: its date is its last run's)
    stamp = {"date": results.get("date"),
             "hook_sources_sha256": (results.get("hook_build") or {}).get("sources_sha256")}
    for row in out.get("paths", {}).values():
        for phase in {phase_of(k) for k in row}:  # (cap_measured is of the cap phase)
            row.setdefault(f"{phase}_measured", stamp)
    for e in out.get("pairs", []):
        e.setdefault("measured", stamp)
    return out


def merge_results(old: dict | None, new: dict) -> dict:
    """An earlier paths.json updated with this invocation's rows (see merge_row); pairs by
    (case, window_s, path); rtt when measured; notes appended; commands listed."""
    new = stamped(new)
    if not old:
        return new
    out = copy.deepcopy(old)
    notes = list(out.get("notes", []))
    if old.get("device") and new.get("device") and old["device"] != new["device"]:
        notes.append(f"merged results of different devices: {old['device']} and {new['device']}")
    for key, val in new.items():
        if key not in ("paths", "pairs", "notes", "commands", *RTT_KEYS):
            out[key] = copy.deepcopy(val)
    out["commands"] = (old.get("commands") or ([old["command"]] if old.get("command") else [])) \
        + (new.get("commands") or [new.get("command")])
    paths = out.setdefault("paths", {})
    for p, row in new.get("paths", {}).items():
        paths[p] = merge_row(paths.get(p, {}), copy.deepcopy(row))
    def pair_key(e: dict) -> tuple:
        return e.get("case"), e.get("window_s"), e.get("path", PAIR_PATH)

    pairs = {pair_key(e): e for e in out.get("pairs", [])}
    for e in new.get("pairs", []):
        key = pair_key(e)
        if key not in pairs or _pair_ok(e) or not _pair_ok(pairs[key]):
            pairs[key] = copy.deepcopy(e)
    out["pairs"] = list(pairs.values())
    if new.get("rtt_us_p50") is not None or "rtt_us_p50" not in out:
        for key in RTT_KEYS:
            if key in new:
                out[key] = copy.deepcopy(new[key])
    notes += [n for n in new.get("notes", []) if n not in notes]
    out["notes"] = notes
    return out


# ---- the report ----------------------------------------------------------------------------------

def _ok(flag: bool | None) -> str:
    return {True: " ✅", False: " ❌", None: ""}[flag]


def _f(x: object, nd: int = 3) -> str:
    return "—" if x is None else f"{x:.{nd}f}" if isinstance(x, (int, float)) else str(x)


def _bare_cell(bare: float | None, cap_bare: float | None) -> str:
    """The solo runs' bare rate, and the one the capped run was divided by where that differs
    (its own bare runs, or another invocation's in a merge: a host-paced program's bare rate
    moves by a third between invocations)."""
    if cap_bare is None or (bare is not None and abs(cap_bare - bare) <= 0.005 * bare):
        return _f(bare, 1)
    return f"{_f(bare, 1)} (cap ÷ {cap_bare:.1f})"


def measuring_invocations(res: dict) -> int:
    """The runs merged into `res` (a merge's own command measured nothing)."""
    commands = res.get("commands") or [res.get("command")]
    return sum(1 for c in commands if not (c and "--merge-only" in c)) or 1


def markdown(res: dict) -> str:
    tol, lines = GOALS["cap_tol"], []
    lines += [f"# gemini, issue 12: every kind of program — {res.get('device', '?')}", "",
              f"{res.get('date', '')} · driver {res.get('driver', '?')} · "
              f"{measuring_invocations(res)} invocation(s)", "",
              f"Goals: solo/bare ≥ {GOALS['solo_over_bare']}; cap (its target: {CAP_TARGET} "
              f"unless the note says) ± {tol} over 15 s "
              f"and 60 s; worst window error ≤ {GOALS['err1_pp']:g} pp (1 s), "
              f"≤ {GOALS['err10_pp']:g} pp (10 s).", "",
              "| path | bare steps/s | solo/bare (pair min–max) | cap 15 s | cap whole run "
              "| cap worst 1 s (whole seconds; every window) / 10 s err [pp] "
              "| cap 1 s sliding: high / low "
              "| overuse p50 / p99 [ms] (n) | note |",
              "|---|---|---|---|---|---|---|---|---|"]
    for p in [*PATHS, *[q for q in res.get("paths", {}) if q not in PATHS]]:
        r = res.get("paths", {}).get(p)
        if r is None:
            continue
        target = r.get("cap_target", CAP_TARGET)
        notes = [f"capped at {target:g}"] if target != CAP_TARGET else []
        notes += [str(r[k])[:90] for k in ("error", "solo_error", "solo_skipped", "cap_error",
                                           "cap_skipped", "overuse_note") if r.get(k)]
        if r.get("runs_failed_note"):
            notes.append(str(r["runs_failed_note"])[:160])
        if r.get("cap_work_per_granted_s") is not None:
            notes.append(f"a granted second did {_f(r['cap_work_per_granted_s'])}, charged "
                         f"{_f(r.get('cap_charged_per_granted_s'))}")
        if r.get("cap_self_rate") is not None:
            notes.append(f"against its own process uncapped ({_f(r['cap_self_over_bare'])} of "
                         f"bare): {_f(r.get('cap_15s_self'))} / {_f(r.get('cap_60s_self'))}")
        if granted := [g for g in r.get("cap_granted_per_second") or [] if g is not None]:
            notes.append(f"granted {_f(min(granted))}–{_f(max(granted))} of each second")
        if (spread := r.get("cap_bare_1s_spread")) is not None:
            notes.append(f"its bare seconds ±{100 * spread:.0f} % of its bare rate "
                         f"({100 * spread * target:.1f} pp at its cap)")
        note = "; ".join(notes)
        bare = (r.get("bare") or {}).get("median")
        sob = r.get("solo_over_bare")
        sob_s = "—" if sob is None else (
            f"{sob:.4f} ({_f(r.get('solo_over_bare_min'), 4)}–{_f(r.get('solo_over_bare_max'), 4)})"
            + _ok(sob >= GOALS["solo_over_bare"] and not r.get("solo_failed")
                  and not r.get("bare_failed")))
        c15, c60 = r.get("cap_15s"), r.get("cap_60s")
        e1, e10 = r.get("cap_err1_max_pp"), r.get("cap_err10_max_pp")
        e1s = r.get("cap_err1_sliding_max_pp")  # (judged where there is one: every window)
        ok10 = None if e10 is None else e10 <= GOALS["err10_pp"]
        judged = e1s if e1s is not None else e1
        err = "—" if e1 is None else (
            f"{_f(e1, 1)}" + ("" if e1s is None else f" (sliding {_f(e1s, 1)})")
            + f"{_ok(judged <= GOALS['err1_pp'])} / {_f(e10, 1)}{_ok(ok10)}")
        hi, lo = r.get("cap_high1_sliding"), r.get("cap_low1_sliding")
        slid = "—" if hi is None else (
            f"{_f(hi)}{_ok(hi <= target + GOALS['err1_pp'] / 100 + 1e-9)} at "
            f"{_f(r.get('cap_high1_sliding_at_s'), 1)} s / {_f(lo)}")
        over = ("—" if r.get("overuse_ms_p50") is None else
                f"{_f(r['overuse_ms_p50'])} / {_f(r['overuse_ms_p99'])} ({r['overuse_samples']})")
        if r.get("overuse_reported_ms_max") is not None:  # (what the hook charged, syncs too)
            over += f"; reported max {_f(r['overuse_reported_ms_max'])}"
        cells = [p, _bare_cell(bare, r.get("cap_bare_rate")), sob_s,
                 "—" if c15 is None else _f(c15) + _ok(abs(c15 - target) <= tol),
                 "—" if c60 is None else _f(c60) + _ok(abs(c60 - target) <= tol),
                 err, slid, over, note.replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    if res.get("pairs"):
        kinds = sorted({str(e.get("path", PAIR_PATH)) for e in res["pairs"]})
        lines += ["", f"Shares, {', '.join(kinds)} clients started together "
                  "(limit 1.0, but each capped at its target in the \"capped\" cases); worst "
                  "window after 1 s; aggregate = Σ shares (median over the "
                  "windows)", "",
                  "(granted: the scheduler's books, the GPU time it gave; MHz: the GPU's median "
                  "SM clock over the run; us/launch: the GPU time per launch its hook measured, "
                  "which tells a client that ran other kernels)", "",
                  "(1 s rows: max err over the whole seconds, then over every 1 s window "
                  "sliding by 50 ms, which is judged, with its lowest and highest share)", "",
                  "| case | programs | window | client | target | worst window | max err [pp] "
                  "| p90 err [pp] | aggregate | granted | MHz | us/launch |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for e in res["pairs"]:
            programs = e.get("path", PAIR_PATH)
            if "clients" not in e:
                why = str(e.get("error") or e.get("skipped"))[:90]
                lines.append(f"| {e.get('case')} | {programs} | {e.get('window_s')} s | — | — | — "
                             f"| — | — | {why} | — | — | — |")
                continue
            goal = GOALS["err10_pp"] if e["window_s"] >= 10 else GOALS["err1_pp"]
            for c in e["clients"]:
                m = c.get("error_pp_max")
                ms = c.get("error_pp_max_sliding")
                judged = ms if ms is not None else m
                err = _f(m, 2) if ms is None else (
                    f"{_f(m, 2)}; {_f(ms, 2)} ({_f(c.get('low_sliding'))}–"
                    f"{_f(c.get('high_sliding'))})")
                lines.append(f"| {e['case']} | {programs} | {e['window_s']} s | {c['name']} | "
                             f"{c['target']} | {_f(c.get('achieved'))} | {err}"
                             f"{_ok(None if judged is None else judged <= goal)} | "
                             f"{_f(c.get('error_pp_p90'), 2)} | {_f(e.get('aggregate_median'))} | "
                             f"{_f(c.get('granted'))} | {_f(e.get('sm_mhz'), 0)} | "
                             f"{_f(c.get('launch_cost_us'), 1)} |")
    if res.get("rtt_us_p50") is not None:
        p50, p99 = res["rtt_us_p50"], res.get("rtt_us_p99")
        lines += ["", f"Token round trip hook→pmgr→schd (S6, every 10 ms): p50 {p50} µs"
                  f"{_ok(p50 <= GOALS['rtt_p50_us'])}, p99 {p99} µs"
                  f"{_ok(None if p99 is None else p99 <= GOALS['rtt_p99_us'])}"]
        busy = res.get("rtt_us_p50_busy_poll")
        if busy is not None:
            lines.append(f"With the daemons busy polling (GEMINI_BUSY_POLL_MS): p50 {busy} µs"
                         f"{_ok(busy <= GOALS['rtt_p50_us'])}")
        both = res.get("rtt_us_p50_all_polling")
        if both is not None:
            lines.append(f"... and the asking side polling for the answer too: p50 {both} µs"
                         f"{_ok(both <= GOALS['rtt_p50_us'])}")
        floor = (res.get("rtt") or {}).get("echo_floor", {})
        if "paced" in floor:
            lines.append(f"(an asyncio echo server on this host, the floor of such a trip: "
                         f"p50 {floor['paced']['p50_us']} µs every 10 ms, "
                         f"{floor['unpaced']['p50_us']} µs back to back)")
    elif isinstance(res.get("rtt"), dict):
        why = res["rtt"].get("error") or res["rtt"].get("skipped")
        if why:
            lines += ["", f"Token round trip: {str(why)[:200]}"]
    if res.get("notes"):
        lines += ["", "Notes:", *[f"- {n}" for n in res["notes"]]]
    return "\n".join(lines) + "\n"


# ---- workers -------------------------------------------------------------------------------------

class WorkerError(RuntimeError):
    def __init__(self, msg: str, kind: str = "") -> None:
        super().__init__(msg)
        self.kind = kind


class Worker:
    """bench/path_app.py as a child in its own session (stopped with the scenario's Procs):
    JSON lines from stdout through a queue, stderr into a file."""

    def __init__(self, procs: Procs, path: str, env: dict[str, str], seconds: float, k: int,
                 sync_ms: float, log_file: Path, name: str) -> None:
        argv = [PY, str(BENCH / "path_app.py"), path, "--seconds", f"{seconds:g}",
                "--sync-every-ms", f"{sync_ms:g}"]
        if k:
            argv += ["--k", str(k)]
        self.name, self.path, self.log_file = name, path, log_file
        with open(log_file, "w") as err:
            p = subprocess.Popen(argv, env=env, cwd=ROOT, text=True, start_new_session=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self.proc = Proc(p, name)
        procs.all.append(self.proc)
        self.q: queue.Queue[dict | None] = queue.Queue()
        self.ready: dict = {}
        self.done: dict = {}
        self.samples: list[list[float]] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.proc.stdout is not None
        for line in self.proc.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    self.q.put(json.loads(line))
                except json.JSONDecodeError:
                    continue
        self.q.put(None)

    def stderr_tail(self, n: int = 1200) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def _next(self, end: float, what: str) -> dict | None:
        left = end - time.monotonic()
        try:
            if left <= 0:
                raise queue.Empty
            return self.q.get(timeout=left)
        except queue.Empty:
            self.proc.stop(signal.SIGKILL)
            raise WorkerError(f"{self.name}: timed out waiting for {what}; stderr: "
                              + self.stderr_tail(), "timeout") from None

    def _failed(self, msg: dict | None) -> WorkerError:
        if msg is None:
            rc = self.proc.proc.wait()
            return WorkerError(f"{self.name}: exited with {rc}; stderr: " + self.stderr_tail())
        return WorkerError(f"{self.name}: {msg['error']}"
                           + ("" if msg.get("kind") == "import" else
                              "; stderr: " + self.stderr_tail(600)), msg.get("kind", ""))

    def wait_ready(self, timeout: float) -> dict:
        end = time.monotonic() + timeout
        while True:
            msg = self._next(end, "ready")
            if msg is None or "error" in msg:
                raise self._failed(msg)
            if msg.get("ready"):
                self.ready = msg
                return msg

    def go(self, start: float, end: float) -> None:
        """Start one measured run (a round); collect() returns its samples."""
        assert self.proc.proc.stdin is not None
        self.samples, self.done = [], {}
        self.proc.proc.stdin.write(f"go {start:.6f} {end:.6f}\n")
        self.proc.proc.stdin.flush()

    def collect(self, timeout: float) -> list[list[float]]:
        end = time.monotonic() + timeout
        while True:
            msg = self._next(end, "the end of the run")
            if msg is None or "error" in msg:
                raise self._failed(msg)
            if msg.get("done"):
                self.done = msg
                break
            if "t" in msg:
                self.samples.append([float(msg["t"]), float(msg["steps"])])
        if len(self.samples) < 2:
            raise WorkerError(f"{self.name}: a run without samples; stderr: " + self.stderr_tail())
        return self.samples

    def close(self, timeout: float = 15.0) -> None:
        """EOF on stdin ends the worker; killed when it does not."""
        try:
            if self.proc.proc.stdin is not None:
                self.proc.proc.stdin.close()
            self.proc.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.stop(signal.SIGKILL)


class ConfigEditor:
    """Edits a running backend's config `after_s` past a run's start (`start`, called with it),
    from a timer thread, and keeps the moment it wrote the file."""

    def __init__(self, backend: Backend, clients: dict[str, tuple[float, float]],
                 after_s: float) -> None:
        self.backend = backend
        self.clients = [Client(n, r, lim, MEM) for n, (r, lim) in clients.items()]
        self.after_s = after_s
        self.written_at: float | None = None
        self._timer: threading.Timer | None = None

    def start(self, t0: float) -> None:
        self._timer = threading.Timer(max(0.0, t0 + self.after_s - time.monotonic()), self._edit)
        self._timer.start()

    def _edit(self) -> None:
        self.backend.write_config(self.clients)
        self.written_at = time.monotonic()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()


# ---- one invocation ------------------------------------------------------------------------------

class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._tmp: Path | None = None
        self.bare: dict[str, dict] = {}  # path -> {"median": steps/s, "k": k} (this invocation)
        self.notes: list[str] = []
        self.runs = 0
        self.clock = ClockSampler()  # the GPU's clock and power beside every measured run
        self.logs_archive = args.out / "logs.tar"  # --keep-logs (main names it after the results)

    @property
    def tmp(self) -> Path:
        """Where the workers' stderr goes (recorded as "logs_dir")."""
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="gembench-paths-"))
        return self._tmp

    def timing(self) -> dict:
        """The scheduler's flags that differ from bench/common.py's defaults."""
        short = self.args.short_window
        flags: dict = {} if short is None else {"short_window_ms": short}
        if not self.args.shared_speed:
            flags["shared_speed"] = False
        if not self.args.hand_over_at_arrival:
            flags["hand_over_at_arrival"] = False
        if not self.args.lone_turns:
            flags["lone_turns"] = False
        if self.args.lone_turns and not self.args.shared_turns:
            flags["shared_turns"] = False
        return {**flags, "no_clock": True} if self.args.no_clock else flags

    def env(self, hook: dict[str, str] | None = None, debug: bool = False) -> dict[str, str]:
        env = base_env()
        for k in ("GEMINI_LOG", "CU_HOOK_DEBUG"):
            env.pop(k, None)
        if hook:
            env.update(hook)
        if debug:
            env["GEMINI_LOG"] = "debug"
        return env

    def ready_timeout(self, path: str) -> float:
        return READY_TIMEOUT_S.get(path, 180)

    def sync_ms(self, path: str) -> float:
        """How often its workers sync: a program without CUDA events to time each step reports
        its work only at a sync (path_app.StepClock)."""
        if self.args.sync_every_ms is not None:
            return self.args.sync_every_ms
        return SYNC_EVERY_MS_NO_EVENTS if path in NO_EVENTS else SYNC_EVERY_MS

    def start(self, procs: Procs, path: str, env: dict[str, str], k: int, name: str) -> Worker:
        """A worker up to its `ready` line (warmed up; k calibrated there when k is 0)."""
        self.runs += 1
        w = Worker(procs, path, env, self.args.solo_seconds, k, self.sync_ms(path),
                   self.tmp / f"{self.runs:03d}-{path}-{name}.stderr", name)
        w.wait_ready(self.ready_timeout(path))
        return w

    def measure(self, w: Worker, seconds: float) -> dict:
        """One measured run (round) of a ready worker; its rate after RATE_SKIP_S, and the GPU's
        clock and power meanwhile."""
        t0 = time.monotonic() + 0.1
        w.go(t0, t0 + seconds)
        samples = w.collect(seconds + 60)
        a, b = samples[0][0], samples[-1][0]
        r = span_rate(samples, a + RATE_SKIP_S, b) or span_rate(samples, a, b)
        return {"rate": rnd(r, 3), "steps": int(samples[-1][1]), "seconds": rnd(b - a, 3),
                "samples": samples, **self.clock.over(a, b)}

    @staticmethod
    def clock_of(runs: list[dict]) -> dict:
        """The median over runs of their GPU clock and power ({} where none was sampled)."""
        out = {}
        for key in ("sm_mhz", "power_w"):
            vals = [r[key] for r in runs if r.get(key) is not None]
            if vals:
                out[key] = statistics.median(vals)
        return out

    def run_capped_then_lifted(self, procs: Procs, backend: Backend, path: str,
                               env: dict[str, str], k: int) -> dict:
        """A fresh worker capped for --cap-seconds, then the same process with its cap lifted
        (a config edit) for LIFTED_S: its own rate, uncapped under the hook ("self_rate").  A
        loop its host paces moves by 10-20 % from one process to the next (H200, 2026-12-04:
        the launch-bound loop's bare runs 658-798 steps/s, pinned to a CPU or not; 1 s bins
        within a run 2-14 %), more than the cap's tolerance: its share is judged against its
        own process too."""
        w = self.start(procs, path, env, k, "cap")
        try:
            r = self.measure(w, self.args.cap_seconds)
            r["capped_until"] = time.monotonic()
            try:
                backend.write_config([Client("cap", 1.0, 1.0, MEM)])
                backend.schd.wait_for(r"config reloaded", 10)
                r["self_rate"] = self.measure(w, LIFTED_S)["rate"]
            except (WorkerError, RuntimeError) as exc:
                r["self_error"] = str(exc)[:300]
        finally:
            w.close()
        return {**r, "k": w.ready["k"], "step_ms": w.ready["step_ms"],
                "startup_s": w.ready["startup_s"], "log": w.log_file}

    def together(self, procs: Procs, specs: dict[str, tuple[str, dict[str, str], int]],
                 seconds: float, tag: str, late: dict[str, float] | None = None,
                 at_start: Callable[[float], None] | None = None
                 ) -> tuple[float, list[Worker], list[list[list[float]]]]:
        """Fresh workers, one per name in `specs` (its program, environment and k), ready and
        then measured together, one run: its start, the workers (closed by then: their ready
        lines and logs), their samples.  `late`: workers that start that long after the others
        (all end together).  `at_start`: called with the start once the run is under way."""
        self.runs += 1
        workers: list[Worker] = []
        try:
            workers += [Worker(procs, path, env, seconds, k, self.sync_ms(path),
                               self.tmp / f"{self.runs:03d}-{tag}-{name}.stderr", name)
                        for name, (path, env, k) in specs.items()]
            for w in workers:
                w.wait_ready(self.ready_timeout(w.path))
            t0 = time.monotonic() + 0.3
            for w in workers:
                w.go(t0 + (late or {}).get(w.name, 0.0), t0 + seconds)
            if at_start is not None:
                at_start(t0)
            return t0, workers, [w.collect(seconds + 60) for w in workers]
        finally:
            for w in workers:
                w.close()

    def run_together(self, procs: Procs, path: str, env: dict[str, str], seconds: float, k: int,
                     n: int) -> dict:
        """n processes of one client (--cap-procs), measured together: the samples of their
        summed work, each one's share of the bare rate, and their logs (the first one's apart)."""
        specs = {f"cap{i}": (path, env, k) for i in range(n)}
        t0, workers, each = self.together(procs, specs, seconds, path)
        bare = self.bare[path]["median"]
        t_end = min(s[-1][0] for s in each)
        return {"samples": summed(each, t0, t_end),
                "process_shares": [(progress(s, t_end) - progress(s, t0)) / (bare * (t_end - t0))
                                   for s in each],
                "startup_s": [w.ready["startup_s"] for w in workers],
                "log": workers[0].log_file, "logs": [w.log_file for w in workers],
                "each": each}

    def bare_together(self, procs: Procs, path: str, bare: dict, cap_share: float | None) -> dict:
        """--cap-procs: the same n processes bare, together.  Contexts that run at once share
        the GPU by time-slicing, which costs work of its own: the client's cap is judged against
        what its n processes do bare, beside what one does."""
        seconds = min(self.args.cap_seconds, BARE_TOGETHER_S)
        together = self.together_share(procs, path, self.args.cap_procs, seconds)
        return {"cap_bare_together": rnd(together),  # n bare processes' work ÷ one's
                "cap_60s_vs_together": rnd(cap_share / together) if cap_share else None}

    def quick_bare(self, procs: Procs, path: str) -> dict:
        """A bare rate for `path` when this invocation has none yet: QUICK_BARE_RUNS runs of one
        bare worker."""
        if path in self.bare:
            return self.bare[path]
        w = self.start(procs, path, self.env(), 0, "bare-quick")
        try:
            runs = [self.measure(w, self.args.solo_seconds) for _ in range(QUICK_BARE_RUNS)]
        finally:
            w.close()
        rates = [r["rate"] for r in runs]
        median = statistics.median(rates)
        self.bare[path] = {"median": median, "k": w.ready["k"], "runs": rates,
                           "seconds": own_seconds(runs, median),
                           "step_ms": w.ready["step_ms"], **self.clock_of(runs)}
        self.notes.append(f"{path}: bare rate {self.bare[path]['median']:.1f} steps/s from "
                          f"{QUICK_BARE_RUNS} extra bare runs (its solo unit did not run first)")
        return self.bare[path]

    # -- units -------------------------------------------------------------------------------

    def unit_solo(self, procs: Procs, path: str) -> dict:
        """--solo-runs bare and solo runs, interleaved.  By default one bare and one hooked
        process each do all their runs (rounds, the other process idle meanwhile); with
        --fresh-processes every run is a new process."""
        a = self.args
        fresh = a.fresh_processes
        bare: list[dict] = []
        solo: list[dict] = []
        startup: dict[str, list[float]] = {"bare": [], "solo": []}
        workers: dict[str, Worker] = {}
        ready_of: dict[str, dict] = {}
        k, step = 0, None
        backend: Backend | None = None
        backend_error = ""
        solo_stats = self.tmp / f"{path}-solo-stats.json"
        solo_logs: set[Path] = set()  # the hooked workers' stderr (--keep-logs)

        def one(variant: str, env: dict[str, str], i: int) -> dict:
            if fresh or variant not in workers:
                workers[variant] = self.start(procs, path, env, k, f"{variant}{i}")
                ready_of[variant] = workers[variant].ready
                startup[variant].append(ready_of[variant]["startup_s"])
            w = workers[variant]
            if variant == "solo":
                solo_logs.add(w.log_file)
            try:
                r = self.measure(w, a.solo_seconds)
            finally:
                if fresh:
                    w.close()
                    workers.pop(variant, None)
            kept = ("rate", "steps", "seconds", "sm_mhz", "power_w") + (
                ("samples",) if variant == "bare" else ())
            return {x: r[x] for x in kept if x in r}  # (a bare run's samples: own_seconds)

        try:
            for i in range(a.solo_runs):
                try:
                    bare.append(one("bare", self.env(), i))
                    if not k:
                        k, step = int(ready_of["bare"]["k"]), ready_of["bare"]["step_ms"]
                except WorkerError as exc:
                    if not k:  # the first bare run failed: nothing to compare with
                        return {"error": str(exc)[:1500]}
                    bare.append({"error": str(exc)[:600]})
                    if (w := workers.pop("bare", None)) is not None:
                        w.close(2)
                if backend is None and not backend_error:
                    try:
                        backend = Backend(procs, [Client("solo", 1.0, 1.0, MEM)],
                                          tag="paths-solo", verbose=a.keep_logs)
                    except Exception as exc:
                        backend_error = f"daemons did not start: {exc}"[:1500]
                if backend is None:
                    solo.append({"error": backend_error})
                    continue
                try:
                    env = self.env(backend.hook_env("solo"), debug=a.keep_logs)
                    env["GEMINI_HOOK_STATS"] = str(solo_stats)
                    solo.append(one("solo", env, i))
                except WorkerError as exc:
                    solo.append({"error": str(exc)[:600]})
                    if (w := workers.pop("solo", None)) is not None:
                        w.close(2)
        finally:
            for w in workers.values():
                w.close()
            if backend is not None:
                backend.stop()
        if a.keep_logs and backend is not None:  # the hooked runs' logs, and the daemons'
            keep_logs(self.logs_archive, {
                **{f"solo-{path}-{log.stem}.log": log.read_text(errors="replace")
                   for log in sorted(solo_logs) if log.exists()},
                f"solo-{path}-schd.log": backend.schd.drain(),
                f"solo-{path}-pmgr.log": backend.pmgrs["solo"].drain()})
        # What the launch gate did over the solo runs (the last process's, with fresh ones).
        gate = gate_stats(solo_stats)
        bare_rates = [r["rate"] for r in bare if r.get("rate")]
        solo_rates = [r["rate"] for r in solo if r.get("rate")]
        bare_median = statistics.median(bare_rates)
        bare_seconds = own_seconds(bare, bare_median)
        for r in bare:  # (the JSON keeps rates)
            r.pop("samples", None)
        ratios = [s["rate"] / b["rate"] for b, s in zip(bare, solo, strict=False)
                  if b.get("rate") and s.get("rate")]
        out: dict = {"k": k, "step_ms": step, "solo_seconds": a.solo_seconds,
                     "fresh_processes": fresh,
                     "bare": {"runs": bare_rates, "median": rnd(bare_median, 3),
                              "startup_s": startup["bare"], "detail": bare,
                              "own_1s_spread": rnd(own_spread(bare_seconds))},
                     "solo": {"runs": solo_rates,
                              "median": rnd(statistics.median(solo_rates), 3) if solo_rates
                              else None, "startup_s": startup["solo"], "detail": solo,
                              "gate": gate}}
        self.bare[path] = {"median": bare_median, "k": k, "runs": bare_rates,
                           "seconds": bare_seconds, "step_ms": step, **self.clock_of(bare)}
        out["bare"].update(self.clock_of(bare))
        out["solo"].update(self.clock_of(solo))
        if solo_rates:
            out["solo_over_bare"] = rnd(statistics.median(solo_rates) / bare_median)
            out["solo_over_bare_min"] = rnd(min(ratios)) if ratios else None
            out["solo_over_bare_max"] = rnd(max(ratios)) if ratios else None
        else:
            out["solo_error"] = next((r["error"] for r in solo if "error" in r), "no solo run")
        out.update(failed_runs(bare, solo))
        return out

    def unit_cap(self, procs: Procs, path: str) -> dict:
        bare = self.quick_bare(procs, path)
        cap = self.args.cap
        backend = Backend(procs, [Client("cap", cap, cap, MEM)], self.timing(),
                          tag="paths-cap", verbose=self.args.keep_logs)
        stats = self.tmp / f"{path}-cap-stats.json"
        tracer = GrantTracer(backend.schd.port)
        try:
            env = self.env(backend.hook_env("cap"), debug=True)
            env["GEMINI_HOOK_STATS"] = str(stats)
            if self.args.cap_procs > 1:
                r = self.run_together(procs, path, env, self.args.cap_seconds, bare["k"],
                                      self.args.cap_procs)
            else:
                r = self.run_capped_then_lifted(procs, backend, path, env, bare["k"])
        finally:
            grants = tracer.stop()
            backend.stop()
            daemon_logs = {"schd": backend.schd.drain(), "pmgr": backend.pmgrs["cap"].drain()}
        out = cap_metrics(r["samples"], bare["median"], cap)
        out.update(against_self(out, bare["median"], r.get("self_rate")))
        if r.get("self_error"):
            out["cap_self_error"] = r["self_error"]
        clock = self.clock.over(r["samples"][0][0], r["samples"][-1][0])
        out.update({f"cap_{k}": v for k, v in clock.items()})
        out.update({f"cap_bare_{k}": bare[k] for k in clock if k in bare})
        # What the cap's 1 s windows are judged against moves by this much on its own.
        out["cap_bare_runs"] = [rnd(x, 2) for x in bare["runs"]]
        out["cap_bare_1s_spread"] = rnd(own_spread(bare.get("seconds", [])))
        if self.args.cap_procs > 1:  # the client's work is its processes' together
            out["cap_procs"] = self.args.cap_procs
            out["cap_process_shares"] = [rnd(x) for x in r["process_shares"]]
            out.update(self.bare_together(procs, path, bare, out["cap_60s"]))
        # The scheduler's own books over the measured run, beside the work done: where they
        # differ, the client was charged for time it did not use.
        a, b = r["samples"][0][0], r["samples"][-1][0]
        out["cap_granted_share"] = granted_share(grants, "cap", a, b)
        out["cap_granted_per_second"] = granted_per_second(grants, "cap", a, b)
        out.update(per_granted_second(out["cap_60s"], out["cap_granted_share"],
                                      tracer.speed_charged("cap", a, b), b - a))
        # What the launch gate did (holds, token requests): where a capped launcher's time went.
        # (cap_-prefixed: the solo runs' own "gate" is kept beside it, also when merging)
        out["cap_gate"] = gate_stats(stats)
        out["cap_startup_s"] = r["startup_s"]
        try:
            hook_log = log_until(Path(r["log"]).read_text(errors="replace"),
                                 r.get("capped_until"))
            measured = log_between(hook_log, r["samples"][0][0], None)
            out.update(overuse_of(measured), **launch_cost_of(measured))
        except OSError as exc:  # (the why, not overuse_of's "no line matching")
            hook_log = ""
            out.update(overuse_of(hook_log), overuse_note=f"no hook log: {exc}")
        if self.args.keep_logs:
            kept = {f"cap-{path}.log": hook_log,
                    f"cap-{path}-steps.jsonl": steps_jsonl(r["samples"]),
                    f"cap-{path}-grants.json": json.dumps(grants),
                    **{f"cap-{path}-{name}.log": text for name, text in daemon_logs.items()},
                    **{f"cap-{path}-p{i}.log": Path(other).read_text(errors="replace")
                       for i, other in enumerate(r.get("logs", [])[1:], 1)}}  # --cap-procs
            keep_logs(self.logs_archive, kept)
            out["cap_token_path"] = token_path(daemon_logs["schd"], daemon_logs["pmgr"],
                                               hook_log)
        if out.get("overuse_note"):
            out["overuse_note"] += f" ({len(hook_log.splitlines())} stderr lines, GEMINI_LOG=debug)"
        return out

    def unit_pairs(self, procs: Procs, case: str) -> list[dict]:
        """The clients of `case` started together, each running its --pair-path program (the
        list in turn) in as many processes as PAIR_PROCS says, each judged against its own
        program's bare rate (of that many processes together)."""
        specs = ALL_PAIR_CASES[case]
        path_of = {n: pair_path(self.args.pair_path, i) for i, (n, _) in enumerate(specs)}
        bare = {p: self.quick_bare(procs, p) for p in dict.fromkeys(path_of.values())}
        nprocs = {n: PAIR_PROCS.get(case, {}).get(n, 1) for n, _ in specs}
        client_of = {(n if k == 1 else f"{n}{i}"): n for n, k in nprocs.items() for i in range(k)}
        capped = case in CAPPED_CASES
        late_s = self.args.late_s if case in LATE_CLIENTS else 0.0
        late = {w: late_s for w, n in client_of.items() if n == LATE_CLIENTS.get(case)}
        edit_s = self.args.edit_s if case in EDITS else 0.0
        clients = [Client(n, r, r if capped else 1.0, MEM) for n, r in specs]
        backend = Backend(procs, clients, self.timing(), tag="paths-pairs",
                          verbose=self.args.keep_logs)
        tracer = GrantTracer(backend.schd.port)
        editor = ConfigEditor(backend, EDITS[case], edit_s) if case in EDITS else None
        try:
            t0, workers, each = self.together(
                procs, {w: (path_of[n], self.env(backend.hook_env(n), debug=True),
                            bare[path_of[n]]["k"]) for w, n in client_of.items()},
                late_s + edit_s + self.args.pair_seconds, "pair", late,
                editor.start if editor else None)
        finally:
            if editor is not None:
                editor.cancel()
            grants = tracer.stop()
            backend.stop()
            daemon_logs = {"schd": backend.schd.drain(),
                           **{f"pmgr-{n}": backend.pmgrs[n].drain() for n, _ in specs}}
        by_worker = {w.name: s for w, s in zip(workers, each, strict=True)}
        hook_logs = {w.name: read_log(w.log_file) for w in workers}
        if self.args.keep_logs:  # each process's hook log and steps, the grants, the daemons'
            tag = "pairs-" + case.replace(" ", "").replace("/", "-").replace("+", "-")
            keep_logs(self.logs_archive, {
                **{f"{tag}-{name}.log": text for name, text in hook_logs.items()},
                **{f"{tag}-{name}-steps.jsonl": steps_jsonl(series)
                   for name, series in by_worker.items()},
                f"{tag}-grants.json": json.dumps(grants),
                **{f"{tag}-{name}.log": text for name, text in daemon_logs.items()}})
        t_end = min(s[-1][0] for s in by_worker.values())
        samples = {n: by_worker[n] if nprocs[n] == 1 else
                   summed([s for w, s in by_worker.items() if client_of[w] == n], t0, t_end)
                   for n in nprocs}
        bare_of = {n: self.bare_of_processes(procs, path_of[n], nprocs[n]) for n in nprocs}
        (one,) = bare if len(bare) == 1 and max(nprocs.values()) == 1 else (None,)
        start = t0 + late_s  # (all clients running from here)
        warm = 0.0 if late else PAIR_WARM_S  # (a late client's first second is the point)
        targets = promised_shares(clients)  # (0.4/0.5 uncapped: 0.5 each)
        if editor is not None:  # (the edited shares, from the edit on, its first second too)
            if editor.written_at is None:
                raise RuntimeError(f"{case}: the run ended before its config edit")
            # gem-schd applies it after a debounce: from then, where its log says (-v stamps)
            applied = reload_stamp(daemon_logs["schd"], editor.written_at)
            start, warm = applied or editor.written_at, 0.0
            targets = promised_shares(editor.clients)
        out = pair_entries(case, samples, targets, start, t_end,
                           bare[one]["median"] if one else bare_of, warm=warm,
                           path=one or "/".join(path_of[n] for n, _ in specs))
        # Beside the work done: the scheduler's books (GPU time granted), the overuse each
        # client's queues ran past its tokens and the GPU time per launch its hook measured
        # (all its processes' lines), where a share differs.
        a = start + warm
        logged = {n: "".join(log_between(t, a, t_end) for w, t in hook_logs.items()
                             if client_of[w] == n) for n in nprocs}
        books = {n: {"granted": granted_share(grants, n, a, t_end), "processes": nprocs[n],
                     **overuse_of(logged[n]), **launch_cost_of(logged[n])} for n in nprocs}
        clock = self.clock.over(a, t_end)
        if editor is not None and editor.written_at is not None:
            clock["edited_at_s"] = rnd(editor.written_at - t0, 3)
            clock["edit_applied_ms"] = rnd((start - editor.written_at) * 1e3, 1)
        for e in out:
            e.update(clock)
            for c in e["clients"]:
                c.update(books[c["name"]])
                c.update({f"bare_{k}": bare[path_of[c["name"]]][k] for k in clock
                          if k in bare[path_of[c["name"]]]})
        return out

    def together_share(self, procs: Procs, path: str, n: int, seconds: float) -> float:
        """`n` bare processes of `path` run together for `seconds`: their work ÷ one's (with
        --keep-logs, each one's steps: when the GPU turns from one's context to another's)."""
        r = self.run_together(procs, path, self.env(), seconds, self.bare[path]["k"], n)
        if self.args.keep_logs:
            keep_logs(self.logs_archive, {f"bare-together-{path}-x{n}-{i}-steps.jsonl":
                                          steps_jsonl(s) for i, s in enumerate(r["each"])})
        return sum(r["process_shares"])

    def bare_of_processes(self, procs: Procs, path: str, n: int) -> float:
        """The bare rate of `n` processes of `path` together (one: its median bare rate)."""
        one = self.bare[path]["median"]
        seconds = min(self.args.pair_seconds, BARE_TOGETHER_S)
        return one if n == 1 else one * self.together_share(procs, path, n, seconds)

    def unit_rtt(self, procs: Procs) -> dict:
        import scenarios as sc

        r = sc.s6(sc.Context(fake=False, out=self.args.out), procs)
        r.pop("rows", None)
        t = r["token_via_scheduler"]
        busy = r.get("token_via_scheduler_busy_poll", {})
        return {"rtt_us_p50": t["p50_us"], "rtt_us_p99": t["p99_us"],
                "rtt_us_p50_busy_poll": busy.get("p50_us"),
                "rtt_us_p50_all_polling": busy.get("client_polling", {}).get("p50_us"), "rtt": r}

    # -- estimates ---------------------------------------------------------------------------

    def estimate(self, kind: str, what: str) -> float:
        a = self.args
        if kind == "rtt":
            return 20.0
        paths = pair_paths(a.pair_path) if kind == "pairs" else [what]
        st = max(STARTUP_S.get(p, 8) for p in paths)
        cold = max(COLD_S.get(p, 0) for p in paths)
        run = a.solo_seconds + 0.3
        quick = sum(STARTUP_S.get(p, 8) + COLD_S.get(p, 0) + QUICK_BARE_RUNS * run
                    for p in dict.fromkeys(paths) if p not in self.bare)
        if kind == "solo":
            starts = 2 * a.solo_runs if a.fresh_processes else 2
            return starts * st + cold + 2 * a.solo_runs * run + BACKEND_S
        if kind == "cap":
            return quick + BACKEND_S + st + a.cap_seconds + LIFTED_S + 2
        n = sum(PAIR_PROCS.get(what, {}).get(c, 1) for c, _ in ALL_PAIR_CASES[what])
        together = st + min(a.pair_seconds, BARE_TOGETHER_S) if what in PAIR_PROCS else 0.0
        late = a.late_s if what in LATE_CLIENTS else 0.0
        late += a.edit_s if what in EDITS else 0.0
        return quick + together + BACKEND_S + st * (1 + 0.3 * n) + late + a.pair_seconds + 1


def pair_paths(text: str) -> list[str]:
    """--pair-path: one program for every client, or a comma-separated list taken in turn."""
    return [p.strip() for p in text.split(",") if p.strip()] or [PAIR_PATH]


def pair_path(text: str, i: int) -> str:
    paths = pair_paths(text)
    return paths[i % len(paths)]


def units_for(only: list[str], skip_pairs: bool, skip_rtt: bool) -> list[tuple[str, str]]:
    units: list[tuple[str, str]] = []
    if "rtt" in only and not skip_rtt:
        units.append(("rtt", ""))
    for p in PATHS + OPTIONAL + DRY:
        if p in only:
            units += [("solo", p), ("cap", p)]
            continue
        if f"solo:{p}" in only:  # the bare/solo runs alone
            units.append(("solo", p))
        if f"cap:{p}" in only:  # the capped run alone
            units.append(("cap", p))
    if "pairs" in only and not skip_pairs:
        units += [("pairs", c) for c in PAIR_CASES]
    if "capped-pairs" in only and not skip_pairs:
        units += [("pairs", c) for c in CAPPED_PAIR_CASES]
    if "procs-pairs" in only and not skip_pairs:
        units += [("pairs", c) for c in PROCS_PAIR_CASES]
    if "late-pairs" in only and not skip_pairs:
        units += [("pairs", c) for c in LATE_PAIR_CASES]
    if "edit-pairs" in only and not skip_pairs:
        units += [("pairs", c) for c in EDIT_PAIR_CASES]
    units += [("pairs", c) for c in ALL_PAIR_CASES if f"pair:{c}" in only and not skip_pairs
              and ("pairs", c) not in units]  # (one case by its name)
    return units


def build_hook() -> dict:
    """bench/build_hook.sh into BUILD, unless the library there is the one this function built
    from these very sources, by this very script and compiler (its stamp says so, and names
    the library's size and time, so that one built since by other means, bench/run_all.py's
    or an A/B's, is never taken for it): a dry run's hook then costs no compile."""
    BUILD.mkdir(parents=True, exist_ok=True)
    digest = hook_sources_digest()
    script = BENCH / "build_hook.sh"
    lib, stamp = BUILD / "libgemhook.so.1", BUILD / "libgemhook.so.1.stamp"
    script_digest = hashlib.sha256(script.read_bytes()).hexdigest()[:12]
    key = f"{digest} {script_digest} {os.environ.get('CC', 'cc')}"
    if lib.exists() and stamp.exists() and stamp.read_text() == f"{key} {library_id(lib)}":
        return {"ok": True, "stderr": "", "path": str(lib), "sources_sha256": digest,
                "reused": True}
    stamp.unlink(missing_ok=True)
    try:
        r = subprocess.run(["sh", str(script), str(BUILD)], capture_output=True, text=True,
                           timeout=240)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "stderr": str(exc), "sources_sha256": digest}
    if r.returncode == 0:
        stamp.write_text(f"{key} {library_id(lib)}")
    return {"ok": r.returncode == 0, "stderr": r.stderr[-1500:], "path": r.stdout.strip(),
            "sources_sha256": digest}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def steps_jsonl(series: Samples) -> str:
    """A worker's samples (time, steps done) as the kept logs' lines."""
    return "".join(json.dumps({"t": t, "steps": n}) + "\n" for t, n in series)


def keep_logs(archive: Path, files: dict[str, str]) -> None:
    """--keep-logs: add `files` (name -> text) to one tar archive beside the results.  One
    file, not five per capped run: the device machine sends back at most 8 files from $OUT."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "a") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))


def write(res: dict, base: Path) -> str:
    base.parent.mkdir(parents=True, exist_ok=True)
    md = markdown(res)
    Path(f"{base}.json").write_text(json.dumps(res, indent=1, default=str))
    Path(f"{base}.md").write_text(md)
    return md


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", default="",
                   help="comma-separated units to run, from: " + ",".join(PATHS + EXTRA)
                   + " (default: all), and " + ",".join(OPTIONAL + OPTIONAL_EXTRA)
                   + " (only when named)")
    p.add_argument("--solo-runs", type=int, default=5, help="bare and solo runs each, interleaved")
    p.add_argument("--solo-seconds", type=float, default=4.0, help="length of each bare/solo run")
    p.add_argument("--cap-seconds", type=float, default=60.0, help="length of the capped run")
    p.add_argument("--cap", type=float, default=CAP_TARGET,
                   help=f"the capped client's limit (and request) (default: {CAP_TARGET})")
    p.add_argument("--cap-procs", type=int, default=1,
                   help="processes of the capped client, started together (their work added up)")
    p.add_argument("--pair-seconds", type=float, default=30.0, help="length of each pairs case")
    p.add_argument("--late-s", type=float, default=10.0,
                   help="late-pairs: how long a runs alone before b starts (then --pair-seconds)")
    p.add_argument("--edit-s", type=float, default=10.0,
                   help="edit-pairs: how long the clients run before the edit "
                        "(then --pair-seconds)")
    p.add_argument("--sync-every-ms", type=float, default=None,
                   help="workers sync every k steps, k steps taking about this long bare "
                   f"(default: {SYNC_EVERY_MS:g}; JAX {SYNC_EVERY_MS_NO_EVENTS:g})")
    p.add_argument("--fresh-processes", action="store_true",
                   help="a new process for every bare/solo run (default: one bare and one solo "
                   "process per path, each doing all its runs)")
    p.add_argument("--pair-path", default=PAIR_PATH,
                   help="the program the pairs run, or a list (triton,jax): client i runs the "
                   "i-th, in turn")
    p.add_argument("--short-window", type=float, default=None, metavar="MS",
                   help="gem-schd --short-window for the capped and pairs runs (its default: "
                        "1000; a capped client's turn is a tenth of it)")
    p.add_argument("--no-clock", action="store_true",
                   help="gem-schd --no-clock for the capped and pairs runs: caps in time")
    p.add_argument("--shared-speed", action=argparse.BooleanOptionalAction, default=True,
                   help="gem-schd --[no-]shared-speed for the capped and pairs runs: uncapped "
                        "clients beside others share by work (default: on, as gem-schd's "
                        "since 2026-12-06; --no-shared-speed: by time)")
    p.add_argument("--hand-over-at-arrival", action=argparse.BooleanOptionalAction,
                   default=True,
                   help="gem-schd --[no-]hand-over-at-arrival for the capped and pairs runs: "
                        "the GPU goes on when the holder's token ends at its hook (default: "
                        "on, as gem-schd's)")
    p.add_argument("--lone-turns", action=argparse.BooleanOptionalAction, default=True,
                   help="gem-schd --[no-]lone-turns for the capped and pairs runs: a capped "
                        "client alone in turns of a whole part of the second (default: on, as "
                        "gem-schd's since 2026-12-07)")
    p.add_argument("--shared-turns", action=argparse.BooleanOptionalAction, default=None,
                   help="gem-schd --[no-]shared-turns for the capped and pairs runs: capped "
                        "clients side by side share such turns (default: on where lone turns "
                        "are, as gem-schd's since 2026-12-07)")
    p.add_argument("--skip-pairs", action="store_true")
    p.add_argument("--skip-rtt", action="store_true")
    p.add_argument("--keep-logs", action="store_true",
                   help="copy each capped run's hook log (GEMINI_LOG=debug), its steps "
                        "(time, steps done), the scheduler's grants and both daemons' debug "
                        "logs to --out, and time each hop of its tokens (cap_token_path); "
                        "the same of each pairs case, for each of its clients; and the solo "
                        "runs' hook and daemon logs (the solo runs then log at debug level)")
    p.add_argument("--merge", type=Path, action="append", default=[],
                   help="an earlier paths.json to update (repeatable; later files win)")
    p.add_argument("--merge-only", action="store_true",
                   help="only combine the --merge files into a new paths.json (no GPU)")
    p.add_argument("--budget", type=float, default=0.0,
                   help="seconds for this invocation; units that would end later are skipped "
                   "(0: no limit)")
    p.add_argument("--plan", action="store_true", help="print the units and estimated seconds")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or BENCH / "results"))
    args = p.parse_args(argv)
    if args.shared_turns and not args.lone_turns:  # (as gem-schd refuses it)
        p.error("--shared-turns needs lone turns (drop --no-lone-turns)")
    if args.shared_turns is None:  # (gem-schd's default: what ran, in the results' settings)
        args.shared_turns = args.lone_turns
    t_start = time.monotonic()
    only = [s.strip() for s in args.only.split(",") if s.strip()] or PATHS + EXTRA
    unknown = [s for s in only
               if s.removeprefix("cap:").removeprefix("solo:")
               not in PATHS + OPTIONAL + EXTRA + OPTIONAL_EXTRA + DRY
               and s.removeprefix("pair:") not in ALL_PAIR_CASES]
    if unknown:
        p.error(f"unknown in --only: {', '.join(unknown)} "
                f"(choose from {', '.join(PATHS + OPTIONAL + EXTRA + OPTIONAL_EXTRA)})")
    if any(x not in PATHS + OPTIONAL + DRY for x in pair_paths(args.pair_path)):
        p.error(f"--pair-path: one or more of {', '.join(PATHS + OPTIONAL)}")
    bench = Bench(args)
    units = units_for(only, args.skip_pairs, args.skip_rtt)
    if args.plan:
        total = 8.0  # build and start-up
        for kind, what in units:
            est = bench.estimate(kind, what)
            if kind == "solo":
                bench.bare[what] = {}  # the cap unit after it needs no quick bare runs
            if kind == "pairs":
                bench.bare.update({x: {} for x in pair_paths(args.pair_path)})
            total += est
            print(f"{kind:6s} {what:22s} ~{est:5.0f} s")
        print(f"total ~{total:.0f} s ({total / 60:.1f} min)")
        return 0
    old: dict | None = None
    for f in args.merge:
        old = merge_results(old, load(f))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if args.merge_only:
        if old is None:
            p.error("--merge-only needs at least one --merge FILE")
        old["command"] = sys.argv if argv is None else ["paths.py", *argv]
        old.setdefault("commands", []).append(old["command"])
        base = args.out / f"{slug(old.get('device') or 'gpu')}-{stamp}-paths"
        print(write(old, base))
        log(f"wrote {base}.json, {base}.md")
        return 0
    dry = all(kind == "rtt" or all(
        x in DRY for x in (pair_paths(args.pair_path) if kind == "pairs" else [what]))
              for kind, what in units)
    gpu = gpu_info()
    if gpu is None and dry:
        gpu = {"name": "cpu (dry run)", "driver": "-"}
    if gpu is None:
        log("paths: no GPU (nvidia-smi failed)")
        return 2
    command = sys.argv if argv is None else ["paths.py", *argv]
    new: dict = {"device": gpu["name"], "driver": gpu["driver"],
                 "date": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command,
                 "commands": [command], "python": sys.version.split()[0],
                 "settings": {k: getattr(args, k) for k in ("solo_runs", "solo_seconds",
                                                             "cap_seconds", "pair_seconds",
                                                             "sync_every_ms", "budget",
                                                             "fresh_processes", "pair_path",
                                                             "shared_speed",
                                                             "hand_over_at_arrival",
                                                             "lone_turns", "shared_turns")},
                 "paths": {}, "pairs": [], "notes": []}
    if args.sync_every_ms is None:  # (the per-path defaults, as Bench.sync_ms gives them)
        new["settings"]["sync_every_ms"] = {"default": SYNC_EVERY_MS,
                                            **{p: bench.sync_ms(p) for p in NO_EVENTS}}
    bench.notes = new["notes"]
    base = args.out / f"{slug(gpu['name'])}-{stamp}-paths"
    bench.logs_archive = Path(f"{base}-logs.tar")
    new["hook_build"] = build_hook()
    if os.environ.get("GEMINI_BENCH_HOOK"):  # (an A/B's other hook: hook_path() takes it)
        new["hook_build"]["used_instead"] = os.environ["GEMINI_BENCH_HOOK"]
    log(f"build: {json.dumps(new['hook_build'])[:300]}")
    if not new["hook_build"]["ok"]:
        new["notes"].append("hook build failed: every run under the hook fails")
    bench.clock.start()

    def left() -> float:
        return args.budget - (time.monotonic() - t_start) if args.budget > 0 else float("inf")

    for kind, what in units:
        est = bench.estimate(kind, what)
        row = new["paths"].setdefault(what, {}) if kind in ("solo", "cap") else None
        label = f"{kind} {what}".strip()
        if kind == "cap" and row is not None and row.get("error"):
            row["cap_target"] = args.cap
            row["cap_skipped"] = "the path failed"
            continue
        if est > left():
            msg = f"skipped: out of time (needs ~{est:.0f} s, {max(0.0, left()):.0f} s left)"
            log(f"[{time.monotonic() - t_start:6.1f} s] {label}: {msg}")
            if kind in ("solo", "cap"):
                assert row is not None
                row[f"{kind}_skipped"] = msg
                if kind == "cap":
                    row["cap_target"] = args.cap
            elif kind == "pairs":
                new["pairs"] += [{"case": what, "window_s": w, "skipped": msg} for w in (10, 1)]
            else:
                new["rtt"] = {"skipped": msg}
            continue
        limit = min(2 * est + 60, max(est, left()))
        log(f"[{time.monotonic() - t_start:6.1f} s] {label} (~{est:.0f} s, limit {limit:.0f} s)")
        t0 = time.monotonic()
        try:
            with Deadline(limit, label), Procs() as procs:
                if kind == "solo":
                    assert row is not None
                    row.update(bench.unit_solo(procs, what))
                elif kind == "cap":
                    assert row is not None
                    row.update(bench.unit_cap(procs, what))
                elif kind == "pairs":
                    new["pairs"] += bench.unit_pairs(procs, what)
                else:
                    new.update(bench.unit_rtt(procs))
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            msg = f"{type(exc).__name__}: {exc}"[:1500]
            log(f"  {label} failed: {msg[:400]}")
            if kind in ("solo", "cap"):
                assert row is not None
                row[f"{kind}_error"] = msg
                if kind == "cap":
                    row["cap_target"] = args.cap
            elif kind == "pairs":
                new["pairs"] += [{"case": what, "window_s": w, "error": msg} for w in (10, 1)]
            else:
                new["rtt"] = {"error": msg, "traceback": traceback.format_exc()[-1500:]}
        if row is not None:
            row[f"{kind}_unit_s"] = round(time.monotonic() - t0, 1)
        new["total_s"] = round(time.monotonic() - t_start, 1)
        write(merge_results(old, new), base)
    new["total_s"] = round(time.monotonic() - t_start, 1)
    new["logs_dir"] = str(bench._tmp) if bench._tmp else None
    md = write(merge_results(old, new), base)
    print(md)
    log(f"wrote {base}.json, {base}.md ({new['total_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
