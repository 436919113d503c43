"""The burst/window predictor (csrc/common/predictor.c) against a Python model of spec §6.7."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gemini.native import _common

ffi, lib = _common.ffi, _common.lib
MS = 1_000_000
KEEP = lib.GEM_PRED_KEEP_NS
MERGE = lib.GEM_PRED_MERGE_NS


def new(merge_ns: int = MERGE):
    p = ffi.new("struct gem_predictor *")
    lib.gem_predictor_init(p, merge_ns)
    return p


class Model:
    """Spec §6.7 written the obvious way: keep every record, take the max of the recent ones."""

    def __init__(self, merge_ns: int) -> None:
        self.merge_ns = merge_ns
        self.begin = self.mbegin = self.mend = None
        self.merged: list[tuple[int, int]] = []

    def start(self, now: int) -> None:
        if self.begin is not None:
            return
        self.begin = now
        if self.mbegin is None or self.mend is None or now - self.mend > self.merge_ns:
            self.mbegin, self.mend = now, None

    def stop(self, now: int) -> None:
        if self.begin is None:
            return
        self.merged.append((now, now - self.mbegin))
        self.mend, self.begin = now, None

    @staticmethod
    def best(records: list[tuple[int, int]], now: int) -> int:
        return max((v for at, v in records if now - at <= KEEP), default=0)


def test_empty_predicts_zero():
    p = new()
    assert lib.gem_predictor_predict_merged(p, 10 * KEEP) == 0
    assert not lib.gem_predictor_running(p)


def test_burst_is_launch_to_sync_and_expires_after_keep():
    p = new()
    lib.gem_predictor_record_start(p, 100 * MS)
    lib.gem_predictor_record_start(p, 105 * MS)  # already running: no-op
    assert lib.gem_predictor_running(p)
    lib.gem_predictor_record_stop(p, 130 * MS)
    assert lib.gem_predictor_predict_merged(p, 130 * MS) == 30 * MS
    assert lib.gem_predictor_predict_merged(p, 130 * MS + KEEP) == 30 * MS
    assert lib.gem_predictor_predict_merged(p, 130 * MS + KEEP + 1) == 0


def test_bursts_closer_than_merge_threshold_are_merged():
    p, apart = new(), new(0)
    for q in (p, apart):
        lib.gem_predictor_record_start(q, 0)
        lib.gem_predictor_record_stop(q, 10 * MS)
        lib.gem_predictor_record_start(q, 11 * MS)  # 1 ms gap <= 2 ms: same long burst
        lib.gem_predictor_record_stop(q, 20 * MS)
    assert lib.gem_predictor_predict_merged(apart, 20 * MS) == 10 * MS  # (merge 0: each alone)
    assert lib.gem_predictor_predict_merged(p, 20 * MS) == 20 * MS
    lib.gem_predictor_record_start(p, 30 * MS)  # 10 ms gap: a new long burst
    lib.gem_predictor_record_stop(p, 35 * MS)
    assert lib.gem_predictor_predict_merged(p, 35 * MS) == 20 * MS


def test_interrupt_drops_the_open_period():
    p = new()
    lib.gem_predictor_record_start(p, 0)
    lib.gem_predictor_interrupt(p)
    lib.gem_predictor_record_stop(p, 50 * MS)
    assert lib.gem_predictor_predict_merged(p, 50 * MS) == 0


def test_estimate_full_burst():
    assert lib.gem_predictor_estimate_full_burst(0, 0, MERGE) == 0
    assert lib.gem_predictor_estimate_full_burst(5 * MS, 1 * MS, MERGE) == 10 * MS
    assert lib.gem_predictor_estimate_full_burst(5 * MS, 3 * MS, MERGE) == 5 * MS


events = st.lists(st.tuples(st.booleans(), st.integers(0, 400 * MS)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(events, st.sampled_from([0, MERGE, 10 * MS]))
def test_matches_the_model(steps, merge_ns):
    """Same answers as the keep-everything model while under the record capacity."""
    p, m = new(merge_ns), Model(merge_ns)
    now = 0
    for is_start, dt in steps:
        now += dt
        if is_start:
            lib.gem_predictor_record_start(p, now)
            m.start(now)
        else:
            lib.gem_predictor_record_stop(p, now)
            m.stop(now)
        assert bool(lib.gem_predictor_running(p)) == (m.begin is not None)
        assert lib.gem_predictor_predict_merged(p, now) == Model.best(m.merged, now)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50 * MS), st.integers(0, 10**9)), max_size=300))
def test_keeper_never_underestimates(adds):
    """Past its capacity the keeper may over-estimate (for at most KEEP), never under-estimate."""
    k = ffi.new("struct gem_record_keeper *")
    now, seen = 0, []
    for dt, value in adds:
        now += dt
        lib.gem_record_keeper_add(k, value, now)
        seen.append((now, value))
        got = lib.gem_record_keeper_max(k, now)
        assert got >= Model.best(seen, now)
        assert got <= max(v for _, v in seen)


def test_a_wait_inside_a_burst_is_not_part_of_it():
    p = new()
    lib.gem_predictor_record_start(p, 100 * MS)
    lib.gem_predictor_exclude(p, 150 * MS)  # waited 150 ms for a token
    lib.gem_predictor_record_stop(p, 300 * MS)
    assert lib.gem_predictor_predict_merged(p, 300 * MS) == 50 * MS
    lib.gem_predictor_exclude(p, 10 * MS)  # no burst open: nothing to shorten
    lib.gem_predictor_record_start(p, 400 * MS)
    lib.gem_predictor_record_stop(p, 420 * MS)
    assert lib.gem_predictor_predict_merged(p, 420 * MS) == 50 * MS


def test_an_open_period_says_how_long_it_has_run_waits_excluded():
    p = new()
    assert lib.gem_predictor_open_for(p, 100 * MS) == 0  # none open
    lib.gem_predictor_record_start(p, 100 * MS)
    lib.gem_predictor_exclude(p, 30 * MS)  # waited 30 ms for a token
    assert lib.gem_predictor_open_for(p, 150 * MS) == 20 * MS
    lib.gem_predictor_record_stop(p, 150 * MS)
    assert lib.gem_predictor_open_for(p, 160 * MS) == 0
