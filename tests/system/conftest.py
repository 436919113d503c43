"""The whole system on the fake GPU: a scheduler, pod managers, and programs under the hook."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gemini.native import fake_driver_dir, hook_library_path, program_path
from tests.procs import Daemon, start_pod_manager, start_scheduler

KERNEL_MS = 5.0
FAST = ("-q", "100", "-m", "50", "-w", "2000", "--grace", "20")


def with_tmpdir(tmp: Path) -> dict[str, str]:
    """The environment, with a tool's log folders (tempfile.mkdtemp) under the test's own
    folder rather than left in /tmp (tempfile falls back to /tmp for a folder not made yet)."""
    tmp.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp)}


def result(proc: subprocess.Popen[str]) -> dict:
    out, _ = proc.communicate(timeout=60)
    return json.loads(out.splitlines()[-1])


def gpu_share(*results: dict, kernel_ms: float = KERNEL_MS) -> float:
    """The share of the fake GPU that the `work` programs' kernels (`kernel_ms` each) took
    together, over the longest of their runs."""
    busy = sum(r["kernels"] for r in results) * kernel_ms / 1000
    return busy / max(r["wall_s"] for r in results)


@pytest.fixture
def system(tmp_path, fake_gpu_segment):
    started: list = []
    procs: list[subprocess.Popen[str]] = []
    gpu = fake_gpu_segment

    class System:
        segment = gpu  # the fake GPU's shared-memory segment (for fake_attach)

        def backend(self, config_text: str, *flags: str, pmgr_flags: tuple[str, ...] = (),
                    schd_env: dict[str, str] | None = None):
            """`flags` go to the scheduler (default FAST), `pmgr_flags` to every pod manager,
            `schd_env` to the scheduler's environment (with the fake NVML on its library path:
            it then reads the fake GPU's clock)."""
            self.config = tmp_path / "resource-config.txt"
            self.config.write_text(config_text)
            self.flags = flags or FAST
            if schd_env is not None:
                schd_env = {"LD_LIBRARY_PATH": str(fake_driver_dir()), "GEMINI_FAKE_GPU": gpu,
                            **schd_env}
            self.schd = start_scheduler(self.config, *self.flags, env=schd_env)
            started.append(self.schd)
            self.pmgrs: dict[str, Daemon] = {}
            for line in config_text.splitlines()[1:]:
                self.pod_manager(line.split()[0], *pmgr_flags)
            return self

        def pod_manager(self, name: str, *flags: str) -> Daemon:
            pm = start_pod_manager(name, self.schd.port, *flags)
            started.append(pm)
            pm.wait_for("memory limit")
            self.pmgrs[name] = pm
            return pm

        def restart_scheduler(self) -> Daemon:
            self.schd = start_scheduler(self.config, *self.flags, "-P", str(self.schd.port))
            started.append(self.schd)
            return self.schd

        def client(
            self, name: str, *argv: str, env: dict[str, str] | None = None,
            stderr: int | None = None,
        ) -> subprocess.Popen[str]:
            """`env` adds to (or overrides) the hook's environment; `stderr=subprocess.PIPE`
            captures the hook's log."""
            full_env = {
                **os.environ,
                "LD_LIBRARY_PATH": str(fake_driver_dir()),
                "LD_PRELOAD": str(hook_library_path()),
                "GEMINI_FAKE_GPU": gpu,
                "POD_NAME": name,
                **({"POD_MANAGER_PORT": str(pm.port)} if (pm := self.managers(name)) else {}),
                **(env or {}),
            }
            proc = subprocess.Popen([str(program_path("gem_client")), *argv], env=full_env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=stderr, text=True)
            procs.append(proc)
            return proc

        def managers(self, name: str) -> Daemon | None:
            return getattr(self, "pmgrs", {}).get(name)

        def work(self, name: str, seconds: float) -> subprocess.Popen[str]:
            return self.client(name, "work", "--kernel-ms", str(KERNEL_MS), "--burst", "4",
                               "--seconds", str(seconds))

    yield System()
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    for d in reversed(started):
        d.stop()
