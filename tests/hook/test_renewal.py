"""Renewal in the token's tail (issue 12, cheap renewal): the next token is asked for in the
background while the program goes on launching on what is left of the current one."""

from __future__ import annotations

import json
import queue

import pytest

from gemini.core.wire import RequestType

from .conftest import prog

pytestmark = pytest.mark.hook

QUOTA_MS = 600.0
TAIL_MS = 300.0  # long, so that launches in the tail are easy to see on a loaded machine


def kernels_so_far(proc, seen: int) -> int:
    """The newest progress count among the lines printed so far (no waiting)."""
    while True:
        try:
            _, line = proc.lines.get_nowait()
        except queue.Empty:
            return seen
        if line.startswith("{"):
            seen = max(seen, json.loads(line)["kernels"])


def test_launches_go_on_while_the_next_token_is_asked_for(fake_env, pm):
    pm.quota_ms = QUOTA_MS
    # --allocs: the hook then knows the client is not a unified-memory one (those ask in the
    # launching thread: their launch prefetches on a grant)
    proc = fake_env.start(
        [prog("gem_client"), "work", "--kernel-ms", "0.05", "--burst", "1", "--sync", "stream",
         "--seconds", "30", "--allocs", "1", "--bytes", str(1 << 20), "--report-every", "0.01"],
        GEMINI_HOOK_TAIL_US=str(int(TAIL_MS * 1000)))
    try:
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 1)
        pm.hold_quota = True  # the next answer waits (the request comes TAIL_MS before the end)
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 2)
        at_request = kernels_so_far(proc, 0)
        # While the answer is held, the program still launches on the rest of its token: the
        # request did not come from the launching thread, which would be waiting for it.
        later = at_request
        while later < at_request + 300:
            _, line = proc.lines.get(timeout=10)  # no progress at all: the launcher waits
            if line.startswith("{"):
                later = max(later, json.loads(line)["kernels"])
        assert len(pm.of_type(RequestType.QUOTA)) == 2  # still the one held request
        pm.release()
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 3)
    finally:
        proc.kill()
