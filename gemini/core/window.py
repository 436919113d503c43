"""Sliding-window GPU usage per client (Gemini spec §3.4, step 2 and 4).

The scheduler records one interval per granted token, and one charge per overuse a client reports
(GPU time its work took after its token ended, while it held none: an instant at the end of its
last interval, weighing `extra` seconds).  A client's usage is the time its intervals cover
inside the window plus its charges there; where intervals of several clients overlap (only a
late return makes them overlap), the overlap is split equally between them.  Pure: `now` is
passed in, in seconds.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass


@dataclass
class Interval:
    name: str
    start: float
    end: float
    extra: float = 0.0  # a charge: start == end, `extra` seconds of use at that instant


class UsageHistory:
    """Intervals in grant order (so by start time); cheap to keep and to query per decision."""

    def __init__(self) -> None:
        self.intervals: deque[Interval] = deque()
        self._count: Counter[str] = Counter()

    def record(self, name: str, start: float, end: float) -> Interval:
        interval = Interval(name, start, end)
        self.intervals.append(interval)
        self._count[name] += 1
        return interval

    def charge(self, name: str, at: float, seconds: float) -> Interval:
        """`seconds` of use at the instant `at` (no earlier than the last start recorded)."""
        at = max(at, self.intervals[-1].start) if self.intervals else at
        interval = Interval(name, at, at, seconds)
        self.intervals.append(interval)
        self._count[name] += 1
        return interval

    def latest(self, name: str) -> Interval | None:
        """The client's latest grant (charges are not grants)."""
        for interval in reversed(self.intervals):
            if interval.name == name and not interval.extra:
                return interval
        return None

    def expire(self, window_start: float) -> None:
        """Forget the oldest intervals once they ended before the window.  (One that a late
        charge keeps open stops the sweep; those behind it count zero until it goes.)"""
        while self.intervals and self.intervals[0].end < window_start:
            old = self.intervals.popleft()
            self._count[old.name] -= 1
            if not self._count[old.name]:
                del self._count[old.name]

    def has(self, name: str) -> bool:
        return name in self._count

    def room(self, name: str, now: float, length: float, allowed: float) -> float:
        """The longest grant starting now after which `name` has used at most `allowed` seconds
        of any window of `length` seconds ending during the grant.  What slides out of the window
        while the grant runs counts as room, so that a capped client is not kept below its cap.
        (Own intervals only: the rare overlaps with others count whole.)"""
        own = [
            (max(i.start, now - length), min(i.end, now))
            for i in self.intervals
            if i.name == name and i.end > now - length and i.start < now and not i.extra
        ]
        charges = [
            (i.start, i.extra)
            for i in self.intervals
            if i.name == name and i.extra and now - length < i.start <= now
        ]

        def used_after(grant: float) -> float:  # usage of the window that ends at now + grant
            start = now + grant - length
            return (sum(max(0.0, e - max(s, start)) for s, e in own)
                    + sum(x for at, x in charges if at > start) + grant)

        if used_after(0.0) > allowed:
            return 0.0
        # used_after grows with the grant (by at most one second per second): bisect.
        low, high = 0.0, length
        if used_after(high) <= allowed:
            return high
        for _ in range(40):
            mid = (low + high) / 2
            low, high = (mid, high) if used_after(mid) <= allowed else (low, mid)
        return low

    def usage(self, window_start: float, now: float) -> dict[str, float]:
        """Seconds of GPU time per client inside [window_start, now], overlaps split equally,
        charges added."""
        simple = self._usage_without_overlaps(window_start, now)
        usage = simple if simple is not None else self._usage_sweep(window_start, now)
        for i in self.intervals:
            if i.extra and window_start <= i.start <= now:
                usage[i.name] = usage.get(i.name, 0.0) + i.extra
        return usage

    def _usage_without_overlaps(self, window_start: float, now: float) -> dict[str, float] | None:
        """The common case, in one pass: no interval starts before the previous one ended."""
        usage: dict[str, float] = defaultdict(float)
        last_end = float("-inf")
        for i in self.intervals:
            start, end = max(i.start, window_start), min(i.end, now)
            if end <= start:
                continue
            if start < last_end:
                return None
            usage[i.name] += end - start
            last_end = end
        return dict(usage)

    def _usage_sweep(self, window_start: float, now: float) -> dict[str, float]:
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
