"""A virtual-clock simulator for the scheduler core: saturating clients, one GPU, no sockets.

Each client behaves like a hook that always has work: it asks for a token, uses the GPU for the
quota it gets, and asks again about when the quota ends: from 2.5 ms before (as Gemini's hook does
when its next burst would not fit), which returns the token, to 2 ms after (a request that races
the expiry).  The times are drawn from a seeded generator, so runs are repeatable but clients do
not move in lock step.  Each request reports the
client's predicted burst (`burst_ms`), from which the scheduler sizes its quota.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from gemini.core.actions import Reply
from gemini.core.config import ClientSpec, ResourceConfig
from gemini.core.scheduler import SchedulerCore, Timing
from gemini.core.wire import Request, RequestType, Status


@dataclass
class SimClient:
    name: str
    conn: int
    busy: list[tuple[float, float]] = field(default_factory=list)  # GPU intervals it ran
    req_id: int = 0


class Sim:
    def __init__(
        self,
        specs: list[tuple[str, float, float]],
        timing: Timing | None = None,
        burst_ms: float = 0.0,
        seed: int = 1,
    ) -> None:
        self.now = 0.0
        config = ResourceConfig(tuple(ClientSpec(n, r, lim, 1 << 30) for n, r, lim in specs))
        self.core = SchedulerCore(config, timing or Timing(), self.now)
        self.clients = {n: SimClient(n, i + 1) for i, (n, _, _) in enumerate(specs)}
        self.burst_ms = burst_ms
        self._rng = random.Random(seed)
        self.by_conn = {c.conn: c for c in self.clients.values()}
        self._wakeups: list[tuple[float, int, str]] = []
        self._seq = 0
        self.replies: list[Reply] = []
        self.grants = 0

    def start(self, name: str, at: float = 0.0) -> None:
        self._wake(name, at)

    def _wake(self, name: str, at: float) -> None:
        self._seq += 1
        heapq.heappush(self._wakeups, (at, self._seq, name))

    def request(self, name: str) -> None:
        c = self.clients[name]
        c.req_id += 1
        req = Request(name, c.req_id, RequestType.QUOTA, (0.0, self.burst_ms))
        self._handle(self.core.on_request(c.conn, req, self.now))

    def _handle(self, actions: list) -> None:
        for a in actions:
            if isinstance(a, Reply) and a.type is RequestType.QUOTA:
                self.replies.append(a)
                if a.response.status is Status.OK:
                    self._granted(self.by_conn[a.conn], a.response.values[0] / 1000)

    def _granted(self, c: SimClient, quota_s: float) -> None:
        self.grants += 1
        back = self.now + max(quota_s + self._rng.uniform(-0.0025, 0.002), 0.0)
        c.busy.append((self.now, min(back, self.now + quota_s)))
        self._wake(c.name, back)

    def run_until(self, t_end: float) -> None:
        while True:
            deadline = self.core.next_deadline()
            wake = self._wakeups[0][0] if self._wakeups else None
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
                _, _, name = heapq.heappop(self._wakeups)
                self.request(name)
            else:
                self._handle(self.core.on_deadline(self.now))

    def share(self, name: str, start: float, end: float) -> float:
        """Fraction of [start, end] this client's GPU intervals cover."""
        total = sum(max(0.0, min(e, end) - max(s, start)) for s, e in self.clients[name].busy)
        return total / (end - start)
