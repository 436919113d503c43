"""Memory leases: the hook reserves in chunks and spends locally (fewer round trips), yet never
lets a lease make an allocation fail that fits, and never exceeds the limit."""

from __future__ import annotations

import contextlib
import itertools
import queue

import pytest

from gemini.core.wire import MEM_ALLOC, MEM_CLAIM, MEM_LEASE, RequestType, Status

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


@pytest.mark.parametrize("value", ["lots", "99999999999999", "-5"])
def test_a_lease_size_that_is_no_size_is_said_once_and_the_default_used(
    hook_env, mini, pm, value
):
    pm.limit = 1 << 30
    r = hook_env.run([str(mini / "mini_client"), "alloc", str(MIB), "free"],
                     GEMINI_MEM_LEASE_MB=value)
    assert r.out == [{"rc": 0}]
    assert updates(pm) == [(33 * MIB, MEM_LEASE)]  # the default 32 MiB lease
    said = [line for line in r.stderr.splitlines() if "GEMINI_MEM_LEASE_MB" in line]
    assert len(said) == 1 and f"={value} is not a whole number from 0 to" in said[0], r.stderr


def test_a_bad_knob_is_said_by_the_parent_not_again_by_each_forked_child(hook_env, mini):
    r = hook_env.run([str(mini / "mini_client"), "fork"], GEMINI_HOOK_TAIL_US="1.5")
    assert r.out == [{"child": 0}], r.stderr
    said = [line for line in r.stderr.splitlines() if "GEMINI_HOOK_TAIL_US" in line]
    assert len(said) == 1, r.stderr


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


def start_two_allocations(hook_env, mini, pm, **env: str):
    proc = hook_env.start([str(mini / "mini_client"), "alloc2", str(512 * MIB), str(256 * MIB)],
                          **env)
    assert '"ready": [0, 0]' in proc.wait_line('"ready"')
    return proc


def free_the_second(proc) -> None:
    proc.popen.stdin.write("free\n")
    proc.popen.stdin.flush()


def ended_well(proc) -> bool:
    proc.popen.stdin.close()
    return proc.popen.wait(10) == 0


@pytest.mark.parametrize("lease_mb", ["0", "32"])
def test_a_free_after_the_pod_manager_came_back_leaves_the_live_bytes_counted(
        hook_env, mini, pm, lease_mb):
    """The new pod manager counts what is still allocated (claimed on the new connection), so
    the free, whose bytes the old one gave back when its connection closed, is not sent to it
    (it was, after the claim: 256 MiB counted with 512 allocated, 224 with a lease)."""
    pm.limit = 4 << 30
    proc = start_two_allocations(hook_env, mini, pm, GEMINI_MEM_LEASE_MB=lease_mb)
    try:
        pm.drop_connections()
        assert pm.wait_for(lambda p: p.used == 0)
        free_the_second(proc)
        assert '"freed": 0' in proc.wait_line('"freed"')
        # (its cuMemGetInfo after the free reaches the new one, which the hook tells first)
        proc.wait_line('"meminfo_free"')
        assert pm.used == 512 * MIB, updates(pm)
        assert ended_well(proc)
    finally:
        proc.kill()


@pytest.mark.parametrize("lease_mb", ["0", "32"])
def test_an_idle_process_tells_a_new_pod_manager_what_it_holds_without_being_asked(
        hook_env, mini, pm, lease_mb):
    """It claimed its bytes only with its next request: an idle one (a notebook between cells)
    left them uncounted meanwhile, and its neighbours were let allocate them too.  Its watcher
    now connects again once the connection is lost, and the claim goes with it."""
    pm.limit = 4 << 30
    proc = start_two_allocations(hook_env, mini, pm, GEMINI_MEM_LEASE_MB=lease_mb)
    try:
        pm.drop_connections()
        # (its old connection's bytes given back, and the claim on a new one: nothing asked)
        assert pm.wait_for(lambda p: (768 * MIB, MEM_CLAIM) in [tuple(q.args) for q in p.of_type(
            RequestType.MEM_UPDATE)] and p.used == 768 * MIB), updates(pm)
        free_the_second(proc)  # and its free reaches the new one, which counted it
        assert '"freed": 0' in proc.wait_line('"freed"')
        proc.wait_line('"meminfo_free"')
        assert pm.used == (512 + int(lease_mb)) * MIB, updates(pm)  # (a lease kept of the free)
        assert ended_well(proc)
    finally:
        proc.kill()


@pytest.mark.parametrize("lease_mb", ["0", "32"])
def test_a_free_in_the_driver_across_a_reconnect_leaves_the_live_bytes_counted(
        hook_env, mini, pm, lease_mb):
    """The free took its allocation out of the books before the driver's free, so the claim
    made on reconnecting meanwhile left it out; given back to the new pod manager when the
    free returned, its bytes came off the allocation still alive: 0 B counted of 256 MiB."""
    pm.limit = 4 << 30
    proc = hook_env.start([str(mini / "mini_client"), "freeing", str(512 * MIB),
                           str(256 * MIB)], MINI_DRIVER_FREE_WAITS="1",
                          GEMINI_MEM_LEASE_MB=lease_mb)
    try:
        assert '"ready": [0, 0]' in proc.wait_line('"ready"')
        proc.popen.stdin.write("free\n")
        proc.popen.stdin.flush()
        proc.wait_line('"freeing"')  # the free is in the driver
        pm.drop_connections()
        assert pm.wait_for(lambda p: p.used == 0)
        proc.popen.stdin.write("info\n")  # reconnects: the claim
        proc.popen.stdin.flush()
        assert '"freed": 0' in proc.wait_line('"freed"')
        assert pm.wait_for(lambda p: p.used == 256 * MIB), updates(pm)
        assert ended_well(proc)
    finally:
        proc.kill()


def test_a_pod_manager_that_goes_at_each_first_request_is_told_once(hook_env, mini, pm):
    """Each of its next three connections closed at its first request: the watcher connects
    again, paced, and the claim reaches the fourth once.  The on-connect callback's requests
    opened connections of their own and ran the callback again within it (claimed twice), and
    a connection made there was never told while the process stayed idle."""
    pm.limit = 4 << 30
    proc = start_two_allocations(hook_env, mini, pm)
    try:
        pm.close_at_first = 3
        pm.drop_connections()
        assert pm.wait_for(lambda p: p.close_at_first == 0 and (768 * MIB, MEM_CLAIM) in [
            tuple(q.args) for q in p.of_type(RequestType.MEM_UPDATE)]), updates(pm)
        assert pm.wait_for(lambda p: p.used == 768 * MIB), updates(pm)
        free_the_second(proc)  # (a request after it: every claim is in by its reply)
        assert '"freed": 0' in proc.wait_line('"freed"')
        proc.wait_line('"meminfo_free"')
        assert pm.used == 512 * MIB, updates(pm)
        assert updates(pm).count((768 * MIB, MEM_CLAIM)) == 1, updates(pm)
        assert ended_well(proc)
    finally:
        proc.kill()


def test_an_idle_process_asks_a_pod_manager_that_refuses_its_claim_again_paced(
        hook_env, mini, pm):
    """A pod manager that does not know its client's limit yet refuses the claim as a whole;
    the watcher told it again at once, round trip after round trip."""
    pm.limit = 4 << 30
    proc = start_two_allocations(hook_env, mini, pm)
    try:
        pm.refuse_memory = Status.UNKNOWN_CLIENT
        pm.drop_connections()
        assert pm.wait_for(lambda p: p.memory_refused >= 4), pm.memory_refused
        gaps = [b - a for a, b in itertools.pairwise(pm.memory_refused_at[:4])]
        assert min(gaps) >= 0.04, gaps  # (50 ms, doubling)
        pm.refuse_memory = None
        assert pm.wait_for(lambda p: p.used == 768 * MIB), updates(pm)
    finally:
        proc.kill()


@pytest.mark.parametrize("lease_mb", ["0", "32"])
@pytest.mark.parametrize("outcome", ["ok", "fail"])
def test_an_allocation_in_the_driver_across_a_reconnect_is_counted_once(
        hook_env, mini, pm, lease_mb, outcome):
    """512 MiB reserved at the old pod manager, in the driver while a new one is reached: the
    claim made on the new connection leaves it out (not booked yet).  Allocated, it went
    uncounted (256 MiB counted of 768); failed, its reservation went back into the process's
    lease (or to the new pod manager, which took it off the 256 MiB still alive), and the next
    allocation spent bytes no pod manager had granted."""
    pm.limit = 4 << 30
    proc = hook_env.start([str(mini / "mini_client"), "allocating", str(512 * MIB),
                           str(256 * MIB), outcome], GEMINI_MEM_LEASE_MB=lease_mb)
    try:
        proc.wait_line('"allocating"')
        pm.drop_connections()  # the watcher rejoins and claims what is booked: 256 MiB
        assert pm.wait_for(lambda p: (256 * MIB, MEM_CLAIM) in [tuple(q.args) for q in p.of_type(
            RequestType.MEM_UPDATE)] and p.used == 256 * MIB), updates(pm)
        proc.popen.stdin.write("go\n")
        proc.popen.stdin.flush()
        proc.wait_line('"allocated"')
        held = 256 + (512 if outcome == "ok" else 0)
        assert pm.used == held * MIB, updates(pm)
        proc.popen.stdin.write("again\n")
        proc.popen.stdin.flush()
        assert '"again": 0' in proc.wait_line('"again"')
        assert pm.used == (held + 256 + int(lease_mb)) * MIB, updates(pm)  # (asked for: counted)
        assert ended_well(proc)
    finally:
        proc.kill()


def test_a_free_returns_at_once_while_the_pod_manager_is_gone(hook_env, mini, pm):
    """Its bytes went back with the connection: nothing to wait for (it retried forever)."""
    proc = start_two_allocations(hook_env, mini, pm)
    try:
        pm.close()
        free_the_second(proc)
        assert '"freed": 0' in proc.wait_line('"freed"')
    finally:
        proc.kill()


def test_live_bytes_a_new_pod_manager_refused_at_first_are_claimed_at_the_next_request(
        hook_env, mini, pm):
    """A pod manager back before it knows its client's limit refuses the claim of the live
    bytes: it is made again before the next request (it was dropped, and 512 MiB went
    uncounted for good)."""
    pm.limit = 4 << 30
    proc = start_two_allocations(hook_env, mini, pm)
    try:
        pm.refuse_memory = Status.UNKNOWN_CLIENT
        pm.drop_connections()
        assert pm.wait_for(lambda p: p.used == 0)
        free_the_second(proc)  # (its cuMemGetInfo after it reconnects)
        assert pm.wait_for(lambda p: p.memory_refused >= 2)  # the claim, the limit
        pm.refuse_memory = None
        proc.wait_line('"meminfo_free"')
        assert pm.used == 512 * MIB, updates(pm)
        assert ended_well(proc)
    finally:
        proc.kill()


def test_a_refusal_is_said_once_with_what_it_means(hook_env, mini, pm):
    """A removed client's process wrote "refused a request (status 3); retrying" every
    second for as long as it waited."""
    pm.refuse_memory = Status.CLIENT_REMOVED
    proc = hook_env.start([str(mini / "mini_client"), "meminfo"])
    try:
        said = proc.wait_line("refused a request")
        assert "removed from the config: waiting until it is added back" in said
        assert pm.wait_for(lambda p: p.memory_refused >= 4)
        pm.refuse_memory = None
        assert proc.popen.wait(10) == 0
        rest = []  # (its pipes are closed: what is left comes at once)
        with contextlib.suppress(queue.Empty):
            while True:
                rest.append(proc.lines.get(timeout=2)[1])
        assert any('"rc": 0' in line for line in rest), rest
        assert not [line for line in rest if "refused a request" in line], rest
    finally:
        proc.kill()
