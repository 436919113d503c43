"""The pod manager's logic for one client on one GPU, without sockets or clocks (spec §4, §5).

Rules:
- All processes (hooks) of the client share one token.  A hook's QUOTA request is answered from
  the cached token if its predicted burst fits in what is left; otherwise the pod manager asks the
  scheduler for a new token (which returns the old one), once, for every hook waiting meanwhile.
- It reports to the scheduler the largest overuse and the largest predicted burst of its hooks
  (an overuse reported while a fetch is out goes with the next fetch).
- Asking the scheduler returns the client's token, so it waits while another process still runs
  on time it was handed (else that time would run on the next client's token, uncharged); a
  process that asks again has given its own time back.
- Memory: the pod manager owns the client's limit.  A hook reserves bytes before it allocates
  (MEM_UPDATE alloc) and gives them back when it frees; a hook that disconnects gives back all
  it held.  The reserved total never exceeds the limit.
- Leases: a hook may reserve bytes ahead (MEM_UPDATE lease) and spend them locally; a lease is
  granted only if it fits now.  Unspent lease bytes count as used, so an allocation that does
  not fit may still fit once the client's other processes give their unspent leases back: the
  pod manager then asks every other process that has leased and holds bytes (RECALL, an
  unsolicited message), holds the allocation, and answers it as soon as it fits, or refuses it
  once every process asked has answered or gone, or RECALL_TIMEOUT_S has passed.  While
  allocations wait, later ones queue behind them (leases are refused), so recalled bytes go to
  the allocation they were recalled for.  A recall is not sent when even every such process's
  whole reservation would not make the allocation fit.
- Every share of a token tells the process how many of the client's processes share it now
  (those that wanted a token within SHARING_S): each bounds only its own queue, and the GPU
  drains theirs together.
- Hooks must use the client's own name.
- Processes (for the NVML view inside the client): each hook says its pid on every new
  connection (PROCESS); the client's processes are the pids that hold memory or have asked for a
  token, each with the bytes it holds.  A process that only looks (nvidia-smi under the hook)
  is not one of them.
Inputs are `on_*` methods taking `now` (seconds); each returns actions.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, replace

from gemini.core import actions as act
from gemini.core.actions import Action, ConnId, Reply, SendUpstream
from gemini.core.wire import (
    CUT_ID,
    DELIVERY_MAX_MS,
    MAX_BYTES,
    MEM_ALLOC,
    MEM_CLAIM,
    MEM_FLAG_EVICT_ON_RELEASE,
    MEM_FLAG_UNIFIED_MEMORY,
    MEM_FREE,
    MEM_LEASE,
    NOTIFY_ID,
    PROCESS_READS_CUTS,
    QUOTA_FLAG_ALONE,
    REPORT_APPLIES_CUTS,
    Request,
    RequestType,
    Response,
    Status,
    quota_args,
    quota_name,
    quota_run,
    run_word,
    said_name,
)

MS = 1000.0
TOKEN_MAX_MS = 3600 * MS  # a token's ms beyond any grant (the hook's QUOTA_MAX_MS alike)
F32_MAX = 3.4028234663852886e38  # the largest finite f32: a run's sum travels as one
REPORT_INTERVAL_S = 0.1  # at most this often, tell the scheduler our memory and process counts
# How long an allocation waits for the processes asked to give their unspent leases back.  Their
# hooks answer from a thread of their own within a round trip; this bounds a stopped process.
RECALL_TIMEOUT_S = 0.5
# A process that wanted a token this recently shares the client's token: a busy one asks for
# every grant (at most 100 ms with the scheduler's default quotas), and one that waits for a
# grant (a capped client waits up to 0.9 s at 0.1) wants it until it is answered.
SHARING_S = 0.5
# A token is timed from its receipt, but starts no later than the delivery the scheduler's hand-over
# waits for (what we last told it: the REPORT's delivery_ms) after the grant was made, where
# the reply's granted_at reads as at most this long ago on our own clock; else (another host's
# clock, a v1 scheduler) from its receipt.  A grant that came later than that loses the
# difference, as the GPU goes on without it: on the H100 (2026-12-06 17:15) 2-3 % of the grants
# came 1.5-3.5 ms after they were made (p50 0.5-0.7), their tokens ran on past the next holder's
# start, and their queue's last kernels finished a GPU time slice late (2.2-2.7 ms).  (With
# gem-schd --no-hand-over-at-arrival the scheduler waits for no delivery, and tokens still run
# the delivery past its hand-over, as before: --time-from-grant is its match.)
# With time_from_grant (gem-pmgr --time-from-grant; off by default) a token is timed from the
# grant: the scheduler books a grant from when it made it, so a client then loses the delay
# from every token (on the H200, 2026-12-05: 0.7 ms of 20-30 ms tokens, and three capped
# clients together did 0.770-0.798 of the GPU where 0.794-0.806 before).
GRANT_DELAY_MAX_S = 0.005
RECENT_DELIVERIES = 16  # the REPORT's delivery_ms is their median


def plausible_grant(granted_at: float, received_at: float) -> bool:
    """Does the scheduler's `granted_at` read as made 0 to GRANT_DELAY_MAX_S before its
    receipt on our own clock (not another host's clock, nor a v1 scheduler's 0)?"""
    return 0.0 <= received_at - granted_at <= GRANT_DELAY_MAX_S


def token_start(granted_at: float, received_at: float, quota_s: float,
                waited_s: float = 0.0) -> float:
    """When a token of `quota_s` received at `received_at` starts: its receipt, but no later
    than `waited_s` after the scheduler's `granted_at` where that is plausible (0: timed from
    the grant).  Never more than half the token before its receipt: a hook handed none of it
    would sleep and ask again (csrc/hook/token_fetch.c), and the delay is the scheduler's, not
    the client's."""
    if plausible_grant(granted_at, received_at):
        return max(min(received_at, granted_at + waited_s), received_at - quota_s / 2)
    return received_at


@dataclass
class HookState:
    reserved: int = 0
    burst_ms: float = 0.0
    running_until: float = float("-inf")  # end of the token time this process was handed
    # ... as its hook holds it, whether or not it has asked again since (a cut: _on_cut)
    handed_until: float = float("-inf")
    pid: int = 0  # as the process sees itself (PROCESS); 0: not told
    launched: bool = False  # has asked for a token
    wanted_at: float = float("-inf")  # when it last asked for a token, or got one it waited for
    leases: bool = False  # has reserved a lease: may hold unspent bytes, answers RECALL
    reads_cuts: bool = False  # said it applies a CUT_ID notice (PROCESS: wire.PROCESS_READS_CUTS)
    # Did not answer a recall in time (stopped, or its answering thread never started): not
    # asked again, so that each allocation that does not fit waits for it no more, until it
    # sends anything.
    silent: bool = False


@dataclass(frozen=True)
class ProcessUse:
    pid: int
    bytes: int


@dataclass(frozen=True)
class Waiter:
    conn: ConnId
    req: Request
    recalled: bool = False  # a recall was made for it (_recall_for)


class PodCore:
    def __init__(self, name: str, now: float, time_from_grant: bool = False) -> None:
        self.name = name
        self.time_from_grant = time_from_grant  # (GRANT_DELAY_MAX_S says what and why)
        self._quota_name = quota_name(name)  # (a long name's QUOTA requests carry its alias)
        self.limit: int | None = None  # unknown until the scheduler tells us
        self.mem_flags = 0  # MEM_LIMIT's flags word (unified memory ...), forwarded to hooks
        self.used = 0
        self.hooks: dict[ConnId, HookState] = {}
        self.quota_s = 0.0
        self.quota_at = now
        self.quota_flags = 0  # the cached token's QUOTA_FLAG_*, passed on with every share of it
        # How long the latest grants took to reach us (their granted_at, where plausible), for
        # the scheduler (wire: the REPORT's delivery_ms).
        self.deliveries: deque[float] = deque(maxlen=RECENT_DELIVERIES)
        # Their median as the latest REPORT said it, which the scheduler's hand-over waits for
        # (0: not said to this scheduler yet; it hands over at the grant's end).
        self.said_delivery_s = 0.0
        self.overuse_ms = 0.0  # the largest reported since the last fetch was sent
        self.overuse_in_flight = 0.0  # what the fetch in flight carries (sent again if lost)
        # The longest a hook's launching threads waited on the GPU since the last fetch (None:
        # not said; the speed's charge then counts in full: gemini.core.speed).
        self.gpu_wait_ms: float | None = None
        # The GPU time and launches its processes measured since the last fetch, summed
        # (wire: the QUOTA request's run words; gemini.core.speed).
        self.run_ms = 0.0  # the processes' runs in this token (wire.quota_run)
        self.run_count = 0
        self.run_graphs = False
        self.fetch_id: int | None = None  # upstream QUOTA in flight
        self.fetch_at: float | None = None  # fetch delayed until others' handed-out time ends
        self.quota_waiters: list[Waiter] = []
        self.memory_waiters: list[Waiter] = []
        self.recall_waiters: list[Waiter] = []  # allocations waiting for recalled leases
        self.recall_asked: set[ConnId] = set()  # processes asked for their leases, not answered
        self.recall_until: float | None = None  # stop waiting for them then
        self.upstream: dict[int, RequestType] = {}
        self.connected = False
        self._next_id = 0
        self._report_due = False
        self._last_report = float("-inf")
        # Refused (a token, or the limit) since the limit last came: the scheduler pushes a new
        # limit to the clients it knows, not to one removed and added again, so the next token
        # asks for it; and the refusals after the first are said at debug level.
        self.limit_stale = False

    # ---- scheduler connection -----------------------------------------------------------------

    def on_scheduler_connected(self, now: float) -> list[Action]:
        self.connected = True
        self.deliveries.clear()  # (another scheduler's grants: on another clock, perhaps)
        self.said_delivery_s = 0.0
        out: list[Action] = [self._send(RequestType.MEM_LIMIT, ())]
        if self.fetch_id is not None:  # (pending while the scheduler was away)
            if self.quota_waiters:
                out += self._fetch()
            else:
                self.fetch_id = None  # (nobody waits for it any more)
        self._report_due = True
        return out + self._maybe_report(now)

    def on_scheduler_lost(self, now: float) -> list[Action]:
        self.connected = False
        self.upstream.clear()
        # Whatever token we had is gone with the scheduler; a fetch in flight is sent again.
        self.quota_s = 0.0
        if self.fetch_id is not None:
            self.fetch_id = -1
        return [act.warning(self.name, "lost the scheduler; hooks wait until it is back")]

    def upstream_type(self, req_id: int) -> RequestType | None:
        """Which request a scheduler response answers (None: not ours); an unsolicited one,
        which request's layout it has (wire.NOTIFY_ID, CUT_ID)."""
        if req_id == NOTIFY_ID:
            return RequestType.MEM_LIMIT
        if req_id == CUT_ID:
            return RequestType.QUOTA
        return self.upstream.get(req_id)

    def on_upstream_response(self, rsp: Response, now: float) -> list[Action]:
        req_type = self.upstream_type(rsp.req_id)
        self.upstream.pop(rsp.req_id, None)
        if req_type is RequestType.MEM_LIMIT:
            return self._on_limit(rsp, now)
        if rsp.req_id == CUT_ID:
            return self._on_cut(rsp, now)
        if req_type is RequestType.QUOTA:
            if rsp.req_id == self.fetch_id:
                return self._on_token(rsp, now)
            return [act.debug(self.name, f"a token for an earlier fetch (id {rsp.req_id}) "
                              "ignored")]
        if req_type is RequestType.REPORT:
            return self._on_report(rsp)
        return []

    def _on_report(self, rsp: Response) -> list[Action]:
        """A report refused (the client removed from the config) makes the limit stale, as a
        refused token does: added again, perhaps with another limit, it is asked for once a
        report is served.  The scheduler pushes a new limit to the connections it keeps books
        of, but a pod manager whose processes only allocated memory, across a scheduler that
        restarted without the client, kept the old limit for good (a review)."""
        if rsp.status is not Status.OK:
            said = act.debug if self.limit_stale else act.warning  # (once until served again)
            self.limit_stale = True
            return [said(self.name, f"scheduler refused a report: {rsp.status.name}")]
        return self._ask_limit() if self.limit_stale else []

    def stray_reply(self, req_id: int) -> list[Action]:
        """A reply from the scheduler to no request of ours (the shell cannot decode it without
        the request's type): out of step, said, and otherwise ignored."""
        return [act.warning(self.name, f"a reply from the scheduler to no request of ours "
                            f"(id {req_id}) ignored")]

    # ---- hooks ---------------------------------------------------------------------------------

    def on_hook_connect(self, conn: ConnId, now: float) -> list[Action]:
        self.hooks[conn] = HookState()
        self._report_due = True
        return [act.debug(self.name, f"process connected ({len(self.hooks)} now)")]

    def on_hook_disconnect(self, conn: ConnId, now: float) -> list[Action]:
        hook = self.hooks.pop(conn, None)
        self.quota_waiters = [w for w in self.quota_waiters if w.conn != conn]
        self.memory_waiters = [w for w in self.memory_waiters if w.conn != conn]
        self.recall_waiters = [w for w in self.recall_waiters if w.conn != conn]
        self.recall_asked.discard(conn)
        if hook is None:
            return []
        if self.fetch_at is not None:
            self.fetch_at = now  # the process it waited for may be this one
        self.used -= hook.reserved
        self._report_due = True
        out: list[Action] = [
            act.info(
                self.name, f"process gone, {hook.reserved} B given back ({len(self.hooks)} left)"
            )
        ]
        return out + self._serve_recall_waiters(now) + self._maybe_report(now)

    def on_hook_request(self, conn: ConnId, req: Request, now: float) -> list[Action]:
        if req.name != self.name and (req.type is not RequestType.QUOTA
                                      or req.name != self._quota_name):
            reply = Reply(conn, req.type, Response(req.req_id, Status.UNKNOWN_CLIENT))
            why = f"refused a process that calls itself {said_name(req.name)!r}"
            return [reply, act.warning(self.name, why), act.Close(conn, "wrong client name")]
        if conn in self.hooks:
            self.hooks[conn].silent = False  # it speaks: it answers recalls again
        if req.type is RequestType.QUOTA:
            return self._on_hook_quota(Waiter(conn, req), now)
        if req.type is RequestType.PROCESS:
            return [self._on_hook_process(conn, req)]
        if req.type is RequestType.RECALL:
            return self._on_hook_recall(conn, req, now)
        if req.type in (RequestType.MEM_LIMIT, RequestType.MEM_UPDATE):
            if self.limit is None:
                self.memory_waiters.append(Waiter(conn, req))
                return self._ask_limit()
            return self._on_hook_memory(Waiter(conn, req), now)
        return [Reply(conn, req.type, Response(req.req_id, Status.OK))]

    def _on_hook_quota(self, w: Waiter, now: float) -> list[Action]:
        overuse_ms, burst_ms, gpu_wait_ms = quota_args(w.req)
        self.overuse_ms = max(self.overuse_ms, overuse_ms)
        if gpu_wait_ms is not None:
            self.gpu_wait_ms = max(self.gpu_wait_ms or 0.0, gpu_wait_ms)
        run_ms, run_count, run_graphs = quota_run(w.req)
        # (A process that counts otherwise than the ones before it in this token: its run is
        # left out, as a sum of launches and graph launches counts nothing.)
        same_unit = self.run_count == 0 or run_graphs == self.run_graphs
        # (Each run is a finite f32, but their sum must stay one too, or the fetch that carries
        # it cannot be encoded: a few garbage runs of 3e38 ms froze the client's fetches.)
        fits = self.run_ms + run_ms <= F32_MAX
        if run_count > 0 and math.isfinite(run_ms) and run_ms > 0.0 and same_unit and fits:
            self.run_ms += run_ms
            self.run_count += run_count
            self.run_graphs = run_graphs
        hook = self.hooks.setdefault(w.conn, HookState())
        hook.burst_ms = burst_ms
        if not hook.launched:
            hook.launched = True
            self._report_due = True  # (one more process that a report counts: _reported)
        hook.wanted_at = now
        hook.running_until = now  # asking again: it is done with what it had
        left_s = self.quota_s - (now - self.quota_at)
        waiting = self.fetch_id is not None or self.fetch_at is not None
        if not waiting and left_s - burst_ms / MS > 0:
            return [self._quota_reply(w, now, left_s)]
        self.quota_waiters.append(w)
        if self.fetch_at is not None:
            return self._fetch_when_free(now)  # this process may have been the one to wait for
        if waiting:
            return []
        self._report_due = True
        return [*self._fetch_when_free(now), *self._maybe_report(now)]

    def _fetch_when_free(self, now: float) -> list[Action]:
        if not self.quota_waiters:  # (those it waited for are gone: a token would go unused)
            self.fetch_at = None
            return []
        busy_until = max((h.running_until for h in self.hooks.values()), default=now)
        if busy_until > now:
            self.fetch_at = busy_until
            return []
        self.fetch_at = None
        return self._fetch()

    def _fetch(self) -> list[Action]:
        """Ask the scheduler for a token, or mark the fetch as pending until it is back."""
        if not self.connected:
            self.fetch_id = -1
            return []
        burst_ms = max((h.burst_ms for h in self.hooks.values()), default=0.0)
        # What a process reports while this fetch is out goes with the next one (it used to be
        # wiped when the token came: a client's processes ask at about the same time, and all
        # but the first one's overuse was lost).
        self.overuse_in_flight = max(self.overuse_in_flight, self.overuse_ms)
        self.overuse_ms = 0.0
        run = (self.run_ms, run_word(self.run_count, self.run_graphs))
        send = self._send(RequestType.QUOTA,
                          (self.overuse_in_flight, burst_ms, self.gpu_wait_ms, *run))
        self.gpu_wait_ms = None
        self.run_ms, self.run_count, self.run_graphs = 0.0, 0, False
        self.fetch_id = send.request.req_id
        asked = f"asked the scheduler for a token ({burst_ms:.3f} ms burst, " \
                f"{self.overuse_in_flight:.3f} ms overuse)"
        return [act.debug(self.name, asked), send]  # (the line first: its stamp is the send's)

    def _on_token(self, rsp: Response, now: float) -> list[Action]:
        self.fetch_id = None
        self.overuse_in_flight = 0.0  # (answered: the scheduler has it)
        waiters, self.quota_waiters = self.quota_waiters, []
        self._report_due = True
        quota_ms = float(rsp.values[0]) if rsp.values else 0.0
        if rsp.status is Status.OK and not 0.0 <= quota_ms < TOKEN_MAX_MS:
            # (No scheduler grants that; cached, it was served to every process for good.)
            rsp = Response(rsp.req_id, Status.BAD_REQUEST)
            out: list[Action] = [act.warning(
                self.name, f"scheduler granted a token of {quota_ms!r} ms: refused as none")]
        else:
            out = []
        if rsp.status is not Status.OK:
            said = act.debug if self.limit_stale else act.warning  # (once until served again)
            out += [said(self.name, f"scheduler refused a token: {rsp.status.name}")]
            out += [Reply(w.conn, w.req.type, Response(w.req.req_id, rsp.status)) for w in waiters]
            self.limit_stale = True  # (a client added again may come with another limit)
            return out
        refresh = self._ask_limit() if self.limit_stale else []
        if not self.hooks:  # (all gone while it was asked for: the report gives it back now)
            self._last_report = float("-inf")
        self.quota_s = float(rsp.values[0]) / MS
        self.quota_flags = int(rsp.values[1])
        granted_at = float(rsp.values[3]) if len(rsp.values) > 3 else 0.0
        # (Timed from the grant, its tokens trail the grants by nothing, and it says so.)
        waited_s = 0.0 if self.time_from_grant else self.said_delivery_s
        self.quota_at = token_start(granted_at, now, self.quota_s, waited_s)
        if plausible_grant(granted_at, now):  # how long grants take to come (0 timed from them)
            self.deliveries.append((self.quota_at if self.time_from_grant else now) - granted_at)
        left_s = self.quota_s - (now - self.quota_at)
        for w in waiters:  # each wanted the token until now: all of them share it
            if (hook := self.hooks.get(w.conn)) is not None:
                hook.wanted_at = now
        replies: list[Action] = [self._quota_reply(w, now, left_s) for w in waiters]
        made = f"made {(now - granted_at) * MS:.3f} ms before, " if granted_at else ""
        timed = "" if self.quota_at == now else "timed from then, " if self.time_from_grant \
            else f"cut by {(now - self.quota_at) * MS:.3f} ms (it came later than the hand-over " \
                 f"waits for), "
        got = f"token from the scheduler: {self.quota_s * MS:.3f} ms, {made}{timed}" \
              f"{len(waiters)} waiting"
        return [act.debug(self.name, got), *replies, *refresh, *self._maybe_report(now)]

    def _on_cut(self, rsp: Response, now: float) -> list[Action]:
        """The scheduler cut the grant we hold (its cap lowered: wire.CUT_ID), to `left` ms
        from now: so is our token, and each process handed time past that is told (its hook
        stops launching then; its queue past it is its overuse).  The scheduler sends it
        before any later grant, so it is for the token we hold.  A hook that asked again in
        its token's tail still runs on it until the answer: it is told too.  Only hooks that
        said they read cuts are told (a v1 hook would read it as its next reply): the others
        run on to their part's end, which a fetch still waits for, and that part is owed as
        overuse with the next fetch (their own overuse counts from their part's end: the
        scheduler handed the GPU on at the cut).  The token is no longer alone (a capped
        client's is not): a process that asks again is not told it is."""
        left_ms = float(rsp.values[0]) if rsp.values else math.nan
        if rsp.status is not Status.OK or not 0.0 <= left_ms < TOKEN_MAX_MS:
            return [act.warning(self.name, f"scheduler cut our token to {left_ms!r} ms "
                                           f"({rsp.status.name}): ignored")]
        end = now + left_ms / MS
        if end >= self.quota_at + self.quota_s:
            return [act.debug(self.name, "scheduler cut our token, which ends sooner already")]
        self.quota_s = max(end - self.quota_at, 0.0)
        self.quota_flags &= ~QUOTA_FLAG_ALONE
        told: list[Action] = []
        notice = Response(CUT_ID, Status.OK, (left_ms, self.quota_flags, self.sharers(now), now))
        for conn, hook in self.hooks.items():
            if hook.handed_until <= end:
                continue
            if not hook.reads_cuts:
                self.overuse_ms = max(self.overuse_ms, (hook.handed_until - end) * MS)
                continue
            hook.handed_until = end
            hook.running_until = min(hook.running_until, end)
            told.append(Reply(conn, RequestType.QUOTA, notice))
        said = act.info(self.name, f"token cut by the scheduler (a lowered cap): {left_ms:.3f} "
                                   f"ms left, {len(told)} process(es) told")
        fetch = self._fetch_when_free(now) if self.fetch_at is not None else []
        return [said, *told, *fetch]

    def _quota_reply(self, w: Waiter, now: float, left_s: float) -> Reply:
        hook = self.hooks.get(w.conn)
        if hook is not None:
            hook.running_until = hook.handed_until = now + left_s
        values = (left_s * MS, self.quota_flags, self.sharers(now), now)  # (sent_at: wire)
        return Reply(w.conn, w.req.type, Response(w.req.req_id, Status.OK, values))

    def sharers(self, now: float) -> int:
        """How many processes share the client's token now: those that wanted it within
        SHARING_S.  Counted by connection (a hook has one per process and device): the
        processes of a pod's containers may have the same pid, each in its own namespace."""
        return sum(h.wanted_at >= now - SHARING_S for h in self.hooks.values())

    # ---- processes -----------------------------------------------------------------------------

    def processes(self) -> list[ProcessUse]:
        """The client's processes by pid (several connections of one pid add up), pid order."""
        held: dict[int, int] = {}
        for hook in self.hooks.values():
            if hook.pid > 0 and (hook.reserved > 0 or hook.launched):
                held[hook.pid] = held.get(hook.pid, 0) + hook.reserved
        return [ProcessUse(pid, held[pid]) for pid in sorted(held)]

    def _on_hook_process(self, conn: ConnId, req: Request) -> Reply:
        pid, index, *features = (int(a) for a in req.args)  # type: ignore[call-overload]
        hook = self.hooks.setdefault(conn, HookState())
        hook.reads_cuts = bool(features and features[0] & PROCESS_READS_CUTS)
        if pid > 0:
            hook.pid = pid
        procs = self.processes()
        one = procs[index] if 0 <= index < len(procs) else ProcessUse(0, 0)
        values = (len(procs), one.pid, one.bytes)
        return Reply(conn, req.type, Response(req.req_id, Status.OK, values))

    # ---- memory --------------------------------------------------------------------------------

    def _ask_limit(self) -> list[Action]:
        """MEM_LIMIT, unless one is out (or no scheduler is there: asked on connecting)."""
        if not self.connected or RequestType.MEM_LIMIT in self.upstream.values():
            return []
        return [self._send(RequestType.MEM_LIMIT, ())]

    def _on_limit(self, rsp: Response, now: float) -> list[Action]:
        if rsp.status is not Status.OK:
            # The waiting processes hear it (their hooks ask again, each asking for the limit
            # anew): else they waited for good, the scheduler never saying it once the client
            # was added.
            waiters, self.memory_waiters = self.memory_waiters, []
            refused = [Reply(w.conn, w.req.type, Response(w.req.req_id, rsp.status))
                       for w in waiters]
            said = act.debug if self.limit_stale else act.warning  # (once until served again)
            self.limit_stale = True
            return [said(self.name, f"scheduler refused the memory limit: {rsp.status.name}"),
                    *refused]
        self.limit_stale = False
        limit = int(rsp.values[1])
        flags = int(rsp.values[2]) if len(rsp.values) > 2 else 0
        out: list[Action] = []
        if limit != self.limit or flags != self.mem_flags:
            um = ""
            if flags & MEM_FLAG_UNIFIED_MEMORY:
                evict = flags & MEM_FLAG_EVICT_ON_RELEASE
                um = ", unified memory" + (", evicted on release" if evict else "")
            out.append(act.info(self.name, f"memory limit {limit} B (in use {self.used} B){um}"))
        self.limit = limit
        self.mem_flags = flags
        waiters, self.memory_waiters = self.memory_waiters, []
        for w in waiters:
            out += self._on_hook_memory(w, now)
        return out + self._recall_over_limit() + self._serve_recall_waiters(now)

    def _recall_over_limit(self) -> list[Action]:
        """A limit lowered below what is held: the unspent leases come back, as the hooks spend
        them without asking (each up to 2 x GEMINI_MEM_LEASE_MB past the new limit)."""
        assert self.limit is not None
        over = self.used - self.limit
        holders = [c for c, h in self.hooks.items() if h.leases and h.reserved > 0]
        if over <= 0 or not holders:
            return []
        return [act.info(self.name, f"over the lowered limit ({self._in_use()}): asking "
                         f"{len(holders)} process(es) for their unspent leases"),
                *(Reply(c, RequestType.RECALL, Response(NOTIFY_ID, Status.OK, (over,)))
                  for c in holders)]

    def _on_hook_memory(self, w: Waiter, now: float) -> list[Action]:
        assert self.limit is not None
        req = w.req
        if req.type is RequestType.MEM_LIMIT:
            values = (self.used, self.limit, self.mem_flags)
            return [Reply(w.conn, req.type, Response(req.req_id, Status.OK, values))]
        size, kind = (int(a) for a in req.args)  # type: ignore[call-overload]
        hook = self.hooks.setdefault(w.conn, HookState())
        self._report_due = True
        out: list[Action]
        if kind == MEM_FREE:
            out = [self._verdict(w, True)]
            held = hook.reserved
            if self._give_back(hook, size) < size:  # (the two sides' books disagree)
                out.append(act.warning(self.name, f"a process freed {size} B, more than the "
                                       f"{held} B it holds: counted as {held} B"))
            out += self._serve_recall_waiters(now)
        elif kind == MEM_CLAIM:
            hook.leases = True  # (only a hook that leases claims: it keeps what it frees)
            out = self._claim(w, size)
        elif kind not in (MEM_ALLOC, MEM_LEASE):
            out = [Reply(w.conn, req.type, Response(req.req_id, Status.BAD_REQUEST)),
                   act.warning(self.name, f"unknown kind {kind} of memory update refused")]
        elif kind == MEM_LEASE:
            hook.leases = True
            # Never ahead of allocations waiting for recalled bytes; refused, the hook asks
            # for the exact amount, which waits its turn.
            # Nor while a recall is out: a lease taken then is asked for by no one, and the
            # allocations queued behind the recall were refused while it sat unspent.
            ok = not self.recall_waiters and not self.recall_asked and self._fits(size)
            out = [self._grant(w, size)] if ok else [self._verdict(w, False)]
            if not ok:
                out.append(act.debug(self.name, f"lease of {size} B refused: {self._in_use()}"))
        elif not self.recall_waiters and self._fits(size):
            out = [self._grant(w, size)]
        elif self.recall_waiters or self.recall_asked:
            self.recall_waiters.append(w)  # answered when the recall now out settles
            out = []
        else:
            out = self._recall_for(w, size, now)
            if self.recall_asked:
                self.recall_waiters.append(replace(w, recalled=True))
        return out + self._maybe_report(now)

    def _claim(self, w: Waiter, size: int) -> list[Action]:
        """Bytes a process held before it reconnected: allocated already, whatever we say, so
        counted, over the limit too (refused, they went uncounted, and the client then
        allocated past its limit by as much).  But not past the wire's u64, which no GPU has:
        two claims of 2^63 B left every reply and report of the client unencodable."""
        if self.used + size > MAX_BYTES:
            return [Reply(w.conn, w.req.type, Response(w.req.req_id, Status.BAD_REQUEST)),
                    act.warning(self.name, f"a claim of {size} B refused: past the 2^64 - 1 B "
                                f"a client's use can be ({self._in_use()})")]
        out: list[Action] = [self._grant(w, size)]
        if not self._fits(0):
            out.append(act.warning(self.name, f"a process reconnected holding {size} B: "
                                   f"{self._in_use()}, over the limit until it frees"))
        return out

    def _in_use(self) -> str:
        return f"{self.used} of {self.limit} B in use"

    def _fits(self, size: int) -> bool:
        return self.limit is not None and self.used + size <= self.limit

    def _verdict(self, w: Waiter, ok: bool) -> Reply:
        return Reply(w.conn, w.req.type, Response(w.req.req_id, Status.OK, (int(ok),)))

    def _give_back(self, hook: HookState, size: int) -> int:
        """Bytes a process gives back: never more than it holds.  Returns what it gave."""
        size = min(size, hook.reserved)
        hook.reserved -= size
        self.used -= size
        return size

    def _grant(self, w: Waiter, size: int) -> Reply:
        self.used += size
        self.hooks.setdefault(w.conn, HookState()).reserved += size
        return self._verdict(w, True)

    def _refuse(self, w: Waiter, size: int) -> list[Action]:
        return [act.info(self.name, f"refused {size} B: {self._in_use()}"), self._verdict(w, False)]

    # ---- lease recall --------------------------------------------------------------------------

    def _recall_for(self, w: Waiter, size: int, now: float) -> list[Action]:
        """An allocation that does not fit: ask the others for their unspent leases (then
        `recall_asked` is set, and the caller queues `w`), or refuse."""
        assert self.limit is not None
        free = max(self.limit - self.used, 0)
        asked = [c for c, h in self.hooks.items()
                 if c != w.conn and h.leases and h.reserved > 0 and not h.silent]
        if not asked or free + sum(self.hooks[c].reserved for c in asked) < size:
            return self._refuse(w, size)  # nothing leased out, or not enough even if all came back
        self.recall_asked = set(asked)
        self.recall_until = now + RECALL_TIMEOUT_S
        why = (f"{size} B do not fit ({self._in_use()}): asking {len(asked)} other "
               f"process(es) for their unspent leases")
        notes: list[Action] = [
            Reply(c, RequestType.RECALL, Response(NOTIFY_ID, Status.OK, (size - free,)))
            for c in asked
        ]
        return [act.info(self.name, why), *notes]

    def _on_hook_recall(self, conn: ConnId, req: Request, now: float) -> list[Action]:
        """A process gives its unspent lease back (asked or not): that is its whole answer."""
        hook = self.hooks.setdefault(conn, HookState())
        size = self._give_back(hook, int(req.args[0]))  # type: ignore[call-overload]
        self.recall_asked.discard(conn)
        self._report_due = True
        out: list[Action] = [
            Reply(conn, req.type, Response(req.req_id, Status.OK)),
            act.debug(self.name, f"lease given back: {size} B ({self._in_use()})"),
        ]
        return out + self._serve_recall_waiters(now) + self._maybe_report(now)

    def _serve_recall_waiters(self, now: float) -> list[Action]:
        """Answer waiting allocations in order: each as soon as it fits; once no answer is
        outstanding, refuse those that still do not, after a recall of their own (one queued
        behind another's recall was refused while a process that had given back since held
        bytes it freed into its lease)."""
        out: list[Action] = []
        while self.recall_waiters:
            w = self.recall_waiters[0]
            size = int(w.req.args[0])  # type: ignore[call-overload]
            if self._fits(size):
                out.append(self._grant(w, size))
            elif self.recall_asked:
                break
            elif not w.recalled:
                out += self._recall_for(w, size, now)
                if self.recall_asked:
                    self.recall_waiters[0] = replace(w, recalled=True)
                    break
            else:
                out += self._refuse(w, size)
            self.recall_waiters.pop(0)
        if not self.recall_asked:
            self.recall_until = None
        return out

    # ---- reports to the scheduler -------------------------------------------------------------

    def next_deadline(self) -> float | None:
        deadlines = [self.fetch_at, self.recall_until]
        if self._report_due and self.connected:
            deadlines.append(self._last_report + REPORT_INTERVAL_S)
        return min((d for d in deadlines if d is not None), default=None)

    def on_deadline(self, now: float) -> list[Action]:
        out: list[Action] = []
        if self.fetch_at is not None and now >= self.fetch_at:
            out += self._fetch_when_free(now)
        if self.recall_until is not None and now >= self.recall_until:
            silent = len(self.recall_asked)
            out.append(act.warning(
                self.name, f"{silent} process(es) did not give their leases back within "
                f"{RECALL_TIMEOUT_S:g} s; answering the waiting allocations without them, "
                "and asking them no more until they speak"))
            for conn in self.recall_asked:
                if conn in self.hooks:
                    self.hooks[conn].silent = True
            self.recall_asked.clear()
            out += self._serve_recall_waiters(now)
        return out + self._maybe_report(now)

    def _maybe_report(self, now: float) -> list[Action]:
        if not (self._report_due and self.connected) or now < self._last_report + REPORT_INTERVAL_S:
            return []
        self._report_due = False
        self._last_report = now
        waiting = len({w.conn for w in self.quota_waiters})
        delivery_ms = statistics.median(self.deliveries) * MS if self.deliveries else 0.0
        self.said_delivery_s = min(delivery_ms, DELIVERY_MAX_MS) / MS
        return [self._send(RequestType.REPORT, (self.used, self._reported(), waiting,
                                                delivery_ms, REPORT_APPLIES_CUTS))]

    def _reported(self) -> int:
        """The processes a report counts: connections that asked for a token or hold memory.
        A program that only reads NVML under the hook (nvidia-smi: its hook asks for the limit,
        to show it) connects too; counted, it put an uncapped client on shares by time for as
        long as it ran, as a client of several processes (gem-schd), and kept a dead pod
        manager's grant running for processes that had none (a review)."""
        return sum(h.launched or h.reserved > 0 for h in self.hooks.values())

    def _send(self, req_type: RequestType, args: tuple[float | int, ...]) -> SendUpstream:
        self._next_id = self._next_id + 1 if self._next_id < 2**31 - 1 else 1
        self.upstream[self._next_id] = req_type
        return SendUpstream(Request(self.name, self._next_id, req_type, args))
