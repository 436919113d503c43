"""Starting the daemons as real processes in tests, and waiting on what they print."""

from __future__ import annotations

import contextlib
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 20.0


def free_ports(count: int = 1) -> int:
    """A port P with P .. P+count-1 free just now, below the kernel's ephemeral range: a port
    there that is free now may be taken by an outgoing connection (a pod manager's own) before
    the daemon that is given it binds it."""
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    high = max(low - count, 1025)
    for _ in range(100):
        base = random.randrange(min(10000, high - 1), high)
        try:
            for port in range(base, base + count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise AssertionError(f"no block of {count} free ports")


@dataclass
class Daemon:
    proc: subprocess.Popen[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    log: list[str] = field(default_factory=list)
    port: int = 0

    def mark(self) -> int:
        """A position in the log: `wait_for(..., since=mark)` ignores lines before it."""
        while not self.lines.empty():
            self.log.append(self.lines.get())
        return len(self.log)

    def tail(self, lines: int = 20) -> str:
        """Its latest log lines (for an assertion's message)."""
        self.mark()  # (takes in the lines not read yet)
        return "".join(self.log[-lines:])

    def wait_for(
        self, pattern: str, timeout: float = STARTUP_TIMEOUT_S, since: int = 0
    ) -> re.Match[str]:
        """Block until a log line matches (returns the match) or fail after `timeout`."""
        regex = re.compile(pattern)
        for line in self.log[since:]:
            if m := regex.search(line):
                return m
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                got = "".join(self.log)
                raise AssertionError(f"no log line matching {pattern!r}; got:\n{got}") from None
            self.log.append(line)
            if m := regex.search(line):
                return m

    def stop(self) -> int:
        return stop_process(self.proc)


def stop_process(proc: subprocess.Popen[str], timeout: float = 10.0) -> int:
    """SIGTERM (the daemons and launchers stop their children on it), SIGKILL after `timeout`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def _spawn(argv: list[str], env: dict[str, str] | None = None) -> Daemon:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env=full_env, cwd=ROOT)
    daemon = Daemon(proc)

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            daemon.lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return daemon


def start_scheduler(config: Path, *flags: str, env: dict[str, str] | None = None) -> Daemon:
    argv = [sys.executable, "-m", "gemini.cli.schd", "-P", "0", "-p", str(config.parent),
            "-f", config.name, *flags]
    d = _spawn(argv, env)
    d.port = int(d.wait_for(r"listening on [\d.]+:(\d+)").group(1))
    return d


def start_pod_manager(name: str, scheduler_port: int, *flags: str) -> Daemon:
    argv = [sys.executable, "-m", "gemini.cli.pmgr", "--port", "0", *flags]
    env = {"POD_NAME": name, "SCHEDULER_PORT": str(scheduler_port), "SCHEDULER_IP": "127.0.0.1"}
    d = _spawn(argv, env)
    port = d.wait_for(r"listening on (?:[\d.]+:(\d+)|unix:)").group(1)
    d.port = int(port) if port else 0  # 0: on a Unix socket (--unix)
    return d


def nvidia_smi_listing(tmp_path: Path, *gpus: str) -> dict[str, str]:
    """PATH with a stand-in nvidia-smi first that lists `gpus` ("index, UUID" lines), as
    `nvidia-smi --query-gpu=index,uuid --format=csv,noheader` does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '%s\\n' " + " ".join(f"'{g}'" for g in gpus) + "\n")
    smi.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
