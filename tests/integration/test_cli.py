"""The commands as installed: --help with an example, check-config, clear errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.procs import ROOT


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


@pytest.mark.parametrize(
    ("module", "words"),
    [
        ("gemini.cli.schd", ["--port", "--quota", "--min_quota", "--window", "--limit_file",
                             "example:"]),
        ("gemini.cli.pmgr", ["POD_NAME", "POD_MANAGER_PORT", "SCHEDULER_IP", "example:"]),
        ("gemini.cli.launch_backend", ["SCHD", "PMGR", "--base_quota", "example:"]),
        ("gemini.cli.launch_command", ["--name", "--port", "--timeout"]),
    ],
)
def test_help_names_the_original_options_and_an_example(module, words):
    proc = run(module, "--help")
    assert proc.returncode == 0
    for word in words:
        assert word in proc.stdout


def test_gemini_lists_its_subcommands():
    proc = run("gemini.cli.gemini", "--help")
    assert proc.returncode == 0
    for sub in ("schd", "pmgr", "launch-backend", "launch-command", "status", "top", "trace",
                "check-config"):
        assert sub in proc.stdout
    assert run("gemini.cli.gemini", "no-such-command").returncode == 2


def test_check_config_prints_what_it_would_apply(tmp_path):
    cfg = tmp_path / "c.txt"
    cfg.write_text("2\na 0.3 1.0 4GiB\nb 0.7 1.0 1073741824\n")
    proc = run("gemini.cli.gemini", "check-config", str(cfg))
    assert proc.returncode == 0
    assert "a: request 0.3, limit 1, memory 4,294,967,296 B" in proc.stdout


def test_check_config_names_file_line_and_reason(tmp_path):
    cfg = tmp_path / "bad.txt"
    cfg.write_text("2\na 0.3 1.0 4GiB\nb 0.9 0.5 1GiB\n")
    proc = run("gemini.cli.gemini", "check-config", str(cfg))
    assert proc.returncode == 1
    assert f"{cfg}:3:" in proc.stderr


def test_status_without_a_scheduler_says_what_to_do():
    proc = run("gemini.cli.gemini", "status", "--port", "1")
    assert proc.returncode == 1
    assert "Is gem-schd running" in proc.stderr
