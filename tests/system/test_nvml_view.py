"""NVML under the hook answers for the client, not the card (issue 15): on the fake GPU with the
fake libnvidia-ml.so.1, with real pod managers and several processes per client.  Both ways in:
dlopen + dlsym as pynvml and nvidia-smi do (nvml_probe), and a program linked against the
library (direct_nvml_probe)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from gemini.native import fake_driver_dir, hook_library_path, program_path

pytestmark = pytest.mark.system

MiB, GiB = 1 << 20, 1 << 30
CARD = 16 * GiB  # the fake GPU's memory
EXACT = {"GEMINI_MEM_LEASE_MB": "0"}  # the pod manager holds exactly what is allocated
PROBES = ["nvml_probe", "direct_nvml_probe"]


def hold(system: Any, name: str, size: int, env: dict[str, str] | None = None) -> tuple[Any, int]:
    """A process of `name` holding `size` bytes until the test ends; (process, pid)."""
    p = system.client(name, "alloc", "--path", "alloc", "--bytes", str(size), "--hold",
                      env={**EXACT, **(env or {})})
    first = json.loads(p.stdout.readline())
    assert first["rc"] == 0, first
    return p, first["pid"]


def probe(system: Any, name: str | None, program: str = "nvml_probe", *argv: str,
          env: dict[str, str] | None = None) -> dict:
    """The probe as a process of client `name` (None: not under the hook)."""
    full = {**os.environ, "LD_LIBRARY_PATH": str(fake_driver_dir()),
            "GEMINI_FAKE_GPU": system.segment, **(env or {})}
    if name is not None:
        full.update(LD_PRELOAD=str(hook_library_path()), POD_NAME=name,
                    POD_MANAGER_PORT=str(system.pmgrs[name].port))
    r = subprocess.run([str(program_path(program)), *argv], env=full, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout.splitlines()[-1]))


def procs(gpu: dict, key: str) -> list[list[int]]:
    assert gpu[key]["rc"] == 0, gpu[key]
    return sorted(gpu[key]["procs"])


@pytest.mark.parametrize("program", PROBES)
def test_nvml_shows_the_client_and_its_processes_not_the_card(system, program):
    system.backend("2\na 0.5 1.0 1GiB\nb 0.5 1.0 1GiB\n")
    _, a1 = hold(system, "a", 256 * MiB)
    _, a2 = hold(system, "a", 128 * MiB)
    _, b1 = hold(system, "b", 64 * MiB)

    [gpu] = probe(system, "a", program)["gpus"]
    used = 384 * MiB
    assert gpu["mem"] == {"rc": 0, "total": GiB, "used": used, "free": GiB - used}
    assert gpu["mem_v2"] == {"rc": 0, "total": GiB, "reserved": 0, "used": used,
                             "free": GiB - used}
    mine = sorted([[a1, 256 * MiB], [a2, 128 * MiB]])
    for key in ("compute_v3", "compute_v2", "compute_v1", "detail"):
        assert procs(gpu, key) == mine, key
    assert (gpu["count_rc"], gpu["count"]) == (7, 2)  # INSUFFICIENT_SIZE: two to fetch
    assert procs(gpu, "graphics_v3") == []

    # Without the hook: the whole card, everyone's processes.
    [card] = probe(system, None, program)["gpus"]
    assert card["mem"] == {"rc": 0, "total": CARD, "used": 448 * MiB, "free": CARD - 448 * MiB}
    assert procs(card, "compute_v3") == sorted([*mine, [b1, 64 * MiB]])


def test_nvml_agrees_with_cuMemGetInfo_in_the_same_process(system):
    system.backend("1\na 0.5 1.0 1GiB\n")
    _, other = hold(system, "a", 200 * MiB, env={"GEMINI_MEM_LEASE_MB": "32"})
    out = probe(system, "a", "nvml_probe", "--cuda-alloc", str(10 * MiB))
    cuda, [gpu] = out["cuda"], out["gpus"]
    assert cuda["rc"] == 0
    for key in ("mem", "mem_v2"):
        assert (gpu[key]["free"], gpu[key]["total"]) == (cuda["free"], cuda["total"]), key
        assert gpu[key]["used"] == cuda["total"] - cuda["free"]
    listed = procs(gpu, "compute_v3")
    assert {pid for pid, _ in listed} == {other, out["pid"]}
    # each process as the pod manager holds it (the other's unspent lease counts), ours as
    # our cuMemGetInfo counts it: the list adds up to `used`
    assert sum(b for _, b in listed) == gpu["mem"]["used"]
    assert dict(map(tuple, listed))[out["pid"]] == 10 * MiB


@pytest.mark.parametrize("visible", ["1", "GPU-fa4e0000-0000-0000-0000-000000000001"])
@pytest.mark.parametrize("cuda", [False, True], ids=["nvml-only", "cuda-initialised"])
def test_only_the_client_s_gpu_is_its_view_and_nvml_never_initialises_cuda(
    system, fake, visible, cuda
):
    system.backend("1\na 0.5 1.0 1GiB\n")
    gpu1 = {"GEMINI_FAKE_DEVICES": "2", "CUDA_VISIBLE_DEVICES": visible}
    _, a1 = hold(system, "a", 96 * MiB, env=gpu1)
    out = probe(system, "a", "nvml_probe", *(["--cuda-alloc", "0"] if cuda else []), env=gpu1)
    other, mine = out["gpus"]
    assert mine["mem"]["total"] == GiB and mine["mem"]["used"] == 96 * MiB
    assert procs(mine, "compute_v3") == [[a1, 96 * MiB]]
    # GPU 0 has no pod manager of the client: the card, and nobody's processes
    assert other["mem"] == {"rc": 0, "total": CARD, "used": 0, "free": CARD}
    assert procs(other, "compute_v3") == []
    assert fake.fake_attach(system.segment.encode()) == 0
    count = fake.fake_pid_call_count
    assert count(out["pid"], b"cuInit") == (1 if cuda else 0)
    # with CUDA initialised the GPU is found by the driver's UUID of device 0
    assert (count(out["pid"], b"cuDeviceGetUuid_v2") > 0) == cuda
