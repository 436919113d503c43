"""A virtual-clock simulator for the scheduler core: saturating clients, one GPU, no sockets.

Each client behaves like a hook that always has work: it asks for a token, uses the GPU for the
whole quota it gets, and asks again the moment the quota ends (which returns the token).  A client
may also hold the GPU past its quota (`overrun_s`): that time is reported as overuse next time.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from gemini.core.actions import Reply
from gemini.core.config import ClientSpec, ResourceConfig
from gemini.core.scheduler import SchedulerCore, Timing
from gemini.core.wire import Request, RequestType, Status


@dataclass
class SimClient:
    name: str
    conn: int
    overrun_s: float = 0.0
    busy: list[tuple[float, float]] = field(default_factory=list)  # GPU intervals it ran
    req_id: int = 0


class Sim:
    def __init__(self, specs: list[tuple[str, float, float]], timing: Timing | None = None,
                 overrun_s: float = 0.0) -> None:
        self.now = 0.0
        config = ResourceConfig(tuple(ClientSpec(n, r, l, 1 << 30) for n, r, l in specs))
        self.core = SchedulerCore(config, timing or Timing(), self.now)
        self.clients = {n: SimClient(n, i + 1, overrun_s) for i, (n, _, _) in enumerate(specs)}
        self.by_conn = {c.conn: c for c in self.clients.values()}
        self._wakeups: list[tuple[float, int, str]] = []
        self._seq = 0
        self.replies: list[Reply] = []
        self.grants = 0

    def start(self, name: str, at: float = 0.0) -> None:
        self._wake(name, at, overuse_ms=0.0)

    def _wake(self, name: str, at: float, overuse_ms: float) -> None:
        self._seq += 1
        heapq.heappush(self._wakeups, (at, self._seq, f"{name}\0{overuse_ms}"))

    def request(self, name: str, overuse_ms: float = 0.0, burst_ms: float = 0.0) -> None:
        c = self.clients[name]
        c.req_id += 1
        req = Request(name, c.req_id, RequestType.QUOTA, (overuse_ms, burst_ms))
        self._handle(self.core.on_request(c.conn, req, self.now))

    def _handle(self, actions: list) -> None:
        for a in actions:
            if isinstance(a, Reply) and a.type is RequestType.QUOTA:
                self.replies.append(a)
                if a.response.status is Status.OK:
                    self._granted(self.by_conn[a.conn], a.response.values[0] / 1000)

    def _granted(self, c: SimClient, quota_s: float) -> None:
        self.grants += 1
        end = self.now + quota_s + c.overrun_s
        c.busy.append((self.now, end))
        self._wake(c.name, self.now + quota_s, overuse_ms=c.overrun_s * 1000)

    def run_until(self, t_end: float) -> None:
        while True:
            deadline = self.core.next_deadline()
            wake = self._wakeups[0][0] if self._wakeups else None
            nxt = min(x for x in (deadline, wake, t_end) if x is not None)
            if nxt >= t_end and (wake is None or wake >= t_end) and (
                    deadline is None or deadline >= t_end):
                self.now = t_end
                return
            self.now = max(self.now, nxt)
            if wake is not None and wake <= nxt:
                _, _, payload = heapq.heappop(self._wakeups)
                name, overuse = payload.split("\0")
                self.request(name, float(overuse))
            else:
                self._handle(self.core.on_deadline(self.now))

    def share(self, name: str, start: float, end: float) -> float:
        """Fraction of [start, end] this client's GPU intervals cover."""
        total = sum(max(0.0, min(e, end) - max(s, start)) for s, e in self.clients[name].busy)
        return total / (end - start)
