"""bench/turns.py: the turns the GPU takes between a client's processes, read from their steps."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import turns
from paths import keep_logs, steps_jsonl


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


def test_a_step_is_a_sample_whose_counter_rose() -> None:
    # (the opening sample at 0 ends no step, nor does one that repeats the count)
    text = steps_jsonl([(1.0, 0.0), (1.2, 1.0), (1.1, 0.0), (1.3, 1.0), (1.4, 2.0)])
    assert turns.step_ends(text) == [1.2, 1.4]
    assert turns.step_ends("") == []


def test_bare_together_is_read_for_as_many_processes_of_the_program_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = steps_jsonl([(0.0, 0.0), *((0.6 + 0.01 * i, i + 1.0) for i in range(200))])
    other = steps_jsonl([(0.0, 0.0), *((0.605 + 0.01 * i, i + 1.0) for i in range(200))])
    files = {"c-a0-steps.jsonl": one, "c-a1-steps.jsonl": other, "c-grants.json": "[]",
             "bare-together-p-x2-0-steps.jsonl": one, "bare-together-p-x2-1-steps.jsonl": other,
             "bare-together-q-x2-0-steps.jsonl": one, "bare-together-q-x2-1-steps.jsonl": one,
             "bare-together-p-x3-2-steps.jsonl": one}
    logs = tmp_path / "logs.tar"
    keep_logs(logs, files)
    with pytest.raises(SystemExit, match="p, q: say which with --path"):
        turns.main([str(logs), "--case", "c"])
    assert turns.main([str(logs), "--case", "c", "--path", "p"]) == 0
    read = json.loads(capsys.readouterr().out)
    # p's two, not q's nor the third of p's three: their turns pass at every step
    assert read["processes"] == 2 and read["bare_together"]["turn_steps_mean"] == 1.0
