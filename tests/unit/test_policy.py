"""The order and the target shares (gemini.core.policy), as properties."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini.core.policy import Credits, Pacer, Standing, pick, targets

share = st.floats(0.0, 1.0)


@st.composite
def clients(draw):
    n = draw(st.integers(1, 8))
    out = {}
    for i in range(n):
        request = draw(share)
        out[f"c{i}"] = (request, draw(st.floats(request, 1.0)))
    return out


@given(clients())
def test_targets_fill_the_gpu_between_requests_and_limits(wanting):
    rates = targets(wanting)
    assert sum(rates.values()) <= 1.0 + 1e-9
    total_request = sum(r for r, _ in wanting.values())
    if total_request >= 1.0:  # oversubscribed: requests scaled down alike
        for name, (request, _) in wanting.items():
            assert rates[name] == pytest.approx(request / total_request)
        return
    for name, (request, limit) in wanting.items():
        assert request - 1e-9 <= rates[name] <= limit + 1e-9
    if sum(lim for _, lim in wanting.values()) >= 1.0:
        assert sum(rates.values()) == pytest.approx(1.0, abs=1e-6)  # work-conserving
    # What is left over is shared equally: anyone above its request sits at the common level
    # or at its limit.
    above = [rates[n] for n, (r, lim) in wanting.items() if r + 1e-6 < rates[n] < lim - 1e-6]
    assert max(above, default=0) - min(above, default=0) <= 1e-6


def test_targets_examples():
    assert targets({"a": (0.3, 1.0), "b": (0.7, 1.0)}) == pytest.approx({"a": 0.3, "b": 0.7})
    assert targets({"a": (0.2, 1.0), "b": (0.3, 1.0)}) == pytest.approx({"a": 0.5, "b": 0.5})
    assert targets({"a": (0.2, 0.4), "b": (0.3, 1.0)}) == pytest.approx({"a": 0.4, "b": 0.6})
    assert targets({"a": (0.1, 0.4)}) == pytest.approx({"a": 0.4})


@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0.0, 0.5), st.floats(0.0, 0.3))))
def test_credit_stays_within_its_bound_after_every_earn(steps):
    credits = Credits(0.2, now=0.0)
    now = 0.0
    for name, elapsed, served in steps:
        credits.spend(name, served)
        now += elapsed
        credits.earn({name: 0.5, "z": 1.0}, now)
        assert all(-0.2 <= c <= 0.2 for c in credits.credit.values())


def test_credit_is_earned_only_while_wanting_and_spent_when_served():
    credits = Credits(1.0, now=0.0)
    credits.earn({"a": 0.3, "b": 0.7}, 0.1)
    assert credits.of("a") == pytest.approx(0.03)
    assert credits.of("b") == pytest.approx(0.07)
    credits.spend("b", 0.05)
    credits.earn({"a": 0.3}, 0.2)  # b no longer wants it: earns nothing
    assert credits.of("b") == pytest.approx(0.02)
    assert credits.of("a") == pytest.approx(0.06)


def test_a_client_owed_nothing_owes_at_most_what_it_holds_unspent():
    credits = Credits(1.0, now=0.0)
    credits.earn({"a": 1.0, "b": 1.0, "c": 1.0}, 0.1)
    credits.spend("b", 0.3)
    credits.spend("c", 0.3)
    credits.owe_nothing("a")
    credits.owe_nothing("b", ahead_by=0.25)
    credits.owe_nothing("c", ahead_by=0.1)
    assert credits.of("a") == 0.0
    assert credits.of("b") == pytest.approx(-0.2)  # (it is ahead by less than it holds)
    assert credits.of("c") == pytest.approx(-0.1)


def test_a_charge_ahead_is_given_back_once_or_forgiven_with_the_rest():
    """A calibration's lump beside others is paid in part ahead (gemini.core.speed.
    SHARED_PREPAY); a client left alone is forgiven its debt, that charge with it: given back
    after, it was a gift of up to 42 ms (a review)."""
    credits = Credits(1.0, now=0.0)
    credits.charge_ahead("a", 0.04)
    assert credits.of("a") == pytest.approx(-0.04) and credits.charged_ahead("a")
    credits.give_back_ahead("a")
    credits.give_back_ahead("a")
    assert credits.of("a") == pytest.approx(0.0) and not credits.charged_ahead("a")
    credits.charge_ahead("b", 0.04)
    credits.owe_nothing("b")
    credits.give_back_ahead("b")
    assert credits.of("b") == 0.0 and not credits.charged_ahead("b")
    credits.charge_ahead("c", 0.04)
    credits.forget("c")
    assert not credits.charged_ahead("c")
    # Alone while it holds 0.25 s unspent, it owes that at most, none of it the charge ahead.
    credits.spend("d", 0.2)
    credits.charge_ahead("d", 0.04)
    credits.owe_nothing("d", ahead_by=0.25)
    assert credits.of("d") == pytest.approx(-0.2) and not credits.charged_ahead("d")


def test_pick_takes_the_one_owed_most_among_those_with_room():
    a = Standing("a", credit=0.05, target=0.3, remaining=0.01)
    b = Standing("b", credit=-0.02, target=0.7)
    c = Standing("c", credit=-0.01, target=0.7)
    assert pick([a, b, c], min_grant=0.02) is c
    assert pick([a, b, c]) is a
    assert pick([Standing("a", 0.0, 0.3, remaining=0.0)]) is None


def test_pace_spreads_a_capped_clients_grants_by_one_over_its_limit():
    pacer = Pacer()
    pacer.granted("a", asked=1.0, seconds=0.04, limit=0.4)
    assert pacer.ready_in("a", 1.04) == pytest.approx(0.06)  # 40 ms served, 60 ms of rest
    pacer.adjust("a", -0.02, 0.4)  # half of it given back
    assert pacer.ready_in("a", 1.04) == pytest.approx(0.01)
    pacer.adjust("a", 2.0, 0.4, until=3.0)  # 2 s more: 5 s of rest, but no later than 3.0
    assert pacer.ready_in("a", 1.04) == pytest.approx(1.96)
    pacer.adjust("a", 0.01, 0.4, until=2.5)  # more, made earlier: no earlier (it moved to 2.5)
    assert pacer.ready_in("a", 1.04) == pytest.approx(1.96)
    assert pacer.ready_in("b", 1.04) == 0.0  # never served: ready


def test_a_raised_limit_shortens_the_rest_still_due_a_lowered_one_does_not_lengthen_it():
    pacer = Pacer()
    pacer.granted("a", asked=1.0, seconds=0.03, limit=0.3)  # ready at 1.1
    pacer.raised("a", 0.3, 0.6, 1.03)  # 70 ms of rest left at 0.3: 35 at 0.6
    assert pacer.ready_in("a", 1.03) == pytest.approx(0.035)
    pacer.raised("a", 0.6, 0.3, 1.03)  # (not raised: a lower cap counts from its edit)
    assert pacer.ready_in("a", 1.03) == pytest.approx(0.035)
    pacer.raised("a", 0.3, 0.6, 2.0)  # long rested: nothing due
    assert pacer.ready_in("a", 2.0) == pytest.approx(-0.935)  # (as it was)
    pacer.raised("b", 0.3, 0.6, 2.0)  # never served
    assert pacer.ready_in("b", 2.0) == 0.0


def test_pace_counts_waiting_for_the_gpu_but_not_a_pause():
    pacer = Pacer()
    pacer.granted("a", asked=0.0, seconds=0.1, limit=0.5)  # paced from 0.2 on
    # asked at 0.1, in time, then waited for the GPU until 0.5: its pace goes on from 0.2
    pacer.granted("a", asked=0.1, seconds=0.1, limit=0.5)
    assert pacer.ready_in("a", 0.0) == pytest.approx(0.4)
    # a pause: asked at 2.0, long after its pace: no burst for the idle time
    pacer.granted("a", asked=2.0, seconds=0.1, limit=0.5)
    assert pacer.ready_in("a", 2.0) == pytest.approx(0.2)
    pacer.forget("a")
    assert pacer.ready_in("a", 2.0) == 0.0
