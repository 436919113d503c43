"""Sliding-window GPU usage per client (Gemini spec §3.4, step 2 and 4).

The scheduler records one interval per granted token, and one charge per overuse a client reports
(GPU time its work took after its token ended, while it held none: an instant at the end of its
last interval, weighing `extra` seconds).  A client's usage is the time its intervals cover
inside the window plus its charges there; where intervals of several clients overlap (only a
late return makes them overlap), the overlap is split equally between them.  Pure: `now` is
passed in, in seconds.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from dataclasses import dataclass


@dataclass
class Interval:
    name: str
    start: float
    end: float
    extra: float = 0.0  # a charge: start == end, `extra` seconds of use at that instant
    calibrating: bool = False  # a grant long enough to read the client's continuous clock
    shared: bool = False  # granted while others wanted the GPU too
    weighed: bool = False  # its speed (gemini.core.speed) was charged
    cut_calibration: bool = False  # a calibration cut short by a lowered cap: its run not read
    top_up: bool = False  # a grant owed for a raised cap (scheduler._top_up_raised): no pace


class UsageHistory:
    """Intervals in grant order (so by start time), also kept per client; cheap to keep and to
    query per decision."""

    def __init__(self) -> None:
        self.intervals: deque[Interval] = deque()
        self._own: dict[str, deque[Interval]] = {}  # each client's, in the same order
        self._held: dict[str, float] = {}  # each client's use in what is kept (see _weight)
        self._reach: dict[str, float] = {}  # no interval of the client's ends after this
        self._longest = 0.0  # the longest interval recorded (they only shrink afterwards)

    def _add(self, interval: Interval) -> Interval:
        name = interval.name
        self.intervals.append(interval)
        self._own.setdefault(name, deque()).append(interval)
        self._held[name] = self._held.get(name, 0.0) + _weight(interval)
        self._reach[name] = max(self._reach.get(name, interval.end), interval.end)
        self._longest = max(self._longest, interval.end - interval.start)
        return interval

    def record(self, name: str, start: float, end: float) -> Interval:
        return self._add(Interval(name, start, end))

    def charge(self, name: str, at: float, seconds: float) -> Interval:
        """`seconds` of use at the instant `at` (no earlier than the last start recorded)."""
        at = max(at, self.intervals[-1].start) if self.intervals else at
        return self._add(Interval(name, at, at, seconds))

    def shorten(self, interval: Interval, end: float) -> None:
        """A grant that ended early (its token came back): it ends at `end` instead."""
        if interval.name in self._held and not interval.extra:
            self._held[interval.name] -= interval.end - end
        interval.end = end

    def latest(self, name: str) -> Interval | None:
        """The client's latest grant (charges are not grants)."""
        for interval in reversed(self._own.get(name, ())):
            if not interval.extra:
                return interval
        return None

    def used(self, name: str, start: float, end: float) -> float:
        """`name`'s use in [start, end]: its grants' time there and its charges, as usage()
        reads it (a charge at `start` counts, where room() has it slid out already: a bound
        read with this errs low), but for overlaps with others, which count whole (as in
        room()).  Walked from the newest."""
        total = 0.0
        for i in reversed(self._own.get(name, ())):
            if i.start < start - self._longest:
                break  # it, and every older one, ended before `start`
            if i.extra:
                total += i.extra if start <= i.start <= end else 0.0
            elif i.end > start and i.start < end:
                total += min(i.end, end) - max(i.start, start)
        return total

    def next_slide(self, name: str, now: float, length: float) -> float:
        """Seconds until the start of the window of `length` ending `now` reaches the next of
        `name`'s grants or charges in it, where its room can next grow (inf: none).  Walked
        from the newest: a short window holds few."""
        since = now - length
        first = math.inf
        for interval in reversed(self._own.get(name, ())):
            if interval.start <= since:
                break
            first = interval.start
        return first - since

    def overlapping(self, start: float, end: float) -> list[Interval]:
        """The grants (not charges) that overlap [start, end], newest first."""
        out = []
        for i in reversed(self.intervals):
            if i.start < start - self._longest:
                break  # it, and every older one, ended before `start`
            if not i.extra and i.start < end and i.end > start:
                out.append(i)
        return out

    def expire(self, window_start: float) -> None:
        """Forget the oldest intervals once they ended before the window.  (One that a late
        charge keeps open stops the sweep; those behind it count zero until it goes.)"""
        while self.intervals and self.intervals[0].end < window_start:
            old = self.intervals.popleft()
            own = self._own[old.name]
            own.popleft()  # (the client's oldest: both are in grant order)
            self._held[old.name] -= _weight(old)
            if not own:
                del self._own[old.name], self._held[old.name], self._reach[old.name]

    def has(self, name: str) -> bool:
        return name in self._own

    def room(self, name: str, now: float, length: float, allowed: float,
             horizon: float = math.inf, rate: float = 1.0, since: float = -math.inf) -> float:
        """The longest grant starting now after which `name` has used at most `allowed` seconds
        of any window of `length` seconds ending during the grant, up to `horizon` (the longest
        the caller may grant: the windows are then walked only that far).  Each second of the
        grant weighs `rate` (>= 1): what it will be charged on average, where part of that is
        charged at its end (a lone client's calibration: scheduler._charge_rate).  What slides
        out of a window while the grant runs counts as room, so that a capped client is not
        kept below its cap.  (Own intervals only: the rare overlaps with others count whole.)
        Use before `since` does not count (a cap lowered then: the time used under the old one
        is not held against the new).

        Called on every decision about a capped client, with hundreds of grants and charges in
        a 10 s window: a bisection over them took milliseconds, and a walk over all of them
        ~0.1 ms, on the path of every grant.  With the grant at g, the window is
        [now + g - length, now + g]: its usage grows by g x rate, less what slides out of its
        start, which moves over our intervals (rising by rate - 1), the gaps between them
        (rising by rate) and the charges (a drop as each goes)."""
        start0 = now - length
        end = start0 + min(horizon, length)  # how far the window's start is followed
        used, events = self._window(name, start0, now, end, since)
        if used > allowed:
            return 0.0
        # The window's start walks from start0 to `end` over the breakpoints, in order (kind 0:
        # an interval begins, 1: it ends, 2: a charge leaves the window).
        events.sort()
        events.append((end, 3, 0.0))  # (the walk's end)
        pos, inside = start0, 0
        for at, kind, x in events:
            rise = rate - 1.0 if inside else rate
            # (a nanosecond's slack: use that reaches `allowed` just as an interval begins to
            # slide out read a hair over it in floats, and lost that interval's whole room)
            if used + rise * (at - pos) > allowed + 1e-9:
                # (over already where a refund, a negative charge, left the window: no room
                # past here, whatever the rise)
                return pos - start0 + ((allowed - used) / rise if used < allowed else 0.0)
            used += rise * (at - pos)
            pos = at
            if kind == 2:
                used -= x
            elif kind < 2:
                inside += 1 if kind == 0 else -1
        return min(horizon, length)

    def _window(self, name: str, start0: float, now: float, end: float,
                since: float = -math.inf) -> tuple[float, list[tuple[float, int, float]]]:
        """The client's use in [start0, now] (from `since`, where later), and room()'s
        breakpoints before `end`.  The use is summed over the window's intervals where they are
        few (a short window, or one cut by `since`: walked from the newest), else it is what is
        kept less what lies outside the window (the long window, whose start is near the oldest
        kept: walked from the oldest, to `end`).
        (Inlined, without min/max: this runs for every capped client at every decision.)"""
        own = self._own.get(name)
        if not own:
            return 0.0, []
        events: list[tuple[float, int, float]] = []
        # Nothing before `since` counts: as if the window began there; a charge at it does
        # (a grant cut at the edit: its queue's overuse, charged at its end).
        moved = since > start0
        if moved:
            start0 = since
        if moved or start0 - own[0].start > own[-1].start - start0:
            used, floor = 0.0, start0 - self._longest
            for i in reversed(own):
                s = i.start
                if s < floor:
                    break  # it, and every older one, ended before the window
                if i.extra:
                    if (start0 < s or (moved and s == start0)) and s <= now:
                        used += i.extra
                        if s < end:
                            events.append((s, 2, i.extra))
                    continue
                e = i.end
                if e > start0 and s < now:
                    s, e = s if s > start0 else start0, e if e < now else now
                    used += e - s
                    if s < end:
                        events.append((s, 0, 0.0))
                        if e < end:
                            events.append((e, 1, 0.0))
            return used, events
        used = self._held[name] - self._after(own, name, now)
        for i in own:
            s = i.start
            if s >= end:
                break  # it, and every newer one, lies wholly past the window's walk
            if i.extra:
                if s <= start0:
                    used -= i.extra
                elif s <= now:
                    events.append((s, 2, i.extra))
                continue
            e = i.end
            if s < start0:
                used -= (e if e < start0 else start0) - s
                s = start0
            if e > s and s < now:
                events.append((s, 0, 0.0))
                if e < end and e < now:
                    events.append((e, 1, 0.0))
        return used, events

    def _after(self, own: deque[Interval], name: str, now: float) -> float:
        """The client's use kept that lies after `now` (none, unless a grant still runs)."""
        if self._reach[name] <= now:
            return 0.0
        after, reach = 0.0, now
        for i in reversed(own):
            if i.start <= now - self._longest:
                break  # it, and every older one, ended by now
            if i.extra:
                after += i.extra if i.start > now else 0.0
            elif i.end > now:
                after += i.end - max(i.start, now)
            reach = max(reach, i.end)
        self._reach[name] = reach  # (still none ends after it: a later look walks nothing)
        return after

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


def _weight(i: Interval) -> float:
    """An interval's use: its length, or a charge's seconds."""
    return i.extra if i.extra else i.end - i.start

