"""Exploration (not a benchmark): does the driver hand a new stream the handle of one destroyed
before it?  The hook keys each lane's slot (csrc/include/gemini/lanes.h: 64 of them) by its
stream's handle and never gives one back, so a program that makes a stream for each request or
step and destroys it after runs out of slots only where handles do not repeat.  (A thread's
per-thread default stream is keyed by pthread_self, which glibc hands the next thread alike.)

  python3 bench/probe_stream_handles.py [--lib libcuda.so.1] [--rounds 200] [--out DIR]

Through the driver API alone (ctypes, no CUDA runtime), on device 0's primary context: streams
made and destroyed one at a time, then in batches of 8 kept alive together, blocking and
non-blocking; how many distinct handles each pattern met.  On the fake GPU (LD_LIBRARY_PATH at
gemini/native/fake) every stream made after one was destroyed gets its handle (1 distinct in
200 rounds).
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import gpu_name, print_and_write

CU_STREAM_NON_BLOCKING = 1
BATCH = 8


class Driver:
    def __init__(self, lib: str) -> None:
        self.cu = ctypes.CDLL(lib)
        self.check("cuInit", 0)
        dev = ctypes.c_int()
        self.check("cuDeviceGet", ctypes.byref(dev), 0)
        ctx = ctypes.c_void_p()
        self.check("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        self.check("cuCtxSetCurrent", ctx)

    def check(self, name: str, *args: object) -> None:
        rc = getattr(self.cu, name)(*args)
        if rc != 0:
            raise SystemExit(f"{name} failed: CUresult {rc}")

    def create(self, flags: int) -> int:
        s = ctypes.c_void_p()
        self.check("cuStreamCreate", ctypes.byref(s), flags)
        return int(s.value or 0)

    def destroy(self, handle: int) -> None:
        self.check("cuStreamDestroy_v2", ctypes.c_void_p(handle))


def one_at_a_time(drv: Driver, rounds: int, flags: int) -> int:
    seen = set()
    for _ in range(rounds):
        h = drv.create(flags)
        seen.add(h)
        drv.destroy(h)
    return len(seen)


def in_batches(drv: Driver, rounds: int, flags: int) -> int:
    seen = set()
    for _ in range(max(rounds // BATCH, 1)):
        batch = [drv.create(flags) for _ in range(BATCH)]
        seen.update(batch)
        for h in batch:
            drv.destroy(h)
    return len(seen)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default="libcuda.so.1")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    drv = Driver(args.lib)
    out: dict = {"device": gpu_name(), "lib": args.lib, "rounds": args.rounds, "batch": BATCH,
                 "distinct_handles": {}}
    for kind, flags in (("blocking", 0), ("non_blocking", CU_STREAM_NON_BLOCKING)):
        out["distinct_handles"][f"one_at_a_time_{kind}"] = one_at_a_time(drv, args.rounds, flags)
        out["distinct_handles"][f"batches_of_{BATCH}_{kind}"] = in_batches(drv, args.rounds, flags)
    print_and_write(out, args.out, "probe-stream-handles")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
