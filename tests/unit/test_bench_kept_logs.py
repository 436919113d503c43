"""Benches that read bench/paths.py's kept logs: edit_speeds.py (how fast each client's grants
ran before and after a config edit, and the readings of it made before the edit) and
clock_exponent.py (each calibration's clocks beside what its grants did after it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import clock_exponent
import edit_speeds
import tail_estimators

CASE = "capped 0.3+0.3 b raised to 0.6"


def write_run(folder: Path) -> dict:
    """A run whose edit lands at t = 20 (9.8 s from b's first step, at 10.15, and 50 ms on):
    a's grants run 1.10 before it, 1.04 after; b's 1.0."""
    tag = folder / tail_estimators.case_tag(CASE)
    grants = []
    for k in range(60):  # (turns of 0.5 s from t = 10: a 150 ms, then b 150 ms or 300 after)
        t = 10.0 + 0.5 * k
        grants += [["a", t, t + 0.15], ["b", t + 0.15, t + (0.3 if t < 20.0 else 0.45)]]
    Path(f"{tag}-grants.json").write_text(json.dumps(grants))
    bare = 1000.0
    for name, (before, after) in {"a": (1.10, 1.04), "b": (1.0, 1.0)}.items():
        done, lines = 0.0, []
        for _, s, e in (g for g in grants if g[0] == name):
            lines.append({"t": s, "steps": done})
            done += (e - s) * bare * (before if s < 20.0 else after)
            lines.append({"t": e, "steps": done})
        Path(f"{tag}-{name}-steps.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    clients = [{"name": n, "target": 0.3} for n in "ab"]
    return {"pairs": [{"window_s": 10, "case": CASE, "path": "torch-eager", "bare_rate": bare,
                       "edited_at_s": 9.8, "edit_applied_ms": 50.0, "clients": clients}]}


def test_each_clients_grants_are_read_before_and_after_the_edit(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    result = write_run(tmp_path)
    monkeypatch.setattr(edit_speeds, "results_with_logs",
                        lambda logs: [("h100-run", result, str(tmp_path))])
    ((res, case, path, speeds, busy),) = edit_speeds.edit_runs("unused")
    assert (res, case, path) == ("h100-run", CASE, "torch-eager")
    assert speeds["a"]["before"] == pytest.approx(1.10, abs=1e-3)
    assert speeds["a"]["after"] == pytest.approx(1.04, abs=1e-3)
    assert speeds["b"]["first"] == pytest.approx(1.0, abs=1e-3)
    assert busy["before"] == pytest.approx(0.6, abs=0.02)  # (300 ms of each 500)
    assert busy["after"] == pytest.approx(0.9, abs=0.02)  # (450 ms of each 500)


def test_the_client_an_edit_changes_is_read_from_its_case() -> None:
    assert edit_speeds.edited_client(CASE) == "b"
    assert edit_speeds.edited_client("capped 0.3+0.35+0.3 b lowered to 0.3") == "b"


def test_the_readings_made_before_an_edit() -> None:
    # a speed-up of 0.1 with the card idle 0.4 before, 0.1 after: a quarter of it, or a half
    got = edit_speeds.readings(1.1, busy_before=0.6, busy_after=0.9, code=0.4)
    assert got == pytest.approx({"kept": 1.1, "one": 1.0, "busy": 1.025, "sqrt": 1.05,
                                 "code": 1.04})
    # gem-schd's prediction: the second before, plus b's rise of 0.3 at its speed of 1.2
    speeds = {"a": {"before": 1.1}, "b": {"before": 1.2}}
    assert edit_speeds.predicted_busy(CASE, ["a", "b"], speeds, 0.5) == pytest.approx(0.75)
    assert edit_speeds.readings(1.1, 1.0, 0.9)["busy"] == 1.1  # (no idle before: as it stood)


def test_a_calibrations_clocks_are_read_beside_what_its_grants_did_after_it() -> None:
    """bench/clock_exponent.py: each calibration line's clocks and waited share, and the work
    its grants did until the next line (at most 3 s, at least 1.5)."""
    line = ("2026-12-07 22:22:16.397 gem-schd DEBUG [{t}] [a] calibrated: speed 1.108 (by the "
            "clock: 194.9 us per launch in its grants, in the latest tails none; 1584 MHz in its "
            "grants, 1440 MHz run continuously (the lowest of the latest tails: 1440); waited on "
            "the GPU in 53.2% of its grants)\n")
    schd = line.format(t="10.0") + line.format(t="11.0") + line.format(t="20.0")
    grants = [["a", 10.0 + k * 0.5, 10.25 + k * 0.5] for k in range(30)]  # (half the time)
    steps = [(10.0 + k * 0.25, 1000.0 * 1.05 * 0.25 * ((k + 1) // 2)) for k in range(50)]
    # (the first line's span is 1 s; the last's runs past the steps: the second's alone)
    (got,) = clock_exponent.readings(schd, "a", grants, steps, 1000.0)
    assert got["by"] == "the clock" and got["logged"] == 1.108 and got["wait"] == 0.532
    assert got["ratio"] == pytest.approx(1.1)
    assert got["did"] == pytest.approx(1.05, abs=0.01)
