"""Token-grant traces: merging status snapshots, Chrome trace JSON, shares over time (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Interval = tuple[str, float, float]  # client, start s, end s
# A trace's resolution: slices are in microseconds to a tenth (chrome_trace).  A grant shorter
# than this was handed back the instant it came (the holder's next request already queued:
# tens of nanoseconds under load), and would be a slice of no length.
RESOLUTION_S = 1e-7


class TraceRecorder:
    """Collects the grant intervals of successive status snapshots; a grant seen twice keeps
    the latest end (an early return shortens it)."""

    def __init__(self) -> None:
        self._ends: dict[tuple[str, float], float] = {}
        self._started: float | None = None  # the scheduler's start on our clock
        self._uptime = 0.0  # as of the latest look

    def add(self, history: Iterable[list[Any]], uptime_s: float | None = None,
            at: float | None = None) -> None:
        """A snapshot's history (times in the scheduler's uptime); with its `uptime_s` and
        the time `at` of the look on our clock, kept on our clock: the schedulers of several
        GPUs, started at different times, were laid over one another, and one started again
        during the recording over its own earlier grants."""
        shift = 0.0
        if uptime_s is not None and at is not None:
            uptime = float(uptime_s)
            # Its start is read once, and again only where its uptime went back (it was
            # started again): each look's latency would move it a little, and a slow one, read
            # as a restart, laid the whole window in again beside itself.
            if self._started is None or uptime < self._uptime:
                self._started = at - uptime
            self._uptime = uptime
            shift = self._started
        for name, start, end in history:
            self._ends[(str(name), round(float(start) + shift, 6))] = float(end) + shift

    def intervals(self) -> list[Interval]:
        """The grants, by start; a grant handed back the instant it came (shorter than
        RESOLUTION_S) is left out."""
        kept = ((n, s, e) for (n, s), e in self._ends.items() if e - s >= RESOLUTION_S)
        return sorted(kept, key=lambda i: i[1])


def from_zero(traces: dict[int, list[Interval]]) -> dict[int, list[Interval]]:
    """The traces with the earliest grant of all of them at 0."""
    t0 = min((s for intervals in traces.values() for _, s, _ in intervals), default=0.0)
    return {key: [(n, s - t0, e - t0) for n, s, e in intervals]
            for key, intervals in traces.items()}


def chrome_trace(intervals: list[Interval], gpu: str = "GPU", pid: int = 1) -> dict[str, Any]:
    """Chrome / Perfetto trace-event JSON: one track per client, one slice per grant; `pid`:
    the GPU's process row (one per GPU when traces of several schedulers are merged)."""
    names = sorted({n for n, _, _ in intervals})
    tid = {n: i + 1 for i, n in enumerate(names)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid[n], "args": {"name": n}}
        for n in names
    ]
    events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": gpu}})
    events += [
        {
            "ph": "X",
            "name": "token",
            "cat": n,
            "pid": pid,
            "tid": tid[n],
            "ts": round(s * 1e6, 1),
            "dur": round((e - s) * 1e6, 1),
        }
        for n, s, e in intervals
    ]
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def shares_over_time(
    intervals: list[Interval], bin_s: float
) -> dict[str, list[tuple[float, float]]]:
    """Per client, (bin start, fraction of the bin its grants covered), over whole bins: a short
    last bin is left out (the last 20 ms, one client's grant, read as a share of 1.0), unless
    the whole trace is shorter than a bin, which is then measured by its own length."""
    if not intervals:
        return {}
    t0 = min(s for _, s, _ in intervals)
    t1 = max(e for _, _, e in intervals)
    bins = int((t1 - t0) / bin_s + 1e-9)
    if bins == 0:
        bins = 1
    else:
        t1 = t0 + bins * bin_s
    out: dict[str, list[float]] = {n: [0.0] * bins for n, _, _ in intervals}
    for n, s, e in intervals:
        first, last = int((s - t0) // bin_s), int(min(bins - 1, (e - t0) // bin_s))
        for b in range(first, last + 1):
            lo, hi = t0 + b * bin_s, min(t0 + (b + 1) * bin_s, t1)
            if hi > lo:
                out[n][b] += max(0.0, min(e, hi) - max(s, lo)) / (hi - lo)
    return {n: [(t0 + i * bin_s, v) for i, v in enumerate(vals)] for n, vals in out.items()}
