"""Several GPUs on the fake driver (issue 16): one scheduler per GPU (`gem-schd --gpu`), one pod
manager per client and GPU, and programs that see exactly their client's GPUs.  Shares are
counted in kernels of a fixed length, per GPU, with tolerances that hold on a loaded 2-core
machine."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gemini.core.config import parse_text
from tests.procs import start_pod_manager, start_scheduler
from tests.system.conftest import FAST, KERNEL_MS, gpu_share, result

pytestmark = pytest.mark.system


@pytest.fixture
def gpus(system, tmp_path):
    """A config on several GPUs: a scheduler per GPU, a pod manager per (client, GPU)."""
    started = []

    def backend(config_text: str) -> dict[tuple[str, str] | str, int]:
        """(client, gpu) -> its pod manager's port; gpu -> its scheduler's port."""
        config = tmp_path / "resource-config.txt"
        config.write_text(config_text)
        schedulers, managers = {}, {}
        for spec in parse_text(config_text).clients:
            name, gpu = spec.name, spec.gpu
            if gpu not in schedulers:
                schedulers[gpu] = start_scheduler(config, *FAST, "--gpu", gpu)
                started.append(schedulers[gpu])
            pm = start_pod_manager(name, schedulers[gpu].port)
            started.append(pm)
            pm.wait_for("memory limit")
            managers[(name, gpu)] = pm.port
        return {**managers, **{gpu: d.port for gpu, d in schedulers.items()}}

    yield backend
    for d in reversed(started):
        d.stop()


def work(system, name: str, visible: str, ports: list[int], device: int = 0, seconds: float = 5):
    """As launch-command runs it: the client's GPUs visible, a pod manager per GPU in order."""
    env = {"GEMINI_FAKE_DEVICES": "2", "CUDA_VISIBLE_DEVICES": visible,
           "POD_MANAGER_PORT": ",".join(map(str, ports))}
    return system.client(name, "work", "--kernel-ms", str(KERNEL_MS), "--burst", "4",
                         "--seconds", str(seconds), "--device", str(device), env=env)


def test_a_client_on_gpu_1_is_capped_there_and_leaves_gpu_0_alone(system, gpus):
    pm = gpus("2\nsmall 0.2 0.4 1GiB gpu=1\nbig 0.5 1.0 1GiB\n")
    small = work(system, "small", "1", [pm[("small", "1")]])
    big = work(system, "big", "0", [pm[("big", "0")]])
    rs, rb = result(small), result(big)
    # Capped at 0.4 and paced, its start-up and its grants' round trips in its wall time: over
    # 5 s it gets 0.36-0.39 of the fake GPU (10 runs), and got 0.330 once in a full `make test`
    # on a 2-core machine (and 0.25 once, with a neighbour test's 0.16: a host that stops a
    # capped client loses that time).  What is checked here is the cap: well under 1, not much
    # over 0.4, and not starved.
    assert 0.2 <= gpu_share(rs) <= 0.47, rs
    assert gpu_share(rb) > 0.85, rb  # GPU 0 is big's alone: small's work runs on GPU 1


def test_a_client_on_both_gpus_gets_each_gpus_cap(system, gpus):
    pm = gpus("2\na 0.3 0.3 1GiB\na 0.7 0.7 1GiB gpu=1\n")
    ports = [pm[("a", "0")], pm[("a", "1")]]
    on0 = work(system, "a", "0,1", ports, device=0)
    on1 = work(system, "a", "0,1", ports, device=1)
    r0, r1 = result(on0), result(on1)
    # Each GPU's cap, not the other's: GPU 0's at most 0.3, under GPU 1's cap (0.7); GPU 1's
    # at most 0.7, over GPU 0's cap (0.3); neither starved.  Over 5 s an idle machine reads
    # 0.29 and 0.67-0.68; CI's loaded 2-core machine read 0.53 on GPU 1 once (a host that stops
    # a capped client loses that time: the window does not give it back).
    assert 0.1 <= gpu_share(r0) <= 0.37, r0
    assert 0.4 <= gpu_share(r1) <= 0.78, r1
    status = subprocess.run(
        [sys.executable, "-m", "gemini.cli.gemini", "status", "--port", f"{pm['0']},{pm['1']}"],
        capture_output=True, text=True, timeout=30)
    assert status.returncode == 0, status.stderr
    heads = [line for line in status.stdout.splitlines() if line.startswith("GPU scheduler")]
    assert [h.split(",")[0] for h in heads] == [f"GPU scheduler :{pm['0']}  GPU 0",
                                                f"GPU scheduler :{pm['1']}  GPU 1"]
