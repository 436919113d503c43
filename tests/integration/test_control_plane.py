"""Scheduler + pod managers as real processes over loopback, with processes acting as hooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemini.client import Connection, query_status
from gemini.core.wire import (
    CUT_ID,
    PROCESS_READS_CUTS,
    RSP_MSG_LEN,
    RequestType,
    Status,
    decode_response,
)
from tests.procs import ROOT, start_pod_manager, start_scheduler

# Quotas of 30-60 ms, a 2 s window, and 20 ms for a busy Python process on a loaded machine to
# ask again after its quota ends.
FAST = ("-q", "60", "-m", "30", "-w", "2000", "--grace", "20")


def start_hook(port: int, name: str, seconds: float) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "tests.integration.fake_hook",
        "--port",
        str(port),
        "--name",
        name,
        "--seconds",
        str(seconds),
    ]
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def finish(proc: subprocess.Popen[str]) -> dict:
    out, _ = proc.communicate(timeout=60)
    lines = [json.loads(x) for x in out.splitlines()]
    assert proc.returncode == 0, lines
    return lines[-1]


def share_in(results: dict[str, dict], start: float, end: float) -> dict[str, float]:
    held = {
        name: sum(max(0.0, min(e, end) - max(s, start)) for s, e in r["intervals"])
        for name, r in results.items()
    }
    total = sum(held.values())
    return {n: h / total for n, h in held.items()}


@pytest.fixture
def backend(tmp_path):
    started = []

    def start(config_text: str, names: list[str]):
        cfg = tmp_path / "resource-config.txt"
        cfg.write_text(config_text)
        schd = start_scheduler(cfg, *FAST)
        started.append(schd)
        pmgrs = {}
        for name in names:
            pm = start_pod_manager(name, schd.port)
            started.append(pm)
            pm.wait_for("memory limit")
            pmgrs[name] = pm
        return cfg, schd, pmgrs

    yield start
    for d in reversed(started):
        d.stop()


@pytest.mark.system
def test_shares_follow_the_config_and_a_live_edit(backend):
    cfg, schd, pmgrs = backend("2\na 0.3 1.0 1GiB\nb 0.7 1.0 1GiB\n", ["a", "b"])
    hooks = {n: start_hook(pm.port, n, 9.0) for n, pm in pmgrs.items()}
    # Edit the file once the run is under way (the hooks print "ready" when connected).
    for proc in hooks.values():
        assert json.loads(proc.stdout.readline())["ready"]
    t0 = time.monotonic()
    time.sleep(4.0)  # the first phase of the workload, not a synchronisation
    # Both were served before the edit (the holder at one instant may be nobody: turns are short).
    served = {c["name"]: c["tokens"] for c in query_status("127.0.0.1", schd.port)["clients"]}
    assert served["a"] > 0 and served["b"] > 0, served
    cfg.write_text("2\na 0.7 1.0 1GiB\nb 0.3 1.0 1GiB\n")
    t_edit = time.monotonic()
    schd.wait_for(r"client changed")
    results = {n: finish(p) for n, p in hooks.items()}
    before = share_in(results, t0 + 1.0, t_edit)
    # The window after the edit ends where the first hook stopped (each ran 9 s from its ready).
    both = min(r["intervals"][-1][1] for r in results.values())
    after = share_in(results, t_edit + 2.5, min(both, t0 + 9.0))
    assert before["a"] == pytest.approx(0.3, abs=0.1), before
    assert after["a"] == pytest.approx(0.7, abs=0.1), after


@pytest.mark.system
def test_a_lowered_cap_cuts_the_token_its_process_holds(tmp_path: Path):
    """Capped at 0.1 by an edit while its process holds a 2 s grant: the scheduler cuts the
    grant, and the pod manager tells the process (wire.CUT_ID), which stops there instead of
    running on at the old cap."""
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text("1\na 1.0 1.0 1GiB\n")
    # (Gemini's own quota lengths: one 2 s grant, long enough for the edit to land in it)
    schd = start_scheduler(cfg, "-q", "2000", "-m", "100", "-w", "20000", "--short-window", "0",
                           "--no-lone-turns")
    pm = start_pod_manager("a", schd.port)
    try:
        pm.wait_for("memory limit")
        with Connection("127.0.0.1", pm.port, "a", timeout=30.0) as conn:
            conn.call(RequestType.PROCESS, os.getpid(), -1, PROCESS_READS_CUTS)  # (as a hook)
            token, _ = conn.call(RequestType.QUOTA, 0.0, 0.0)
            got = time.monotonic()
            assert token.values[0] == pytest.approx(2000.0, abs=50.0), token
            cfg.write_text("1\na 0.1 0.1 1GiB\n")
            schd.wait_for("cap lowered")
            cut = decode_response(RequestType.QUOTA, conn._read(RSP_MSG_LEN))
        assert cut.req_id == CUT_ID and cut.status is Status.OK
        # (to a tenth of it from its start, or to now where it ran longer)
        assert cut.values[0] <= max(200.0 - (time.monotonic() - got) * 1000, 0.0) + 50.0
        pm.wait_for("token cut by the scheduler")
    finally:
        pm.stop()
        schd.stop()


@pytest.mark.system
def test_three_clients_get_their_guarantees(backend):
    _, _, pmgrs = backend("3\na 0.2 1 1GiB\nb 0.2 1 1GiB\nc 0.6 1 1GiB\n", ["a", "b", "c"])
    hooks = {n: start_hook(pm.port, n, 5.0) for n, pm in pmgrs.items()}
    results = {n: finish(p) for n, p in hooks.items()}
    starts = [r["intervals"][0][0] for r in results.values()]
    shares = share_in(results, max(starts) + 1.0, max(starts) + 4.5)
    for name, want in (("a", 0.2), ("b", 0.2), ("c", 0.6)):
        assert shares[name] == pytest.approx(want, abs=0.08), shares


@pytest.mark.system
def test_memory_limit_is_shared_by_processes_and_released_on_exit(backend):
    _, _, pmgrs = backend("1\na 1 1 1000\n", ["a"])
    port = pmgrs["a"].port
    with Connection("127.0.0.1", port, "a") as first, Connection("127.0.0.1", port, "a") as second:
        assert first.call(RequestType.MEM_UPDATE, 600, 1)[0].values == (1,)
        assert second.call(RequestType.MEM_UPDATE, 600, 1)[0].values == (0,)
        assert second.call(RequestType.MEM_LIMIT)[0].values == (600, 1000, 0)
    with Connection("127.0.0.1", port, "a") as third:
        # The first process went away: its 600 bytes are free again.
        assert third.call(RequestType.MEM_UPDATE, 900, 1)[0].values == (1,)


@pytest.mark.system
def test_unknown_names_are_answered_with_an_error(backend):
    _, schd, pmgrs = backend("1\na 1 1 1000\n", ["a"])
    with Connection("127.0.0.1", schd.port, "nobody") as conn:
        rsp, _ = conn.call(RequestType.QUOTA, 0.0, 0.0)
        assert rsp.status is Status.UNKNOWN_CLIENT
    with Connection("127.0.0.1", pmgrs["a"].port, "b") as conn:
        rsp, _ = conn.call(RequestType.MEM_LIMIT)
        assert rsp.status is Status.UNKNOWN_CLIENT


@pytest.mark.system
def test_garbage_closes_only_the_sender(backend):
    _, schd, pmgrs = backend("1\na 1 1 1000\n", ["a"])
    import socket

    with socket.create_connection(("127.0.0.1", schd.port)) as s:
        s.sendall(b"\xff" * 80)
        assert s.recv(1) == b""  # closed by the scheduler
    schd.wait_for("closing connection")
    with Connection("127.0.0.1", pmgrs["a"].port, "a") as conn:
        assert conn.call(RequestType.QUOTA, 0.0, 0.0)[0].status is Status.OK


def test_missing_config_is_a_clear_error(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "gemini.cli.schd", "-p", str(tmp_path), "-f", "nope.txt"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "nope.txt" in proc.stderr


@pytest.mark.system
def test_a_live_memory_limit_edit_reaches_the_running_pod_manager(backend):
    cfg, schd, pmgrs = backend("1\na 1 1 1000\n", ["a"])
    mark = pmgrs["a"].mark()
    cfg.write_text("1\na 1 1 5000\n")
    pmgrs["a"].wait_for("memory limit 5000 B", since=mark)
    with Connection("127.0.0.1", pmgrs["a"].port, "a") as conn:
        assert conn.call(RequestType.MEM_UPDATE, 4000, 1)[0].values == (1,)
    # An invalid edit is refused with file, line and reason; the last good config stays.
    mark = schd.mark()
    cfg.write_text("1\na 1 1 -5\n")
    schd.wait_for(r"resource-config.txt:2: .*keeping the last good config", since=mark)
    with Connection("127.0.0.1", pmgrs["a"].port, "a") as conn:
        assert conn.call(RequestType.MEM_LIMIT)[0].values == (0, 5000, 0)


@pytest.mark.system
def test_an_edit_naming_a_gpu_the_machine_lacks_is_refused_by_every_scheduler(tmp_path: Path):
    """launch-backend refuses it ("not applied here"); each GPU's gem-schd watches the file
    too, and GPU 0's used to apply its part (a lowered to 0.2) beside the typo's GPU 11.  Now
    launch-backend hands its schedulers the GPUs it found (--present-gpus)."""
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text("2\na 0.5 0.5 1GiB\nb 0.5 1 1GiB gpu=1\n")
    schd = start_scheduler(cfg, "--gpu", "0", "--present-gpus", "0=GPU-aaa,1=GPU-bbb")
    try:
        mark = schd.mark()
        cfg.write_text("3\na 0.2 0.2 1GiB\nb 0.5 1 1GiB gpu=1\nc 0.1 0.2 1GiB gpu=11\n")
        schd.wait_for(r"c: GPU 11 is not on this machine .*keeping the last good config",
                      since=mark)
        cfg.write_text("2\na 0.3 0.3 1GiB\nb 0.5 1 1GiB gpu=1\n")
        changed = schd.wait_for(r"client changed: .*", since=mark).group(0)
        assert "limit 0.3" in changed, changed  # the first change it applied is the good edit's
    finally:
        schd.stop()


def test_gem_schd_refuses_to_start_on_a_config_naming_a_gpu_the_machine_lacks(tmp_path: Path):
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text("2\na 0.5 1 1GiB\nb 0.5 1 1GiB gpu=3\n")
    proc = subprocess.run(
        [sys.executable, "-m", "gemini.cli.schd", "-P", "0", "-p", str(tmp_path), "-f",
         cfg.name, "--present-gpus", "0=GPU-aaa"], capture_output=True, text=True, cwd=ROOT,
        timeout=30)
    assert proc.returncode == 2
    assert "b: GPU 3 is not on this machine (GPUs: 0 (GPU-aaa))" in proc.stderr
