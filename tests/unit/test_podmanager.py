"""The pod manager core: one token shared by a client's processes, and its memory ledger."""

import logging

import pytest

from gemini.core import wire
from gemini.core.actions import Close, Log, Reply, SendUpstream
from gemini.core.podmanager import GRANT_DELAY_MAX_S, SHARING_S, PodCore, token_start
from gemini.core.wire import Request, RequestType, Response, Status


def quota(req_id, overuse=0.0, burst=0.0, name="pod", gpu_wait=None, run=(0.0, 0)):
    return Request(name, req_id, RequestType.QUOTA, (overuse, burst, gpu_wait, *run))


def mem(req_id, size, alloc=1):
    return Request("pod", req_id, RequestType.MEM_UPDATE, (size, alloc))


def replies(actions):
    return [(a.conn, a.response) for a in actions if isinstance(a, Reply)]


def upstream(actions):
    return [a.request for a in actions if isinstance(a, SendUpstream)]


def fetches(actions):
    return [r for r in upstream(actions) if r.type is RequestType.QUOTA]


def ready_pod(limit=1000, name="pod", time_from_grant=False) -> PodCore:
    pod = PodCore(name, 0.0, time_from_grant)
    limit_req = upstream(pod.on_scheduler_connected(0.0))[0]
    pod.on_upstream_response(Response(limit_req.req_id, Status.OK, (0, limit)), 0.0)
    pod.on_hook_connect(1, 0.0)
    pod.on_hook_connect(2, 0.0)
    return pod


def grant(pod, now, quota_ms, flags=0, granted_at=0.0):
    values = (quota_ms, flags, 0, granted_at)
    return pod.on_upstream_response(Response(pod.fetch_id, Status.OK, values), now)


def test_processes_share_one_fetch_and_one_token():
    pod = ready_pod()
    [fetch] = upstream(pod.on_hook_request(1, quota(1, overuse=3.0, burst=10.0), 0.0))
    assert fetch.type is RequestType.QUOTA
    assert upstream(pod.on_hook_request(2, quota(1, overuse=7.0, burst=40.0), 0.0)) == []
    got = replies(grant(pod, 0.01, 250.0))
    # (quota, flags, processes sharing the token, when the pod manager sent it: a hook gives up
    # what a late reply took past the usual hop, gem_roundtrip_late_ns)
    assert [(c, r.values) for c, r in got] == [(1, (250.0, 0, 2, 0.01)), (2, (250.0, 0, 2, 0.01))]
    # Later requests are served from the cached token while the burst fits.
    [(conn, rsp)] = replies(pod.on_hook_request(1, quota(2, burst=50.0), 0.11))
    assert conn == 1 and rsp.values[0] == pytest.approx(150.0)


@pytest.mark.parametrize(("granted_at", "start"), [
    (9.9992, 9.9992),  # granted 0.8 ms before it came: timed from then
    (9.9, 10.0),  # 100 ms "before": another host's clock, timed from its receipt
    (10.0004, 10.0),  # after it came: the same
    (0.0, 10.0),  # not said (a v1 scheduler)
])
def test_a_token_is_timed_from_its_grant_where_that_is_plausible(granted_at, start):
    """With time_from_grant.  A grant made at another's deadline reached the pod managers
    0.2-1 ms later on the H200, and the token then ran on past the next holder's start
    (wire.py, granted_at)."""
    pod = ready_pod(time_from_grant=True)
    pod.on_hook_request(1, quota(1, burst=10.0), 9.99)
    [(_, first)] = replies(grant(pod, 10.0, 100.0, granted_at=granted_at))
    assert first.values[0] == pytest.approx(100.0 - (10.0 - start) * 1000.0)
    assert 0.0 <= 10.0 - token_start(granted_at, 10.0, 0.1) <= GRANT_DELAY_MAX_S
    # A process that asks later is given what is left of the same token.
    [(_, later)] = replies(pod.on_hook_request(2, quota(1, burst=10.0), 10.05))
    assert later.values[0] == pytest.approx(100.0 - (10.05 - start) * 1000.0)


def test_a_short_token_delivered_late_still_leaves_its_hook_half_of_it():
    """(A hook handed 0 ms sleeps 10 ms and asks again.)"""
    pod = ready_pod(time_from_grant=True)
    pod.on_hook_request(1, quota(1, burst=1.0), 9.99)
    [(_, first)] = replies(grant(pod, 10.0, 2.0, granted_at=9.997))  # 2 ms, 3 ms late
    assert first.values[0] == pytest.approx(1.0)


def said_delivery(pod, delay_s, at=10.0):
    """Grants that came `delay_s` after they were made, and the REPORT that tells the
    scheduler so (its hand-over then waits that long after a grant's end)."""
    for k in range(3):
        now = at + 0.01 * k
        pod.on_hook_request(1, quota(100 + k, burst=1.0), now - 0.001)
        grant(pod, now, 1.0, granted_at=now - delay_s)
    reports = [r for r in upstream(pod.on_deadline(at + 0.5)) if r.type is RequestType.REPORT]
    assert [r.args[3] for r in reports] == [pytest.approx(delay_s * 1000.0)]


def test_by_default_a_token_is_timed_from_its_receipt():
    """(The scheduler books a grant from when it made it: GRANT_DELAY_MAX_S says what timing
    it from then costs a client.)"""
    pod = ready_pod()
    said_delivery(pod, 0.0008)
    pod.on_hook_request(1, quota(1, burst=10.0), 10.99)
    out = grant(pod, 11.0, 100.0, granted_at=10.9992)
    [(_, first)] = replies(out)
    assert first.values[0] == pytest.approx(100.0)
    # The log says how long the grant took to come all the same (bench/token_path.py).
    [line] = [a.message for a in out if isinstance(a, Log)]
    assert "made 0.800 ms before" in line and "timed from then" not in line and "cut" not in line


@pytest.mark.parametrize(("quota_ms", "late_ms", "left_ms"), [
    (100.0, 3.0, 97.5),  # 2.5 ms later than the hand-over waits for: gone
    (100.0, 0.3, 100.0),  # sooner: all of it, from its receipt
    (2.0, 3.0, 1.0),  # (half of a short one at least: token_start)
])
def test_a_token_that_came_later_than_the_hand_over_waits_for_loses_the_difference(
        quota_ms, late_ms, left_ms):
    """The scheduler hands the GPU on 0.5 ms (what this pod manager said) after the grant's
    end.  Timed from its receipt, a grant that came 3 ms after it was made ran on 2.5 ms into
    the next holder's token (H100, 2026-12-06 17:15: 2-3 % of the grants came 1.5-3.5 ms late,
    p50 0.6, and their queue's last kernels finished a GPU time slice late)."""
    pod = ready_pod()
    said_delivery(pod, 0.0005)
    pod.on_hook_request(1, quota(1, burst=10.0), 10.99)
    out = grant(pod, 11.0, quota_ms, granted_at=11.0 - late_ms / 1000.0)
    [(_, first)] = replies(out)
    assert first.values[0] == pytest.approx(left_ms)
    if left_ms < quota_ms:
        [line] = [a.message for a in out if isinstance(a, Log)]
        assert f"cut by {quota_ms - left_ms:.3f} ms" in line


def test_a_token_is_timed_from_its_grant_until_the_scheduler_is_told_a_delivery():
    """Until its first REPORT the scheduler hands a client's GPU on at its grant's end, and so
    does a scheduler that connected anew."""
    pod = ready_pod()
    pod.on_hook_request(1, quota(1, burst=10.0), 9.99)
    [(_, first)] = replies(grant(pod, 10.0, 100.0, granted_at=9.9992))
    assert first.values[0] == pytest.approx(99.2)
    said_delivery(pod, 0.0008, at=11.0)
    pod.on_scheduler_connected(12.0)
    pod.on_hook_request(1, quota(2, burst=10.0), 12.99)
    [(_, again)] = replies(grant(pod, 13.0, 100.0, granted_at=12.9992))
    assert again.values[0] == pytest.approx(99.2)


@pytest.mark.parametrize("name", ["pod", "p" * 46])
def test_a_token_waits_for_no_more_than_the_scheduler_does(name):
    """Its median delivery 3 ms, of which the scheduler waits 2 (wire.DELIVERY_MAX_MS): a token
    that came 3 ms after its grant is cut by 1.  Beside a name over 39 bytes its REPORT says so
    by the name's alias (wire.report_name); with the name whole it said nothing, and the token
    waited for none, cut by 3."""
    pod = ready_pod(name=name)
    for k in range(3):
        now = 10.0 + 0.2 * k
        pod.on_hook_request(1, quota(100 + k, burst=1.0, name=name), now - 0.001)
        grant(pod, now, 1.0, granted_at=now - 0.003)
    [report] = [r for r in upstream(pod.on_deadline(11.0)) if r.type is RequestType.REPORT]
    said = wire.decode_request(wire.encode_request(report))
    assert said.name == wire.report_name(name)
    assert said.args[3:] == (pytest.approx(3.0), wire.REPORT_APPLIES_CUTS)
    pod.on_hook_request(1, quota(1, burst=10.0, name=name), 11.99)
    [(_, got)] = replies(grant(pod, 12.0, 100.0, granted_at=11.997))
    assert got.values[0] == pytest.approx(100.0 - 1.0)


def test_a_report_says_when_grants_came_not_how_much_of_them_was_cut():
    """Else each cut grant would pull the median down, and the hand-over's wait with it, until
    every token was timed from its grant."""
    pod = ready_pod()
    said_delivery(pod, 0.0004)
    for k in range(16):
        now = 11.0 + 0.01 * k
        pod.on_hook_request(1, quota(200 + k, burst=1.0), now - 0.001)
        grant(pod, now, 1.0, granted_at=now - 0.0006)  # each cut by 0.2 ms
    reports = [r for r in upstream(pod.on_deadline(12.0)) if r.type is RequestType.REPORT]
    assert [r.args[3] for r in reports] == [pytest.approx(0.6)]


def test_every_share_of_a_token_carries_its_flags():
    pod = ready_pod()
    pod.on_hook_request(1, quota(1, burst=10.0), 0.0)
    [(_, first)] = replies(grant(pod, 0.0, 100.0, wire.QUOTA_FLAG_ALONE))
    [(_, cached)] = replies(pod.on_hook_request(2, quota(1, burst=10.0), 0.01))
    assert first.values[1] == cached.values[1] == wire.QUOTA_FLAG_ALONE
    # The next token, granted while someone else waited, has none.
    pod.on_hook_request(1, quota(2, burst=10.0), 0.2)
    pod.on_hook_request(2, quota(2, burst=10.0), 0.2)
    assert [r.values[1] for _, r in replies(grant(pod, 0.2, 100.0))] == [0, 0]


def test_a_share_of_the_token_says_how_many_processes_share_it_now():
    """Those that asked for it within SHARING_S, or waited for it until now."""
    pod = ready_pod()
    pod.on_hook_connect(3, 0.0)  # connected, never asks (nvidia-smi under the hook): not one
    pod.on_hook_request(1, quota(1, burst=10.0), 0.0)
    pod.on_hook_request(2, quota(1, burst=10.0), 0.0)
    assert [r.values[2] for _, r in replies(grant(pod, 0.0, 100.0))] == [2, 2]
    # Process 1 stops asking; once SHARING_S has passed it no longer shares the token.
    later = SHARING_S + 0.04
    assert fetches(pod.on_hook_request(2, quota(2, burst=10.0), later))
    [(_, rsp)] = replies(grant(pod, later, 100.0))
    assert rsp.values[2] == 1


def test_processes_that_waited_longer_than_sharing_s_for_a_token_still_share_it():
    """A client capped at 0.1 waits up to 0.9 s for each grant: its processes asked long
    before the answer, and still want it."""
    pod = ready_pod()
    pod.on_hook_request(1, quota(1, burst=10.0), 0.0)
    pod.on_hook_request(2, quota(1, burst=10.0), 0.0)
    late = SHARING_S + 0.4
    assert [r.values[2] for _, r in replies(grant(pod, late, 100.0))] == [2, 2]


def test_fetch_reports_the_largest_overuse_burst_and_wait_on_the_gpu_and_the_runs_summed():
    pod = ready_pod()
    pod.on_hook_request(2, quota(1, burst=40.0), 0.0)
    grant(pod, 0.0, 100.0)
    pod.on_hook_request(2, quota(2, overuse=2.0, burst=40.0, gpu_wait=30.0, run=(20.0, 80)), 0.05)
    pod.on_hook_request(1, quota(1, overuse=9.0, burst=70.0, gpu_wait=4.0, run=(10.0, 40)), 0.06)
    pod.on_hook_request(3, quota(1, gpu_wait=1.0, run=(float("nan"), 7)), 0.07)  # (garbage)
    # Process 2 runs until 0.1 on the time it was handed; then the token goes back.
    [fetch] = fetches(pod.on_deadline(0.1))
    assert fetch.args == (9.0, 70.0, 30.0, 30.0, 120)
    # ...once: the next fetch carries only what was measured since.
    grant(pod, 0.1, 50.0)
    [fetch] = fetches(pod.on_hook_request(2, quota(3, burst=40.0, gpu_wait=2.0), 0.2))
    assert fetch.args[3:] == (0.0, 0)


def test_runs_whose_sum_is_no_f32_are_left_out_and_the_fetch_still_encodes():
    """(Three runs of 3e38 ms, each a valid f32, summed past the largest one: the fetch could not
    be encoded, and every later QUOTA of the client waited behind it for good.)"""
    pod = ready_pod()
    pod.on_hook_request(2, quota(1, burst=40.0), 0.0)
    grant(pod, 0.0, 100.0)
    for req_id, now in ((2, 0.01), (3, 0.02), (4, 0.03)):
        pod.on_hook_request(2, quota(req_id, burst=10.0, run=(3e38, 1)), now)
    [fetch] = fetches(pod.on_hook_request(2, quota(5, burst=40.0), 0.2))
    assert fetch.args[3:] == (pytest.approx(3e38), 1)
    wire.decode_request(wire.encode_request(fetch))


def test_no_token_is_fetched_for_processes_that_are_gone():
    """(A fetch waiting for another process's handed-out time, or for the scheduler, went out
    after the one process that wanted it had exited: the client was charged a token no one
    used.)"""
    pod = ready_pod()
    pod.on_hook_request(1, quota(1, burst=10.0), 0.0)
    grant(pod, 0.0, 100.0)
    pod.on_hook_request(1, quota(2, burst=40.0), 0.01)  # process 1 runs until 0.11
    assert fetches(pod.on_hook_request(2, quota(1, burst=80.0), 0.05)) == []  # waits for 1
    pod.on_hook_disconnect(2, 0.06)
    assert fetches(pod.on_deadline(0.06) + pod.on_deadline(0.2)) == []
    assert pod.fetch_at is None

    pod.on_hook_request(1, quota(3, burst=80.0), 0.3)  # a fetch goes out ...
    pod.on_scheduler_lost(0.31)  # ... and is lost with the scheduler: pending again
    pod.on_hook_disconnect(1, 0.32)
    assert fetches(pod.on_scheduler_connected(0.4)) == []
    assert pod.fetch_id is None


@pytest.mark.parametrize("quota_ms", [float("inf"), float("nan"), 4e6, -5.0])
def test_a_token_no_scheduler_grants_is_refused_not_cached(quota_ms):
    """(An endless token was cached and served to every process for good; the hooks refuse it
    and ask again, and the pod manager answered with the same.)"""
    pod = ready_pod()
    pod.on_hook_request(1, quota(1, burst=10.0), 0.0)
    out = grant(pod, 0.01, quota_ms)
    assert [(c, r.status) for c, r in replies(out)] == [(1, Status.BAD_REQUEST)]
    assert any("refused as none" in a.message for a in out if isinstance(a, Log))
    assert fetches(pod.on_hook_request(1, quota(2, burst=10.0), 0.02))  # asked anew


def test_a_fetch_says_no_wait_on_the_gpu_when_no_hook_said_one():
    pod = ready_pod()
    [fetch] = fetches(pod.on_hook_request(1, quota(1, burst=10.0), 0.0))
    assert fetch.args == (0.0, 10.0, None, 0.0, 0)


def test_an_overuse_reported_while_a_fetch_is_out_goes_with_the_next_fetch():
    pod = ready_pod()
    pod.on_hook_request(1, quota(1), 0.0)
    grant(pod, 0.0, 100.0)
    pod.on_hook_request(2, quota(1), 0.01)
    [first] = fetches(pod.on_hook_request(1, quota(2, overuse=3.0, burst=95.0), 0.1))
    assert first.args[0] == 3.0
    # Process 2 asks a moment later, its overuse with it: the fetch is already out.
    assert fetches(pod.on_hook_request(2, quota(2, overuse=7.0, burst=95.0), 0.1005)) == []
    grant(pod, 0.15, 40.0)
    [second] = fetches(pod.on_hook_request(1, quota(3, burst=95.0), 0.19))
    assert second.args[0] == 7.0  # (it used to be wiped when the token came: never charged)


def test_a_fetch_sent_again_carries_its_overuse_again():
    pod = ready_pod()
    pod.on_hook_request(1, quota(1), 0.0)
    grant(pod, 0.0, 100.0)
    upstream(pod.on_hook_request(1, quota(2, overuse=3.0, burst=95.0), 0.1))
    pod.on_scheduler_lost(0.11)
    pod.on_hook_request(2, quota(1, overuse=1.0, burst=95.0), 0.12)
    assert [r.args[0] for r in fetches(pod.on_scheduler_connected(0.2))] == [3.0]


def test_scheduler_refusal_reaches_every_waiting_process():
    pod = ready_pod()
    pod.on_hook_request(1, quota(1), 0.0)
    pod.on_hook_request(2, quota(1), 0.0)
    out = pod.on_upstream_response(Response(pod.fetch_id, Status.CLIENT_REMOVED), 0.0)
    assert [r.status for _, r in replies(out)] == [Status.CLIENT_REMOVED] * 2


def test_memory_reservations_never_exceed_the_limit():
    pod = ready_pod(limit=1000)
    assert replies(pod.on_hook_request(1, mem(1, 600), 0.0))[0][1].values == (1,)
    assert replies(pod.on_hook_request(2, mem(1, 500), 0.0))[0][1].values == (0,)
    assert replies(pod.on_hook_request(2, mem(2, 400), 0.0))[0][1].values == (1,)
    assert pod.used == 1000
    pod.on_hook_request(1, mem(2, 600, alloc=0), 0.0)
    assert pod.used == 400
    # A process cannot give back more than it holds.
    pod.on_hook_request(1, mem(3, 10_000, alloc=0), 0.0)
    assert pod.used == 400


def test_a_process_that_goes_away_gives_its_memory_back():
    pod = ready_pod()
    pod.on_hook_request(1, mem(1, 300), 0.0)
    pod.on_hook_request(2, mem(1, 200), 0.0)
    pod.on_hook_disconnect(1, 0.1)
    assert pod.used == 200
    limit = replies(pod.on_hook_request(2, Request("pod", 2, RequestType.MEM_LIMIT), 0.1))
    assert limit[0][1].values == (200, 1000, 0)


def test_memory_requests_wait_for_the_limit():
    pod = PodCore("pod", 0.0)
    pod.on_hook_connect(1, 0.0)
    assert pod.on_hook_request(1, mem(1, 10), 0.0) == []
    limit_req = upstream(pod.on_scheduler_connected(0.0))[0]
    out = pod.on_upstream_response(Response(limit_req.req_id, Status.OK, (0, 100)), 0.0)
    assert replies(out)[0][1].values == (1,)


def test_a_refused_limit_is_said_to_the_waiting_processes_and_asked_for_again():
    """A client not yet in the scheduler's config: its processes' memory calls hear the
    refusal (their hooks ask again), each asking anew, and once the client is added the
    answer comes (they waited for good: the scheduler never pushes a limit to a client it
    refused)."""
    pod = PodCore("pod", 0.0)
    pod.on_hook_connect(1, 0.0)
    ask = upstream(pod.on_scheduler_connected(0.0))[0]
    assert pod.on_hook_request(1, mem(1, 10), 0.0) == []  # (the limit is out already)
    out = pod.on_upstream_response(Response(ask.req_id, Status.UNKNOWN_CLIENT), 0.0)
    assert [r.status for _, r in replies(out)] == [Status.UNKNOWN_CLIENT]
    [again] = upstream(pod.on_hook_request(1, mem(2, 10), 1.0))  # the hook asks again
    assert again.type is RequestType.MEM_LIMIT
    out = pod.on_upstream_response(Response(again.req_id, Status.OK, (0, 100)), 1.0)
    assert replies(out) == [(1, Response(2, Status.OK, (1,)))]


def test_a_client_refused_a_token_asks_for_its_limit_with_the_next_one_it_gets():
    """Removed from the config and added again with another limit: the scheduler pushes that
    only to the clients it knows, so the pod manager kept the old one."""
    pod = ready_pod(limit=1000)
    pod.on_hook_request(1, quota(1), 0.0)
    pod.on_upstream_response(Response(pod.fetch_id, Status.CLIENT_REMOVED), 0.0)
    pod.on_hook_request(1, quota(2), 1.0)
    [ask] = [r for r in upstream(grant(pod, 1.0, 10.0)) if r.type is RequestType.MEM_LIMIT]
    pod.on_upstream_response(Response(ask.req_id, Status.OK, (0, 500)), 1.0)
    assert replies(pod.on_hook_request(1, mem(3, 600), 1.0))[0][1].values == (0,)
    pod.on_hook_request(1, quota(4), 1.1)
    assert not [r for r in upstream(grant(pod, 1.1, 10.0)) if r.type is RequestType.MEM_LIMIT]


def test_a_client_refused_a_report_asks_for_its_limit_with_the_next_one_served():
    """Removed from the config and added again with another limit while its processes only
    allocated memory (no token asked for): its reports were refused, and the pod manager kept
    the old limit for good (a review)."""
    pod = ready_pod(limit=1000)
    pod.on_deadline(0.2)
    pod.on_hook_request(1, mem(1, 5), 0.21)
    [report] = upstream(pod.on_deadline(pod.next_deadline()))
    out = pod.on_upstream_response(Response(report.req_id, Status.CLIENT_REMOVED), 0.3)
    assert [log.level for log in out if isinstance(log, Log)] == [logging.WARNING]
    [report] = upstream(pod.on_hook_request(1, mem(2, 5), 0.4))  # (due: sent with it)
    [ask] = upstream(pod.on_upstream_response(Response(report.req_id, Status.OK), 0.5))
    assert ask.type is RequestType.MEM_LIMIT
    pod.on_upstream_response(Response(ask.req_id, Status.OK, (10, 500)), 0.5)
    assert replies(pod.on_hook_request(1, mem(3, 600), 0.6))[0][1].values == (0,)


def test_a_token_that_comes_after_every_process_went_is_given_back_at_once():
    """The scheduler hands a holder's token on when its report says no process is left: sent
    at once, not when the reports' pace allows (the GPU idled meanwhile)."""
    pod = PodCore("pod", 0.0)
    limit_req = upstream(pod.on_scheduler_connected(0.0))[0]
    pod.on_upstream_response(Response(limit_req.req_id, Status.OK, (0, 1000)), 0.0)
    pod.on_hook_connect(1, 0.0)
    pod.on_hook_request(1, quota(1), 0.0)
    assert pod.fetch_id is not None
    pod.on_hook_disconnect(1, 0.01)
    reports = [r for r in upstream(grant(pod, 0.02, 50.0)) if r.type is RequestType.REPORT]
    assert [r.args[1] for r in reports] == [0]  # (processes)


def test_refusals_are_warned_of_once_until_the_client_is_served_again():
    """(Its hooks ask again every second or so for as long as it is not in the config.)"""
    def warnings(actions):
        return [a for a in actions if isinstance(a, Log) and a.level >= logging.WARNING]

    pod = ready_pod()
    seen = []
    for t in (0.0, 1.0, 2.0):
        pod.on_hook_request(1, quota(int(t) + 1), t)
        seen.append(len(warnings(
            pod.on_upstream_response(Response(pod.fetch_id, Status.UNKNOWN_CLIENT), t))))
    assert seen == [1, 0, 0]
    pod.on_hook_request(1, quota(9), 3.0)
    [ask] = [r for r in upstream(grant(pod, 3.0, 10.0)) if r.type is RequestType.MEM_LIMIT]
    pod.on_upstream_response(Response(ask.req_id, Status.OK, (0, 1000)), 3.0)
    pod.on_hook_request(1, quota(10), 4.0)
    assert len(warnings(
        pod.on_upstream_response(Response(pod.fetch_id, Status.CLIENT_REMOVED), 4.0))) == 1


def test_pushed_limit_applies_to_the_next_allocation():
    pod = ready_pod(limit=1000)
    pod.on_upstream_response(Response(-1, Status.OK, (0, 100)), 0.0)
    assert replies(pod.on_hook_request(1, mem(1, 500), 0.0))[0][1].values == (0,)


def test_wrong_client_name_is_refused_and_closed():
    pod = ready_pod()
    out = pod.on_hook_request(1, quota(1, name="other"), 0.0)
    assert replies(out)[0][1].status is Status.UNKNOWN_CLIENT
    assert any(isinstance(a, Close) for a in out)


def test_a_long_names_hooks_ask_for_tokens_by_its_alias():
    # (Beside a name over 31 bytes a token request carries the name's alias, gemini.core.wire)
    long = "a-client-whose-name-is-as-long-as-a-name-can-be"
    pod = ready_pod(name=long)
    sent = wire.decode_request(wire.encode_request(quota(1, burst=10.0, name=long, gpu_wait=3.0)))
    assert sent.name != long
    [fetch] = fetches(pod.on_hook_request(1, sent, 0.0))
    assert (fetch.name, fetch.args[:3]) == (long, (0.0, 10.0, 3.0))
    out = pod.on_hook_request(1, quota(2, name=long[:-1]), 0.0)  # (a name unlike its own)
    assert replies(out)[0][1].status is Status.UNKNOWN_CLIENT
    pod = ready_pod(name=long)  # (only token requests carry the alias; the rest, the name)
    out = pod.on_hook_request(1, Request(sent.name, 1, RequestType.MEM_LIMIT), 0.0)
    assert replies(out)[0][1].status is Status.UNKNOWN_CLIENT


def test_a_fetch_lost_with_the_scheduler_is_sent_again():
    pod = ready_pod()
    pod.on_hook_request(1, quota(1), 0.0)
    pod.on_scheduler_lost(0.1)
    assert upstream(pod.on_hook_request(2, quota(1), 0.2)) == []
    sent = upstream(pod.on_scheduler_connected(0.3))
    assert [r.type for r in sent][:2] == [RequestType.MEM_LIMIT, RequestType.QUOTA]
    got = replies(grant(pod, 0.3, 100.0))
    assert sorted(c for c, _ in got) == [1, 2]


def test_reports_are_rate_limited():
    pod = ready_pod()
    pod.on_deadline(0.2)
    pod.on_hook_request(1, mem(1, 5), 0.21)
    assert pod.next_deadline() == pytest.approx(0.3)
    [report] = upstream(pod.on_deadline(pod.next_deadline()))
    assert report.type is RequestType.REPORT and report.args == (
        5, 1, 0, 0.0, wire.REPORT_APPLIES_CUTS)  # (no grant
    # yet: its delivery is not known; one process, the one that holds memory)


def test_a_report_counts_the_processes_that_asked_for_a_token_or_hold_memory():
    """Not one that only reads NVML under the hook (nvidia-smi asks for the limit, to show it):
    counted, it put an uncapped client on shares by time, as one of several processes, for as
    long as it ran (a review)."""
    pod = ready_pod()  # (hooks 1 and 2 connected)
    pod.on_hook_connect(3, 0.0)
    pod.on_hook_request(3, Request("pod", 1, RequestType.MEM_LIMIT, ()), 0.0)  # the reader
    pod.on_deadline(0.2)
    pod.on_hook_request(1, quota(1), 0.3)
    grant(pod, 0.3, 50.0)
    [report] = upstream(pod.on_hook_request(2, mem(1, 5), 0.31))  # (due: sent with it)
    assert report.type is RequestType.REPORT and report.args[1] == 2


def test_a_report_says_how_long_the_latest_grants_took_to_come():
    """Their median, for gem-schd --hand-over-at-arrival; a grant that says nothing of when
    it was made, or reads as made later or long before, counts for nothing."""
    pod = ready_pod()
    for k, (delay, granted_at) in enumerate([(0.0004, None), (0.0009, None), (0.0005, None),
                                             (0.0, 0.0), (0.0, 20.0), (0.0, 10.0)]):
        now = 10.0 + 0.2 * k
        pod.on_hook_request(1, quota(k + 1, burst=1.0), now - 0.001)
        grant(pod, now, 1.0, granted_at=now - delay if granted_at is None else granted_at)
    reports = [r for r in upstream(pod.on_deadline(11.5)) if r.type is RequestType.REPORT]
    assert [r.args[3] for r in reports] == [pytest.approx(0.5)]
    # A scheduler connected anew (perhaps on another clock): not known until its grants come.
    [report] = [r for r in upstream(pod.on_scheduler_connected(12.0))
                if r.type is RequestType.REPORT]
    assert report.args[3] == 0.0


def test_a_pod_manager_that_times_its_tokens_from_the_grant_reports_they_trail_it_by_nothing():
    """(gem-pmgr --time-from-grant: else gem-schd --hand-over-at-arrival would wait for a
    delay its hook's token no longer has.)"""
    pod = ready_pod(time_from_grant=True)
    pod.on_hook_request(1, quota(1, burst=1.0), 9.99)
    grant(pod, 10.0, 100.0, granted_at=9.9994)
    reports = [r for r in upstream(pod.on_deadline(10.5)) if r.type is RequestType.REPORT]
    assert [r.args[3] for r in reports] == [0.0]


def test_token_is_not_returned_while_another_process_runs_on_it():
    pod = ready_pod()
    pod.on_hook_request(1, quota(1, burst=10.0), 0.0)
    grant(pod, 0.0, 100.0)  # both processes may run until 0.1
    left = replies(pod.on_hook_request(2, quota(1, burst=10.0), 0.01))[0][1].values[0]
    assert left == pytest.approx(90.0)
    # Process 1's next burst does not fit: it must wait until process 2's time ends (0.1) ...
    assert upstream(pod.on_hook_request(1, quota(2, burst=95.0), 0.02)) == []
    assert pod.next_deadline() == pytest.approx(0.1)
    [fetch] = fetches(pod.on_deadline(0.1))
    assert fetch.args[1] == 95.0


def test_a_waiting_fetch_goes_at_once_when_the_others_ask_too():
    pod = ready_pod()
    pod.on_hook_request(1, quota(1), 0.0)
    grant(pod, 0.0, 100.0)
    pod.on_hook_request(2, quota(1), 0.01)
    assert upstream(pod.on_hook_request(1, quota(2, burst=95.0), 0.02)) == []
    # Process 2 asks again: it gave back its time, nobody runs on the token any more.
    sent = upstream(pod.on_hook_request(2, quota(2, burst=95.0), 0.03))
    assert [r.type for r in sent][:1] == [RequestType.QUOTA]


def test_a_reply_to_no_request_and_a_free_past_what_a_process_holds_are_said():
    """Each means the two sides' books disagree (the hook says so of a reply out of step):
    they were ignored, and counted as what the process held, without a word."""
    pod = ready_pod()
    [said] = pod.stray_reply(12345)
    assert said.level == logging.WARNING and "id 12345" in said.message
    pod.on_hook_request(1, mem(1, 100), 0.0)
    out = pod.on_hook_request(1, mem(2, 5000, wire.MEM_FREE), 0.0)
    assert replies(out) == [(1, Response(2, Status.OK, (1,)))] and pod.used == 0
    [said] = [a for a in out if isinstance(a, Log)]
    assert said.level == logging.WARNING and "freed 5000 B, more than the 100 B" in said.message


def cut(pod, now, left_ms, status=Status.OK):
    return pod.on_upstream_response(Response(wire.CUT_ID, status, (left_ms, 0, 0, now)), now)


def says_it_reads_cuts(pod, conn, reads=True):
    features = (wire.PROCESS_READS_CUTS,) if reads else ()  # (a v1 hook sends no PROCESS)
    pod.on_hook_request(conn, Request("pod", 90, RequestType.PROCESS, (100 + conn, -1, *features)),
                        0.0)


def test_a_token_cut_by_the_scheduler_is_cut_for_each_process_handed_time_past_it():
    """A lowered cap: the scheduler cut the grant (wire.CUT_ID).  Each process handed time
    past the new end is told (its hook stops launching then), and the next to ask finds the
    token spent, so the next fetch waits for no process's old time.  A hook that did not say
    it reads cuts is not sent one (a v1 hook would take it for its next reply), and a fetch
    waits for its time, which it runs on to."""
    pod = ready_pod()
    pod.on_hook_connect(3, 0.0)
    for conn in (1, 2):
        says_it_reads_cuts(pod, conn)
        pod.on_hook_request(conn, quota(1, burst=10.0), 0.0)
    pod.on_hook_request(3, quota(1, burst=10.0), 0.0)
    grant(pod, 0.0, 300.0, flags=wire.QUOTA_FLAG_ALONE)
    # Process 2's hook asks for the next token in its tail (its renewer), launching on until
    # the answer: it still runs on this token, and is told too.
    pod.on_hook_request(2, quota(2, burst=500.0), 0.05)
    out = cut(pod, 0.1, 20.0)
    told = replies(out)
    assert [c for c, _ in told] == [1, 2]
    assert all(r.req_id == wire.CUT_ID and r.values[0] == 20.0 for _, r in told)
    assert any(isinstance(a, Log) and "cut by the scheduler" in a.message for a in out)
    # A process that asks after the cut's end is handed no time, and not told it is alone
    # (a capped client's token is not); the fetch waits for process 3's time, to 0.3.
    assert fetches(pod.on_hook_request(1, quota(3, burst=10.0), 0.121)) == []
    assert pod.fetch_at == pytest.approx(0.3) and pod.quota_flags & wire.QUOTA_FLAG_ALONE == 0
    # ...and process 3's part past the cut is charged as overuse with it (the scheduler
    # handed the GPU on at the cut; its hook counts its overuse from 0.3 only).
    [fetch] = fetches(pod.on_deadline(0.3))
    assert fetch.args[0] == pytest.approx(180.0)
    # A process that asked since is not told again; one cut that ends later cuts nothing.
    assert replies(cut(pod, 0.125, 50.0)) == []


@pytest.mark.parametrize("left_ms, status", [(float("nan"), Status.OK), (-1.0, Status.OK),
                                              (5.0, Status.BAD_REQUEST)])
def test_a_garbage_cut_is_said_and_ignored(left_ms, status):
    pod = ready_pod()
    pod.on_hook_request(1, quota(1, burst=10.0), 0.0)
    grant(pod, 0.0, 300.0)
    out = cut(pod, 0.1, left_ms, status)
    assert replies(out) == [] and any(isinstance(a, Log) and a.level == logging.WARNING
                                      for a in out)
    [(_, left)] = replies(pod.on_hook_request(1, quota(2, burst=10.0), 0.2))
    assert left.values[0] == pytest.approx(100.0)
