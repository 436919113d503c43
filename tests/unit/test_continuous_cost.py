"""bench/continuous_cost.py's reading of the scheduler's log: runs counted in launches and, for
a program of graph replays (wire.RUN_GRAPHS), in graph launches, each kept apart."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import continuous_cost


def test_runs_are_read_in_either_unit():
    log = "\n".join([
        "solo: asks for a token (40.000 ms burst, 0.000 ms overuse, ran 146 launches in "
        "38.641 ms)",
        "solo: asks for a token (40.000 ms burst, 0.000 ms overuse, waited 1.000 ms on the GPU, "
        "ran 54 graph launches in 36.079 ms)",
        "solo: asks for a token (40.000 ms burst, 0.000 ms overuse)",
    ])
    assert continuous_cost.runs_in(log) == {"launches": [(146, 38.641)],
                                            "graph launches": [(54, 36.079)]}
