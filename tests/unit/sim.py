"""A virtual-clock simulator for the scheduler core: saturating clients, one GPU, no sockets.

Each client behaves like a hook that always has work: it asks for a token, uses the GPU for the
quota it gets, and asks again about when the quota ends: from 1 ms before (as our hook's renewer
does, its queue running on to the token's end), to 2 ms after (a request that races the
expiry).  With `idle_returns`, as Gemini's hook: from 2.5 ms before, its work stopping there
(its next burst would not fit), which returns the token.  The times are drawn from a seeded
generator, so runs are repeatable but clients do not move in lock step.  Each request reports the
client's predicted burst (`burst_ms`), from which the scheduler sizes its quota.

With a `GpuClock` the GPU has a power-limited clock, fast after idle and slow when busy long,
which the simulation reads every 2 ms and gives the scheduler every 50 ms (as gem-schd's shell
does, gemini.daemon.clock); `work()` is then a client's work in seconds of continuous running.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from dataclasses import dataclass, field

from gemini.core.actions import Log, Reply
from gemini.core.config import ClientSpec, ResourceConfig
from gemini.core.scheduler import SchedulerCore, Timing
from gemini.core.speed import WORK_PER_CLOCK
from gemini.core.wire import (
    CUT_ID,
    QUOTA_FLAG_CALIBRATION,
    REPORT_APPLIES_CUTS,
    RUN_MEASURE_MS,
    Request,
    RequestType,
    Status,
)


@dataclass
class SimClient:
    name: str
    conn: int
    busy: list[tuple[float, float]] = field(default_factory=list)  # GPU intervals it ran
    calibrations: set[int] = field(default_factory=set)  # which of them were calibrations
    req_id: int = 0
    ran: list[tuple[float, float]] = field(default_factory=list)  # with overrun_s: its work
    overuse_s: float = 0.0  # past its latest grant, to be reported with its next request
    back_wake: int = 0  # the wake-up at which it asks after its latest grant (its seq)
    cut_wake: int = 0  # that one, where a cut brought its request forward (0: none)


class GpuClock:
    """A first-order model of a power-limited GPU's clock (H100, matmuls: 1500 MHz run
    continuously, up to 1980 after idle, ~50-100 ms to settle either way:
    bench/results/…-211322-duty-cycle-torch-eager.json).  Work per second goes with the clock to
the power measured there (gemini.core.speed.WORK_PER_CLOCK)."""

    STEP_S = 0.001

    def __init__(self, continuous_mhz: float = 1500.0, peak_mhz: float = 1980.0,
                 tau_s: float = 0.04, read_lag_s: float = 0.0,
                 own: dict[str, float] | None = None) -> None:
        """`read_lag_s`: a reading says the clock of that long before (H100: NVML's SM clock
        follows the work rate 40-100 ms late: bench/results/…-clock-lag.json).  `own`: the
        clock some programs run at continuously, where it is not `continuous_mhz` (H100: a
        Triton kernel 1980 MHz, a JAX matmul 1440; the power limiter sets one clock for a
        pair, 1515-1620 for those two)."""
        self.continuous, self.peak, self.tau = continuous_mhz, peak_mhz, tau_s
        self.read_lag_s = read_lag_s
        self.own = own or {}
        self.heat = 0.0  # 0: cool (peak clock), 1: at the power limit (continuous clock)
        # (t, MHz, who ran), in time order: read by bisect on t (a scan of the whole trace at
        # every look made a 30 s run quadratic, seconds of a test's time)
        self.trace: list[tuple[float, float, str | None]] = []
        self.t = 0.0

    def advance(self, until: float, running) -> None:  # type: ignore[no-untyped-def]
        """Step to `until`; running(t) names the client on the GPU at t (None: idle)."""
        decay = math.exp(-self.STEP_S / self.tau)
        while self.t + self.STEP_S <= until:
            who = running(self.t)
            target = self._heat_of(who)
            self.heat = target + (self.heat - target) * decay
            mhz = self.peak - (self.peak - self.continuous) * self.heat
            self.trace.append((self.t, mhz, who))
            self.t += self.STEP_S

    def continuous_of(self, name: str | None) -> float:
        return self.own.get(name, self.continuous) if name else self.continuous

    def _heat_of(self, who: str | None) -> float:
        """The heat that `who` running continuously settles at (its own clock)."""
        if who is None:
            return 0.0
        if self.peak == self.continuous:
            return 1.0  # (a clock that nothing moves)
        return (self.peak - self.continuous_of(who)) / (self.peak - self.continuous)

    def samples(self, since: float, every_s: float = 0.002) -> list[tuple[float, float]]:
        stride = max(round(every_s / self.STEP_S), 1)
        lag = round(self.read_lag_s / self.STEP_S)
        first = self._index(since)
        first += -first % stride  # (the samples fall on every stride-th step from the start)
        return [(self.trace[i][0], self.trace[max(i - lag, 0)][1])
                for i in range(first, len(self.trace), stride)]

    def work(self, name: str, start: float, end: float) -> float:
        """`name`'s work in [start, end], as seconds of running continuously."""
        own = self.continuous_of(name)
        lo, hi = self._index(start), self._index(end)
        return sum(self._work_in_step(mhz, own) for _, mhz, who in self.trace[lo:hi]
                   if who == name)

    def _index(self, t: float) -> int:
        """The first step of the trace at or after `t`."""
        return bisect.bisect_left(self.trace, t, key=lambda step: step[0])

    def step_work(self, name: str) -> list[float]:
        """`name`'s work in each step of the trace (0 where it did not run)."""
        own = self.continuous_of(name)
        return [self._work_in_step(mhz, own) if who == name else 0.0
                for _, mhz, who in self.trace]

    def _work_in_step(self, mhz: float, own_mhz: float) -> float:
        return (mhz / own_mhz) ** WORK_PER_CLOCK * self.STEP_S


class Sim:
    def __init__(
        self,
        specs: list[tuple[str, float, float]],
        timing: Timing | None = None,
        burst_ms: float = 0.0,
        seed: int = 1,
        clock: GpuClock | None = None,
        gpu_wait: float | None = None,
        launch_s: float | dict[str, float] = 0.0,
        overrun_s: dict[str, float] | None = None,
        delivery_s: tuple[float, float] | None = None,
        idle_returns: bool = False,
        hook_bursts: bool = False,
        token_bursts: bool = False,
    ) -> None:
        """`gpu_wait`: the share of each grant a client's hook says it waited on the GPU (the
        QUOTA request's gpu_wait_ms; None: not said).  `launch_s` (with a clock): the GPU time
        of one launch run continuously (or each client's: a dict, which a test may change as the
        simulator runs, as a program starts to run other kernels); its hook then says how many
        launches ran in the last wire.RUN_MEASURE_MS of each grant, with the request after next
        (0: it says none).
        `overrun_s`: how long some clients' work runs past each of their grants (a queue the
        hook let through), reported as overuse with their next request; the next holder's work
        waits for it (`ran`, `ran_share`).  `delivery_s`: each grant reaches its client a time
        drawn from this range after it is made (its work runs from then for the quota, as a
        hook times its token from its receipt, but ends no later than the range's middle after
        the quota, as its pod manager cuts a late one), and each client's pod manager reported
        the range's middle (the REPORT's delivery_ms) before it first asks.  `idle_returns`: the
        clients hand their tokens back idle, up to 2.5 ms early (module docstring).  `hook_bursts`:
        each says a burst no longer than its longest grant so far, as our hook does
        (csrc/hook/token.h max_quota_ms).  `token_bursts`: each says its latest grant's length,
        as our hook's predicted burst of a program that runs on, cut by its tokens (H200,
        2026-12-07: 146 ms bursts after 146 ms grants, 162 after 166)."""
        self.delivery_s = delivery_s
        self.idle_returns = idle_returns
        self.launch_s = launch_s
        self.overrun_s = overrun_s or {}
        self._gpu_free = 0.0  # (with overrun_s) when the work queued so far runs out
        self.now = 0.0
        self.gpu_wait = gpu_wait
        config = ResourceConfig(tuple(ClientSpec(n, r, lim, 1 << 30) for n, r, lim in specs))
        self.core = SchedulerCore(config, timing or Timing(), self.now)
        self.clients = {n: SimClient(n, i + 1) for i, (n, _, _) in enumerate(specs)}
        self.burst_ms = burst_ms
        self.next_bursts: dict[str, list[float]] = {}  # a client's next requests' bursts (ms)
        self.hook_bursts = hook_bursts
        self.token_bursts = token_bursts
        self._rng = random.Random(seed)
        self.by_conn = {c.conn: c for c in self.clients.values()}
        self._wakeups: list[tuple[float, int, str]] = []
        self._seq = 0
        self.replies: list[Reply] = []
        self.logs: list[Log] = []  # the scheduler's log lines
        self.grants = 0
        self.clock = clock
        self._fed_until = 0.0  # clock samples given to the scheduler up to here
        self._paused: dict[str, float] = {}  # client: when it asks again (inf: not yet)
        # Each pod manager reports first, as ours does on connecting (the scheduler then knows
        # it is ours, and tells it of cuts: wire.CUT_ID), with the delivery it says.
        for c in self.clients.values():
            c.req_id += 1
            said_ms = 1000 * self._said_delivery_s()
            said = (0, 1, 0, said_ms, REPORT_APPLIES_CUTS)
            report = Request(c.name, c.req_id, RequestType.REPORT, said)
            self._handle(self.core.on_request(c.conn, report, self.now))

    def start(self, name: str, at: float = 0.0) -> None:
        if name in self._paused:
            self._paused[name] = at
        self._wake(name, at)

    def _said_delivery_s(self) -> float:
        """The delivery each client's pod manager said: the range's middle (0: none)."""
        return sum(self.delivery_s) / 2 if self.delivery_s else 0.0

    def pause(self, name: str) -> None:
        """The client stops asking, from now until its next start() (its program works on its
        host, or waits for its input): a grant it holds runs out, and no request follows."""
        self._paused[name] = math.inf

    def configure(self, config: ResourceConfig) -> None:
        """A new config, now (as gem-schd reads an edited resource-config.txt)."""
        self._handle(self.core.on_config(config, self.now))

    def _wake(self, name: str, at: float) -> None:
        self._seq += 1
        heapq.heappush(self._wakeups, (at, self._seq, name))

    def request(self, name: str) -> None:
        if self.now < self._paused.get(name, -math.inf):
            return
        self._paused.pop(name, None)
        c = self.clients[name]
        c.req_id += 1
        gpu_wait_ms = None
        if self.gpu_wait is not None:
            start, end = c.busy[-1] if c.busy else (0.0, 0.0)
            gpu_wait_ms = self.gpu_wait * (end - start) * 1000
        overuse_ms, c.overuse_s = c.overuse_s * 1000, 0.0
        burst_ms = self.burst_ms
        if self.hook_bursts:
            burst_ms = min(burst_ms, 1000 * max((e - s for s, e in c.busy), default=0.0))
        if self.token_bursts and c.busy:
            burst_ms = min(burst_ms, 1000 * (c.busy[-1][1] - c.busy[-1][0]))
        if self.next_bursts.get(name):
            burst_ms = self.next_bursts[name].pop(0)
        req = Request(name, c.req_id, RequestType.QUOTA,
                      (overuse_ms, burst_ms, gpu_wait_ms, *self._run(c)))
        self._handle(self.core.on_request(c.conn, req, self.now))

    def _run(self, c: SimClient) -> tuple[float, int]:
        """What its hook measured of its grant before the latest: GPU time (ms) and launches
        (the whole grant, or a calibration's last RUN_MEASURE_MS)."""
        launch_s = self.launch_s.get(c.name, 0.0) if isinstance(self.launch_s, dict) \
            else self.launch_s
        if not launch_s or self.clock is None or len(c.busy) < 2:
            return 0.0, 0
        start, end = c.busy[-2]
        if len(c.busy) - 2 in c.calibrations:
            start = max(start, end - RUN_MEASURE_MS / 1000)
        self.clock.advance(end, self.running)
        return (end - start) * 1000, round(self.clock.work(c.name, start, end) / launch_s)

    def _handle(self, actions: list) -> None:
        for a in actions:
            if isinstance(a, Log):
                self.logs.append(a)
            if isinstance(a, Reply) and a.response.req_id == CUT_ID:
                self._cut(self.by_conn[a.conn], a.response.values[0] / 1000)
            elif isinstance(a, Reply) and a.type is RequestType.QUOTA:
                self.replies.append(a)
                if a.response.status is Status.OK:
                    c = self.by_conn[a.conn]
                    if int(a.response.values[1]) & QUOTA_FLAG_CALIBRATION:
                        c.calibrations.add(len(c.busy))
                    self._granted(c, a.response.values[0] / 1000)

    def _granted(self, c: SimClient, quota_s: float) -> None:
        self.grants += 1
        delivery = self._rng.uniform(*self.delivery_s) if self.delivery_s else 0.0
        got = self.now + delivery
        # Its pod manager cuts a token that came later than the delivery it said
        # (podmanager.token_start).
        token_end = self.now + min(delivery, self._said_delivery_s()) + quota_s
        early_s = 0.0025 if self.idle_returns else 0.001
        back = max(token_end + self._rng.uniform(-early_s, 0.002), got)
        # Its queue runs to its token's end where it asks sooner, as a hook asks with up to
        # 1 ms of it left (csrc/hook/token.c's tail); a grant of its own that comes meanwhile
        # goes on from it.
        end = min(back, token_end) if self.idle_returns else token_end
        if c.busy and c.busy[-1][1] > got:
            c.busy[-1] = (c.busy[-1][0], max(got, c.busy[-1][0]))
        c.busy.append((got, end))
        if self.overrun_s:
            self._run_work(c, end)
        self._wake(c.name, back)
        c.back_wake = self._seq

    def _cut(self, c: SimClient, left_s: float) -> None:
        """Its token cut short (a lowered cap: wire.CUT_ID): its work stops `left_s` from now
        (as its hook stops launching, no delivery delay), and it asks again then.  (Its
        work with `overrun_s` is not cut: no test cuts such a client.)"""
        end = self.now + left_s
        if not c.busy or c.busy[-1][1] <= end:
            return
        c.busy[-1] = (c.busy[-1][0], max(end, c.busy[-1][0]))
        c.cut_wake = c.back_wake
        self._wake(c.name, end)

    def _run_work(self, c: SimClient, end: float) -> None:
        """Its work in a grant that ends at `end`: from when the work queued before it runs
        out, on past the end by its overrun_s."""
        start = max(self.now, self._gpu_free)
        over = self.overrun_s.get(c.name, 0.0)
        finish = max(end + over, start) if start < end else start
        c.ran.append((start, finish))
        c.overuse_s = max(finish - end, 0.0)
        self._gpu_free = finish

    def ran_share(self, name: str, start: float, end: float) -> float:
        """Fraction of [start, end] the client's work ran (with overrun_s)."""
        total = sum(max(0.0, min(e, end) - max(s, start)) for s, e in self.clients[name].ran)
        return total / (end - start)

    FEED_S = 0.05

    def running(self, t: float) -> str | None:
        """The client on the GPU at t (None: idle)."""
        for c in self.clients.values():
            i = bisect.bisect_right(c.busy, (t, math.inf)) - 1
            if i >= 0 and c.busy[i][0] <= t < c.busy[i][1]:
                return c.name
        return None

    def _feed_clock(self) -> None:
        assert self.clock is not None
        self.clock.advance(self.now, self.running)
        samples = self.clock.samples(self._fed_until)
        self._fed_until = self.now
        self._handle(self.core.on_clock(samples, self.now))

    def run_until(self, t_end: float) -> None:
        while True:
            deadline = self.core.next_deadline()
            wake = self._wakeups[0][0] if self._wakeups else None
            if self.clock is not None and self._fed_until + self.FEED_S <= t_end:
                feed = self._fed_until + self.FEED_S
                if (deadline is None or feed <= deadline) and (wake is None or feed <= wake):
                    self.now = max(self.now, feed)
                    self._feed_clock()
                    continue
            nxt = min(x for x in (deadline, wake, t_end) if x is not None)
            if (
                nxt >= t_end
                and (wake is None or wake >= t_end)
                and (deadline is None or deadline >= t_end)
            ):
                self.now = t_end
                return
            self.now = max(self.now, nxt)
            if wake is not None and wake <= nxt:
                _, seq, name = heapq.heappop(self._wakeups)
                if seq != self.clients[name].cut_wake:  # (brought forward by a cut: asked)
                    self.request(name)
            else:
                self._handle(self.core.on_deadline(self.now))

    def share(self, name: str, start: float, end: float) -> float:
        """Fraction of [start, end] this client's GPU intervals cover."""
        total = sum(max(0.0, min(e, end) - max(s, start)) for s, e in self.clients[name].busy)
        return total / (end - start)
