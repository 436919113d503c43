"""Load: 64 clients x 4 processes on the fake GPU for a bounded run.  Every process is served,
shares stay fair, and the scheduler's memory does not grow with the number of grants."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from gemini.client import query_status
from tests.procs import start_pod_manager, start_scheduler
from tests.system.conftest import result

pytestmark = pytest.mark.system
CLIENTS = 64
PROCESSES = 4
SECONDS = 12.0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_64_clients_of_4_processes(system, tmp_path):
    names = [f"c{i:02d}" for i in range(CLIENTS)]
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text(f"{CLIENTS}\n" + "".join(f"{n} 0.01 1.0 1GiB\n" for n in names))
    schd = start_scheduler(cfg, "-q", "40", "-m", "20", "-w", "4000", "--grace", "20")
    system.schd = schd
    pods = [start_pod_manager(n, schd.port) for n in names]
    try:
        system.pmgrs = {}
        for name, pm in zip(names, pods, strict=True):
            pm.wait_for("memory limit")
            system.pmgrs[name] = pm
        procs = {n: [system.client(n, "work", "--kernel-ms", "2", "--burst", "2", "--seconds",
                                   str(SECONDS)) for _ in range(PROCESSES)] for n in names}
        early = rss_kib(schd.proc.pid)
        grants_early = len(query_status("127.0.0.1", schd.port)["history"])
        done = {n: [result(p)["kernels"] for p in ps] for n, ps in procs.items()}
        late = rss_kib(schd.proc.pid)
        status = query_status("127.0.0.1", schd.port)
    finally:
        for d in [*pods, schd]:
            d.stop()
    # Every process of every client got the GPU.
    assert all(k > 0 for ks in done.values() for k in ks), done
    kernels = {n: sum(ks) for n, ks in done.items()}
    # Fair (equal requests): spread small overall, no client far from the mean.  A 12 s run is
    # about 10 rounds of 64 quotas, so single clients vary by a quota or two.
    mean = statistics.mean(kernels.values())
    assert statistics.pstdev(kernels.values()) / mean < 0.25, kernels
    assert min(kernels.values()) > 0.5 * mean and max(kernels.values()) < 2.0 * mean, kernels
    # Bounded memory: the window forgets old grants; RSS grows by less than 8 MiB.
    assert late - early < 8 * 1024, (early, late, grants_early)
    assert len(status["clients"]) == CLIENTS


def test_load_exits_cleanly(system):
    """A short run, then the daemons stop on SIGTERM with exit code 0."""
    system.backend("1\na 1.0 1.0 1GiB\n")
    proc = system.work("a", 0.5)
    assert result(proc)["rc"] == 0
    assert system.schd.stop() == 0
    assert all(pm.stop() == 0 for pm in system.pmgrs.values())
