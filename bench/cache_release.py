"""Issue 15 on the GPU: does the opt-in PyTorch cache release (gemini.torch) give the client's
memory back, as a neighbour process of the same client sees it?

  python3 bench/cache_release.py [--out bench/results] [--gib 3]

launch-backend serves one unified-memory client `cache` limited to 8 GiB (config
`1 / cache 1 1 8GiB um`); two processes of it run under launch-command.  A allocates --gib GiB in
torch tensors and deletes them (PyTorch keeps the blocks cached); B, its neighbour, reports
torch.cuda.mem_get_info() free (the hook's view: the limit minus the client's use) before A
allocates, after A's `del`, and after A's release step, which is one of:
  off       nothing (A waits 1.5 s)
  explicit  gemini.torch.release_cached_memory()
  timer     gemini.torch.install(interval_s=0.5), then A waits 1.5 s
Expected: free rises by about --gib GiB after the release step with explicit and timer, not off.
Writes <out>/<gpu>-<date>-cache-release.{json,md}.  Needs a GPU and torch; build the hook in
place first (`sh bench/build_hook.sh gemini/native`).  `--app ROLE` is a process (internal).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
PY = sys.executable
GIB = 1 << 30
CONFIG = "1\ncache 1 1 8GiB um\n"
MODES = ("off", "explicit", "timer")
PORT = 52900


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ---- the two processes (under the hook) --------------------------------------------------------

def app(role: str, mode: str, gib: float) -> int:
    import torch

    torch.ones(1, device="cuda")  # the context
    if role == "probe":  # B: one line per "probe" on stdin
        emit({"ready": True, "pid": os.getpid()})
        for line in sys.stdin:
            if line.strip() != "probe":
                break
            free, total = torch.cuda.mem_get_info()
            emit({"free": free, "total": total})
        return 0
    import gemini.torch

    emit({"ready": True, "pid": os.getpid()})
    sys.stdin.readline()
    held = [torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
            for _ in range(int(gib * 2))]
    for t in held:
        t.fill_(1)
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    del held, t
    emit({"freed": True, "allocated_before_del": allocated,
          "reserved_after_del": torch.cuda.memory_reserved()})
    sys.stdin.readline()
    released = None
    if mode == "explicit":
        released = gemini.torch.release_cached_memory()
    else:
        if mode == "timer":
            gemini.torch.install(interval_s=0.5)
        time.sleep(1.5)
    emit({"released_bytes": released, "reserved_after": torch.cuda.memory_reserved()})
    sys.stdin.readline()
    return 0


# ---- orchestration -----------------------------------------------------------------------------

def env() -> dict[str, str]:
    e = dict(os.environ, PYTHONUNBUFFERED="1",
             PYTORCH_CUDA_ALLOC_CONF="expandable_segments:False")
    e["PYTHONPATH"] = os.pathsep.join(p for p in (e.get("PYTHONPATH", ""), str(ROOT)) if p)
    for k in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "POD_MANAGER_PORT", "POD_NAME"):
        e.pop(k, None)
    return e


class Proc:
    def __init__(self, conf: Path, role: str, mode: str, gib: float) -> None:
        argv = [PY, "-m", "gemini.cli.launch_command", "--name", "cache", "--config", str(conf),
                "--backend-port", str(PORT), "--", PY, str(Path(__file__).resolve()), "--app",
                role, "--mode", mode, "--gib", f"{gib:g}"]
        self.role = role
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env(), cwd=ROOT, start_new_session=True)

    def say(self, line: str) -> None:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def read(self) -> dict:
        while line := self.p.stdout.readline():
            if line.startswith("{"):
                return dict(json.loads(line))
        raise RuntimeError(f"{self.role} ended ({self.p.wait()}) before its next line")

    def end(self) -> None:
        if self.p.poll() is None:
            try:
                self.say("done")
                self.p.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


def one_mode(conf: Path, mode: str, gib: float) -> dict:
    a, b = Proc(conf, "holder", mode, gib), Proc(conf, "probe", mode, gib)
    try:
        a.read()
        b.read()

        def free() -> int:
            b.say("probe")
            return int(b.read()["free"])

        row: dict = {"mode": mode, "free_before": free()}
        a.say("allocate")
        row["holder_after_del"] = a.read()
        row["free_cached"] = free()
        a.say("release")
        row["holder_after_release"] = a.read()
        row["free_after_release"] = free()
    finally:
        a.end()
        b.end()
    row["rise_gib"] = round((row["free_after_release"] - row["free_cached"]) / GIB, 3)
    row["cached_gib"] = round((row["free_before"] - row["free_cached"]) / GIB, 3)
    return row


def run(gib: float) -> list[dict]:
    tmp = Path(tempfile.mkdtemp(prefix="gem-cache-"))
    conf = tmp / "resource-config.txt"
    conf.write_text(CONFIG)
    backend = subprocess.Popen(
        [PY, "-m", "gemini.cli.launch_backend", f"{PY} -m gemini.cli.schd",
         f"{PY} -m gemini.cli.pmgr", "--config", str(conf), "--port", str(PORT)],
        stdout=subprocess.PIPE, text=True, env=env(), cwd=ROOT, start_new_session=True)
    rows = []
    try:
        for _ in range(2):  # one line per daemon started: the scheduler, the pod manager
            print("   ", backend.stdout.readline().strip(), flush=True)
        for mode in MODES:
            rows.append(one_mode(conf, mode, gib))
            print(json.dumps({k: v for k, v in rows[-1].items() if not k.startswith("holder")}),
                  flush=True)
    finally:
        os.killpg(backend.pid, signal.SIGINT)
        backend.wait(timeout=30)
    return rows


def markdown(r: dict) -> str:
    lines = [f"# gemini, issue 15: PyTorch cache release (gemini.torch) — {r['device']}", "",
             f"{r['date']} · `{r['command']}` · client `cache`, 8 GiB, unified memory; A "
             f"allocates and frees {r['gib']:g} GiB, B (same client) reads mem_get_info", "",
             "| release step | B free before (GiB) | after A's del | after the step | rise (GiB) "
             "| A reserved after (GiB) | expected rise |", "|---|---|---|---|---|---|---|"]
    for x in r["rows"]:
        lines.append(
            f"| {x['mode']} | {x['free_before'] / GIB:.3f} | {x['free_cached'] / GIB:.3f} | "
            f"{x['free_after_release'] / GIB:.3f} | {x['rise_gib']:.3f} | "
            f"{x['holder_after_release']['reserved_after'] / GIB:.3f} | "
            f"{'0' if x['mode'] == 'off' else '~' + format(r['gib'], 'g')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--gib", type=float, default=3.0, help="what A allocates and frees (3)")
    p.add_argument("--app", choices=["holder", "probe"], help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=MODES, default="off", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.app:
        return app(args.app, args.mode, args.gib)
    from common import gpu_name, slug

    device = gpu_name()
    result = {"device": device, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
              "command": " ".join(["python3", "bench/cache_release.py", *sys.argv[1:]]),
              "config": CONFIG, "gib": args.gib, "rows": run(args.gib)}
    stem = Path(args.out) / f"{slug(device.split(',')[0])}-{time.strftime('%Y%m%d-%H%M%S')}"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(f"{stem}-cache-release.json").write_text(json.dumps(result, indent=1) + "\n")
    Path(f"{stem}-cache-release.md").write_text(markdown(result))
    print(markdown(result))
    print(f"wrote {stem}-cache-release.json and .md", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
