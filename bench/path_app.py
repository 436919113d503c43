"""One kind of GPU program in a loop, for bench/paths.py (issue 12).  Imports nothing from gemini.

  path_app.py PATH --seconds S [--sync-every-ms 50] [--k K] [--no-wait]

PATH is one of: torch-eager, cuda-graph, triton, jax, launch-bound, torch-compile,
torch-compile-graphs, cupy, torch-threads, graph-launch-bound, torch-eager-spin,
torch-eager-long, torch-train, cupy-streams.  Every kind saturates the GPU
(bf16 where it applies; one step is about 0.5-5 ms on an H100, 11 ms for torch-eager-long), or
its host (the two launch-bound ones).  Work is counted in completed steps: the
program synchronises every k steps, k being calibrated once after warm-up so that k steps take
about --sync-every-ms (or given with --k, so that bare and hooked runs measure the same way).

Protocol (like bench/tenant.py), one JSON line each, flushed:
  stdout  {"ready": true, "path": .., "k": .., "step_ms": .., "startup_s": ..}   after warm-up
  stdin   go START [END]   (time.monotonic() values; END defaults to START + S; with --no-wait:
                           one run at once, S seconds)
  stdout  {"t": START, "steps": 0}, then {"t": monotonic, "steps": n} after every k steps; on
          the torch and CuPy paths one line per step instead, its time the step's end on the
          GPU (a CUDA event after each step, mapped to time.monotonic(): work per second is then
          known to a step, not to k steps, without more synchronisation)
  stdout  {"done": true, "round": i, "steps": n, "t0": .., "t_end": .., ...}   at END
  ... more `go` lines: more measured runs (rounds) in the same process; EOF or `quit` ends it.
On failure (an import missing, no GPU, a CUDA error): {"error": "...", "path": ..} and exit 3.
BENCH_XLA_AUTOTUNE_DIR=DIR (jax): XLA writes each candidate it timed while autotuning, and its
pick, to DIR/autotune-PID.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# cpu: no GPU at all, for dry runs of paths.py
PATHS = ["torch-eager", "cuda-graph", "triton", "jax", "launch-bound", "torch-compile",
         "torch-compile-graphs", "cupy", "torch-threads", "graph-launch-bound",
         "torch-eager-spin", "torch-eager-long", "torch-train", "cupy-streams", "cpu"]
SECONDS = 4.0  # --seconds: a run's length when `go` names no END
N = 4096  # matmul size (bf16/fp16): ~0.2-0.3 ms per matmul on an H100
LONG_N = 16384  # torch-eager-long's: 2 x 16384^3 flop, ~11 ms per matmul on an H200


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ---- the kinds of program ------------------------------------------------------------------------
# Each has step() (queue one step's work) and sync() (wait for everything queued).

class TorchEager:
    """4 matmuls 4096x4096 bf16 per step, on the default stream."""

    def __init__(self, n: int = N) -> None:
        import torch

        self.torch = torch
        torch.manual_seed(0)
        self.a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16) / 64
        self.c = [torch.empty_like(self.a) for _ in range(2)]

    def step(self) -> None:
        mm = self.torch.mm
        mm(self.a, self.b, out=self.c[0])
        mm(self.c[0], self.b, out=self.c[1])
        mm(self.c[1], self.b, out=self.c[0])
        mm(self.c[0], self.b, out=self.c[1])

    def sync(self) -> None:
        self.torch.cuda.synchronize()


class TorchEagerLong(TorchEager):
    """One matmul 16384x16384 bf16 per step: a program of long kernels, whose last kernel in a
    token may run far past it (what the hook's early request is kept for where several
    processes share a token)."""

    def __init__(self) -> None:
        super().__init__(LONG_N)

    def step(self) -> None:
        self.torch.mm(self.a, self.b, out=self.c[0])


class TorchEagerSpin(TorchEager):
    """Torch eager's matmuls, waited for by asking the stream again and again whether it is
    done (cuStreamQuery) instead of synchronising: a program that waits in no blocking call."""

    def sync(self) -> None:
        stream = self.torch.cuda.current_stream()
        while not stream.query():
            pass


def capture(torch, body):  # type: ignore[no-untyped-def]
    """`body` captured in a torch.cuda.CUDAGraph, after three warm-up runs on a side stream (as
    PyTorch asks: the capture must not meet lazy initialisation)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    torch.cuda.synchronize()
    return graph


class CudaGraph(TorchEager):
    """The same 4 matmuls captured once in a torch.cuda.CUDAGraph, replayed per step
    (cuGraphLaunch)."""

    def __init__(self) -> None:
        super().__init__()
        self.graph = capture(self.torch, lambda: TorchEager.step(self))

    def step(self) -> None:
        self.graph.replay()


# Triton's JIT reads the kernel's source and resolves its globals at compile time: the kernel lives
# at module level, `tl` is bound by Triton.__init__ (triton is imported only for that path; the
# annotation stays a string thanks to `from __future__ import annotations`).
tl = None


def _fma_chain(x_ptr, y_ptr, n, iters, a, b, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    for _ in range(iters):
        x = x * a + b
    tl.store(y_ptr + offs, x, mask=mask)


class TorchThreads(TorchEager):
    """The 4 matmuls of torch eager per step, launched 2 each by two threads, each on a
    non-blocking stream of its own; the default stream then waits for both (cuStreamWaitEvent),
    so a step's end is one event there.  Several launching threads and streams: the hook reads
    each stream as one thread sees it (its lanes)."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        torch = self.torch
        self.streams = [torch.cuda.Stream() for _ in range(2)]
        self.outs = [[torch.empty_like(self.a) for _ in range(2)] for _ in range(2)]
        self.go = [threading.Semaphore(0) for _ in range(2)]
        self.queued = threading.Semaphore(0)
        self.failure: BaseException | None = None
        for i in range(2):
            threading.Thread(target=self._launcher, args=(i,), daemon=True,
                             name=f"launcher-{i}").start()

    def _launcher(self, i: int) -> None:
        torch, a, b, c = self.torch, self.a, self.b, self.outs[i]
        while True:
            self.go[i].acquire()
            try:
                with torch.cuda.stream(self.streams[i]):
                    torch.mm(a, b, out=c[0])
                    torch.mm(c[0], b, out=c[1])
            except BaseException as exc:  # handed to step(): the main thread reports it
                self.failure = exc
            self.queued.release()

    def step(self) -> None:
        for go in self.go:
            go.release()
        for _ in self.go:
            self.queued.acquire()
        if self.failure is not None:
            raise self.failure
        current = self.torch.cuda.current_stream()
        for s in self.streams:
            current.wait_stream(s)


class Triton:
    """A Triton FMA-chain kernel (fp32, 8 Mi elements, 2048 FMAs each), 2 launches per step, on
    a user torch stream (non-blocking; Triton launches with cuLaunchKernelEx)."""

    def __init__(self) -> None:
        global tl
        import torch
        import triton
        import triton.language

        tl = triton.language
        self.torch, self.kernel = torch, triton.jit(_fma_chain)
        self.n, self.iters, self.block = 1 << 23, 2048, 1024
        self.grid = (triton.cdiv(self.n, self.block),)
        self.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            self.x = torch.rand(self.n, device="cuda")
            self.y = torch.empty_like(self.x)
        self.stream.synchronize()

    def step(self) -> None:
        with self.torch.cuda.stream(self.stream):
            self.kernel[self.grid](self.x, self.y, self.n, self.iters, 0.999, 0.001,
                                   BLOCK=self.block)
            self.kernel[self.grid](self.y, self.x, self.n, self.iters, 0.999, 0.001,
                                   BLOCK=self.block)

    def sync(self) -> None:
        self.stream.synchronize()


class Jax:
    """A jitted chain of 4 matmuls 4096x4096 bf16 per step (XLA; block_until_ready to sync).
    Preallocation is off (set before jax is imported, in main)."""

    def __init__(self) -> None:
        import jax
        import jax.numpy as jnp

        dev = jax.devices()[0]
        if dev.platform != "gpu":
            raise RuntimeError(f"jax has no GPU backend (device {dev})")
        ka, kb = jax.random.split(jax.random.PRNGKey(0))
        self.a = jax.random.normal(ka, (N, N), dtype=jnp.bfloat16)
        self.b = jax.random.normal(kb, (N, N), dtype=jnp.bfloat16) / 64

        @jax.jit
        def chain(x, b):
            for _ in range(4):
                x = x @ b
            return x

        self.fn = chain
        self.out = chain(self.a, self.b)

    def step(self) -> None:
        self.out = self.fn(self.a, self.b)

    def sync(self) -> None:
        self.out.block_until_ready()


class LaunchBound:
    """200 x `x.add_(1)` on a 256-element tensor per step: the host's launch rate is the limit."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.x = torch.zeros(256, device="cuda")

    def step(self) -> None:
        x = self.x
        for _ in range(200):
            x.add_(1)

    def sync(self) -> None:
        self.torch.cuda.synchronize()


class GraphLaunchBound(LaunchBound):
    """One `x.add_(1)` captured in a torch.cuda.CUDAGraph, replayed 200 times per step: the
    host's rate of graph launches is the limit (what the hook's gate costs a program of tiny
    graphs: while every graph launch took its slow path, 0.43 of bare on the H100)."""

    def __init__(self) -> None:
        super().__init__()
        self.graph = capture(self.torch, lambda: self.x.add_(1))

    def step(self) -> None:
        for _ in range(200):
            self.graph.replay()


def mlp(torch):  # type: ignore[no-untyped-def]
    """4 x Linear 2048 + GELU in bf16 on the GPU, and a batch of 8192 inputs for it."""
    from torch import nn

    torch.manual_seed(0)
    width, batch = 2048, 8192
    layers: list[nn.Module] = []
    for _ in range(4):
        layers += [nn.Linear(width, width), nn.GELU()]
    model = nn.Sequential(*layers).cuda().to(torch.bfloat16)
    return model, torch.randn(batch, width, device="cuda", dtype=torch.bfloat16)


class TorchCompile:
    """torch.compile of an MLP (4 x Linear 2048 + GELU, bf16, batch 8192): forward + backward
    per step (default mode: Triton kernels + cuBLAS; "reduce-overhead": CUDA graphs)."""

    def __init__(self, mode: str | None = None) -> None:
        import torch

        self.torch = torch
        self.model, self.x = mlp(torch)
        model = self.model

        def loss_fn(x):
            return model(x).float().square().mean()

        self.graphs = mode == "reduce-overhead"
        self.fn = torch.compile(loss_fn, mode=mode)

    def step(self) -> None:
        if self.graphs:
            self.torch.compiler.cudagraph_mark_step_begin()
        self.model.zero_grad(set_to_none=True)
        self.fn(self.x).backward()

    def sync(self) -> None:
        self.torch.cuda.synchronize()


class TorchTrain:
    """An eager training step: torch.compile's MLP (4 x Linear 2048 + GELU, bf16, batch 8192)
    run as is, forward + backward + AdamW (foreach): heavy matmuls among light kernels
    (GELU, bias sums, the optimizer's), as most eager PyTorch jobs launch them."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.model, self.x = mlp(torch)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-6, foreach=True)

    def step(self) -> None:
        self.opt.zero_grad(set_to_none=True)
        self.model(self.x).float().square().mean().backward()
        self.opt.step()

    def sync(self) -> None:
        self.torch.cuda.synchronize()


class Cupy:
    """4 CuPy matmuls 4096x4096 fp16 per step (cuBLAS through CuPy; CuPy has no bf16 matmul)."""

    def __init__(self) -> None:
        import cupy

        self.cp = cupy
        rs = cupy.random.RandomState(0)
        self.a = rs.standard_normal((N, N), dtype=cupy.float32).astype(cupy.float16)
        self.b = (rs.standard_normal((N, N), dtype=cupy.float32) / 64).astype(cupy.float16)
        self.c = [cupy.empty_like(self.a) for _ in range(2)]

    def step(self) -> None:
        mm = self.cp.matmul
        mm(self.a, self.b, out=self.c[0])
        mm(self.c[0], self.b, out=self.c[1])
        mm(self.c[1], self.b, out=self.c[0])
        mm(self.c[0], self.b, out=self.c[1])

    def sync(self) -> None:
        self.cp.cuda.Device().synchronize()


class CupyStreams(Cupy):
    """CuPy's 4 matmuls a step, each step on the next of STREAMS streams, all kept: a program
    with more streams than the hook has lanes to tell apart (GEM_LANES, 64), as a server with
    a stream per worker has.  Blocking streams: the legacy default stream, where StepClock's
    events go, waits for them."""

    STREAMS = 96

    def __init__(self) -> None:
        super().__init__()
        self.streams = [self.cp.cuda.Stream() for _ in range(self.STREAMS)]
        self.next = 0

    def step(self) -> None:
        stream = self.streams[self.next]
        self.next = (self.next + 1) % len(self.streams)
        with stream:
            super().step()


class Cpu:
    """No GPU: a step per millisecond of the clock, slept to (dry runs of bench/paths.py's
    orchestration).  Slept, not spun: processes run side by side then each go their own rate
    on a loaded 2-core machine (two spinning ones did 1.3 times one's work together there, not
    2).  Paced by the clock, not by each sleep's length: two processes that slept 1 ms a step
    did 0.50 and 0.52 of their bare rate once in a full `make test`, as if each sleep had
    lasted 2 ms (not seen again in 8 runs beside 2-3 busy loops; cause unknown).  A step late
    by up to CATCH_UP_S is made up at once; a longer pause (a duty cycle's rest, the wait
    between runs) is not."""

    CATCH_UP_S = 0.005

    def __init__(self) -> None:
        self.due = 0.0

    def step(self) -> None:
        now = time.monotonic()
        self.due = max(self.due, now - self.CATCH_UP_S) + 0.001
        if self.due > now:
            time.sleep(self.due - now)

    def sync(self) -> None:
        pass


def make(path: str):
    if path == "torch-eager":
        return TorchEager()
    if path == "cuda-graph":
        return CudaGraph()
    if path == "torch-eager-spin":
        return TorchEagerSpin()
    if path == "torch-eager-long":
        return TorchEagerLong()
    if path == "torch-threads":
        return TorchThreads()
    if path == "triton":
        return Triton()
    if path == "jax":
        return Jax()
    if path == "launch-bound":
        return LaunchBound()
    if path == "graph-launch-bound":
        return GraphLaunchBound()
    if path == "torch-compile":
        return TorchCompile(None)
    if path == "torch-compile-graphs":
        return TorchCompile("reduce-overhead")
    if path == "cupy":
        return Cupy()
    if path == "torch-train":
        return TorchTrain()
    if path == "cupy-streams":
        return CupyStreams()
    if path == "cpu":
        return Cpu()
    raise ValueError(f"unknown path {path!r}")


# ---- the loop ------------------------------------------------------------------------------------

class StepClock:
    """When each step ended on the GPU, from a CUDA event recorded after it (torch and CuPy
    paths; JAX has no events).

    Syncing every k steps tells the work done to k steps; under a cap the k steps of a sample
    may straddle a wait for the token, and the work of one second is then off by up to k steps
    (5 points at k = 50 ms; the highest 1 s window of a 0.4 cap read 0.7-1.6 points high on
    H100 runs of torch eager, CUDA graphs and Triton thinned to every 62nd step, 2026-11-25).
    Events give each step's end without syncing more often."""

    def __init__(self, new_event, elapsed_ms, stream) -> None:  # type: ignore[no-untyped-def]
        self.new_event, self.elapsed_ms, self.stream = new_event, elapsed_ms, stream
        self.pool: list = []
        self.used = 0
        self.ref = new_event()
        self.t_ref = 0.0

    @classmethod
    def of(cls, work) -> StepClock | None:  # type: ignore[no-untyped-def]
        torch = getattr(work, "torch", None)
        if torch is not None:
            return cls(lambda: torch.cuda.Event(enable_timing=True),
                       lambda a, b: a.elapsed_time(b),
                       getattr(work, "stream", None) or torch.cuda.current_stream())
        cp = getattr(work, "cp", None)
        if cp is not None:
            return cls(cp.cuda.Event, cp.cuda.get_elapsed_time, cp.cuda.get_current_stream())
        return None

    def start(self) -> None:
        """Call with the GPU idle: the reference event ends at about the time it is waited for."""
        self.ref.record(self.stream)
        self.ref.synchronize()
        self.t_ref = time.monotonic()

    def mark(self) -> None:
        if self.used == len(self.pool):
            self.pool.append(self.new_event())
        self.pool[self.used].record(self.stream)
        self.used += 1

    def times(self, t_sync: float) -> list[float]:
        """The marked steps' end times (after a sync), oldest first; resets the marks."""
        out = [min(self.t_ref + self.elapsed_ms(self.ref, e) / 1000.0, t_sync)
               for e in self.pool[:self.used]]
        self.used = 0
        return out


def warm_up(work, seconds: float) -> None:
    """A few steps (compiles, captures, autotunes), then steps until `seconds` have passed."""
    for _ in range(3):
        work.step()
        work.sync()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(4):
            work.step()
        work.sync()


def step_ms(work, min_s: float = 0.3) -> float:
    """Milliseconds per step, back to back, over at least `min_s`."""
    n = 4
    while True:
        work.sync()
        t0 = time.perf_counter()
        for _ in range(n):
            work.step()
        work.sync()
        dt = time.perf_counter() - t0
        if dt >= min_s or n >= 1 << 16:
            return dt / n * 1000
        n = max(n * 2, int(n * min_s / max(dt, 1e-6)) + 1)


def next_go() -> tuple[float, float] | None:
    line = sys.stdin.readline().split()
    if not line or line[0] == "quit":
        return None
    if len(line) not in (2, 3) or line[0] != "go":
        raise SystemExit(f"path_app: expected 'go START [END]', got {line!r}")
    start = float(line[1])
    return start, float(line[2]) if len(line) == 3 else start + SECONDS


def measure(work, k: int, start: float, end: float, rnd: int, ms: float, path: str) -> None:
    """One measured run: from START (waited for) until the first sync at or after END."""
    clock = StepClock.of(work)
    while (left := start - time.monotonic()) > 0:
        time.sleep(min(left, 0.02))
    if clock is not None:
        clock.start()
    t0 = time.monotonic()
    emit({"t": round(t0, 6), "steps": 0})
    done = 0
    t = last = t0
    while t < end:
        for _ in range(k):
            work.step()
            if clock is not None:
                clock.mark()
        work.sync()
        t = time.monotonic()
        if clock is None:
            done += k
            emit({"t": round(t, 6), "steps": done})
            continue
        lines = []
        for t_step in clock.times(t):
            done += 1
            last = max(t_step, last)  # monotone, for the readers' interpolation
            lines.append(json.dumps({"t": round(last, 6), "steps": done}))
        sys.stdout.write("\n".join(lines) + "\n")  # one write per sync
        sys.stdout.flush()
    emit({"done": True, "round": rnd, "path": path, "steps": done, "t0": t0, "t_end": t, "k": k,
          "step_ms": round(ms, 4), "steps_per_s": done / (t - t0) if t > t0 else 0.0})


def run(args: argparse.Namespace) -> int:
    global SECONDS
    SECONDS = args.seconds
    t_init = time.perf_counter()
    work = make(args.path)
    dry = args.path == "cpu"  # nothing to compile or tune: the dry runs' processes start at once
    warm_up(work, args.warmup_s if args.warmup_s is not None else 0.0 if dry else 1.0)
    ms = step_ms(work, 0.1 if dry else 0.3)
    k = args.k if args.k > 0 else max(1, round(args.sync_every_ms / max(ms, 1e-3)))
    emit({"ready": True, "path": args.path, "k": k, "step_ms": round(ms, 4),
          "startup_s": round(time.perf_counter() - t_init, 2), "pid": os.getpid()})
    if args.no_wait:
        now = time.monotonic()
        measure(work, k, now, now + args.seconds, 0, ms, args.path)
        return 0
    rnd = 0
    while (go := next_go()) is not None:
        measure(work, k, go[0], go[1], rnd, ms, args.path)
        rnd += 1
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("path", choices=PATHS)
    p.add_argument("--seconds", type=float, default=4.0,
                   help="a measured run's length (when `go` names no END)")
    p.add_argument("--sync-every-ms", type=float, default=50.0,
                   help="calibrate k so that k steps take about this long")
    p.add_argument("--k", type=int, default=0, help="steps between syncs (skip calibration)")
    p.add_argument("--warmup-s", type=float, default=None,
                   help="seconds of warm-up steps (default: 1, the cpu kind 0)")
    p.add_argument("--no-wait", action="store_true", help="start at once, no 'go' on stdin")
    args = p.parse_args(argv)
    if args.path == "jax":
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.2")
        if tune_dir := os.environ.get("BENCH_XLA_AUTOTUNE_DIR"):
            # every candidate XLA timed while autotuning, and its pick, one file a process
            os.makedirs(tune_dir, exist_ok=True)
            log = os.path.join(tune_dir, f"autotune-{os.getpid()}.txt")
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                       + f" --xla_gpu_dump_autotune_logs_to={log}").strip()
    if args.path.startswith("torch-compile"):
        # no compile worker subprocesses (they would run under the hook too)
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    try:
        return run(args)
    except ImportError as exc:
        emit({"error": f"import failed: {exc}", "path": args.path, "kind": "import"})
        return 3
    except Exception as exc:
        emit({"error": f"{type(exc).__name__}: {exc}"[:1500], "path": args.path})
        return 3


if __name__ == "__main__":
    sys.exit(main())
