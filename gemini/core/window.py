"""Sliding-window GPU usage per client (Gemini spec §3.4, step 2 and 4).

The scheduler records one interval per granted token, and one charge per overuse a client reports
(GPU time its work took after its token ended, while it held none: an instant at the end of its
last interval, weighing `extra` seconds).  A client's usage is the time its intervals cover
inside the window plus its charges there; where intervals of several clients overlap (only a
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
    extra: float = 0.0  # a charge: start == end, `extra` seconds of use at that instant
    calibrating: bool = False  # a grant long enough to read the client's continuous clock
    weighed: bool = False  # its speed (gemini.core.speed) was charged


class UsageHistory:
    """Intervals in grant order (so by start time), also kept per client; cheap to keep and to
    query per decision."""

    def __init__(self) -> None:
        self.intervals: deque[Interval] = deque()
        self._own: dict[str, deque[Interval]] = {}  # each client's, in the same order
        self._longest = 0.0  # the longest interval recorded (they only shrink afterwards)

    def _add(self, interval: Interval) -> Interval:
        self.intervals.append(interval)
        self._own.setdefault(interval.name, deque()).append(interval)
        self._longest = max(self._longest, interval.end - interval.start)
        return interval

    def record(self, name: str, start: float, end: float) -> Interval:
        return self._add(Interval(name, start, end))

    def charge(self, name: str, at: float, seconds: float) -> Interval:
        """`seconds` of use at the instant `at` (no earlier than the last start recorded)."""
        at = max(at, self.intervals[-1].start) if self.intervals else at
        return self._add(Interval(name, at, at, seconds))

    def latest(self, name: str) -> Interval | None:
        """The client's latest grant (charges are not grants)."""
        for interval in reversed(self._own.get(name, ())):
            if not interval.extra:
                return interval
        return None

    def expire(self, window_start: float) -> None:
        """Forget the oldest intervals once they ended before the window.  (One that a late
        charge keeps open stops the sweep; those behind it count zero until it goes.)"""
        while self.intervals and self.intervals[0].end < window_start:
            old = self.intervals.popleft()
            own = self._own[old.name]
            own.popleft()  # (the client's oldest: both are in grant order)
            if not own:
                del self._own[old.name]

    def has(self, name: str) -> bool:
        return name in self._own

    def room(self, name: str, now: float, length: float, allowed: float) -> float:
        """The longest grant starting now after which `name` has used at most `allowed` seconds
        of any window of `length` seconds ending during the grant.  What slides out of the window
        while the grant runs counts as room, so that a capped client is not kept below its cap.
        (Own intervals only: the rare overlaps with others count whole.)

        One walk over the client's intervals, oldest first (called on every decision about a
        capped client, with hundreds of grants and charges in a 10 s window: a bisection over
        them took milliseconds, on the path of every grant).  With the grant at g, the window is
        [now + g - length, now + g]: its usage grows by g, less what slides out of its start,
        which moves over our intervals (flat), the gaps between them (rising) and the charges
        (a drop as each goes)."""
        start0 = now - length
        own: list[tuple[float, float]] = []
        charges: list[tuple[float, float]] = []
        for i in reversed(self._own.get(name, ())):
            if i.start < start0 - self._longest:
                break  # it, and every older one, ended before the window
            if i.extra:
                if start0 < i.start <= now:
                    charges.append((i.start, i.extra))
            elif i.end > start0 and i.start < now:
                own.append((max(i.start, start0), min(i.end, now)))
        used = sum(e - s for s, e in own) + sum(x for _, x in charges)
        if used > allowed:
            return 0.0
        # The window's start walks from start0 to now over the breakpoints, in order (kind 0:
        # an interval begins, 1: it ends, 2: a charge leaves the window).
        events = sorted([(s, 0, 0.0) for s, _ in own] + [(e, 1, 0.0) for _, e in own]
                        + [(at, 2, x) for at, x in charges])
        pos, inside = start0, 0
        for at, kind, x in events:
            if not inside:  # in a gap: the usage rises with the grant
                if used + (at - pos) > allowed:
                    break
                used += at - pos
            pos = at
            if kind == 2:
                used -= x
            else:
                inside += 1 if kind == 0 else -1
        else:
            if used + (now - pos) <= allowed:
                return length
        return pos - start0 + (allowed - used)

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
