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
        # (in shared turns a client's highest second may sit under its cap: 0.5 read -0.38)
        assert -100 * c["cap"] < c["low_pp"] < c["high_pp"] < 100 * (1 - c["cap"])
    # (in shared turns by default, as gem-schd: -2.1 and -0.5 here; --no-shared-turns runs
    # 100 ms turns, -5.0 and -6.3)
    off = sim_seconds.run_case((0.3, 0.5), seed=1, seconds=6.0, shared_turns=False)
    assert min(c["low_pp"] for c in off) < min(c["low_pp"] for c in clients) - 1.0


def test_a_shared_case_tells_each_clients_worst_windows_from_the_start_and_after_calibrations(
) -> None:
    clients = sim_seconds.run_shared_case((0.3, 0.7), alike=False, seed=1, seconds=12.0)
    assert [(c["client"], c["target"]) for c in clients] == [("light", 0.3), ("hungry", 0.7)]
    for c in clients:  # (a window from 1 s holds the first calibrations; one from 8 s does not)
        assert 0.0 < c["worst_1s_after_pp"] <= c["worst_1s_pp"] < 100 * c["target"], c
        assert 0.0 < c["worst_10s_pp"] < c["worst_1s_pp"], c
