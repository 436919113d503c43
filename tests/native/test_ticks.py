"""The launch gate's hot-path deadline in time-stamp counter ticks (csrc/common/ticks.c): none
until the rate is known, then the tick at which the deadline comes, within rounding, for any
rate and reading."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from gemini.native import _common

ffi, lib = _common.ffi, _common.lib

MS = 1_000_000
CALIBRATE = lib.GEM_TICKS_CALIBRATE_NS
U64_MAX = 2**64 - 1


def anchor(tick: int, ns: int):
    a = ffi.new("struct gem_ticks_anchor *")
    a.tick, a.ns = tick, ns
    return a


def test_no_deadline_in_ticks_before_the_rate_is_known():
    a = anchor(1_000, 5 * MS)
    soon = 5 * MS + CALIBRATE - 1
    assert lib.gem_ticks_at(a, 1_000 + 3 * (CALIBRATE - 1), soon, soon + MS) == 0
    assert lib.gem_ticks_at(a, 1_000, 5 * MS + CALIBRATE, 6 * MS + CALIBRATE) == 0  # (stood still)


def test_a_deadline_due_or_past_is_the_tick_now():
    a = anchor(0, 0)
    assert lib.gem_ticks_at(a, 3 * CALIBRATE, CALIBRATE, CALIBRATE) == 3 * CALIBRATE
    assert lib.gem_ticks_at(a, 3 * CALIBRATE, CALIBRATE, CALIBRATE - 7) == 3 * CALIBRATE


def test_a_deadline_beyond_the_counter_saturates():
    a = anchor(0, 0)
    assert lib.gem_ticks_at(a, U64_MAX - 10, CALIBRATE, CALIBRATE + 10**15) == U64_MAX


@given(
    per_ns=st.floats(0.5, 6.0),
    tick0=st.integers(1, 2**62),
    ns0=st.integers(0, 2**50),
    span=st.integers(CALIBRATE, 10**13),
    ahead=st.integers(1, 10**10),
)
def test_the_deadline_comes_when_the_clock_says(per_ns, tick0, ns0, span, ahead):
    """Counters of 0.5-6 GHz: the tick returned is the deadline's, to a tick per ns ahead
    times the rate's rounding (a double), whatever the anchor and the span since."""
    tick = tick0 + round(span * per_ns)
    rate = Fraction(tick - tick0, span)  # what the two readings say
    at = lib.gem_ticks_at(anchor(tick0, ns0), tick, ns0 + span, ns0 + span + ahead)
    assert abs(at - tick - ahead * rate) <= 2 + ahead * rate * Fraction(1, 10**12)
    assert at >= tick  # (less than a tick ahead: due)
