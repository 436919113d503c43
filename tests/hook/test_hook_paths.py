"""The hook against the fake driver's clients (csrc/fake/programs): every hooked path is seen,
through cudart's route (gem_client) and direct links (direct_client), with and without per-thread
streams; the memory limit holds on every allocation path; tokens expire and are asked again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gemini.core.wire import RequestType
from gemini.native import NativeBuildMissing, fake_driver_dir, program_path

from .conftest import HookEnv

pytestmark = pytest.mark.hook

HOOKS_DEF = Path(__file__).resolve().parents[2] / "csrc/include/gemini/hooks.def"
TABLE = re.findall(r"^GEM_HOOK\((\w+),", HOOKS_DEF.read_text(), re.M)
PER_THREAD = {s for s in TABLE if s.endswith(("_ptsz", "_ptds"))}
ALLOC_PATHS = ["alloc", "pitch", "managed", "async", "pool", "vmm", "array", "array3d", "mipmapped"]
PROGRAMS = ["gem_client", "direct_client"]


@pytest.fixture
def fake_env(hook_lib, pm, tmp_path) -> HookEnv:
    try:
        driver = fake_driver_dir()
        for p in PROGRAMS:
            program_path(p)
    except NativeBuildMissing as exc:
        pytest.skip(str(exc))
    return HookEnv(hook_lib, driver, pm, tmp_path)


def prog(name: str) -> str:
    return str(program_path(name))


def test_every_hooked_path_is_seen_and_variants_are_kept(fake_env):
    seen: dict[str, int] = {}
    for name in PROGRAMS:
        for ptsz in (False, True):
            r = fake_env.run([prog(name), "all-paths", *(["--ptsz"] if ptsz else [])])
            assert r.returncode == 0, r.stderr
            for sym, n in r.stats.items():
                seen[sym] = seen.get(sym, 0) + n
            # the variant asked for is the variant that ran
            wrong = PER_THREAD if not ptsz else {s for s in TABLE if f"{s}_ptsz" in TABLE}
            assert {s for s in wrong if r.stats[s]} == set(), (name, ptsz)
    # the 4-argument CUDA 11 cuGetProcAddress is covered by the mini client
    assert {s for s in TABLE if not seen.get(s)} <= {"cuGetProcAddress"}


@pytest.mark.parametrize("name", PROGRAMS)
def test_over_limit_allocation_returns_2_on_every_path(fake_env, pm, name):
    pm.limit = 1 << 20
    for path in ALLOC_PATHS:
        r = fake_env.run([prog(name), "alloc", "--path", path, "--bytes", str(4 << 20)])
        assert r.out[0]["rc"] == 2, (path, r.out, r.stderr)
        assert pm.wait_for(lambda p: p.used == 0), path
    updates = pm.of_type(RequestType.MEM_UPDATE)
    assert updates and all(u.args[1] == 1 for u in updates)  # refused: nothing to give back


@pytest.mark.parametrize("name", PROGRAMS)
def test_allocations_within_the_limit_are_counted_and_given_back(fake_env, pm, name):
    pm.limit = 64 << 20
    for path in ALLOC_PATHS:
        r = fake_env.run([prog(name), "alloc", "--path", path, "--bytes", str(1 << 20)])
        assert r.out[0]["rc"] == 0, (path, r.out, r.stderr)
        assert r.out[0]["mem_total"] == pm.limit
        assert r.out[0]["mem_free"] <= pm.limit - (1 << 20)
        assert pm.wait_for(lambda p: p.used == 0), path


@pytest.mark.parametrize("name", PROGRAMS)
def test_meminfo_shows_the_limit(fake_env, pm, name):
    pm.limit = 3 << 30
    r = fake_env.run([prog(name), "meminfo"])
    assert r.out[0]["total"] == 3 << 30 and r.out[0]["free"] == 3 << 30
    assert r.out[0]["device_total"] == 3 << 30


def test_expired_tokens_are_asked_again_and_overuse_is_reported(fake_env, pm):
    pm.quota_ms = 20.0
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "1", "--burst", "200",
                      "--seconds", "0.4"])
    assert r.out[-1]["rc"] == 0, r.stderr
    quotas = pm.of_type(RequestType.QUOTA)
    # The 200 kernels are queued well within the 20 ms token and run ~200 ms on the GPU after
    # it: the next request reports that as overuse and asks for the burst the predictor saw.
    assert len(quotas) >= 2
    assert quotas[0].args == (0.0, 0.0)
    overuse_ms, burst_ms = quotas[1].args
    assert 100.0 < overuse_ms < 400.0
    assert burst_ms > 100.0
