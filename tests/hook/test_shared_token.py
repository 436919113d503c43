"""A token shared by several processes of a client (the pod manager says how many with each
grant): each process bounds its own queue, and the GPU drains theirs together, so each keeps
its share of the token queued, not the whole of it."""

from __future__ import annotations

import pytest

from .conftest import prog

pytestmark = pytest.mark.hook

TOKEN_MS = 100.0


@pytest.mark.parametrize(("sharers", "most_ms", "least_ms"), [(1, None, 60.0), (4, 30.0, None)])
def test_a_process_that_shares_its_token_queues_only_its_part_of_it(
    fake_env, fake, pm, sharers, most_ms, least_ms
):
    """A program that never syncs, 1 ms kernels, 100 ms tokens: alone it queues up to the
    whole token ahead of the GPU; told that 4 processes share the token, a quarter of it (the
    other three may queue as much).  The fake GPU's queue end is read while it runs."""
    segment = fake_env.env["GEMINI_FAKE_GPU"]
    pm.quota_ms = TOKEN_MS
    pm.sharers = sharers
    proc = fake_env.start([prog("gem_client"), "work", "--kernel-ms", "1", "--burst", "1",
                           "--sync", "none", "--seconds", "0.5"])
    ahead_ms = 0.0
    try:
        assert pm.wait_for(lambda p: p.requests)  # the program is up: its segment exists
        assert fake.fake_attach(segment.encode()) == 0
        while proc.popen.poll() is None:  # (polls the queue's end until the program is done)
            ahead_ms = max(ahead_ms, (fake.fake_busy_until(0) - fake.fake_now_ns()) / 1e6)
    finally:
        proc.kill()
    assert proc.popen.returncode == 0
    if most_ms is not None:
        assert ahead_ms <= most_ms, ahead_ms
    if least_ms is not None:
        assert ahead_ms >= least_ms, ahead_ms
