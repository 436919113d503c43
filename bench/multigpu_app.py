"""A matmul loop on every visible GPU at once, one thread per device, for bench/multigpu.py
(issue 16).  Imports nothing from gemini.

  multigpu_app.py --seconds S [--devices 0,1] [--k 8] [--cpu]

Each thread runs 4 bf16 4096² matmuls per step on its device and synchronises every k steps.
After a warm-up it prints {"ready": true}, waits for a line on stdin, runs S seconds and prints
{"rates": {"0": steps/s, "1": ...}} (steps per second of each device).  --cpu: no GPU (dry
runs of the plumbing).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

N = 4096


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def make_step(device: int, cpu: bool):
    if cpu:
        return (lambda: time.sleep(0.001)), (lambda: None)
    import torch

    dev = torch.device("cuda", device)
    a = torch.randn(N, N, device=dev, dtype=torch.bfloat16)
    b = torch.randn(N, N, device=dev, dtype=torch.bfloat16)

    def step() -> None:
        with torch.cuda.device(dev):
            for _ in range(4):
                torch.matmul(a, b)

    return step, lambda: torch.cuda.synchronize(dev)


def loop(step, sync, k: int, until: float, out: list[int]) -> None:
    steps = 0
    while time.monotonic() < until:
        for _ in range(k):
            step()
        sync()
        steps += k
    out.append(steps)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--devices", default="")
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--cpu", action="store_true")
    args = p.parse_args()
    if args.devices:
        devices = [int(d) for d in args.devices.split(",")]
    else:
        import torch

        devices = list(range(torch.cuda.device_count()))
    try:
        fns = {d: make_step(d, args.cpu) for d in devices}
        for step, sync in fns.values():  # warm-up
            for _ in range(args.k):
                step()
            sync()
    except Exception as exc:
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 3
    emit({"ready": True, "devices": devices})
    sys.stdin.readline()
    start = time.monotonic()
    until = start + args.seconds
    results: dict[int, list[int]] = {d: [] for d in devices}
    threads = [threading.Thread(target=loop, args=(*fns[d], args.k, until, results[d]))
               for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - start
    emit({"rates": {str(d): results[d][0] / took for d in devices}, "seconds": took})
    return 0


if __name__ == "__main__":
    sys.exit(main())
