"""Issue 16 on a machine with 2 GPUs: one config, one scheduler per GPU, every device of a client
limited — through the user's own tools (launch-backend, launch-command --config).

  python3 bench/multigpu.py [--seconds 20] [--out bench/results] [--cpu]

Workload: bench/multigpu_app.py (bf16 matmuls, one thread per visible GPU).  Shares are work
done: a client's steps/s on a GPU ÷ the bare steps/s of the same program on that GPU (bare: the
app alone on both GPUs, without the hook, before and after the cases; their mean).
Cases (launchers' default quotas):
  one_process  `p` capped at 0.4 on GPU 0 and 1.0 on GPU 1, one process on both GPUs
  two_clients  a 0.3 / b 0.7 on GPU 0 and a 0.6 / b 0.4 on GPU 1 (limits 1.0), each one
               process on both GPUs
  four_clients c1, c2 on GPU 0 and c3, c4 on GPU 1 (0.5 each, limits 1.0), one GPU each:
               the aggregate per GPU (Σ rates ÷ bare), goal ≥ 0.98
Writes <out>/<gpu>-x<n>-<date>-multigpu.{json,md}.  --cpu: a dry run of the plumbing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import gpu_name

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
APP = str(ROOT / "bench" / "multigpu_app.py")
CASES = {
    "one_process": ("2\np 0.4 0.4 16GiB\np 1.0 1.0 16GiB gpu=1\n",
                    {"p": {"0": 0.4, "1": 1.0}}),
    "two_clients": ("4\na 0.3 1.0 16GiB\nb 0.7 1.0 16GiB\na 0.6 1.0 16GiB gpu=1\n"
                    "b 0.4 1.0 16GiB gpu=1\n",
                    {"a": {"0": 0.3, "1": 0.6}, "b": {"0": 0.7, "1": 0.4}}),
    # on a machine with one GPU: the same tools and program, one GPU (not part of the default run)
    "one_gpu": ("2\nc1 0.3 1.0 16GiB\nc2 0.7 1.0 16GiB\n",
                {"c1": {"0": 0.3}, "c2": {"0": 0.7}}),
    "four_clients": ("4\nc1 0.5 1.0 16GiB\nc2 0.5 1.0 16GiB\nc3 0.5 1.0 16GiB gpu=1\n"
                     "c4 0.5 1.0 16GiB gpu=1\n",
                     {"c1": {"0": 0.5}, "c2": {"0": 0.5}, "c3": {"1": 0.5}, "c4": {"1": 0.5}}),
}


def env() -> dict[str, str]:
    e = dict(os.environ, PYTHONUNBUFFERED="1")
    e["PYTHONPATH"] = os.pathsep.join(p for p in (e.get("PYTHONPATH", ""), str(ROOT)) if p)
    for k in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "POD_MANAGER_PORT", "POD_NAME"):
        e.pop(k, None)
    return e


def run_apps(argvs: list[list[str]], seconds: float) -> list[dict]:
    """Start every app, wait until all are warm, start them together, collect their rates."""
    procs = [subprocess.Popen(a, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env(), cwd=ROOT) for a in argvs]
    try:
        for p in procs:
            line = p.stdout.readline()
            if '"ready"' not in line:
                raise RuntimeError(f"app failed to start: {line.strip() or p.wait()}")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        out = []
        for p in procs:
            line = p.stdout.readline()
            out.append(json.loads(line))
            p.wait(timeout=60)
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def app(seconds: float, cpu: bool, gpus: int = 2) -> list[str]:
    devices = ",".join(str(i) for i in range(gpus))
    return [PY, APP, "--seconds", str(seconds), "--devices", devices, *(["--cpu"] if cpu else [])]


def run_case(name: str, config: str, targets: dict, port: int, seconds: float, cpu: bool,
             bare: dict[str, float]) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"gem-{name}-"))
    conf = tmp / "resource-config.txt"
    conf.write_text(config)
    backend = subprocess.Popen(
        [PY, "-m", "gemini.cli.launch_backend", f"{PY} -m gemini.cli.schd",
         f"{PY} -m gemini.cli.pmgr", "--config", str(conf), "--port", str(port)],
        stdout=subprocess.PIPE, text=True, env=env(), cwd=ROOT, start_new_session=True)
    try:
        gpus = {g for t in targets.values() for g in t}
        pod_managers = sum(len(t) for t in targets.values())
        for _ in range(len(gpus) + pod_managers):  # one line per daemon started
            print("   ", backend.stdout.readline().strip(), flush=True)
        clients = list(targets)
        argvs = [[PY, "-m", "gemini.cli.launch_command", "--name", c, "--config", str(conf),
                  "--backend-port", str(port), "--", *app(seconds, cpu, len(targets[c]))]
                 for c in clients]
        results = run_apps(argvs, seconds)
    finally:
        os.killpg(backend.pid, signal.SIGINT)
        backend.wait(timeout=30)
    per_gpu = []
    for gpu in sorted({g for t in targets.values() for g in t}):
        rows = []
        for c, r in zip(clients, results, strict=True):
            if gpu not in targets[c]:
                continue
            # the client's device i is its i-th GPU in config order
            index = list(targets[c]).index(gpu)
            rate = r["rates"][str(index)]
            rows.append({"name": c, "target": targets[c][gpu],
                         "achieved": round(rate / bare[gpu], 4), "steps_per_s": round(rate, 2)})
        per_gpu.append({"gpu": int(gpu), "clients": rows,
                        "aggregate": round(sum(x["achieved"] for x in rows), 4)})
    return {"config": config, "per_gpu": per_gpu}


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        return max(1, len(out.stdout.splitlines()))
    except OSError:
        return 1


def markdown(result: dict) -> str:
    lines = [f"# gemini, issue 16: two GPUs — {result['device']}", "",
             f"{result['date']} · `{result['command']}`", "",
             "| case | GPU | client | target | achieved (work ÷ bare) | aggregate |",
             "|---|---|---|---|---|---|"]
    for case, r in result["cases"].items():
        for g in r["per_gpu"]:
            for c in g["clients"]:
                lines.append(f"| {case} | {g['gpu']} | {c['name']} | {c['target']} | "
                             f"{c['achieved']:.3f} | {g['aggregate']:.3f} |")
    lines += ["", f"bare steps/s per GPU: {result['bare']}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--only", default="one_process,two_clients,four_clients")
    args = p.parse_args()
    t0 = time.time()
    gpus = 2 if args.cpu else gpu_count()
    bare_runs = [run_apps([app(args.seconds, args.cpu, gpus)], args.seconds)[0]["rates"]]
    print("bare", bare_runs[0], flush=True)
    cases = {}
    for i, name in enumerate(args.only.split(",")):
        bare = {g: sum(r.get(g, 0.0) for r in bare_runs) / len(bare_runs) for g in ("0", "1")}
        config, targets = CASES[name]
        print(name, flush=True)
        cases[name] = run_case(name, config, targets, 52000 + 100 * i, args.seconds, args.cpu,
                               {g: bare[g] or 1.0 for g in bare})
        print(json.dumps(cases[name]["per_gpu"]), flush=True)
    bare_runs.append(run_apps([app(args.seconds, args.cpu, gpus)], args.seconds)[0]["rates"])
    print("bare", bare_runs[1], flush=True)
    device = gpu_name()
    result = {
        "device": device, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join(["python3", "bench/multigpu.py", *sys.argv[1:]]),
        "bare": bare_runs, "cases": cases,
        "per_gpu": cases.get("two_clients", next(iter(cases.values())))["per_gpu"],
        "gpus": gpus,
        "total_s": round(time.time() - t0, 1),
    }
    slug = device.split(",")[0].strip().lower().replace(" ", "-").replace("nvidia-", "")
    stem = Path(args.out) / f"{slug}-x{gpus}-{time.strftime('%Y%m%d-%H%M%S')}-multigpu"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
