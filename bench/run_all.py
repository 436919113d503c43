"""Every benchmark and real-GPU check of issues 3 and 4 in one command (bench/README.md).

  python3 bench/run_all.py [--fake] [--only A,S1,...] [--out DIR] [--budget SECONDS]

Builds the hook with plain cc (bench/build_hook.sh) and the CUDA probes with nvcc into
bench/.build/, runs the scenarios one after the other (each under its own time limit; a failure
is recorded and the rest still run), then writes <gpu>-<date>.json, .md and PNG plots to $OUT
(default bench/results/) and prints the Markdown table.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report
import scenarios as sc
import validate_hook
from common import BENCH, BUILD, Deadline, Procs, gpu_info, slug

ORDER = ["S6", "S1", "A", "S7", "S2", "S3", "S9", "S4", "S5"]
LIMITS = {"S6": 45, "S1": 100, "A": 260, "S7": 90, "S2": 170, "S3": 200, "S9": 40, "S4": 60,
          "S5": 45, "calibrate": 90}


def find_nvcc() -> str | None:
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).exists():
            return cand
    return None


def nvcc_build(nvcc: str, name: str) -> dict:
    src, out = BENCH / "cuda" / f"{name}.cu", BUILD / name
    errors = []
    for arch in (["-arch=native"], []):
        cmd = [nvcc, "-O2", "-std=c++17", *arch, "-o", str(out), str(src), "-ldl"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        if r.returncode == 0:
            return {"ok": True, "cmd": " ".join(cmd)}
        errors.append(r.stderr[-800:])
    return {"ok": False, "error": "\n".join(errors)}


def build(fake: bool) -> dict:
    BUILD.mkdir(parents=True, exist_ok=True)
    info: dict = {}
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(3) as pool:
        hook = pool.submit(subprocess.run, ["sh", str(BENCH / "build_hook.sh"), str(BUILD)],
                           capture_output=True, text=True, timeout=240)
        nv = {}
        nvcc = None if fake else find_nvcc()
        if nvcc:
            nv = {n: pool.submit(nvcc_build, nvcc, n) for n in ("launch_rate", "limit_probe")}
        h = hook.result()
        info["hook"] = {"ok": h.returncode == 0, "stderr": h.stderr[-1500:]}
        for n, f in nv.items():
            info[n] = f.result()
        if not fake and not nvcc:
            info["nvcc"] = "not found: S1 and the C probe are skipped"
    info["seconds"] = round(time.monotonic() - t0, 1)
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--fake", action="store_true",
                   help="dry run on gemini's fake CUDA driver (no GPU, no torch/cupy)")
    p.add_argument("--only", default="", help="comma-separated subset of " + ",".join(ORDER))
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or BENCH / "results"))
    p.add_argument("--budget", type=float, default=470.0,
                   help="seconds for everything; scenarios that would start later are skipped")
    args = p.parse_args(argv)
    t_start = time.monotonic()
    gpu = None if args.fake else gpu_info()
    if gpu is None and not args.fake:
        print("run_all: no GPU (nvidia-smi failed); use --fake for a dry run", file=sys.stderr)
        return 2
    only = [s.strip() for s in args.only.split(",") if s.strip()] or ORDER
    ctx = sc.Context(fake=args.fake, out=args.out, gpu_name=gpu["name"] if gpu else "fake",
                     fake_gpu=f"/gembench-{os.getpid()}")
    results: dict = {"meta": {"gpu": ctx.gpu_name, "driver": gpu["driver"] if gpu else "-",
                              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "fake": args.fake,
                              "python": sys.version.split()[0], "only": only}}
    rows: list[dict] = []
    results["build"] = build(args.fake)
    print(f"build: {json.dumps(results['build'])[:400]}", file=sys.stderr, flush=True)
    if not results["build"]["hook"]["ok"]:
        rows.append({"scenario": "build", "metric": "hook", "value": "FAILED", "ok": False})

    def budget_left() -> float:
        return args.budget - (time.monotonic() - t_start)

    def run(name: str, fn) -> dict | None:
        limit = min(LIMITS.get(name, 120), max(5.0, budget_left()))
        if budget_left() < 10:
            results[name] = {"error": "skipped: out of time"}
            rows.append({"scenario": name, "metric": "skipped (out of time)", "value": "",
                         "ok": None})
            return None
        t0 = time.monotonic()
        print(f"[{time.monotonic() - t_start:6.1f} s] {name} (limit {limit:.0f} s)",
              file=sys.stderr, flush=True)
        try:
            with Deadline(limit, name), Procs() as procs:
                r = fn(procs)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            results[name] = {"error": f"{type(exc).__name__}: {exc}"[:3000],
                             "traceback": traceback.format_exc()[-3000:]}
            rows.append({"scenario": name, "metric": "error", "value": f"{exc}"[:150],
                         "ok": False})
            print(f"  {name} failed: {exc}"[:600], file=sys.stderr, flush=True)
            return None
        r["seconds"] = round(time.monotonic() - t0, 1)
        results[name] = r
        return r

    needs_fixed_work = any(s in only for s in ("A", "S3", "S9", "S4", "S5"))
    if needs_fixed_work:
        r = run("calibrate", lambda procs: sc.calibrate(ctx, procs))
        if r is None:
            print("calibration failed: share scenarios will fail", file=sys.stderr)
    for name in ORDER:
        if name not in only:
            continue
        if name == "A":
            r = run("A", lambda procs: validate_hook.run_checks(ctx, procs))
            if r is not None:
                rows += validate_hook.rows({k: v for k, v in r.items() if k != "seconds"})
            continue
        fn = {
            "S1": sc.s1, "S2": sc.s2, "S3": sc.s3, "S4": sc.s4, "S5": sc.s5, "S6": sc.s6,
            "S9": sc.s9,
            "S7": lambda c, procs: sc.s7(c, procs, results.get("A")),
        }[name]
        prog = {"S1": "launch_rate", "S7": "limit_probe"}.get(name)
        if prog and not args.fake and not (BUILD / prog).exists():
            results[name] = {"error": f"bench/.build/{prog} missing (nvcc build failed)"}
            rows.append({"scenario": name, "metric": "error", "value": f"{prog} not built",
                         "ok": False})
            continue
        r = run(name, lambda procs, fn=fn: fn(ctx, procs))
        if r is not None:
            rows += r.get("rows", [])
    if needs_fixed_work and ctx.solo and budget_left() > 15:
        r = run("calibrate_end", lambda procs: sc.calibrate(ctx, procs))
        if r is not None and len(ctx.solo) > 1:
            drift = ctx.solo[-1] / ctx.solo[0] - 1
            rows.append({"scenario": "-", "metric": "solo rate drift over the run",
                         "value": f"{drift * 100:+.1f} %", "goal": "small", "ok": None})
    total = time.monotonic() - t_start
    meta = results["meta"]
    meta.update(total_s=round(total, 1), solo=round(ctx.solo[0], 1) if ctx.solo else None,
                kernel_ms=round(ctx.kernel_ms, 3), iters=ctx.iters, tenant_backend=ctx.backend)
    results["rows"] = rows
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.out / f"{slug(ctx.gpu_name)}-{time.strftime('%Y%m%d-%H%M%S')}"
    md = report.markdown(meta, rows)
    results["plots"] = report.plots(results, base)
    base.with_suffix(".json").write_text(sc.dumps(results))
    base.with_suffix(".md").write_text(md)
    print(md)
    print(f"wrote {base}.json, {base}.md" + "".join(f", {p}" for p in results["plots"]),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
