"""bench/rescore_sliding.py: earlier runs' 1 s errors over every 1 s window, from kept logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rescore_sliding
from paths import keep_logs, steps_jsonl

from tests.unit.steps import halves


def test_a_kept_run_is_scored_again_over_every_window(tmp_path: Path, capsys) -> None:
    results = tmp_path / "h200-x-paths.json"
    results.write_text(json.dumps({
        "paths": {"triton": {"cap_bare_rate": 100.0, "cap_target": 0.3, "cap_err1_max_pp": 0.0}},
        "pairs": [{"case": "0.3/0.7", "window_s": 1, "bare_rate": 100.0, "clients": [
            {"name": "a", "target": 0.3, "error_pp_max": 0.0},
            {"name": "b", "target": 0.7, "error_pp_max": 0.0}]}]}))
    keep_logs(tmp_path / "h200-x-paths-logs.tar", {
        "cap-triton-steps.jsonl": steps_jsonl(halves(0.5, 0.1, 12)),
        "pairs-0.3-0.7-a-steps.jsonl": steps_jsonl(halves(0.5, 0.1, 12)),
        "pairs-0.3-0.7-b-steps.jsonl": steps_jsonl(halves(0.5, 0.9, 12))})
    assert rescore_sliding.main([str(results), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    [cap] = got["caps"]
    assert (cap["whole_s_pp"], cap["sliding_pp"]) == (0.0, 20.0)
    a = next(r for r in got["pairs"] if r["client"] == "a")
    assert a["whole_s_pp"] == 0.0 and abs(a["sliding_pp"] - 20.0) < 0.5
    assert (a["low"], a["high"]) == (0.1, 0.5)
