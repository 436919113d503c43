"""Who gets the GPU next and for how long: Gemini's priority and adaptive quota (spec §3.4, §3.5).

Pure functions over plain numbers, in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

QUOTA_UPDATE_RATE = 0.5  # weight of the newest burst in the quota's moving average
NO_BURST = 1e-9


@dataclass(frozen=True)
class Standing:
    """One waiting client's position in the current windows."""

    name: str
    usage: float  # seconds used inside the (long) window
    require: float  # request × window: the guarantee
    remaining: float = math.inf  # the longest grant that keeps it under its limit in every window

    @property
    def missing(self) -> float:
        return self.require - self.usage


def priority_key(s: Standing, slack: float = 0.0) -> tuple[int, float]:
    """Sort key, smallest first: clients below their guarantee (by more than `slack`) first, the
    largest unmet fraction of it first; then everyone else by least usage (work conservation up
    to the limit)."""
    if s.missing > slack:
        return (0, -s.missing / s.require)
    return (1, s.usage)


def pick(standings: list[Standing], min_grant: float = 0.0, slack: float = 0.0) -> Standing | None:
    """The client to serve next among those with room for at least `min_grant` seconds under
    their limit, or None if all are capped.  Ties keep arrival order."""
    valid = [s for s in standings if s.remaining > 0 and s.remaining >= min_grant]
    return min(valid, key=lambda s: priority_key(s, slack)) if valid else None


def next_quota(previous: float, burst: float, base: float, minimum: float, maximum: float) -> float:
    """Self-adaptive quota: move halfway toward the client's predicted burst, within bounds.
    Without burst information the static base quota is used."""
    if burst < NO_BURST:
        return base
    quota = QUOTA_UPDATE_RATE * burst + (1 - QUOTA_UPDATE_RATE) * previous
    return min(max(quota, minimum), maximum)
