"""bench/high_seconds.py: what a capped run's highest 1 s windows are made of, read from the
scheduler's grants and debug lines and the program's progress (issue 12's bound on every 1 s
window)."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import high_seconds

# As paths.py keeps them: each grant to its real end (the one at 10.1 returned 10 ms early).
GRANTS = json.dumps([["cap", 10.0, 10.04], ["other", 10.05, 10.09], ["cap", 10.1, 10.13],
                     ["cap", 10.3, 10.5], ["cap", 11.6, 11.64]])
SCHD = "".join([
    "2026-12-01 21:21:00.746 gem-schd DEBUG [10.300000] [cap] token granted for 200.0 ms\n",
    "2026-12-01 21:21:00.746 gem-schd DEBUG [10.520000] [cap] calibrated: speed 1.150 (by work)\n",
    "2026-12-01 21:21:00.746 gem-schd DEBUG [10.530000] [other] calibrated: speed 1.020 (x)\n",
])


def test_the_clients_grants_and_speeds_are_read_from_what_paths_keeps() -> None:
    grants = high_seconds.read_grants(GRANTS)
    assert [(g.start, round(g.length_s, 6)) for g in grants] == [
        (10.0, 0.04), (10.1, 0.03), (10.3, 0.2), (11.6, 0.04)]
    assert high_seconds.read_speeds(SCHD) == [(10.52, 1.15)]


def progress_at_twice_bare(grants: list[high_seconds.Grant]) -> list[list[float]]:
    """100 steps/s bare; the program runs at 2x bare while it holds a grant, else not at all."""
    samples, steps, t = [], 0.0, 9.0
    while t <= 13.0 + 1e-9:
        samples.append([round(t, 3), steps])
        if any(g.start <= t < g.end for g in grants):
            steps += 200.0 * 0.01
        t += 0.01
    return samples


def test_a_window_is_told_with_the_grants_and_calibration_inside_it() -> None:
    grants, speeds = high_seconds.read_grants(GRANTS), high_seconds.read_speeds(SCHD)
    samples = progress_at_twice_bare(grants)
    top = high_seconds.highest_windows(samples, 100.0, grants, speeds, top=2)
    best = top[0]
    assert best["granted_s"] == pytest.approx(0.27, abs=0.011)  # the 40, the 30 and the 200
    assert best["work"] == pytest.approx(2 * best["granted_s"], abs=0.03)
    assert best["work_per_granted_s"] == pytest.approx(2.0, abs=0.1)
    assert best["calibrations_ms"] == [200.0] and best["grants"] == 3
    assert best["calibrated_speed"] == 1.15  # (said at 10.52, inside the window)
    # ...and one lump is listed once: the next window is at least 1 s away
    assert abs(top[1]["at_s"] - best["at_s"]) >= 1.0
    # The lowest: a window with no grant in it (10.4-11.6 s), after the calibration's end.
    [low] = high_seconds.highest_windows(samples, 100.0, grants, speeds, top=1, lowest=True)
    assert low["work"] <= 0.05 and low["grants"] <= 1, low


def test_a_calibration_is_told_by_its_length_beside_the_runs_other_grants() -> None:
    """A calibration of 100-125 ms among paced 40 ms grants (a cap of 0.4 alone) is one; a
    fixed 150 ms bound told none of them apart."""
    def grants(*lengths: float) -> list[high_seconds.Grant]:
        return [high_seconds.Grant(float(i), length) for i, length in enumerate(lengths)]

    paced = grants(0.04, 0.04, 0.125, 0.04, 0.038, 0.04)
    assert [g.length_s for g in paced if g.length_s >= high_seconds.calibration_min_s(paced)] \
        == [0.125]
    at_08 = grants(0.08, 0.08, 0.2, 0.081)  # (capped at 0.8: its paced grants are 80 ms)
    assert [g.length_s for g in at_08 if g.length_s >= high_seconds.calibration_min_s(at_08)] \
        == [0.2]


def test_each_calibration_is_told_with_the_seconds_before_it_holding_it_and_after() -> None:
    grants = high_seconds.read_grants(GRANTS)
    [cal] = high_seconds.around_calibrations(progress_at_twice_bare(grants), 100.0, grants)
    assert cal["at_s"] == pytest.approx(1.3) and cal["length_ms"] == 200.0
    # before: the 40 and the 30 ms grants; holding: the calibration; after: the last 40 ms
    for part, granted in (("before", 0.07), ("holding", 0.2), ("after", 0.04)):
        assert cal[part]["granted_s"] == pytest.approx(granted, abs=1e-6), (part, cal)
        assert cal[part]["work"] == pytest.approx(2 * granted, abs=0.03), (part, cal)


def test_the_command_reads_a_paths_file_and_the_logs_beside_it(tmp_path, capsys) -> None:
    steps = "".join(json.dumps({"t": 9.0 + i / 100, "steps": 0.8 * i}) + "\n"
                    for i in range(400))
    results = tmp_path / "gpu-20261201-000000-paths.json"
    results.write_text(json.dumps({"paths": {"torch-eager": {
        "cap_bare_rate": 200.0, "cap_target": 0.4, "cap_self_rate": 160.0}}}))
    with tarfile.open(tmp_path / "gpu-20261201-000000-paths-logs.tar.xz", "w:xz") as tar:
        for name, text in (("cap-torch-eager-grants.json", GRANTS),
                           ("cap-torch-eager-schd.log", SCHD),
                           ("cap-torch-eager-steps.jsonl", steps)):
            path = tmp_path / name
            path.write_text(text)
            tar.add(path, arcname=f"logs/{name}")
    assert high_seconds.main([str(results), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "torch-eager (bare 200.0 steps/s, cap 0.4)" in out
    assert "work 0.400" in out  # 80 steps/s of 200, in every window
    assert high_seconds.main([str(results), "--top", "1", "--self"]) == 0
    own = capsys.readouterr().out  # (its process ran at 160 uncapped)
    assert "torch-eager (its own process 160.0 steps/s uncapped, cap 0.4)" in own
    assert "work 0.500" in own
    assert high_seconds.main([str(results), "--calibrations"]) == 0
    told = capsys.readouterr().out
    assert "1.30 s (200 ms): 0.400 / 0.070  0.400 / 0.200  0.400 / 0.040" in told
    missing = tmp_path / "other-paths.json"
    missing.write_text("{}")
    assert high_seconds.main([str(missing)]) == 2
