"""Spatial partitions on the scheduler's side (issue 13): one token per partition, pure.

Under MPS the processes of different partitions run side by side, each partition on its share of
the SMs; inside a partition its clients take turns, as the clients without a partition take
turns on the whole GPU.  So one GPU's scheduler is a set of token groups, each a `SchedulerCore`
of its own: the time-sliced group (`TIME_SLICED`: the clients without a partition, one token as
in Gemini) and one group per partition, whose clients' REQUEST and LIMIT are shares of the
partition.  `PartitionRouter` sends each request to its client's group and merges their status.

Without MPS (`spatial=False`: launch-backend could not start it, or gem-schd was not told that it
runs) partitions cannot run side by side: their clients join the time-sliced group with their
shares scaled by the partition's size (REQUEST 0.5 in a 30 % partition: 0.15 of the GPU), which
is the part of the GPU MPS would have given them.

A config without partitions makes one group, and the router passes every input to its one core
and every action back unchanged: gem-schd behaves as before.

A client that changes group (its partition edited, or MPS going up or down) keeps its pod manager
connection: its queued token request moves to the new group with it, and so do its memory and
process counts.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from gemini.core import actions as act
from gemini.core.actions import Action, ConnId, Log, Reply
from gemini.core.config import DEFAULT_GPU, ClientSpec, Partition, ResourceConfig
from gemini.core.scheduler import MS, SchedulerCore, Timing
from gemini.core.um import UmPolicy, mem_flags
from gemini.core.wire import (
    NOTIFY_ID,
    REPORT_APPLIES_CUTS,
    Request,
    RequestType,
    Response,
    Status,
    quota_name,
)

TIME_SLICED = ""  # the group of the clients that take turns on the whole GPU
# The requests that carry a long name's alias (wire.quota_name, wire.report_name)
ALIASED = (RequestType.QUOTA, RequestType.REPORT)
SPATIAL_MODE = "spatial"
TIME_SLICED_MODE = "time-sliced"


def group_of(spec: ClientSpec, spatial: bool) -> str:
    """The token group of a client: its partition under MPS, else the time-sliced group."""
    return spec.partition.name if spatial and spec.partition is not None else TIME_SLICED


def folded(spec: ClientSpec) -> ClientSpec:
    """A partition's client taking turns on the whole GPU: its shares of the partition made
    shares of the GPU."""
    if spec.partition is None:
        return spec
    scale = spec.partition.sm / 100
    return replace(spec, request=spec.request * scale, limit=spec.limit * scale)


def split(config: ResourceConfig, spatial: bool) -> dict[str, ResourceConfig]:
    """One GPU's clients by token group (the time-sliced group always, even empty)."""
    groups: dict[str, list[ClientSpec]] = {TIME_SLICED: []}
    for spec in config.clients:
        key = group_of(spec, spatial)
        groups.setdefault(key, []).append(spec if key != TIME_SLICED else folded(spec))
    return {key: ResourceConfig(tuple(specs), config.oversubscribe)
            for key, specs in groups.items()}


def mode_fields(spec: ClientSpec | None, spatial: bool) -> dict[str, object]:
    """What the status says of a client's mode: `mode`, `partition` and `sm` (its size)."""
    part = spec.partition if spec is not None else None
    if part is None:
        return {"mode": TIME_SLICED_MODE, "partition": None, "sm": None}
    return {"mode": SPATIAL_MODE if spatial else TIME_SLICED_MODE, "partition": part.name,
            "sm": part.sm}


def describe_group(key: str, partition: Partition | None) -> str:
    if key == TIME_SLICED or partition is None:
        return "the time-sliced group (the whole GPU's token)"
    return f"partition {key} ({partition.sm}% of the SMs)"


class PartitionRouter:
    """The scheduler of one GPU as token groups; the inputs and outputs of `SchedulerCore`."""

    def __init__(
        self,
        config: ResourceConfig,
        timing: Timing,
        now: float,
        um: UmPolicy | None = None,
        spatial: bool = False,
    ) -> None:
        self.timing = timing
        self.um = um if um is not None else UmPolicy()
        self.started_at = now
        self.spatial = spatial
        self.config = config
        self.cores: dict[str, SchedulerCore] = {}
        self._born: dict[str, float] = {}  # when each core started (its status times count from)
        self.group: dict[str, str] = {}  # client -> its group; removed clients keep their last
        self.conns: dict[str, set[ConnId]] = {}  # the pod manager connections of each client
        # QUOTA requests not answered yet, (conn, req_id) -> request: they follow a moved client
        self.pending: dict[tuple[ConnId, int], Request] = {}
        # The aliases that QUOTA and REPORT requests beside long names carry (wire.quota_name,
        # report_name), of every client in `group`: the request gets its name back before
        # anything reads it.
        self.aliases: dict[str, str] = {}
        self._regroup(now)

    # ---- inputs (as SchedulerCore's) -----------------------------------------------------------

    def on_request(self, conn: ConnId, req: Request, now: float) -> list[Action]:
        if req.type is RequestType.STATUS:
            return [self._status_reply(conn, req, now)]
        if req.type in ALIASED and req.name in self.aliases:
            req = replace(req, name=self.aliases[req.name])
        if req.name in self.group:
            self.conns.setdefault(req.name, set()).add(conn)
            if req.type is RequestType.QUOTA:
                self.pending[(conn, req.req_id)] = req
        key = self.group.get(req.name, TIME_SLICED)
        out: list[Action] = []
        if req.type is RequestType.QUOTA:  # a client moved from a group whose token it holds
            for other, core in self.cores.items():
                if other != key:
                    out += core.on_holder_asked_elsewhere(conn, now)
        return self._answered(out + self.cores[key].on_request(conn, req, now))

    def on_disconnect(self, conn: ConnId, now: float) -> list[Action]:
        for conns in self.conns.values():
            conns.discard(conn)
        self.pending = {key: req for key, req in self.pending.items() if key[0] != conn}
        out: list[Action] = []
        for core in self.cores.values():
            out += core.on_disconnect(conn, now)
        return self._answered(out)  # a waiting client may get the token it held

    def on_config(self, config: ResourceConfig, now: float) -> list[Action]:
        self.config = config
        return self._regroup(now)

    def on_mode(self, spatial: bool, now: float) -> list[Action]:
        """MPS went up (`spatial`) or down: the partitions' clients change group."""
        if spatial == self.spatial:
            return []
        self.spatial = spatial
        return self._regroup(now)

    def on_deadline(self, now: float) -> list[Action]:
        out: list[Action] = []
        for core in self.cores.values():
            deadline = core.next_deadline()
            if deadline is not None and deadline <= now:
                out += core.on_deadline(now)
        return self._answered(out)

    def on_clock(self, samples: list[tuple[float, float]], now: float) -> list[Action]:
        """The GPU's SM clock: every group's grants ran on it."""
        out: list[Action] = []
        for core in self.cores.values():
            out += core.on_clock(samples, now)
        return out

    def wants_clock(self) -> bool:
        return any(core.wants_clock() for core in self.cores.values())

    def next_deadline(self) -> float | None:
        deadlines = [d for core in self.cores.values() if (d := core.next_deadline()) is not None]
        return min(deadlines, default=None)

    # ---- groups --------------------------------------------------------------------------------

    def _regroup(self, now: float) -> list[Action]:
        groups = split(self.config, self.spatial)
        before = dict(self.group)
        after = {spec.name: group_of(spec, self.spatial) for spec in self.config.clients}
        moved = {n for n, key in after.items() if n in before and before[n] != key}
        old_state = {n: self._client_snapshot(n) for n in moved}
        self.group.update(after)
        said = {n: quota_name(n) for n in self.group}
        self.aliases = {alias: n for n, alias in said.items() if alias != n}
        out: list[Action] = []
        for key, sub in groups.items():
            if key not in self.cores:
                self.cores[key] = SchedulerCore(sub, self.timing, now, self.um)
                self._born[key] = now
        for key, core in self.cores.items():
            sub = groups.get(key, ResourceConfig((), self.config.oversubscribe))
            out += [a for a in core.on_config(sub, now) if not self._about_moved(a, moved)]
        # (one card, one power limiter: a cap changed in one group unsettles the others' too)
        changed = max(core.caps_changed_at for core in self.cores.values())
        for core in self.cores.values():
            core.caps_changed_at = changed
        for name in sorted(moved):
            out += self._move(name, old_state[name], now)
        return self._answered(out)

    def _about_moved(self, action: Action, moved: set[str]) -> bool:
        """The old group's refusal of a moved client's queued request (it moves on with the
        client) and the groups' 'added' / 'removed' lines about it (the move is one line)."""
        if isinstance(action, Log):
            return action.client in moved
        if isinstance(action, Reply) and action.type is RequestType.QUOTA:
            req = self.pending.get((action.conn, action.response.req_id))
            return req is not None and req.name in moved
        return False

    def _move(self, name: str, old: dict[str, Any] | None, now: float) -> list[Action]:
        key = self.group[name]
        core = self.cores[key]
        spec = core.clients[name].spec
        out: list[Action] = [act.info(name, f"now in {describe_group(key, spec.partition)}")]
        conns = sorted(self.conns.get(name, ()))
        if old is not None:
            # The metrics' counters go on from where the old group had them (a restart at 0
            # reads as a reset to Prometheus, and its rate() around the move is wrong).
            moved = core.clients[name]
            moved.tokens += int(old["tokens"])
            moved.overuse_s += float(old["overuse_s"])
            moved.overrun_s += float(old["overrun_s"])
            counts = (int(old["mem_used"]), int(old["processes"]), int(old["waiting_processes"]))
            for conn in conns:  # what each pod manager last reported, told to the new group
                # (its own processes: whether a holder's run on when it dies, on_disconnect;
                # whether it applies cuts; not for one that never reported, a v1 one, whose
                # connection is the client's all the same: SchedulerCore.reported)
                if conn not in old["conn_processes"]:
                    moved.conns.add(conn)
                    continue
                processes = old["conn_processes"][conn]
                features = REPORT_APPLIES_CUTS if conn in old["cutting_conns"] else 0
                said = (counts[0], processes, counts[2], float(old["delivery_ms"]), features)
                core.on_request(conn, Request(name, NOTIFY_ID, RequestType.REPORT, said), now)
            moved.processes = counts[1]  # (the client's own: its latest report from any)
            flags = mem_flags(spec, self.um)
            if (old["gpu_mem"], old["flags"]) != (spec.gpu_mem, flags):
                values = (counts[0], spec.gpu_mem, flags)
                out += [Reply(conn, RequestType.MEM_LIMIT, Response(NOTIFY_ID, Status.OK, values))
                        for conn in conns]
        for (conn, _), req in sorted(self.pending.items()):
            if req.name == name:  # its overuse was charged where it was asked: not again
                burst_ms = req.args[1] if len(req.args) > 1 else 0.0
                again = Request(name, req.req_id, RequestType.QUOTA, (0.0, burst_ms))
                out += core.on_request(conn, again, now)
        return out

    def _client_snapshot(self, name: str) -> dict[str, Any] | None:
        core = self.cores.get(self.group.get(name, TIME_SLICED))
        state = core.clients.get(name) if core is not None else None
        if state is None:
            return None
        conns = self.conns.get(name, ())
        said = {conn: core.processes_said(conn) for conn in conns if core.reported(conn)}
        cutting = {conn for conn in conns if core.applies_cuts(conn)}
        return {"mem_used": state.mem_used, "processes": state.processes, "conn_processes": said,
                "cutting_conns": cutting,
                "waiting_processes": state.waiting, "gpu_mem": state.spec.gpu_mem,
                "flags": mem_flags(state.spec, self.um), "delivery_ms": state.delivery_s * MS,
                "tokens": state.tokens, "overuse_s": state.overuse_s, "overrun_s": state.overrun_s}

    def _answered(self, actions: list[Action]) -> list[Action]:
        """Forget the QUOTA requests these actions answer."""
        for a in actions:
            if isinstance(a, Reply) and a.type is RequestType.QUOTA:
                self.pending.pop((a.conn, a.response.req_id), None)
        return actions

    # ---- status --------------------------------------------------------------------------------

    def snapshot(self, now: float) -> dict[str, object]:
        """SchedulerCore's snapshot of every group in one: each client with its mode, the
        grants of all groups (on one clock), and each partition's token holder."""
        specs = {c.name: c for c in self.config.clients}
        sizes = {p.name: p.sm for p in self.config.partitions(_gpu_of(self.config))}
        snaps: dict[str, dict[str, Any]] = {k: c.snapshot(now) for k, c in self.cores.items()}
        clients: list[dict[str, Any]] = []
        history: list[list[Any]] = []
        partitions: list[dict[str, object]] = []
        for key, snap in snaps.items():
            shift = self._born[key] - self.started_at
            for c in snap["clients"]:
                clients.append({**c, **mode_fields(specs.get(c["name"]), self.spatial)})
            history += [[n, s + shift, e + shift] for n, s, e in snap["history"]]
            if key != TIME_SLICED and snap["clients"]:
                partitions.append({"name": key, "sm": sizes.get(key), "holder": snap["holder"],
                                   "waiting_clients": snap["waiting_clients"]})
        order = {name: i for i, name in enumerate(self.config.names)}
        clients.sort(key=lambda c: order.get(c["name"], len(order)))
        history.sort(key=lambda h: float(h[1]))
        return {
            "uptime_s": now - self.started_at,
            "window_s": max(s["window_s"] for s in snaps.values()),
            "short_window_s": snaps[TIME_SLICED]["short_window_s"],
            "holder": snaps[TIME_SLICED]["holder"],
            "waiting_clients": sum(s["waiting_clients"] for s in snaps.values()),
            "clients": clients,
            "history": history,
            "spatial": self.spatial,
            "partitions": partitions,
            # (a client moved to another group is removed from its old one: not from the GPU)
            "removed_asking": sorted({n for s in snaps.values() for n in s["removed_asking"]
                                      if n not in specs}),
        }

    def _status_reply(self, conn: ConnId, req: Request, now: float) -> Reply:
        body = json.dumps(self.snapshot(now)).encode()
        return Reply(conn, req.type, Response(req.req_id, Status.OK, (len(body),)), body)


def _gpu_of(config: ResourceConfig) -> str:
    """The GPU of a scheduler's config (all its clients are on one)."""
    return config.clients[0].gpu if config.clients else DEFAULT_GPU
