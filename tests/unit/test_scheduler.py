"""The scheduler core on a virtual clock: shares, caps, early return, dead clients, reloads."""

import dataclasses
import itertools
import logging
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemini.core.actions import Log, Reply
from gemini.core.config import ClientSpec, ResourceConfig
from gemini.core.scheduler import (
    HAND_OVER_DELAY_MAX_S,
    WINDOW_EDGE,
    SchedulerCore,
    Timing,
)
from gemini.core.wire import (
    CUT_ID,
    NOTIFY_ID,
    QUOTA_FLAG_ALONE,
    REPORT_APPLIES_CUTS,
    Request,
    RequestType,
    Status,
)
from tests.unit.sim import GpuClock, Sim


def promised(specs: list[tuple[str, float, float]]) -> dict[str, float]:
    """What Gemini's policy promises saturating clients: each its request, the rest shared so
    that usage is as equal as possible, no one above its limit (water-filling)."""

    def total(level: float) -> float:
        return sum(min(max(r, level), lim) for _, r, lim in specs)

    if total(1.0) <= 1.0:
        return {n: lim for n, _, lim in specs}
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if total(mid) < 1.0 else (lo, mid)
    return {n: min(max(r, lo), lim) for n, r, lim in specs}


# The launchers' defaults (base 300 ms, minimum 20 ms, 10 s window); hooks report 50 ms bursts.
LAUNCHER = Timing(0.300, 0.020, 10.0)
# ...with capped neighbours each in 100 ms turns (gem-schd --no-shared-turns; caps that add up
# past SHARED_TURNS_MAX are in these anyway): the tests of that path.
HUNDRED_MS_TURNS = dataclasses.replace(LAUNCHER, shared_turns=False)
# Without the short window: Gemini's own quota lengths, for the tests of its mechanics.
WHOLE_QUOTAS = Timing(short_window_s=0.0)


def run_shares(specs, seconds=60.0, timing=LAUNCHER, burst_ms=50.0, idle_returns=False):
    sim = Sim(specs, timing=timing, burst_ms=burst_ms, idle_returns=idle_returns)
    for name, _, _ in specs:
        sim.start(name)
    sim.run_until(seconds)
    return {n: sim.share(n, 0.0, seconds) for n, _, _ in specs}, sim


SCENARIOS = {
    "2 clients 0.3/0.7": [("a", 0.3, 1.0), ("b", 0.7, 1.0)],
    "2 clients 0.5/0.5": [("a", 0.5, 0.5), ("b", 0.5, 0.5)],
    "3 clients 0.2/0.2/0.6": [("a", 0.2, 1.0), ("b", 0.2, 1.0), ("c", 0.6, 1.0)],
    "4 clients 0.1/0.2/0.3/0.4": [("a", 0.1, 1), ("b", 0.2, 1), ("c", 0.3, 1), ("d", 0.4, 1)],
    "2 clients, spare shared": [("a", 0.2, 0.6), ("b", 0.2, 1.0)],
    "16 clients": [(f"c{i}", 0.02 + 0.005 * i, 1.0) for i in range(16)],
    "16 clients, capped": [(f"c{i}", 0.03, 0.05 + 0.01 * (i % 4)) for i in range(16)],
    "1 client capped at 0.4": [("solo", 0.1, 0.4)],
}


@pytest.mark.parametrize("idle_returns", [False, True])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_saturating_shares_within_one_point_of_the_promise(name, idle_returns):
    specs = SCENARIOS[name]
    shares, _ = run_shares(specs, idle_returns=idle_returns)
    expected = promised(specs)
    errors = {n: abs(shares[n] - expected[n]) for n in shares}
    # Capped clients also wait for room in the 1 s window; sixteen of them, whose limits add
    # up to more than the GPU, fragment it: they end up to 1.5 points under their promise.
    tolerance = 0.015 if "capped" in name else 0.01
    assert max(errors.values()) <= tolerance, (shares, expected)


@pytest.mark.parametrize(
    "name",
    [
        "2 clients 0.3/0.7",
        "3 clients 0.2/0.2/0.6",
        "4 clients 0.1/0.2/0.3/0.4",
        "1 client capped at 0.4",
    ],
)
def test_static_quotas_also_within_one_point(name):
    # The binary's defaults (250 ms quotas, 100 ms minimum) and no burst information.
    specs = SCENARIOS[name]
    shares, _ = run_shares(specs, timing=Timing(), burst_ms=0.0)
    expected = promised(specs)
    # A 100 ms minimum quota is a tenth of the 1 s window a cap also holds over: a capped
    # client waits for room for most of one, and ends up to 1.5 points under its limit.
    tolerance = 0.015 if "capped" in name else 0.01
    assert max(abs(shares[n] - expected[n]) for n in shares) <= tolerance, (shares, expected)


def test_limit_caps_usage_in_every_window():
    # Paced (policy.Pacer), a capped client's grants start 1 / limit of their length apart, and
    # a window holds its limit and at most WINDOW_EDGE of one more grant (100 ms grants here,
    # the minimum quota), a client catching up on its pace included.
    specs = [("a", 0.1, 0.4), ("b", 0.1, 0.3)]
    _, sim = run_shares(specs, seconds=60.0, timing=Timing(), burst_ms=0.0)
    window, grant = Timing().window_s, Timing().min_quota_s
    for t in range(10, 60):
        for name, _, limit in specs:
            used = sim.share(name, t - window, t) * window
            assert used <= limit * window + WINDOW_EDGE * grant + 1e-9


def test_overuse_is_charged_at_the_end_of_the_last_grant_and_given_back_to_the_next():
    """a's work ran 30 ms past its token, into b's: a is charged those 30 ms, and b, which did
    not have the GPU for them, is given them back (else the overrun is paid twice: by a in its
    usage, by b in its grant)."""
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    core.on_request(1, quota_req("a", 1), 0.0)  # granted until 0.25
    core.on_request(2, quota_req("b", 1), 0.1)
    core.on_deadline(0.25)  # a's quota ends; b's starts
    b_credit = core.credits.of("b")
    core.on_request(1, quota_req("a", 2, overuse=30.0), 0.3)
    first_a = core.history.latest("a")
    assert (first_a.start, first_a.end) == (0.0, 0.25)  # the grant itself is not stretched
    usage = core.history.usage(0.0, 0.3)
    assert usage["a"] == pytest.approx(0.25 + 0.03)
    assert usage["b"] == pytest.approx(0.05 - 0.03)
    # (and earned: half while a was expected back, within its grace, then all, alone)
    grace = WHOLE_QUOTAS.return_grace_s
    earned = 0.5 * grace + 1.0 * (0.05 - grace)
    assert core.credits.of("b") - b_credit == pytest.approx(0.03 + earned)
    b = next(c for c in core.snapshot(0.3)["clients"] if c["name"] == "b")
    assert b["overrun_s"] == pytest.approx(0.03)


def test_an_overrun_is_given_back_to_each_client_granted_meanwhile_as_far_as_it_reached():
    specs = (("a", 0.3, 1, 1), ("b", 0.3, 1, 1), ("c", 0.3, 1, 1))
    timing = Timing(base_quota_s=0.01, min_quota_s=0.01, short_window_s=0.0)
    core = SchedulerCore(config(*specs), timing, 0.0)
    core.on_request(1, quota_req("a", 1), 0.0)  # a until 0.01
    core.on_request(2, quota_req("b", 1), 0.001)
    core.on_request(3, quota_req("c", 1), 0.002)
    core.on_deadline(0.01)  # b until 0.02
    core.on_deadline(0.02)  # c until 0.03
    core.on_request(1, quota_req("a", 2, overuse=15.0), 0.025)  # a ran on until 0.025
    usage = core.history.usage(0.0, 0.025)
    assert usage["a"] == pytest.approx(0.01 + 0.015)
    assert usage["b"] == pytest.approx(0.01 - 0.01)  # all of b's grant
    assert usage["c"] == pytest.approx(0.005 - 0.005)  # c's first 5 ms


def test_an_overrun_reported_before_the_next_grant_is_given_back_to_that_grant():
    """a hands its token back with 30 ms of overuse (its queue still runs): b's grant, made
    just after, loses those 30 ms to it.  No grant covered them when they were reported, so
    b was given nothing back."""
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    core.on_request(1, quota_req("a", 1), 0.0)  # granted until 0.25
    core.on_request(2, quota_req("b", 1), 0.1)
    core.on_request(1, quota_req("a", 2, overuse=30.0), 0.2)  # returned early; b's turn
    assert core.holder is not None and core.holder.interval.name == "b"
    usage = core.history.usage(0.0, 0.3)
    assert usage["a"] == pytest.approx(0.2 + 0.03)
    assert usage["b"] == pytest.approx(0.1 - 0.03)
    b = next(c for c in core.snapshot(0.3)["clients"] if c["name"] == "b")
    assert b["overrun_s"] == pytest.approx(0.03)
    # ... once: the grants after b's are not given it again
    core.on_request(2, quota_req("b", 2), 0.21)  # returned early; a's turn, then b's
    core.on_request(1, quota_req("a", 3), 0.22)
    assert [c["overrun_s"] for c in core.snapshot(0.22)["clients"]] == pytest.approx([0.0, 0.03])


@pytest.mark.parametrize("seed", [1, 2])
def test_a_client_whose_work_runs_past_every_token_takes_its_share_not_more(seed):
    """a's queue runs 10 ms past each of its tokens, into b's turn, and a reports it with its
    next request: charged to a and given back to b, the GPU's work splits as the shares say
    (on the simulator a did 0.522-0.526 of it while the refund missed the grants made after a
    reported, and a client of two processes on the fake GPU 0.52-0.53)."""
    sim = Sim([("a", 0.5, 1.0), ("b", 0.5, 1.0)], timing=LAUNCHER, seed=seed,
              overrun_s={"a": 0.010})
    sim.start("a")
    sim.start("b", 0.001)
    sim.run_until(20.0)
    assert sim.ran_share("a", 2.0, 20.0) == pytest.approx(0.5, abs=0.01)
    assert sim.ran_share("b", 2.0, 20.0) == pytest.approx(0.5, abs=0.01)


def test_an_overrun_into_the_clients_own_next_grant_is_not_given_back():
    core = SchedulerCore(config(("a", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    core.on_request(1, quota_req("a", 1), 0.0)
    core.on_request(1, quota_req("a", 2), 0.2)  # returned early, renewed
    core.on_request(1, quota_req("a", 3, overuse=30.0), 0.4)
    assert core.history.usage(0.0, 0.4)["a"] == pytest.approx(0.4 + 0.03)


def test_a_large_overuse_holds_a_capped_client_back_as_long_as_its_window_and_no_longer():
    """2 s past its token at a cap of 0.1: its 10 s window holds it back until the overuse
    leaves it, 10 s on; its pace held it for 2 / 0.1 = 20 s."""
    core = SchedulerCore(config(("a", 0.1, 0.1, 1)), LAUNCHER, 0.0)
    [g] = grants(core.on_request(1, quota_req("a", 1, burst=10.0), 0.0))
    end = g.response.values[0] / 1000
    assert not grants(core.on_request(1, quota_req("a", 2, overuse=2000.0, burst=10.0), end))
    now = end
    while not grants(core.on_deadline(now)):
        deadline = core.next_deadline()
        assert deadline is not None and deadline > now
        now = deadline
    assert end + 10.0 <= now <= end + 10.5


def test_overuse_of_a_token_returned_early_is_charged_too():
    """The hook asks for its next token before the current one ends and reports the previous
    token's overuse with it (measured meanwhile): Gemini's `min(now, end + overuse)` lost it."""
    core = SchedulerCore(config(("a", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    core.on_request(1, quota_req("a", 1), 0.0)
    core.on_request(1, quota_req("a", 2), 0.2)  # returned early, renewed
    core.on_request(1, quota_req("a", 3, overuse=5.0), 0.4)  # returned early again
    assert core.history.usage(0.0, 0.4)["a"] == pytest.approx(0.4 + 0.005)


@pytest.mark.parametrize("bad", [-3.0, float("nan"), float("inf"), 0.0])
def test_no_overuse_charges_nothing(bad):
    core = SchedulerCore(config(("a", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    core.on_request(1, quota_req("a", 1), 0.0)
    core.on_request(1, quota_req("a", 2, overuse=bad), 0.2)
    assert core.history.usage(0.0, 0.2)["a"] == pytest.approx(0.2)
    assert all(not i.extra for i in core.history.intervals)


def config(*specs) -> ResourceConfig:
    return ResourceConfig(tuple(ClientSpec(n, r, lim, mem) for n, r, lim, mem in specs))


def quota_req(name, req_id, overuse=0.0, burst=0.0):
    return Request(name, req_id, RequestType.QUOTA, (overuse, burst))


def grants(actions):
    return [a for a in actions if isinstance(a, Reply) and a.type is RequestType.QUOTA]


def test_early_return_hands_the_token_over_at_once():
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    [g] = grants(core.on_request(1, quota_req("a", 1), 0.0))
    assert g.conn == 1 and g.response.values == (250.0, QUOTA_FLAG_ALONE, 0, 0.0)  # (sharers: not
    # said; granted at 0.0)
    assert grants(core.on_request(2, quota_req("b", 1), 0.01)) == []  # a holds it
    # a comes back early (its next request): b gets the token now, not at 0.25 s.
    [g] = grants(core.on_request(1, quota_req("a", 2), 0.05))
    assert g.conn == 2
    assert core.history.latest("a").end == pytest.approx(0.05)


def test_a_token_says_when_it_was_granted_at_the_holders_deadline_too():
    """The pod manager times the token from then (wire.py, granted_at), not from when the
    grant reached it."""
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    [g] = grants(core.on_request(1, quota_req("a", 1), 1.5))
    assert g.response.values[3] == 1.5
    core.on_request(2, quota_req("b", 1), 1.6)
    deadline = core.next_deadline()
    assert deadline is not None and deadline > 1.6
    [g] = grants(core.on_deadline(deadline))
    assert g.conn == 2 and g.response.values[3] == deadline


def test_a_token_says_alone_only_when_no_one_else_wants_the_gpu_and_there_is_no_cap():
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1), ("c", 0.3, 0.4, 1)),
                         Timing(), 0.0)
    flags = [g.response.values[1] for g in grants(core.on_request(1, quota_req("a", 1), 0.0))]
    assert flags == [QUOTA_FLAG_ALONE]  # alone, uncapped
    core.on_request(2, quota_req("b", 1), 0.01)
    # b got the token when a's ran out, with a expected back (the return grace): not alone
    [g] = grants(core.on_deadline(core.next_deadline()))
    assert g.conn == 2 and g.response.values[1] == 0
    # a asks just before b's token runs out, and b is owed more (it waited out a's first
    # grant; a did not want the GPU while b held it): a waits for b's return grace, and goes
    # alone when b has not come back
    core.on_request(1, quota_req("a", 2), core.next_deadline() - 0.001)
    assert grants(core.on_deadline(core.next_deadline())) == []
    [g] = grants(core.on_deadline(core.next_deadline()))
    assert g.conn == 1 and g.response.values[1] == QUOTA_FLAG_ALONE
    capped = SchedulerCore(config(("c", 0.3, 0.4, 1)), Timing(), 0.0)
    [g] = grants(capped.on_request(3, quota_req("c", 1), 0.0))
    assert g.response.values[1] == 0  # a capped client alone must still stop at its cap


def test_dead_holder_frees_the_token_and_its_queued_requests():
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), Timing(), 0.0)
    core.on_request(1, quota_req("a", 1), 0.0)
    core.on_request(2, quota_req("b", 1), 0.0)
    [g] = grants(core.on_disconnect(1, 0.1))
    assert g.conn == 2
    assert core.history.latest("a").end == pytest.approx(0.1)


def report(name, req_id, processes):
    return Request(name, req_id, RequestType.REPORT, (0, processes, 0))


def test_a_holder_whose_pod_manager_dies_keeps_the_gpu_until_its_grant_ends():
    """Its processes' hooks run on to their token's end without their pod manager: a grant
    made at once would share the GPU with them for the rest of it (a review, 2026-12-05).
    Its processes gone, or never reported, the token is taken back at once (above).  At its
    end no grace is waited for its next request, which cannot come (b, owed less than a,
    waited 5 ms more behind it)."""
    core = SchedulerCore(config(("a", 0.9, 1, 1), ("b", 0.1, 1, 1)), Timing(), 0.0)
    core.on_request(1, report("a", 1, 2), 0.0)
    core.on_request(1, quota_req("a", 2), 0.0)
    core.on_request(2, quota_req("b", 1), 0.0)
    [g] = grants(core.on_request(1, quota_req("a", 3), 0.001))  # a is done with its first
    assert g.conn == 2
    [g] = grants(core.on_deadline(core.next_deadline()))  # b's ended: a's turn again
    assert g.conn == 1
    end = core.history.latest("a").end
    out = core.on_disconnect(1, end - 0.05)
    assert grants(out) == []
    assert any("the token ends as granted" in a.message for a in out if isinstance(a, Log))
    assert grants(core.on_request(2, quota_req("b", 2), end - 0.0005)) == []
    assert core.next_deadline() == pytest.approx(end)
    [g] = grants(core.on_deadline(end))
    assert g.conn == 2
    assert core.history.latest("a").end == end  # charged its whole grant


def test_a_holder_is_kept_by_what_its_own_pod_manager_said_of_its_processes():
    """A client's processes are told per pod manager: another of its pod managers that last
    said none does not make the holder's processes gone (the token was taken back at once,
    and b shared the GPU with them; a review)."""
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), Timing(), 0.0)
    core.on_request(1, report("a", 1, 2), 0.0)
    core.on_request(1, quota_req("a", 2), 0.0)
    core.on_request(3, report("a", 1, 0), 0.001)  # its other pod manager, on another node
    end = core.history.latest("a").end
    core.on_request(2, quota_req("b", 1), 0.01)
    assert grants(core.on_disconnect(1, 0.02)) == []
    [g] = grants(core.on_deadline(core.next_deadline()))
    assert g.conn == 2 and core.history.latest("a").end == end


def test_a_dead_pod_managers_grant_is_not_cut_by_its_successor():
    """A process that asks through the restarted pod manager does not end the grant the other
    processes' hooks still run (else the next client shared the GPU with them), and the
    hand-over keeps the delivery delay its pod manager had said (a review)."""
    timing = dataclasses.replace(Timing(), hand_over_at_arrival=True)
    core = SchedulerCore(config(("a", 0.9, 1, 1), ("b", 0.1, 1, 1)), timing, 0.0)
    core.on_request(1, Request("a", 1, RequestType.REPORT, (0, 2, 0, 1.5)), 0.0)
    core.on_request(1, quota_req("a", 2), 0.0)
    end = core.history.latest("a").end
    core.on_disconnect(1, 0.01)
    assert grants(core.on_request(3, quota_req("a", 1), 0.02)) == []  # its new pod manager
    assert core.history.latest("a").end == end
    assert grants(core.on_request(2, quota_req("b", 1), end - 0.0005)) == []
    deadline = core.next_deadline()
    assert deadline == pytest.approx(end + 0.0015)
    [g] = grants(core.on_deadline(deadline))
    assert g.conn in (2, 3)  # the GPU goes on at once, to whoever the shares pick


@pytest.mark.parametrize(("at_arrival", "delivery_ms", "later_ms"), [
    (True, 0.6, 0.6),
    (True, 7.0, 2.0),  # (HAND_OVER_DELAY_MAX_S)
    (True, float("nan"), 0.0),
    (True, -1.0, 0.0),
    (False, 0.6, 0.0),  # the default: at the grant's end
])
def test_with_hand_over_at_arrival_the_gpu_goes_on_when_the_holders_grant_reached_it(
        at_arrival, delivery_ms, later_ms):
    """The holder's hook times its token from its receipt, as long after the grant as its
    pod manager reports its grants took to come."""
    timing = dataclasses.replace(WHOLE_QUOTAS, hand_over_at_arrival=at_arrival)
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), timing, 0.0)
    core.on_request(1, Request("a", 1, RequestType.REPORT, (0, 1, 0, delivery_ms)), 0.0)
    [g] = grants(core.on_request(1, quota_req("a", 2), 0.0))
    assert grants(core.on_request(2, quota_req("b", 1), 0.01)) == []
    end = core.history.latest("a").end
    assert core.next_deadline() == pytest.approx(end + later_ms / 1000)
    if later_ms:
        assert grants(core.on_deadline(end)) == []  # (a timer that came early: not yet)
    [g] = grants(core.on_deadline(core.next_deadline()))
    assert g.conn == 2
    assert core.history.latest("a").end == end  # a is charged its grant, no more


def _holding_b(kind: str) -> tuple[SchedulerCore, float]:
    """A core where b holds a grant made while a waited (a asks again for its next at its
    own hand-over, and is owed the most at b's), each pod manager having said its grants take
    0.3 ms to come; b's hand-over."""
    timing = dataclasses.replace(WHOLE_QUOTAS, hand_over_at_arrival=True)
    limit = 0.5 if kind == "capped" else 1.0
    spec_b = ClientSpec("b", 0.3, limit, 1, unified_memory=kind == "um")
    core = SchedulerCore(ResourceConfig((ClientSpec("a", 0.7, 1.0, 1), spec_b)), timing, 0.0)
    for conn, name in ((1, "a"), (2, "b")):
        core.on_request(conn, Request(name, 1, RequestType.REPORT, (0, 1, 0, 0.3)), 0.0)
    [_] = grants(core.on_request(1, quota_req("a", 2), 0.0))
    assert grants(core.on_request(2, quota_req("b", 2), 0.001)) == []
    first_hand_over = core.next_deadline()
    assert grants(core.on_request(1, quota_req("a", 3), first_hand_over - 0.0005)) == []
    [g] = grants(core.on_deadline(first_hand_over))
    assert g.conn == 2  # (b, owed the most)
    return core, core.next_deadline()


@pytest.mark.parametrize(("kind", "ahead_ms", "renews"), [
    ("uncapped", 0.5, True),  # its hook's tail still runs: the GPU goes on at the hand-over
    ("uncapped", 1.5, True),
    ("uncapped", 0.1, True),  # (after its grant's end, before its hook's token's)
    ("uncapped", 2.5, False),  # its work ran out: the GPU goes on now
    ("uncapped", 10.0, False),
    ("capped", 0.5, True),
    ("um", 0.5, False),  # (its hook stops at the ask, and says its overuse from there)
])
def test_a_holder_that_asks_ahead_keeps_the_gpu_to_its_hand_over(kind, ahead_ms, renews):
    """A hook asks for its next token with up to 1 ms of its queue left, run to its token's
    end.  Handed over at the request, the next holder's first launches met that queue on the
    H100, the GPU switched contexts, and the rest of the queue ran a time slice later: 2.2-2.9
    ms past the token in 7 % of the tokens of pairs of JAX (RENEWAL_LEAD_S).  The overuse the
    request says is charged at the grant's end, as after an expiry."""
    core, hand_over = _holding_b(kind)
    granted = core.history.latest("b")
    end = granted.end
    assert hand_over == pytest.approx(end + 0.0003)
    asked_at = hand_over - ahead_ms / 1000
    after_ask = grants(core.on_request(2, quota_req("b", 3, overuse=5.0), asked_at))
    if not renews:
        assert len(after_ask) == 1  # the GPU goes on now
        assert granted.end == pytest.approx(min(end, asked_at))
        return
    assert after_ask == []
    assert granted.end == end  # charged its whole grant, which its queue ran to the end of
    [charge] = [i for i in core.history.intervals if i.name == "b" and i.extra]
    assert (charge.start, charge.extra) == (end, pytest.approx(0.005))
    assert core.next_deadline() == pytest.approx(hand_over)
    assert grants(core.on_deadline(hand_over - 0.0001)) == []
    assert len(grants(core.on_deadline(hand_over))) == 1


@pytest.mark.parametrize(("grace_ms", "renews"), [
    (5.0, True),  # a, expired, may still ask at b's hand-over: b's request is its hook renewing
    (1.0, False),  # a's grace ran out before it: b alone returns its token, granted again now
])
def test_an_expired_holders_grace_counts_as_waiting_only_while_it_outlasts_the_hand_over(
        grace_ms, renews):
    """(Grants of a few ms: the grace matters where a grant is shorter than it.  A stale grace
    made every request a renewal, a review found.)"""
    timing = Timing(base_quota_s=0.003, min_quota_s=0.001, short_window_s=0.0,
                    return_grace_s=grace_ms / 1000, hand_over_at_arrival=True)
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), timing, 0.0)
    [_] = grants(core.on_request(1, quota_req("a", 1), 0.0))
    assert grants(core.on_request(2, quota_req("b", 1), 0.001)) == []
    [g] = grants(core.on_deadline(0.003))  # a's grant ends, and a has not asked again
    assert g.conn == 2
    hand_over = core.next_deadline()
    assert hand_over == pytest.approx(0.0045)  # (b's turn of a 3 ms round)
    after_ask = grants(core.on_request(2, quota_req("b", 2), hand_over - 0.0005))
    assert (after_ask == []) == renews


@pytest.mark.parametrize(("ahead_ms", "renews"), [(0.5, False), (5.5, True), (7.0, False)])
def test_a_holder_granted_alone_may_ask_sooner_and_still_renew(ahead_ms, renews):
    """A grant made alone lets its hook ask up to 4 ms sooner still, to go on without a gap
    (QUOTA_FLAG_ALONE), its queue running to the end: a newcomer that came meanwhile waits for
    that end (ALONE_RENEWAL_LEAD_S).  With no one waiting, the request returns it (0.5 ms)."""
    timing = dataclasses.replace(WHOLE_QUOTAS, hand_over_at_arrival=True)
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), timing, 0.0)
    [_] = grants(core.on_request(1, quota_req("a", 1), 0.0))
    end = core.history.latest("a").end
    if renews or ahead_ms > 5:
        assert grants(core.on_request(2, quota_req("b", 1), 0.001)) == []
    after_ask = grants(core.on_request(1, quota_req("a", 2), end - ahead_ms / 1000))
    if renews:
        assert after_ask == []
        assert core.history.latest("a").end == end
    else:
        [g] = after_ask
        assert g.conn == (1 if ahead_ms < 5 else 2)


def overlap_s(sim: Sim, names: list[str]) -> float:
    """How long two clients' work ran at once, summed over every pair."""
    total = 0.0
    for x, y in itertools.combinations(names, 2):
        for s1, e1 in sim.clients[x].busy:
            for s2, e2 in sim.clients[y].busy:
                total += max(0.0, min(e1, e2) - max(s1, s2))
    return total


def test_in_the_simulator_hand_overs_at_arrival_end_the_overlaps_and_keep_the_shares():
    """Grants reach their clients 0.2-1 ms after they are made (as on the H200), and each
    client works for its quota from then (its pod manager cutting one that came later than
    the delivery it said), asking for the next up to 1 ms before its end: handed over at the
    grant's end, a token overlaps the next one's by the difference of their delays; at its
    arrival (and, where its request comes first, RENEWAL_LEAD_S), never.  Shares hold either
    way, and the credits stay clear of their bound; the GPU idles through each hand-over's
    delivery instead (seeds 1-3: 38-39 ms of overlap in 30 s before, none after; the two
    together did 0.993-0.994 of the GPU, overlaps counted twice, before, 0.981 after.  Before
    the pod managers cut late tokens: 76-80 ms and 0.8-1.4 ms, 0.995-0.996 and 0.983-0.984)."""
    specs = [("a", 0.3, 1.0), ("b", 0.7, 1.0)]
    seen = {}
    for at_arrival in (False, True):
        timing = dataclasses.replace(LAUNCHER, hand_over_at_arrival=at_arrival)
        sim = Sim(specs, timing=timing, burst_ms=50.0, delivery_s=(0.0002, 0.001), seed=3)
        for name, _, _ in specs:
            sim.start(name)
        sim.run_until(30.0)
        shares = {n: sim.share(n, 5.0, 30.0) for n, _, _ in specs}
        seen[at_arrival] = overlap_s(sim, ["a", "b"]), shares, max(
            abs(sim.core.credits.of(n)) for n, _, _ in specs)
    (before, _, _), (after, shares, credit) = seen[False], seen[True]
    assert before > 0.01  # (10 ms of overlap in 30 s, a few hundred hand-overs)
    assert after < 0.0002
    assert shares["a"] / (shares["a"] + shares["b"]) == pytest.approx(0.3, abs=0.005)
    assert shares["a"] + shares["b"] > 0.98
    assert credit < 0.05


def test_the_wait_for_the_holders_hook_is_earned_by_no_one():
    """(Else every hand-over added its delay to everyone's credit, towards the bound, where
    the order falls back to turns by time.)"""
    timing = dataclasses.replace(WHOLE_QUOTAS, hand_over_at_arrival=True)
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), timing, 0.0)
    core.on_request(1, Request("a", 1, RequestType.REPORT, (0, 1, 0, 0.6)), 0.0)
    grants(core.on_request(1, quota_req("a", 2), 0.0))
    core.on_request(2, quota_req("b", 1), 0.01)
    end = core.history.latest("a").end
    assert grants(core.on_deadline(end)) == []
    before = {n: core.credits.of(n) for n in "ab"}
    [g] = grants(core.on_deadline(end + 0.0006))
    b = core.history.latest("b")
    assert g.conn == 2 and b.start == end + 0.0006
    assert core.credits.of("a") == pytest.approx(before["a"], abs=1e-12)
    assert core.credits.of("b") == pytest.approx(before["b"] - (b.end - b.start), abs=1e-12)


@pytest.mark.parametrize("garbage", [math.nan, math.inf])
def test_a_burst_that_is_not_a_number_is_taken_as_none_said(garbage: float) -> None:
    """(A NaN burst made the client's adaptive quota NaN for good, each later one following
    the last: an uncapped client was granted NaN ms, and a capped one never again.)"""
    for limit in (1.0, 0.4):
        core = SchedulerCore(config(("a", 0.3, limit, 1), ("b", 0.3, 1.0, 1)), LAUNCHER, 0.0)
        core.on_request(1, quota_req("a", 1, burst=garbage), 0.0)
        assert math.isfinite(core.clients["a"].quota_s) and math.isfinite(core.clients["a"].burst_s)
        now, got = 0.5, grants(core.on_request(1, quota_req("a", 2, burst=10.0), 0.5))
        while not got and now < 5.0:  # (a capped one waits for its pace)
            now = max(now + 0.001, core.next_deadline() or now)
            got = grants(core.on_deadline(now))
        assert len(got) == 1
        assert 0.0 < core.history.latest("a").end - core.history.latest("a").start < 10.0
        assert math.isfinite(core.credits.of("a"))


def test_an_unknown_client_is_warned_of_once_a_connection_until_it_is_served():
    def warned(actions):
        return [a for a in actions if isinstance(a, Log) and a.level >= logging.WARNING]

    core = SchedulerCore(config(("a", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    assert len(warned(core.on_request(1, quota_req("x", 1), 0.0))) == 1
    assert warned(core.on_request(1, quota_req("x", 2), 1.0)) == []
    assert len(warned(core.on_request(2, quota_req("x", 1), 1.0))) == 1  # another connection
    core.on_request(1, quota_req("a", 3), 2.0)  # (served: a's pod manager, say, renamed)
    assert len(warned(core.on_request(1, quota_req("x", 4), 3.0))) == 1


def hand_over_at_arrival_pair(delivery_ms: float) -> SchedulerCore:
    timing = dataclasses.replace(WHOLE_QUOTAS, hand_over_at_arrival=True)
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), timing, 0.0)
    for conn, name in ((1, "a"), (2, "b")):
        core.on_request(conn, Request(name, 1, RequestType.REPORT, (0, 1, 0, delivery_ms)), 0.0)
    return core


def test_an_expired_holder_earns_its_grace_though_the_next_event_comes_in_a_hand_over_wait():
    """a's grant runs out with b waiting and a does not ask again: it is owed its share of its
    5 ms grace (as without the option), though the next event comes while b's own hand-over
    waits for its hook."""
    core = hand_over_at_arrival_pair(0.6)
    grants(core.on_request(1, quota_req("a", 2), 0.0))
    core.on_request(2, quota_req("b", 2), 0.01)
    grants(core.on_deadline(core.next_deadline()))  # b holds; a in its grace
    before = core.credits.of("a")
    core.on_deadline(core.next_deadline())  # b's grant ended and reached its hook
    grace_s = WHOLE_QUOTAS.return_grace_s
    assert core.credits.of("a") - before == pytest.approx(0.5 * grace_s, abs=1e-9)


@pytest.mark.parametrize("said", [math.nan, -1.0, 1e30, math.inf])
def test_a_delivery_delay_out_of_range_is_logged_once_and_bounded(said: float) -> None:
    core = hand_over_at_arrival_pair(0.0)
    bad = Request("a", 2, RequestType.REPORT, (0, 1, 0, said))
    first = [a for a in core.on_request(1, bad, 0.0) if isinstance(a, Log)]
    assert len(first) == 1 and first[0].client == "a" and "delivery" in first[0].message
    assert 0.0 <= core.clients["a"].delivery_s <= HAND_OVER_DELAY_MAX_S
    assert core.snapshot(0.0)["clients"][0]["delivery_ms"] == core.clients["a"].delivery_s * 1e3
    assert not [a for a in core.on_request(1, bad, 0.1) if isinstance(a, Log)]


def test_a_pod_manager_connected_anew_is_not_held_to_the_old_connections_delay():
    """Its first QUOTA comes before its first REPORT."""
    core = hand_over_at_arrival_pair(1.5)
    core.on_disconnect(1, 0.0)
    grants(core.on_request(3, quota_req("a", 1), 0.01))
    assert core.next_deadline() == core.history.latest("a").end


def test_a_holder_whose_processes_all_ended_hands_the_token_over():
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    core.on_request(1, report("a", 1, 1), 0.0)
    [g] = grants(core.on_request(1, quota_req("a", 2), 0.0))
    assert grants(core.on_request(2, quota_req("b", 1), 0.01)) == []
    assert grants(core.on_request(1, report("a", 3, 1), 0.02)) == []  # still running
    [g] = grants(core.on_request(1, report("a", 4, 0), 0.05))  # its last process ended
    assert g.conn == 2
    assert core.history.latest("a").end == pytest.approx(0.05)


def test_a_report_without_processes_from_a_client_not_holding_changes_nothing():
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    assert len(grants(core.on_request(1, quota_req("a", 1), 0.0))) == 1
    core.on_request(2, quota_req("b", 1), 0.01)
    assert grants(core.on_request(2, report("b", 2, 0), 0.02)) == []
    assert core.holder is not None and core.holder.conn == 1


def test_queued_request_of_a_dead_connection_is_dropped():
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), Timing(), 0.0)
    core.on_request(1, quota_req("a", 1), 0.0)
    core.on_request(2, quota_req("b", 1), 0.0)
    core.on_disconnect(2, 0.1)
    assert core.on_deadline(0.25) == [] or not grants(core.on_deadline(0.25))
    assert core.candidates == [] and core.holder is None


@pytest.mark.parametrize(("req_type", "args"), [(RequestType.PROCESS, (42, 0)),
                                               (RequestType.RECALL, (0,))])
def test_a_hooks_message_sent_to_the_scheduler_is_refused_not_fatal(req_type, args):
    core = SchedulerCore(config(("a", 0.5, 1, 1)), Timing(), 0.0)
    out = core.on_request(1, Request("a", 1, req_type, args), 0.0)
    [reply] = [a for a in out if isinstance(a, Reply)]
    assert reply.response.status is Status.BAD_REQUEST
    assert core.clients["a"].processes == 0


def test_unknown_client_gets_an_error_reply():
    core = SchedulerCore(config(("a", 0.5, 1, 1)), Timing(), 0.0)
    [reply] = [a for a in core.on_request(1, quota_req("zed", 1), 0.0) if isinstance(a, Reply)]
    assert reply.response.status is Status.UNKNOWN_CLIENT


def test_removed_client_is_refused_and_memory_change_is_pushed():
    core = SchedulerCore(config(("a", 0.5, 1, 100), ("b", 0.5, 1, 100)), Timing(), 0.0)
    core.on_request(1, Request("a", 1, RequestType.MEM_LIMIT), 0.0)
    core.on_request(1, quota_req("a", 2), 0.0)
    core.on_request(2, quota_req("b", 1), 0.0)  # waits behind a
    actions = core.on_config(config(("a", 0.5, 1, 200)), 0.1)
    pushes = [a for a in actions if isinstance(a, Reply) and a.response.req_id == NOTIFY_ID]
    assert [(p.conn, p.response.values) for p in pushes] == [(1, (0, 200, 0))]
    refused = [a for a in actions if isinstance(a, Reply) and a.conn == 2]
    assert refused[0].response.status is Status.CLIENT_REMOVED
    [again] = [a for a in core.on_request(2, quota_req("b", 2), 0.2) if isinstance(a, Reply)]
    assert again.response.status is Status.CLIENT_REMOVED


@pytest.mark.parametrize("asks_meanwhile", [False, True])
def test_a_client_added_back_is_told_its_new_memory_limit(asks_meanwhile):
    """Removed, then added back with another limit: its pod manager, still connected, kept the
    old one (nobody's connection was on the new client's books), and its hooks allocated past
    the new limit; the status read its memory as 0 until its next report."""
    core = SchedulerCore(config(("a", 0.5, 1, 400), ("b", 0.5, 1, 100)), Timing(), 0.0)
    core.on_request(1, Request("a", 1, RequestType.MEM_LIMIT), 0.0)
    core.on_request(1, Request("a", 2, RequestType.REPORT, (300, 1, 0)), 0.0)
    core.on_config(config(("b", 0.5, 1, 100)), 0.1)
    if asks_meanwhile:
        core.on_request(1, Request("a", 3, RequestType.REPORT, (300, 1, 0)), 0.2)
    actions = core.on_config(config(("a", 0.5, 1, 200), ("b", 0.5, 1, 100)), 0.3)
    pushes = [a for a in actions if isinstance(a, Reply) and a.response.req_id == NOTIFY_ID]
    assert [(p.conn, p.response.values) for p in pushes] == [(1, (300, 200, 0))]
    assert core.clients["a"].mem_used == 300
    core.on_disconnect(1, 0.4)
    assert core.clients["a"].conns == set() and core.clients["a"].mem_used == 0


def cut_after_lowering(reported: tuple, lowered_to: float, into_s: float):
    """a, alone and capped at 0.6 (a grant of 150 ms in its lone turns), is lowered to
    `lowered_to` `into_s` into its first grant, its pod manager having `reported` (its REPORT's
    words; () none, as a v1 one): the edit's actions, the scheduler, and when the grant began."""
    core = SchedulerCore(config(("a", 0.6, 0.6, 100)), Timing(short_window_s=0.0), 0.0)
    if reported:
        core.on_request(1, Request("a", 1, RequestType.REPORT, reported), 0.0)
    core.on_request(1, quota_req("a", 2), 0.0)
    start = core.next_deadline()
    [grant] = grants(core.on_deadline(start))
    assert grant.response.values[0] == pytest.approx(150.0)
    edited = config(("a", lowered_to, lowered_to, 100))
    return core.on_config(edited, start + into_s), core, start


def test_a_cap_lowered_cuts_the_grant_its_client_holds_to_the_new_cap():
    """The grant was made at the old cap; run on to its end, its 1 s windows at the new one
    held half of it, or a second with hardly a grant (H100, 2026-12-07: 0.149 at 0.3)."""
    actions, core, start = cut_after_lowering(CUTTING, 0.3, 0.02)
    [cut] = [a for a in actions if isinstance(a, Reply)]
    assert (cut.conn, cut.type, cut.response.req_id) == (1, RequestType.QUOTA, CUT_ID)
    assert cut.response.values[0] == pytest.approx(55.0)  # to 75 ms of 150, at half the cap
    assert core.next_deadline() == pytest.approx(start + 0.075)
    # ...or to now, where it ran longer than the new cap gives
    actions, core, start = cut_after_lowering(CUTTING, 0.1, 0.1)
    [cut] = [a for a in actions if isinstance(a, Reply)]
    assert cut.response.values[0] == 0.0 and core.holder is None  # (expired at the edit)


CUTTING = (0, 1, 0, 0.0, REPORT_APPLIES_CUTS)  # (a REPORT of a pod manager that applies cuts)


def test_a_grant_is_cut_by_the_cap_it_was_made_at():
    """Raised and lowered back within a grant, it is not cut (it was, by the lowering's own
    ratio: a review); lowered twice, it is cut to the last cap's part of what it was made at."""
    actions, core, start = cut_after_lowering(CUTTING, 0.8, 0.01)  # (raised: no cut)
    assert [a for a in actions if isinstance(a, Reply)] == []
    back = core.on_config(config(("a", 0.6, 0.6, 100)), start + 0.02)
    assert [a for a in back if isinstance(a, Reply)] == []
    assert core.next_deadline() == pytest.approx(start + 0.15)
    actions, core, start = cut_after_lowering(CUTTING, 0.45, 0.01)
    core.on_config(config(("a", 0.3, 0.3, 100)), start + 0.02)
    assert core.next_deadline() == pytest.approx(start + 0.075)  # (150 ms x 0.3 / 0.6)


def test_the_run_of_a_calibration_cut_short_is_not_read():
    """Its hook measured the calibration's start, or a late process's share of it: not the
    continuous tail its run is read as (a review)."""
    core = SchedulerCore(config(("a", 0.6, 0.6, 100)), Timing(short_window_s=0.0), 0.0)
    read = []
    core.speed.ran = lambda name, *args, **kw: read.append(args)  # type: ignore[method-assign]
    client = core.clients["a"]
    cut = dataclasses.replace(core.history.record("a", 0.0, 0.1), calibrating=True,
                              cut_calibration=True)
    core._record_run(client, cut, (0.0, 0, False))  # (the run of the grant before it)
    core._record_run(client, core.history.record("a", 0.2, 0.3), (40.0, 200, False))
    assert len(read) == 1  # (the grant before the cut one's; the cut one's run is dropped)
    core._record_run(client, core.history.record("a", 0.4, 0.5), (30.0, 150, False))
    assert len(read) == 2


def test_a_calibration_weighed_as_its_hook_asked_ahead_and_cut_after_is_not_read():
    """Weighed when its hook asked ahead in its tail, then cut by a lowered cap: its run,
    which the next request carries, is its start all the same.  (Not with today's constants:
    a hook asks ahead at most RENEWAL_LEAD_S before the hand-over, and a cut is of CUT_MIN_S
    at least; the grant's flags are read when its run comes all the same.)"""
    core = SchedulerCore(config(("a", 0.6, 0.6, 100)), Timing(short_window_s=0.0), 0.0)
    read = []
    core.speed.ran = lambda name, *args, **kw: read.append(args)  # type: ignore[method-assign]
    client = core.clients["a"]
    calibration = core.history.record("a", 0.0, 0.2)
    calibration.calibrating = True
    core._record_run(client, calibration, (0.0, 0, False))  # (weighed as its hook asked ahead)
    calibration.cut_calibration = True  # (then cut: _cut_lowered_holder)
    core._record_run(client, core.history.record("a", 0.3, 0.4), (40.0, 200, False))
    assert [args[2] for args in read] == [False]  # (the run before it only: not a calibration)


@pytest.mark.parametrize("reported, lowered_to", [((), 0.3), ((0, 1, 0, 0.0), 0.3),
                                                  (CUTTING, 0.59)])
def test_no_cut_for_a_pod_manager_that_cannot_nor_for_a_few_ms(reported, lowered_to):
    """A v1 pod manager (no REPORT), one of ours from before (no features: it ignored the
    cut, and its hooks ran on beside the next holder, uncharged), a cut of under 5 ms."""
    actions, core, start = cut_after_lowering(reported, lowered_to, 0.02)
    assert [a for a in actions if isinstance(a, Reply)] == []
    assert core.next_deadline() == pytest.approx(start + 0.15)


def test_a_client_added_after_its_pod_manager_came_is_told_its_memory_limit():
    """A scheduler restarted with a config without it: its pod manager, refused meanwhile, kept
    the limit the old scheduler had told it."""
    core = SchedulerCore(config(("b", 0.5, 1, 100)), Timing(), 0.0)
    [refused] = [a for a in core.on_request(1, Request("a", 1, RequestType.MEM_LIMIT), 0.0)
                 if isinstance(a, Reply)]
    assert refused.response.status is Status.UNKNOWN_CLIENT
    core.on_request(1, Request("a", 2, RequestType.REPORT, (50, 1, 0)), 0.1)
    core.on_request(2, Request("zed", 1, RequestType.MEM_LIMIT), 0.1)
    core.on_disconnect(2, 0.15)  # (kept only while its connection is open)
    actions = core.on_config(config(("a", 0.5, 1, 200), ("b", 0.5, 1, 100),
                                    ("zed", 0.1, 1, 100)), 0.2)
    pushes = [a for a in actions if isinstance(a, Reply) and a.response.req_id == NOTIFY_ID]
    assert [(p.conn, p.response.values) for p in pushes] == [(1, (50, 200, 0))]


def test_a_client_removed_while_it_holds_the_token_hands_it_on_when_it_asks_again():
    """Refused as removed, its request still says it is done with its token: the next client
    gets the GPU then, not at the grant's end (the GPU idled 88 ms of 100 here)."""
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), LAUNCHER, 0.0)
    [g] = grants(core.on_request(1, quota_req("a", 1, burst=100.0), 0.0))
    assert g.response.values[0] >= 50.0
    core.on_request(2, quota_req("b", 1, burst=100.0), 0.001)  # waits behind a
    core.on_config(config(("b", 0.5, 1, 1)), 0.005)
    actions = core.on_request(1, quota_req("a", 2, burst=100.0), 0.012)
    refused, granted = grants(actions)
    assert refused.conn == 1 and refused.response.status is Status.CLIENT_REMOVED
    assert granted.conn == 2 and granted.response.status is Status.OK
    assert core.holder is not None and core.holder.interval.start == 0.012


def test_a_removed_client_whose_processes_still_ask_is_named_in_the_status():
    """It vanished from the table and the metrics while its programs waited, refused."""
    from gemini.core.status import render

    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), LAUNCHER, 0.0)
    core.on_config(config(("b", 0.5, 1, 1)), 1.0)
    [refused] = grants(core.on_request(1, quota_req("a", 1), 2.0))
    assert refused.response.status is Status.CLIENT_REMOVED
    snap = core.snapshot(3.0)
    assert snap["removed_asking"] == ["a"]
    assert "removed from the config, its processes still waiting: a" in render(snap)
    assert core.snapshot(2.0 + 10.5)["removed_asking"] == []  # (no request within the window)
    core.on_config(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), 4.0)  # back
    assert core.snapshot(4.0)["removed_asking"] == []
    core.on_config(config(("b", 0.5, 1, 1)), 5.0)  # removed again, its processes gone
    assert core.snapshot(5.0)["removed_asking"] == []  # (its earlier asking was listed)


def test_a_client_removed_while_it_holds_the_token_comes_back_owed_nothing():
    """(Its token, ended after its removal, gave the unused part back to books already
    forgotten: added again, it started with that credit, 140 ms.)"""
    cfg = config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1))
    core = SchedulerCore(cfg, WHOLE_QUOTAS, 0.0)
    core.on_request(1, quota_req("a", 1, burst=80.0), 0.0)
    core.on_request(2, quota_req("b", 1, burst=80.0), 0.005)
    core.on_config(config(("b", 0.5, 1, 1)), 0.01)
    core.on_disconnect(1, 0.02)  # its pod manager goes, 145 ms of the grant unused
    core.on_config(cfg, 0.03)
    assert core.credits.of("a") == 0.0


@pytest.mark.parametrize("ends_by", ["disconnect", "request"])
def test_a_client_removed_and_added_back_before_its_grant_ends_starts_owed_nothing(ends_by):
    """(The grant made before its removal, ended after it came back, gave its unused part to
    the new books: 140 ms ahead.)"""
    cfg = config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1))
    core = SchedulerCore(cfg, WHOLE_QUOTAS, 0.0)
    core.on_request(1, quota_req("a", 1, burst=80.0), 0.0)
    core.on_request(2, quota_req("b", 1, burst=80.0), 0.005)
    core.on_config(config(("b", 0.5, 1, 1)), 0.01)
    core.on_config(cfg, 0.015)
    if ends_by == "disconnect":
        core.on_disconnect(1, 0.02)
    else:
        core.on_request(1, quota_req("a", 2), 0.02)
    assert core.credits.of("a") < 0.01  # (what it earned as holder since: 2.5 ms)


def test_reload_with_same_config_changes_nothing():
    cfg = config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1))
    core = SchedulerCore(cfg, WHOLE_QUOTAS, 0.0)
    core.on_request(1, quota_req("a", 1, burst=80.0), 0.0)
    before = (core.clients["a"].quota_s, core.holder)
    assert core.on_config(cfg, 0.1) == []
    assert (core.clients["a"].quota_s, core.holder) == before


def test_a_lowered_cap_holds_from_the_edit_on_without_a_stall():
    # A cap of 0.4 lowered to 0.1 while its client runs: its 10 s window held 4 s of use
    # against the 1 s now allowed, and it got nothing for 8 s.  The new cap counts from the
    # edit; the time used under the old one is not held against it.
    sim = Sim([("c", 0.1, 0.4)], timing=LAUNCHER, burst_ms=5000.0)
    sim.start("c")
    sim.run_until(12.0)
    sim.configure(ResourceConfig((ClientSpec("c", 0.05, 0.1, 1 << 30),)))
    sim.run_until(35.0)
    for t in range(13, 34):
        assert sim.share("c", t, t + 1.0) >= 0.05, t
    for t in range(12, 25):
        assert sim.share("c", t, t + 10.0) <= 0.1 + 0.02, t


def test_a_client_removed_and_added_back_capped_holds_its_cap_from_then_on():
    """(Two saves of the config, one without it and one with it capped at 0.1: its old use
    stayed in its windows, and it got nothing for 8 s.)"""
    sim = Sim([("c", 0.1, 0.4)], timing=LAUNCHER, burst_ms=5000.0)
    sim.start("c")
    sim.run_until(12.0)
    sim.configure(ResourceConfig(()))
    sim.configure(ResourceConfig((ClientSpec("c", 0.05, 0.1, 1 << 30),)))
    sim.start("c")
    sim.run_until(35.0)
    for t in range(13, 34):
        assert sim.share("c", t, t + 1.0) >= 0.05, t
    for t in range(12, 25):
        assert sim.share("c", t, t + 10.0) <= 0.1 + 0.02, t


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_lowered_cap_holds_from_the_edit_on_in_its_first_second_too(seed):
    """b, uncapped at 0.75 beside a, is capped at 0.3.  Its 1 s window still held the 0.75 s
    it used before the edit, and it waited 0.6 s for that to slide out (0.146 of its first
    second, a 0.85): only its 10 s window counted from the edit.  Both do now."""
    sim = Sim([("a", 0.15, 1.0), ("b", 0.75, 1.0)], timing=LAUNCHER, burst_ms=50.0, seed=seed)
    sim.start("a")
    sim.start("b")
    sim.run_until(5.0)
    sim.configure(config(("a", 0.54, 1.0, 1 << 30), ("b", 0.3, 0.3, 1 << 30)))
    sim.run_until(9.0)
    for lo in (5.0 + 0.05 * k for k in range(40)):
        assert abs(sim.share("b", lo, lo + 1.0) - 0.3) <= 0.05, lo
        assert abs(sim.share("a", lo, lo + 1.0) - 0.7) <= 0.05, lo


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_raised_cap_holds_from_the_edit_on_in_its_first_half_second(seed):
    """b, capped at 0.3 beside a capped at 0.3, is raised to 0.6.  It rested on at the old
    pace after its latest grant (70 ms after a 30 ms grant) and held 0.49-0.52 of its first
    half second on the simulator (H200, 2026-12-02: 0.48, and 0.517-0.536 of its first second
    by work).  In 100 ms turns (in shared turns: test_speed's
    test_in_shared_turns_a_cap_raised_beside_a_capped_neighbour_leaves_it_whole)."""
    sim = Sim([("a", 0.3, 0.3), ("b", 0.3, 0.3)], timing=HUNDRED_MS_TURNS, burst_ms=5000.0,
              seed=seed, clock=GpuClock(), launch_s=0.0002)
    sim.start("a")
    sim.start("b", 0.001)
    sim.run_until(10.0)
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    sim.run_until(11.0)
    assert sim.share("b", 10.0, 10.5) >= 0.6 - 0.07


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_calibration_leaves_its_capped_neighbour_no_second_far_under(seed):
    """b, capped at 0.3 beside a capped at 0.3, is raised to 0.6.  a waits through each of b's
    calibrations, 182 ms at 0.6 (its own 1 s windows' bound), and a second that held one could
    only be made up in the next: with two of these seeds a's worst second was 6.8 points off by
    work, and b's 11.1, paying its lumps back (H200, 2026-12-04: a 0.254 in the second of one
    of b's).  b's calibrations
    now leave a's seconds as little to make up as its own (speed.capped_calibration,
    beside_cap).  In 100 ms turns (in shared turns a calibration is one of its grants)."""
    sim = Sim([("a", 0.3, 0.3), ("b", 0.3, 0.3)], timing=HUNDRED_MS_TURNS, burst_ms=5000.0,
              seed=seed, clock=GpuClock(), launch_s=0.0002, gpu_wait=0.8)
    sim.start("a")
    sim.start("b", 0.001)
    sim.run_until(10.0)
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    sim.run_until(30.0)
    sim.clock.advance(30.0, sim.running)
    b = sim.clients["b"]
    assert any(b.busy[i][0] > 10.0 for i in b.calibrations)
    for name, target in (("a", 0.3), ("b", 0.6)):
        seconds = [sim.clock.work(name, t, t + 1.0) for t in range(10, 29)]
        assert max(abs(s - target) for s in seconds) <= 0.065, (name, seconds)


def test_adaptive_quota_moves_toward_the_burst():
    core = SchedulerCore(config(("a", 0.5, 1, 1)), Timing(0.25, 0.1, 10.0, short_window_s=0), 0.0)
    [g] = grants(core.on_request(1, quota_req("a", 1, burst=150.0), 0.0))
    assert g.response.values[0] == pytest.approx(200.0)  # (150 + 250) / 2
    [g] = grants(core.on_request(1, quota_req("a", 2, burst=10.0), 0.2))
    assert g.response.values[0] == pytest.approx(105.0)
    [g] = grants(core.on_request(1, quota_req("a", 3, burst=1.0), 0.3))
    assert g.response.values[0] == pytest.approx(100.0)  # clamped at the minimum


def test_status_snapshot_names_the_holder():
    core = SchedulerCore(config(("a", 0.5, 1, 1), ("b", 0.5, 1, 1)), WHOLE_QUOTAS, 0.0)
    core.on_request(1, quota_req("a", 1), 0.0)
    core.on_request(2, quota_req("b", 1), 0.1)
    snap = core.snapshot(0.2)
    rows = {c["name"]: c for c in snap["clients"]}
    assert snap["holder"] == "a" and rows["a"]["holder"] and rows["b"]["waiting"]
    assert rows["a"]["share"] == pytest.approx(1.0)


def test_status_says_each_share_over_the_short_window_too():
    core = SchedulerCore(config(("a", 0.5, 1, 1)), Timing(), 0.0)
    t, req_id = 0.0, 0
    while t < 1.5:  # a, alone, asks again at each grant's end for 1.5 s, then rests
        req_id += 1
        [g] = grants(core.on_request(1, quota_req("a", req_id, burst=50.0), t))
        t += g.response.values[0] / 1000
    snap = core.snapshot(t + 0.5)
    [a] = snap["clients"]
    assert snap["short_window_s"] == 1.0
    assert a["share"] == pytest.approx(t / (t + 0.5))  # (the long window: since its first ask)
    assert a["share_short"] == pytest.approx(0.5)  # (the last second: half of it held)


# ---- properties ---------------------------------------------------------------------------

ops = st.lists(
    st.tuples(
        st.sampled_from(["request", "disconnect", "advance", "reload"]),
        st.integers(0, 3),
        st.floats(0.0, 0.4),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_invariants_under_random_operations(operations):
    names = ["a", "b", "c", "d"]
    full = config(*[(n, 0.2, 0.5 + 0.1 * i, 1) for i, n in enumerate(names)])
    core = SchedulerCore(full, Timing(0.1, 0.05, 2.0), 0.0)
    now, req_id = 0.0, 0
    conns = {n: i + 1 for i, n in enumerate(names)}
    charged = given = 0.0  # overuse charged, and other clients' overrun given back, so far
    for op, who, dt in operations:
        name = names[who]
        before = {n: (c, c.overuse_s, c.overrun_s) for n, c in core.clients.items()}
        if op == "request":
            if any(c.conn == conns[name] for c in core.candidates):
                continue  # a pod manager has one request in flight at a time
            req_id += 1
            actions = core.on_request(conns[name], quota_req(name, req_id, dt * 100), now)
        elif op == "disconnect":
            actions = core.on_disconnect(conns[name], now)
            conns[name] += 10
        elif op == "advance":
            now += dt
            deadline = core.next_deadline()
            actions = core.on_deadline(now) if deadline is not None and deadline <= now else []
        else:
            keep = [(n, 0.2, 0.6, 1) for n in names if n != name]
            actions = core.on_config(config(*keep) if dt < 0.2 else full, now)
        granted = grants(actions)
        assert len([g for g in granted if g.response.status is Status.OK]) <= 1
        # An overrun is given back at most once, however its grants and reports interleave.
        for n, c in core.clients.items():
            same, overuse, overrun = before.get(n, (None, 0.0, 0.0))
            charged += c.overuse_s - (overuse if same is c else 0.0)
            given += c.overrun_s - (overrun if same is c else 0.0)
        assert given <= charged + 1e-9
        live = {c for c in conns.values()}
        assert all(c.conn in live for c in core.candidates)
        if core.holder is not None:
            assert core.holder.interval in core.history.intervals
            # A removed client keeps a token in hand until its next request.
            assert core.holder.interval.name in core.clients.keys() | core.removed
        deadline = core.next_deadline()
        assert deadline is None or deadline >= now or core.holder is not None


def test_quota_never_exceeds_the_maximum_however_long_the_bursts():
    timing = Timing(0.25, 0.1, 10.0, max_quota_s=1.0, short_window_s=0)
    core = SchedulerCore(config(("a", 0.5, 1, 1)), timing, 0.0)
    now = 0.0
    for req_id in range(1, 10):
        [g] = grants(core.on_request(1, quota_req("a", req_id, burst=8000.0), now))
        now += g.response.values[0] / 1000
    assert g.response.values[0] == pytest.approx(1000.0)


def test_a_capped_client_that_starts_late_never_stalls_when_the_window_fills():
    # The scheduler idles 3 s before the first request; its window must not count that time.
    sim = Sim([("capped", 0.1, 0.4)], timing=LAUNCHER, burst_ms=50.0)
    sim.start("capped", at=3.0)
    sim.run_until(30.0)
    starts = [s for s, _ in sim.clients["capped"].busy]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # Grants of ~80 ms at 0.4 leave gaps of ~0.12 s; the wait after the first (uncapped) grant
    # echoes once a window later (0.5-0.6 s).  Counting the idle start, the wait was 3 s.
    assert max(gaps) < 0.7, max(gaps)
    assert sim.share("capped", 13.0, 30.0) == pytest.approx(0.4, abs=0.01)


# ---- short windows (issue 12) ---------------------------------------------------------------


def per_second(sim: Sim, name: str, seconds: int) -> list[float]:
    return [sim.share(name, t, t + 1.0) for t in range(seconds)]


def test_a_cap_holds_in_every_second_from_the_first_with_long_bursts():
    # Hooks that never sync report long bursts: the adaptive quota would grow to 1.2 s, and a
    # 0.4 cap over 10 s alone was 4 s at full speed, then 6 s of nothing.  (In lone turns
    # the first second, a 40 ms grant and three turns, fills its window's edge; the others
    # hold the cap and a little over half of that.)
    sim = Sim([("capped", 0.1, 0.4)], timing=LAUNCHER, burst_ms=5000.0)
    sim.start("capped")
    sim.run_until(30.0)
    t = 0.0
    while t + 1.0 <= 30.0:  # every 1 s window, sliding by 50 ms: the cap and one grant's edge
        edge = 0.04 * (WINDOW_EDGE if t < 1.0 else 0.6)
        assert sim.share("capped", t, t + 1.0) <= 0.4 + edge + 1e-6, t
        t += 0.05
    assert min(per_second(sim, "capped", 30)) >= 0.36
    assert sim.share("capped", 0.0, 15.0) == pytest.approx(0.4, abs=0.01)


@pytest.mark.parametrize("lone_turns", [False, True])
def test_with_lone_turns_a_capped_client_alone_is_paced_in_a_whole_part_of_each_second(
        lone_turns):
    # (gem-schd --[no-]lone-turns, on by default since the H100's A/B of 2026-12-07)  Alone, a
    # cap that allows LONE_PACED_WORK_S a turn is paced in turns of a whole part of the second
    # (0.4: a third), so that each 1 s window holds the same number of them, to its window's
    # edge.
    timing = dataclasses.replace(LAUNCHER, lone_turns=lone_turns)
    assert LAUNCHER.lone_turns and Timing().lone_turns
    sim = Sim([("capped", 0.1, 0.4)], timing=timing, burst_ms=5000.0)
    sim.start("capped")
    sim.run_until(20.0)
    busy = sim.clients["capped"].busy
    longest = max(e - s for s, e in busy)
    assert longest == pytest.approx(0.4 / 3 if lone_turns else 0.04)
    if lone_turns:
        gaps = [b[0] - a[1] for a, b in itertools.pairwise(busy)]
        assert max(gaps) <= longest / 0.4, (max(gaps), longest)
        t = 0.0
        while t + 1.0 <= 20.0:  # every second, sliding by 10 ms
            assert sim.share("capped", t, t + 1.0) == pytest.approx(0.4, abs=0.03 + 1e-9), t
            t += 0.01


@pytest.mark.parametrize(("shared_turns", "b_limit", "then"), [
    (False, 0.3, "back in 100 ms turns: beside others"),
    # in shared turns: those of the smaller cap, b's halves of a second
    (True, 0.3, "paced in turns of 500 ms (shared turns with b)"),
    (True, 1.0, "back in 100 ms turns: b has no cap")])
def test_the_log_and_the_snapshot_say_when_a_client_goes_into_turns_and_out_and_why(
        shared_turns, b_limit, then):
    # (Else a lone turn's 133 ms grants sit beside a "quota ms" of 40 in the status table,
    # unexplained; and a pair of JAX programs went back to 100 ms turns for 3 s on the H100,
    # the log not saying why: 2026-12-07 09:15.)
    timing = dataclasses.replace(LAUNCHER, shared_turns=shared_turns)
    sim = Sim([("a", 0.3, 0.4), ("b", 0.3, b_limit)], timing=timing, burst_ms=5000.0)
    sim.start("a")
    sim.run_until(3.0)
    said = [log.message for log in sim.logs if log.client == "a" and "turns" in log.message]
    assert said == ["paced in turns of 333 ms (lone turns)"]
    [a] = [c for c in sim.core.snapshot(3.0)["clients"] if c["name"] == "a"]
    assert a["turn_ms"] == pytest.approx(1000 / 3)
    sim.start("b", at=3.0)
    sim.run_until(6.0)
    said = [log.message for log in sim.logs if log.client == "a" and "turns" in log.message]
    assert said[1:] == [then]


@pytest.mark.parametrize("limit", [0.4, 0.1])
def test_a_capped_client_alone_gets_its_share_spread_within_each_second(limit):
    # Every second held the cap, but as one run at full speed and then nothing: 0.4 was
    # 0.5 s on, 0.5 s off, each second alike (H100, Triton capped at 0.4), as the first second's
    # grants echoed a window later.  Paced, a grant of L is followed by L / limit - L of rest.
    # (In 100 ms turns: lone turns spread a 0.4 cap over thirds of a second, the test above.)
    sim = Sim([("capped", 0.1, limit)], timing=dataclasses.replace(LAUNCHER, lone_turns=False),
              burst_ms=5000.0)
    sim.start("capped")
    sim.run_until(20.0)
    busy = sim.clients["capped"].busy
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(busy)]
    longest = max(e - s for s, e in busy)
    assert longest <= max(limit * 0.1, LAUNCHER.min_quota_s) + 1e-9  # a tenth of a turn
    assert max(gaps) <= longest / limit, (max(gaps), longest)
    quarter = 0.25 if limit >= 0.4 else 0.5
    t = 0.0
    while t + quarter <= 20.0:  # every quarter second (half at 0.1), sliding by 10 ms
        assert sim.share("capped", t, t + quarter) == pytest.approx(limit, abs=0.1), t
        t += 0.01
    assert sim.share("capped", 0.0, 20.0) == pytest.approx(limit, abs=0.005)


@pytest.mark.parametrize("name", ["2 clients 0.3/0.7", "3 clients 0.2/0.2/0.6"])
def test_shares_hold_second_by_second_with_long_bursts(name):
    specs = SCENARIOS[name]
    _, sim = run_shares(specs, seconds=30.0, burst_ms=5000.0)
    for client, request, _ in specs:
        seconds = per_second(sim, client, 30)
        assert max(abs(s - request) for s in seconds) <= 0.08, (client, seconds)
        for t in range(0, 21):
            assert sim.share(client, t, t + 10.0) == pytest.approx(request, abs=0.02)


def test_no_grant_is_longer_than_a_tenth_of_the_short_window():
    _, sim = run_shares([("a", 0.5, 1.0)], seconds=5.0, burst_ms=5000.0)
    assert max(e - s for s, e in sim.clients["a"].busy) <= 0.1 + 1e-9


@pytest.mark.parametrize(
    ("specs", "starts"),
    [
        ([("a", 0.3, 1.0), ("b", 0.7, 1.0)], [0.0, 1.5]),
        ([("a", 0.3, 1.0), ("b", 0.7, 1.0)], [1.5, 0.0]),
        ([("a", 0.2, 1.0), ("b", 0.3, 1.0), ("c", 0.5, 1.0)], [0.0, 0.7, 1.5]),
    ],
)
@pytest.mark.parametrize("burst_ms", [50.0, 5000.0])
def test_time_alone_at_start_up_is_not_paid_back_in_a_lump(specs, starts, burst_ms):
    # Gemini's order (usage over the 10 s window) let the late starter take the GPU for seconds
    # to catch up, and the other one again ten seconds later when that slid out (68 points).
    sim = Sim(specs, timing=LAUNCHER, burst_ms=burst_ms)
    for (name, _, _), at in zip(specs, starts, strict=True):
        sim.start(name, at=at)
    sim.run_until(30.0)
    t0 = max(starts)
    for name, request, _ in specs:
        seconds = [sim.share(name, t0 + t, t0 + t + 1.0) for t in range(28)]
        assert max(abs(s - request) for s in seconds) <= 0.05, (name, seconds)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_client_alone_for_seconds_is_owed_nothing_when_another_comes(seed):
    """a runs alone for 8 s in 20 ms grants, then b comes.  Alone, a earned credit in every
    hand-over's gap (its request came up to 2 ms after its grant ran out) and reached the
    bound; b then waited while a took it back: 8.9-10.2 points off over a sliding 1 s window
    (seeds 1-5), 1.6-3.5 now."""
    specs = [("a", 0.4, 1.0), ("b", 0.5, 1.0)]
    sim = Sim(specs, timing=LAUNCHER, burst_ms=20.0, seed=seed)
    sim.start("a")
    sim.start("b", at=8.0)
    sim.run_until(12.0)
    expected = promised(specs)
    for lo in (8.0 + 0.05 * k for k in range(40)):
        for name in expected:
            assert abs(sim.share(name, lo, lo + 1.0) - expected[name]) <= 0.05, (name, lo)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_client_alone_owes_none_of_its_overuse_to_the_next_to_come(seed):
    """a runs alone for 10 s, its work 1.5 ms past each grant (charged with its next request),
    then b comes; 0.4/0.5 uncapped, so 0.5 each.  Alone, a's overuse took it to the credit's
    bound the other way, and b took that back in one lump: four 50 ms grants in a row on the
    H200, 0.593 of its first second; 9.7-10.1 points off over a sliding 1 s window here
    (seeds 1-3), 0.9-4.4 now."""
    specs = [("a", 0.4, 1.0), ("b", 0.5, 1.0)]
    sim = Sim(specs, timing=LAUNCHER, burst_ms=50.0, seed=seed,
              overrun_s={"a": 0.0015, "b": 0.0015})
    sim.start("a")
    sim.start("b", at=10.0)
    sim.run_until(14.0)
    for lo in (10.0 + 0.05 * k for k in range(40)):
        for name in ("a", "b"):
            assert abs(sim.ran_share(name, lo, lo + 1.0) - 0.5) <= 0.05, (name, lo)


def test_a_client_back_from_idle_gets_its_share_not_a_lump():
    sim = Sim([("a", 0.5, 1.0), ("b", 0.5, 1.0)], timing=LAUNCHER, burst_ms=50.0)
    sim.start("a")
    sim.run_until(8.0)  # a alone for 8 s: 8 s of the window ahead of b
    sim.start("b", at=8.0)
    sim.run_until(30.0)
    seconds = [sim.share("a", t, t + 1.0) for t in range(9, 29)]
    assert min(seconds) >= 0.45, seconds


@pytest.mark.parametrize("idle_returns", [False, True])
@pytest.mark.parametrize(
    "timing", [LAUNCHER, WHOLE_QUOTAS, Timing(0.3, 0.02, 10.0, max_quota_s=0.05)])
def test_capped_decisions_walk_the_windows_only_as_far_as_they_are_read(
        timing, idle_returns, monkeypatch):
    """A decision about a capped client reads its room up to its longest grant (or a
    calibration), and none of it while its pace holds it back: its windows are walked only
    that far, or not at all.  Every grant is what walking them whole gives, through
    calibrations, early returns and hand-overs among capped neighbours."""
    specs = [("a", 0.1, 0.4), ("b", 0.2, 0.3), ("c", 0.3, 1.0)]

    def grants(whole: bool) -> list[tuple[str, float, float]]:
        if whole:
            monkeypatch.setattr(SchedulerCore, "_room_horizon_s", math.inf)
            monkeypatch.setattr(SchedulerCore, "_resting", staticmethod(lambda *_: False))
        sim = Sim(specs, timing=timing, burst_ms=40.0, clock=GpuClock(), gpu_wait=0.2,
                  idle_returns=idle_returns)
        for name, _, _ in specs:
            sim.start(name, at={"a": 0.0, "b": 0.3, "c": 4.0}[name])
        sim.run_until(25.0)
        return sorted((n, s, e) for n, c in sim.clients.items() for s, e in c.busy)

    walked_to_a_grant = grants(whole=False)
    walked_whole = grants(whole=True)
    assert len(walked_to_a_grant) == len(walked_whole) > 200
    for (n1, s1, e1), (n2, s2, e2) in zip(walked_to_a_grant, walked_whole, strict=True):
        assert (n1, s1, e1) == (n2, pytest.approx(s2, abs=1e-9), pytest.approx(e2, abs=1e-9))


TRIO = [("a", 0.2, 1.0), ("b", 0.3, 1.0), ("c", 0.5, 1.0)]


def trio_back_from_a_pause(seed: int, burst_ms: float, last: str) -> Sim:
    """The trio, saturating, pauses one after another (`last` last, its grant running out with
    no one waiting) and comes back 0.3 s later, at 3.6 s, `last` 0.2 ms before the others."""
    sim = Sim(TRIO, timing=LAUNCHER, burst_ms=burst_ms, seed=seed)
    for name, _, _ in TRIO:
        sim.start(name)
    order = sorted((n for n, _, _ in TRIO), key=lambda n: n == last)
    for name, at in zip(order, (3.0, 3.2, 3.3), strict=True):
        sim.run_until(at)
        sim.pause(name)
    for name, at in zip(reversed(order), (3.6, 3.6002, 3.6004), strict=True):
        sim.start(name, at=at)
    sim.run_until(7.0)
    return sim


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_last_holder_before_an_idle_gpu_is_not_owed_the_idle_time(seed):
    """b counted as waiting, expected back at once, until the next event: its own request 0.3
    s later, so it was owed the whole idle time (up to the credit's bound, 0.2 s) and took six
    30 ms grants in a row while the others waited (H200, the 0.2/0.3/0.5 trio at the start of
    its measured run: c 0.569 of a second, a 0.165)."""
    sim = trio_back_from_a_pause(seed, burst_ms=50.0, last="b")
    for name, request, _ in TRIO:
        first = sim.share(name, 3.6, 4.6)
        assert abs(first - request) <= 0.05, (name, first)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_first_back_after_a_pause_takes_its_turn_not_its_whole_burst(seed):
    """Clients that ask for 100 ms bursts.  The first one back was alone for those 0.2 ms and
    got its whole burst, the others waiting it out, and paid it back over the next second (H200,
    a trio back from a pause: a 97 ms grant, a 0.17 of the next second for 0.2).  Here the
    worst sliding 1 s window was 4.9-6.5 points off before, 1.2-3.0 after (seeds 1-5)."""
    sim = trio_back_from_a_pause(seed, burst_ms=100.0, last="a")
    for name, request, _ in TRIO:
        seconds = [sim.share(name, 3.6 + k * 0.05, 4.6 + k * 0.05) for k in range(40)]
        assert max(abs(s - request) for s in seconds) <= 0.04, (name, seconds)


@pytest.mark.parametrize("seed", range(10))
def test_clients_back_from_pauses_get_their_shares_second_by_second(seed):
    """Two to four saturating clients (requests and bursts drawn by the seed) pause three
    times, one after another within 0.2 s (a job between epochs, a file system's stall), and
    come back 0.05-5 s later in another order, a few ms apart.  Every second in the 3 s from
    each comeback holds each client's share within 6 points: 2.0-4.3 at worst over these
    seeds (the granularity of 20-100 ms grants in a second).  Before: 8.0-15.3 in all 10, as
    the last holder's credit ran on past its grace and the first one back took its whole
    burst; 6.1-6.9 in 3 of them while the first one back looked only 1 s back for others."""
    rng = random.Random(seed)
    requests = [rng.choice([0.1, 0.2, 0.3, 0.4, 0.5]) for _ in range(rng.choice([2, 3, 4]))]
    specs = [(chr(97 + i), round(r / sum(requests) * 0.9, 3), 1.0)
             for i, r in enumerate(requests)]
    names = [n for n, _, _ in specs]
    sim = Sim(specs, timing=LAUNCHER, burst_ms=rng.choice([20.0, 50.0, 100.0, 300.0]),
              seed=seed)
    for name in names:
        sim.start(name, rng.uniform(0.0, 0.3))
    back_at, t = [], 1.0
    for _ in range(3):
        t += rng.uniform(3.0, 5.0)
        rng.shuffle(names)
        for name in names:
            sim.run_until(t)
            sim.pause(name)
            t += rng.uniform(0.0, 0.2)
        t += rng.uniform(0.05, 5.0)
        rng.shuffle(names)
        for name in names:
            sim.start(name, at=t)
            t += rng.uniform(0.0, 0.002)
        back_at.append(t)
    sim.run_until(t + 5.0)
    pause_at = [*back_at[1:], t + 5.0]  # (each stretch ends before the next pause: >= 3 s on)
    expected = promised(specs)
    windows = [start + 0.05 * k for start, end in zip(back_at, pause_at, strict=True)
               for k in range(int((min(end, start + 3.0) - start - 1.0) / 0.05))]
    worst = max((abs(sim.share(n, lo, lo + 1.0) - expected[n]), n, lo)
                for lo in windows for n in names)
    assert worst[0] <= 0.06, worst


def test_the_start_line_names_the_timing_and_the_options_not_at_their_default():
    """(A run's logs could not show whether --hand-over-at-arrival was on.)"""
    from gemini.core.scheduler import describe_timing

    assert describe_timing(Timing()) == ("quota 250 ms (min 100, max 1000), window 10 s, "
                                         "short window 1 s, grace 5 ms")
    assert describe_timing(Timing(hand_over_at_arrival=False, shared_speed=False,
                                  lone_turns=False)).endswith(
        ", shares by time, hand-overs at the grant's end, no lone turns")
    assert describe_timing(Timing(shared_turns=False)).endswith(", grace 5 ms, no shared turns")


@pytest.mark.parametrize("newcomer", [("n", 0.05, 0.05), ("n", 0.05, 1.0)], ids=["capped", "not"])
@pytest.mark.parametrize("seed", range(1, 7))
def test_a_newcomer_beside_a_client_on_whole_grants_waits_one_grant_at_most(seed, newcomer):
    """Gemini's own quotas (no short window): a alone holds 1 s grants.  Its credit was spent
    for the whole grant when it was made, but bounded at two turns (0.5 s): the rest was
    forgiven, and a earned it back while the newcomer, at 0.05, could not catch up (its first
    token up to 5 s after it asked, simulator)."""
    timing = Timing(0.25, 0.1, 10.0, max_quota_s=1.0, short_window_s=0.0)
    sim = Sim([("a", 0.5, 1.0), newcomer], timing=timing, burst_ms=5000.0, seed=seed)
    sim.start("a")
    joins = 5.0 + seed / 7
    sim.start("n", at=joins)
    sim.run_until(joins + 8.0)
    first = min(start for start, _ in sim.clients["n"].busy)
    assert first - joins <= timing.max_quota_s + 0.01


@pytest.mark.parametrize("rivals", [(("a", 0.5, 1.0), ("b", 0.49, 1.0)),
                                    (("a", 0.5, 0.5), ("b", 0.5, 0.5))],
                         ids=["requests fill the GPU", "requests over it"])
@pytest.mark.parametrize("seed", range(1, 9))
def test_a_newcomer_with_a_small_share_is_served_within_one_grant(seed, rivals):
    """gem-schd's own quotas (250 ms, at most 1 s).  A newcomer at 0.01 starts owed nothing and
    earns 10 ms a second, while its rivals wait owed up to a turn or two: it waited up to 1.3
    s, and 3 s where the requests add up to 1.01 (simulator).  Never served, it goes first."""
    timing = Timing()
    sim = Sim([*rivals, ("n", 0.01, 1.0)], timing=timing, burst_ms=5000.0, seed=seed)
    for name, _, _ in rivals:
        sim.start(name)
    joins = 5.0 + seed / 9
    sim.start("n", at=joins)
    sim.run_until(joins + 6.0)
    first = min(start for start, _ in sim.clients["n"].busy)
    assert first - joins <= timing.max_quota_s + 0.01
