"""A fixed-work GPU tenant for the share scenarios (S3, S4, S5, S9, validate_hook check 4).

Every "kernel" is the same amount of arithmetic (a CuPy RawKernel of FMA chains; not a clock
spin, which would count time while switched out), launched in bursts of `--burst` with a stream
sync after each burst; after every sync the tenant records (CLOCK_MONOTONIC time, kernels done).

Protocol on stdin/stdout, so that several tenants start their measured runs together:
  tenant prints  {"ready": true, "iters": .., "kernel_ms": .., "backend": ..}   (after warm-up)
  we send        go START END    (time.monotonic() values, shared by all processes)
  tenant waits until START, works until END, prints {"samples": [[t, kernels], ...], ...}.

Backends: cupy (default), torch (a fixed-size matmul; fallback when CuPy is missing), fake (runs
gemini's gem_client on the fake driver; orchestration dry runs without a GPU).  Imports nothing
from gemini, so it runs where cffi/watchdog are missing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

FMA_SRC = r"""
extern "C" __global__ void fixed_work(float *out, int iters)
{
    float a = threadIdx.x * 1e-3f, b = blockIdx.x * 1e-4f, c = 0.5f, d = 0.25f;
    for (int i = 0; i < iters; ++i) {
        a = fmaf(a, 0.5f, 1.0f);
        b = fmaf(b, 0.5f, 0.75f);
        c = fmaf(c, 0.5f, 0.5f);
        d = fmaf(d, 0.5f, 0.25f);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}
"""
THREADS = 256


class CupyWork:
    name = "cupy"

    def __init__(self, iters: int) -> None:
        import cupy

        self.cp = cupy
        sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self.blocks = sms * 8
        self.kernel = cupy.RawKernel(FMA_SRC, "fixed_work")
        self.out = cupy.zeros(self.blocks * THREADS, dtype=cupy.float32)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.iters = iters

    def launch(self) -> None:
        import numpy

        with self.stream:
            self.kernel((self.blocks,), (THREADS,), (self.out, numpy.int32(self.iters)))

    def sync(self) -> None:
        self.stream.synchronize()


class TorchWork:
    """Fallback: one kernel = `iters` matmuls of 1024x1024 fp32 (fixed arithmetic); an --iters
    above 1000 (a CuPy count) starts calibration at 4."""

    name = "torch"

    def __init__(self, iters: int) -> None:
        import torch

        self.torch = torch
        self.a = torch.randn(1024, 1024, device="cuda")
        self.c = torch.empty_like(self.a)
        self.stream = torch.cuda.Stream()
        self.iters = iters if iters <= 1000 else 4

    def launch(self) -> None:
        with self.torch.cuda.stream(self.stream):
            for _ in range(self.iters):
                self.torch.mm(self.a, self.a, out=self.c)

    def sync(self) -> None:
        self.stream.synchronize()


def make_work(backend: str, iters: int):
    if backend in ("cupy", "auto"):
        try:
            return CupyWork(iters)
        except ImportError:
            if backend == "cupy":
                raise
    return TorchWork(iters)


def time_kernel(work, n: int = 20) -> float:
    """Milliseconds per kernel, back to back."""
    work.launch()
    work.sync()
    t0 = time.perf_counter()
    for _ in range(n):
        work.launch()
    work.sync()
    return (time.perf_counter() - t0) / n * 1000


def calibrate(work, target_ms: float) -> float:
    ms = time_kernel(work, 5)
    for _ in range(3):
        scale = target_ms / max(ms, 1e-3)
        if 0.9 < scale < 1.1:
            break
        work.iters = max(1, round(work.iters * scale))
        ms = time_kernel(work, 10)
    return time_kernel(work, 20)


def wait_go() -> tuple[float, float]:
    line = sys.stdin.readline().split()
    if len(line) != 3 or line[0] != "go":
        raise SystemExit(f"tenant: expected 'go START END', got {line!r}")
    return float(line[1]), float(line[2])


def sleep_until(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run_real(args: argparse.Namespace) -> int:
    work = make_work(args.backend, args.iters)
    if args.calibrate_ms > 0:
        kernel_ms = calibrate(work, args.calibrate_ms)
    else:
        kernel_ms = time_kernel(work, 5)
    iters = work.iters
    emit({"ready": True, "iters": iters, "kernel_ms": kernel_ms, "backend": work.name,
          "pid": os.getpid()})
    start, end = wait_go()
    sleep_until(start)
    samples: list[list[float]] = []
    done = 0
    t_first = time.monotonic()
    while True:
        for _ in range(args.burst):
            work.launch()
        work.sync()
        done += args.burst
        t = time.monotonic()
        samples.append([round(t, 6), done])
        if t >= end:
            break
    emit({"samples": samples, "t_first_launch": t_first, "kernels": done, "iters": iters,
          "kernel_ms": kernel_ms, "backend": work.name, "burst": args.burst})
    return 0


def run_fake(args: argparse.Namespace) -> int:
    """gem_client does the work on the fake driver; samples are its progress lines, stamped on
    arrival (a few ms late at most)."""
    kernel_ms = args.fake_kernel_ms
    emit({"ready": True, "iters": 0, "kernel_ms": kernel_ms, "backend": "fake", "pid": os.getpid()})
    start, end = wait_go()
    sleep_until(start)
    t_first = time.monotonic()
    argv = [args.gem_client, "work", "--kernel-ms", str(kernel_ms), "--burst", str(args.burst),
            "--seconds", f"{max(0.05, end - t_first):.3f}", "--report-every", "0.02"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    samples: list[list[float]] = []
    last: dict = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        t = time.monotonic()
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        last = rec
        if "kernels" in rec:
            samples.append([round(t, 6), rec["kernels"]])
    proc.wait()
    emit({"samples": samples, "t_first_launch": t_first, "kernels": last.get("kernels", 0),
          "iters": 0, "kernel_ms": kernel_ms, "backend": "fake", "burst": args.burst,
          "rc": last.get("rc", -1), "failed": last.get("failed")})
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--backend", choices=["auto", "cupy", "torch", "fake"], default="auto")
    p.add_argument("--iters", type=int, default=20000, help="FMA iterations per thread per kernel")
    p.add_argument("--calibrate-ms", type=float, default=0.0,
                   help="first scale --iters so that one kernel takes this long (solo)")
    p.add_argument("--burst", type=int, default=4, help="kernels between syncs")
    p.add_argument("--fake-kernel-ms", type=float, default=1.5)
    p.add_argument("--gem-client", default="", help="fake backend: path of gem_client")
    args = p.parse_args(argv)
    if args.backend == "fake":
        return run_fake(args)
    return run_real(args)


if __name__ == "__main__":
    sys.exit(main())
