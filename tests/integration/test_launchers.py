"""The launchers as real processes, with small Python stand-ins for gem-schd, gem-pmgr and programs.

Synchronisation is on output lines and process exits, each with a timeout; no sleeps.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gemini.cli import launch_command
from gemini.native import NativeBuildMissing
from tests.procs import nvidia_smi_listing, stop_process

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 20.0
PY = sys.executable
CONFIG = "2\nclient1 0.5 0.5 4GiB\nclient2 0.3 0.8 2GiB\n"

# Prints one JSON line (role, argv, env) and waits; SIGTERM -> prints "stopped" and exits 0.
# STANDIN_DIE=<role or POD_NAME> makes that one exit 3 right away, as a crash;
# STANDIN_DIE_GPU=<gpu> the scheduler of that GPU.
STANDIN = r"""
import json, os, signal, sys
role = sys.argv[1]
who = os.environ.get("POD_NAME", role)
def say(text):
    os.write(1, (text + "\n").encode())  # one write: the stand-ins share the launcher's pipe
# Blocked, then sigwait: a SIGTERM sent right after our report can never be missed.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
keys = ("SCHEDULER_IP", "SCHEDULER_PORT", "POD_MANAGER_IP", "POD_MANAGER_PORT", "POD_NAME")
say(json.dumps({"role": role, "who": who, "argv": sys.argv[2:], "pid": os.getpid(),
                "env": {k: os.environ[k] for k in keys if k in os.environ}}))
if os.environ.get("STANDIN_DIE") == who:
    sys.exit(3)
if role == "scheduler" and "--gpu" in sys.argv and \
        sys.argv[sys.argv.index("--gpu") + 1] == os.environ.get("STANDIN_DIE_GPU"):
    sys.exit(3)
signal.sigwait({signal.SIGTERM})
say(f"stopped {who}")
"""


class Lines:
    """A process's stdout lines, read by a thread, waited on with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)  # EOF: every process holding the pipe has exited

    def next(self) -> str | None:
        try:
            line = self.queue.get(timeout=TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"no output within {TIMEOUT_S} s; so far: {self.seen}") from None
        if line is not None:
            self.seen.append(line)
        return line

    def until(self, predicate: Callable[[str], bool]) -> str:
        while (line := self.next()) is not None:
            if predicate(line):
                return line
        raise AssertionError(f"EOF before the expected line; got: {self.seen}")

    def until_eof(self) -> list[str]:
        rest = []
        while (line := self.next()) is not None:
            rest.append(line)
        return rest


def _json_lines(lines: list[str]) -> list[dict]:
    return [json.loads(x) for x in lines if x.startswith("{")]


@pytest.fixture
def standin(tmp_path: Path) -> Path:
    path = tmp_path / "standin.py"
    path.write_text(STANDIN)
    return path


_started: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_leftovers():  # type: ignore[no-untyped-def]
    """A failed test must not leave a launcher (and its children) behind."""
    yield
    while _started:
        stop_process(_started.pop(), TIMEOUT_S)


def start_backend(
    tmp_path: Path, standin: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], Lines]:
    conf = tmp_path / "resource-config.txt"
    if not conf.exists():
        conf.write_text(CONFIG)
    argv = [PY, "-m", "gemini.cli.launch_backend", f"{PY} {standin} scheduler",
            f"{PY} {standin} pmgr", "--config", str(conf), *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, **(env or {})})
    _started.append(proc)
    return proc, Lines(proc)


def wait_started(lines: Lines, count: int) -> list[dict]:
    """Until `count` stand-ins have reported; returns their reports by start order."""
    reports: list[dict] = []
    while len(reports) < count:
        line = lines.until(lambda x: x.startswith("{"))
        reports.append(json.loads(line))
    return reports


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=TIMEOUT_S)
    return proc.returncode, err


# ---- launch-backend ------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_backend_args_env_and_signal_stops_all(
    tmp_path: Path, standin: Path, sig: signal.Signals
) -> None:
    proc, lines = start_backend(tmp_path, standin, "--port", "6000", "--base_quota", "250")
    pm1, pm2, schd = sorted(wait_started(lines, 3), key=lambda r: r["who"])
    conf_dir = str(tmp_path)
    mps_state = os.path.join(tempfile.gettempdir(), f"gemini-mps-{os.getuid()}-6000", "state.json")
    assert schd["argv"] == ["-p", conf_dir, "-f", "resource-config.txt", "-P", "6000", "-q", "250",
                            "-m", "20", "-w", "10000", "--ip", "127.0.0.1",
                            "--mps-state", mps_state]
    assert pm1["env"] == {"SCHEDULER_IP": "127.0.0.1", "SCHEDULER_PORT": "6000",
                          "POD_MANAGER_IP": "127.0.0.1", "POD_MANAGER_PORT": "6001",
                          "POD_NAME": "client1"}
    assert (pm2["env"]["POD_NAME"], pm2["env"]["POD_MANAGER_PORT"]) == ("client2", "6002")
    assert pm1["argv"] == pm2["argv"] == []

    proc.send_signal(sig)
    rest = lines.until_eof()  # EOF: the stand-ins, which share the pipe, are all gone
    assert {"stopped scheduler", "stopped client1", "stopped client2"} <= set(rest)
    code, _ = finish(proc)
    assert code == 0
    announced = [x for x in lines.seen if " on 127.0.0.1:" in x]
    program = Path(PY).name
    assert [x.split(" (pid")[0] for x in announced] == [
        f"scheduler: {program} on 127.0.0.1:6000",
        f"client1: {program} on 127.0.0.1:6001",
        f"client2: {program} on 127.0.0.1:6002",
    ]


def test_backend_yaml_config(tmp_path: Path, standin: Path) -> None:
    conf = tmp_path / "r.yaml"
    conf.write_text("clients:\n  - {name: only, request: 0.5, limit: 1, gpu_mem: 1GiB}\n")
    proc, lines = start_backend(tmp_path, standin, "--config", str(conf), "--no-follow")
    reports = wait_started(lines, 2)
    assert sorted(r["who"] for r in reports) == ["only", "scheduler"]
    proc.send_signal(signal.SIGINT)
    lines.until_eof()
    assert finish(proc)[0] == 0


def test_a_pod_manager_that_dies_is_started_again_on_its_port_and_the_rest_keep_running(
    tmp_path: Path, standin: Path
) -> None:
    """(It was only logged: its client had no pod manager until the backend restarted, and
    launch-command waited on its port for ever.)"""
    proc, lines = start_backend(tmp_path, standin, env={"STANDIN_DIE": "client2"})
    first = {r["who"]: r for r in wait_started(lines, 3)}
    assert proc.stderr is not None
    err_line = proc.stderr.readline()  # blocks until the launcher has logged the death
    assert "pod manager of client2 exited with 3; starting it again in 0.5 s" in err_line
    [again] = wait_started(lines, 1)
    assert again["who"] == "client2" and again["env"] == first["client2"]["env"]
    err_line = proc.stderr.readline()  # (it dies again, soon after its start: a longer pause)
    assert "pod manager of client2 exited with 3; starting it again in 1 s" in err_line
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    rest = lines.until_eof()
    assert {"stopped scheduler", "stopped client1"} <= set(rest)
    assert finish(proc)[0] == 0


def test_a_second_backend_on_the_same_port_is_refused_and_leaves_the_first_as_it_was(
    tmp_path: Path, standin: Path
) -> None:
    """It failed to bind only later, and on its way out removed the first one's placement
    file and quit the first one's MPS."""
    proc, lines = start_backend(tmp_path, standin)
    wait_started(lines, 3)
    placement = launch_command._running_placement(50051)
    assert placement
    second = tmp_path / "second"
    second.mkdir()
    other, _ = start_backend(second, standin)
    code, err = finish(other)
    assert code == 2
    assert f"another launch-backend (pid {proc.pid}) runs on --port 50051" in err
    assert launch_command._running_placement(50051) == placement
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    lines.until_eof()
    assert finish(proc)[0] == 0


def test_gpus_the_machine_does_not_have_are_refused_at_start_and_in_an_edit(
    tmp_path: Path, standin: Path
) -> None:
    """(A typo's GPU got a scheduler and a pod manager, and its program failed at cuInit; one
    GPU named by index and by UUID got two schedulers, and its caps no longer held.)"""
    env = nvidia_smi_listing(tmp_path, "0, GPU-aaa", "1, GPU-bbb")
    conf = tmp_path / "resource-config.txt"
    conf.write_text(CONFIG.replace("2GiB\n", "2GiB gpu=11\n"))
    proc, _ = start_backend(tmp_path, standin, env=env)
    code, err = finish(proc)
    assert code == 2 and "client2: GPU 11 is not on this machine (GPUs: 0 (GPU-aaa), 1 " \
        "(GPU-bbb))" in err
    conf.write_text(CONFIG)
    proc, lines = start_backend(tmp_path, standin, env=env)
    wait_started(lines, 3)
    conf.write_text(CONFIG.replace("2\n", "3\n", 1) + "client3 0.1 0.2 1GiB gpu=GPU-aaa\n")
    assert proc.stderr is not None
    while "not applied here" not in (line := proc.stderr.readline()):
        assert line, "no line about the edit"
    assert "GPU 0 is named 0 and GPU-aaa: use one name for it" in line
    conf.write_text(CONFIG.replace("2\n", "3\n", 1) + "client3 0.1 0.2 1GiB gpu=1\n")
    started = wait_started(lines, 2)  # GPU 1's scheduler and client3's pod manager only
    assert {r["who"] for r in started} == {"scheduler", "client3"}
    proc.send_signal(signal.SIGINT)
    lines.until_eof()
    assert finish(proc)[0] == 0


def test_scheduler_death_stops_everything(tmp_path: Path, standin: Path) -> None:
    proc, lines = start_backend(tmp_path, standin, env={"STANDIN_DIE": "scheduler"})
    lines.until_eof()  # the pod managers are stopped too, so the pipe closes
    code, err = finish(proc)
    assert code == 1
    assert "the scheduler exited with 3; stopping everything" in err


def test_a_scheduler_an_edit_started_that_dies_stops_nothing_else(
    tmp_path: Path, standin: Path
) -> None:
    """An edit gets an error, never a stop (a new GPU's scheduler that could not start, its
    port taken, stopped every daemon)."""
    proc, lines = start_backend(tmp_path, standin, env={"STANDIN_DIE_GPU": "2"})
    wait_started(lines, 3)
    conf = tmp_path / "resource-config.txt"
    conf.write_text(CONFIG.replace("2\n", "3\n", 1) + "client3 0.1 0.2 1GiB gpu=2\n")
    first = [r for r in wait_started(lines, 2) if r["role"] == "scheduler"]  # (it dies)
    assert proc.stderr is not None
    while "started by an edit, exited with 3" not in (line := proc.stderr.readline()):
        assert line, "no line about the scheduler's death"
    assert "the others keep running" in line
    assert proc.poll() is None
    # The next edit starts it again, on its port (client3's pod manager knows that one).
    conf.write_text(CONFIG.replace("2\n", "4\n", 1) + "client3 0.1 0.2 1GiB gpu=2\n"
                    "client4 0.1 0.2 1GiB\n")
    again = [r for r in wait_started(lines, 2) if r["role"] == "scheduler"]
    assert [r["argv"] for r in again] == [r["argv"] for r in first]
    proc.send_signal(signal.SIGINT)
    assert {"stopped scheduler", "stopped client1", "stopped client3"} <= set(lines.until_eof())
    assert finish(proc)[0] == 0


def test_a_closed_terminal_stops_every_daemon(tmp_path: Path, standin: Path) -> None:
    """(SIGHUP: the daemons, in sessions of their own, never see the terminal's hangup.)"""
    proc, lines = start_backend(tmp_path, standin)
    wait_started(lines, 3)
    proc.send_signal(signal.SIGHUP)
    assert {"stopped scheduler", "stopped client1", "stopped client2"} <= set(lines.until_eof())
    assert finish(proc)[0] == 0


def test_a_removed_clients_pod_manager_that_dies_is_not_started_again_until_it_is_added_back(
    tmp_path: Path, standin: Path
) -> None:
    proc, lines = start_backend(tmp_path, standin)
    pids = {r["who"]: r["pid"] for r in wait_started(lines, 3)}
    conf = tmp_path / "resource-config.txt"
    conf.write_text("1\nclient1 0.5 0.5 4GiB\n")
    assert proc.stderr is not None
    while "client2 removed from the config" not in (line := proc.stderr.readline()):
        assert line, "no line about the edit"
    os.kill(pids["client2"], signal.SIGTERM)
    while "pod manager of client2 exited" not in (line := proc.stderr.readline()):
        assert line, "no line about its exit"
    assert "no longer in the config: not started again" in line
    conf.write_text(CONFIG)  # back: a pod manager of its own again
    (report,) = wait_started(lines, 1)
    assert report["who"] == "client2" and report["pid"] != pids["client2"]
    proc.send_signal(signal.SIGINT)
    assert "stopped client2" in lines.until_eof()
    assert finish(proc)[0] == 0


def test_client_added_to_the_config_gets_a_pod_manager(tmp_path: Path, standin: Path) -> None:
    proc, lines = start_backend(tmp_path, standin)
    wait_started(lines, 3)
    conf = tmp_path / "resource-config.txt"
    conf.write_text(CONFIG.replace("2\n", "3\n", 1) + "client3 0.1 0.2 1GiB\n")
    (report,) = wait_started(lines, 1)
    assert report["env"]["POD_NAME"] == "client3"
    assert report["env"]["POD_MANAGER_PORT"] == "50054"
    proc.send_signal(signal.SIGINT)
    assert "stopped client3" in lines.until_eof()
    assert finish(proc)[0] == 0


def test_a_command_finds_its_pod_manager_where_the_backend_put_it_after_an_edit(
    tmp_path: Path, standin: Path
) -> None:
    """A client inserted at the top takes the next free port, the running ones keep theirs:
    launch-command --config, placing by the config's order, sent client1's program to
    client2's pod manager (which refused it)."""
    proc, lines = start_backend(tmp_path, standin)
    before = {r["who"]: r["env"]["POD_MANAGER_PORT"] for r in wait_started(lines, 3)
              if r["role"] == "pmgr"}
    conf = tmp_path / "resource-config.txt"
    conf.write_text("3\nclient0 0.1 0.1 1GiB\n" + CONFIG.split("\n", 1)[1])
    (added,) = wait_started(lines, 1)
    assert added["who"] == "client0" and added["env"]["POD_MANAGER_PORT"] == "50054"
    for name in ("client1", "client2", "client0"):
        ports, _, _ = launch_command._from_config(str(conf), name, 50051)
        assert ports == [int(before.get(name, "50054"))], name
    proc.send_signal(signal.SIGINT)
    lines.until_eof()
    assert finish(proc)[0] == 0
    assert launch_command._running_placement(50051) is None  # (the file goes with the backend)


def test_a_command_for_a_client_the_running_backend_has_no_pod_manager_for_is_refused(
    tmp_path: Path, standin: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Added while the backend did not follow the config: launch-command placed it by the
    config's order, on another client's pod manager, which refused it for ever, unsaid."""
    proc, lines = start_backend(tmp_path, standin, "--no-follow")
    wait_started(lines, 3)
    conf = tmp_path / "resource-config.txt"
    conf.write_text("3\nnewbie 0.1 0.1 1GiB\n" + CONFIG.split("\n", 1)[1])
    with pytest.raises(ValueError, match="runs no pod manager for 'newbie' on GPU 0"):
        launch_command._from_config(str(conf), "newbie", 50051)
    proc.send_signal(signal.SIGINT)
    lines.until_eof()
    assert finish(proc)[0] == 0
    # No backend there at all: said, and placed by the config's order.
    ports, _, _ = launch_command._from_config(str(conf), "newbie", 50051)
    assert ports == [50052]
    assert "no launch-backend --port 50051 says where" in capfd.readouterr().err


def test_two_gpus_get_a_scheduler_each_and_a_moved_client_a_new_pod_manager(
    tmp_path: Path, standin: Path
) -> None:
    conf = tmp_path / "resource-config.txt"
    conf.write_text("3\na 0.4 0.4 1GiB\na 0.5 1.0 1GiB gpu=1\nb 0.5 0.5 1GiB gpu=1\n")
    proc, lines = start_backend(tmp_path, standin)
    reports = wait_started(lines, 5)
    schedulers = [r for r in reports if r["role"] == "scheduler"]
    assert sorted(r["argv"][r["argv"].index("-P") + 1] for r in schedulers) == ["50051", "50055"]
    gpu1 = next(r for r in schedulers if "--gpu" in r["argv"])
    assert gpu1["argv"][gpu1["argv"].index("--gpu") + 1] == "1"
    managers = {(r["who"], r["env"]["POD_MANAGER_PORT"]): r["env"]["SCHEDULER_PORT"]
                for r in reports if r["role"] == "pmgr"}
    assert managers == {("a", "50052"): "50051", ("a", "50053"): "50055",
                        ("b", "50054"): "50055"}
    # b moves to GPU 2: a scheduler for GPU 2, a pod manager for b there, on free ports.
    conf.write_text("3\na 0.4 0.4 1GiB\na 0.5 1.0 1GiB gpu=1\nb 0.5 0.5 1GiB gpu=2\n")
    # (started in this order, but each reports when it is up: either may come first)
    schd2, b2 = sorted(wait_started(lines, 2), key=lambda r: r["role"] != "scheduler")
    assert schd2["argv"][schd2["argv"].index("--gpu") + 1] == "2"
    assert schd2["argv"][schd2["argv"].index("-P") + 1] == "50056"
    assert (b2["who"], b2["env"]["POD_MANAGER_PORT"], b2["env"]["SCHEDULER_PORT"]) == (
        "b", "50057", "50056")
    proc.send_signal(signal.SIGINT)
    rest = lines.until_eof()
    assert rest.count("stopped b") == 2 and rest.count("stopped scheduler") == 3
    code, err = finish(proc)
    assert code == 0
    assert "b moved from GPU 1 to GPU 2: applies to its next process" in err


def test_bad_config_is_reported_with_file_and_line(tmp_path: Path, standin: Path) -> None:
    (tmp_path / "resource-config.txt").write_text("1\nclient1 0.9 0.5 1\n")
    proc, _ = start_backend(tmp_path, standin)
    code, err = finish(proc)
    assert code == 2
    assert f"{tmp_path}/resource-config.txt:2: request 0.9 is above limit 0.5" in err


def test_missing_scheduler_command(tmp_path: Path) -> None:
    conf = tmp_path / "c.txt"
    conf.write_text(CONFIG)
    proc = subprocess.run(
        [PY, "-m", "gemini.cli.launch_backend", "no-such-gem-schd", "gem-pmgr", "--config",
         str(conf)], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT,
    )
    assert proc.returncode == 2
    assert "cannot start no-such-gem-schd" in proc.stderr


# ---- launch-command ------------------------------------------------------------------------------

PRINT_ENV = (
    "import os; print(os.environ['LD_PRELOAD'], os.environ['POD_NAME'], "
    "os.environ['POD_MANAGER_IP'], os.environ['POD_MANAGER_PORT'])"
)


@pytest.fixture
def hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in hook file; the dynamic loader ignores it (not ELF) and runs the program."""
    path = tmp_path / "libgemhook.so.1"
    path.write_bytes(b"")
    monkeypatch.setattr(launch_command, "hook_library_path", lambda: path)
    return path


def test_command_env(hook: Path, capfd: pytest.CaptureFixture[str],
                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/other.so")
    code = launch_command.main(["--name", "client1", "--port", "50052", "--", PY, "-c", PRINT_ENV])
    assert code == 0
    out = capfd.readouterr().out.split()
    assert out == [f"{hook}:/other.so", "client1", "127.0.0.1", "50052"]


PRINT_GPUS = (
    "import os; print(os.environ['POD_MANAGER_PORT'], "
    "os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'))"
)


def test_command_gives_the_client_exactly_its_gpus(
    hook: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert launch_command.main(["--name", "a", "--gpus", "1,GPU-ab", "--port", "50052,50055",
                                PY, "-c", PRINT_GPUS]) == 0
    assert capfd.readouterr().out.split() == ["50052,50055", "1,GPU-ab"]
    conf = tmp_path / "r.txt"
    conf.write_text("3\na 0.4 0.4 1\nb 0.5 1.0 1 gpu=1\na 0.5 1.0 1 gpu=1\n")
    assert launch_command.main(["--name", "a", "--config", str(conf), "--backend-port", "6000",
                                PY, "-c", PRINT_GPUS]) == 0
    assert capfd.readouterr().out.split() == ["6001,6003", "0,1"]
    assert launch_command.main(["--name", "b", "--config", str(conf), PY, "-c", PRINT_GPUS]) == 0
    assert capfd.readouterr().out.split() == ["50053", "1"]
    # a client on GPU 0 alone sees GPU 0 alone; with --port alone (v1) nothing is hidden
    conf.write_text("1\na 0.4 0.4 1\n")
    assert launch_command.main(["--name", "a", "--config", str(conf), PY, "-c", PRINT_GPUS]) == 0
    assert capfd.readouterr().out.split() == ["50052", "0"]
    assert launch_command.main(["--name", "a", "--port", "50052", PY, "-c", PRINT_GPUS]) == 0
    assert capfd.readouterr().out.split() == ["50052", "unset"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--gpus", "0,1", "--port", "1"], "2 GPUs (0,1) but 1 pod manager(s)"),
    (["--config", "{conf}"], "has no client 'c' (clients: a)"),
])
def test_command_gpu_errors(hook: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path,
                            argv: list[str], message: str) -> None:
    conf = tmp_path / "r.txt"
    conf.write_text("1\na 0.4 0.4 1\n")
    argv = [a.replace("{conf}", str(conf)) for a in argv]
    assert launch_command.main(["--name", "c", *argv, PY, "-c", "pass"]) == 2
    assert message in capfd.readouterr().err


@pytest.mark.parametrize("given, said", [
    (["--config", "CONF", "--gpus", "3"], "--gpus with --config"),
    (["--port", "50052", "--unix-dir", "/tmp/x"], "--unix-dir only with --config"),
    (["--port", "50052", "--mps-dir", "/tmp/x"], "--mps-dir only with --config"),
])
def test_command_options_that_would_do_nothing_are_refused(
        hook: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path, given: list[str],
        said: str) -> None:
    """(They were silently ignored: --gpus gave way to the config's GPUs.)"""
    conf = tmp_path / "r.txt"
    conf.write_text("1\na 0.4 0.4 1\n")
    argv = ["--name", "a", *[str(conf) if g == "CONF" else g for g in given], PY, "-c", "1"]
    assert launch_command.main(argv) == 2
    assert said in capfd.readouterr().err


def test_command_argv_is_not_a_shell_line(hook: Path, capfd: pytest.CaptureFixture[str]) -> None:
    code = launch_command.main(["--name", "c", "--port", "1", "--ip", "10.0.0.9", PY, "-c",
                                "import sys; print(sys.argv[1:])", "a b", "$HOME", ";"])
    assert code == 0
    assert capfd.readouterr().out.strip() == "['a b', '$HOME', ';']"


@pytest.mark.parametrize(("script", "code"), [
    ("import sys; sys.exit(7)", 7),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9),
])
def test_command_exit_code_is_the_childs(hook: Path, script: str, code: int) -> None:
    assert launch_command.main(["--name", "c", "--port", "1", PY, "-c", script]) == code


def test_command_not_found(hook: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert launch_command.main(["--name", "c", "--port", "1", "no-such-program-xyz"]) == 127
    assert "cannot run no-such-program-xyz" in capfd.readouterr().err


def test_command_missing(hook: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert launch_command.main(["--name", "c", "--port", "1"]) == 2
    assert "no command to run" in capfd.readouterr().err


def test_hook_not_built(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    def missing() -> Path:
        raise NativeBuildMissing("/x/libgemhook.so.1 is not built: run `make build`")

    monkeypatch.setattr(launch_command, "hook_library_path", missing)
    assert launch_command.main(["--name", "c", "--port", "1", "true"]) == 2
    assert "the Gemini hook is missing: /x/libgemhook.so.1 is not built" in capfd.readouterr().err


# A program that starts a grandchild in its group; both print their pids and wait forever.
FAMILY = (
    "import subprocess, sys, time; "
    "g = subprocess.Popen([sys.executable, '-c', 'import time; print(\"grandchild\", flush=True); "
    "time.sleep(600)']); print('child', flush=True); time.sleep(600)"
)
# Runs launch-command in a process of its own, with the stand-in hook path patched in.
RUNNER = (
    "import sys; from pathlib import Path; import gemini.cli.launch_command as m; "
    "m.hook_library_path = lambda: Path(sys.argv[1]); sys.exit(m.main(sys.argv[2:]))"
)


def start_command(hook: Path, *args: str) -> tuple[subprocess.Popen[str], Lines]:
    argv = [PY, "-c", RUNNER, str(hook), "--name", "c", "--port", "1", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    _started.append(proc)
    return proc, Lines(proc)


def test_command_timeout_stops_the_whole_group(hook: Path) -> None:
    # (3 s: two interpreters start, one after the other, on a loaded CI machine)
    proc, lines = start_command(hook, "--timeout", "3", PY, "-c", FAMILY)
    assert set(lines.until_eof()) == {"child", "grandchild"}  # EOF: both are gone
    code, err = finish(proc)
    assert code == 128 + signal.SIGTERM
    assert "timeout after 3 s" in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])  # (SIGHUP: a closed terminal)
def test_command_ctrl_c_is_forwarded_to_the_group(hook: Path, sig: signal.Signals) -> None:
    proc, lines = start_command(hook, PY, "-c", FAMILY)
    while not {"child", "grandchild"} <= set(lines.seen):
        lines.next()
    proc.send_signal(sig)
    lines.until_eof()
    assert finish(proc)[0] == 128 + signal.SIGTERM


def test_what_the_command_left_running_ends_with_it(hook: Path, tmp_path: Path) -> None:
    """(Left in a session of its own, out of reach of the terminal's Ctrl-C.)"""
    pidf = tmp_path / "grandchild"
    script = ("import subprocess, sys; g = subprocess.Popen([sys.executable, '-c', "
              "'import time; time.sleep(60)']); open(sys.argv[1], 'w').write(str(g.pid)); "
              "sys.exit(5)")
    assert launch_command.main(["--name", "c", "--port", "1", PY, "-c", script, str(pidf)]) == 5
    grandchild = int(pidf.read_text())
    deadline = time.monotonic() + TIMEOUT_S  # (no child of ours: waited for by looking)
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = _gone(grandchild)
    if not gone:
        os.kill(grandchild, signal.SIGKILL)
    assert gone


def _gone(pid: int) -> bool:
    """Exited (a zombie waiting to be reaped by init counts)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
