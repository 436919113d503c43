"""Memory leases: the hook reserves in chunks and spends locally (fewer round trips), yet never
lets a lease make an allocation fail that fits, and never exceeds the limit."""

from __future__ import annotations

import pytest

from gemini.core.wire import MEM_ALLOC, MEM_LEASE, RequestType

pytestmark = pytest.mark.hook
MIB = 1 << 20
LEASE = {"GEMINI_MEM_LEASE_MB": "32"}


def updates(pm):
    return [tuple(q.args) for q in pm.of_type(RequestType.MEM_UPDATE)]


def test_an_allocation_and_its_free_cost_one_round_trip(hook_env, mini, pm):
    pm.limit = 1 << 30
    r = hook_env.run([str(mini / "mini_client"), "alloc", str(MIB), "free"], **LEASE)
    assert r.out == [{"rc": 0}]
    # One reservation of the block plus a 32 MiB lease; the free stays local.
    assert updates(pm) == [(33 * MIB, MEM_LEASE)]
    assert pm.wait_for(lambda p: p.used == 0)  # the lease went back with the connection


def test_near_the_limit_the_exact_amount_is_asked_for(hook_env, mini, pm):
    pm.limit = 10 * MIB
    r = hook_env.run([str(mini / "mini_client"), "alloc", str(5 * MIB)], **LEASE)
    assert r.out == [{"rc": 0}]
    # the lease is asked as one (granted only if it fits), the exact amount as an allocation
    assert updates(pm) == [(37 * MIB, MEM_LEASE), (5 * MIB, MEM_ALLOC)]


def test_over_the_limit_is_still_refused(hook_env, mini, pm):
    pm.limit = 10 * MIB
    r = hook_env.run([str(mini / "mini_client"), "alloc", str(20 * MIB)], **LEASE)
    assert r.out == [{"rc": 2}]
    assert pm.used == 0

