"""bench/device_logs.sh: the logs bench/results keeps go aside before a device call (the tool
carries at most 64 MiB) and come back after it, unchanged."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.procs import ROOT


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def test_logs_go_aside_and_come_back(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "bench" / "results").mkdir(parents=True)
    shutil.copy(ROOT / "bench" / "device_logs.sh", repo / "bench")
    logs = [repo / "bench" / "results" / f"run{i}-paths-logs.tar.xz" for i in range(3)]
    for i, f in enumerate(logs):
        f.write_bytes(bytes([i]) * 100)
    (repo / "bench" / "results" / "run0-paths.json").write_text("{}")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    hold = tmp_path / "hold"
    env = {"HOLD": str(hold), "PATH": "/usr/bin:/bin"}
    script = str(repo / "bench" / "device_logs.sh")
    subprocess.run([script, "aside"], check=True, env=env, capture_output=True)
    assert not any(f.exists() for f in logs)
    assert sorted(p.name for p in hold.iterdir()) == sorted(f.name for f in logs)
    assert (repo / "bench" / "results" / "run0-paths.json").exists()  # (only the logs)
    subprocess.run([script, "back"], check=True, env=env, capture_output=True)
    assert [f.read_bytes() for f in logs] == [bytes([i]) * 100 for i in range(3)]
    assert git(repo, "status", "--porcelain") == ""
    # A log that did not come back is said, and fails.
    logs[1].unlink()
    (hold / logs[1].name).unlink()
    back = subprocess.run([script, "back"], env=env, capture_output=True, text=True)
    assert back.returncode == 1 and logs[1].name in back.stderr
