"""Lease recall in the pod manager core: an allocation that fits only once the client's other
processes give their unspent leases back waits for them (RECALL), on a virtual clock."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gemini.core.actions import Reply, SendUpstream
from gemini.core.podmanager import RECALL_TIMEOUT_S, PodCore
from gemini.core.wire import (
    MEM_ALLOC,
    MEM_CLAIM,
    MEM_FREE,
    MEM_LEASE,
    NOTIFY_ID,
    Request,
    RequestType,
    Response,
    Status,
)

LIMIT = 1000


def ready_pod(conns=(1, 2, 3), limit=LIMIT) -> PodCore:
    pod = PodCore("pod", 0.0)
    [limit_req] = [a.request for a in pod.on_scheduler_connected(0.0)
                   if isinstance(a, SendUpstream) and a.request.type is RequestType.MEM_LIMIT]
    pod.on_upstream_response(Response(limit_req.req_id, Status.OK, (0, limit)), 0.0)
    for conn in conns:
        pod.on_hook_connect(conn, 0.0)
    return pod


def mem(pod, conn, size, kind, now=0.0, req_id=1):
    return pod.on_hook_request(conn, Request("pod", req_id, RequestType.MEM_UPDATE, (size, kind)),
                               now)


def give_back(pod, conn, size, now=0.0, req_id=2):
    return pod.on_hook_request(conn, Request("pod", req_id, RequestType.RECALL, (size,)), now)


def verdicts(actions):
    """(conn, verdict) of the MEM_UPDATE answers among the actions."""
    return [(a.conn, a.response.values[0]) for a in actions
            if isinstance(a, Reply) and a.type is RequestType.MEM_UPDATE]


def recalls(actions):
    """The processes asked to give their leases back (unsolicited RECALL messages)."""
    return sorted(a.conn for a in actions if isinstance(a, Reply)
                  and a.type is RequestType.RECALL and a.response.req_id == NOTIFY_ID)


def leased(pod, conn, size):
    """Process `conn` reserves `size` bytes as a lease (granted)."""
    assert verdicts(mem(pod, conn, size, MEM_LEASE)) == [(conn, 1)]


def test_an_allocation_waits_for_a_neighbours_lease_and_gets_it():
    pod = ready_pod()
    leased(pod, 1, 600)  # process 1 leased 600 B and spent 100 of them (locally)
    out = mem(pod, 2, 700, MEM_ALLOC, now=0.01)
    assert verdicts(out) == []  # held, not refused
    assert recalls(out) == [1]
    [note] = [a for a in out if isinstance(a, Reply) and a.type is RequestType.RECALL]
    assert note.response.values == (300,)  # what the allocation lacks
    assert pod.recall_until == 0.01 + RECALL_TIMEOUT_S
    assert pod.next_deadline() <= pod.recall_until  # the shell's timer wakes it by then
    out = give_back(pod, 1, 500, now=0.02)
    assert verdicts(out) == [(2, 1)]
    assert [a.conn for a in out if isinstance(a, Reply) and a.type is RequestType.RECALL] == [1]
    assert pod.used == 100 + 700 and pod.hooks[1].reserved == 100
    assert pod.recall_until is None  # nothing to wait for any more


def test_too_little_given_back_is_refused_once_every_process_asked_answered():
    pod = ready_pod()
    leased(pod, 1, 400)
    leased(pod, 3, 400)
    assert recalls(mem(pod, 2, 500, MEM_ALLOC)) == [1, 3]
    assert verdicts(give_back(pod, 1, 100)) == []  # 300 free now; process 3 has not answered
    out = give_back(pod, 3, 0)  # it spent all of its lease
    assert verdicts(out) == [(2, 0)]
    assert pod.used == 700 and pod.recall_until is None


def test_a_process_that_never_answers_is_waited_for_no_longer_than_the_timeout():
    pod = ready_pod()
    leased(pod, 1, 600)
    mem(pod, 2, 700, MEM_ALLOC, now=1.0)
    assert pod.recall_until == 1.0 + RECALL_TIMEOUT_S
    assert verdicts(pod.on_deadline(1.0 + RECALL_TIMEOUT_S / 2)) == []
    out = pod.on_deadline(1.0 + RECALL_TIMEOUT_S)
    assert verdicts(out) == [(2, 0)]
    assert any("did not give their leases back" in getattr(a, "message", "") for a in out)
    assert pod.recall_until is None
    # A late answer is a plain give-back.
    assert give_back(pod, 1, 600, now=2.0) and pod.used == 0


def test_a_process_that_goes_gives_everything_back_to_the_waiting_allocation():
    pod = ready_pod()
    leased(pod, 1, 600)
    mem(pod, 2, 700, MEM_ALLOC)
    assert verdicts(pod.on_hook_disconnect(1, 0.1)) == [(2, 1)]
    assert pod.used == 700


def test_a_free_meanwhile_can_make_it_fit():
    pod = ready_pod()
    leased(pod, 1, 300)
    mem(pod, 3, 500, MEM_ALLOC)
    assert recalls(mem(pod, 2, 300, MEM_ALLOC)) == [1]
    assert verdicts(mem(pod, 3, 200, MEM_FREE, req_id=5)) == [(3, 1), (2, 1)]
    assert pod.used == 300 + 300 + 300


def test_processes_that_never_leased_are_not_asked():
    # v1 hooks and hooks without a lease hold no unspent bytes: refused at once, as before.
    pod = ready_pod()
    assert verdicts(mem(pod, 1, 600, MEM_ALLOC)) == [(1, 1)]
    out = mem(pod, 2, 700, MEM_ALLOC)
    assert verdicts(out) == [(2, 0)] and recalls(out) == []


def test_no_recall_when_even_every_lease_back_would_not_fit():
    pod = ready_pod()
    leased(pod, 1, 300)
    mem(pod, 3, 500, MEM_ALLOC)
    out = mem(pod, 2, 600, MEM_ALLOC)  # 200 free + 300 leased < 600
    assert verdicts(out) == [(2, 0)] and recalls(out) == []


def test_a_lease_never_recalls_and_never_jumps_the_queue():
    pod = ready_pod()
    leased(pod, 1, 600)
    out = mem(pod, 2, 700, MEM_LEASE)
    assert verdicts(out) == [(2, 0)] and recalls(out) == []  # a lease is only ahead of need
    mem(pod, 2, 700, MEM_ALLOC)
    assert verdicts(mem(pod, 3, 100, MEM_LEASE)) == [(3, 0)]  # would fit, but 2 waits first
    # An allocation meanwhile waits its turn, behind the first.
    assert verdicts(mem(pod, 3, 100, MEM_ALLOC)) == []
    assert verdicts(give_back(pod, 1, 600)) == [(2, 1), (3, 1)]
    assert pod.used == 800


def test_the_waiting_process_gone_is_forgotten():
    pod = ready_pod()
    leased(pod, 1, 600)
    mem(pod, 2, 700, MEM_ALLOC)
    pod.on_hook_disconnect(2, 0.1)
    assert verdicts(give_back(pod, 1, 600)) == []
    assert pod.used == 0


def test_a_larger_limit_pushed_meanwhile_answers_the_waiting_allocation():
    pod = ready_pod()
    leased(pod, 1, 600)
    mem(pod, 2, 700, MEM_ALLOC)
    out = pod.on_upstream_response(Response(NOTIFY_ID, Status.OK, (0, 2000)), 0.1)
    assert verdicts(out) == [(2, 1)]


# ---- property: the ledger holds and every allocation is answered, whatever happens -----------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("lease"), st.integers(1, 3), st.integers(0, 700)),
        st.tuples(st.just("alloc"), st.integers(1, 3), st.integers(0, 700)),
        st.tuples(st.just("free"), st.integers(1, 3), st.integers(0, 700)),
        st.tuples(st.just("recall"), st.integers(1, 3), st.integers(0, 700)),
        st.tuples(st.just("gone"), st.integers(1, 3), st.just(0)),
        st.tuples(st.just("tick"), st.just(0), st.integers(0, 600)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops)
@example([("lease", 1, 182), ("lease", 2, 700), ("alloc", 1, 119), ("alloc", 1, 119),
          ("alloc", 2, 119)])
def test_the_ledger_holds_and_every_allocation_is_answered(steps):
    pod = ready_pod()
    now = 0.0
    asked: set[int] = set()
    waiting: dict[int, int] = {}  # conn -> allocations not answered yet
    for i, (op, conn, n) in enumerate(steps):
        if op == "tick":
            now += n / 1000
            out = pod.on_deadline(now)
        elif op == "gone":
            out = pod.on_hook_disconnect(conn, now)
            waiting.pop(conn, None)
            asked.discard(conn)
            pod.on_hook_connect(conn, now)  # a new process on a new connection
        elif op == "recall":
            out = give_back(pod, conn, n, now, req_id=i)
            asked.discard(conn)
        else:
            kind = {"lease": MEM_LEASE, "alloc": MEM_ALLOC, "free": MEM_FREE}[op]
            out = mem(pod, conn, n, kind, now, req_id=i)
            waiting[conn] = waiting.get(conn, 0) + 1
        for c, _ in verdicts(out):
            waiting[c] -= 1
        asked |= set(recalls(out))
        assert 0 <= pod.used <= LIMIT
        assert pod.used == sum(h.reserved for h in pod.hooks.values())
        assert all(h.reserved >= 0 for h in pod.hooks.values())
        if pod.recall_asked:
            assert pod.next_deadline() is not None and pod.next_deadline() <= now + RECALL_TIMEOUT_S
    # Everyone asked answers (or the time-out passes), recall after recall: an allocation
    # refused after one may ask for another, of other processes (hypothesis, 2026-12-06: the
    # third one waited on a recall made when the time-out answered the second); nothing is
    # left waiting.
    for _ in range(2 * len(steps) + 2):  # (each round answers a waiting allocation, or ends)
        if not pod.recall_asked:
            break
        out = []
        for conn in sorted(asked & set(pod.recall_asked)):
            out += give_back(pod, conn, 0, now)
        if pod.recall_asked:
            now += RECALL_TIMEOUT_S
            out += pod.on_deadline(now)
        for c, _ in verdicts(out):
            waiting[c] -= 1
        asked |= set(recalls(out))
    assert all(v == 0 for v in waiting.values()), waiting
    assert pod.recall_waiters == [] and pod.recall_asked == set()


def test_a_lease_is_not_granted_while_a_recall_is_out():
    """(Granted between two answers, it was asked for by no recall, and an allocation queued
    behind that recall was refused while it sat unspent.)"""
    pod = ready_pod()
    leased(pod, 1, 300)
    leased(pod, 2, 300)
    assert verdicts(mem(pod, 3, 500, MEM_ALLOC)) == []  # 400 free: asks 1 and 2
    assert verdicts(give_back(pod, 1, 300)) == [(3, 1)]  # 3 served; 2 has not answered
    assert verdicts(mem(pod, 1, 200, MEM_LEASE, req_id=3)) == [(1, 0)]  # not while 2 may answer
    assert verdicts(mem(pod, 4, 300, MEM_ALLOC)) == []  # 200 free, 2's 300 asked: waits
    assert verdicts(give_back(pod, 2, 300)) == [(4, 1)]


def test_a_limit_lowered_below_what_is_held_recalls_the_unspent_leases():
    pod = ready_pod()
    leased(pod, 1, 300)
    assert verdicts(mem(pod, 2, 400, MEM_ALLOC)) == [(2, 1)]
    lowered = pod.on_upstream_response(Response(NOTIFY_ID, Status.OK, (0, 500)), 1.0)
    assert recalls(lowered) == [1]
    give_back(pod, 1, 300, now=1.1)
    assert pod.used == 400
    # A limit still above what is held asks nobody.
    leased(pod, 1, 50)
    assert recalls(pod.on_upstream_response(Response(NOTIFY_ID, Status.OK, (0, 450)), 2.0)) == []


def test_bytes_claimed_after_a_restart_count_over_the_limit_and_hold_new_ones_off():
    """After a pod manager restart a neighbour filled the limit first, and the claim of bytes
    allocated all along was refused: uncounted, they let the client allocate past its limit
    for good (1,100 of 1,000 on the GPU once the claimer freed its old bytes)."""
    pod = ready_pod()
    assert verdicts(mem(pod, 1, 400, MEM_CLAIM)) == [(1, 1)]
    assert verdicts(mem(pod, 1, 500, MEM_ALLOC, req_id=2)) == [(1, 1)]
    out = mem(pod, 2, 500, MEM_CLAIM)
    assert verdicts(out) == [(2, 1)] and pod.used == 1400
    assert any("over the limit until it frees" in getattr(a, "message", "") for a in out)
    out = mem(pod, 2, 100, MEM_ALLOC, req_id=2)  # (process 1 may hold some unspent: asked)
    assert verdicts(out) == [] and recalls(out) == [1]
    assert verdicts(give_back(pod, 1, 0, req_id=9)) == [(2, 0)]
    mem(pod, 2, 500, MEM_FREE, req_id=3)
    assert verdicts(mem(pod, 1, 100, MEM_ALLOC, req_id=4)) == [(1, 1)] and pod.used == 1000
    assert verdicts(mem(pod, 1, 1, MEM_ALLOC, req_id=5)) == [(1, 0)]


def test_a_claim_past_what_a_u64_holds_is_refused_and_the_client_still_answered():
    """Two claims of 2^63 B took the client's use past the wire's u64: every MEM_LIMIT reply
    and REPORT failed to encode from then on."""
    pod = ready_pod()
    assert verdicts(mem(pod, 1, 2**63, MEM_CLAIM)) == [(1, 1)]
    [reply] = [a for a in mem(pod, 2, 2**63, MEM_CLAIM) if isinstance(a, Reply)]
    assert reply.response.status is Status.BAD_REQUEST and pod.used == 2**63


def test_a_memory_update_of_no_known_kind_is_refused():
    pod = ready_pod()
    [reply] = [a for a in mem(pod, 1, 100, 9) if isinstance(a, Reply)]
    assert reply.response.status is Status.BAD_REQUEST and pod.used == 0


def test_a_process_that_reconnected_holding_bytes_is_asked_for_its_unspent_ones():
    """A hook claims only where it leases (lease.c), and what it frees it keeps as its unspent
    lease, saying nothing.  Claimed after a restart, its bytes were never recalled: another
    process's allocation that fitted once they came back was refused at once."""
    pod = ready_pod()
    mem(pod, 1, 960, MEM_CLAIM)  # (process 1 then frees 60 B into its lease: no message)
    out = mem(pod, 2, 60, MEM_ALLOC, now=0.01)
    assert verdicts(out) == [] and recalls(out) == [1]
    assert verdicts(give_back(pod, 1, 60, now=0.02)) == [(2, 1)]


def test_a_process_that_did_not_answer_a_recall_is_not_waited_for_again_until_it_speaks():
    """Stopped (or its answering thread never started), it cost every allocation that did not
    fit the whole timeout, and held the fitting ones and every lease meanwhile."""
    pod = ready_pod(conns=(1, 2, 3))
    leased(pod, 1, 500)
    leased(pod, 2, 400)
    out = mem(pod, 3, 200, MEM_ALLOC, now=1.0)
    assert recalls(out) == [1, 2]
    give_back(pod, 2, 0, now=1.01)  # process 2 spent its lease: nothing to give
    out = pod.on_deadline(1.0 + RECALL_TIMEOUT_S)
    assert verdicts(out) == [(3, 0)]  # process 1 never answered
    out = mem(pod, 3, 200, MEM_ALLOC, now=2.0, req_id=3)
    assert verdicts(out) == [] and recalls(out) == [2]  # process 1 is not asked again...
    assert verdicts(give_back(pod, 2, 0, now=2.01)) == [(3, 0)]  # ... nor waited for
    assert pod.recall_until is None
    mem(pod, 1, 10, MEM_FREE, now=3.0)  # process 1 speaks again: it answers again
    out = mem(pod, 3, 200, MEM_ALLOC, now=3.1, req_id=4)
    assert verdicts(out) == [] and recalls(out) == [1, 2]


def test_an_allocation_queued_behind_a_recall_gets_a_recall_of_its_own():
    """The recall out was sized for the allocation at the head of the queue; the one behind it,
    not fitting once every process asked answered, was refused, while the first process to
    give back held bytes it had since freed into its lease."""
    pod = ready_pod(conns=(1, 2, 3, 5))
    leased(pod, 1, 500)
    leased(pod, 2, 400)
    out = mem(pod, 3, 300, MEM_ALLOC, now=0.0)
    assert recalls(out) == [1, 2]
    assert verdicts(give_back(pod, 1, 300, now=0.001)) == [(3, 1)]  # 200 B still its own
    assert verdicts(mem(pod, 5, 150, MEM_ALLOC, now=0.002)) == []  # queued behind the recall
    out = give_back(pod, 2, 0, now=0.004)  # (process 1 freed 150 B into its lease meanwhile)
    assert verdicts(out) == [] and recalls(out) == [1, 2]
    assert verdicts(give_back(pod, 1, 150, now=0.005, req_id=3)) == [(5, 1)]
