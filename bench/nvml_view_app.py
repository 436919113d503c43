"""What a program inside a Gemini client sees of its GPU, for bench/nvml_view.py (issue 15,
item 1).  Imports nothing from gemini.

  nvml_view_app.py hold --mib N [--fake]      allocate N MiB, print {"ready": ..., "pid": ...},
                                              wait for a line on stdin, exit
  nvml_view_app.py inspect --mib N [--fake]   allocate N MiB, print one JSON line: torch's
                                              mem_get_info, NVML through ctypes (memory v1/v2,
                                              compute processes v3), pynvml's answers when
                                              nvidia-ml-py is installed, and nvidia-smi's
                                              (run from here, so under the same hook)

Memory comes from torch (torch.empty on cuda:0); --fake: from the CUDA driver through ctypes
(the fake driver of the dry run, where torch is not installed).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MiB = 1 << 20
NVML_MEMORY_V2 = 0x02000028  # NVML_STRUCT_VERSION(Memory, 2)
NVML_INSUFFICIENT_SIZE = 7


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ---- allocation --------------------------------------------------------------------------------

class TorchMemory:
    def __init__(self, mib: int) -> None:
        import torch

        self.torch = torch
        self.held = torch.empty(mib * MiB, dtype=torch.uint8, device="cuda:0")
        torch.cuda.synchronize()

    def info(self) -> dict:
        free, total = self.torch.cuda.mem_get_info(0)
        return {"free": free, "total": total, "by": "torch.cuda.mem_get_info"}


class DriverMemory:
    """The CUDA driver through ctypes (the dry run's fake driver)."""

    def __init__(self, mib: int) -> None:
        cu = ctypes.CDLL("libcuda.so.1")
        self.cu = cu
        dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
        for call, args in ((cu.cuInit, (0,)), (cu.cuDeviceGet, (ctypes.byref(dev), 0)),
                           (cu.cuDevicePrimaryCtxRetain, (ctypes.byref(ctx), dev)),
                           (cu.cuCtxSetCurrent, (ctx,)),
                           (cu.cuMemAlloc_v2, (ctypes.byref(ptr), ctypes.c_size_t(mib * MiB)))):
            rc = call(*args)
            if rc != 0:
                raise RuntimeError(f"{call.__name__} failed: {rc}")

    def info(self) -> dict:
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        rc = self.cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
        return {"free": free.value, "total": total.value, "rc": rc, "by": "cuMemGetInfo_v2"}


# ---- NVML through ctypes -------------------------------------------------------------------------

class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_v2_t, what _v3 fills
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def nvml_ctypes() -> dict:
    """As nvidia-ml-py does it: dlopen libnvidia-ml.so.1, dlsym every function."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as exc:
        return {"error": str(exc)}
    rc = nvml.nvmlInit_v2()
    if rc != 0:
        return {"error": f"nvmlInit_v2: {rc}"}
    count = ctypes.c_uint()
    nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
    gpus = []
    for i in range(count.value):
        h = ctypes.c_void_p()
        nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
        uuid = ctypes.create_string_buffer(96)
        nvml.nvmlDeviceGetUUID(h, uuid, 96)
        m1 = Memory()
        rc1 = nvml.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m1))
        m2 = MemoryV2(version=NVML_MEMORY_V2)
        rc2 = nvml.nvmlDeviceGetMemoryInfo_v2(h, ctypes.byref(m2))
        n = ctypes.c_uint(0)
        rcp = nvml.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), None)
        procs: list[list[int]] = []
        if rcp in (0, NVML_INSUFFICIENT_SIZE):
            room = n.value + 8
            arr = (ProcessInfo * room)()
            n = ctypes.c_uint(room)
            rcp = nvml.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), arr)
            procs = [[arr[k].pid, arr[k].usedGpuMemory] for k in range(n.value)] if rcp == 0 else []
        gpus.append({
            "index": i, "uuid": uuid.value.decode(),
            "memory": {"rc": rc1, "total": m1.total, "free": m1.free, "used": m1.used},
            "memory_v2": {"rc": rc2, "total": m2.total, "reserved": m2.reserved,
                          "free": m2.free, "used": m2.used},
            "compute_processes": {"rc": rcp, "procs": procs},
        })
    nvml.nvmlShutdown()
    return {"gpus": gpus}


def nvml_pynvml() -> dict:
    try:
        import pynvml
    except ImportError:
        return {"error": "pynvml (nvidia-ml-py) is not installed"}
    out: dict = {"module": getattr(pynvml, "__file__", "?")}
    try:
        pynvml.nvmlInit()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            m = pynvml.nvmlDeviceGetMemoryInfo(h)
            row: dict = {"index": i, "memory": {"total": m.total, "free": m.free,
                                                 "used": m.used}}
            try:
                m2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
                row["memory_v2"] = {"total": m2.total, "reserved": m2.reserved,
                                    "free": m2.free, "used": m2.used}
            except (AttributeError, TypeError, pynvml.NVMLError) as exc:
                row["memory_v2"] = {"error": str(exc)}
            try:
                row["compute_processes"] = [
                    [p.pid, p.usedGpuMemory]
                    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
            except pynvml.NVMLError as exc:
                row["compute_processes"] = {"error": str(exc)}
            gpus.append(row)
        out["gpus"] = gpus
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        out["error"] = str(exc)
    return out


# ---- nvidia-smi, from inside the client ----------------------------------------------------

QUERIES = {
    "gpu": ["--query-gpu=index,uuid,memory.total,memory.used,memory.free", "--format=csv"],
    "compute_apps": ["--query-compute-apps=pid,used_memory", "--format=csv"],
    "plain": [],
}


def nvidia_smi() -> dict:
    """Each query once, under the hook as this process is; for the record, which NVML
    functions the hook answered in nvidia-smi (GEMINI_HOOK_STATS) and its NVML log lines."""
    out: dict = {}
    for key, args in QUERIES.items():
        with tempfile.NamedTemporaryFile(suffix=".json") as stats:
            env = dict(os.environ, GEMINI_HOOK_STATS=stats.name, GEMINI_LOG="debug")
            try:
                r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True,
                                   timeout=60, env=env)
            except (OSError, subprocess.TimeoutExpired) as exc:
                out[key] = {"error": str(exc)}
                continue
            try:
                calls = json.loads(Path(stats.name).read_text() or "{}")
            except ValueError:
                calls = {}
        out[key] = {
            "rc": r.returncode, "stdout": r.stdout,
            "nvml_calls": {k: v for k, v in calls.items() if k.startswith("nvml") and v},
            "hook_log": [ln for ln in r.stderr.splitlines() if "nvml" in ln.lower()][:40],
        }
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["hold", "inspect"])
    p.add_argument("--mib", type=int, default=512)
    p.add_argument("--fake", action="store_true")
    args = p.parse_args()
    mem = DriverMemory(args.mib) if args.fake else TorchMemory(args.mib)
    if args.mode == "hold":
        emit({"ready": True, "pid": os.getpid()})
        sys.stdin.readline()
        return 0
    emit({"pid": os.getpid(), "allocated": args.mib * MiB, "cuda": mem.info(),
          "nvml": nvml_ctypes(), "pynvml": nvml_pynvml(), "nvidia_smi": nvidia_smi(),
          "env": {k: os.environ.get(k) for k in ("POD_NAME", "POD_MANAGER_PORT",
                                                 "CUDA_VISIBLE_DEVICES")}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
