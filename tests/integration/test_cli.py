"""The commands as installed: --help with an example, check-config, clear errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import ROOT, nvidia_smi_listing, start_pod_manager, start_scheduler


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, env=env)


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


def test_check_config_checks_the_gpus_against_the_machine(tmp_path):
    env = {**os.environ, **nvidia_smi_listing(tmp_path, "0, GPU-aaaa", "1, GPU-bbbb")}
    cfg = tmp_path / "c.txt"
    cfg.write_text("3\na 0.3 1.0 1GiB\na 0.5 0.5 1GiB gpu=GPU-bbbb\nb 0.2 0.4 1GiB gpu=GPU-bbbb\n")
    proc = run("gemini.cli.gemini", "check-config", str(cfg), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "2 clients on 2 GPU(s)" in proc.stdout and "  GPU GPU-bbbb:" in proc.stdout
    cfg.write_text("2\na 0.5 0.5 1GiB gpu=GPU-bbbb\nb 0.2 0.4 1GiB gpu=1\n")
    proc = run("gemini.cli.gemini", "check-config", str(cfg), env=env)
    assert proc.returncode == 1
    assert "GPU 1 is named GPU-bbbb and 1: use one name for it" in proc.stderr
    cfg.write_text("2\na 0.3 1.0 1GiB\nb 0.2 0.4 1GiB gpu=2\n")
    proc = run("gemini.cli.gemini", "check-config", str(cfg), env=env)
    assert proc.returncode == 1
    assert "b: GPU 2 is not on this machine (GPUs: 0 (GPU-aaaa), 1 (GPU-bbbb))" in proc.stderr
    # no nvidia-smi: said so, not failed
    proc = run("gemini.cli.gemini", "check-config", str(cfg), env={**env, "PATH": str(tmp_path)})
    assert proc.returncode == 0 and "GPUs not checked" in proc.stdout


def test_status_without_a_scheduler_says_what_to_do():
    proc = run("gemini.cli.gemini", "status", "--port", "1")
    assert proc.returncode == 1
    assert "Is gem-schd running" in proc.stderr


def test_status_shows_the_schedulers_that_answer_and_says_which_did_not(tmp_path):
    """(One port down hid every other, naming the whole list; a pod manager's port, which
    launch-backend prints beside the scheduler's, gave a traceback.  top --count, as status,
    exits 1 where one did not answer: it said 0, and a script could not tell.)"""
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text("1\na 0.5 1.0 1GiB\n")
    schd = start_scheduler(cfg)
    pm = start_pod_manager("a", schd.port)
    try:
        ports = f"{schd.port},1,{pm.port}"
        for command in (["status", "--port", ports], ["top", "--count", "1", "--port", ports]):
            proc = run("gemini.cli.gemini", *command)
            assert proc.returncode == 1, proc.stderr
            assert f"GPU scheduler :{schd.port}" in proc.stdout, proc.stdout
            said = proc.stdout + proc.stderr
            assert "Traceback" not in said, said
            assert "cannot reach the scheduler at 127.0.0.1:1:" in said
            assert f"port {pm.port} answered UNKNOWN_CLIENT: not a gem-schd" in said
    finally:
        pm.stop()
        schd.stop()


def test_trace_with_no_scheduler_to_record_says_so_at_once():
    """(Each look that failed was skipped and tried again until --seconds had passed.)"""
    proc = run("gemini.cli.gemini", "trace", "--port", "1", "--seconds", "120", "--out",
               "/tmp/gemini-trace-never.json")
    assert proc.returncode == 1
    assert "no answer from the scheduler at 127.0.0.1:1" in proc.stderr


@pytest.mark.parametrize(("argv", "says"), [
    (["status", "--port", ","], "is not a port or a list of ports"),
    (["status", "--port", "107587"], "is not a port or a list of ports"),
    (["top", "--interval=-1"], "is not above 0"),
    (["trace", "--bin", "0"], "is not above 0"),
    (["trace", "--seconds", "0.1", "--out", "/nonexistent-dir/x.json", "--port", "1"],
     "no directory /nonexistent-dir"),
])
def test_tool_flags_that_cannot_work_are_refused_at_once(argv, says):
    proc = run("gemini.cli.gemini", *argv)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


@pytest.mark.parametrize(("module", "flag"), [("gemini.cli.schd", "-m"),
                                              ("gemini.cli.launch_backend", "--min_quota"),
                                              ("gemini.k8s.agent", "--min_quota")])
def test_a_minimum_quota_no_launch_could_use_is_refused_at_once(module, flag):
    """(gem-schd -q 0.002 -m 0.001: the hook asked for token after token, launching nothing;
    the launchers passed it on, and their gem-schd exited.)"""
    proc = run(module, flag, "0.5")
    assert proc.returncode == 2 and "is under 1 ms" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("module", "argv"), [
    ("gemini.cli.launch_backend", ["--mps-check", "0", "--config", "x.txt"]),
    ("gemini.cli.launch_command", ["--timeout", "0", "--port", "50052", "--", "true"]),
    ("gemini.k8s.agent", ["--sync-interval", "0"]),
    ("gemini.k8s.agent", ["--watch-interval=-1"]),
])
def test_an_interval_of_zero_is_refused_not_spun_on(module, argv):
    proc = run(module, *argv)
    assert proc.returncode == 2 and "is not above 0" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("module", "argv"), [("gemini.cli.schd", []),
                                              ("gemini.cli.launch_backend", ["schd", "pmgr"])])
def test_shared_turns_without_lone_turns_are_refused_at_once(module, argv):
    """(Else gem-schd ran 100 ms turns, and its start line only left "shared turns" out.)"""
    proc = run(module, *argv, "--shared-turns", "--no-lone-turns")
    assert proc.returncode == 2 and "--shared-turns needs lone turns" in proc.stderr, proc.stderr


def test_a_pod_manager_takes_the_hooks_unix_socket_from_pod_manager_port(tmp_path):
    sock = tmp_path / "a.sock"
    env = {**os.environ, "POD_MANAGER_PORT": f"unix:{sock}"}
    proc = run("gemini.cli.pmgr", "--help", env=env)
    assert proc.returncode == 0, proc.stderr
    bad = run("gemini.cli.pmgr", "--name", "a", env={**os.environ, "POD_MANAGER_PORT": "x1"})
    assert bad.returncode == 2 and "POD_MANAGER_PORT='x1' is neither a port nor" in bad.stderr


def test_the_demo_says_a_bad_config_and_a_dead_backend_and_ends(tmp_path):
    """(A bad config gave a traceback; a port already taken left the demo waiting for a
    scheduler that had died, its reason only in a log.)"""
    bad = tmp_path / "bad.txt"
    bad.write_text("1\nc 0.5 0.4 1GiB\n")
    env = {**os.environ, "GEMINI_DEMO_FAKE": "1"}
    proc = run("gemini.cli.demo", "--config", str(bad), "--logs", str(tmp_path / "l1"), env=env)
    assert proc.returncode == 2 and "bad.txt:2: request 0.5 is above limit 0.4" in proc.stderr
    assert "Traceback" not in proc.stderr
    good = tmp_path / "good.txt"
    good.write_text("2\nclient1 0.3 1.0 1GiB\nclient2 0.7 1.0 1GiB\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run("gemini.cli.demo", "--config", str(good), "--port", str(port), "--seconds",
                   "50", "--logs", str(tmp_path / "l2"), env=env)
    assert proc.returncode == 1, proc.stderr
    assert "launch-backend exited (1)" in proc.stderr and "address already in use" in proc.stderr
    assert not Path(f"/dev/shm/gemini-demo-{os.getuid()}").exists()  # its simulated GPU's


def test_the_demo_runs_on_the_simulated_gpu_where_no_program_could_use_the_real_one(
        tmp_path, monkeypatch):
    """(With nvidia-smi but neither torch nor cupy, both demo programs died at once and the
    shares read 0.000 for good.)"""
    from gemini.cli import demo

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: stand-in'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("GEMINI_DEMO_FAKE", raising=False)
    monkeypatch.setattr(demo.importlib.util, "find_spec", lambda name: None)
    assert "neither torch nor cupy" in (demo.real_gpu_present() or "")
    monkeypatch.setattr(demo.importlib.util, "find_spec", lambda name: name == "cupy" or None)
    assert demo.real_gpu_present() is None


def test_a_metrics_address_gem_schd_cannot_take_is_named(tmp_path):
    """(It named the token address, which was free.)"""
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text("1\na 0.5 1.0 1GiB\n")
    proc = run("gemini.cli.schd", "-P", "0", "-p", str(tmp_path), "-f", cfg.name, "--no-clock",
               "--metrics-port", "0", "--metrics-ip", "203.0.113.7")  # (TEST-NET-3: not ours)
    assert proc.returncode == 1
    assert "or 203.0.113.7:0 (metrics)" in proc.stderr, proc.stderr
