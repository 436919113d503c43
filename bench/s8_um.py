"""S8: unified-memory mode under (emulated) oversubscription, on one GPU (perf-anchors §5 S8).

    python3 bench/s8_um.py --out DIR [--quotas 0.25,2,10] [--jobs 3] [--ws-gib 4]

Compares, for the same N jobs (each a torch program streaming over a working set of WS GiB):
  serial        the jobs one after another, bare (no hook, device memory): the reference;
  solo-um       one job under the hook in UM mode, data resident (fits-in-memory overhead);
  um+prefetch   the N jobs together under gemini, UM clients with --evict-on-release: each token
                switch moves a job's data to the host and the next job's back (the emulated
                oversubscription: a card that holds one working set), prefetched at each grant;
  um-noprefetch the same with GEMINI_UM_PREFETCH=0: the data faults back in page by page;
at quotas of 0.25 / 2 / 10 s (base = min = max quota = UM minimum quota = Q).

Safety: never more managed memory in total than the card has free (WS is lowered to fit
(free - 6 GiB) / N, and N x WS <= 24 GiB); the oversubscription is emulated by eviction, not real.
Output: DIR/<gpu>-<date>-um.json (every run) and .md (the table), as issue 15 names them.
About 2-3 minutes on an H100.
Needs torch; the daemons need gemini's own dependencies (watchdog, pyyaml); the hook is built
with bench/build_hook.sh (plain cc).  `--app` is the job itself (internal).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHUNK = 512 << 20  # the working set in tensors of 512 MiB (several allocations to prefetch)
GIB = 1 << 30


# ---- the job (runs under the hook or bare) ----------------------------------------------------

def is_managed(ptr: int) -> int:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        val = ctypes.c_uint(0)
        # CU_POINTER_ATTRIBUTE_IS_MANAGED = 8
        rc = cuda.cuPointerGetAttribute(ctypes.byref(val), 8, ctypes.c_uint64(ptr))
        return int(val.value) if rc == 0 else -rc
    except OSError:
        return -1


def app(args: argparse.Namespace) -> int:
    import torch

    dev = torch.device("cuda")
    torch.ones(1, device=dev)  # context
    n_chunks = max(1, int(args.ws_gib * GIB) // CHUNK)

    def allocate() -> list:
        return [torch.empty(CHUNK // 4, dtype=torch.float32, device=dev) for _ in range(n_chunks)]

    def one_iter(chunks: list) -> None:
        for _ in range(args.ops):
            for c in chunks:
                c.mul_(1.0000001)
        torch.cuda.synchronize()

    iters = args.iters
    calib = None
    if iters <= 0:  # calibrate: iterations for --target-s of work, with the data resident
        chunks = allocate()
        for c in chunks:
            c.fill_(1.0)
        one_iter(chunks)
        t0 = time.monotonic()
        for _ in range(3):
            one_iter(chunks)
        calib = (time.monotonic() - t0) / 3
        iters = max(5, int(args.target_s / calib))
        del chunks
        torch.cuda.empty_cache()
    held = allocate() if args.jobs == 1 else None
    managed = is_managed(held[0].data_ptr()) if held else None
    print(json.dumps({"ready": True, "iters": iters, "calib_iter_s": calib, "managed": managed,
                      "chunks": n_chunks}), flush=True)
    line = sys.stdin.readline().split()
    end_at = float(line[1]) if len(line) > 1 else float("inf")
    t_go = time.monotonic()
    jobs, iter_s, done_total, stopped = [], [], 0, False
    for _ in range(args.jobs):
        chunks = held if held is not None else allocate()
        j0 = time.monotonic()
        for c in chunks:
            c.fill_(1.0)  # first touch (under UM: the data lands on the GPU)
        done = 0
        for _ in range(iters):
            i0 = time.monotonic()
            one_iter(chunks)
            iter_s.append(time.monotonic() - i0)
            done += 1
            if time.monotonic() >= end_at:
                stopped = True
                break
        jobs.append({"seconds": time.monotonic() - j0, "iters": done})
        done_total += done
        if held is None:
            del chunks
            torch.cuda.empty_cache()
        if stopped:
            break
    out = {"t_go": t_go, "t_end": time.monotonic(), "jobs": jobs, "iters_done": done_total,
           "iters_planned": iters * args.jobs, "stopped": stopped, "managed": managed,
           "iter_p50_ms": statistics.median(iter_s) * 1e3 if iter_s else None,
           "iter_max_ms": max(iter_s) * 1e3 if iter_s else None, "pid": os.getpid()}
    print(json.dumps(out), flush=True)
    return 0


# ---- orchestration -----------------------------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="bench/results")
    p.add_argument("--quotas", default="0.25,2,10", help="seconds, comma-separated")
    p.add_argument("--jobs", type=int, default=3, help="UM clients (2-3)")
    p.add_argument("--ws-gib", type=float, default=4.0, help="working set per job")
    p.add_argument("--target-s", type=float, default=2.0, help="solo run time of one job")
    p.add_argument("--budget-s", type=float, default=170.0, help="skip runs that would start later")
    p.add_argument("--app", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--iters", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--ops", type=int, default=8, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.app:
        return app(args)

    from common import BENCH, BUILD, PY, Procs, base_env, gpu_info, slug

    t_start = time.monotonic()
    subprocess.run(["sh", str(BENCH / "build_hook.sh"), str(BUILD)], check=True,
                   stdout=subprocess.DEVNULL)
    hook = BUILD / "libgemhook.so.1"
    info = gpu_info() or {"name": "unknown", "driver": "?", "memory": "?"}
    free_gib = _free_gib()
    n = max(1, args.jobs)
    ws = min(args.ws_gib, 24.0 / n, max(0.5, (free_gib - 6.0) / n) if free_gib else args.ws_gib)
    ws = max(0.5, int(ws * 2) / 2)  # whole chunks
    report: dict = {"gpu": info, "free_gib_at_start": free_gib, "jobs": n, "ws_gib": ws,
                    "managed_total_gib": n * ws, "runs": [], "started": time.strftime("%F %T")}
    print(f"S8: {n} jobs x {ws:g} GiB on {info['name']} ({free_gib} GiB free)", flush=True)
    me = str(Path(__file__).resolve())
    app_argv = [PY, me, "--app", "--ws-gib", f"{ws:g}"]

    with Procs() as procs:
        # serial reference: one bare process runs the N jobs back to back (calibrates iters)
        serial_argv = [*app_argv, "--jobs", str(n), "--target-s", f"{args.target_s:g}"]
        serial = _run_group(procs, [(serial_argv, base_env())],
                            timeout=n * args.target_s * 4 + 60)[0]
        iters = serial["ready"]["iters"]
        serial_s = sum(j["seconds"] for j in serial["result"]["jobs"])
        solo_s = serial["result"]["jobs"][0]["seconds"]
        report["serial"] = {"iters_per_job": iters, "seconds": serial_s, "solo_job_s": solo_s,
                            "raw": serial}
        print(f"serial: {serial_s:.2f} s for {n} jobs of {iters} iterations", flush=True)
        job_argv = [*app_argv, "--jobs", "1", "--iters", str(iters)]
        gpu_mem = int((ws + 0.5) * GIB)

        def um_run(label: str, q: float, clients: int, evict: bool, prefetch: bool) -> None:
            if time.monotonic() - t_start > args.budget_s:
                report["runs"].append({"label": label, "quota_s": q, "skipped": "budget"})
                return
            flags = ["-q", f"{q * 1000:g}", "-m", f"{q * 1000:g}", "--max_quota",
                     f"{q * 1000:g}", "--um-min-quota", f"{q * 1000:g}",
                     "-w", f"{max(10000.0, 4000 * q):g}", "--device-memory", str(gpu_mem),
                     "--oversubscription", str(clients)]
            if evict:
                flags.append("--evict-on-release")
            names = [f"j{i}" for i in range(clients)]
            with _Backend(procs, names, gpu_mem, flags) as be:
                extra = {} if prefetch else {"GEMINI_UM_PREFETCH": "0"}
                group = [(job_argv, {**base_env(), **be.hook_env(nm, hook), **extra})
                         for nm in names]
                limit = min(max(3.0 * serial_s * clients / n, 10.0), 25.0)
                res = _run_group(procs, group, timeout=limit + 60, run_limit=limit)
            done = sum(r["result"]["iters_done"] for r in res)
            t0 = min(r["result"]["t_go"] for r in res)
            t1 = max(r["result"]["t_end"] for r in res)
            rate = done / (t1 - t0)
            serial_rate = n * iters / serial_s
            row = {"label": label, "quota_s": q, "clients": clients, "evict": evict,
                   "prefetch": prefetch, "makespan_s": t1 - t0, "iters_done": done,
                   "iters_planned": clients * iters,
                   "complete": all(not r["result"]["stopped"] for r in res),
                   "slowdown_vs_serial": serial_rate / rate if rate > 0 else None,
                   "managed": [r["ready"]["managed"] for r in res],
                   "iter_p50_ms": [r["result"]["iter_p50_ms"] for r in res],
                   "iter_max_ms": [r["result"]["iter_max_ms"] for r in res], "raw": res}
            report["runs"].append(row)
            print(f"{label} Q={q:g}s: slowdown {row['slowdown_vs_serial']:.3f} x serial "
                  f"({done}/{clients * iters} iterations in {t1 - t0:.2f} s)", flush=True)

        um_run("solo-um", 10.0, 1, evict=False, prefetch=True)
        for q in (float(x) for x in args.quotas.split(",")):
            um_run("um+prefetch", q, n, evict=True, prefetch=True)
            um_run("um-noprefetch", q, n, evict=True, prefetch=False)

    solo = next((r for r in report["runs"] if r["label"] == "solo-um" and "skipped" not in r),
                None)
    if solo is not None:
        report["solo_um_overhead"] = solo["makespan_s"] / solo_s - 1.0
    report["elapsed_s"] = time.monotonic() - t_start
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{slug(info['name'])}-{time.strftime('%Y%m%d-%H%M%S')}-um"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1))
    stem.with_suffix(".md").write_text(_table(report))
    print(_table(report))
    print(f"wrote {stem}.json, {stem}.md", flush=True)
    return 0


def _free_gib() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,"
                              "nounits"], capture_output=True, text=True, timeout=20)
        return float(out.stdout.split()[0]) / 1024 if out.returncode == 0 else None
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


class _Backend:
    """gem-schd + one gem-pmgr per client, all UM (`um` column), with the given gem-schd flags."""

    def __init__(self, procs, names: list[str], gpu_mem: int, flags: list[str]) -> None:
        from common import PY, base_env

        self.dir = Path(tempfile.mkdtemp(prefix="gembench-s8-"))
        cfg = self.dir / "resource-config.txt"
        share = 1.0 / len(names)
        cfg.write_text(f"{len(names)}\n" + "".join(f"{nm} {share:g} 1 {gpu_mem} um\n"
                                                   for nm in names))
        env = base_env()
        self.schd = procs.spawn([PY, "-m", "gemini.cli.schd", "-P", "0", "-p", str(self.dir),
                                 "-f", cfg.name, *flags], env, "gem-schd")
        self.schd.port = int(self.schd.wait_for(r"listening on [\d.]+:(\d+)", 30).group(1))
        self.pmgrs = {}
        for nm in names:
            penv = {**env, "POD_NAME": nm, "SCHEDULER_PORT": str(self.schd.port),
                    "SCHEDULER_IP": "127.0.0.1"}
            pm = procs.spawn([PY, "-m", "gemini.cli.pmgr", "--port", "0"], penv, f"pmgr-{nm}")
            pm.port = int(pm.wait_for(r"listening on [\d.]+:(\d+)", 30).group(1))
            pm.wait_for("unified memory", 30)
            self.pmgrs[nm] = pm

    def hook_env(self, name: str, hook: Path) -> dict[str, str]:
        return {"LD_PRELOAD": str(hook), "POD_NAME": name, "POD_MANAGER_IP": "127.0.0.1",
                "POD_MANAGER_PORT": str(self.pmgrs[name].port)}

    def __enter__(self) -> _Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        for pm in self.pmgrs.values():
            pm.stop()
        self.schd.stop()


def _run_group(procs, group, timeout: float, run_limit: float | None = None) -> list[dict]:
    """Start every (argv, env), wait until all are ready, say go together, collect results."""
    ps = [procs.spawn(argv, env, f"job{i}", stdin=True) for i, (argv, env) in enumerate(group)]
    ready = [_json_line(p, timeout) for p in ps]
    end_at = time.monotonic() + 0.2 + (run_limit if run_limit is not None else 1e9)
    for p in ps:
        p.proc.stdin.write(f"go {end_at:.6f}\n")
        p.proc.stdin.flush()
    results = [_json_line(p, timeout) for p in ps]
    for p in ps:
        p.proc.wait(30)
    return [{"ready": r, "result": res} for r, res in zip(ready, results, strict=True)]


def _json_line(p, timeout: float) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = p.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{p.name} ended: {p.drain()[-2000:]}")
        if line.startswith("{"):
            return dict(json.loads(line))
    raise RuntimeError(f"{p.name}: no result in {timeout:.0f} s")


def _table(r: dict) -> str:
    rows = [f"# S8 unified memory: {r['jobs']} jobs x {r['ws_gib']:g} GiB on {r['gpu']['name']}",
            "", f"serial (bare, one after another): {r['serial']['seconds']:.2f} s; "
            f"solo-UM overhead: {r.get('solo_um_overhead', float('nan')) * 100:+.1f} %", "",
            "| run | quota s | evict | prefetch | makespan s | done/planned | slowdown vs serial "
            "| iter p50 ms | managed |", "|---|---|---|---|---|---|---|---|---|"]
    for x in r["runs"]:
        if "skipped" in x:
            rows.append(f"| {x['label']} | {x['quota_s']:g} | | | skipped ({x['skipped']}) "
                        "| | | | |")
            continue
        p50 = "/".join(f"{v:.0f}" for v in x["iter_p50_ms"] if v is not None)
        rows.append(f"| {x['label']} | {x['quota_s']:g} | {x['evict']} | {x['prefetch']} | "
                    f"{x['makespan_s']:.2f} | {x['iters_done']}/{x['iters_planned']} | "
                    f"{x['slowdown_vs_serial']:.3f} | {p50} | {x['managed']} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.exit(main())
