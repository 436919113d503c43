"""What one kind of launch costs the GPU (csrc/common/cost.c), as the hook learns it from the
segments between finished markers: a mean over launches, not over segments, older launches
fading; segments over a stalled launch call teach only while nothing better is known; a queued
launch costs at least what it did at the token's start; a graph launch's share of a segment."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini.native import _common

ffi, lib = _common.ffi, _common.lib

US = 1_000.0
MEMORY = 64.0  # the hook's kernel cost memory (inflight_costs.c, COST_MEMORY_LAUNCHES)

segments = st.lists(st.tuples(st.floats(1.0, 10_000.0), st.integers(1, 500)), min_size=1,
                    max_size=40)


def cost(**fields: float):
    return ffi.new("struct gem_cost *", fields)


def learn(c, per: float, n: int, stall: int = 0) -> int:
    return lib.gem_cost_learn(c, per * US * n, float(n), MEMORY, stall)


def test_the_first_segment_is_the_cost():
    c = cost()
    assert learn(c, 200.0, 7) == lib.GEM_COST_LEARNT
    assert c.per == pytest.approx(200.0 * US)


@given(segments)
def test_a_cost_stays_within_what_its_segments_read(segs):
    c = cost()
    for per, n in segs:
        learn(c, per, n)
    pers = [per * US for per, _ in segs]
    assert min(pers) * (1 - 1e-9) <= c.per <= max(pers) * (1 + 1e-9)


@given(st.floats(1.0, 10_000.0), st.lists(st.integers(1, 500), min_size=1, max_size=40))
def test_launches_that_all_cost_the_same_are_learnt_at_that_cost(per, ns):
    c = cost()
    for n in ns:
        learn(c, per, n)
    assert c.per == pytest.approx(per * US)


def test_a_mean_over_launches_not_over_segments():
    """A compiled model's heavy segments among single light kernels: each light one moves the
    cost by its one launch's weight, not by a segment's."""
    c = cost()
    learn(c, 1000.0, 20)  # 20 heavy launches
    learn(c, 10.0, 1)     # one light kernel
    # by segments this would be half way (505 us); by launches about 1/21 of the way
    assert c.per == pytest.approx((1000.0 * 20 * MEMORY / (MEMORY + 1) + 10.0) * US
                                  / (20 * MEMORY / (MEMORY + 1) + 1))
    assert c.per > 950.0 * US


def test_older_launches_fade():
    c = cost()
    learn(c, 100.0, 64)
    for _ in range(20):
        learn(c, 300.0, 64)
    assert c.per == pytest.approx(300.0 * US, rel=0.01)


def test_a_stalled_segment_teaches_only_while_nothing_better_is_known():
    c = cost()
    assert learn(c, 2466.0, 1, stall=1) == lib.GEM_COST_LEARNT  # the first launch: its module
    assert c.stalled == 1
    assert learn(c, 3000.0, 1, stall=1) == lib.GEM_COST_LEARNT  # still nothing better
    assert learn(c, 10.0, 5) == lib.GEM_COST_REPLACED_STALLED  # replaced, not averaged in
    assert c.per == pytest.approx(10.0 * US) and c.stalled == 0
    assert learn(c, 2466.0, 1, stall=1) == lib.GEM_COST_NOT_LEARNT
    assert c.per == pytest.approx(10.0 * US)


def test_a_replaced_stalled_cost_no_longer_holds_the_queue_to_the_next_grant():
    c = cost()
    learn(c, 2466.0, 1, stall=1)
    c.at_start = c.per  # a token started meanwhile
    learn(c, 10.0, 5)
    assert c.at_start == pytest.approx(10.0 * US)
    assert lib.gem_cost_queued(c) == pytest.approx(10.0 * US)


@given(st.floats(0.0, 1e7), st.floats(0.0, 1e7))
def test_a_queued_launch_costs_the_more_of_now_and_the_tokens_start(per, at_start):
    assert lib.gem_cost_queued(cost(per=per, at_start=at_start)) == max(per, at_start)


def test_a_graph_launch_is_its_segment_less_its_kernels():
    # 2 replays and 3 light kernels of 10 us in 1.43 ms: 700 us a replay
    assert lib.gem_cost_graph_ns(1430.0 * US, 5, 2, 10.0 * US) == pytest.approx(1400.0 * US)


@given(st.floats(1.0, 1e7), st.integers(1, 100), st.data(), st.floats(0.0, 1e7))
def test_a_graph_launch_never_reads_under_its_segments_mean(ns, n, data, kernel_per):
    graphs = data.draw(st.integers(1, n))
    share = lib.gem_cost_graph_ns(ns, n, graphs, kernel_per)
    assert share >= ns * graphs / n * (1 - 1e-12)
    assert share <= ns * (1 + 1e-12)


def test_a_raise_keeps_the_launches_learnt():
    c = cost()
    learn(c, 100.0, 32)
    launches = c.launches
    lib.gem_cost_raise(c, 2.5)
    assert c.per == pytest.approx(250.0 * US) and c.launches == launches
    learn(c, 250.0, 32)  # what comes next is averaged with the raised cost, as one
    assert c.per == pytest.approx(250.0 * US)
