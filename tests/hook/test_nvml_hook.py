"""The hook's NVML view against the fake libnvidia-ml.so.1 and the scripted pod manager: each
process tells the pod manager its pid, and NVML never shows the card on the client's GPU, not
even when the pod manager is gone.  The whole system (real pod managers, several processes) is
in tests/system/test_nvml_view.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gemini.core import wire
from gemini.core.wire import RequestType
from gemini.native import NativeBuildMissing, fake_driver_dir, program_path
from tests.procs import free_ports

from .conftest import HookEnv

pytestmark = pytest.mark.hook

GiB, MiB = 1 << 30, 1 << 20
UNKNOWN = 999  # NVML_ERROR_UNKNOWN
CARD = 16 * GiB  # the fake GPU's memory


@pytest.fixture
def nvml_env(hook_lib, pm, tmp_path, fake_gpu_segment) -> Iterator[HookEnv]:
    try:
        driver = fake_driver_dir()
        for p in ("nvml_probe", "gem_client"):
            program_path(p)
        if not (driver / "libnvidia-ml.so.1").exists():
            raise NativeBuildMissing("the fake libnvidia-ml.so.1 is not built: run `make build`")
    except NativeBuildMissing as exc:
        pytest.fail(f"{exc} (the hook tests need the fake driver: not skipped)")
    env = HookEnv(hook_lib, driver, pm, tmp_path)
    env.env["GEMINI_FAKE_GPU"] = fake_gpu_segment
    yield env


def probe(env: HookEnv, *argv: str, **extra: str) -> dict:
    r = env.run([str(program_path("nvml_probe")), *argv], **extra)
    assert r.returncode == 0, r.stderr
    [out] = r.out
    return out


def test_each_connection_first_says_which_process_it_is(nvml_env, pm):
    r = nvml_env.run([str(program_path("gem_client")), "alloc", "--path", "alloc", "--bytes",
                      str(MiB)])
    assert r.returncode == 0, r.stderr
    pid = r.out[0]["pid"]
    kinds = [q.type for q in pm.requests]
    first = pm.of_type(RequestType.PROCESS)[0]
    assert first.args == (pid, -1, wire.PROCESS_READS_CUTS)  # (it reads cuts: wire.CUT_ID)
    assert kinds.index(RequestType.PROCESS) < kinds.index(RequestType.MEM_UPDATE)


def test_the_client_s_gpu_shows_the_pod_manager_s_figures(nvml_env, pm):
    pm.limit, pm.used = 4 * GiB, 100 * MiB
    out = probe(nvml_env)
    [gpu] = out["gpus"]
    assert gpu["mem"] == {"rc": 0, "total": 4 * GiB, "used": 100 * MiB, "free": 4 * GiB - 100 * MiB}
    assert gpu["mem_v2"] == {"rc": 0, "total": 4 * GiB, "reserved": 0, "used": 100 * MiB,
                             "free": 4 * GiB - 100 * MiB}
    # the pod manager listed nobody; every PROCESS request carried the probe's pid
    assert all(gpu[k] == {"rc": 0, "procs": []} for k in ("compute_v3", "detail", "graphics_v3"))
    assert {q.args[0] for q in pm.of_type(RequestType.PROCESS)} == {out["pid"]}


def test_an_unreachable_pod_manager_never_shows_the_card(nvml_env):
    nvml_env.env["POD_MANAGER_PORT"] = str(free_ports())  # (no one listens there)
    r = nvml_env.run([str(program_path("nvml_probe"))])
    assert r.returncode == 0, r.stderr
    [gpu] = r.out[0]["gpus"]
    assert gpu["mem"]["rc"] == gpu["mem_v2"]["rc"] == UNKNOWN
    assert gpu["count_rc"] == gpu["compute_v3"]["rc"] == gpu["detail"]["rc"] == UNKNOWN
    assert gpu["graphics_v3"] == {"rc": 0, "procs": []}  # never anyone's
    assert r.stderr.count("NVML: the pod manager cannot be reached") == 1


def test_the_last_figures_stay_when_the_pod_manager_goes(nvml_env, pm):
    pm.limit, pm.used = 2 * GiB, 300 * MiB
    proc = nvml_env.start([str(program_path("nvml_probe")), "--again"])
    try:
        before = json.loads(proc.wait_line('"gpus"'))["gpus"][0]
        assert before["mem"]["total"] == 2 * GiB and before["mem"]["used"] == 300 * MiB
        pm.close()
        proc.popen.stdin.write("go\n")
        proc.popen.stdin.flush()
        after = json.loads(proc.wait_line('"gpus"'))["gpus"][0]
    finally:
        proc.kill()
    assert after["mem"] == before["mem"]
    assert after["mem_v2"] == before["mem_v2"]
    assert after["compute_v3"]["rc"] == UNKNOWN  # no stale process list


def test_with_the_hook_disabled_nvml_is_the_card(nvml_env, pm):
    [gpu] = probe(nvml_env, GEMINI_HOOK_DISABLE="1")["gpus"]
    assert gpu["mem"]["total"] == CARD and gpu["mem"]["rc"] == 0
    assert pm.requests == []
