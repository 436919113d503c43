"""CuPy against the memory limit (validate_hook check 2, S7).  Run under the hook.

  cupy_mem.py --limit BYTES [--over-gib 6]
1. cudaMemGetInfo total == the limit;
2. cupy.empty beyond the limit -> cupy.cuda.memory.OutOfMemoryError;
3. the default pool filled in 256 MiB pieces: bytes granted never beyond the limit;
4. cudaMallocFromPoolAsync on an explicit pool beyond the limit -> cudaErrorMemoryAllocation (2)
   (CuPy's runtime.memPoolCreate/mallocFromPoolAsync; else the driver's cuMemPoolCreate +
   cuMemAllocFromPoolAsync through ctypes, whose CUDA_ERROR_OUT_OF_MEMORY is also 2).
One JSON line on stdout.  Imports nothing from gemini.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys

import cupy

GIB = 1 << 30
PIECE = 256 << 20


def exc_name(exc: BaseException) -> str:
    t = type(exc)
    return f"{t.__module__}.{t.__qualname__}"


def pool_via_cupy(size: int) -> dict:
    rt = cupy.cuda.runtime
    props = rt.MemPoolProps(rt.cudaMemAllocationTypePinned, rt.cudaMemHandleTypeNone,
                            rt.cudaMemLocationTypeDevice, 0)
    pool = rt.memPoolCreate(props)
    stream = cupy.cuda.Stream(non_blocking=True)
    try:
        ptr = rt.mallocFromPoolAsync(size, pool, stream.ptr)
        stream.synchronize()
        rt.freeAsync(ptr, stream.ptr)
        stream.synchronize()
        return {"pool_api": "cupy.runtime", "pool_over_rc": 0}
    except rt.CUDARuntimeError as exc:
        return {"pool_api": "cupy.runtime", "pool_over_rc": int(exc.status)}
    finally:
        rt.memPoolDestroy(pool)


def pool_via_driver(size: int) -> dict:
    cu = ctypes.CDLL("libcuda.so.1")
    props = (ctypes.c_ubyte * 128)()  # CUmemPoolProps (88 bytes), zero-filled
    ints = ctypes.cast(props, ctypes.POINTER(ctypes.c_int))
    ints[0] = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
    ints[1] = 0  # no handle type
    ints[2] = 1  # CU_MEM_LOCATION_TYPE_DEVICE
    ints[3] = 0  # device 0
    pool = ctypes.c_void_p()
    rc = cu.cuMemPoolCreate(ctypes.byref(pool), props)
    if rc != 0:
        return {"pool_api": "driver.ctypes", "pool_create_rc": rc}
    ptr = ctypes.c_uint64()
    rc = cu.cuMemAllocFromPoolAsync(ctypes.byref(ptr), ctypes.c_size_t(size), pool, None)
    cu.cuStreamSynchronize(None)
    if rc == 0:
        cu.cuMemFreeAsync(ptr, None)
        cu.cuStreamSynchronize(None)
    cu.cuMemPoolDestroy(pool)
    return {"pool_api": "driver.ctypes", "pool_over_rc": rc}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--limit", type=int, default=4 * GIB)
    p.add_argument("--over-gib", type=float, default=6.0)
    args = p.parse_args(argv)
    out: dict = {"cupy": cupy.__version__}
    free, total = cupy.cuda.runtime.memGetInfo()
    out.update(mem_free=free, mem_total=total, total_is_limit=total == args.limit)
    over = int(args.over_gib * GIB)
    try:
        a = cupy.empty(over, dtype=cupy.uint8)
        out.update(oom_raised=False, oom_exception="")
        del a
    except Exception as exc:
        out.update(oom_raised=isinstance(exc, cupy.cuda.memory.OutOfMemoryError),
                   oom_exception=exc_name(exc))
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    pieces = []
    stop = ""
    try:
        while len(pieces) * PIECE < 1.5 * args.limit:
            pieces.append(cupy.empty(PIECE, dtype=cupy.uint8))
    except Exception as exc:
        stop = exc_name(exc)
    granted = len(pieces) * PIECE
    out.update(fill_pieces=len(pieces), fill_bytes=granted, fill_stop=stop,
               escaped_bytes=max(0, granted - args.limit))
    del pieces
    pool.free_all_blocks()
    try:
        out.update(pool_via_cupy(over))
    except Exception as exc:
        out["pool_cupy_error"] = f"{exc_name(exc)}: {exc}"[:200]
        try:
            out.update(pool_via_driver(over))
        except Exception as exc2:
            out["pool_error"] = f"{exc_name(exc2)}: {exc2}"[:200]
    out["pool_refused_ok"] = out.get("pool_over_rc") == 2
    try:
        x = cupy.ones(1 << 20, dtype=cupy.float32)
        out["usable_after"] = float(x.sum()) == float(1 << 20)
    except Exception as exc:
        out.update(usable_after=False, usable_error=exc_name(exc))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
