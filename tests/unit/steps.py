"""Synthetic step logs for the bench's share arithmetic."""

from __future__ import annotations


def halves(high: float, low: float, seconds: int) -> list[list[float]]:
    """(time, steps) every 10 ms of a program whose bare rate is 100 steps/s, at `high` of it
    then `low` in even seconds and the other way round in odd ones: every whole second at their
    mean, the 1 s window across two seconds' `low` halves at `low`."""
    out, steps = [[0.0, 0.0]], 0.0
    for i in range(seconds * 100):
        second, first_half = divmod(i, 100)[0], i % 100 < 50
        steps += high if first_half == (second % 2 == 0) else low
        out.append([(i + 1) / 100, steps])
    return out
