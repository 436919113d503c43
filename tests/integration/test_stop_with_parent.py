"""A daemon started with GEMINI_STOP_WITH=PID (launch-backend sets its own pid) stops when that
process exits, even killed with SIGKILL: the daemons of a killed launch-backend ran on, on
their ports, unsupervised, and a new launch-backend could not start (gemini.daemon.lifecycle).
That process need not be its parent: a wrapper that forks (`sudo -u`, a shell script without
exec) may stand between them."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys

TIMEOUT_S = 20.0

# Starts a pod manager that is to stop with it, says its pid once it listens, and waits.
PARENT = r"""
import json, os, subprocess, sys
env = {**os.environ, "POD_NAME": "a", "SCHEDULER_PORT": "1", "GEMINI_STOP_WITH": str(os.getpid())}
child = subprocess.Popen([sys.executable, "-m", "gemini.cli.pmgr", "--port", "0"], env=env,
                         stderr=subprocess.PIPE, text=True)
for line in child.stderr:
    if "listening on" in line:
        print(json.dumps({"pid": child.pid}), flush=True)
        break
sys.stdin.read()
"""


def test_a_daemon_stops_when_the_launcher_it_is_to_stop_with_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = json.loads(parent.stdout.readline())["pid"]
        exited = os.pidfd_open(pid)
        try:
            assert select.select([exited], [], [], 0)[0] == []  # serving
            parent.send_signal(signal.SIGKILL)
            assert select.select([exited], [], [], TIMEOUT_S)[0] == [exited], "still running"
        finally:
            os.close(exited)
    finally:
        parent.kill()
        parent.wait(TIMEOUT_S)


def test_a_daemon_whose_launcher_is_already_gone_does_not_start() -> None:
    env = {**os.environ, "POD_NAME": "a", "SCHEDULER_PORT": "1",
           "GEMINI_STOP_WITH": str(2**22 + 1)}  # (above any pid Linux hands out)
    r = subprocess.run([sys.executable, "-m", "gemini.cli.pmgr", "--port", "0"], env=env,
                       capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 1
    assert "is gone: not starting" in r.stderr


def test_a_daemon_started_through_a_wrapper_stops_with_the_launcher_not_its_parent() -> None:
    """(It refused to start where its parent was not the launcher: every daemon behind a
    forking wrapper exited, and launch-backend stopped everything.)"""
    launcher = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                stdin=subprocess.PIPE)
    env = {**os.environ, "POD_NAME": "a", "SCHEDULER_PORT": "1",
           "GEMINI_STOP_WITH": str(launcher.pid)}
    daemon = subprocess.Popen([sys.executable, "-m", "gemini.cli.pmgr", "--port", "0"], env=env,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert daemon.stderr is not None
        while "listening on" not in (line := daemon.stderr.readline()):
            assert line, "it did not start"
        launcher.kill()
        assert daemon.wait(TIMEOUT_S) == 0
        assert "is gone: stopping" in daemon.stderr.read()
    finally:
        launcher.kill()
        launcher.wait(TIMEOUT_S)
        daemon.kill()
        daemon.wait(TIMEOUT_S)
