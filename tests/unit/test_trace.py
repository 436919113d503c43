"""Trace building from status snapshots (pure)."""

import pytest

from gemini.core.trace import TraceRecorder, chrome_trace, shares_over_time


def test_recorder_keeps_the_latest_end_of_each_grant():
    rec = TraceRecorder()
    rec.add([["a", 0.0, 0.1], ["b", 0.1, 0.2]])
    rec.add([["b", 0.1, 0.15], ["a", 0.15, 0.3]])  # b returned early; a's next grant
    assert rec.intervals() == [("a", 0.0, 0.1), ("b", 0.1, 0.15), ("a", 0.15, 0.3)]


def test_a_grant_handed_back_at_once_is_no_slice():
    rec = TraceRecorder()
    rec.add([["a", 0.0, 0.1], ["b", 0.1, 0.1], ["b", 0.2, 0.3]])
    assert rec.intervals() == [("a", 0.0, 0.1), ("b", 0.2, 0.3)]
    # ... nor one handed back 30 ns after it came (a slice of 0.0 us: `gemini trace` wrote one
    # under a loaded `make test`)
    rec.add([["a", 0.3, 0.30000003]])
    assert rec.intervals() == [("a", 0.0, 0.1), ("b", 0.2, 0.3)]
    assert all(e["dur"] > 0 for e in chrome_trace(rec.intervals())["traceEvents"]
               if e["ph"] == "X")


def test_chrome_trace_has_one_track_per_client():
    trace = chrome_trace([("a", 0.0, 0.5), ("b", 0.5, 1.0)])
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [(e["cat"], e["ts"], e["dur"]) for e in slices] == [("a", 0.0, 5e5), ("b", 5e5, 5e5)]
    assert len({e["tid"] for e in slices}) == 2


def test_shares_per_whole_bin_and_a_short_last_bin_left_out():
    """(The last bin was measured by its own length: b's last 20 ms read as a share of 1.0.)"""
    grants = [("a", 0.0, 0.5), ("b", 0.5, 1.0), ("a", 1.0, 1.5), ("b", 1.5, 2.0), ("a", 2.0, 2.02)]
    shares = shares_over_time(grants, bin_s=1.0)
    assert shares["a"] == [(0.0, 0.5), (1.0, 0.5)]
    assert shares["b"] == [(0.0, 0.5), (1.0, 0.5)]
    # A trace shorter than one bin: that one, by its own length.
    short = shares_over_time([("a", 0.0, 0.75), ("b", 0.75, 0.9)], bin_s=1.0)
    assert short["a"] == [(0.0, pytest.approx(0.75 / 0.9))]


def test_traces_of_several_gpus_get_a_process_row_each() -> None:
    from gemini.cli.trace import merged

    trace, flat = merged({50051: [("a", 0.0, 0.1)], 50054: [("a", 0.0, 0.2), ("b", 0.2, 0.3)]})
    rows = {e["args"]["name"]: e["pid"] for e in trace["traceEvents"]
            if e["name"] == "process_name"}
    assert rows == {"GPU :50051": 1, "GPU :50054": 2}
    slices = [(e["pid"], e["cat"], e["dur"]) for e in trace["traceEvents"] if e["ph"] == "X"]
    assert slices == [(1, "a", 100000.0), (2, "a", 200000.0), (2, "b", 100000.0)]
    assert [n for n, _, _ in flat] == ["a :50051", "a :50054", "b :50054"]
    assert merged({50051: [("a", 0.0, 0.1)]})[1] == [("a", 0.0, 0.1)]  # one GPU: names as is


def test_grants_are_kept_on_our_clock_across_a_restart_and_across_gpus() -> None:
    """Each scheduler's history counts from its own start: a scheduler started again during
    the recording laid its new grants over its old ones, and two GPUs' schedulers started 4 s
    apart showed grants held together one after the other."""
    from gemini.core.trace import from_zero

    rec = TraceRecorder()
    rec.add([["a", 1.0, 1.1]], uptime_s=3.0, at=103.0)  # started at 100 on our clock
    rec.add([["a", 1.0, 1.1], ["a", 2.0, 2.1]], uptime_s=3.2004, at=103.2)  # (a look's latency)
    rec.add([["a", 1.0, 1.1], ["a", 2.0, 2.1]], uptime_s=3.4, at=104.1)  # a slow one: 0.7 s
    rec.add([["a", 1.0, 1.1]], uptime_s=1.5, at=105.0)  # started again, at 103.5
    assert rec.intervals() == [("a", 101.0, 101.1), ("a", 102.0, 102.1),
                               ("a", pytest.approx(104.5), pytest.approx(104.6))]
    first, second = TraceRecorder(), TraceRecorder()
    first.add([["a", 4.0, 5.0]], uptime_s=5.0, at=105.0)
    second.add([["b", 0.0, 1.0]], uptime_s=1.0, at=105.0)  # started 4 s after the first
    traces = from_zero({1: first.intervals(), 2: second.intervals()})
    assert traces == {1: [("a", 0.0, 1.0)], 2: [("b", 0.0, 1.0)]}
