"""Faults and bad input: one bad client, a dead daemon or garbage on a port must not hurt the
others, and nothing is lost.  Everything waits on events (log lines, replies, progress lines)."""

from __future__ import annotations

import json
import signal
import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemini.client import Connection, query_status
from gemini.core.wire import REQ_MSG_LEN, RequestType, Status
from tests.system.conftest import result

pytestmark = pytest.mark.system


def progress(proc, timeout_s: float = 20.0) -> dict:
    """The next JSON progress line of a `work --report-every` client."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    line = proc.stdout.readline()
    assert line and time.monotonic() < deadline, "no progress line"
    return json.loads(line)


def reporting_work(system, name: str, seconds: float):
    return system.client(
        name,
        "work",
        "--kernel-ms",
        "5",
        "--burst",
        "4",
        "--seconds",
        str(seconds),
        "--report-every",
        "0.2",
    )


def test_a_pod_manager_killed_and_restarted_is_rejoined_by_its_processes(system):
    system.backend("2\na 0.5 1.0 1GiB\nb 0.5 1.0 1GiB\n")
    worker = reporting_work(system, "a", 6)  # (a hook without its pod manager waits: no end)
    other = reporting_work(system, "b", 6)
    progress(worker)
    port = system.pmgrs["a"].port
    system.pmgrs["a"].proc.send_signal(signal.SIGKILL)
    system.schd.wait_for(r"\[a\] pod manager disconnected")
    system.pod_manager("a", "--port", str(port))
    before = progress(worker)["kernels"]
    # The hook reconnected to the new pod manager and keeps getting tokens.
    while progress(worker)["kernels"] <= before:
        pass
    assert result(worker)["rc"] == 0
    assert result(other)["kernels"] > 0


def test_a_restarted_pod_manager_is_told_at_once_what_an_idle_process_holds(system):
    """The process sits in fgets() holding 600 MiB of its 1 GiB: it told a new pod manager
    only at its next call, and meanwhile a neighbour was let allocate 600 MiB more."""
    mib = 1 << 20
    system.backend("1\na 1.0 1.0 1GiB\n")
    idle = system.client("a", "alloc", "--path", "alloc", "--bytes", str(600 * mib), "--hold")
    assert json.loads(idle.stdout.readline())["rc"] == 0
    port = system.pmgrs["a"].port
    system.pmgrs["a"].proc.send_signal(signal.SIGKILL)
    system.schd.wait_for(r"\[a\] pod manager disconnected")
    system.pod_manager("a", "--port", str(port))
    deadline = time.monotonic() + 10
    with Connection("127.0.0.1", port, "a") as probe:
        while (used := probe.call(RequestType.MEM_LIMIT)[0].values[0]) != 600 * mib:
            assert time.monotonic() < deadline, f"{used} B counted, not the idle 600 MiB"
            time.sleep(0.02)  # (a poll's pause)
    neighbour = system.client("a", "alloc", "--path", "alloc", "--bytes", str(600 * mib))
    assert json.loads(neighbour.stdout.readline())["rc"] == 2  # CUDA_ERROR_OUT_OF_MEMORY
    assert idle.stdin is not None
    idle.stdin.close()
    assert idle.wait(timeout=20) == 0


def test_a_scheduler_killed_and_restarted_is_rejoined_by_everyone(system):
    system.backend("1\na 1.0 1.0 1GiB\n")
    worker = reporting_work(system, "a", 6)  # (without a scheduler its hook waits: no end)
    progress(worker)
    mark = system.pmgrs["a"].mark()
    system.schd.proc.send_signal(signal.SIGKILL)
    system.pmgrs["a"].wait_for("lost the scheduler", since=mark)
    system.restart_scheduler()
    system.pmgrs["a"].wait_for("connected to scheduler", since=mark)
    before = progress(worker)["kernels"]
    while progress(worker)["kernels"] <= before:
        pass
    assert result(worker)["rc"] == 0
    # Usage starts afresh in the new scheduler, and it knows the client again.
    names = [c["name"] for c in query_status("127.0.0.1", system.schd.port)["clients"]]
    assert names == ["a"]


def test_a_silent_connection_never_holds_the_token(system):
    system.backend("2\na 0.5 1.0 1GiB\nb 0.5 1.0 1GiB\n")
    with (
        socket.create_connection(("127.0.0.1", system.schd.port)),
        socket.create_connection(("127.0.0.1", system.pmgrs["a"].port)),
    ):
        r = result(system.work("b", 3))
    assert r["kernels"] * 5 / 1000 / r["wall_s"] > 0.7  # b had the GPU to itself


GARBAGE = st.one_of(
    st.binary(min_size=1, max_size=3 * REQ_MSG_LEN),
    st.builds(
        lambda n, rest: struct.pack("<Q", n) + rest,
        st.integers(0, 2**64 - 1),
        st.binary(max_size=REQ_MSG_LEN),
    ),
    st.builds(
        lambda t: (struct.pack("<Q", 1) + b"a\0" + struct.pack("<ii", 1, t)).ljust(80, b"\0"),
        st.integers(-(2**31), 2**31 - 1),
    ),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_garbage_on_any_port_closes_only_that_connection(system_once, data):
    system = system_once
    target = data.draw(st.sampled_from(["scheduler", "pod manager"]))
    port = system.schd.port if target == "scheduler" else system.pmgrs["a"].port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data.draw(GARBAGE))
        s.shutdown(socket.SHUT_WR)
        while s.recv(4096):  # whatever the daemon answers, it ends with a close
            pass
    # The others keep their memory and their tokens.
    assert system.holder_conn.call(RequestType.MEM_LIMIT)[0].values[0] == 1 << 20
    rsp, _ = system.holder_conn.call(RequestType.QUOTA, 0.0, 0.0)
    assert rsp.status is Status.OK


@pytest.fixture(scope="module")
def system_once(tmp_path_factory):
    """One backend for all the fuzz examples, with a client that holds 1 MiB throughout."""
    from tests.procs import start_pod_manager, start_scheduler

    cfg = tmp_path_factory.mktemp("fuzz") / "resource-config.txt"
    cfg.write_text("1\na 1.0 1.0 1GiB\n")
    schd = start_scheduler(cfg, "-q", "50", "-m", "20")
    pm = start_pod_manager("a", schd.port)
    pm.wait_for("memory limit")

    class Once:
        pass

    once = Once()
    once.schd, once.pmgrs = schd, {"a": pm}
    once.holder_conn = Connection("127.0.0.1", pm.port, "a")
    assert once.holder_conn.call(RequestType.MEM_UPDATE, 1 << 20, 1)[0].values == (1,)
    yield once
    once.holder_conn.close()
    assert schd.proc.poll() is None and pm.proc.poll() is None, "a daemon died"
    pm.stop()
    schd.stop()
