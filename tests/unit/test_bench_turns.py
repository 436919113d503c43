"""bench/turns.py: the turns the GPU takes between a client's processes, read from their steps."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import turns


def test_turns_of_two_processes_count_the_long_gaps_where_a_turn_passes() -> None:
    # Steps of 1 ms, two of one process then two of the other, each turn 1 ms late to start.
    ends: dict[str, list[float]] = {"0": [], "1": []}
    t = 0.0
    for turn in range(10):
        t += 0.001  # (the switch)
        for _ in range(2):
            t += 0.001
            ends[str(turn % 2)].append(t)
    got = turns.turns(ends, [(0.0, t + 0.0005)], long_ms=1.5)
    assert got["turn_steps_mean"] == 2.0
    assert (got["long_gaps_at_turns"], got["long_gaps_within_turns"]) == (9, 0)
    assert got["steps_per_s"] == round(20 / (t + 0.0005), 1)


def test_only_the_steps_inside_the_spans_count() -> None:
    ends = {"0": [0.1, 0.2, 0.3, 1.1, 1.2]}
    got = turns.turns(ends, [(0.0, 0.5)], long_ms=1.5)
    assert got["seconds"] == 0.5 and got["steps_per_s"] == 6.0
    assert got["turn_steps_mean"] == 3.0 and got["long_gaps_within_turns"] == 2
