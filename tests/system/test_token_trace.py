"""A token's way, one hop at a time: with debug logging the scheduler, the pod manager and the
hook stamp their lines with one clock (CLOCK_MONOTONIC), and bench/token_path.py follows each
token down (scheduler -> pod manager -> hook) and each request up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.conftest import FAST, KERNEL_MS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from token_path import token_path

pytestmark = pytest.mark.system

HOPS = ("down_schd_to_pmgr", "down_pmgr_to_hook", "down_schd_to_hook", "up_hook_to_pmgr",
        "up_pmgr_to_schd", "up_hook_to_schd")


def test_every_hop_of_a_capped_clients_tokens_is_timed(system):
    system.backend("1\ncap 0.4 0.4 1GiB\n", *FAST, "-v", pmgr_flags=("-v",))
    client = system.client("cap", "work", "--kernel-ms", str(KERNEL_MS), "--burst", "4",
                           "--seconds", "3", env={"GEMINI_LOG": "debug"},
                           stderr=subprocess.PIPE)
    _, hook_log = client.communicate(timeout=60)
    assert client.returncode == 0, hook_log[-2000:]
    system.schd.mark()
    system.pmgrs["cap"].mark()
    path = token_path("".join(system.schd.log), "".join(system.pmgrs["cap"].log), hook_log)
    # A 0.4 cap over 3 s with 50-100 ms grants: several tokens, each followed on every hop.
    for hop in HOPS:
        assert path[hop]["n"] >= 3, (hop, path)
        assert 0.0 <= path[hop]["p10_ms"] <= path[hop]["p50_ms"] <= path[hop]["p90_ms"] < 500
    # each token is followed through the pod manager: the whole way is the longer
    assert path["down_schd_to_hook"]["p10_ms"] >= path["down_schd_to_pmgr"]["p10_ms"]
    assert path["up_hook_to_schd"]["p10_ms"] >= path["up_pmgr_to_schd"]["p10_ms"]
    assert path["down_plus_up_p50_ms"] > 0
