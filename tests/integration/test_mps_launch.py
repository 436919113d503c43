"""launch-backend's MPS control daemon and launch-command's MPS environment (issue 13), with a
stand-in `nvidia-cuda-mps-control` (and `nvidia-smi`) first on PATH.

The stand-in control daemon is a file: `-d` creates PIPE/standin-up (or fails when the file
named by STANDIN_MPS_FAIL exists), commands on stdin answer while it exists, `quit` removes it.
Every call is recorded as a JSON line in STANDIN_MPS_RECORD.  `get_server_list` answers the
pids in PIPE/servers, `get_server_status PID` the text of PIPE/status (ACTIVE without one).

Synchronisation is on output lines and files written before the lines, each with a timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gemini.cli import launch_command
from gemini.cli.launch_backend import MpsService, watch_mps
from gemini.client import query_status
from tests.procs import free_ports, stop_process

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
TIMEOUT_S = 20.0
CONFIG = "3\ntrain 0.5 1 4GiB sm=70@big\neval 0.5 1 2GiB sm=70@big\ninfer 1 1 1GiB sm=30\n"

CONTROL = f"""#!{PY}
import json, os, sys
pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/nonexistent")
up = os.path.join(pipe, "standin-up")
def record(**kw):
    with open(os.environ["STANDIN_MPS_RECORD"], "a") as f:
        f.write(json.dumps(kw) + "\\n")
if sys.argv[1:] == ["-d"]:
    record(cmd="-d", pipe=pipe, log=os.environ.get("CUDA_MPS_LOG_DIRECTORY"),
           visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
    fail = os.environ.get("STANDIN_MPS_FAIL", "")
    if fail and os.path.exists(fail):
        print("MPS control daemon: operation not permitted")
        sys.exit(1)
    for old in ("servers", "status"):  # a new daemon has no servers yet
        if os.path.exists(os.path.join(pipe, old)):
            os.unlink(os.path.join(pipe, old))
    open(up, "w").close()
    sys.exit(0)
command = sys.stdin.read().strip()
if not os.path.exists(up):
    print("Cannot find MPS control daemon process")
    sys.exit(1)
if command == "quit":
    record(cmd="quit")
    os.unlink(up)
elif command == "get_server_list":
    servers = os.path.join(pipe, "servers")
    print(open(servers).read() if os.path.exists(servers) else "")
elif command.startswith("get_server_status"):
    status = os.path.join(pipe, "status")
    print(open(status).read() if os.path.exists(status) else "ACTIVE")
"""
SMI = f"""#!{PY}
import os
if not os.environ.get("STANDIN_NO_GPU"):
    print("0, GPU-00000000-fake")
"""
# gem-schd / gem-pmgr stand-in: prints one JSON line (role, argv, env) and waits for SIGTERM.
DAEMON = r"""
import json, os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
os.write(1, (json.dumps({"role": sys.argv[1], "argv": sys.argv[2:],
                         "who": os.environ.get("POD_NAME", sys.argv[1])}) + "\n").encode())
signal.sigwait({signal.SIGTERM})
"""


class Stream:
    """A pipe's lines, read by a thread, waited on with a timeout."""

    def __init__(self, pipe) -> None:  # type: ignore[no-untyped-def]
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(pipe,), daemon=True).start()

    def _pump(self, pipe) -> None:  # type: ignore[no-untyped-def]
        for line in pipe:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def until(self, predicate: Callable[[str], bool], what: str = "") -> str:
        end = time.monotonic() + TIMEOUT_S
        while True:
            try:
                line = self.queue.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no {what or 'line'} within {TIMEOUT_S} s: {self.seen}") from None
            if line is None:
                raise AssertionError(f"EOF before {what or 'the line'}: {self.seen}")
            self.seen.append(line)
            if predicate(line):
                return line


class Backend:
    def __init__(self, proc: subprocess.Popen[str], tmp: Path) -> None:
        self.proc = proc
        self.out = Stream(proc.stdout)
        self.err = Stream(proc.stderr)
        self.mps = tmp / "mps"
        self.record = tmp / "record.jsonl"

    def reports(self, count: int) -> list[dict]:
        return [json.loads(self.out.until(lambda x: x.startswith("{"), "a daemon's report"))
                for _ in range(count)]

    def calls(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(x) for x in self.record.read_text().splitlines()]

    def state(self) -> dict:
        return json.loads((self.mps / "state.json").read_text())

    def stop(self, sig: int = signal.SIGINT) -> int:
        self.proc.send_signal(sig)
        self.proc.communicate(timeout=TIMEOUT_S)
        return self.proc.returncode


_started: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_leftovers():  # type: ignore[no-untyped-def]
    yield
    while _started:
        stop_process(_started.pop(), TIMEOUT_S)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    for name, text in (("nvidia-cuda-mps-control", CONTROL), ("nvidia-smi", SMI)):
        (path / name).write_text(text)
        (path / name).chmod(0o755)
    return path


def start(tmp_path: Path, bin_dir: Path, *extra: str, config: str = CONFIG,
          schd: str | None = None, env: dict[str, str] | None = None) -> Backend:
    conf = tmp_path / "resource-config.txt"
    conf.write_text(config)
    daemon = tmp_path / "daemon.py"
    daemon.write_text(DAEMON)
    argv = [PY, "-m", "gemini.cli.launch_backend", schd or f"{PY} {daemon} scheduler",
            f"{PY} {daemon} pmgr", "--config", str(conf), "--mps-dir", str(tmp_path / "mps"),
            *extra]
    full_env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                "STANDIN_MPS_RECORD": str(tmp_path / "record.jsonl"),
                "CUDA_VISIBLE_DEVICES": "1", **(env or {})}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=full_env)
    _started.append(proc)
    return Backend(proc, tmp_path)


# ---- launch-backend ------------------------------------------------------------------------------


def test_mps_starts_with_private_directories_and_quits_on_ctrl_c(
    tmp_path: Path, bin_dir: Path
) -> None:
    backend = start(tmp_path, bin_dir)
    mps = tmp_path / "mps"
    line = backend.out.until(lambda x: x.startswith("mps:"))
    assert line == (f"mps: nvidia-cuda-mps-control serving partitions (pipe {mps}/pipe, "
                    f"log {mps}/log)")
    (started,) = [c for c in backend.calls() if c["cmd"] == "-d"]
    # its own directories; all GPUs visible to it (clients pick theirs)
    assert started == {"cmd": "-d", "pipe": f"{mps}/pipe", "log": f"{mps}/log", "visible": None}
    assert backend.state() == {"spatial": True, "reason": "", "pipe_dir": f"{mps}/pipe",
                               "log_dir": f"{mps}/log", "fault": ""}
    reports = backend.reports(4)
    (schd,) = [r for r in reports if r["role"] == "scheduler"]
    assert schd["argv"][schd["argv"].index("--mps-state") + 1] == f"{mps}/state.json"
    assert backend.stop(signal.SIGINT) == 0
    assert [c["cmd"] for c in backend.calls()] == ["-d", "quit"]
    assert not (mps / "state.json").exists()


def test_mps_is_quit_when_the_scheduler_dies_too(tmp_path: Path, bin_dir: Path) -> None:
    failing = tmp_path / "dies.py"
    failing.write_text("import sys; sys.exit(3)\n")
    backend = start(tmp_path, bin_dir, schd=f"{PY} {failing}")
    backend.proc.communicate(timeout=TIMEOUT_S)
    assert backend.proc.returncode == 1
    assert [c["cmd"] for c in backend.calls()] == ["-d", "quit"]


def test_no_partition_no_mps(tmp_path: Path, bin_dir: Path) -> None:
    backend = start(tmp_path, bin_dir, config="2\na 0.5 1 1GiB\nb 0.5 1 1GiB\n")
    reports = backend.reports(3)
    (schd,) = [r for r in reports if r["role"] == "scheduler"]
    # The scheduler follows a state file that does not exist (no MPS) until partitions come.
    assert schd["argv"][schd["argv"].index("--mps-state") + 1] == f"{tmp_path}/mps/state.json"
    assert backend.stop() == 0
    assert backend.calls() == []
    assert not any(x.startswith("mps:") for x in backend.out.seen)
    assert not (tmp_path / "mps").exists()


def test_partitions_added_by_an_edit_start_mps(tmp_path: Path, bin_dir: Path) -> None:
    backend = start(tmp_path, bin_dir, config="2\na 0.5 1 1GiB\nb 0.5 1 1GiB\n")
    backend.reports(3)
    (tmp_path / "resource-config.txt").write_text("2\na 1 1 1GiB sm=40\nb 0.5 1 1GiB\n")
    backend.err.until(lambda x: "the config now has partitions: starting MPS" in x)
    line = backend.out.until(lambda x: x.startswith("mps:"))
    assert line.startswith("mps: nvidia-cuda-mps-control serving partitions")
    assert backend.state()["spatial"] is True
    assert backend.stop() == 0
    assert [c["cmd"] for c in backend.calls()] == ["-d", "quit"]


@pytest.mark.parametrize(("how", "reason"), [
    ("fails", "MPS could not start: nvidia-cuda-mps-control -d failed (exit 1): MPS control "
     "daemon: operation not permitted"),
    ("missing", "MPS could not start: nvidia-cuda-mps-control is not on PATH"),
    ("no GPU", "MPS could not start: no GPU: nvidia-smi lists none"),
])
def test_mps_that_cannot_start_is_reported_and_partitions_run_time_sliced(
    tmp_path: Path, bin_dir: Path, how: str, reason: str
) -> None:
    env = {}
    if how == "fails":
        (tmp_path / "fail").touch()
        env["STANDIN_MPS_FAIL"] = str(tmp_path / "fail")
    elif how == "missing":
        (bin_dir / "nvidia-cuda-mps-control").unlink()
    else:
        env["STANDIN_NO_GPU"] = "1"
    backend = start(tmp_path, bin_dir, env=env)
    line = backend.out.until(lambda x: x.startswith("mps:"))
    assert line == (f"mps: not running ({reason}): clients of partitions run time-sliced "
                    "(gemini status shows each client's mode)")
    assert backend.state() == {"spatial": False, "reason": reason, "pipe_dir": "",
                               "log_dir": "", "fault": ""}
    assert len(backend.reports(4)) == 4  # everything else runs
    assert backend.proc.poll() is None
    assert backend.stop() == 0


def test_no_mps_flag(tmp_path: Path, bin_dir: Path) -> None:
    backend = start(tmp_path, bin_dir, "--no-mps")
    assert "launch-backend --no-mps" in backend.out.until(lambda x: x.startswith("mps:"))
    assert backend.stop() == 0
    assert backend.calls() == []


def test_a_dead_control_daemon_is_restarted(tmp_path: Path, bin_dir: Path) -> None:
    backend = start(tmp_path, bin_dir, "--mps-check", "0.1")
    backend.out.until(lambda x: x.startswith("mps:"))
    (tmp_path / "mps" / "pipe" / "standin-up").unlink()  # it died
    backend.err.until(lambda x: "the MPS control daemon does not answer (Cannot find MPS "
                      "control daemon process); restarting MPS" in x, "the restart")
    assert [c["cmd"] for c in backend.calls()] == ["-d", "-d"]
    assert backend.state()["spatial"] is True
    assert backend.stop() == 0


def test_a_control_daemon_that_misses_one_look_is_not_restarted(
        tmp_path: Path, bin_dir: Path) -> None:
    """(A restart ends the GPU work of every client of a partition: one slow answer did.)"""
    backend = start(tmp_path, bin_dir, "--mps-check", "0.3")
    backend.out.until(lambda x: x.startswith("mps:"))
    gone = subprocess.Popen([PY, "-c", "pass"])
    gone.wait()
    up = tmp_path / "mps" / "pipe" / "standin-up"
    saved = up.read_bytes()
    up.unlink()  # silent once
    backend.err.until(lambda x: "asking again at the next check before restarting MPS" in x)
    up.write_bytes(saved)  # it answers again (within the 0.3 s to the next look) ...
    (tmp_path / "mps" / "pipe" / "servers").write_text(f"{gone.pid}\n")  # ... and lists one gone
    backend.err.until(lambda x: f"MPS server {gone.pid} is gone; restarting MPS" in x)
    assert [c["cmd"] for c in backend.calls()] == ["-d", "quit", "-d"]  # (that one restart)
    assert backend.stop() == 0


def test_a_dead_server_is_noticed_and_mps_restarted(tmp_path: Path, bin_dir: Path) -> None:
    backend = start(tmp_path, bin_dir, "--mps-check", "0.1")
    backend.out.until(lambda x: x.startswith("mps:"))
    gone = subprocess.Popen([PY, "-c", "pass"])
    gone.wait()
    (tmp_path / "mps" / "pipe" / "servers").write_text(f"{gone.pid}\n")
    backend.err.until(lambda x: f"MPS server {gone.pid} is gone; restarting MPS" in x)
    assert [c["cmd"] for c in backend.calls()] == ["-d", "quit", "-d"]
    assert backend.stop() == 0


def test_mps_that_cannot_be_restarted_falls_back_then_comes_back(
    tmp_path: Path, bin_dir: Path
) -> None:
    fail = tmp_path / "fail"
    backend = start(tmp_path, bin_dir, "--mps-check", "0.1", env={"STANDIN_MPS_FAIL": str(fail)})
    backend.out.until(lambda x: x.startswith("mps:"))
    fail.touch()
    (tmp_path / "mps" / "pipe" / "standin-up").unlink()
    backend.err.until(lambda x: "MPS stopped and could not be restarted" in x
                      and "run time-sliced" in x, "the fallback")
    assert backend.state()["spatial"] is False
    fail.unlink()
    backend.err.until(lambda x: "MPS is back" in x)
    assert backend.state()["spatial"] is True
    assert backend.stop() == 0


def test_a_faulted_server_is_reported_until_it_recovers(tmp_path: Path, bin_dir: Path) -> None:
    backend = start(tmp_path, bin_dir, "--mps-check", "0.1")
    backend.out.until(lambda x: x.startswith("mps:"))
    pipe = tmp_path / "mps" / "pipe"
    pid = os.getpid()  # a live process stands in for the server
    (pipe / "status").write_text("FAULT\n")
    (pipe / "servers").write_text(f"{pid}\n")
    backend.err.until(lambda x: f"MPS server {pid} hit a fatal GPU error" in x)
    assert "recovering from a fatal GPU error" in backend.state()["fault"]
    (pipe / "status").write_text("ACTIVE\n")
    backend.err.until(lambda x: f"MPS server {pid} has recovered" in x)
    assert backend.state()["fault"] == ""
    assert [c["cmd"] for c in backend.calls()] == ["-d"]  # no restart for a fault
    assert backend.stop() == 0


def test_a_partition_edit_says_it_applies_to_the_next_process(
    tmp_path: Path, bin_dir: Path
) -> None:
    backend = start(tmp_path, bin_dir)
    backend.reports(4)
    (tmp_path / "resource-config.txt").write_text(CONFIG.replace("infer 1 1 1GiB sm=30",
                                                                 "infer 1 1 1GiB sm=20"))
    line = backend.err.until(lambda x: "infer: now partition infer (20% of the SMs)" in x)
    assert "the SM share applies to its next process" in line
    assert backend.stop() == 0


# ---- with the real scheduler ---------------------------------------------------------------------


def modes(port: int) -> dict[str, str]:
    snap = query_status("127.0.0.1", port, timeout=5.0)
    return {c["name"]: c["mode"] for c in snap["clients"]}


def test_gem_schd_follows_the_mps_state(tmp_path: Path, bin_dir: Path) -> None:
    port = free_ports(4)
    fail = tmp_path / "fail"
    backend = start(tmp_path, bin_dir, "--port", str(port), "--mps-check", "0.1",
                    schd=f"{PY} -m gemini.cli.schd", env={"STANDIN_MPS_FAIL": str(fail)})
    backend.err.until(lambda x: "listening on" in x and "scheduler of GPU 0" in x)
    assert modes(port) == {"train": "spatial", "eval": "spatial", "infer": "spatial"}
    snap = query_status("127.0.0.1", port, timeout=5.0)
    assert [(p["name"], p["sm"]) for p in snap["partitions"]] == [("big", 70), ("infer", 30)]
    # MPS dies for good: the scheduler time-slices the partitions within its poll (1 s)
    fail.touch()
    (tmp_path / "mps" / "pipe" / "standin-up").unlink()
    backend.err.until(lambda x: "partitions are time-sliced at their size" in x, "gem-schd")
    assert modes(port) == {"train": "time-sliced", "eval": "time-sliced", "infer": "time-sliced"}
    snap = query_status("127.0.0.1", port, timeout=5.0)
    shares = {c["name"]: (c["request"], c["limit"]) for c in snap["clients"]}
    assert shares["infer"] == pytest.approx((0.3, 0.3))
    assert shares["train"] == pytest.approx((0.35, 0.7))
    assert backend.stop() == 0


# ---- launch-command ------------------------------------------------------------------------------

PRINT_MPS = ("import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
             "if k.startswith('CUDA_MPS') or k == 'CUDA_VISIBLE_DEVICES'}))")


@pytest.fixture
def hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "libgemhook.so.1"
    path.write_bytes(b"")
    monkeypatch.setattr(launch_command, "hook_library_path", lambda: path)
    for key in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(key, raising=False)
    return path


def run_command(name: str, conf: Path, mps: Path, capfd: pytest.CaptureFixture[str],
                *extra: str) -> tuple[dict, str]:
    code = launch_command.main(["--name", name, "--config", str(conf), "--mps-dir", str(mps),
                                *extra, PY, "-c", PRINT_MPS])
    assert code == 0
    out, err = capfd.readouterr()
    return json.loads(out), err


def test_command_gives_a_partition_client_its_mps_environment(
    hook: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "r.txt"
    conf.write_text("3\na 1 1 3GiB sm=30@p\na 1 1 1000000000 sm=30@q gpu=1\nb 1 1 1GiB\n")
    mps = tmp_path / "mps"
    mps.mkdir()
    state = {"spatial": True, "reason": "", "pipe_dir": "/p/pipe", "log_dir": "/p/log",
             "fault": ""}
    (mps / "state.json").write_text(json.dumps(state))
    env, err = run_command("a", conf, mps, capfd)
    assert env == {"CUDA_MPS_PIPE_DIRECTORY": "/p/pipe", "CUDA_MPS_LOG_DIRECTORY": "/p/log",
                   "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30",
                   "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=4096M,1=1978M",
                   "CUDA_VISIBLE_DEVICES": "0,1"}
    assert "launch-command: a runs spatial: partition p, 30% of the SMs (MPS)" in err
    # a client without a partition is left as it was, and says nothing of a mode
    env, err = run_command("b", conf, mps, capfd)
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert "launch-command: b runs" not in err


def test_command_runs_a_partition_client_time_sliced_without_mps(
    hook: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "r.txt"
    conf.write_text("1\na 1 1 1GiB sm=30\n")
    env, err = run_command("a", conf, tmp_path / "nowhere", capfd)
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert ("launch-command: a runs time-sliced: partition a (30% of the SMs) needs MPS, and "
            f"launch-backend is not running MPS (no {tmp_path}/nowhere/state.json)") in err
    (tmp_path / "mps").mkdir()
    (tmp_path / "mps" / "state.json").write_text(json.dumps(
        {"spatial": False, "reason": "MPS could not start: no GPU"}))
    env, err = run_command("a", conf, tmp_path / "mps", capfd)
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert "needs MPS, and MPS could not start: no GPU" in err


def test_mps_is_watched_on_after_a_check_fails(caplog: pytest.LogCaptureFixture) -> None:
    """(A check that raised, its state file not written, ended the watch for good, unsaid.)"""
    async def main() -> int:
        stop = asyncio.Event()

        class Keeper:
            checks = 0

            async def check(self) -> list[str]:
                self.checks += 1
                if self.checks == 1:
                    raise OSError(28, "No space left on device")
                stop.set()
                return ["MPS is back"]

        keeper = Keeper()
        await asyncio.wait_for(watch_mps(keeper, stop, 0.01), 10)  # type: ignore[arg-type]
        return keeper.checks

    with caplog.at_level(logging.WARNING):
        assert asyncio.run(main()) == 2
    assert "the MPS check failed" in caplog.text and "No space left" in caplog.text
    assert "MPS is back" in caplog.text


def test_a_stop_during_an_edits_mps_start_quits_the_daemon_once_started() -> None:
    """(close() quit MPS while the start an edit began was still under way: the control daemon
    that start then made outlived launch-backend.)"""
    async def main() -> list[str]:
        stop, gate = asyncio.Event(), asyncio.Event()
        events: list[str] = []

        class Keeper:
            paths = None

            async def start(self) -> bool:
                events.append("start")
                await gate.wait()
                events.append("started")
                return False  # (so start_mps says why, and needs no paths)

            async def stop(self) -> None:
                events.append("stop")

            state = type("State", (), {"reason": "stand-in"})()

        service = MpsService(Keeper(), True, 3600.0, stop)  # type: ignore[arg-type]
        edit = asyncio.ensure_future(service.ensure())
        while events != ["start"]:
            await asyncio.sleep(0)
        stop.set()
        closing = asyncio.ensure_future(service.close())
        edit.cancel()  # as asyncio.run does to what is left at exit
        for _ in range(10):
            await asyncio.sleep(0)
        gate.set()
        await asyncio.wait_for(closing, 10)
        assert service.watch is None
        return events

    assert asyncio.run(main()) == ["start", "started", "stop"]
