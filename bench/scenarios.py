"""The issue-4 scenarios (S1-S7, S9).  Each takes the run's Context and returns a JSON-able dict
with a "rows" list for the Markdown table: (scenario, metric, value, goal, ok)."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import (
    BENCH,
    BUILD,
    GIB,
    PY,
    Backend,
    Client,
    GrantTracer,
    Procs,
    Tenant,
    base_env,
    fake_env,
    grant_stats,
    hook_path,
    launch_counts,
    pct,
    rate,
    read_stats,
    run_app,
    tenant_args,
    windows,
)


@dataclass
class Context:
    fake: bool
    out: Path
    gpu_name: str = "fake"
    iters: int = 0  # calibrated FMA iterations per kernel
    backend: str = "auto"  # the tenant backend the calibration picked
    kernel_ms: float = 0.0
    solo: list[float] = field(default_factory=list)  # solo kernels/s, measured in this run
    share_runs: dict = field(default_factory=dict)  # label -> analysed run (S3 reuses, S9, A4)
    fake_gpu: str = ""

    @property
    def solo_rate(self) -> float:
        return statistics.fmean(self.solo) if self.solo else float("nan")

    def env(self, hook: dict[str, str] | None = None) -> dict[str, str]:
        env = base_env()
        if self.fake:
            env.update(fake_env(self.fake_gpu))
        if hook:
            env.update(hook)
        return env

    def targs(self, calibrate_ms: float = 0.0) -> list[str]:
        if self.fake:
            return tenant_args("fake")
        return tenant_args("real", self.iters, calibrate_ms, self.backend)


def row(scn: str, metric: str, value: object, goal: str = "", ok: bool | None = None) -> dict:
    return {"scenario": scn, "metric": metric, "value": value, "goal": goal, "ok": ok}


def fmt(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


# ---- fixed-work runs -----------------------------------------------------------------------------

def run_tenants(ctx: Context, procs: Procs, specs: list[tuple[str, float, float]], seconds: float,
                gemini: bool, schedule: dict[str, tuple[float, float]] | None = None,
                timing: dict | None = None, tag: str = "run"
                ) -> tuple[dict[str, dict], float, list[tuple[str, float, float]]]:
    """Tenants (name, request, limit) under gemini (or bare when not `gemini`), all started
    together; `schedule` gives per-tenant (start, end) offsets.  Returns results, T0 and the
    token grants seen in the scheduler's status."""
    backend = tracer = None
    grants: list[tuple[str, float, float]] = []
    if gemini:
        backend = Backend(procs, [Client(n, r, lim, 2 * GIB) for n, r, lim in specs], timing, tag)
        tracer = GrantTracer(backend.schd.port)
    try:
        tenants = []
        for name, _, _ in specs:
            hook = backend.hook_env(name) if backend else None
            tenants.append(Tenant(procs, name, ctx.env(hook), ctx.targs()))
        for t in tenants:
            t.wait_ready(120)
        t0 = time.monotonic() + 0.3
        for t in tenants:
            a, b = (schedule or {}).get(t.name, (0.0, seconds))
            t.go(t0 + a, t0 + b)
        results = {t.name: t.result(seconds + 60) for t in tenants}
    finally:
        if tracer:
            grants = tracer.stop()
        if backend:
            backend.stop()
    return results, t0, grants


def calibrate(ctx: Context, procs: Procs, seconds: float = 3.0) -> dict:
    """One bare tenant alone: picks iters for ~1.5 ms kernels (first call), measures solo rate."""
    first = not ctx.solo
    args = ctx.targs(calibrate_ms=1.5 if first and not ctx.fake else 0.0)
    t = Tenant(procs, "solo", ctx.env(), args)
    ready = t.wait_ready(180)
    if first:
        ctx.iters, ctx.backend, ctx.kernel_ms = ready["iters"], ready["backend"], ready["kernel_ms"]
    t0 = time.monotonic() + 0.2
    t.go(t0, t0 + seconds)
    res = t.result(seconds + 60)
    solo = rate(res["samples"], t0 + 0.5, t0 + seconds)
    ctx.solo.append(solo)
    return {"solo_kernels_per_s": fmt(solo, 1), "iters": ctx.iters, "backend": ctx.backend,
            "kernel_ms": fmt(ready["kernel_ms"], 3)}


def analyse(ctx: Context, results: dict[str, dict], t0: float, seconds: float,
            targets: dict[str, float] | None, warm: float = 2.0,
            grants: list[tuple[str, float, float]] | None = None) -> dict:
    solo = ctx.solo_rate
    names = list(results)
    a, b = t0 + warm, t0 + seconds - 0.25  # the last kernels may finish late: left out
    whole = {n: rate(results[n]["samples"], a, b) / solo for n in names}
    total = sum(whole.values())
    out: dict = {"window_s": fmt(b - a, 2), "share": {n: fmt(v) for n, v in whole.items()},
                 "sum": fmt(total)}
    per1: dict[str, list[float]] = {n: [] for n in names}
    wins = windows(t0 + 1.0, b, 1.0)
    for lo, hi in wins:
        for n in names:
            per1[n].append(rate(results[n]["samples"], lo, hi) / solo)
    out["share_1s"] = {n: [fmt(v) for v in vals] for n, vals in per1.items()}
    # a finer series for the plots
    fine = windows(t0, b, 0.25)
    out["share_250ms"] = {n: [fmt(rate(results[n]["samples"], lo, hi) / solo) for lo, hi in fine]
                          for n in names}
    if grants:
        out["grants"] = grant_stats(grants, {n: results[n]["samples"] for n in names}, a, b)
    if targets:
        err10 = max(abs(whole[n] - targets[n]) for n in names) * 100
        err10n = max(abs(whole[n] / total - targets[n]) for n in names) * 100 if total else 0
        errs1 = [abs(v - targets[n]) * 100 for n in names for v in per1[n]]
        out.update(target={n: targets[n] for n in names}, err10_pp=fmt(err10, 2),
                   err10_norm_pp=fmt(err10n, 2), err1_max_pp=fmt(max(errs1, default=0), 2),
                   err1_p90_pp=fmt(pct(errs1, 0.9), 2), err1_mean_pp=fmt(
                       statistics.fmean(errs1) if errs1 else 0, 2))
    return out


# ---- S3, S9 (and validate_hook's check 4) --------------------------------------------------------

S3_CONFIGS = {
    "50/50": [0.5, 0.5],
    "30/70": [0.3, 0.7],
    "10/90": [0.1, 0.9],
    "10/20/30/40": [0.1, 0.2, 0.3, 0.4],
}
# Short quotas for 1 s accuracy: in a 1 s window a share can only be as fine as the grants in it.
FINE_TIMING = {"quota_ms": 50.0, "min_quota_ms": 20.0, "window_ms": 10000.0, "max_quota_ms": 100.0}
FINE_SUFFIX = " (-q 50 -m 20 --max_quota 100)"
S3_FINE = ["30/70", "10/20/30/40"]


def share_config(ctx: Context, procs: Procs, label: str, seconds: float = 12.5,
                 gemini: bool = True, timing: dict | None = None) -> dict:
    reqs = S3_CONFIGS[label]
    specs = [(f"c{i + 1}", r, 1.0) for i, r in enumerate(reqs)]
    results, t0, grants = run_tenants(ctx, procs, specs, seconds, gemini, timing=timing,
                                      tag="s3")
    targets = {n: r for n, r, _ in specs} if gemini else {n: 1 / len(specs) for n, _, _ in specs}
    out = analyse(ctx, results, t0, seconds, targets, grants=grants)
    out["gemini"] = gemini
    suffix = FINE_SUFFIX if timing == FINE_TIMING else ""
    ctx.share_runs[("gemini " if gemini else "timeslice ") + label + suffix] = out
    return out


def s3(ctx: Context, procs: Procs) -> dict:
    res: dict = {"configs": {}, "rows": []}
    runs = [(label, None) for label in S3_CONFIGS] + [(label, FINE_TIMING) for label in S3_FINE]
    for base_label, timing in runs:
        label = base_label + (FINE_SUFFIX if timing else "")
        try:
            r = ctx.share_runs.get("gemini " + label) or share_config(ctx, procs, base_label,
                                                                      timing=timing)
        except Exception as exc:
            res["configs"][label] = {"error": str(exc)[:1500]}
            res["rows"].append(row("S3", f"{label} error", str(exc)[:80], "", False))
            continue
        res["configs"][label] = r
        res["rows"] += [
            row("S3", f"{label} shares (10 s)", " / ".join(f"{v:.3f}" for v in r["share"].values()),
                base_label),
            row("S3", f"{label} max error 10 s [pp]", r["err10_pp"], "≤ 2", r["err10_pp"] <= 2),
            row("S3", f"{label} max error 1 s [pp] (p90)",
                f"{r['err1_max_pp']} ({r['err1_p90_pp']})", "≤ 5", r["err1_max_pp"] <= 5),
            row("S3", f"{label} sum of shares", r["sum"], "≥ 0.92", r["sum"] >= 0.92),
        ]
    try:
        ts = ctx.share_runs.get("timeslice 30/70") or share_config(ctx, procs, "30/70",
                                                                  gemini=False)
        res["timeslice_30_70"] = ts
        res["rows"].append(row("S3", "plain time-slicing, 30/70 asked (10 s)",
                               " / ".join(f"{v:.3f}" for v in ts["share"].values()),
                               "baseline: no shares"))
    except Exception as exc:
        res["timeslice_30_70"] = {"error": str(exc)[:1500]}
    return res


def s9(ctx: Context, procs: Procs) -> dict:
    gem = ctx.share_runs.get("gemini 50/50") or share_config(ctx, procs, "50/50")
    ts = ctx.share_runs.get("timeslice 30/70") or share_config(ctx, procs, "30/70", gemini=False)
    return {"gemini_sum": gem["sum"], "timeslice_sum": ts["sum"], "rows": [
        row("S9", "2 saturating tenants, gemini: Σ throughput / solo", gem["sum"], "≥ 0.98",
            gem["sum"] >= 0.98),
        row("S9", "2 saturating tenants, time-slicing: Σ / solo", ts["sum"], "(0.90-0.92 on H100)"),
    ]}


# ---- S4 work conservation ------------------------------------------------------------------------

def s4(ctx: Context, procs: Procs) -> dict:
    quota_ms = 300.0
    a_end, b_start, b_end = 13.0, 4.0, 9.0
    specs = [("A", 0.3, 1.0), ("B", 0.5, 1.0)]
    results, t0, grants = run_tenants(ctx, procs, specs, a_end, True,
                              schedule={"A": (0.0, a_end), "B": (b_start, b_end)}, tag="s4")
    solo = ctx.solo_rate
    sa, sb = results["A"]["samples"], results["B"]["samples"]
    a_alone = rate(sa, t0 + 1.0, t0 + b_start) / solo
    b_first = results["B"]["t_first_launch"]
    b_first_done = sb[0][0] if sb else float("nan")
    b_wait_ms = (b_first_done - b_first) * 1000
    # B's share over its run, and A's meanwhile
    b_share = rate(sb, t0 + b_start + 1.0, t0 + b_end) / solo
    a_share = rate(sa, t0 + b_start + 1.0, t0 + b_end) / solo
    b_last = sb[-1][0] if sb else t0 + b_end
    # A regains: the first 50 ms bin after B's last kernel where A runs at >= 90 % of solo
    regain_ms = float("nan")
    for lo, hi in windows(b_last, t0 + a_end, 0.05):
        if rate(sa, lo, hi) >= 0.9 * solo:
            regain_ms = (lo - b_last) * 1000
            break
    a_after = rate(sa, b_last + 1.0, t0 + a_end) / solo
    series = {n: [fmt(rate(r["samples"], lo, hi) / solo) for lo, hi in windows(t0, t0 + a_end, 0.1)]
              for n, r in results.items()}
    b_grants = [s for n, s, _ in grants if n == "B" and s >= b_first - 0.01]
    b_token_ms = (b_grants[0] - b_first) * 1000 if b_grants else float("nan")
    a_before = [(e - s) * 1000 for n, s, e in grants if n == "A" and t0 + 1 <= s < b_first]
    # "One quota" is the grant A holds when B arrives (it grows toward --max_quota while A is
    # alone), not the base quota.
    quota_ms = max(a_before) if a_before else quota_ms
    out = {"a_alone": fmt(a_alone), "b_wait_ms": fmt(b_wait_ms, 1), "b_share": fmt(b_share),
           "a_share_with_b": fmt(a_share), "a_regain_ms": fmt(regain_ms, 1),
           "a_after": fmt(a_after), "share_100ms": series, "t_b": [b_start, b_end],
           "quota_ms": quota_ms, "b_first_token_ms": fmt(b_token_ms, 1),
           "a_grant_ms_before_b": [fmt(x, 1) for x in a_before],
           "grants": [[n, fmt(s - t0, 4), fmt(e - t0, 4)] for n, s, e in grants]}
    out["rows"] = [
        row("S4", "A (0.3/1.0) alone, fraction of solo", out["a_alone"], "≥ 0.97", a_alone >= 0.97),
        row("S4", "B (0.5) arrives: first kernel done after [ms]", out["b_wait_ms"],
            f"≤ {quota_ms:.0f} (one quota)", b_wait_ms <= quota_ms + 10),
        row("S4", "B's first token after [ms]; A's grants alone [ms]",
            f"{out['b_first_token_ms']}; " + (f"{min(a_before):.0f}-{max(a_before):.0f}"
                                              if a_before else "none seen")),
        row("S4", "B / A shares while both run", f"{out['b_share']} / {out['a_share_with_b']}",
            "B ≥ 0.5", b_share >= 0.48),
        row("S4", "B stops: A back at ≥ 90 % after [ms]", out["a_regain_ms"],
            f"≤ {quota_ms:.0f} (one quota)", regain_ms <= quota_ms + 10),
        row("S4", "A alone again, fraction of solo", out["a_after"], "≥ 0.97", a_after >= 0.97),
    ]
    return out


# ---- S5 limit as a cap ---------------------------------------------------------------------------

def s5(ctx: Context, procs: Procs) -> dict:
    seconds = 10.0
    results, t0, grants = run_tenants(ctx, procs, [("capped", 0.2, 0.4)], seconds, True,
                                      tag="s5")
    r = analyse(ctx, results, t0, seconds, {"capped": 0.4}, warm=1.0, grants=grants)
    share = r["share"]["capped"]
    r["rows"] = [
        row("S5", f"LIMIT 0.4 alone: fraction of solo ({r['window_s']} s)", share, "0.40 ± 0.02",
            abs(share - 0.4) <= 0.02),
        row("S5", "LIMIT 0.4 alone: max error over 1 s windows [pp]", r["err1_max_pp"], "≤ 5",
            r["err1_max_pp"] <= 5),
    ]
    return r


# ---- S6 token round trip -------------------------------------------------------------------------

def _timed(fn, n: int, pace_s: float = 0.0) -> dict:
    samples = []
    for _ in range(n):
        if pace_s:
            time.sleep(pace_s)
        t = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t) / 1000)
    return {"n": n, "pace_ms": pace_s * 1000, "p50_us": fmt(pct(samples, 0.5), 1),
            "p99_us": fmt(pct(samples, 0.99), 1), "mean_us": fmt(statistics.fmean(samples), 1),
            "max_us": fmt(max(samples), 1)}


# The floor under a paced round trip on this host: a 10-line asyncio echo server, woken from
# idle by each request, as the scheduler and the pod manager are.
ECHO_SERVER = """
import asyncio
async def serve(r, w):
    while data := await r.read(64):
        w.write(data)
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


def _echo_floor(procs: Procs) -> dict:
    import socket
    import sys

    p = procs.spawn([sys.executable, "-c", ECHO_SERVER], {}, "echo")
    try:
        port = int(p.proc.stdout.readline())  # type: ignore[union-attr]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def trip() -> None:
                s.sendall(b"x" * 40)
                s.recv(64)

            return {"paced": _timed(trip, 200, 0.01), "unpaced": _timed(trip, 500)}
    finally:
        p.stop()


# Longer than the trips' pace (10 ms): the daemons never sleep between two trips.
BUSY_POLL_MS = 20.0


def _busy_poll_trips(procs: Procs) -> dict:
    """The paced token trip again, both daemons polling instead of sleeping."""
    from gemini.client import Connection
    from gemini.core.wire import RequestType

    backend = Backend(procs, [Client("rtt", 1.0, 1.0, GIB)], tag="s6-busy",
                      daemon_env={"GEMINI_BUSY_POLL_MS": f"{BUSY_POLL_MS:g}"})
    try:
        with Connection("127.0.0.1", backend.pmgrs["rtt"].port, "rtt") as c:
            for _ in range(200):  # warm-up
                c.call(RequestType.MEM_LIMIT)
            out = _timed(lambda: c.call(RequestType.QUOTA, 0.0, 1e9), 200, 0.01)
            # ... and the asking side polling for the answer too (as a hook thread could):
            # what is left of the trip once nobody sleeps.
            c.sock = PollingSocket(c.sock)  # type: ignore[assignment]
            out["client_polling"] = _timed(lambda: c.call(RequestType.QUOTA, 0.0, 1e9), 200, 0.01)
            return out
    finally:
        backend.stop()


class PollingSocket:
    """A socket whose recv polls (MSG_DONTWAIT in a loop) instead of sleeping."""

    def __init__(self, sock) -> None:  # type: ignore[no-untyped-def]
        # Non-blocking: a socket with a timeout polls (sleeps) before every recv, whatever
        # flags the recv is given, and the asking side then slept as before.
        sock.setblocking(False)
        self.sock = sock

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, n: int) -> bytes:
        while True:
            try:
                return self.sock.recv(n)
            except BlockingIOError:
                continue

    def close(self) -> None:
        self.sock.close()


def s6(ctx: Context, procs: Procs) -> dict:
    """Round trips measured from Python (gemini.client, one TCP connection).  Token requests are
    paced at 10 ms (a hook cannot ask faster than its quota expires, min quota 20 ms) on a fresh
    scheduler; an unpaced series shows what many grants in the usage window cost."""
    from gemini.client import Connection
    from gemini.core.wire import RequestType, Status

    backend = Backend(procs, [Client("rtt", 1.0, 1.0, GIB), Client("direct", 0.5, 1.0, GIB)],
                      tag="s6")
    out: dict = {}
    try:
        try:
            with Connection("127.0.0.1", backend.schd.port, "direct") as d:
                d.call(RequestType.QUOTA, 0.0, 0.0)
                out["token_scheduler_direct"] = _timed(
                    lambda: d.call(RequestType.QUOTA, 0.0, 0.0), 200, 0.01)
        except Exception as exc:
            out["token_scheduler_direct"] = {"error": str(exc)[:300]}
        time.sleep(0.4)  # the direct client's last token (a base quota at most) runs out
        with Connection("127.0.0.1", backend.pmgrs["rtt"].port, "rtt") as c:
            for _ in range(200):  # warm-up
                c.call(RequestType.MEM_LIMIT)

            def token() -> None:
                # A burst longer than any quota never fits the cached token: every request goes
                # pmgr -> schd -> pmgr (the holder asking again ends its token at once).
                rsp, _ = c.call(RequestType.QUOTA, 0.0, 1e9)
                assert rsp.status is Status.OK, rsp

            out["token_via_scheduler"] = _timed(token, 200, 0.01)
            out["token_cached_in_pmgr"] = _timed(lambda: c.call(RequestType.QUOTA, 0.0, 0.0), 1000)
            out["mem_limit_pmgr"] = _timed(lambda: c.call(RequestType.MEM_LIMIT), 1000)
            out["token_via_scheduler_unpaced"] = _timed(token, 500)
    finally:
        backend.stop()
    try:
        out["token_via_scheduler_busy_poll"] = _busy_poll_trips(procs)
    except Exception as exc:
        out["token_via_scheduler_busy_poll"] = {"error": str(exc)[:300]}
    try:
        out["echo_floor"] = _echo_floor(procs)
    except (OSError, ValueError) as exc:
        out["echo_floor"] = {"error": str(exc)[:300]}
    t = out["token_via_scheduler"]
    cached, unpaced = out["token_cached_in_pmgr"], out["token_via_scheduler_unpaced"]
    out["rows"] = [
        row("S6", "token round trip client→pmgr→schd→back p50 [µs] (every 10 ms)", t["p50_us"],
            "≤ 100", t["p50_us"] <= 100),
        row("S6", "token round trip p99 [µs] (every 10 ms)", t["p99_us"], "≤ 1000",
            t["p99_us"] <= 1000),
        row("S6", "token round trip back to back (500) p50 / p99 [µs]",
            f"{unpaced['p50_us']} / {unpaced['p99_us']}"),
        row("S6", "cached token / MEM_LIMIT (pmgr only) p50 [µs]",
            f"{cached['p50_us']} / {out['mem_limit_pmgr']['p50_us']}"),
    ]
    floor = out["echo_floor"]
    if "paced" in floor:
        out["rows"].append(row("S6", "asyncio echo server (the floor) p50 every 10 ms / back to "
                               "back [µs]", f"{floor['paced']['p50_us']} / "
                               f"{floor['unpaced']['p50_us']}"))
    busy = out["token_via_scheduler_busy_poll"]
    if "p50_us" in busy:
        out["rows"].append(row("S6", f"the same, daemons busy polling (GEMINI_BUSY_POLL_MS="
                               f"{BUSY_POLL_MS:g}) p50 / p99 [µs]",
                               f"{busy['p50_us']} / {busy['p99_us']}", "≤ 100",
                               busy["p50_us"] <= 100))
        both = busy.get("client_polling", {})
        if "p50_us" in both:
            out["rows"].append(row("S6", "the same, the asking side polling too p50 / p99 [µs]",
                                   f"{both['p50_us']} / {both['p99_us']}", "≤ 100",
                                   both["p50_us"] <= 100))
    direct = out.get("token_scheduler_direct", {})
    if "p50_us" in direct:
        out["rows"].append(row("S6", "scheduler alone p50 / p99 [µs] (every 10 ms)",
                               f"{direct['p50_us']} / {direct['p99_us']}"))
    return out


# ---- S1 launch overhead --------------------------------------------------------------------------

def s1(ctx: Context, procs: Procs) -> dict:
    backend = Backend(procs, [Client("launch", 1.0, 1.0, 4 * GIB)], tag="s1")
    variants = {
        "bare": {},
        "passthrough": {"LD_PRELOAD": str(hook_path()), "GEMINI_HOOK_DISABLE": "1"},
        "hook": backend.hook_env("launch"),
        # the gate's hot path reading clock_gettime instead of the time-stamp counter
        "hook-clock": {**backend.hook_env("launch"), "GEMINI_HOOK_TICKS": "0"},
    }
    runs: dict[str, dict[int, list[dict]]] = {v: {1: [], 4: []} for v in variants}
    try:
        for _rep in range(3):
            for threads in (1, 4):
                for v, env in variants.items():
                    if ctx.fake:
                        from gemini.native import program_path

                        argv = [str(program_path("gem_client")), "work", "--kernel-ms", "0.0001",
                                "--burst", "2000", "--bursts", "25"]
                        if threads > 1:
                            argv += ["--threads", str(threads)]
                        r = run_app(procs, argv, ctx.env(env), f"launch-{v}", 60)
                        if r.get("kernels") and r.get("launch_s"):  # summed over threads
                            r["ns_per_launch"] = r["launch_s"] / r["kernels"] * 1e9
                    else:
                        argv = [str(BUILD / "launch_rate"), str(threads), "150000", "2000"]
                        r = run_app(procs, argv, ctx.env(env), f"launch-{v}", 60)
                    runs[v][threads].append(r)
    finally:
        backend.stop()
    out: dict = {"runs": runs, "rows": []}
    med: dict = {}
    for v in variants:
        for th in (1, 4):
            vals = [r["ns_per_launch"] for r in runs[v][th] if "ns_per_launch" in r]
            med[(v, th)] = statistics.median(vals) if vals else float("nan")
            out[f"{v}_{th}t_ns_per_launch"] = fmt(med[(v, th)], 1)
            rtts = [r["rtt_us_p50"] for r in runs[v][th] if "rtt_us_p50" in r]
            if rtts and th == 1:
                out[f"{v}_rtt_us_p50"] = fmt(statistics.median(rtts), 2)
    for th in (1, 4):
        added = (med[("hook", th)] - med[("bare", th)]) / 1000
        out[f"added_us_{th}t"] = fmt(added, 3)
        out["rows"].append(row(
            "S1", f"empty launch, {th} thread(s): bare / pass-through / hook / hook reading "
            "clock_gettime [ns per launch]",
            f"{med[('bare', th)]:.0f} / {med[('passthrough', th)]:.0f} / {med[('hook', th)]:.0f}"
            f" / {med[('hook-clock', th)]:.0f}"))
        out["rows"].append(row("S1", f"added per launch, {th} thread(s) [µs]", fmt(added, 3),
                               "≤ 0.2", added <= 0.2))
    if "bare_rtt_us_p50" in out and "hook_rtt_us_p50" in out:
        out["rows"].append(row("S1", "launch+sync p50: bare / hook [µs]",
                               f"{out['bare_rtt_us_p50']} / {out['hook_rtt_us_p50']}"))
    return out


# ---- S2 solo end-to-end --------------------------------------------------------------------------

def s2(ctx: Context, procs: Procs) -> dict:
    if ctx.fake:
        return {"skipped": "needs a GPU and torch", "rows": [row("S2", "skipped", "no GPU")]}
    backend = Backend(procs, [Client("train", 1.0, 1.0, 16 * GIB)], tag="s2")
    app = [PY, str(BENCH / "torch_app.py"), "bench"]
    out: dict = {"runs": []}
    try:
        steps: dict[bool, int] = {}
        for graphs in (False, True):
            g = ["--graphs"] if graphs else []
            first = run_app(procs, app + g + ["--seconds", "2.5"], ctx.env(), "train-bare", 180)
            out["runs"].append({"variant": "bare", **first})
            steps[graphs] = int(first.get("steps", 500))
            for variant in ("gemini", "bare", "gemini"):
                env = ctx.env(backend.hook_env("train") if variant == "gemini" else None)
                r = run_app(procs, app + g + ["--steps", str(steps[graphs])], env,
                            f"train-{variant}", 180)
                out["runs"].append({"variant": variant, **r})
    finally:
        backend.stop()
    out["rows"] = []
    for graphs in (False, True):
        mode = "on" if graphs else "off"

        def sps(variant: str, graphs: bool = graphs) -> list[float]:
            return [r["steps_per_s"] for r in out["runs"]
                    if r["variant"] == variant and r.get("graphs") == graphs and "steps_per_s" in r]
        bare, gem = sps("bare"), sps("gemini")
        if not bare or not gem:
            out["rows"].append(row("S2", f"graphs {mode}", "failed", "", False))
            continue
        ratio = statistics.fmean(gem) / statistics.fmean(bare)
        out[f"ratio_graphs_{mode}"] = fmt(ratio, 4)
        out["rows"].append(row(
            "S2", f"torch training alone, graphs {mode}: gemini / bare steps/s",
            f"{ratio:.4f} ({statistics.fmean(gem):.1f} / {statistics.fmean(bare):.1f})",
            "≥ 0.99", ratio >= 0.99))
    return out


# ---- S7 memory -----------------------------------------------------------------------------------

FAKE_PATHS = ["alloc", "pitch", "async", "pool", "vmm", "array"]


def s7(ctx: Context, procs: Procs, validation: dict | None = None) -> dict:
    """Escapes on every path and the time added to a 2 MiB cuMemAlloc.  `validation` (the
    validate_hook results) adds the torch and CuPy paths."""
    limit = 4 * GIB
    out: dict = {"limit": limit, "paths": {}, "rows": []}
    backend = Backend(procs, [Client("mem", 0.5, 1.0, limit)], tag="s7")
    try:
        if ctx.fake:
            from gemini.native import program_path

            for path in FAKE_PATHS:
                r = run_app(procs, [str(program_path("gem_client")), "alloc", "--path", path,
                                    "--bytes", str(limit + limit // 4)],
                            ctx.env(backend.hook_env("mem")), f"alloc-{path}", 60)
                over = r.get("json_lines", [r])[0]
                out["paths"][f"fake {path}"] = {"over_rc": over.get("rc"),
                                                "escapes": int(over.get("rc") == 0)}
        else:
            probe = str(BUILD / "limit_probe")
            stats = Path(tempfile.mkdtemp(prefix="gembench-s7-")) / "stats.json"
            hooked = run_app(procs, [probe, str(limit), "paths,latency,launches,meminfo"],
                             ctx.env(backend.hook_env("mem", stats)), "probe-hook", 120)
            hooked["hook_stats"] = launch_counts(read_stats(stats))
            out["probe_hook"] = hooked
            lat = {"bare": [], "hook": []}
            for _ in range(2):
                b = run_app(procs, [probe, str(limit), "latency", "500"], ctx.env(), "probe-bare",
                            60)
                h = run_app(procs, [probe, str(limit), "latency", "500"],
                            ctx.env(backend.hook_env("mem")), "probe-hook2", 60)
                lat["bare"].append(b.get("alloc2m_us_p50"))
                lat["hook"].append(h.get("alloc2m_us_p50"))
            lat["hook"].append(hooked.get("alloc2m_us_p50"))
            out["latency_runs"] = lat
            for p, r in hooked.get("paths", {}).items():
                out["paths"][f"C {p}"] = r
            bare = statistics.median([x for x in lat["bare"] if x is not None] or [float("nan")])
            hook = statistics.median([x for x in lat["hook"] if x is not None] or [float("nan")])
            out.update(alloc2m_bare_us=fmt(bare, 1), alloc2m_hook_us=fmt(hook, 1),
                       alloc2m_added_pct=fmt((hook / bare - 1) * 100, 1))
            out["rows"].append(row("S7", "cuMemAlloc 2 MiB p50: bare / hook [µs]",
                                   f"{bare:.1f} / {hook:.1f} ({(hook / bare - 1) * 100:+.1f} %)",
                                   "≤ +10 %", hook <= bare * 1.10))
    finally:
        backend.stop()
    for key, rec in (validation or {}).items():
        if key.startswith("torch ") and "escaped_bytes" in rec:
            out["paths"][key] = {"escapes": int(rec["escaped_bytes"] > 0),
                                 "escaped_bytes": rec["escaped_bytes"],
                                 "over": rec.get("oom_exception")}
        if key == "cupy" and "escaped_bytes" in rec:
            out["paths"]["cupy default pool"] = {"escapes": int(rec["escaped_bytes"] > 0),
                                                 "over": rec.get("oom_exception")}
            out["paths"]["cupy explicit pool (FromPoolAsync)"] = {
                "escapes": int(rec.get("pool_over_rc") == 0), "over_rc": rec.get("pool_over_rc")}
    esc = {k: v.get("escapes", 0) for k, v in out["paths"].items()}
    bad = {k: v for k, v in out["paths"].items() if v.get("over_rc") not in (None, 2)}
    out["escapes_total"] = sum(esc.values())
    out["rows"].insert(0, row("S7", f"escapes beyond the limit over {len(esc)} paths",
                              out["escapes_total"], "0", out["escapes_total"] == 0))
    if bad:
        out["rows"].insert(1, row("S7", "over-limit allocation not refused with 2 (OOM)",
                                  ", ".join(f"{k}: {v.get('over_rc')}" for k, v in bad.items()),
                                  "all 2", False))
    out["escapes"] = esc
    return out


def dumps(obj: object) -> str:
    return json.dumps(obj, indent=1, default=str)
