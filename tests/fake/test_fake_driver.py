"""The fake CUDA driver itself: lookups like the real driver, one simulated GPU shared by all
processes, memory limits, cleanup after SIGKILL, events, fault injection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from gemini import native

from .conftest import FakeGpu, control_cdef

CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NOT_FOUND = 500
CUDA_ERROR_NOT_READY = 600
PER_THREAD = 2  # CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
SUCCESS, SYMBOL_NOT_FOUND, VERSION_NOT_SUFFICIENT = 0, 1, 2
MIB = 1 << 20
PROGRAMS = ["gem_client", "direct_client"]


# ---- exports and cuGetProcAddress ----------------------------------------------------------

EXPORTED = """
cuInit cuDriverGetVersion cuDeviceGet cuDeviceGetCount cuDeviceGetName cuDeviceTotalMem_v2
cuDeviceGetAttribute cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRelease_v2 cuCtxCreate_v4
cuDevicePrimaryCtxReset_v2 cuDevicePrimaryCtxGetState
cuCtxSetCurrent cuCtxGetCurrent cuCtxGetDevice cuCtxSynchronize cuCtxPushCurrent_v2
cuCtxPopCurrent_v2 cuModuleLoadData cuModuleGetFunction cuLaunchKernel cuLaunchKernel_ptsz
cuLaunchKernelEx cuLaunchKernelEx_ptsz cuLaunchCooperativeKernel cuLaunchCooperativeKernel_ptsz
cuGraphLaunch cuGraphLaunch_ptsz cuStreamCreate cuStreamDestroy_v2 cuStreamSynchronize
cuStreamSynchronize_ptsz cuStreamQuery cuStreamBeginCapture_v2 cuStreamEndCapture
cuGraphInstantiateWithFlags cuGraphDestroy cuGraphExecDestroy cuEventCreate cuEventRecord
cuEventRecord_ptsz cuEventSynchronize cuEventQuery cuEventElapsedTime cuEventElapsedTime_v2
cuEventDestroy_v2 cuMemAlloc_v2 cuMemFree_v2 cuMemAllocPitch_v2 cuMemAllocManaged cuMemAllocAsync
cuMemAllocAsync_ptsz cuMemAllocFromPoolAsync cuMemAllocFromPoolAsync_ptsz cuMemFreeAsync
cuMemFreeAsync_ptsz cuMemPoolCreate cuMemPoolDestroy cuMemCreate cuMemRelease cuMemAddressReserve
cuMemAddressFree cuMemMap cuMemUnmap cuMemSetAccess cuMemGetAllocationGranularity cuArrayCreate_v2
cuArray3DCreate_v2 cuArrayDestroy cuMipmappedArrayCreate cuMipmappedArrayDestroy cuMemGetInfo_v2
cuMemcpyHtoD_v2 cuMemcpyDtoH_v2 cuMemcpy cuMemcpyHtoDAsync_v2 cuMemcpyDtoHAsync_v2
cuMemPrefetchAsync_v2 cuGetErrorString cuGetErrorName cuGetProcAddress cuGetProcAddress_v2
""".split()  # noqa: SIM905 (the list from the brief, as written)


def test_exports_every_driver_name(fake_built: Any) -> None:
    # In a child interpreter: dlopen-ing a "libcuda.so.1" here would linger for later tests.
    code = textwrap.dedent(f"""
        import ctypes, sys
        lib = ctypes.CDLL({str(fake_built)!r})
        missing = [n for n in sys.argv[1:] if not hasattr(lib, n)]
        print(" ".join(missing))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code, *EXPORTED], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


# (base name, version, flags) -> exported function it resolves to (None: not found + status)
LOOKUPS = [
    ("cuMemAlloc", 3020, 0, "cuMemAlloc_v2"),
    ("cuMemAlloc", 12000, PER_THREAD, "cuMemAlloc_v2"),
    ("cuMemGetInfo", 3020, 0, "cuMemGetInfo_v2"),
    ("cuDeviceTotalMem", 3020, 0, "cuDeviceTotalMem_v2"),
    ("cuStreamDestroy", 4000, 0, "cuStreamDestroy_v2"),
    ("cuEventElapsedTime", 12000, 0, "cuEventElapsedTime"),
    ("cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2"),
    ("cuGetProcAddress", 11030, 0, "cuGetProcAddress"),
    ("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"),
    ("cuLaunchKernel", 4000, 0, "cuLaunchKernel"),
    ("cuLaunchKernel", 12000, 0, "cuLaunchKernel"),
    ("cuLaunchKernel", 7000, PER_THREAD, "cuLaunchKernel_ptsz"),
    ("cuLaunchKernel", 4000, PER_THREAD, "cuLaunchKernel"),  # no per-thread variant that old
    ("cuLaunchKernelEx", 11060, PER_THREAD, "cuLaunchKernelEx_ptsz"),
    ("cuLaunchCooperativeKernel", 9000, PER_THREAD, "cuLaunchCooperativeKernel_ptsz"),
    ("cuGraphLaunch", 10000, 0, "cuGraphLaunch"),
    ("cuGraphLaunch", 10000, PER_THREAD, "cuGraphLaunch_ptsz"),
    ("cuStreamSynchronize", 7000, PER_THREAD, "cuStreamSynchronize_ptsz"),
    ("cuEventRecord", 12000, PER_THREAD, "cuEventRecord_ptsz"),
    ("cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2"),
    ("cuMemAllocAsync", 11020, PER_THREAD, "cuMemAllocAsync_ptsz"),
    ("cuMemcpyHtoD", 7000, PER_THREAD, "cuMemcpyHtoD_v2_ptds"),
    ("cuMemPrefetchAsync", 12020, 0, "cuMemPrefetchAsync_v2"),
    ("cuCtxSynchronize", 12000, 0, "cuCtxSynchronize"),
    ("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2"),
    ("cuCtxCreate", 12050, 0, "cuCtxCreate_v4"),
]


@pytest.mark.parametrize(("name", "version", "flags", "expected"), LOOKUPS)
def test_get_proc_address_by_name_version_flags(
    control: Any, name: str, version: int, flags: int, expected: str
) -> None:
    ffi, lib = control
    pfn = ffi.new("void **")
    status = ffi.new("int *", -1)
    assert lib.cuGetProcAddress_v2(name.encode(), pfn, version, flags, status) == 0
    assert status[0] == SUCCESS
    assert pfn[0] == _address(ffi, expected)
    # The CUDA 11 four-argument entry point answers the same.
    pfn4 = ffi.new("void **")
    assert lib.cuGetProcAddress(name.encode(), pfn4, version, flags) == 0
    assert pfn4[0] == pfn[0]


_FFI_ADDR: dict[str, Any] = {}


def _address(ffi: Any, exported: str) -> Any:
    """Address of an exported function, through a second handle declaring it."""
    from cffi import FFI

    if exported not in _FFI_ADDR:
        f = FFI()
        f.cdef(f"void {exported}(void);")
        lib = f.dlopen(str(native.fake_driver_dir() / "libcuda.so.1"))
        _FFI_ADDR[exported] = int(f.cast("uintptr_t", f.addressof(lib, exported)))
        f.dlclose(lib)
    return ffi.cast("void *", _FFI_ADDR[exported])


@pytest.mark.parametrize(
    ("name", "version", "status"),
    [
        ("cuNoSuchFunction", 12000, SYMBOL_NOT_FOUND),
        ("cuMemAlloc", 2000, VERSION_NOT_SUFFICIENT),
        ("cuLaunchKernelEx", 11000, VERSION_NOT_SUFFICIENT),
    ],
)
def test_get_proc_address_failures(control: Any, name: str, version: int, status: int) -> None:
    ffi, lib = control
    pfn = ffi.new("void **", ffi.cast("void *", 1))
    st = ffi.new("int *", -1)
    assert lib.cuGetProcAddress_v2(name.encode(), pfn, version, 0, st) == CUDA_ERROR_NOT_FOUND
    assert st[0] == status
    assert pfn[0] == ffi.NULL


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("ptsz", [False, True])
@pytest.mark.parametrize(
    ("launch", "symbol"),
    [
        ("kernel", "cuLaunchKernel"),
        ("ex", "cuLaunchKernelEx"),
        ("coop", "cuLaunchCooperativeKernel"),
        ("graph", "cuGraphLaunch"),
    ],
)
def test_clients_reach_the_variant_they_ask_for(
    gpu: FakeGpu, program: str, ptsz: bool, launch: str, symbol: str
) -> None:
    args = ["work", "--kernel-ms", "0.01", "--burst", "3", "--bursts", "2", "--launch", launch]
    r = gpu.run1(program, *args, *(["--ptsz"] if ptsz else []))
    assert r["rc"] == 0 and r["kernels"] == 6
    pid = r["pid"]
    count = gpu.lib.fake_pid_call_count
    chosen, other = (f"{symbol}_ptsz", symbol) if ptsz else (symbol, f"{symbol}_ptsz")
    assert count(pid, chosen.encode()) == (2 if launch == "graph" else 6)
    assert count(pid, other.encode()) == 0
    sync = "cuStreamSynchronize_ptsz" if ptsz else "cuStreamSynchronize"
    assert count(pid, sync.encode()) == 2
    if program == "gem_client":  # everything came through cuGetProcAddress_v2
        assert count(pid, b"cuGetProcAddress_v2") > 40
    else:
        assert count(pid, b"cuGetProcAddress_v2") == 0
    assert gpu.lib.fake_pid_kernels(pid) == 6


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("ptsz", [False, True])
def test_all_paths(gpu: FakeGpu, program: str, ptsz: bool) -> None:
    r = gpu.run1(program, "all-paths", *(["--ptsz"] if ptsz else []))
    assert r["rc"] == 0, r
    bad = {k: v for k, v in r["calls"].items() if v not in (0, CUDA_ERROR_NOT_READY)}
    assert bad == {}
    assert r["mem_free"] == r["mem_total"] == r["device_total"] == gpu.lib.fake_mem_total(0)
    assert gpu.mem_used() == 0


# ---- the shared timeline ----------------------------------------------------------------------


def test_kernel_time_is_accounted_and_waited_for(gpu: FakeGpu) -> None:
    r = gpu.run1(
        "direct_client",
        "work",
        "--kernel-ms",
        "5",
        "--burst",
        "4",
        "--bursts",
        "5",
        env={"POD_NAME": "solo"},
    )
    assert r["rc"] == 0 and r["kernels"] == 20 and r["gpu_ms"] == pytest.approx(100)
    assert r["wall_s"] >= 0.099  # synchronisation really waited
    assert gpu.lib.fake_pid_gpu_ns(r["pid"]) == 100_000_000
    assert gpu.lib.fake_client_gpu_ns(b"solo") == 100_000_000
    assert gpu.lib.fake_client_kernels(b"solo") == 20
    assert gpu.lib.fake_dev_busy_ns(0) == 100_000_000


@pytest.mark.parametrize("launch", ["kernel", "graph"])
def test_event_elapsed_time_matches_kernel_durations(gpu: FakeGpu, launch: str) -> None:
    r = gpu.run1(
        "gem_client",
        "work",
        "--kernel-ms",
        "4",
        "--burst",
        "5",
        "--bursts",
        "4",
        "--sync",
        "event",
        "--launch",
        launch,
    )
    assert r["rc"] == 0 and r["gpu_ms"] == pytest.approx(80)
    # Events time the GPU, not the host: only launch overheads may add to the 80 ms (and a host
    # stalled between two of a burst's launches: room for 10 ms in each of the four).
    assert 80 <= r["event_ms"] <= 80 * 1.5


def test_ctx_sync_waits_for_the_process(gpu: FakeGpu) -> None:
    r = gpu.run1(
        "gem_client", "work", "--kernel-ms", "20", "--burst", "3", "--bursts", "2", "--sync", "ctx"
    )
    assert r["rc"] == 0 and r["wall_s"] >= 0.119


def test_two_processes_share_one_timeline(gpu: FakeGpu) -> None:
    seconds = 1.2
    args = ["work", "--kernel-ms", "10", "--burst", "5", "--seconds", str(seconds)]
    a = gpu.spawn("gem_client", *args, env={"POD_NAME": "a"})
    b = gpu.spawn("direct_client", *args, env={"POD_NAME": "b"})
    ra, rb = (_last_json(p) for p in (a, b))
    assert ra["rc"] == rb["rc"] == 0
    wall = max(ra["wall_s"], rb["wall_s"])
    total = ra["gpu_ms"] + rb["gpu_ms"]
    # One GPU: together they fill about the wall time, never more, and each gets about half.
    assert total / 1000 <= wall * 1.02
    assert total / 1000 >= wall * 0.75
    for r in (ra, rb):
        assert r["gpu_ms"] / 1000 / r["wall_s"] < 0.75
    assert gpu.lib.fake_client_gpu_ns(b"a") == pytest.approx(ra["gpu_ms"] * 1e6)
    assert gpu.lib.fake_client_gpu_ns(b"b") == pytest.approx(rb["gpu_ms"] * 1e6)


def test_alone_a_process_gets_the_whole_gpu(gpu: FakeGpu) -> None:
    r = gpu.run1("gem_client", "work", "--kernel-ms", "10", "--burst", "5", "--seconds", "0.4")
    assert r["gpu_ms"] / 1000 / r["wall_s"] > 0.85


def test_progress_lines(gpu: FakeGpu) -> None:
    lines = gpu.run(
        "gem_client",
        "work",
        "--kernel-ms",
        "5",
        "--burst",
        "2",
        "--seconds",
        "0.25",
        "--report-every",
        "0.05",
    )
    progress = [x for x in lines if x.get("progress")]
    assert len(progress) >= 3
    assert all(x["kernels"] > 0 for x in progress)
    assert "progress" not in lines[-1] and lines[-1]["rc"] == 0


def test_fork_work_runs_in_both_processes(gpu: FakeGpu) -> None:
    lines = gpu.run("gem_client", "fork-work", "--kernel-ms", "2", "--burst", "2", "--bursts", "5")
    assert len(lines) == 2 and all(x["rc"] == 0 for x in lines)
    pids = {x["pid"] for x in lines}
    assert len(pids) == 2
    assert all(gpu.lib.fake_pid_gpu_ns(p) == 20_000_000 for p in pids)


# ---- memory ----------------------------------------------------------------------------------

ALLOC_PATHS = ["alloc", "pitch", "managed", "async", "pool", "vmm", "array", "array3d", "mipmapped"]


@pytest.mark.parametrize("path", ALLOC_PATHS)
def test_memory_limit_on_every_path(gpu: FakeGpu, path: str) -> None:
    gpu.lib.fake_set_mem_total(0, 256 * MIB)
    holder = gpu.spawn(
        "direct_client", "alloc", "--bytes", str(160 * MIB), "--hold", stdin=subprocess.PIPE
    )
    first = _json_line(holder)
    assert first["rc"] == 0 and first["mem_free"] == 96 * MIB
    too_big = gpu.run("gem_client", "alloc", "--path", path, "--bytes", str(128 * MIB))
    assert too_big[0]["rc"] == CUDA_ERROR_OUT_OF_MEMORY
    fits = gpu.run("gem_client", "alloc", "--path", path, "--bytes", str(64 * MIB))
    assert fits[0]["rc"] == 0
    assert fits[0]["mem_free"] <= 32 * MIB
    assert fits[1]["free_rc"] == 0 and fits[1]["mem_free"] == 96 * MIB
    assert gpu.mem_used() == 160 * MIB
    _release(holder)
    assert gpu.mem_used() == 0


POOL_MODEL = textwrap.dedent("""
    import ctypes as C, json, sys
    cu = C.CDLL("libcuda.so.1")
    MIB, THRESHOLD, RESERVED, USED = 1 << 20, 4, 5, 7  # CU_MEMPOOL_ATTR_*
    assert cu.cuInit(0) == 0
    ctx, pool, p = C.c_void_p(), C.c_void_p(), C.c_uint64()
    assert cu.cuDevicePrimaryCtxRetain(C.byref(ctx), 0) == 0 and cu.cuCtxSetCurrent(ctx) == 0
    assert cu.cuDeviceGetMemPool(C.byref(pool), 0) == 0
    keep = C.c_uint64(int(sys.argv[1], 0))
    assert cu.cuMemPoolSetAttribute(pool, THRESHOLD, C.byref(keep)) == 0
    def seen(step):
        free, total, v = C.c_size_t(), C.c_size_t(), C.c_uint64()
        assert cu.cuMemGetInfo_v2(C.byref(free), C.byref(total)) == 0
        row = {"device": (total.value - free.value) // MIB}
        for name, attr in (("reserved", RESERVED), ("used", USED)):
            assert cu.cuMemPoolGetAttribute(pool, attr, C.byref(v)) == 0
            row[name] = v.value // MIB
        print(json.dumps({step: row}))
    for _ in range(2):  # the second allocation comes from the reserve, where it was kept
        assert cu.cuMemAllocAsync(C.byref(p), C.c_size_t(64 * MIB), None) == 0
        seen("allocated")
        assert cu.cuMemFreeAsync(p, None) == 0
        seen("freed")
        assert cu.cuStreamSynchronize(None) == 0
        seen("synced")
    assert cu.cuMemPoolTrimTo(pool, C.c_size_t(16 * MIB)) == 0
    seen("trimmed")
""")


@pytest.mark.parametrize(("threshold", "after_sync"), [("0xffffffffffffffff", 64), ("0", 0)])
def test_a_memory_pool_keeps_what_is_freed_until_a_sync_or_a_trim(
    gpu: FakeGpu, threshold: str, after_sync: int
) -> None:
    """As the driver's pools do: a free goes back to the pool, which gives the device back what
    is over its release threshold at the next sync, or at cuMemPoolTrimTo."""
    p = subprocess.run([sys.executable, "-c", POOL_MODEL, threshold], env=gpu.env,
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    steps = [json.loads(line) for line in p.stdout.splitlines()]
    kept = {"device": after_sync, "reserved": after_sync, "used": 0}
    assert steps == 2 * [{"allocated": {"device": 64, "reserved": 64, "used": 64}},
                         {"freed": {"device": 64, "reserved": 64, "used": 0}},
                         {"synced": kept}] + [
        {"trimmed": {**kept, "device": min(after_sync, 16), "reserved": min(after_sync, 16)}}]
    assert gpu.mem_used() == 0


def test_meminfo_tells_the_simulated_truth(gpu: FakeGpu) -> None:
    gpu.lib.fake_set_mem_total(0, 1 << 30)
    r = gpu.run1("gem_client", "meminfo")
    assert r == {**r, "free": 1 << 30, "total": 1 << 30, "device_total": 1 << 30, "rc": 0}


def test_memory_of_a_killed_holder_comes_back(gpu: FakeGpu) -> None:
    holder = gpu.spawn(
        "gem_client",
        "alloc",
        "--path",
        "vmm",
        "--bytes",
        str(64 * MIB),
        "--hold",
        stdin=subprocess.PIPE,
    )
    assert _json_line(holder)["rc"] == 0
    assert gpu.mem_used() == 64 * MIB
    assert gpu.lib.fake_pid_mem_used(holder.pid, 0) == 64 * MIB
    holder.kill()
    _wait_zombie(holder.pid)  # not reaped yet: a dead process all the same
    assert gpu.mem_used() == 0  # noticed by the next look
    holder.wait()
    assert gpu.run1("gem_client", "meminfo")["free"] == gpu.lib.fake_mem_total(0)


def test_a_process_killed_holding_the_lock_does_not_wedge_others(gpu: FakeGpu) -> None:
    code = textwrap.dedent(f"""
        from cffi import FFI
        ffi = FFI()
        ffi.cdef({control_cdef()!r})
        lib = ffi.dlopen({str(native.fake_driver_dir() / "libcuda.so.1")!r})
        assert lib.fake_attach({gpu.segment!r}.encode()) == 0
        lib.fake_debug_hold_lock(1, 60 * 10**9)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "L\n"
        p.kill()
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
    assert gpu.run1("direct_client", "meminfo")["rc"] == 0
    assert gpu.mem_used() == 0


def test_fail_next_injects_one_failure(gpu: FakeGpu) -> None:
    assert gpu.lib.fake_fail_next(b"cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY) == 0
    assert gpu.run("direct_client", "alloc")[0]["rc"] == CUDA_ERROR_OUT_OF_MEMORY
    assert gpu.run("direct_client", "alloc")[0]["rc"] == 0
    assert gpu.lib.fake_fail_next(b"cuNoSuchThing", 1) == -1


# ---- helpers ---------------------------------------------------------------------------------


def _json_line(p: subprocess.Popen[str]) -> dict[str, Any]:
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line, p.stderr.read() if p.stderr else ""
    return json.loads(line)


def _wait_zombie(pid: int) -> None:
    """Block until the process has exited, leaving it unreaped (a zombie)."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def _last_json(p: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _release(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None
    p.stdin.write("\n")
    p.stdin.flush()
    p.communicate(timeout=10)


@pytest.mark.parametrize("launch", ["kernel", "graph"])
def test_the_queue_is_bounded_like_a_real_gpu(gpu: FakeGpu, launch: str) -> None:
    # 2000 kernels of 0.1 ms: at most ~1024 may be in flight, so launching them must wait for
    # roughly the first ~976 to finish (about 98 ms); unbounded, it would take ~1 ms.
    r = gpu.run1(
        "gem_client", "work", "--kernel-ms", "0.1", "--burst", "2000", "--bursts", "1",
        "--launch", launch,
    )  # fmt: skip
    assert r["rc"] == 0 and r["kernels"] == 2000
    assert r["launch_s"] >= 0.08
    assert r["wall_s"] >= 0.199


def test_other_kernels_take_the_default_duration(gpu: FakeGpu) -> None:
    r = gpu.run1(
        "direct_client", "work", "--kernel-name", "matmul", "--burst", "10", "--bursts", "1",
        env={"GEMINI_FAKE_KERNEL_NS": "2000000"},
    )  # fmt: skip
    assert r["rc"] == 0
    assert gpu.lib.fake_pid_gpu_ns(r["pid"]) == 20_000_000
    gpu.lib.fake_set_kernel_ns(3000)
    r = gpu.run1(
        "direct_client", "work", "--kernel-name", "matmul", "--burst", "10", "--bursts", "1"
    )
    assert gpu.lib.fake_pid_gpu_ns(r["pid"]) == 30_000


def test_devices_have_their_own_memory_and_timeline(gpu: FakeGpu) -> None:
    two = {"GEMINI_FAKE_DEVICES": "2"}
    info = gpu.run1("gem_client", "meminfo", "--device", "1", env=two)
    assert info["devices"] == 2 and info["driver_version"] == 13000 and info["rc"] == 0
    gpu.lib.fake_set_mem_total(1, 64 * MIB)
    assert (
        gpu.run("gem_client", "alloc", "--device", "1", "--bytes", str(65 * MIB), env=two)[0]["rc"]
        == CUDA_ERROR_OUT_OF_MEMORY
    )
    assert gpu.run("gem_client", "alloc", "--bytes", str(65 * MIB), env=two)[0]["rc"] == 0
    args = ["work", "--kernel-ms", "1", "--burst", "5", "--bursts", "1", "--device", "1"]
    assert gpu.run1("gem_client", *args, env=two)["rc"] == 0
    assert gpu.lib.fake_dev_busy_ns(1) == 5_000_000 and gpu.lib.fake_dev_busy_ns(0) == 0
    # Only one device unless told otherwise.
    assert gpu.run1("gem_client", "meminfo", "--device", "1")["rc"] == 101  # INVALID_DEVICE


@pytest.mark.parametrize("visible", ["2,3", "2, GPU-fa4e0000-0000-0000-0000-000000000003",
                                     "2,3,9,1", "2,3,2,1"])
def test_cuda_visible_devices_picks_and_orders_the_gpus(gpu: FakeGpu, visible: str) -> None:
    """Like CUDA: the listed GPUs in order, up to the first that is no GPU (or a repeat)."""
    env = {"GEMINI_FAKE_DEVICES": "4", "CUDA_VISIBLE_DEVICES": visible}
    assert gpu.run1("gem_client", "meminfo", env=env)["devices"] == 2
    for ordinal, kernels in ((0, 3), (1, 5)):
        args = ["work", "--kernel-ms", "1", "--burst", str(kernels), "--bursts", "1",
                "--device", str(ordinal)]
        assert gpu.run1("gem_client", *args, env=env)["rc"] == 0
    busy = [gpu.lib.fake_dev_busy_ns(d) // 1_000_000 for d in range(4)]
    assert busy == [0, 0, 3, 5]
    gpu.lib.fake_set_mem_total(3, 64 * MIB)  # device 1 of the process is GPU 3
    alloc = ["alloc", "--device", "1", "--bytes", str(65 * MIB)]
    assert gpu.run("gem_client", *alloc, env=env)[0]["rc"] == CUDA_ERROR_OUT_OF_MEMORY


def test_no_visible_device_is_no_device(gpu: FakeGpu) -> None:
    env = {"GEMINI_FAKE_DEVICES": "2", "CUDA_VISIBLE_DEVICES": ""}
    assert gpu.run1("gem_client", "meminfo", env=env)["rc"] == 100  # CUDA_ERROR_NO_DEVICE


def test_cuda_calls_before_cuinit_fail_like_the_real_driver(control: Any) -> None:
    ffi, lib = control
    # This interpreter never calls cuInit: memory calls fail, lookups and error names work.
    free, total = ffi.new("size_t *"), ffi.new("size_t *")
    assert lib.cuMemGetInfo_v2(free, total) == 3  # CUDA_ERROR_NOT_INITIALIZED
    name = ffi.new("const char **")
    assert lib.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, name) == 0
    assert ffi.string(name[0]) == b"CUDA_ERROR_OUT_OF_MEMORY"
    assert lib.fake_call_count(b"cuMemGetInfo_v2") >= 1


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize(("stream", "ptsz"), [("created", False), ("null", False), ("null", True)])
def test_threads_share_the_gpu(gpu: FakeGpu, program: str, stream: str, ptsz: bool) -> None:
    args = ["work", "--threads", "4", "--kernel-ms", "2", "--burst", "5", "--seconds", "0.2"]
    r = gpu.run1(program, *args, "--stream", stream, *(["--ptsz"] if ptsz else []))
    assert r["rc"] == 0
    assert gpu.lib.fake_pid_kernels(r["pid"]) == r["kernels"]
    assert 0.8 <= r["gpu_ms"] / 1000 / r["wall_s"] <= 1.02
    launches = "cuLaunchKernel_ptsz" if ptsz else "cuLaunchKernel"
    assert gpu.lib.fake_pid_call_count(r["pid"], launches.encode()) == r["kernels"]
