"""Sliding-window usage: the one-pass path and the overlap sweep agree."""

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gemini.core.window import UsageHistory


def test_overlaps_are_split_equally():
    h = UsageHistory()
    h.record("a", 0.0, 2.0)
    h.record("b", 1.0, 3.0)  # overlaps a for 1 s
    assert h.usage(0.0, 3.0) == pytest.approx({"a": 1.5, "b": 1.5})


def test_usage_is_clipped_to_the_window_and_expired_intervals_go():
    h = UsageHistory()
    h.record("a", 0.0, 1.0)
    h.record("b", 1.0, 2.0)
    h.expire(1.5)
    assert not h.has("a") and h.has("b")
    assert h.usage(1.5, 2.0) == pytest.approx({"b": 0.5})


intervals = st.lists(
    st.tuples(st.sampled_from("abc"), st.floats(0, 0.5), st.floats(0, 0.5)), max_size=12
)


@given(intervals, st.floats(0, 3), st.floats(0, 3))
def test_one_pass_equals_sweep_whenever_it_answers(items, window_start, span):
    h = UsageHistory()
    t = 0.0
    for name, gap, length in items:
        t += gap
        h.record(name, t, t + length)
        t += length  # back to back: no overlaps
    now = window_start + span
    fast = h._usage_without_overlaps(window_start, now)
    assert fast is not None
    sweep = h._usage_sweep(window_start, now)
    assert fast.keys() == sweep.keys()
    for name in fast:
        assert fast[name] == pytest.approx(sweep[name])


def test_room_counts_what_slides_out_during_the_grant():
    h = UsageHistory()
    h.record("a", 0.0, 0.4)  # 0.4 s used at the start of a 1 s window
    # At 1.0 the cap (0.4 per 1 s) is full, but every second of a grant slides one used second
    # out: the grant may run until the old interval has gone, 0.4 s.
    assert h.room("a", 1.0, 1.0, 0.4) == pytest.approx(0.4, abs=1e-6)
    assert h.room("a", 0.5, 1.0, 0.4) == pytest.approx(0.0)
    # Someone else's usage is not ours.
    h.record("b", 1.0, 1.5)
    assert h.room("a", 1.5, 1.0, 0.4) == pytest.approx(0.4, abs=1e-6)


def test_room_holds_no_use_from_before_since():
    """A cap lowered at `since`: what it used before under the old cap is not held against
    the new one, in any of the window's grants, whether the window is walked from its newest
    interval or its oldest."""
    h = UsageHistory()
    for k in range(20):
        h.record("a", k * 0.5, k * 0.5 + 0.3)  # 0.6 of every second, up to 9.8 s
        h.charge("a", k * 0.5 + 0.3, 0.01)
    assert h.room("a", 10.0, 1.0, 0.35) == pytest.approx(0.0)
    for length in (1.0, 10.0):
        allowed = 0.35 * length
        room = h.room("a", 10.0, length, allowed, since=9.9)
        assert room == pytest.approx(allowed, abs=1e-6), length
    # Use after it counts: the 0.1 s granted at 10.0, and a charge at `since` itself (the
    # overuse of a grant cut there, charged at its end).
    h.record("a", 10.0, 10.1)
    assert h.room("a", 10.2, 1.0, 0.35, since=9.9) == pytest.approx(0.25, abs=1e-6)
    h.charge("a", 10.3, 0.05)
    assert h.room("a", 10.4, 1.0, 0.35, since=10.3) == pytest.approx(0.3, abs=1e-6)


def test_room_weighs_each_second_of_the_grant_at_its_rate():
    h = UsageHistory()
    h.record("a", 0.0, 0.4)  # 0.4 s used at the start of a 1 s window that allows 0.5
    assert h.room("a", 1.0, 1.0, 0.5) == pytest.approx(0.5, abs=1e-6)
    # At 1.5 a second of the grant weighs 1.5 (its speed, charged at its end): while the old
    # interval slides out the window's use still rises by 0.5 a second, and the 0.1 left is
    # gone 0.2 s in (the window [0.2, 1.2]: 0.2 of old use, 0.2 x 1.5 of the grant).
    assert h.room("a", 1.0, 1.0, 0.5, rate=1.5) == pytest.approx(0.2, abs=1e-6)
    # In a gap it rises by the whole rate: 0.1 s left at 1.25 is 80 ms.
    assert h.room("a", 0.5, 1.0, 0.5, rate=1.25) == pytest.approx(0.08, abs=1e-6)


def test_a_refund_that_slides_out_ends_the_room_there():
    h = UsageHistory()
    h.record("a", 0.0, 0.4)
    h.charge("a", 0.2, -0.1)  # given back: another client's overrun took 0.1 s of its grant
    # At 1.0 the window holds 0.3 of 0.35 allowed; a grant slides the old interval out as it
    # runs, but once the refund leaves (0.2 s in) the window holds 0.4: no room past that.
    # (An over-full window met where the use stays flat made the walk divide by zero, and
    # gem-schd stopped granting: two pods of 0.3 and 0.7 hung, 2026-12-03.)
    assert h.room("a", 1.0, 1.0, 0.35) == pytest.approx(0.2, abs=1e-9)
    assert h.room("a", 1.0, 1.0, 0.35, rate=1.2) == pytest.approx(0.2, abs=1e-9)


def test_charges_count_in_usage_and_room_until_they_slide_out():
    h = UsageHistory()
    h.record("a", 0.0, 3.5)
    assert h.room("a", 4.0, 10.0, 4.0) == pytest.approx(0.5, abs=1e-6)
    h.charge("a", 3.5, 0.5)  # 0.5 s of a's work ran after its token
    assert h.usage(0.0, 4.0) == pytest.approx({"a": 4.0})
    assert h.room("a", 4.0, 10.0, 4.0) == pytest.approx(0.0)
    assert h.usage(3.0, 13.0) == pytest.approx({"a": 1.0})  # the charge still in
    assert h.usage(3.6, 14.0) == pytest.approx({})  # slid out
    assert h.latest("a").extra == 0.0  # the grant, not the charge
    h.expire(3.6)
    assert not h.has("a")


def _room_by_definition(h: UsageHistory, name: str, now: float, length: float,
                        allowed: float, rate: float = 1.0) -> float:
    """room() from its definition: the first grant g (on a fine grid) after which the window
    ending at now + g holds more than `allowed` of the client's use (the grant included, each
    of its seconds weighing `rate`)."""
    def used_after(g: float) -> float:
        start = now + g - length
        own = sum(max(0.0, min(i.end, now) - max(i.start, start)) for i in h.intervals
                  if i.name == name and not i.extra)
        return own + sum(i.extra for i in h.intervals
                         if i.name == name and i.extra and start < i.start <= now) + g * rate

    # A fine grid, and the instants just before each charge leaves the window: the use peaks
    # there, for as little as a few microseconds, which a grid may step over.
    steps = 4000
    start0 = now - length
    leaves = [i.start - start0 - 1e-12 for i in h.intervals
              if i.name == name and i.extra and start0 < i.start <= now]
    points = sorted({length * k / steps for k in range(steps + 1)}
                    | {g for g in leaves if 0.0 <= g <= length})
    before = 0.0
    for g in points:
        if used_after(g) > allowed + 1e-9:
            return before
        before = g
    return length


grants = st.lists(st.tuples(st.sampled_from("ab"), st.floats(0, 0.3), st.floats(0, 0.3),
                            st.sampled_from([0.0, 0.0, 0.02])), max_size=15)


@given(grants, st.floats(0, 1.5), st.sampled_from([(1.0, 0.4), (1.0, 0.2), (2.0, 0.6)]))
@example([("a", 0.0, 0.25, 0.0), ("a", 0.0, 0.18994552984194038, 0.0),
          ("a", 0.28746324570369414, 0.10672966041735578, 0.0),
          ("a", 0.28140626879131486, 0.24256557020678374, 0.0),
          ("a", 0.18733649801835783, 0.05, 0.0)], 0.8, (1.0, 0.2))
def test_room_is_the_first_grant_that_would_overshoot(items, idle, window):
    """Grants (some followed by a charge for overuse), then a pause: room() agrees with its
    definition to the grid's step, whatever the mix of use, gaps and charges."""
    length, allowed = window
    h, t = _history(items)
    now = t + idle
    assert h.room("a", now, length, allowed) == pytest.approx(
        _room_by_definition(h, "a", now, length, allowed), abs=length / 4000 + 1e-9)


def _history(items: list[tuple[str, float, float, float]]) -> tuple[UsageHistory, float]:
    """Grants back to back after their gaps, each followed by its charge (if any); and when
    the last ends."""
    h = UsageHistory()
    t = 0.0
    for name, gap, span, overuse in items:
        t += gap
        h.record(name, t, t + span)
        t += span
        if overuse:
            h.charge(name, t, overuse)
    return h, t


@given(grants, st.floats(0, 3), st.floats(0, 3))
def test_a_clients_use_in_a_span_is_what_usage_reads(items, start, span):
    """used() (the scheduler's bound on a raised cap's top-up reads it) agrees with usage():
    grants, back to back (no overlaps), clipped to the span, and the charges within it."""
    h, _ = _history(items)
    usage = h.usage(start, start + span)
    for name in "ab":
        assert h.used(name, start, start + span) == pytest.approx(usage.get(name, 0.0))


ops = st.lists(st.tuples(st.sampled_from("ab"), st.floats(0, 0.3), st.floats(0, 0.3),
                         st.sampled_from([0.0, 0.0, 0.02, 0.005, -0.01]),
                         st.sampled_from([None, None, 0.0, 0.5])), min_size=1, max_size=40)


@given(ops, st.floats(-0.2, 1.5), st.sampled_from([(1.0, 0.4), (2.0, 0.6), (4.0, 1.5)]),
       st.sampled_from([0.0, 0.05, 0.2, 0.7]), st.floats(0.0, 3.0),
       st.sampled_from([1.0, 1.0, 1.13, 1.6]))
def test_room_up_to_a_horizon_is_the_room_cut_there(items, idle, window, horizon, forget, rate):
    """However the history got where it is (grants cut short when their token came back,
    charges, the oldest forgotten, a grant still running at `now`), and whatever a second of
    the grant weighs (a capped client's speed), room() agrees with its definition, and with a
    horizon it is that room cut at the horizon: the running totals and the shorter walks that
    make a capped decision cheap change nothing."""
    length, allowed = window
    h = UsageHistory()
    t = 0.0
    for name, gap, span, overuse, back in items:
        t += gap
        grant = h.record(name, t, t + span)
        if back is not None:  # the token came back early, after `back` of it
            h.shorten(grant, t + back * span)
            span *= back
        t += span
        if overuse:
            h.charge(name, t, overuse)
    now = t + idle  # (idle < 0: the latest grant still runs)
    h.expire(now - length - forget)
    exact = _room_by_definition(h, "a", now, length, allowed, rate)
    step = length / 4000 + 1e-9
    assert h.room("a", now, length, allowed, rate=rate) == pytest.approx(exact, abs=step)
    if horizon:
        assert h.room("a", now, length, allowed, horizon, rate) == pytest.approx(
            min(exact, horizon), abs=step)


def test_the_grants_that_overlap_a_span_newest_first_charges_left_out():
    h = UsageHistory()
    h.record("a", 0.0, 1.0)
    h.charge("a", 1.0, 0.2)
    h.record("b", 1.0, 1.5)
    h.record("c", 1.5, 3.0)
    h.record("a", 3.0, 4.0)
    assert [i.name for i in h.overlapping(1.0, 1.6)] == ["c", "b"]  # (a's ends at 1.0)
    assert [i.name for i in h.overlapping(0.5, 3.0)] == ["c", "b", "a"]
    assert h.overlapping(5.0, 6.0) == []
