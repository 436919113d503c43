"""The agent as the kubelet sees it: a fake kubelet speaking the real Registration, DevicePlugin
and PodResources services over Unix sockets drives it; the agent runs real gem-schd / gem-pmgr."""

from __future__ import annotations

import re
from pathlib import Path

import grpc
import pytest

from gemini.core.config import parse_text
from gemini.k8s.agent import CONTAINER_DIR, HOOK_IN_CONTAINER
from gemini.k8s.api import deviceplugin_pb2 as dp
from gemini.k8s.units import MEMORY_RESOURCE, SHARE_RESOURCE, Gpu, Kind
from tests.k8s.conftest import Node
from tests.k8s.fake_kubelet import AdmissionError

SHARE, MEMORY = SHARE_RESOURCE, MEMORY_RESOURCE
TWO_GPUS = [Gpu("0", "GPU-aaaa", 64, 0), Gpu("1", "GPU-bbbb", 32, 1)]


def ready(kubelet) -> None:
    kubelet.wait_registered(2)
    kubelet.devices(SHARE)
    kubelet.devices(MEMORY)


def test_registers_both_resources_and_streams_their_units(kubelet, start_agent):
    start_agent(Node(list(TWO_GPUS)))
    regs = {r.resource_name: r for r in kubelet.wait_registered(2)}
    assert set(regs) == {SHARE, MEMORY}
    assert all(r.version == "v1beta1" for r in regs.values())
    assert regs[SHARE].endpoint == "gemini-gpu-share.sock"
    assert regs[SHARE].options.pre_start_required
    assert not regs[MEMORY].options.pre_start_required
    assert all(r.options.get_preferred_allocation_available for r in regs.values())
    shares = kubelet.devices(SHARE)
    assert len(shares) == 200 and set(shares.values()) == {"Healthy"}
    assert {"g0-s0", "g0-s99", "g1-s0", "g1-s99"} <= set(shares)
    memory = kubelet.devices(MEMORY)
    assert len(memory) == 64 + 32 and "g1-m31" in memory and "g1-m32" not in memory


def test_preferred_allocation_keeps_a_container_on_one_gpu(kubelet, start_agent):
    start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    stub = kubelet.stub(SHARE)

    def prefer(available, size, must=()):
        reply = stub.GetPreferredAllocation(dp.PreferredAllocationRequest(container_requests=[
            dp.ContainerPreferredAllocationRequest(available_deviceIDs=available,
                                                   must_include_deviceIDs=list(must),
                                                   allocation_size=size)]))
        return list(reply.container_responses[0].deviceIDs)

    few_on_0 = [f"g0-s{k}" for k in range(10)]
    all_on_1 = [f"g1-s{k}" for k in range(100)]
    assert prefer(few_on_0 + all_on_1, 30) == all_on_1[:30]  # GPU 0 has only 10 free
    assert prefer(few_on_0 + all_on_1, 5) == few_on_0[:5]  # best fit: the fuller GPU
    assert prefer(few_on_0 + all_on_1, 3, must=["g1-s7"]) == ["g1-s7", "g1-s0", "g1-s1"]


def test_memory_units_follow_the_share_units_gpu(kubelet, start_agent, api):
    start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    # The share goes to GPU 0 (a tie, lowest index); best fit alone would take the memory from
    # GPU 1 (fewer free units): the agent's hint keeps it with the share.
    api.add_pod("ns", "p", {"c": {SHARE: 100, MEMORY: 8}})
    got = kubelet.admit("ns", "p", {"c": {SHARE: 100, MEMORY: 8}})["c"]
    assert {u.split("-")[0] for u in got.units[SHARE]} == {"g0"}
    assert {u.split("-")[0] for u in got.units[MEMORY]} == {"g0"}


def test_no_hint_outlives_the_container_whose_pair_it_kept_together(kubelet, start_agent, api):
    agent = start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    api.add_pod("ns", "p", {"c": {SHARE: 10, MEMORY: 8}})
    kubelet.admit("ns", "p", {"c": {SHARE: 10, MEMORY: 8}})
    assert agent.agent.hint(Kind.SHARE) is None and agent.agent.hint(Kind.MEMORY) is None


def test_a_hint_left_by_a_container_without_its_second_resource_goes_stale(
    kubelet, start_agent, api
):
    """A share-only container leaves its hint (no memory came); the next container, memory
    first, must still be steered: its first allocation is not taken for the old one's second."""
    agent = start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    clock = [1000.0]
    agent.agent._now = lambda: clock[0]
    api.add_pod("ns", "p1", {"c": {SHARE: 10}})
    with pytest.raises(AdmissionError):
        kubelet.admit("ns", "p1", {"c": {SHARE: 10}})  # (refused: no memory asked)
    assert agent.agent.hint(Kind.MEMORY) == "0"
    clock[0] += 60.0  # the next container comes a minute later
    assert agent.agent.hint(Kind.MEMORY) is None
    api.add_pod("ns", "p2", {"c": {MEMORY: 8, SHARE: 10}})
    got = kubelet.admit("ns", "p2", {"c": {MEMORY: 8, SHARE: 10}})["c"]
    assert {u.split("-")[0] for u in got.units[SHARE]} == {
        u.split("-")[0] for u in got.units[MEMORY]}


def test_allocate_answers_what_the_container_needs(kubelet, start_agent, short_tmp):
    for node in ("nvidiactl", "nvidia1"):  # nvidia-uvm absent: not offered
        (short_tmp / "dev").mkdir(exist_ok=True)
        (short_tmp / "dev" / node).write_text("")
    start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    ids = [f"g1-s{k}" for k in range(30)]
    reply = kubelet.stub(SHARE).Allocate(dp.AllocateRequest(
        container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)]))
    (c,) = reply.container_responses
    name = c.envs["POD_NAME"]
    assert name.startswith("k8s-g1-")
    assert dict(c.envs) == {
        "GEMINI_CLIENT": name,  # (the hook's first choice: a pod's own env may set POD_NAME)
        "POD_NAME": name,
        "POD_MANAGER_PORT": f"unix:{CONTAINER_DIR}/{name}@gpu1.sock",
        "GEMINI_SECRET_FILE": f"{CONTAINER_DIR}/secret",
        "LD_PRELOAD": HOOK_IN_CONTAINER,
        "NVIDIA_VISIBLE_DEVICES": "GPU-bbbb",
    }
    client_dir = short_tmp / "state" / "clients" / name
    mounts = {(m.container_path, m.host_path, m.read_only) for m in c.mounts}
    assert mounts == {(CONTAINER_DIR, str(client_dir), True),
                      (HOOK_IN_CONTAINER, str(short_tmp / "state/lib/libgemhook.so.1"), True)}
    assert [(d.container_path, d.host_path, d.permissions) for d in c.devices] == [
        ("/dev/nvidiactl", "/dev/nvidiactl", "rw"), ("/dev/nvidia1", "/dev/nvidia1", "rw")]
    # what the mounts show: the secret (any uid may read it: the directory is the container's
    # alone), the hook, and ld.so.preload naming the hook where it is mounted
    assert (client_dir / "secret").read_text() == (short_tmp / "state/secret").read_text()
    assert (client_dir / "secret").stat().st_mode & 0o777 == 0o644
    assert (short_tmp / "state/lib/libgemhook.so.1").read_bytes() == b"not a library"
    assert (short_tmp / "state/lib/ld.so.preload").read_text() == HOOK_IN_CONTAINER + "\n"
    # memory units get nothing of their own
    reply = kubelet.stub(MEMORY).Allocate(dp.AllocateRequest(
        container_requests=[dp.ContainerAllocateRequest(devices_ids=["g1-m0", "g1-m1"])]))
    assert reply.container_responses[0] == dp.ContainerAllocateResponse()


@pytest.mark.parametrize(("resource", "ids", "message"), [
    (SHARE, ["g0-s1", "g1-s2", "g1-s3"], "3 units span several GPUs (GPU 0: 1, GPU 1: 2)"),
    (MEMORY, ["g0-m1", "g1-m2"], "2 units span several GPUs"),
    (SHARE, ["g0-m1"], "'g0-m1' is a gemini.io/gpu-memory unit, not a gemini.io/gpu-share one"),
    (SHARE, ["gpu0"], "'gpu0' is not a gemini unit ID"),
    (SHARE, ["g7-s1"], "GPU 7 of gemini.io/gpu-share units"),
])
def test_allocate_refuses_what_it_cannot_serve(kubelet, start_agent, resource, ids, message):
    start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    with pytest.raises(grpc.RpcError) as err:
        kubelet.stub(resource).Allocate(dp.AllocateRequest(
            container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)]))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert message in err.value.details()


def test_a_gpu_that_disappears_is_reported_unhealthy(kubelet, start_agent):
    node = Node(list(TWO_GPUS))
    agent = start_agent(node)
    ready(kubelet)
    node.gpus = [TWO_GPUS[0]]
    agent.call(agent.agent.sync)
    shares = kubelet.devices(SHARE, lambda d: d["g1-s0"] == "Unhealthy")
    assert {h for i, h in shares.items() if i.startswith("g1-")} == {"Unhealthy"}
    assert {h for i, h in shares.items() if i.startswith("g0-")} == {"Healthy"}
    memory = kubelet.devices(MEMORY, lambda d: d["g1-m0"] == "Unhealthy")
    assert {h for i, h in memory.items() if i.startswith("g1-")} == {"Unhealthy"}
    node.gpus = list(TWO_GPUS)
    agent.call(agent.agent.sync)
    kubelet.devices(SHARE, lambda d: set(d.values()) == {"Healthy"})


def test_a_restarted_kubelet_gets_the_plugins_registered_again(kubelet, start_agent):
    start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    kubelet.restart()  # new kubelet.sock, the plugins' sockets deleted
    regs = kubelet.wait_registered(4)
    assert {r.resource_name for r in regs[2:]} == {SHARE, MEMORY}
    assert len(kubelet.devices(SHARE)) == 200  # served again on new sockets
    kubelet.restart()
    kubelet.wait_registered(6)


def test_prestart_makes_the_client_and_a_gone_pod_removes_it(kubelet, start_agent, api,
                                                             short_tmp):
    agent = start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    api.add_pod("team", "train", {"main": {SHARE: 30, MEMORY: 16}},
                annotations={"gemini.io/gpu-limit": "0.6"})
    got = kubelet.admit("team", "train", {"main": {SHARE: 30, MEMORY: 16}})["main"]
    name = got.envs["POD_NAME"]
    config = parse_text((short_tmp / "state/resource-config.txt").read_text())
    (spec,) = config.clients
    assert (spec.name, spec.request, spec.limit, spec.gpu_mem) == (name, 0.3, 0.6, 16 << 20)
    assert "# team/train/main" in (short_tmp / "state/resource-config.txt").read_text()
    socket = short_tmp / "state/clients" / name / got.envs["POD_MANAGER_PORT"].rsplit("/", 1)[1]
    assert socket.is_socket()
    assert socket.stat().st_mode & 0o777 == 0o660
    assert agent.agent.daemons.manager_alive(name)
    # its lines go to the agent's daemon log (here a file: not the terminal pytest runs in)
    lines = (short_tmp / "daemons.log").read_text().splitlines()
    assert any(f"[{name}]" in line and "listening on" in line for line in lines), lines

    kubelet.remove_pod("team", "train")
    agent.call(agent.agent.sync)  # missing from one list: could still be in flight
    assert agent.agent.daemons.manager_alive(name)
    agent.call(agent.agent.sync)
    assert not agent.agent.daemons.manager_alive(name)
    assert parse_text((short_tmp / "state/resource-config.txt").read_text()).clients == ()
    assert not (short_tmp / "state/clients" / name).exists()
    # the units are free again: a new pod on them gets a new client of its own
    api.add_pod("team", "train2", {"main": {SHARE: 100, MEMORY: 16}})
    again = kubelet.admit("team", "train2", {"main": {SHARE: 100, MEMORY: 16}})["main"]
    assert again.envs["POD_NAME"] != name


@pytest.mark.parametrize(("asks", "annotations", "message"), [
    ({SHARE: 30}, {}, "asks for gemini.io/gpu-share without gemini.io/gpu-memory"),
    ({SHARE: 30, MEMORY: 4}, {"gemini.io/gpu-limit": "0.2"},
     "gemini.io/gpu-limit 0.2 is below the guaranteed share 0.30"),
])
def test_prestart_refuses_with_a_message_for_the_user(kubelet, start_agent, api, asks,
                                                      annotations, message):
    start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    api.add_pod("ns", "bad", {"c": asks}, annotations=annotations)
    with pytest.raises(AdmissionError, match=re.escape(message)):
        kubelet.admit("ns", "bad", {"c": asks})


def test_memory_on_another_gpu_than_the_share_is_refused(kubelet, start_agent, api):
    start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    # GPU 0's share is taken (by a container the agent does not know), so the share comes
    # from GPU 1, whose 32 memory units cannot hold 40: they come from GPU 0.
    kubelet.allocated[("other", "x", "y")] = {SHARE: [f"g0-s{k}" for k in range(100)]}
    api.add_pod("ns", "p", {"c": {SHARE: 100, MEMORY: 40}})
    with pytest.raises(AdmissionError, match=r"memory units are on GPU 0 but its "
                                             r"gemini\.io/gpu-share units on GPU 1"):
        kubelet.admit("ns", "p", {"c": {SHARE: 100, MEMORY: 40}})


def test_a_restarted_agent_runs_its_clients_again(kubelet, start_agent, api, short_tmp):
    first = start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    api.add_pod("ns", "p", {"c": {SHARE: 50, MEMORY: 8}})
    name = kubelet.admit("ns", "p", {"c": {SHARE: 50, MEMORY: 8}})["c"].envs["POD_NAME"]
    first.close()
    assert not first.agent.daemons.manager_alive(name)
    second = start_agent(Node(list(TWO_GPUS)))
    kubelet.wait_registered(4)
    assert second.agent.daemons.manager_alive(name)
    (spec,) = parse_text((short_tmp / "state/resource-config.txt").read_text()).clients
    assert (spec.name, spec.request) == (name, 0.5)


def test_a_client_directory_left_without_its_record_is_removed_at_start(
    kubelet, start_agent, short_tmp
):
    orphan = short_tmp / "state/clients/k8s-g0-0badf00d"
    orphan.mkdir(parents=True)
    (orphan / "secret").write_text("0" * 32)
    agent = start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    assert not orphan.exists()
    assert agent.agent.allocations == {}


def test_a_pod_running_as_another_uid_may_use_its_socket(kubelet, start_agent, api, short_tmp):
    agent = start_agent(Node(list(TWO_GPUS)))
    ready(kubelet)
    pod = api.add_pod("ns", "p", {"c": {SHARE: 10, MEMORY: 4}})
    pod["spec"]["securityContext"] = {"runAsUser": 1000}
    name = kubelet.admit("ns", "p", {"c": {SHARE: 10, MEMORY: 4}})["c"].envs["POD_NAME"]
    pid = agent.agent.daemons.managers[name].proc.pid
    argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    assert argv[argv.index(b"--allow-uid") + 1] == b"1000"
    (socket,) = (short_tmp / "state/clients" / name).glob("*.sock")
    assert socket.stat().st_mode & 0o777 == 0o666  # the uid check is the pod manager's
