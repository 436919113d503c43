"""Several devices under the hook (issue 16): device i of the process has pod manager i of
POD_MANAGER_PORT, with its own token, limit and accounting; a device without one cannot be used
(fail closed: no context, no launch, no allocation on it, one line in the log)."""

from __future__ import annotations

import pytest

from gemini.core.wire import RequestType
from gemini.native import NativeBuildMissing, fake_driver_dir, program_path

from .conftest import HookEnv
from .podmgr import FakePodManager

pytestmark = pytest.mark.hook

CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_INVALID_DEVICE = 101
MIB = 1 << 20


@pytest.fixture
def second_pm():
    p = FakePodManager(name="hooktest")
    yield p
    p.close()


@pytest.fixture
def env(hook_lib, pm, tmp_path) -> HookEnv:
    try:
        driver = fake_driver_dir()
        program_path("gem_client")
    except NativeBuildMissing as exc:
        pytest.fail(f"{exc} (the hook tests need the fake driver: not skipped)")
    e = HookEnv(hook_lib, driver, pm, tmp_path)
    e.env.pop("CUDA_VISIBLE_DEVICES", None)
    e.env["GEMINI_FAKE_DEVICES"] = "2"
    return e


def client(*args: str) -> list[str]:
    return [str(program_path("gem_client")), *args]


WORK = ("work", "--kernel-ms", "1", "--burst", "5", "--bursts", "2")


@pytest.mark.parametrize("program", ["gem_client", "direct_client"])
def test_a_device_without_a_pod_manager_cannot_be_used(env, pm, program):
    """One pod manager, two GPUs: device 1 is refused on every path, and said so once."""
    prog = str(program_path(program))
    for args in (WORK, ("alloc", "--bytes", str(MIB)), ("all-paths",)):
        r = env.run([prog, *args, "--device", "1"])
        assert r.out[-1]["rc"] == CUDA_ERROR_INVALID_DEVICE, (args, r.out, r.stderr)
        assert r.stderr.count("device 1 has no pod manager (POD_MANAGER_PORT lists 1)") == 1
    assert pm.of_type(RequestType.QUOTA) == [] and pm.used == 0
    # device 0 still works
    assert env.run([prog, *WORK]).out[-1]["rc"] == 0
    assert pm.of_type(RequestType.QUOTA)


def test_each_device_has_its_own_pod_manager_token_and_limit(env, pm, second_pm):
    env.env["POD_MANAGER_PORT"] = f"{pm.port},{second_pm.port}"
    pm.limit, second_pm.limit = 64 * MIB, 2 * MIB
    r = env.run(client(*WORK, "--device", "1"))
    assert r.out[-1]["rc"] == 0, r.stderr
    assert second_pm.of_type(RequestType.QUOTA) and not pm.of_type(RequestType.QUOTA)
    # the limit of device 1 is its pod manager's, not device 0's
    r = env.run(client("alloc", "--bytes", str(4 * MIB), "--device", "1"))
    assert r.out[0]["rc"] == CUDA_ERROR_OUT_OF_MEMORY
    r = env.run(client("alloc", "--bytes", str(4 * MIB)))
    assert r.out[0]["rc"] == 0
    assert pm.wait_for(lambda p: p.used == 0)
    assert [u.args for u in second_pm.of_type(RequestType.MEM_UPDATE)] == [(4 * MIB, 1)]
    assert all(u.args[0] == 4 * MIB for u in pm.of_type(RequestType.MEM_UPDATE))


def test_visible_devices_put_the_clients_gpu_first(env, pm):
    """launch-command's CUDA_VISIBLE_DEVICES: the client's GPU 1 is its device 0, managed by
    its one pod manager; the GPU it was not given does not exist for it."""
    r = env.run(client(*WORK), **{"CUDA_VISIBLE_DEVICES": "1"})
    assert r.out[-1]["rc"] == 0, r.stderr
    assert pm.of_type(RequestType.QUOTA)
    r = env.run(client("meminfo"), **{"CUDA_VISIBLE_DEVICES": "1"})
    assert r.out[0]["devices"] == 1 and r.out[0]["total"] == pm.limit
