"""Unified-memory mode on the fake GPU: a UM client's allocations are managed memory, counted
and limited; each token grant prefetches its live allocations (freed ones pruned) to the device,
ordered before its next launch; with --evict-on-release they go back to the host at expiry.

The fake driver counts per process: cuMemPrefetchAsync* by destination, and launches onto a
stream not ordered (through an event) after the process's latest device prefetch."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from .conftest import FAST, result

pytestmark = pytest.mark.system

MiB = 1 << 20
UM_FAST = (*FAST, "--um-min-quota", "100")


def alloc(system: Any, name: str, path: str, size: int) -> dict:
    """The first line of `alloc` (after the allocation; the last one is after the free)."""
    out, _ = system.client(name, "alloc", "--path", path, "--bytes", str(size)).communicate(
        timeout=60)
    return dict(json.loads(out.splitlines()[0]))


def attach(fake: Any, segment: str) -> None:
    assert fake.fake_attach(segment.encode()) == 0


def calls(fake: Any, pid: int, name: str) -> int:
    return int(fake.fake_pid_call_count(pid, name.encode()))


def um(fake: Any, pid: int, what: str) -> int:
    return int(fake.fake_pid_um_count(pid, what.encode()))


def test_um_allocations_are_managed_counted_and_limited(system, fake):
    system.backend("2\na 0.5 1 4MiB um\nb 0.5 1 4MiB\n", *UM_FAST)
    fits = alloc(system, "a", "alloc", 3 * MiB)
    assert fits["rc"] == 0 and fits["mem_total"] == 4 * MiB and fits["mem_free"] == MiB
    over = alloc(system, "a", "alloc", 5 * MiB)
    assert over["rc"] == 2  # CUDA_ERROR_OUT_OF_MEMORY: the limit holds for managed memory
    pitch = alloc(system, "a", "pitch", 1000)
    assert pitch["rc"] == 0
    plain = alloc(system, "b", "alloc", 3 * MiB)
    assert plain["rc"] == 0
    attach(fake, system.segment)
    assert calls(fake, fits["pid"], "cuMemAllocManaged") == 1
    assert calls(fake, fits["pid"], "cuMemAlloc_v2") == 0
    assert calls(fake, over["pid"], "cuMemAllocManaged") == 0  # refused before the driver
    assert calls(fake, pitch["pid"], "cuMemAllocManaged") == 1
    assert calls(fake, pitch["pid"], "cuMemAllocPitch_v2") == 0
    assert calls(fake, plain["pid"], "cuMemAlloc_v2") == 1  # not a UM client: untouched
    assert calls(fake, plain["pid"], "cuMemAllocManaged") == 0


@pytest.mark.parametrize("evict", [False, True], ids=["keep", "evict-on-release"])
def test_each_grant_prefetches_the_live_allocations_before_the_next_launch(system, fake, evict):
    flags = (*UM_FAST, "--evict-on-release") if evict else UM_FAST
    system.backend("2\na 0.5 1 64MiB um\nb 0.5 1 64MiB\n", *flags)
    work = ("work", "--kernel-ms", "5", "--burst", "4", "--seconds", "1.2",
            "--allocs", "5", "--free-allocs", "2", "--bytes", str(MiB))
    a, b = system.client("a", *work), system.client("b", *work)
    ra, rb = result(a), result(b)
    assert ra["rc"] == 0 and rb["rc"] == 0
    attach(fake, system.segment)
    grants = calls(fake, ra["pid"], "cuStreamWaitEvent")  # the hook's: the client has none
    assert grants >= 2  # the two clients took turns
    # 3 live allocations each grant; the 2 freed ones are never prefetched (the fake refuses a
    # prefetch of memory it does not know, and only successful ones count).
    assert um(fake, ra["pid"], "prefetch_device") == 3 * grants
    assert calls(fake, ra["pid"], "cuMemPrefetchAsync_v2") == 3 * grants + um(
        fake, ra["pid"], "prefetch_host")
    assert um(fake, ra["pid"], "unordered_launches") == 0
    host = um(fake, ra["pid"], "prefetch_host")
    if evict:
        assert host >= 3 and host % 3 == 0
    else:
        assert host == 0
    # the plain client is not touched
    assert calls(fake, rb["pid"], "cuMemPrefetchAsync_v2") == 0
    assert calls(fake, rb["pid"], "cuStreamWaitEvent") == 0


@pytest.mark.parametrize("path", ["async", "pool", "vmm", "array"])
def test_paths_that_cannot_be_managed_are_limited_and_said_once(system, path):
    # Never silently unlimited (issue 15): served as device memory, counted, one log line.
    system.backend("1\na 1 1 4MiB um\n", *UM_FAST)
    proc = system.client("a", "alloc", "--path", path, "--bytes", str(MiB),
                         env={"GEMINI_LOG": "info"}, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    first = json.loads(out.splitlines()[0])
    assert first["rc"] == 0 and first["mem_free"] <= 3 * MiB  # counted against the limit
    said = [line for line in err.splitlines() if "cannot be managed" in line]
    assert len(said) == 1, err
    assert "served as device memory" in said[0]


def test_evict_on_release_waits_for_a_long_queue_two_seconds_not_for_ever(system):
    """The next token's request waited for the ended one's whole queue, to evict after it: a
    queue waiting on a later launch of ours (a stream waiting on a value it sets) never ran,
    and that launch never went.  Here a 6 s kernel, then a launch after the 100 ms token."""
    system.backend("1\na 1.0 1.0 64MiB um\n", *UM_FAST, "--evict-on-release")
    client = system.client("a", "work", "--kernel-ms", "6000", "--burst", "1", "--bursts", "2",
                           "--sync", "none", "--idle-ms", "200", "--allocs", "1",
                           "--bytes", str(MiB), stderr=subprocess.PIPE)
    _, log = client.communicate(timeout=60)
    assert client.returncode == 0, log
    assert log.count("evict-on-release: our queued work still ran 2000 ms after the token's "
                     "end") == 1, log
