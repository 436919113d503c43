"""Which slot counts a lane's launches (csrc/common/lanes.c): each lane one of its own, the
same at every launch, until the slots run out; two lanes that share a slot let a marker of one
claim the other's launches as run."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gemini.native import _common

ffi, lib = _common.ffi, _common.lib

SLOTS = lib.GEM_LANES
# stream handles and thread ids (aligned addresses), the legacy stream (0) and its alias (1)
lanes = st.one_of(st.integers(0, 2**47).map(lambda a: a * 16), st.sampled_from([0, 1, 2]))


def home(lane: int) -> int:
    """The slot a lane's hash points at, as lanes.c works it out."""
    return ((lane * 0x9E3779B97F4A7C15) % 2**64 >> 32) % SLOTS


def slots_of(table, order: list[int]) -> dict[int, int]:
    return {lane: lib.gem_lanes_slot(table, lane) for lane in order}


def test_two_lanes_whose_hashes_point_at_one_slot_get_two():
    first = 0x7F0000001000
    second = next(a * 16 for a in range(1, 10**6) if home(a * 16) == home(first)
                  and a * 16 != first)
    table = ffi.new("struct gem_lanes *")
    a, b = lib.gem_lanes_slot(table, first), lib.gem_lanes_slot(table, second)
    assert a == home(first) and b != a
    assert (lib.gem_lanes_slot(table, first), lib.gem_lanes_slot(table, second)) == (a, b)


@given(st.lists(lanes, unique=True, max_size=3 * SLOTS))
def test_each_lane_has_a_slot_of_its_own_until_they_run_out(order):
    table = ffi.new("struct gem_lanes *")
    got = slots_of(table, order)
    own = [got[lane] for lane in order[:SLOTS]]
    assert len(set(own)) == len(own) and all(0 <= s < SLOTS for s in own)
    assert all(got[lane] == SLOTS for lane in order[SLOTS:])  # the slot they share
    # ... and the same one at every later launch, whatever launches between
    assert slots_of(table, list(reversed(order))) == got


@given(st.lists(lanes, unique=True, min_size=1, max_size=3 * SLOTS))
def test_a_lane_is_found_in_the_slot_it_took_and_finding_takes_none(order):
    table = ffi.new("struct gem_lanes *")
    took, never = order[: len(order) // 2], order[len(order) // 2:]
    got = slots_of(table, took)
    before = bytes(ffi.buffer(table))
    assert {lane: lib.gem_lanes_find(table, lane) for lane in took} == got
    found = [lib.gem_lanes_find(table, lane) for lane in never]
    # a lane that never took one: none, unless the slots ran out before it (then the shared)
    assert all(s == (SLOTS if len(took) >= SLOTS else SLOTS + 1) for s in found)
    assert bytes(ffi.buffer(table)) == before  # finding took no slot
