"""The terminal tools as a person meets them: run under tmux, read off the screen.

`make run`'s demo, `gemini top` and `gemini trace` (whose PNG is checked to be a picture)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.procs import ROOT, free_ports, start_pod_manager, start_scheduler

pytestmark = pytest.mark.system
TMUX = shutil.which("tmux")


class Tmux:
    def __init__(self) -> None:
        if TMUX is None:
            pytest.fail("tmux is needed for the terminal tests (.ci/run installs it)")
        self.session = f"gemini-test-{uuid.uuid4().hex[:8]}"
        subprocess.run([TMUX, "new-session", "-d", "-s", self.session, "-x", "160", "-y", "50"],
                       check=True)

    def type(self, *keys: str) -> None:
        subprocess.run([TMUX, "send-keys", "-t", self.session, *keys], check=True)

    def screen(self) -> str:
        return subprocess.run([TMUX, "capture-pane", "-p", "-t", self.session],
                              capture_output=True, text=True, check=True).stdout

    def wait_for(self, predicate, timeout: float = 30.0) -> str:
        """Read the screen until `predicate(screen)` holds (the tool refreshes it itself)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if predicate(text):
                return text
            assert time.monotonic() < deadline, f"screen never matched:\n{text}"
            time.sleep(0.2)  # the polling period of a person looking at the screen

    def close(self) -> None:
        subprocess.run([TMUX, "kill-session", "-t", self.session], capture_output=True)


@pytest.fixture
def tmux():
    t = Tmux()
    yield t
    t.close()


def shell_line(*argv: str, env: dict[str, str] | None = None) -> str:
    exports = " ".join(f"{k}={v}" for k, v in (env or {}).items())
    quoted = " ".join(f"'{a}'" for a in argv)
    return f"cd {ROOT} && {exports} {quoted}; echo EXIT=$?"


@pytest.fixture
def busy_backend(tmp_path):
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text("2\nalpha 0.3 1.0 1GiB\nbeta 0.7 1.0 1GiB\n")
    schd = start_scheduler(cfg, "-q", "60", "-m", "30", "-w", "2000", "--grace", "20")
    daemons = [schd]
    hooks = []
    for name in ("alpha", "beta"):
        pm = start_pod_manager(name, schd.port)
        daemons.append(pm)
        pm.wait_for("memory limit")
        hooks.append(subprocess.Popen(
            [sys.executable, "-m", "tests.integration.fake_hook", "--port", str(pm.port),
             "--name", name, "--seconds", "60"],
            stdout=subprocess.DEVNULL, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}))
    yield schd.port
    for h in hooks:
        h.kill()
        h.wait()
    for d in reversed(daemons):
        d.stop()


def test_top_shows_every_client_live_and_quits_on_ctrl_c(tmux, busy_backend):
    tmux.type(shell_line(sys.executable, "-m", "gemini.cli.gemini", "top", "--port",
                         str(busy_backend), "--interval", "0.3"), "Enter")
    screen = tmux.wait_for(lambda s: "alpha" in s and "beta" in s and "█" in s and "held" in s)
    assert "share of window" in screen
    tmux.type("C-c")
    tmux.wait_for(lambda s: "EXIT=0" in s)


def test_top_quits_on_q_and_gives_the_terminal_back(tmux, busy_backend):
    """(Its help said q quits, and nothing read a key.)"""
    tmux.type(shell_line(sys.executable, "-m", "gemini.cli.gemini", "top", "--port",
                         str(busy_backend), "--interval", "0.3"), "Enter")
    tmux.wait_for(lambda s: "alpha" in s and "held" in s)
    tmux.type("q")
    tmux.wait_for(lambda s: "EXIT=0" in s)
    tmux.type("stty -a | grep -q ' icanon' && echo COOKED", "Enter")  # the terminal's own mode
    tmux.wait_for(lambda s: any(line.strip() == "COOKED"
                                for line in s.split("EXIT=0")[-1].splitlines()))


def test_trace_writes_a_chrome_trace_and_a_png(tmp_path, busy_backend):
    out = tmp_path / "trace.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gemini.cli.gemini", "trace", "--port", str(busy_backend),
         "--seconds", "2", "--out", str(out), "--bin", "0.5"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    events = json.loads(out.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert {e["cat"] for e in slices} == {"alpha", "beta"}
    assert all(e["dur"] > 0 for e in slices)
    png = out.with_suffix(".png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def processes_mentioning(*needles: str) -> list[str]:
    """Command lines of live processes whose arguments or environment contain a needle."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            text = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except OSError:
            continue  # not a process, or gone
        if any(n.encode() in text for n in needles) and proc.name != str(os.getpid()):
            found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return found


def test_demo_runs_two_clients_and_ctrl_c_stops_everything(tmux, tmp_path: Path):
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text("2\nclient1 0.3 1.0 1GiB\nclient2 0.7 1.0 1GiB\n")
    port = free_ports()
    tmux.type(shell_line(sys.executable, "-m", "gemini.cli.demo", "--config", str(cfg),
                         "--port", str(port), "--logs", str(tmp_path / "logs"),
                         env={"GEMINI_DEMO_FAKE": "1"}), "Enter")
    screen = tmux.wait_for(lambda s: "client1" in s and "client2" in s and "█" in s, timeout=60)
    assert "held" in screen
    tmux.type("C-c")
    tmux.wait_for(lambda s: "EXIT=0" in s)
    left = processes_mentioning(str(cfg), f"-P\0{port}", f"SCHEDULER_PORT={port}",
                                f"POD_MANAGER_PORT={port + 1}")
    assert left == [], "the demo left processes behind"
