"""bench/speed_parts.py: a capped run's speed charge split into what its calibration tails
miss of the bare cost (beta) and what its grants' segments miss of their work (epsilon), read
from the hook's and the scheduler's debug lines (issue 12: caps of 0.6 and more go over)."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import speed_parts
from high_seconds import Grant

# Two tokens' end lines: 4 launches a step over the run's 250 steps (1000 launches).
HOOK = "".join([
    "gemini-hook[cap 1] debug: [1.0] measured 20.0 ms over 100 launches (0 graphs, 0.000 ms); "
    "left out: 300 launches (0 graphs) after gaps, 80.0 ms, 0 (0) after holds\n",
    "gemini-hook[cap 1] debug: [1.1] measured 40.0 ms over 200 launches (0 graphs, 0.000 ms); "
    "left out: 390 launches (0 graphs) after gaps, 80.0 ms, 10 (0) after holds\n",
])
SCHD = "".join([
    "2026-12-02 16:13:06.288 gem-schd DEBUG [2.0] [cap] calibrated: speed 1.100 (by the clock: "
    "194.8 us per launch in its grants, in the latest tails none; 1622 MHz in its grants)\n",
    "2026-12-02 16:13:09.398 gem-schd DEBUG [5.0] [cap] calibrated: speed 1.037 (by work: 190.0 "
    "us per launch in its grants, in the latest tails 198.0, 200.0 (the first, a floor: 198.6);"
    " 1680 MHz in its grants)\n",
])


def test_the_parts_are_read_from_the_hooks_and_the_schedulers_lines() -> None:
    assert speed_parts.launches_counted(HOOK) == (1000, 0)
    assert speed_parts.latest_costs(SCHD) == (190.0, [198.0, 200.0], False)
    assert speed_parts.latest_costs("no calibration by work") is None
    # bare: 1000 steps/s of 4 launches, 250 us a launch; the slowest tail 200: beta 1.25
    parts = speed_parts.speed_parts({"cap_bare_rate": 1000.0, "cap_work_per_granted_s": 1.2,
                                     "cap_charged_per_granted_s": 1.05}, HOOK, SCHD, 250.0)
    assert parts is not None
    assert (parts["per_step"], parts["bare_us"]) == (4, 250.0)
    assert parts["speed_read"] == pytest.approx(200.0 / 190.0, abs=1e-3)
    assert parts["beta"] == 1.25
    assert parts["epsilon"] == pytest.approx(1.2 / (250.0 / 190.0), abs=1e-3)
    # (what the work says, the speed read times both parts)
    assert parts["beta_epsilon"] * parts["speed_read"] == pytest.approx(1.2, abs=2e-3)


def test_a_program_of_graph_replays_is_read_per_replay() -> None:
    hook = HOOK.replace("(0 graphs, 0.000 ms)", "(25 graphs, 1.0 ms)")
    schd = SCHD.replace("us per launch", "us per graph launch")
    parts = speed_parts.speed_parts({"cap_bare_rate": 1000.0, "cap_work_per_granted_s": 1.1},
                                    hook, schd, 25.0)
    assert parts is not None and (parts["unit"], parts["per_step"]) == ("graph replay", 2)


def test_the_programs_own_events_time_its_grants_and_tails_whole() -> None:
    """Steps of 0.72 ms (4 launches: 180 us each) through an 80 ms grant, a sync's 1.5 ms step
    in it left out, and 0.8 ms steps (200 us) through a calibration's last 80 ms: the speed the
    hook should read, 200 / 180, where its own segments may fall on a part of each grant."""
    grants = [Grant(0.0, 0.08), Grant(0.1, 0.2)]
    ends = [0.001 + 0.00072 * i for i in range(100)]  # ends at 0.0723 ms
    ends[50:] = [t + 0.0015 for t in ends[50:]]  # (a sync: one long step)
    ends += [0.215 + 0.0008 * i for i in range(100)]  # the tail: 0.22-0.3 s
    samples = [(t, float(i + 1)) for i, t in enumerate(ends)]
    events = speed_parts.event_costs(samples, grants, 4)
    assert events is not None
    assert events == (pytest.approx(180.0), pytest.approx(200.0))
    # Synced every k steps (not timed a step at a time): nothing to read.
    assert speed_parts.event_costs([(0.0, 0.0), (0.01, 12.0), (0.02, 24.0)], grants, 4) is None


def test_the_command_reads_a_paths_file_and_the_logs_beside_it(tmp_path, capsys) -> None:
    steps = "".join(json.dumps({"t": 1.0 + i / 100, "steps": float(i)}) + "\n"
                    for i in range(251))
    results = tmp_path / "gpu-20261202-000000-paths-cap-0.8.json"
    results.write_text(json.dumps({"paths": {"torch-eager": {
        "cap_bare_rate": 1000.0, "cap_target": 0.8, "cap_work_per_granted_s": 1.2,
        "cap_charged_per_granted_s": 1.05}}}))
    with tarfile.open(tmp_path / "gpu-20261202-000000-paths-cap-0.8-logs.tar.xz", "w:xz") as tar:
        grants = json.dumps([["cap", 1.0, 1.08], ["cap", 1.5, 1.7]])
        for name, text in (("cap-torch-eager.log", HOOK), ("cap-torch-eager-schd.log", SCHD),
                           ("cap-torch-eager-steps.jsonl", steps),
                           ("cap-torch-eager-grants.json", grants)):
            path = tmp_path / name
            path.write_text(text)
            tar.add(path, arcname=f"logs/{name}")
    assert speed_parts.main([str(results)]) == 0
    out = capsys.readouterr().out
    assert "torch-eager, cap 0.8: bare 250.0 us a launch (4 a step)" in out
    assert "beta 1.25" in out
    assert "by its own events grants 2500.0, tails 2500.0 (speed 1.000)" in out
    missing = tmp_path / "other-paths.json"
    missing.write_text("{}")
    assert speed_parts.main([str(missing)]) == 2
