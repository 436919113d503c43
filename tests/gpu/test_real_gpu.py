"""Issue 3's checks on a real NVIDIA GPU, short versions of bench/validate_hook.py: apps under the
hook (each with a fresh pod manager of its own, limit 4 GiB) get clean framework OOMs beyond the
limit, see the limit as total memory, have their launches counted, and two fixed-work tenants
0.3/0.7 get their shares.  Skipped where there is no GPU."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

pytestmark = pytest.mark.gpu
GIB = 1 << 30
LIMIT = 4 * GIB


def _gpu_present() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None or subprocess.run([smi, "-L"], capture_output=True).returncode != 0:
        return False
    try:
        import torch
    except ImportError:
        return True  # CuPy / nvcc checks can still run
    return bool(torch.cuda.is_available())


if not _gpu_present():
    pytest.skip("no NVIDIA GPU (nvidia-smi -L failed or torch sees no CUDA device)",
                allow_module_level=True)

import common  # noqa: E402  (bench/, after the skip: it needs nothing from a GPU, but no point)
import run_all  # noqa: E402
import scenarios  # noqa: E402


@pytest.fixture(scope="module")
def built() -> Path:
    info = run_all.build(fake=False)
    assert info["hook"]["ok"], info["hook"]
    return common.BUILD


@pytest.fixture
def procs():
    with common.Procs() as p:
        yield p


def _under_hook(procs, name: str, argv: list[str], extra_env: dict | None = None,
                timeout: float = 240) -> tuple[dict, dict]:
    backend = common.Backend(procs, [common.Client(name, 0.1, 1.0, LIMIT)], tag=name)
    stats = Path(tempfile.mkdtemp(prefix="gemtest-")) / "stats.json"
    try:
        env = {**common.base_env(), **backend.hook_env(name, stats), **(extra_env or {})}
        r = common.run_app(procs, argv, env, name, timeout)
    finally:
        backend.stop()
    return r, common.launch_counts(common.read_stats(stats))


@pytest.mark.parametrize("alloc_conf", ["", "expandable_segments:True", "backend:cudaMallocAsync"])
@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graphs"])
def test_torch_under_the_limit(built, procs, alloc_conf, graphs):
    pytest.importorskip("torch")
    argv = [common.PY, str(BENCH / "torch_app.py"), "validate", "--limit", str(LIMIT),
            "--steps", "20"] + (["--graphs"] if graphs else [])
    env = {"PYTORCH_CUDA_ALLOC_CONF": alloc_conf} if alloc_conf else {}
    r, counts = _under_hook(procs, "torchval", argv, env)
    assert r.get("trained"), r
    assert r.get("total_is_limit"), r
    assert r.get("oom_raised"), r  # isinstance(exc, torch.OutOfMemoryError)
    assert r.get("usable_after_oom"), r
    assert r.get("escaped_bytes") == 0, r
    assert counts["kernel_launches"] > 0, counts
    if graphs:
        assert counts["graph_launches"] > 0, counts


def test_cupy_under_the_limit(built, procs):
    pytest.importorskip("cupy")
    r, _ = _under_hook(procs, "cupyval", [common.PY, str(BENCH / "cupy_mem.py"), "--limit",
                                          str(LIMIT)])
    assert r.get("total_is_limit"), r
    assert r.get("oom_raised"), r  # isinstance(exc, cupy.cuda.memory.OutOfMemoryError)
    assert r.get("pool_over_rc") == 2, r
    assert r.get("escaped_bytes") == 0, r


def test_nvcc_program_under_the_limit(built, procs):
    if not (built / "limit_probe").exists():
        pytest.skip("nvcc missing: bench/.build/limit_probe not built")
    r, counts = _under_hook(procs, "probeval", [str(built / "limit_probe"), str(LIMIT),
                                                "paths,launches,meminfo", "0", "500"])
    assert r.get("mem_total") == LIMIT, r
    paths = r.get("paths", {})
    assert paths and all(p["over_rc"] == 2 for p in paths.values()), paths
    assert all(p["escapes"] == 0 for p in paths.values()), paths
    assert paths["cudaMalloc"]["first_piece_ok"], paths
    assert counts["kernel_launches"] >= 500, counts


def test_two_tenants_get_30_70(built, procs):
    pytest.importorskip("cupy")
    ctx = scenarios.Context(fake=False, out=Path(tempfile.mkdtemp()))
    scenarios.calibrate(ctx, procs, seconds=2.0)
    specs = [("c1", 0.3, 1.0), ("c2", 0.7, 1.0)]
    results, t0, grants = scenarios.run_tenants(ctx, procs, specs, 8.0, True, tag="t3070")
    r = scenarios.analyse(ctx, results, t0, 8.0, {"c1": 0.3, "c2": 0.7}, warm=2.0, grants=grants)
    # Short run: a looser bound than the benchmark's 2 points over 10 s.
    assert r["err10_pp"] <= 5, r
