"""The scheduler's partition groups (issue 13) on a virtual clock: one token per partition, the
time-sliced group as before, MPS going down and up, clients moving between groups."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemini.core import config as cfg
from gemini.core.actions import Log, Reply
from gemini.core.config import ClientSpec, ResourceConfig
from gemini.core.partitions import TIME_SLICED, PartitionRouter, folded, split
from gemini.core.scheduler import SchedulerCore, Timing
from gemini.core.wire import (
    CUT_ID,
    NOTIFY_ID,
    REPORT_APPLIES_CUTS,
    Request,
    RequestType,
    Status,
    decode_request,
    encode_request,
)
from tests.unit.sim import Sim

LAUNCHER = Timing(0.300, 0.020, 10.0)


def sim_of(text: str, spatial: bool, burst_ms: float = 50.0) -> Sim:
    """Saturating clients of a text config, scheduled by a PartitionRouter."""
    config = cfg.parse_text(text)
    sim = Sim([(n, 1.0, 1.0) for n in config.names], timing=LAUNCHER, burst_ms=burst_ms)
    sim.core = PartitionRouter(config, LAUNCHER, 0.0, spatial=spatial)  # type: ignore[assignment]
    return sim


def run(text: str, spatial: bool, seconds: float = 30.0) -> tuple[dict[str, float], Sim]:
    sim = sim_of(text, spatial)
    for name in sim.clients:
        sim.start(name)
    sim.run_until(seconds)
    return {n: sim.share(n, 0.0, seconds) for n in sim.clients}, sim


def overlap(sim: Sim, a: str, b: str) -> float:
    """Seconds during which both clients held a token."""
    return sum(max(0.0, min(e1, e2) - max(s1, s2))
               for s1, e1 in sim.clients[a].busy for s2, e2 in sim.clients[b].busy)


def quota(name: str, req_id: int, burst_ms: float = 10.0) -> Request:
    return Request(name, req_id, RequestType.QUOTA, (0.0, burst_ms))


def grants(actions: list) -> list[Reply]:
    return [a for a in actions if isinstance(a, Reply) and a.type is RequestType.QUOTA]


# ---- groups --------------------------------------------------------------------------------------


def test_groups_spatial_and_folded() -> None:
    config = cfg.parse_text("3\na 0.5 1 1 sm=30@p\nb 0.5 0.8 1 sm=30@p\nc 0.2 0.4 1\n")
    spatial = split(config, spatial=True)
    assert {k: [c.name for c in v.clients] for k, v in spatial.items()} == {
        "": ["c"], "p": ["a", "b"]}
    assert spatial["p"].clients == config.clients[:2]  # shares of the partition, unchanged
    flat = split(config, spatial=False)
    assert list(flat) == [""]
    a, b, c = flat[""].clients
    assert (a.request, a.limit) == (0.5 * 0.3, 1 * 0.3)
    assert (round(b.request, 9), round(b.limit, 9)) == (0.15, 0.24)
    assert c == config.clients[2] == folded(c)


def test_partitions_hold_tokens_side_by_side() -> None:
    shares, sim = run("2\na 1 1 1GiB sm=30\nb 1 1 1GiB sm=70\n", spatial=True)
    assert min(shares.values()) > 0.97, shares  # each runs all the time, in its own partition
    assert overlap(sim, "a", "b") > 0.95 * 30


def test_clients_of_one_partition_share_its_token() -> None:
    text = "3\na 0.3 1 1GiB sm=60@big\nb 0.7 1 1GiB sm=60@big\nc 1 1 1GiB sm=40\n"
    shares, sim = run(text, spatial=True)
    assert abs(shares["a"] - 0.3) < 0.01 and abs(shares["b"] - 0.7) < 0.01, shares
    assert shares["c"] > 0.97
    assert overlap(sim, "a", "b") < 0.01  # one token inside the partition


def test_clients_without_a_partition_are_time_sliced_as_before() -> None:
    text = "3\na 0.3 1 1GiB\nb 0.7 1 1GiB\nc 1 1 1GiB sm=50\n"
    shares, sim = run(text, spatial=True)
    assert abs(shares["a"] - 0.3) < 0.01 and abs(shares["b"] - 0.7) < 0.01, shares
    assert shares["c"] > 0.97
    assert overlap(sim, "a", "b") < 0.01


def test_without_mps_partitions_are_time_sliced_at_their_size() -> None:
    shares, sim = run("2\na 1 1 1GiB sm=30\nb 1 1 1GiB sm=70\n", spatial=False, seconds=20.0)
    assert abs(shares["a"] - 0.3) < 0.015 and abs(shares["b"] - 0.7) < 0.015, shares
    assert overlap(sim, "a", "b") < 0.01


def test_mps_going_down_and_up_regroups_at_once() -> None:
    sim = sim_of("2\na 1 1 1GiB sm=50\nb 1 1 1GiB sm=50\n", spatial=True)
    sim.start("a")
    sim.start("b")
    sim.run_until(10.0)
    assert overlap(sim, "a", "b") > 9.5
    router: PartitionRouter = sim.core  # type: ignore[assignment]
    sim._handle(router.on_mode(False, sim.now))
    sim.run_until(20.0)
    before = overlap(sim, "a", "b")
    sim.run_until(30.0)
    assert overlap(sim, "a", "b") - before < 0.01  # time-sliced: no two tokens at once
    assert abs(sim.share("a", 20.0, 30.0) - 0.5) < 0.02
    sim._handle(router.on_mode(True, sim.now))
    sim.run_until(40.0)
    assert sim.share("a", 31.0, 40.0) > 0.97 and sim.share("b", 31.0, 40.0) > 0.97
    # nobody was refused along the way
    assert all(r.response.status is Status.OK for r in sim.replies)


# ---- the same as SchedulerCore without partitions ------------------------------------------------

EVENTS = st.lists(st.tuples(
    st.sampled_from(["quota", "report", "mem", "disconnect", "deadline", "config", "unknown"]),
    st.sampled_from(["a", "b", "c"]),
    st.integers(1, 3),  # connection
    st.floats(0.0, 0.2),  # time step
    st.floats(0.0, 80.0),  # burst ms / overuse ms
), max_size=60)


@settings(max_examples=60, deadline=None)
@given(EVENTS)
def test_without_partitions_the_router_is_the_core(events: list) -> None:
    config = cfg.parse_text("2\na 0.3 1 1GiB\nb 0.2 0.6 2GiB um\n")
    edited = cfg.parse_text("2\na 0.5 1 1GiB\nc 0.2 0.6 3GiB\n")
    core = SchedulerCore(config, LAUNCHER, 0.0)
    router = PartitionRouter(config, LAUNCHER, 0.0)
    now, req_id = 0.0, 0
    for kind, name, conn, step, ms in events:
        now += step
        req_id += 1
        if kind == "deadline":
            deadline = core.next_deadline()
            assert deadline == router.next_deadline()
            if deadline is None:
                continue
            now = max(now, deadline)
            pair = core.on_deadline(now), router.on_deadline(now)
        elif kind == "disconnect":
            pair = core.on_disconnect(conn, now), router.on_disconnect(conn, now)
        elif kind == "config":
            config = edited if config != edited else cfg.parse_text("1\na 1 1 1\n")
            pair = core.on_config(config, now), router.on_config(config, now)
        else:
            req = {
                "quota": Request(name, req_id, RequestType.QUOTA, (ms, ms)),
                "report": Request(name, req_id, RequestType.REPORT, (int(ms), 1, 0)),
                "mem": Request(name, req_id, RequestType.MEM_LIMIT, ()),
                "unknown": Request("zz", req_id, RequestType.QUOTA, (0.0, ms)),
            }[kind]
            pair = core.on_request(conn, req, now), router.on_request(conn, req, now)
        assert pair[0] == pair[1]
    snap, routed = core.snapshot(now), router.snapshot(now)
    assert routed["clients"] == [{**c, "mode": "time-sliced", "partition": None, "sm": None}
                                 for c in snap["clients"]]  # type: ignore[union-attr]
    assert {k: routed[k] for k in snap} | {"clients": snap["clients"]} == snap


# ---- edits ---------------------------------------------------------------------------------------


def test_a_client_moved_to_another_partition_takes_its_queued_request_along() -> None:
    router = PartitionRouter(cfg.parse_text("2\na 1 1 1GiB sm=50@p\nb 1 1 1GiB sm=50@p\n"),
                             LAUNCHER, 0.0, spatial=True)
    assert grants(router.on_request(1, quota("a", 1), 0.0))[0].response.status is Status.OK
    assert grants(router.on_request(2, quota("b", 1), 0.01)) == []  # waits for a's token
    moved = cfg.parse_text("2\na 1 1 1GiB sm=50@p\nb 1 1 2GiB sm=50@q\n")
    out = router.on_config(moved, 0.02)
    (granted,) = grants(out)
    assert (granted.conn, granted.response.req_id, granted.response.status) == (2, 1, Status.OK)
    # its memory limit changed with the move: its pod manager hears of it
    pushes = [a for a in out if isinstance(a, Reply) and a.type is RequestType.MEM_LIMIT]
    assert [(p.conn, p.response.req_id, p.response.values[1]) for p in pushes] == [
        (2, NOTIFY_ID, 2 << 30)]
    lines = [a.message for a in out if isinstance(a, Log) and a.client == "b"]
    assert "now in partition q (50% of the SMs)" in lines
    assert not any("removed" in line for line in lines)
    snap = router.snapshot(0.03)
    assert [p["name"] for p in snap["partitions"]] == ["p", "q"]  # type: ignore[index]
    assert {p["name"]: p["holder"] for p in snap["partitions"]} == {"p": "a", "q": "b"}  # type: ignore[index]


def test_a_client_moved_while_it_holds_its_old_partitions_token_hands_it_on_when_it_asks() -> None:
    """Its next request goes to the new partition: the old one kept the grant to its end, and
    its other clients idled (b waited 88 ms of a 100 ms grant here)."""
    r = PartitionRouter(cfg.parse_text("2\na 0.5 1 1GiB sm=50@p\nb 0.5 1 1GiB sm=50@p\n"),
                        Timing(), 0.0, spatial=True)
    [g] = grants(r.on_request(1, quota("a", 1, burst_ms=1000.0), 0.0))
    assert g.conn == 1 and g.response.values[0] >= 50.0
    assert not grants(r.on_request(2, quota("b", 1, burst_ms=1000.0), 0.001))  # waits behind a
    r.on_config(cfg.parse_text("2\na 0.5 1 1GiB sm=50@q\nb 0.5 1 1GiB sm=50@p\n"), 0.010)
    granted = grants(r.on_request(1, quota("a", 2, burst_ms=1000.0), 0.012))
    assert sorted(g.conn for g in granted) == [1, 2]  # a in q, and b in p at once
    holder = r.cores["p"].holder
    assert holder is not None and holder.interval.name == "b" and holder.interval.start == 0.012
    # Removed, asking, then back in another partition: its old group still has it removed.
    r.on_config(cfg.parse_text("1\nb 0.5 1 1GiB sm=50@p\n"), 0.02)
    r.on_request(1, quota("a", 3), 0.03)  # (refused)
    assert r.snapshot(0.04)["removed_asking"] == ["a"]
    r.on_config(cfg.parse_text("2\na 0.5 1 1GiB sm=50@r\nb 0.5 1 1GiB sm=50@p\n"), 0.05)
    assert r.snapshot(0.06)["removed_asking"] == []


def test_a_moved_client_keeps_its_reported_memory_and_processes() -> None:
    """... and how long its grants take to reach it (gem-schd --hand-over-at-arrival)."""
    router = PartitionRouter(cfg.parse_text("1\na 1 1 1GiB sm=50@p\n"), LAUNCHER, 0.0,
                             spatial=True)
    router.on_request(1, Request("a", 1, RequestType.REPORT, (1234, 2, 1, 0.5)), 0.0)
    out = router.on_config(cfg.parse_text("1\na 1 1 1GiB\n"), 0.1)
    assert not [a for a in out if isinstance(a, Reply)]  # nothing to tell the pod manager
    (client,) = router.snapshot(0.2)["clients"]  # type: ignore[misc]
    assert (client["mem_used"], client["processes"], client["waiting_processes"]) == (1234, 2, 1)
    assert router.cores[TIME_SLICED].clients["a"].delivery_s == pytest.approx(0.0005)
    assert (client["mode"], client["partition"], client["connected"]) == ("time-sliced", None,
                                                                          True)


def test_a_cap_changed_in_one_partition_holds_back_every_groups_calibrations() -> None:
    """One card, one power limiter: its clock swings for all of them (CAPS_SETTLE_S)."""
    router = PartitionRouter(cfg.parse_text("2\na 0.3 0.3 1GiB sm=50@p\nb 0.3 0.3 1GiB\n"),
                             LAUNCHER, 0.0, spatial=True)
    router.on_config(cfg.parse_text("2\na 0.3 0.3 1GiB sm=50@p\nb 0.5 0.5 1GiB\n"), 4.0)
    assert {key: core.caps_changed_at for key, core in router.cores.items()} == {
        TIME_SLICED: 4.0, "p": 4.0}


def test_the_metrics_counters_of_a_moved_client_go_on_from_where_they_were() -> None:
    """(A move to another group started them at 0: a reset to Prometheus.)"""
    sim = sim_of("2\na 1 1 1GiB sm=50\nb 1 1 1GiB sm=50\n", spatial=True)
    sim.start("a")
    sim.start("b")
    sim.run_until(5.0)
    router: PartitionRouter = sim.core  # type: ignore[assignment]

    def counters() -> dict[str, tuple[float, ...]]:
        return {c["name"]: (c["tokens"], c["overuse_s"], c["overrun_s"])
                for c in router.snapshot(sim.now)["clients"]}  # type: ignore[union-attr]

    before = counters()
    assert before["a"][0] > 0
    sim._handle(router.on_mode(False, sim.now))  # MPS down: both move to the time-sliced group
    after = counters()
    for name in ("a", "b"):
        assert all(x >= y for x, y in zip(after[name], before[name], strict=True)), (name, after)
    sim.run_until(10.0)
    assert counters()["a"][0] > after["a"][0]


def test_removed_and_unknown_clients_are_refused_by_name() -> None:
    router = PartitionRouter(cfg.parse_text("2\na 1 1 1 sm=50@p\nb 1 1 1\n"), LAUNCHER, 0.0,
                             spatial=True)
    router.on_config(cfg.parse_text("1\nb 1 1 1\n"), 1.0)
    (gone,) = grants(router.on_request(1, quota("a", 1), 2.0))
    (stranger,) = grants(router.on_request(1, quota("x", 2), 2.0))
    assert gone.response.status is Status.CLIENT_REMOVED
    assert stranger.response.status is Status.UNKNOWN_CLIENT


LONG = "a-client-whose-name-is-as-long-as-a-name-can-be"  # (47 bytes, the most a name has)


def sent(name: str, req_id: int) -> Request:
    """A token request as it comes off the wire: beside a name over 31 bytes, its alias."""
    return decode_request(encode_request(quota(name, req_id)))


def test_a_long_names_token_requests_come_by_its_alias_in_every_group() -> None:
    router = PartitionRouter(cfg.parse_text(f"2\na 1 1 1GiB sm=50@p\n{LONG} 1 1 1GiB sm=50@p\n"),
                             LAUNCHER, 0.0, spatial=True)
    assert sent(LONG, 1).name != LONG
    assert grants(router.on_request(1, quota("a", 1), 0.0))[0].response.status is Status.OK
    assert grants(router.on_request(2, sent(LONG, 1), 0.01)) == []  # waits for a's token
    # Moved to a partition of its own, its queued request goes with it and is granted there.
    out = router.on_config(cfg.parse_text(f"2\na 1 1 1GiB sm=50@p\n{LONG} 1 1 1GiB sm=50@q\n"),
                           0.02)
    (granted,) = grants(out)
    assert (granted.conn, granted.response.req_id, granted.response.status) == (2, 1, Status.OK)
    # Without MPS it takes turns with a in the time-sliced group, by its name there too.
    router.on_mode(False, 0.03)
    router.on_request(1, quota("a", 2), 0.5)  # (new to this group: a paced grant, no lone turn)
    (granted,) = grants(router.on_request(2, sent(LONG, 2), 0.6))
    assert granted.response.status is Status.OK
    assert router.snapshot(0.6)["holder"] == LONG
    # Removed, it is told so; a long name the config never had, that it is unknown.
    router.on_config(cfg.parse_text("1\na 1 1 1GiB sm=50@p\n"), 1.0)
    (gone,) = grants(router.on_request(2, sent(LONG, 3), 1.1))
    assert gone.response.status is Status.CLIENT_REMOVED
    out = router.on_request(3, sent(LONG[::-1], 1), 1.2)
    assert grants(out)[0].response.status is Status.UNKNOWN_CLIENT
    assert any("alias of a name over 31 bytes" in a.client for a in out if isinstance(a, Log))


def test_a_long_names_report_comes_by_its_alias_and_its_grants_are_cut() -> None:
    """Its pod manager's REPORT, beside a name over 39 bytes, carries the alias (wire.
    report_name): it says it applies cuts, so a cap lowered while it holds its grant cuts it.
    (Its name whole left that word out, and the grant ran on at the old cap to its end.)"""
    router = PartitionRouter(cfg.parse_text(f"1\n{LONG} 0.6 0.6 1GiB\n"),
                             Timing(short_window_s=0.0), 0.0)
    report = Request(LONG, 1, RequestType.REPORT, (5 << 20, 1, 0, 0.5, REPORT_APPLIES_CUTS))
    said = decode_request(encode_request(report))
    assert said.name != LONG and said.args == report.args
    [ack] = router.on_request(1, said, 0.0)
    assert isinstance(ack, Reply) and ack.response.status is Status.OK
    assert router.snapshot(0.0)["clients"][0]["mem_used"] == 5 << 20
    router.on_request(1, sent(LONG, 2), 0.0)
    start = router.next_deadline()
    assert start is not None
    [grant] = grants(router.on_deadline(start))
    out = router.on_config(cfg.parse_text(f"1\n{LONG} 0.3 0.3 1GiB\n"), start + 0.02)
    [cut] = grants(out)
    assert (cut.conn, cut.response.req_id) == (1, CUT_ID)
    assert cut.response.values[0] == pytest.approx(grant.response.values[0] / 2 - 20.0)


def test_a_long_names_memory_said_before_the_config_had_it_is_kept() -> None:
    """Its pod manager, up before the client is in the config, asks for its limit by its name
    and reports by its alias: once added, both are its books (its books kept by the alias
    alone, the memory it reported was lost)."""
    core = SchedulerCore(cfg.parse_text("1\na 1 1 1GiB\n"), LAUNCHER, 0.0)
    core.on_request(1, Request(LONG, 1, RequestType.MEM_LIMIT, ()), 0.0)
    report = Request(LONG, 2, RequestType.REPORT, (5 << 20, 1, 0, 0.5, REPORT_APPLIES_CUTS))
    core.on_request(2, decode_request(encode_request(report)), 0.0)  # (another connection)
    out = core.on_config(cfg.parse_text(f"2\na 1 1 1GiB\n{LONG} 1 1 2GiB\n"), 1.0)
    pushed = [a for a in out if isinstance(a, Reply) and a.type is RequestType.MEM_LIMIT]
    assert [(p.conn, p.response.values[:2]) for p in pushed] == [(1, (5 << 20, 2 << 30)),
                                                                 (2, (5 << 20, 2 << 30))]


def test_memory_limits_of_partition_clients() -> None:
    router = PartitionRouter(cfg.parse_text("1\na 1 1 3GiB sm=50\n"), LAUNCHER, 0.0,
                             spatial=True)
    (reply,) = router.on_request(1, Request("a", 1, RequestType.MEM_LIMIT, ()), 0.0)
    assert isinstance(reply, Reply) and reply.response.values[1] == 3 << 30
    out = router.on_config(cfg.parse_text("1\na 1 1 5GiB sm=50\n"), 1.0)
    pushes = [a for a in out if isinstance(a, Reply) and a.type is RequestType.MEM_LIMIT]
    assert [p.response.values[1] for p in pushes] == [5 << 30]


# ---- status --------------------------------------------------------------------------------------


def test_status_names_each_clients_mode_and_the_grants_of_every_group() -> None:
    text = "3\na 1 1 1GiB sm=30\nb 1 1 1GiB sm=70@big\nc 1 1 1GiB\n"
    _, sim = run(text, spatial=True, seconds=3.0)
    router: PartitionRouter = sim.core  # type: ignore[assignment]
    snap = router.snapshot(3.0)
    modes = {c["name"]: (c["mode"], c["partition"], c["sm"]) for c in snap["clients"]}  # type: ignore[union-attr]
    assert modes == {"a": ("spatial", "a", 30), "b": ("spatial", "big", 70),
                     "c": ("time-sliced", None, None)}
    assert [c["name"] for c in snap["clients"]] == ["a", "b", "c"]  # type: ignore[union-attr]
    assert snap["spatial"] is True
    assert {p["name"]: p["sm"] for p in snap["partitions"]} == {"a": 30, "big": 70}  # type: ignore[union-attr]
    history = snap["history"]
    assert {h[0] for h in history} == {"a", "b", "c"}  # type: ignore[union-attr]
    assert all(0.0 <= s <= e <= 3.0 for _, s, e in history)  # type: ignore[union-attr]
    router.on_mode(False, 3.0)
    modes = {c["name"]: c["mode"] for c in router.snapshot(3.0)["clients"]}  # type: ignore[union-attr]
    assert modes == {"a": "time-sliced", "b": "time-sliced", "c": "time-sliced"}


def test_a_partition_added_later_reports_its_grants_on_the_routers_clock() -> None:
    router = PartitionRouter(cfg.parse_text("1\na 1 1 1\n"), LAUNCHER, 0.0, spatial=True)
    router.on_config(cfg.parse_text("2\na 1 1 1\nb 1 1 1 sm=40\n"), 5.0)
    router.on_request(1, quota("b", 1), 6.0)
    ((name, start, end),) = router.snapshot(6.05)["history"]  # type: ignore[misc]
    assert (name, start) == ("b", 6.0)
    assert 6.0 < end <= 6.05


def test_folded_spec_keeps_everything_but_the_shares() -> None:
    spec = ClientSpec("a", 0.5, 1.0, 7, True, "1", cfg.Partition("p", 40))
    flat = folded(spec)
    assert (flat.request, flat.limit) == (0.2, 0.4)
    assert (flat.name, flat.gpu_mem, flat.unified_memory, flat.gpu, flat.partition) == (
        "a", 7, True, "1", spec.partition)
    assert split(ResourceConfig((spec,)), True)["p"].clients == (spec,)


def test_a_moved_client_keeps_what_each_of_its_pod_managers_said_of_its_processes() -> None:
    """The new group was told the client's latest count on every connection: a pod manager
    that served two processes read as none once its neighbour had said none, and when it died
    holding the token, b was granted beside them at once (a review)."""
    router = PartitionRouter(cfg.parse_text("2\na 0.5 1 1GiB sm=50@p\nb 0.5 1 1GiB sm=50@p\n"),
                             LAUNCHER, 0.0, spatial=False)
    router.on_request(1, Request("a", 1, RequestType.REPORT, (0, 2, 0)), 0.0)
    router.on_request(3, Request("a", 1, RequestType.REPORT, (0, 0, 0)), 0.001)  # another node
    router.on_mode(True, 0.01)  # MPS up: a and b move to partition p
    assert grants(router.on_request(1, quota("a", 2), 0.02))
    router.on_request(2, quota("b", 1), 0.03)
    assert grants(router.on_disconnect(1, 0.04)) == []  # a's two processes run on
    processes = {c["name"]: c["processes"] for c in router.snapshot(0.04)["clients"]}  # type: ignore[union-attr]
    assert processes["a"] == 0  # (the client's own count, as before the move: the latest said)


def test_a_request_answered_on_a_disconnect_does_not_follow_a_move() -> None:
    router = PartitionRouter(cfg.parse_text("2\na 1 1 1 sm=50@p\nb 1 1 1 sm=50@p\n"),
                             LAUNCHER, 0.0, spatial=True)
    router.on_request(1, quota("a", 1), 0.0)
    router.on_request(2, quota("b", 1), 0.01)
    (granted,) = grants(router.on_disconnect(1, 0.02))  # a's holder went: b gets the token
    assert (granted.conn, granted.response.status) == (2, Status.OK)
    out = router.on_config(cfg.parse_text("2\na 1 1 1 sm=50@p\nb 1 1 1 sm=50@q\n"), 0.03)
    assert grants(out) == []  # nothing queued moved with b: it was answered already


def test_a_moved_client_whose_pod_manager_never_reported_is_not_taken_for_one_of_ours() -> None:
    """A v1 pod manager sends no REPORT: the move told the new group a report for it all the
    same, and a cap lowered there cut its grant with a message it cannot read (wire.CUT_ID;
    a review)."""
    router = PartitionRouter(cfg.parse_text("2\na 0.5 1 1GiB sm=50@p\nb 0.5 1 1GiB sm=50@p\n"),
                             LAUNCHER, 0.0, spatial=False)
    router.on_request(1, Request("a", 1, RequestType.REPORT, (0, 1, 0)), 0.0)
    router.on_request(2, quota("b", 1), 0.0)  # (b's v1 pod manager: no report)
    router.on_mode(True, 0.01)  # MPS up: a and b move to partition p
    core = next(c for c in router.cores.values() if "b" in c.clients)
    assert core.reported(1) and not core.reported(2)
    assert core.clients["b"].conns == {2}  # (its connection all the same: status, limits)
