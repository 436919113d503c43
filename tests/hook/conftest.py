"""Fixtures for the hook tests: a freshly built hook, the mini driver, a scripted pod manager."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from gemini.native import NativeBuildMissing, _build, fake_driver_dir, program_path

from .podmgr import FakePodManager

HERE = Path(__file__).resolve().parent
RUN_TIMEOUT_S = 20.0
PROGRAMS = ["gem_client", "direct_client"]  # the fake driver's test clients (csrc/fake/programs)


@pytest.fixture(scope="session")
def hook_lib(tmp_path_factory) -> Path:
    """libgemhook.so.1 built through the one build path, into a private folder."""
    return _build.build_hook(tmp_path_factory.mktemp("hook"))


@pytest.fixture(scope="session")
def mini(tmp_path_factory) -> Path:
    """The mini driver (as libcuda.so.1) and mini_client, from tests/hook/snippets."""
    out = tmp_path_factory.mktemp("mini")
    cc = [*_build._cc(), *_build.CFLAGS]
    src = HERE / "snippets"
    subprocess.run([*cc, "-shared", "-o", str(out / "libcuda.so.1"), str(src / "mini_driver.c")],
                   check=True)
    subprocess.run([*cc, "-o", str(out / "mini_client"), str(src / "mini_client.c"), "-ldl",
                    "-lpthread"],
                   check=True)
    return out


@pytest.fixture
def pm():
    p = FakePodManager()
    yield p
    p.close()


@dataclass
class Run:
    returncode: int
    out: list[dict]
    stderr: str
    stats: dict[str, int]


class HookEnv:
    def __init__(self, hook_lib: Path, driver_dir: Path, pm: FakePodManager, tmp: Path) -> None:
        self.stats_path = tmp / "stats.json"
        self.env = dict(
            os.environ,
            LD_PRELOAD=str(hook_lib),
            LD_LIBRARY_PATH=str(driver_dir),
            POD_MANAGER_IP="127.0.0.1",
            POD_MANAGER_PORT=str(pm.port),
            POD_NAME=pm.name,
            GEMINI_HOOK_STATS=str(self.stats_path),
            GEMINI_LOG=os.environ.get("GEMINI_LOG", "info"),
            # Exact protocol traces: one reservation per allocation (test_lease.py turns the
            # lease back on).
            GEMINI_MEM_LEASE_MB="0",
        )

    def run(self, argv: list[str], **env: str) -> Run:
        self.stats_path.unlink(missing_ok=True)
        p = subprocess.run(argv, env={**self.env, **env}, capture_output=True, text=True,
                           timeout=RUN_TIMEOUT_S)
        out = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        stats = json.loads(self.stats_path.read_text()) if self.stats_path.exists() else {}
        return Run(p.returncode, out, p.stderr, stats)

    def start(self, argv: list[str], **env: str) -> Proc:
        # stdin a pipe: a program that waits on it (--hold) waits until the test closes it
        return Proc(subprocess.Popen(argv, env={**self.env, **env}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))


class Proc:
    """A running client whose stdout/stderr lines can be waited for (no sleeps)."""

    def __init__(self, popen: subprocess.Popen[str]) -> None:
        self.popen = popen
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        for name, stream in (("out", popen.stdout), ("err", popen.stderr)):
            threading.Thread(target=self._pump, args=(name, stream), daemon=True).start()

    def _pump(self, name, stream) -> None:
        for line in stream:
            self.lines.put((name, line))

    def wait_line(self, needle: str, timeout: float = 10.0) -> str:
        seen = []
        while True:
            try:
                _, line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line with {needle!r}; got {seen}") from None
            seen.append(line)
            if needle in line:
                return line

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(10)


@pytest.fixture
def hook_env(hook_lib, mini, pm, tmp_path) -> HookEnv:
    return HookEnv(hook_lib, mini, pm, tmp_path)


@pytest.fixture
def fake_env(hook_lib, pm, tmp_path, fake_gpu_segment) -> HookEnv:
    """The hook over the fake driver (`make build`), for its test clients (prog()), on a fake
    GPU of the test's own."""
    try:
        driver = fake_driver_dir()
        for p in PROGRAMS:
            program_path(p)
    except NativeBuildMissing as exc:
        pytest.fail(f"{exc} (the hook tests need the fake driver: not skipped)")
    env = HookEnv(hook_lib, driver, pm, tmp_path)
    env.env["GEMINI_FAKE_GPU"] = fake_gpu_segment
    return env


def prog(name: str) -> str:
    return str(program_path(name))
