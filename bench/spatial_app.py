"""The programs of bench/spatial.py (issue 13).  Imports nothing from gemini.

  spatial_app.py KIND --seconds S [--n N] [--cpu]

KIND:
  matmul  bf16 N×N matmuls in a loop, synchronised every --k steps (N 512: a small job that
          leaves most SMs idle; N 4096: a saturating one).  Result: steps per second.
  infer   a small torch MLP answering requests of batch 1-8 (random), one at a time, every
          --interval-ms; latency = one request's forward pass and synchronise.  Result: p50/p99.
  train   a training loop (4-layer MLP of width N, batch 2048, forward + backward + AdamW):
          steps per second.
  fault   launches a kernel that writes to address 0x10 (illegal address) through the driver
          API (PTX, JIT-compiled by the driver: no compiler needed) and reports the error.
  alloc   allocates --mib MiB in 256 MiB tensors, keeping them, until done or refused: how
          many MiB it got, and the error (MPS's pinned-memory fence, issue 13).

Protocol, one JSON line each, flushed: stdout {"ready": true, ...} after warm-up; stdin "go";
with --stream, stdout {"t": monotonic, "steps": n} about every 0.25 s while running; at the end
{"kind": .., "rate": .., ...} (or {"error": ..} when CUDA failed: the failure is a result here).
--cpu: no GPU (time.sleep stands in for the work), for dry runs of the plumbing.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import random
import sys
import time
from collections.abc import Callable

# st.global.u32 [p], 1 with p = the one parameter; PTX 6.0 for sm_50 is JIT-compiled by any
# recent driver for the GPU at hand.
BAD_PTX = b"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry gemini_bad_store(.param .u64 p)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, 1;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""
ILLEGAL_ADDRESS = 0x10


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def pct(values: list[float], q: float) -> float:
    """Nearest rank, as bench/common.py's (this app runs on its own, without it)."""
    s = sorted(values)
    return s[min(len(s) - 1, max(math.ceil(q * len(s) - 1e-9) - 1, 0))] if s else float("nan")


# ---- the workloads: (step, sync) -----------------------------------------------------------------

def matmul(n: int, cpu: bool) -> tuple[Callable[[], None], Callable[[], None]]:
    if cpu:
        return (lambda: time.sleep(0.0005)), (lambda: None)
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16) / n
    out = [torch.empty_like(a) for _ in range(2)]

    def step() -> None:
        torch.mm(a, b, out=out[0])
        torch.mm(out[0], b, out=out[1])

    return step, torch.cuda.synchronize


def train(width: int, cpu: bool) -> tuple[Callable[[], None], Callable[[], None]]:
    if cpu:
        return (lambda: time.sleep(0.002)), (lambda: None)
    import torch

    model = torch.nn.Sequential(*[m for _ in range(4) for m in (
        torch.nn.Linear(width, width), torch.nn.GELU())]).cuda().to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(2048, width, device="cuda", dtype=torch.bfloat16)  # ~3 ms a step on an H100

    def step() -> None:
        loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, torch.cuda.synchronize


def inference(width: int, cpu: bool) -> Callable[[int], None]:
    """One request of `batch` rows, answered (synchronised)."""
    if cpu:
        return lambda batch: time.sleep(0.001)
    import torch

    model = torch.nn.Sequential(*[m for _ in range(6) for m in (
        torch.nn.Linear(width, width), torch.nn.ReLU())]).cuda().to(torch.bfloat16).eval()
    inputs = {b: torch.randn(b, width, device="cuda", dtype=torch.bfloat16) for b in range(1, 9)}

    def answer(batch: int) -> None:
        with torch.inference_mode():
            model(inputs[batch])
        torch.cuda.synchronize()

    return answer


# ---- runs ----------------------------------------------------------------------------------------

def run_loop(step: Callable[[], None], sync: Callable[[], None], k: int, seconds: float,
             stream: bool) -> dict:
    steps, start = 0, time.monotonic()
    until, next_report = start + seconds, start
    try:
        while (now := time.monotonic()) < until:
            for _ in range(k):
                step()
            sync()
            steps += k
            if stream and now >= next_report:
                emit({"t": time.monotonic(), "steps": steps})
                next_report = now + 0.25
    except Exception as exc:  # a CUDA error (e.g. a neighbour's fault under MPS) is a result
        took = time.monotonic() - start
        return {"rate": steps / took, "steps": steps, "seconds": took, "error": _short(exc),
                "error_t": time.monotonic(), "after_error": _after_error(sync)}
    took = time.monotonic() - start
    return {"rate": steps / took, "steps": steps, "seconds": took}


def run_inference(answer: Callable[[int], None], seconds: float, interval_ms: float) -> dict:
    rng = random.Random(0)
    latencies: list[float] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        batch = rng.randint(1, 8)
        t0 = time.perf_counter()
        answer(batch)
        latencies.append((time.perf_counter() - t0) * 1000)
        time.sleep(interval_ms / 1000)
    return {"requests": len(latencies), "p50_ms": pct(latencies, 0.5),
            "p99_ms": pct(latencies, 0.99), "max_ms": max(latencies, default=float("nan")),
            "rate": len(latencies) / seconds}


def run_fault(cpu: bool) -> dict:
    if cpu:
        return {"fault_error": 700, "fault_error_name": "(dry run)", "t": time.monotonic()}
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 6, ctypes.c_uint,
                                    ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.c_void_p]
    def check(what: str, rc: int) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed: {rc} {_error_name(cuda, rc)}")

    check("cuInit", cuda.cuInit(0))
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check("cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(dev), 0))
    check("cuDevicePrimaryCtxRetain", cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check("cuCtxSetCurrent", cuda.cuCtxSetCurrent(ctx))
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    check("cuModuleLoadData", cuda.cuModuleLoadData(ctypes.byref(module), BAD_PTX))
    check("cuModuleGetFunction",
          cuda.cuModuleGetFunction(ctypes.byref(function), module, b"gemini_bad_store"))
    address = ctypes.c_uint64(ILLEGAL_ADDRESS)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(address), ctypes.c_void_p))
    t = time.monotonic()
    launch = cuda.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, params, None)
    synced = cuda.cuCtxSynchronize()
    return {"t": t, "launch_rc": launch, "fault_error": synced,
            "fault_error_name": _error_name(cuda, synced)}


CHUNK_MIB = 256


def run_alloc(mib: int, cpu: bool) -> dict:
    if cpu:
        return {"asked_mib": mib, "allocated_mib": mib, "error": None}
    import torch

    kept, got = [], 0
    try:
        while got + CHUNK_MIB <= mib:
            kept.append(torch.empty(CHUNK_MIB << 20, dtype=torch.uint8, device="cuda"))
            got += CHUNK_MIB
    except Exception as exc:  # the refusal is the result
        return {"asked_mib": mib, "allocated_mib": got, "error": _short(exc)}
    return {"asked_mib": mib, "allocated_mib": got, "error": None}


def _error_name(cuda: ctypes.CDLL, rc: int) -> str:
    name = ctypes.c_char_p()
    if cuda.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode()
    return str(rc)


def _after_error(sync: Callable[[], None]) -> str:
    """Does CUDA still work in this process after the error?  (A fault is sticky.)"""
    try:
        sync()
    except Exception as exc:
        return _short(exc)
    return "ok"


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc) else ''}"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["matmul", "infer", "train", "fault", "alloc"])
    p.add_argument("--mib", type=int, default=1024, help="alloc: MiB to ask for")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--n", type=int, default=4096, help="matmul size / model width")
    p.add_argument("--k", type=int, default=8, help="steps between synchronisations")
    p.add_argument("--interval-ms", type=float, default=5.0, help="infer: between requests")
    p.add_argument("--stream", action="store_true", help="report progress while running")
    p.add_argument("--cpu", action="store_true")
    args = p.parse_args()
    started = time.monotonic()
    try:
        if args.kind == "matmul":
            step, sync = matmul(args.n, args.cpu)
        elif args.kind == "train":
            step, sync = train(args.n, args.cpu)
        elif args.kind == "infer":
            answer = inference(args.n, args.cpu)
            for batch in range(1, 9):  # warm-up: every shape once
                answer(batch)
        elif args.kind == "alloc" and not args.cpu:
            import torch

            torch.zeros(1, device="cuda")  # the context, before "go"
        if args.kind in ("matmul", "train"):
            for _ in range(args.k):
                step()
            sync()
    except Exception as exc:
        emit({"error": _short(exc), "kind": args.kind})
        return 3
    emit({"ready": True, "kind": args.kind, "startup_s": time.monotonic() - started})
    sys.stdin.readline()
    if args.kind == "fault":
        try:
            result = run_fault(args.cpu)
        except Exception as exc:
            result = {"error": _short(exc)}
    elif args.kind == "infer":
        result = run_inference(answer, args.seconds, args.interval_ms)
    elif args.kind == "alloc":
        result = run_alloc(args.mib, args.cpu)
    else:
        result = run_loop(step, sync, args.k, args.seconds, args.stream)
    emit({"kind": args.kind, "n": args.n, **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
