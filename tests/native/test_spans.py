"""The union of time spans (csrc/common/spans.c): the GPU time a token's launches kept the GPU
busy where several lanes ran side by side, each busy moment counted once."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from gemini.native import _common

ffi, lib = _common.ffi, _common.lib


def union_length(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(s for s in spans if s[1] >= s[0]):
        if hi > end:
            total += hi - max(lo, end)
            end = hi
    return total


def spans_of(pairs: list[tuple[float, float]]):
    s = ffi.new("struct gem_spans *")
    lib.gem_spans_clear(s)
    for lo, hi in pairs:
        lib.gem_spans_add(s, lo, hi)
    return s


def test_two_lanes_side_by_side_count_their_overlap_once():
    # lane a busy 0-10 in two segments, lane b 4-12: 12 busy, where the sum says 18
    s = spans_of([(0.0, 6.0), (6.0, 10.0), (4.0, 12.0)])
    assert lib.gem_spans_total(s) == 12.0
    assert s.n == 1


def test_an_idle_gap_between_spans_is_not_counted():
    s = spans_of([(0.0, 2.0), (5.0, 6.0), (1.0, 3.0)])
    assert lib.gem_spans_total(s) == 4.0
    assert s.n == 2


def test_a_backwards_or_not_a_number_span_is_ignored():
    s = spans_of([(3.0, 1.0), (float("nan"), 2.0), (0.0, float("nan")), (0.0, 1.0)])
    assert lib.gem_spans_total(s) == 1.0


pairs = st.lists(st.tuples(st.floats(0, 1000, allow_nan=False),
                           st.floats(0, 50, allow_nan=False)).map(lambda t: (t[0], t[0] + t[1])),
                 max_size=40)


@given(pairs)
def test_the_total_is_the_union_while_the_spans_fit_and_never_less_after(spans):
    s = spans_of(spans)
    assert 0 <= s.n <= lib.GEM_SPANS_MAX
    held = [(s.lo[i], s.hi[i]) for i in range(s.n)]
    assert all(lo <= hi for lo, hi in held)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(held))  # sorted, disjoint
    exact = union_length(spans)
    total = lib.gem_spans_total(s)
    # Full, it joins the closest neighbours: their gap then counts as busy, never less.
    assert total >= exact - 1e-9
    if len(spans) <= lib.GEM_SPANS_MAX:
        assert abs(total - exact) <= 1e-9 * max(1.0, exact)
    # Everything added lies within what is held.
    assert all(any(lo >= a - 1e-12 and hi <= b + 1e-12 for a, b in held) for lo, hi in spans)
