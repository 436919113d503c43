"""launch-backend --unix DIR and launch-command --config --unix-dir, as a user runs them, on the
fake GPU: the pod managers serve on Unix sockets only (peer uid checked), the program finds its
client's socket, runs under the hook and gets tokens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from gemini.native import fake_driver_dir, program_path
from tests.procs import ROOT, free_ports

pytestmark = pytest.mark.system


def test_pod_managers_on_unix_sockets_end_to_end(system, tmp_path):
    config = tmp_path / "resource-config.txt"
    config.write_text("2\na 0.5 1.0 1GiB\nb 0.5 1.0 1GiB gpu=1\n")
    sockets = tmp_path / "s"
    port = free_ports()
    py = sys.executable
    backend = subprocess.Popen(
        [py, "-m", "gemini.cli.launch_backend", f"{py} -m gemini.cli.schd",
         f"{py} -m gemini.cli.pmgr", "--config", str(config), "--port", str(port),
         "--unix", str(sockets)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        start_new_session=True)
    try:
        lines = []
        listening = [f"[{n}] pod manager listening on unix:" for n in ("a", "b")]
        while not all(any(want in x for x in lines) for want in listening):
            line = backend.stdout.readline()
            assert line, lines
            lines.append(line)
        assert any("a: python" in x and f"unix:{sockets}/a.sock" in x for x in lines), lines
        assert sorted(p.name for p in sockets.iterdir()) == ["a.sock", "b@gpu1.sock"]
        env = {**os.environ, "LD_LIBRARY_PATH": str(fake_driver_dir()),
               "GEMINI_FAKE_GPU": system.segment, "GEMINI_FAKE_DEVICES": "2"}
        for name in ("a", "b"):
            run = subprocess.run(
                [py, "-m", "gemini.cli.launch_command", "--name", name, "--config", str(config),
                 "--backend-port", str(port), "--unix-dir", str(sockets), "--",
                 str(program_path("gem_client")), "work", "--kernel-ms", "1", "--burst", "4",
                 "--bursts", "10"],
                capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
            # the hook waits for a token before every launch: finishing means it got them
            out = json.loads(run.stdout.splitlines()[-1])
            assert (run.returncode, out["rc"], out["kernels"]) == (0, 0, 40), run.stderr
    finally:
        os.killpg(backend.pid, signal.SIGINT)
        rest, _ = backend.communicate(timeout=30)
    assert backend.returncode == 0, rest
