"""A token request's round trip and how much sooner a hook alone asks for its next token
(csrc/common/roundtrip.c): the lead covers nearly every round trip once a few are seen,
follows a host that slows down, and stays within its floor and its bound."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini.native import _common

ffi, lib = _common.ffi, _common.lib

US = 1_000
MS = 1_000_000
TAIL, FLOOR, MAX = 1 * MS, 1 * MS, 4 * MS


def learnt(samples: list[int]):
    r = ffi.new("struct gem_roundtrip *")
    for s in samples:
        lib.gem_roundtrip_sample(r, s)
    return r


def early(r, tail: int = TAIL, floor: int = FLOOR, most: int = MAX) -> int:
    return lib.gem_roundtrip_early(r, tail, floor, most)


def test_with_no_round_trip_seen_it_asks_the_floor_sooner():
    assert early(learnt([])) == FLOOR
    assert early(learnt([0, -5 * MS])) == FLOOR  # (nonsense samples are ignored)


def test_a_steady_round_trip_is_covered_and_no_more_once_learnt():
    r = learnt([3 * MS] * 60)
    assert r.smoothed_ns == 3 * MS
    assert early(r) == 3 * MS - TAIL + 4 * r.deviation_ns
    assert r.deviation_ns < 10 * US


def test_a_round_trip_under_the_tail_and_floor_keeps_the_floor():
    assert early(learnt([300 * US] * 20)) == FLOOR


def test_a_host_that_slows_down_is_covered_from_its_first_slow_round_trip():
    """Round trips of 0.8 ms, then 2.5 ms (a busy host): the lead covers the slow one at once,
    where the fixed 1 ms lead left 0.5 ms of it idle every time."""
    r = learnt([800 * US] * 30)
    assert early(r) == FLOOR
    lib.gem_roundtrip_sample(r, 2500 * US)
    assert TAIL + early(r) >= 2500 * US


def test_the_lead_is_bounded_however_slow_the_round_trips():
    assert early(learnt([50 * MS] * 5)) == MAX
    assert early(learnt([50 * MS] * 5), most=FLOOR // 2) == FLOOR  # the floor wins


def test_a_jittery_round_trip_is_covered_nearly_always():
    """Round trips spread like the H100 host's beside a busy program (0.6-2.2 ms, now and then
    4 ms): the lead, as it stood before each one, covers at least 97 % of them."""
    rng = random.Random(12)
    trips = [4 * MS if rng.random() < 0.02 else rng.randint(600 * US, 2200 * US)
             for _ in range(2000)]
    r = learnt(trips[:20])
    covered = 0
    for trip in trips[20:]:
        covered += TAIL + early(r, most=10 * MS) >= trip
        lib.gem_roundtrip_sample(r, trip)
    assert covered / len(trips[20:]) >= 0.97


@given(st.lists(st.integers(1, 100 * MS), min_size=1, max_size=50),
       st.integers(0, 5 * MS), st.integers(0, 5 * MS), st.integers(0, 20 * MS))
def test_the_estimate_stays_among_the_round_trips_and_the_lead_within_its_bounds(
        trips, tail, floor, most):
    r = learnt(trips)
    assert min(trips) <= r.smoothed_ns <= max(trips)
    assert r.deviation_ns >= 0
    assert floor <= early(r, tail, floor, most) <= max(floor, most)


@pytest.mark.parametrize(("hop", "late"), [
    (150 * US, 0),  # the usual hop (H100: 0.15 ms p50, 0.24 p90): nothing given up
    (lib.GEM_HOP_ALLOWANCE_NS, 0),
    (3 * MS, 3 * MS - lib.GEM_HOP_ALLOWANCE_NS),  # a late one: what it took past the allowance
    (-1, 0),  # sent "after" it came: another clock
    (lib.GEM_HOP_PLAUSIBLE_NS + 1, 0),  # long before: another clock, or not said (0 s)
])
def test_a_late_reply_gives_up_what_it_took_past_the_usual_hop(hop, late):
    assert lib.gem_roundtrip_late_ns(hop, 30 * MS) == late


NOW = 123_456 * 10**9  # (a CLOCK_MONOTONIC reading, ns)


@pytest.mark.parametrize(("sent_at", "hop"), [
    (NOW / 1e9 - 0.002, 2 * MS),
    (NOW / 1e9, 0),
    (NOW / 1e9 + 0.001, -1),  # sent after it came: another clock
    (NOW / 1e9 - 0.006, -1),  # long before: another clock
    (0.0, -1),  # not said (a v1 pod manager)
    (math.nan, -1), (math.inf, -1), (-math.inf, -1), (1e300, -1), (-1e300, -1),  # garbage
])
def test_a_replys_hop_is_read_only_where_its_send_time_is_plausible(sent_at, hop):
    assert abs(lib.gem_roundtrip_hop_ns(NOW, sent_at) - hop) <= 1 * US


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_send_time_gives_a_hop_within_bounds_or_none(sent_at):
    """(A double out of int64_t's range, converted, is undefined behaviour: checked first.)"""
    hop = lib.gem_roundtrip_hop_ns(NOW, sent_at)
    assert hop == -1 or 0 <= hop <= lib.GEM_HOP_PLAUSIBLE_NS


@given(st.integers(-(2**40), 2**40), st.integers(-(2**40), 2**40))
def test_a_late_reply_leaves_at_least_half_its_token(hop, quota):
    late = lib.gem_roundtrip_late_ns(hop, quota)
    assert 0 <= late <= max(quota, 0) // 2
    assert late <= max(hop - lib.GEM_HOP_ALLOWANCE_NS, 0)
