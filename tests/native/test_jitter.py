"""A retry's jittered pause (csrc/common/jitter.c): within the upper half of its backoff step,
spread over it, and moving on from one draw to the next, so that hooks that lost their pod
manager at one instant do not all come back at the same instants."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini.native import _common

ffi, lib = _common.ffi, _common.lib

MS = 1_000_000


def draws(pause_ns: int, seed: int, n: int) -> list[int]:
    state = ffi.new("uint64_t *", seed)
    return [lib.gem_jitter_ns(pause_ns, state) for _ in range(n)]


@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=2**64 - 1))
def test_a_pause_stays_within_the_upper_half_of_its_step(pause_ns, seed):
    for pause in draws(pause_ns, seed, 8):
        assert pause_ns - pause_ns // 2 <= pause <= pause_ns


def test_pauses_spread_over_the_step():
    pauses = draws(50 * MS, 12345, 2000)
    assert min(pauses) < 27 * MS and max(pauses) > 48 * MS
    assert statistics.mean(pauses) == pytest.approx(37.5 * MS, abs=1.5 * MS)


def test_processes_seeded_apart_pause_apart():
    # (each hook seeds its state with its pid and the time: two of them rarely draw alike)
    a, b = draws(50 * MS, 4242, 10), draws(50 * MS, 4243, 10)
    assert sum(x == y for x, y in zip(a, b, strict=True)) <= 1


def test_a_state_of_zero_still_moves():
    assert len(set(draws(50 * MS, 0, 10))) > 5
