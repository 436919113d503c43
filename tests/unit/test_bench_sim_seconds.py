"""bench/sim_seconds.py: a capped client's 1 s windows on the scheduler's simulator."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import sim_seconds


def test_each_client_of_a_case_is_told_with_its_lowest_and_highest_second_and_its_share() -> None:
    clients = sim_seconds.run_case((0.3, 0.5), seed=1, seconds=6.0)
    assert [(c["client"], c["cap"]) for c in clients] == [("a", 0.3), ("b", 0.5)]
    for c in clients:
        assert c["low_pp"] <= c["high_pp"]  # (points from its cap, the lowest first)
        assert abs(c["share"] - c["cap"]) < 0.05, c  # capped and saturating: near its cap
        assert -100 * c["cap"] < c["low_pp"] < 0.0 < c["high_pp"] < 100 * (1 - c["cap"])
