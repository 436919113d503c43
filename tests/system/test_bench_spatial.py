"""bench/spatial.py's dry run (issue 13): launch-backend with a stand-in MPS, launch-command,
the apps without a GPU, and the result file the lead commits after the H100 run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.conftest import with_tmpdir

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.system
def test_dry_run_writes_the_result_file(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "bench/spatial.py", "--cpu", "--seconds", "0.3", "--port", "0",
         "--only", "saturating_pair,latency,fault,fence", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env=with_tmpdir(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = tmp_path.glob("cpu-dry-run-*-spatial.json")
    result = json.loads(path.read_text())
    pair = result["saturating_pair"]
    assert set(pair) == {"time_sliced", "spatial", "spatial_raw"}  # raw: MPS without the hook
    assert pair["time_sliced"]["modes"] == {"a": "time-sliced", "b": "time-sliced"}
    assert pair["spatial"]["modes"] == {"a": "spatial a 30%", "b": "spatial b 70%"}
    assert [(s["name"], s["target"]) for s in pair["spatial"]["split"]] == [("a", 0.3),
                                                                             ("b", 0.7)]
    assert all(s["achieved"] > 0 for s in pair["spatial"]["split"])
    assert pair["spatial"]["aggregate"] > 0
    assert "partition a, 30% of the SMs (MPS)" in pair["spatial"]["launch_command"]["a"]
    assert set(result["latency"]["p99_ms"]) == {"alone", "time_sliced", "spatial", "spatial_raw"}
    fault = result["fault"]
    assert fault["faulter"]["fault_error"] == 700
    assert fault["neighbour"]["progress_after_fault"] > 0
    assert "error" not in fault["new_client"][-1]
    fence = result["fence"]
    assert {k: fence[k]["asked_mib"] for k in fence} == {
        "mps_unfenced": 3072, "mps_pinned_1024m": 3072, "gemini_2gib": 3072}
    assert "partition fenced, 50% of the SMs (MPS)" in fence["gemini_2gib"]["launch_command"]
    assert set(result["goals"]) == {"saturating split within 2 pp",
                                    "saturating aggregate >= 0.97",
                                    "latency spatial p99 <= 1.5x alone"}
    assert path.with_suffix(".md").read_text().startswith("# gemini, issue 13")
