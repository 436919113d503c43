"""What a memory pool keeps after its frees, against the memory limit (a real GPU).

  python3 bench/pool_reserve.py [--limit-gib 4] [--out DIR]

PyTorch with its cudaMallocAsync backend (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,
which raises its pool's release threshold to keep everything) allocates 3 GiB, frees it and
synchronises; the pool keeps the 3 GiB.  Then the same process asks the driver for 3 GiB
more through plain cuMemAlloc (ctypes), allocates 3 GiB through PyTorch again (from the
pool's reserve), calls torch.cuda.empty_cache() (which trims the pool), and asks for the
plain 3 GiB again.  Then a fragmented reserve: three 1 GiB tensors, the first and last
freed, 2 GiB asked (does the pool serve it from its two 1 GiB holes, or grow?).  At each step
it reads the card's used memory from nvidia-smi (run without the hook; the CUDA context's
own memory is left out), the pool's reserve (cuMemPoolGetAttribute), and what
cudaMemGetInfo says is used (under the hook: what the hook counts against the limit).  Run
bare, then under the hook as a client of --limit-gib: under the hook the plain 3 GiB beside
the kept reserve is refused (the card would hold 6 GiB), the rest is not.  One JSON file in
--out.
Imports nothing from gemini (bench/common.py starts the daemons).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

GIB = 1 << 30
RESERVED_MEM_CURRENT = 5  # CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT


def card_used_mib() -> int:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def app() -> int:
    import torch

    cu = ctypes.CDLL("libcuda.so.1")
    steps: list[dict] = []
    torch.cuda.init()
    torch.cuda.synchronize()
    base = card_used_mib()  # the context's own memory: not an allocation

    def pool_reserved() -> int:
        pool, dev, v = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_uint64()
        cu.cuCtxGetDevice(ctypes.byref(dev))
        cu.cuDeviceGetMemPool(ctypes.byref(pool), dev)
        cu.cuMemPoolGetAttribute(pool, RESERVED_MEM_CURRENT, ctypes.byref(v))
        return v.value >> 20

    def step(name: str, **what: object) -> None:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        steps.append({"step": name, **what, "pool_reserved_mib": pool_reserved(),
                      "card_used_mib": card_used_mib() - base,
                      "meminfo_used_mib": (total - free) >> 20})

    def plain(name: str, gib: int) -> None:
        p = ctypes.c_uint64()
        rc = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(gib * GIB))
        step(name, rc=rc)
        if rc == 0:
            cu.cuMemFree_v2(p)

    def tensor(name: str, gib: int) -> None:
        try:
            x = torch.empty(gib * GIB, dtype=torch.uint8, device="cuda")
            step(name, ok=True)
            del x
        except torch.OutOfMemoryError as exc:
            step(name, ok=False, error=str(exc)[:200])

    x = torch.empty(3 * GIB, dtype=torch.uint8, device="cuda")
    step("torch 3 GiB")
    del x
    step("torch freed it")
    plain("cuMemAlloc 3 GiB beside the pool", 3)
    tensor("torch 3 GiB again", 3)
    torch.cuda.empty_cache()
    step("empty_cache")
    plain("cuMemAlloc 3 GiB after empty_cache", 3)
    a, b, c = (torch.empty(GIB, dtype=torch.uint8, device="cuda") for _ in range(3))
    step("torch three 1 GiB")
    del a, c
    step("torch freed the first and last")
    tensor("torch 2 GiB beside the holes", 2)
    del b
    torch.cuda.empty_cache()
    step("empty_cache again")
    backend = torch.cuda.get_allocator_backend()
    print(json.dumps({"allocator": backend, "torch": torch.__version__, "steps": steps}),
          flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--app", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--limit-gib", type=int, default=4)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = p.parse_args(argv)
    if args.app:
        return app()
    from common import Backend, Client, Procs, base_env, gpu_name, print_and_write, run_app

    env = {**base_env(), "PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    argv_app = [sys.executable, str(Path(__file__).resolve()), "--app"]
    out: dict = {"device": gpu_name(), "limit_gib": args.limit_gib}
    with Procs() as procs:
        out["bare"] = run_app(procs, argv_app, env, "bare", 120)
        backend = Backend(procs, [Client("pool", 1.0, 1.0, args.limit_gib * GIB)], tag="pool")
        try:
            out["hook"] = run_app(procs, argv_app, {**env, **backend.hook_env("pool")}, "hook",
                                  120)
        finally:
            backend.stop()
    print_and_write(out, args.out, "pool-reserve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
