"""Sliding-window GPU usage per client (Gemini spec §3.4, step 2 and 4).

The scheduler records one interval per granted token.  A client's usage is the time its intervals
cover inside the window; where intervals of several clients overlap (only charged overuse or a
late return makes them overlap), the overlap is split equally between them.  Pure: `now` is
passed in, in seconds.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass


@dataclass
class Interval:
    name: str
    start: float
    end: float


class UsageHistory:
    def __init__(self) -> None:
        self.intervals: deque[Interval] = deque()

    def record(self, name: str, start: float, end: float) -> Interval:
        interval = Interval(name, start, end)
        self.intervals.append(interval)
        return interval

    def latest(self, name: str) -> Interval | None:
        for interval in reversed(self.intervals):
            if interval.name == name:
                return interval
        return None

    def expire(self, window_start: float) -> None:
        """Forget intervals that ended before the window (they no longer count)."""
        self.intervals = deque(i for i in self.intervals if i.end >= window_start)

    def has(self, name: str) -> bool:
        return any(i.name == name for i in self.intervals)

    def usage(self, window_start: float, now: float) -> dict[str, float]:
        """Seconds of GPU time per client inside [window_start, now], overlaps split equally."""
        events: list[tuple[float, int, str]] = []
        for i in self.intervals:
            start, end = max(i.start, window_start), min(i.end, now)
            if end > start:
                events.append((start, 1, i.name))
                events.append((end, -1, i.name))
        # Ends sort before starts at the same instant, so touching intervals never overlap.
        events.sort(key=lambda e: (e[0], e[1]))
        usage: dict[str, float] = defaultdict(float)
        running: dict[str, int] = defaultdict(int)
        count = 0
        last = window_start
        for t, delta, name in events:
            if count:
                share = (t - last) / count
                for client, n in running.items():
                    usage[client] += share * n
            running[name] += delta
            if not running[name]:
                del running[name]
            count += delta
            last = t
        return dict(usage)
