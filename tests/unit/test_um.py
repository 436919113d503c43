"""Unified-memory mode, scheduler side: flags, the oversubscription bound, the UM minimum quota."""

import pytest

from gemini.core.actions import Reply
from gemini.core.config import ClientSpec, ConfigError, ResourceConfig, parse_text
from gemini.core.podmanager import PodCore
from gemini.core.scheduler import SchedulerCore, Timing
from gemini.core.um import (
    UmPolicy,
    check_oversubscription,
    mem_flags,
    oversubscription_problem,
    um_bytes,
    um_quota,
)
from gemini.core.wire import (
    MEM_FLAG_EVICT_ON_RELEASE,
    MEM_FLAG_UNIFIED_MEMORY,
    NOTIFY_ID,
    Request,
    RequestType,
    Response,
    Status,
)
from tests.unit.sim import GpuClock, Sim

GiB = 1 << 30
CONFIG = parse_text("3\na 0.3 1 30GiB um\nb 0.3 1 30GiB um\nc 0.4 1 40GiB\n")


def test_flags_follow_the_config_and_the_scheduler_defaults():
    a, _, c = CONFIG.clients
    assert mem_flags(a, UmPolicy()) == MEM_FLAG_UNIFIED_MEMORY
    assert mem_flags(c, UmPolicy()) == 0
    assert mem_flags(c, UmPolicy(all_clients=True)) == MEM_FLAG_UNIFIED_MEMORY
    evict = UmPolicy(evict_on_release=True)
    assert mem_flags(a, evict) == MEM_FLAG_UNIFIED_MEMORY | MEM_FLAG_EVICT_ON_RELEASE
    assert mem_flags(c, evict) == 0  # eviction only concerns UM clients


def test_oversubscription_bound_counts_only_um_clients():
    assert um_bytes(CONFIG, UmPolicy()) == 60 * GiB
    assert oversubscription_problem(CONFIG, UmPolicy()) is None  # card unknown: no check
    assert oversubscription_problem(CONFIG, UmPolicy(device_memory=60 * GiB)) is None
    problem = oversubscription_problem(CONFIG, UmPolicy(device_memory=59 * GiB))
    assert problem is not None and "a, b" in problem and "--oversubscription" in problem
    assert oversubscription_problem(CONFIG, UmPolicy(device_memory=40 * GiB,
                                                     oversubscription=1.5)) is None
    everyone = UmPolicy(all_clients=True, device_memory=80 * GiB, oversubscription=1.2)
    assert um_bytes(CONFIG, everyone) == 100 * GiB
    assert oversubscription_problem(CONFIG, everyone) is not None
    with pytest.raises(ConfigError, match=r"^cfg.txt: unified-memory clients"):
        check_oversubscription(CONFIG, UmPolicy(device_memory=GiB), "cfg.txt")


@pytest.mark.parametrize("bad", [dict(oversubscription=0.0), dict(device_memory=0),
                                 dict(min_quota_s=-1.0)])
def test_policy_rejects_nonsense(bad):
    with pytest.raises(ValueError):
        UmPolicy(**bad)


def test_um_quota_is_at_least_the_um_minimum():
    a, _, c = CONFIG.clients
    policy = UmPolicy(min_quota_s=1.0)
    assert um_quota(0.25, a, policy, 10.0) == 1.0
    assert um_quota(2.0, a, policy, 10.0) == 2.0
    assert um_quota(0.25, c, policy, 10.0) == 0.25


def test_a_capped_um_client_is_granted_no_more_than_its_window_allows():
    """At a cap of 0.05 a 1 s UM minimum is twice what a 10 s window allows (0.5 s): the
    simulator's windows read 0.100."""
    small = parse_text("1\na 0.05 0.05 1GiB um\n")
    [spec] = small.clients
    assert um_quota(0.1, spec, UmPolicy(min_quota_s=1.0), 10.0) == pytest.approx(0.5)
    core = SchedulerCore(small, Timing(0.25, 0.1, 10.0), 0.0, UmPolicy(min_quota_s=1.0))
    assert grants(core.on_request(1, quota_req("a", 1), 0.0)) == [pytest.approx(500.0)]


@pytest.mark.parametrize("cap", [0.12, 0.25, 0.35])
def test_a_capped_um_client_holds_its_cap_over_every_long_window(cap):
    """Its 1 s grants went wherever its pace did: a 0.12 cap's 10 s windows read up to 0.200
    (its minute 0.133), a 0.25 cap's 0.300, a 0.35 cap's 0.400.  Now each grant is a whole
    part of what the window allows (0.6, 0.833, 0.875 s), granted where it fits."""
    config = ResourceConfig((ClientSpec("a", cap, cap, GiB, True),))
    sim = Sim([("a", cap, cap)])
    sim.core = SchedulerCore(config, Timing(), 0.0, UmPolicy(min_quota_s=1.0))
    sim.start("a")
    sim.run_until(60.0)
    worst = max(sim.share("a", s / 10, s / 10 + 10.0) for s in range(500))
    assert worst <= cap + 0.01
    assert sim.share("a", 0.0, 60.0) >= cap - 0.01
    assert all(end - start >= 0.5 for start, end in sim.clients["a"].busy)  # (for migration)


def quota_req(name: str, req_id: int) -> Request:
    return Request(name, req_id, RequestType.QUOTA, (0.0, 10.0))


def grants(actions) -> list[float]:
    return [a.response.values[0] for a in actions
            if isinstance(a, Reply) and a.type is RequestType.QUOTA]


def test_scheduler_grants_um_clients_the_um_minimum_and_tells_their_flags():
    policy = UmPolicy(evict_on_release=True, min_quota_s=2.0)
    core = SchedulerCore(CONFIG, Timing(0.25, 0.1, 10.0), 0.0, policy)
    [limit] = core.on_request(1, Request("a", 1, RequestType.MEM_LIMIT), 0.0)
    assert isinstance(limit, Reply)
    both = MEM_FLAG_UNIFIED_MEMORY | MEM_FLAG_EVICT_ON_RELEASE
    assert limit.response.values == (0, 30 * GiB, both)
    [plain] = core.on_request(3, Request("c", 1, RequestType.MEM_LIMIT), 0.0)
    assert isinstance(plain, Reply) and plain.response.values == (0, 40 * GiB, 0)
    assert grants(core.on_request(1, quota_req("a", 2), 0.0)) == [2000.0]
    assert grants(core.on_request(3, quota_req("c", 2), 0.0)) == []
    [plain_grant] = grants(core.on_deadline(2.0))
    assert plain_grant <= 250.0  # the plain client keeps its adaptive quota
    assert core.snapshot(2.0)["clients"][0]["unified_memory"] is True  # type: ignore[index]


def test_turning_um_on_is_pushed_to_the_pod_managers():
    core = SchedulerCore(CONFIG, Timing(), 0.0)
    core.on_request(3, Request("c", 1, RequestType.MEM_LIMIT), 0.0)
    spec_c = CONFIG.clients[2]
    new = ResourceConfig((*CONFIG.clients[:2], ClientSpec(spec_c.name, spec_c.request,
                                                          spec_c.limit, spec_c.gpu_mem, True)))
    pushes = [a for a in core.on_config(new, 0.1)
              if isinstance(a, Reply) and a.response.req_id == NOTIFY_ID]
    assert [(p.conn, p.response.values) for p in pushes] == [
        (3, (0, 40 * GiB, MEM_FLAG_UNIFIED_MEMORY))]


def test_pod_manager_forwards_the_flags_to_its_hooks():
    pod = PodCore("a", 0.0)
    pod.on_scheduler_connected(0.0)
    pod.on_hook_connect(7, 0.0)
    flags = MEM_FLAG_UNIFIED_MEMORY | MEM_FLAG_EVICT_ON_RELEASE
    out = pod.on_upstream_response(Response(NOTIFY_ID, Status.OK, (0, 1000, flags)), 0.0)
    assert any("unified memory, evicted on release" in getattr(a, "message", "") for a in out)
    [reply] = [a for a in pod.on_hook_request(7, Request("a", 3, RequestType.MEM_LIMIT), 0.1)
               if isinstance(a, Reply)]
    assert reply.response.values == (0, 1000, flags)
    pod.on_upstream_response(Response(NOTIFY_ID, Status.OK, (0, 1000, 0)), 0.2)
    [reply] = [a for a in pod.on_hook_request(7, Request("a", 4, RequestType.MEM_LIMIT), 0.3)
               if isinstance(a, Reply)]
    assert reply.response.values == (0, 1000, 0)


def um_capped(cap: float) -> ResourceConfig:
    return ResourceConfig((ClientSpec("a", cap, cap, GiB, True),))


def test_a_capped_um_clients_grants_fit_its_window_as_they_are_charged():
    """With the GPU's clock read, each granted second is charged at the client's speed (over
    1 after a rest): grants cut from the window by length alone never fitted k of them, and
    a 0.12 cap got one 0.6 s grant in 9.5 s, 0.061 of its work."""
    sim = Sim([("a", 0.12, 0.12)], clock=GpuClock(), launch_s=0.0002)
    sim.core = SchedulerCore(um_capped(0.12), Timing(), 0.0, UmPolicy(min_quota_s=1.0))
    sim.start("a")
    sim.run_until(60.0)
    sim.clock.advance(60.0, sim.running)
    assert sim.clock.work("a", 30.0, 60.0) / 30.0 >= 0.10
    assert max(sim.clock.work("a", s, s + 10.0) / 10.0 for s in range(50)) <= 0.12 + 0.01


def test_a_lowered_cap_holds_a_um_client_over_every_long_window_after_it():
    """(Its windows count from the edit, but no longer than the long window: they grew
    without end, and a 0.5 cap lowered to 0.25 read 0.333 over a 10 s window after it.)"""
    sim = Sim([("a", 0.5, 0.5)])
    sim.core = SchedulerCore(um_capped(0.5), Timing(), 0.0, UmPolicy(min_quota_s=1.0))
    sim.start("a")
    sim.run_until(30.0)
    sim.configure(um_capped(0.25))
    sim.run_until(90.0)
    # (from 31 s: the grant that ran at the edit, a second long, was the old cap's)
    assert max(sim.share("a", s / 10, s / 10 + 10.0) for s in range(310, 800)) <= 0.25 + 0.01


@pytest.mark.parametrize("um", [(0, 1, 2), (0,), (-1,)], ids=["all UM", "first UM", "last UM"])
@pytest.mark.parametrize("shares", [(0.3, 0.7), (0.7, 0.3), (0.2, 0.3, 0.5)],
                         ids=["pair", "pair the other way", "trio"])
def test_um_clients_beside_others_get_their_shares(shares, um):
    """A UM grant is 1 s at least, against turns of 100 ms: the credit a waiting client is owed
    must reach a whole one.  Bounded at two turns, each UM grant was mostly forgiven and turns
    went round as if all asked alike: 0.433/0.567 for an all-UM 0.3/0.7 pair, 0.316 for an
    all-UM trio's 0.2 client, and a UM 0.3 beside a plain 0.7 took 0.664 of the GPU."""
    names = "abc"[:len(shares)]
    um_names = {names[i] for i in um if -len(names) <= i < len(names)}
    config = ResourceConfig(tuple(ClientSpec(n, s, 1.0, GiB, n in um_names)
                                  for n, s in zip(names, shares, strict=True)))
    sim = Sim([(n, s, 1.0) for n, s in zip(names, shares, strict=True)], burst_ms=50.0)
    sim.core = SchedulerCore(config, Timing(0.3, 0.02, 10.0, max_quota_s=1.2), 0.0,
                             UmPolicy(min_quota_s=1.0))
    for n in names:
        sim.start(n)
    sim.run_until(60.0)
    for n, s in zip(names, shares, strict=True):
        assert sim.share(n, 0.0, 60.0) == pytest.approx(s, abs=0.02), n
