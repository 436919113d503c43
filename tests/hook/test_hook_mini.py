"""The hook against the mini driver (tests/hook/snippets): interposition, token gate, memory
limit, robustness.  The full path matrix against the fake driver is in test_hook_paths.py."""

from __future__ import annotations

import math
import platform
import re
import socket
import subprocess
from pathlib import Path

import pytest

from gemini.core import wire
from gemini.core.wire import RequestType
from gemini.native import _build

pytestmark = pytest.mark.hook

HOOKS_DEF = Path(__file__).resolve().parents[2] / "csrc/include/gemini/hooks.def"


def table_symbols() -> set[str]:
    return set(re.findall(r"^GEM_(?:NVML_)?HOOK\((\w+)[,)]", HOOKS_DEF.read_text(), re.M))


def test_exported_symbols_are_the_table_plus_dlsym(hook_lib):
    nm = subprocess.run(["nm", "-D", "--defined-only", str(hook_lib)], capture_output=True,
                        text=True, check=True)
    exported = {line.split()[-1].split("@")[0] for line in nm.stdout.splitlines() if line.strip()}
    assert exported == table_symbols() | {"dlsym"}


def _glibc(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the versions checked are x86-64's")
def test_the_hook_asks_nothing_of_a_glibc_newer_than_2_17(hook_lib):
    """An image with an older glibc (Ubuntu 20.04, RHEL 8) drops a preload that asks for
    GLIBC_2.34 and runs the program unhooked; the dl* and pthread_* it needs from libdl.so.2
    and libpthread.so.0 there are named as needed."""
    symbols = subprocess.run(["objdump", "-T", str(hook_lib)], capture_output=True, text=True,
                             check=True).stdout
    versions = set(re.findall(r"\bGLIBC_([0-9.]+)\b", symbols))
    assert versions and max(versions, key=_glibc) == "2.17", sorted(versions, key=_glibc)
    dynamic = subprocess.run(["readelf", "-d", str(hook_lib)], capture_output=True, text=True,
                             check=True).stdout
    needed = set(re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic))
    assert {"libdl.so.2", "libpthread.so.0"} <= needed, needed


def test_a_library_preloaded_after_the_hook_finds_the_next_definition(hook_env, mini, tmp_path):
    """glibc resolves dlsym(RTLD_NEXT, ...) from the address dlsym returns to: looked up
    through the hook's dlsym, a shim loaded after it found its own getpid as the next one."""
    shim = tmp_path / "libnext_shim.so"
    subprocess.run([*_build._cc(), *_build.CFLAGS, "-shared", "-o", str(shim),
                    str(Path(__file__).parent / "snippets" / "next_shim.c"), "-ldl"], check=True)
    preload = f"{hook_env.env['LD_PRELOAD']} {shim}"
    r = hook_env.run([str(mini / "mini_client"), "meminfo"], LD_PRELOAD=preload)
    assert r.out[0] == {"next_found": 1, "next_is_own": 0}, r.stderr


def test_cudart_like_lookup_reaches_every_launch(hook_env, mini, pm):
    r = hook_env.run([str(mini / "mini_client"), "launch", "7"])
    assert r.returncode == 0, r.stderr
    assert r.stats["cuLaunchKernel"] == 7
    assert r.stats["cuLaunchKernel_ptsz"] == 0
    assert r.stats["cuStreamSynchronize"] == 1
    assert r.stats["cuGetProcAddress_v2"] >= 3  # the swapped cuGetProcAddress is ours too
    assert len(pm.of_type(RequestType.QUOTA)) == 1
    # the gate's own counts: the first launch went slow and fetched the token it lacked
    assert r.stats["gate.fetch_expired"] == 1
    assert r.stats["gate.fetch_tail"] == r.stats["gate.fetch_burst"] == 0
    assert 1 <= r.stats["gate.slow"] <= 7
    assert r.stats["gate.fetch_ns"] > 0


def test_per_thread_lookup_gets_the_ptsz_wrapper(hook_env, mini):
    r = hook_env.run([str(mini / "mini_client"), "launch", "4", "ptsz"])
    assert r.returncode == 0, r.stderr
    assert r.stats["cuLaunchKernel_ptsz"] == 4
    assert r.stats["cuLaunchKernel"] == 0
    assert r.stats["cuStreamSynchronize_ptsz"] == 1


@pytest.mark.parametrize(("launch", "flags", "asks", "named"), [
    (("0x10", "700"), 0, 2, 1),  # XLA's delay kernel, 0.3 s of a 1 s token left: a new one
    (("0x10", "100"), 0, 1, 1),  # ... 0.9 s left: it goes on this one
    (("0x10", "700", "32"), 0, 1, 0),  # 32 threads: not its launch, its name not asked
    (("0x10", "700", "1", "ex"), 0, 2, 1),  # by cuLaunchKernelEx
    (("0x10", "700", "32", "ex"), 0, 1, 0),
    (("0x20", "700"), 0, 1, 1),  # one thread of another kernel
    (("0x10", "700"), wire.QUOTA_FLAG_ALONE, 1, 1),  # alone: never held at the token's end
])
def test_a_kernel_that_waits_for_its_host_goes_only_with_room_in_the_token(
        hook_env, mini, pm, tmp_path, launch, flags, asks, named):
    """XLA times each candidate behind a kernel that spins until its host has queued the rest;
    let go at a token's end, it spun through the neighbour's turn while the gate held its
    host (72.6 ms on an H100).  It now goes only with room left (here 0.4 s, and at most half
    the token), else the rest is handed back and it goes on the next token."""
    pm.quota_ms, pm.quota_flags = 1000.0, flags
    calls = tmp_path / "driver-calls"
    r = hook_env.run([str(mini / "mini_client"), "hostwait", *launch],
                     GEMINI_HOOK_HOST_WAIT_ROOM_US="400000", MINI_DRIVER_LOG=str(calls))
    assert r.returncode == 0, r.stderr
    ex = "ex" in launch
    assert (r.stats["cuLaunchKernel"], r.stats["cuLaunchKernelEx"]) == (2 + (not ex), ex)
    assert len(pm.of_type(RequestType.QUOTA)) == asks, r.stderr
    assert r.stats["gate.fetch_room"] == asks - 1
    assert calls.read_text().split().count("cuFuncGetName") == named


def test_a_token_shorter_than_twice_the_room_is_not_handed_back(hook_env, mini, pm):
    """Else every delay kernel would cost a round trip and most of a token, again and again."""
    pm.quota_ms = 1000.0
    r = hook_env.run([str(mini / "mini_client"), "hostwait", "0x10", "100"],
                     GEMINI_HOOK_HOST_WAIT_ROOM_US="5000000")
    assert r.returncode == 0, r.stderr
    assert len(pm.of_type(RequestType.QUOTA)) == 1, r.stderr
    assert r.stats["gate.fetch_room"] == 0


def test_cuda11_four_argument_entry_point_is_hooked_too(hook_env, mini):
    r = hook_env.run([str(mini / "mini_client"), "gpa11"])
    assert r.out == [{"rc": 0}], r.stderr
    assert r.stats["cuGetProcAddress"] == 1  # the lookup of cuLaunchKernel through it
    assert r.stats["cuLaunchKernel"] == 1


def test_over_limit_allocation_is_refused_and_leaves_nothing(hook_env, mini, pm):
    pm.limit = 1000
    r = hook_env.run([str(mini / "mini_client"), "alloc", "5000"])
    assert r.out == [{"rc": 2}]
    assert pm.used == 0
    r = hook_env.run([str(mini / "mini_client"), "alloc", "600", "free"])
    assert r.out == [{"rc": 0}]
    assert [tuple(q.args) for q in pm.of_type(RequestType.MEM_UPDATE)] == [
        (5000, 1), (600, 1), (600, 0)]
    assert pm.wait_for(lambda p: p.used == 0)


def test_an_address_freed_and_taken_again_meanwhile_keeps_the_new_allocation_counted(
        hook_env, mini, pm):
    """A thread frees 1 MiB; before its free returns, another thread's 512 MiB get the same
    address.  The hook forgot the allocation after the free, by address: the 512 MiB went,
    uncounted, and a 600 MiB allocation fitted a 1 GiB limit beside them."""
    pm.limit = 1 << 30
    r = hook_env.run([str(mini / "mini_client"), "reuse", str(1 << 20), str(512 << 20),
                      str(600 << 20)], MINI_DRIVER_FREE_WAITS="1")
    assert r.out == [{"b": 0, "same": 1, "c": 2}], (r.stderr, pm.used)


def test_host_memory_made_through_the_vmm_api_is_not_counted_against_the_gpu(
        hook_env, mini, pm):
    """NCCL makes its host buffers with cuMemCreate located on the host (its cuMem host
    allocations): they were counted against the GPU's limit, and refused past it."""
    pm.limit = 1000
    r = hook_env.run([str(mini / "mini_client"), "vmm", "5000", "host"])
    assert r.out == [{"rc": 0}], r.stderr
    assert not pm.of_type(RequestType.MEM_UPDATE)
    r = hook_env.run([str(mini / "mini_client"), "vmm", "5000", "device"])
    assert r.out == [{"rc": 2}], r.stderr  # (the GPU's own: over the limit)


def test_meminfo_shows_the_limit(hook_env, mini, pm):
    pm.limit = 3 << 30
    pm.used = 1 << 30
    r = hook_env.run([str(mini / "mini_client"), "meminfo"])
    assert r.out == [{"rc": 0, "free": 2 << 30, "total": 3 << 30}]


def test_launch_without_a_token_waits_for_the_pod_manager(hook_env, mini, pm):
    pm.hold_quota = True
    proc = hook_env.start([str(mini / "mini_client"), "launch", "3"])
    try:
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) == 1)
        assert proc.popen.poll() is None  # blocked inside the first launch
        assert proc.lines.empty()
        pm.release()
        assert '"launched": 3' in proc.wait_line("launched")
        assert proc.popen.wait(10) == 0
    finally:
        proc.kill()


@pytest.mark.parametrize(("late_ms", "gone"), [(2.0, True), (None, False)])
def test_a_token_whose_reply_came_late_gives_up_what_it_took_past_the_usual_hop(
        hook_env, mini, pm, late_ms, gone):
    """The scheduler hands the GPU on as the pod manager's token ends; a reply that reached the
    hook 1.4-3.6 ms after it was sent ran its token on into the next holder's (H100, 2026-12-06;
    gem_roundtrip_late_ns).  A reply that says no send time (a v1 pod manager) loses none.
    (2 ms late: one that reads as more than 5 ms late is taken for another clock's.)"""
    pm.quota_ms = 40.0
    pm.sent_late_s = None if late_ms is None else late_ms / 1000
    run = hook_env.run([str(mini / "mini_client"), "launch", "1"], GEMINI_LOG="debug")
    assert run.returncode == 0 and run.out[-1]["launched"] == 1
    cuts = re.findall(r"token: 40.000 ms .*came ([\d.]+) ms after it was sent: ([\d.]+) ms of "
                      r"it gone", run.stderr)
    if not gone:
        assert cuts == [] and "token: 40.000 ms" in run.stderr
        return
    assert len(cuts) == 1
    came, cut = map(float, cuts[0])
    assert came >= 2.0
    assert cut == pytest.approx(came - 0.25, abs=0.002)  # (the token's expiry, as set)


@pytest.mark.parametrize("garbage", [math.inf, math.nan, 1e13])
def test_a_token_no_scheduler_grants_is_logged_and_asked_for_again_paced(
        hook_env, mini, pm, garbage):
    """(1e13 ms does not fit an int64_t of nanoseconds: the token read as expired at once,
    and the launch asked again, unpaced, some 30,000 times a second.)"""
    pm.quota_ms = garbage
    proc = hook_env.start([str(mini / "mini_client"), "launch", "1"])
    try:
        assert "which no scheduler grants" in proc.wait_line("no scheduler grants")
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 3)  # paced retries
        pm.quota_ms = 10_000.0
        assert '"launched": 1' in proc.wait_line("launched")
        assert len(pm.of_type(RequestType.QUOTA)) < 20
    finally:
        proc.kill()


def test_a_stream_out_of_step_is_dropped_and_the_request_made_again(hook_env, mini, pm):
    """Three stray bytes before a reply put every reply after them askew: the hook read no
    reply to its request ever again, and hung.  A reply to no request drops the connection."""
    pm.stray = b"\0\0\0"
    r = hook_env.run([str(mini / "mini_client"), "launch", "2"])
    assert r.out == [{"launched": 2, "rc": 0}], r.stderr
    assert "reply to no request" in r.stderr
    assert pm.connections == 2


def test_the_hooks_threads_take_none_of_the_applications_signals(hook_env, mini, pm):
    """A process-directed signal goes to a thread that does not block it, and an application's
    handler expects one of its own threads (the tracker and the renewer, started from a
    launching thread, took its mask, SIGINT open)."""
    r = hook_env.run([str(mini / "mini_client"), "threads"])
    assert r.out[0]["rc"] == 0 and r.out[0]["threads"] >= 2, (r.out, r.stderr)  # watcher, tracker
    assert r.out[0]["sigint_open"] == 0, r.out


def test_the_client_name_in_gemini_client_wins_over_pod_name(hook_env, mini, pm):
    """A Kubernetes container's own env, which wins over the device plugin's, often sets
    POD_NAME to the pod's name (the downward API): the pod manager refused every request."""
    r = hook_env.run([str(mini / "mini_client"), "launch", "1"], POD_NAME="my-pod-7f9c",
                     GEMINI_CLIENT=pm.name)
    assert r.out == [{"launched": 1, "rc": 0}], r.stderr
    assert {q.name for q in pm.requests} == {pm.name}


def test_disable_is_a_pure_pass_through(hook_env, mini, pm):
    pm.limit = 10
    r = hook_env.run([str(mini / "mini_client"), "alloc", "5000"], GEMINI_HOOK_DISABLE="1")
    assert r.out == [{"rc": 0}]
    r = hook_env.run([str(mini / "mini_client"), "launch", "2"], GEMINI_HOOK_DISABLE="1")
    assert r.returncode == 0
    assert pm.requests == [] and pm.connections == 0


def unused_port() -> int:
    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pod_manager_down_at_start_waits_and_retries(hook_env, mini):
    port = unused_port()
    proc = hook_env.start([str(mini / "mini_client"), "launch", "1"], POD_MANAGER_PORT=str(port))
    try:
        line = proc.wait_line("unreachable")
        assert f"127.0.0.1:{port}" in line and "gemini-hook[hooktest" in line
        assert proc.popen.poll() is None  # waiting, not exited
    finally:
        proc.kill()


def test_forked_child_has_its_own_connection_and_token(hook_env, mini, pm):
    r = hook_env.run([str(mini / "mini_client"), "fork"])
    assert r.out == [{"child": 0}], r.stderr
    assert pm.wait_for(lambda p: p.connections == 2)
    assert len(pm.of_type(RequestType.QUOTA)) == 2
