"""Spatial partitions end to end (issue 13): gem-schd following an MPS state file, real pod
managers, and processes acting as hooks: two partitions hold tokens at the same time, and the
clients of one partition share its token by their shares."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.test_control_plane import FAST, finish, share_in, start_hook
from tests.procs import start_pod_manager, start_scheduler

CONFIG = "3\na 0.3 1 1GiB sm=50@p\nb 0.7 1 1GiB sm=50@p\nc 1 1 1GiB sm=50@q\n"
SECONDS = 5.0


def held_together(x: list, y: list) -> float:
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in x for s2, e2 in y)


@pytest.mark.system
def test_partitions_run_side_by_side_and_share_inside(tmp_path: Path) -> None:
    conf = tmp_path / "resource-config.txt"
    conf.write_text(CONFIG)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"spatial": True, "pipe_dir": "/p", "log_dir": "/l"}))
    started = [start_scheduler(conf, *FAST, "--mps-state", str(state))]
    try:
        pmgrs = {}
        for name in ("a", "b", "c"):
            pmgrs[name] = start_pod_manager(name, started[0].port)
            started.append(pmgrs[name])
            pmgrs[name].wait_for("memory limit")
        hooks = {n: start_hook(pm.port, n, SECONDS) for n, pm in pmgrs.items()}
        for proc in hooks.values():
            assert json.loads(proc.stdout.readline())["ready"]
        t0 = time.monotonic()
        results = {n: finish(p) for n, p in hooks.items()}
    finally:
        for daemon in reversed(started):
            daemon.stop()
    window = (t0 + 1.0, t0 + SECONDS - 0.5)
    inside = share_in({n: results[n] for n in ("a", "b")}, *window)
    assert inside["a"] == pytest.approx(0.3, abs=0.08), inside
    span = window[1] - window[0]
    busy = {n: clip(r["intervals"], window) for n, r in results.items()}
    held = {n: sum(e - s for s, e in spans) / span for n, spans in busy.items()}
    assert held["c"] > 0.8, held  # partition q: c alone, all the time
    assert held["a"] + held["b"] > 0.8, held  # partition p: one of a, b all the time
    both = held_together(busy["c"], busy["a"] + busy["b"]) / span
    assert both > 0.6, (both, held)  # two tokens at once


def clip(spans: list, window: tuple[float, float]) -> list[tuple[float, float]]:
    return [(max(s, window[0]), min(e, window[1])) for s, e in spans
            if e > window[0] and s < window[1]]
