"""The pod manager's list of its client's processes (PROCESS), which the hook's NVML view shows."""

from hypothesis import given
from hypothesis import strategies as st

from gemini.core.actions import Reply, SendUpstream
from gemini.core.podmanager import PodCore, ProcessUse
from gemini.core.wire import Request, RequestType, Response, Status


def ready_pod(limit=1000) -> PodCore:
    pod = PodCore("pod", 0.0)
    [limit_req] = [a.request for a in pod.on_scheduler_connected(0.0)
                   if isinstance(a, SendUpstream) and a.request.type is RequestType.MEM_LIMIT]
    pod.on_upstream_response(Response(limit_req.req_id, Status.OK, (0, limit)), 0.0)
    return pod


def ask(pod, conn, pid, index, req_id=1):
    [reply] = [a for a in pod.on_hook_request(
        conn, Request("pod", req_id, RequestType.PROCESS, (pid, index)), 0.0)
        if isinstance(a, Reply)]
    assert reply.conn == conn and reply.response.status is Status.OK
    return reply.response.values


def alloc(pod, conn, size):
    pod.on_hook_request(conn, Request("pod", 9, RequestType.MEM_UPDATE, (size, 1)), 0.0)


def test_processes_that_hold_memory_are_listed_with_their_bytes():
    pod = ready_pod()
    for conn, pid in ((1, 300), (2, 100), (3, 200)):
        pod.on_hook_connect(conn, 0.0)
        ask(pod, conn, pid, -1)
    alloc(pod, 1, 40)
    alloc(pod, 2, 15)
    # Process 3 (pid 200) only looked: not one of the client's processes.
    assert pod.processes() == [ProcessUse(100, 15), ProcessUse(300, 40)]
    assert ask(pod, 3, 200, 0) == (2, 100, 15)
    assert ask(pod, 3, 200, 1) == (2, 300, 40)
    assert ask(pod, 3, 200, 2) == (2, 0, 0)


def test_a_process_that_asked_for_a_token_is_listed_without_memory():
    pod = ready_pod()
    pod.on_hook_connect(1, 0.0)
    ask(pod, 1, 77, -1)
    pod.on_hook_request(1, Request("pod", 2, RequestType.QUOTA, (0.0, 1.0)), 0.0)
    assert pod.processes() == [ProcessUse(77, 0)]


def test_a_process_is_gone_with_its_connection_and_a_pid_adds_up_over_connections():
    pod = ready_pod()
    for conn in (1, 2):
        pod.on_hook_connect(conn, 0.0)
        ask(pod, conn, 55, -1)
        alloc(pod, conn, 10 * conn)
    assert pod.processes() == [ProcessUse(55, 30)]
    pod.on_hook_disconnect(2, 0.0)
    assert pod.processes() == [ProcessUse(55, 10)]
    pod.on_hook_disconnect(1, 0.0)
    assert pod.processes() == []


def test_the_list_needs_no_memory_limit_yet():
    pod = PodCore("pod", 0.0)  # the scheduler has not told the limit: memory requests wait
    pod.on_hook_connect(1, 0.0)
    assert ask(pod, 1, 5, 0) == (0, 0, 0)


def test_an_unknown_pid_is_not_listed():
    pod = ready_pod()
    pod.on_hook_connect(1, 0.0)
    alloc(pod, 1, 10)  # a hook that never said its pid (an older one)
    assert ask(pod, 1, 0, 0) == (0, 0, 0)


@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 100)), max_size=12))
def test_listed_bytes_add_up_to_the_client_s_use(allocs):
    pod = ready_pod(limit=10**9)
    for conn in range(1, 6):
        pod.on_hook_connect(conn, 0.0)
        ask(pod, conn, 1000 + conn % 3, -1)  # five connections of three pids
    for conn, size in allocs:
        alloc(pod, conn, size)
    procs = pod.processes()
    assert sum(p.bytes for p in procs) == pod.used
    assert [p.pid for p in procs] == sorted({p.pid for p in procs})
