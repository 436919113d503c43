"""Who gets the GPU next and for how long (Gemini spec §3.4, §3.5), pure and in seconds.

Gemini orders waiting clients by their usage over the 10 s window: below its guarantee first,
then least usage.  Shares then hold over 10 s but not over 1 s: a client that ran alone for a
second at start-up is 'ahead' for the next ten, its neighbour takes the GPU in one lump to
catch up, and the lump slides out of the window ten seconds later and echoes (issue 12).

So the order comes from a bounded lag instead (`Credits`): while a client wants the GPU it earns
its target rate (`targets`: its request, plus an equal part of what the others leave, up to its
limit: the water level Gemini's least-usage rule reaches), and every second it is served costs
it a second.  The one owed most goes next.  Credit is capped at `bound` seconds either way, so
time a client spent away or alone is neither owed nor held against it for long.  A capped
client is paced (`Pacer`), so that its time is spread within each second, and its limit holds
over the windows too (the scheduler's `room`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

QUOTA_UPDATE_RATE = 0.5  # weight of the newest burst in the quota's moving average
NO_BURST = 1e-9


@dataclass(frozen=True)
class Standing:
    """One waiting client's position."""

    name: str
    credit: float  # seconds of GPU it is owed (negative: it is ahead)
    target: float  # its share of the GPU while the current clients want it
    remaining: float = math.inf  # the longest grant that keeps it under its limit in every window
    ready_in: float = 0.0  # seconds until its pace lets it start (Pacer; <= 0: now)
    limit: float = 1.0  # its cap (1: none)
    need: float = 0.0  # the least room it waits for (a calibration grant's: gemini.core.speed)
    # Never served yet: it goes first.  Starting owed nothing, a newcomer at 0.01 earns 10 ms a
    # second while its rivals wait owed up to a turn or two: it waited up to 1.3 s for its first
    # token, 3 s where the requests add up to more than the GPU (simulator, gem-schd's own
    # quotas).  Its first grant is its share of a turn, paid back as its credit goes below.
    new: bool = False


def pick(standings: list[Standing], min_grant: float = 0.0) -> Standing | None:
    """The client owed most among those paced to go now, with room for at least `min_grant`
    seconds (or its own `need`) under their limit, or None if all are capped; one never served
    before any other.  Ties keep arrival order."""
    valid = [s for s in standings
             if s.remaining > 0 and s.remaining >= max(min_grant, s.need) and s.ready_in <= 0]
    return max(valid, key=lambda s: (s.new, s.credit), default=None)


def targets(wanting: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """Each client's share of the GPU, from its (request, limit): its request, and what the
    requests leave shared so that shares are as equal as possible, none above its limit.
    Requests that add up to more than the GPU are scaled down to fit."""
    total_request = sum(r for r, _ in wanting.values())
    if total_request >= 1.0:
        return {n: r / total_request for n, (r, _) in wanting.items()}

    def total(level: float) -> float:
        return sum(min(max(r, level), lim) for r, lim in wanting.values())

    if total(1.0) <= 1.0:
        return {n: lim for n, (_, lim) in wanting.items()}
    low, high = 0.0, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if total(mid) < 1.0 else (low, mid)
    return {n: min(max(r, low), lim) for n, (r, lim) in wanting.items()}


def by_work(rates: Mapping[str, float], speeds: Mapping[str, float]) -> dict[str, float]:
    """Credit rates for clients that spend credit at their speeds (`speeds`: work per second
    of their grants ÷ their work alone; the others spend their time).  Each of those earns its
    target less one and the same δ, chosen so that the GPU time they are then served adds up
    to what their targets add up to: each does its target share of its own work short by δ
    (or over by -δ), the smallest error that can be had for all of them together.  Without it
    credit drifts the same way for all, and at its bound the order falls back to turns by
    time."""
    if not speeds or all(s == 1.0 for s in speeds.values()):
        return dict(rates)
    inverse = sum(1.0 / s for s in speeds.values())
    delta = sum(rates[n] / s - rates[n] for n, s in speeds.items()) / inverse
    return {n: max(r - delta, 0.0) if n in speeds else r for n, r in rates.items()}


class Credits:
    """GPU time each client is owed: earned at its target rate while it wants the GPU, spent
    when served, kept within ±`bound` seconds.  Part of a grant still to come may be charged
    ahead (a calibration's lump beside others: gemini.core.speed.SHARED_PREPAY), and is given
    back when it comes, or when none will."""

    def __init__(self, bound: float, now: float) -> None:
        self.bound = bound
        self.credit: dict[str, float] = {}
        self._ahead: dict[str, float] = {}  # charged ahead, not given back yet
        self._since = now

    def earn(self, rates: Mapping[str, float], now: float,
             unspent: Mapping[str, float] | None = None) -> None:
        """Credit the clients that wanted the GPU since the last call, each at its rate.  What
        a client still holds of a grant (`unspent`, spent when it was made) it owes beyond the
        bound: forgiven, a whole grant made alone was earned back while it ran beside a
        newcomer, who then waited seconds to catch up."""
        elapsed = max(now - self._since, 0.0)
        self._since = max(now, self._since)
        unspent = unspent or {}
        for name, rate in rates.items():
            owed = self.credit.get(name, 0.0) + rate * elapsed
            floor = self.bound + max(unspent.get(name, 0.0), 0.0)
            self.credit[name] = min(max(owed, -floor), self.bound)

    def spend(self, name: str, seconds: float) -> None:
        """`seconds` of GPU time served to `name` (negative: given back unused)."""
        self.credit[name] = self.credit.get(name, 0.0) - seconds  # (bounded at the next earn)

    def charge_ahead(self, name: str, seconds: float) -> None:
        """`seconds` of a grant still to come charged to `name` now."""
        self._ahead[name] = self._ahead.get(name, 0.0) + seconds
        self.spend(name, seconds)

    def charged_ahead(self, name: str) -> bool:
        """Has `name` been charged ahead, and not given it back yet?"""
        return name in self._ahead

    def give_back_ahead(self, name: str) -> None:
        """What `name` was charged ahead goes back to its credit (the grant came, or none
        will)."""
        self.spend(name, -self._ahead.pop(name, 0.0))

    def owe_nothing(self, name: str, ahead_by: float = 0.0) -> None:
        """`name` is owed nothing, and owes at most `ahead_by` (what it holds unspent), none of
        it what it was charged ahead: that goes with the rest (given back later, it was a
        gift; kept, it was owed for a grant that may never come)."""
        self.give_back_ahead(name)
        self.credit[name] = min(max(self.credit.get(name, 0.0), -ahead_by), 0.0)

    def of(self, name: str) -> float:
        return self.credit.get(name, 0.0)

    def forget(self, name: str) -> None:
        self.credit.pop(name, None)
        self._ahead.pop(name, None)


class Pacer:
    """Spreads a capped client's GPU time evenly over each second.  The window alone lets a
    client at 0.4 take 0.4 s in one run and then wait 0.6 s, and that first run echoes a window
    later, every second alike.  So each second served moves its pace (a theoretical arrival
    time, as in GCRA) on by 1 / limit: 40 ms at 0.4, then 60 ms of rest.  A client that asks
    after its pace was idle: its pace starts again from its request (no burst for a pause).
    Time spent waiting for the GPU is not idle: capped clients whose limits add up to the
    whole GPU then take turns without leaving it idle."""

    def __init__(self) -> None:
        self._pace: dict[str, float] = {}

    def granted(self, name: str, asked: float, seconds: float, limit: float) -> None:
        """A grant of `seconds` to a request that came at `asked`."""
        self._pace[name] = max(self._pace.get(name, asked), asked) + seconds / limit

    def adjust(self, name: str, seconds: float, limit: float, until: float = math.inf) -> None:
        """The latest grant served `seconds` more (overuse) or fewer (given back).  More moves
        its pace no later than `until`, nor earlier than it was (the windows, not the pace,
        hold back a large charge: a 2 s overrun at a cap of 0.1 held its client for 20 s, past
        the 10 s window that held it)."""
        pace = self._pace.get(name)
        if pace is not None:  # (a charge past `until` moves it no later, and never earlier)
            moved = pace + seconds / limit
            self._pace[name] = max(pace, min(moved, until)) if seconds > 0 else moved

    def raised(self, name: str, old_limit: float, new_limit: float, now: float) -> None:
        """Its limit was raised: the rest still due for time served under the old one is what
        the new one asks for that time (a client raised from 0.3 to 0.6 rested on at the old
        pace, up to 70 ms after a 30 ms grant, and had 0.49-0.52 of its first half second on
        the simulator)."""
        pace = self._pace.get(name)
        if pace is not None and pace > now and new_limit > old_limit:
            self._pace[name] = now + (pace - now) * old_limit / new_limit

    def place_at(self, name: str, at: float) -> None:
        """Its next grant may start at `at`, sooner or later than its pace."""
        if name in self._pace:
            self._pace[name] = at

    def ready_in(self, name: str, now: float) -> float:
        """Seconds until it may start its next grant (<= 0: now)."""
        return self._pace.get(name, now) - now

    def forget(self, name: str) -> None:
        self._pace.pop(name, None)


def next_quota(previous: float, burst: float, base: float, minimum: float, maximum: float) -> float:
    """Self-adaptive quota: move halfway toward the client's predicted burst, within bounds.
    Without burst information the static base quota is used."""
    if burst < NO_BURST:
        return base
    quota = QUOTA_UPDATE_RATE * burst + (1 - QUOTA_UPDATE_RATE) * previous
    return min(max(quota, minimum), maximum)
