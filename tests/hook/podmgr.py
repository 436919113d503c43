"""A scripted pod manager for the hook tests: loopback TCP on port 0, one thread per connection.

It records every request, answers QUOTA with `quota_ms`, `quota_flags` and `sharers` (and
a send time `sent_late_s` ago)
(`quota_delay_s` late, as a capped client waits for its turn; or holds the answers until
`release()`, or after `hold_quota_after` of them; `quota_asked` and `quota_answered` say
when each came and went, on time.monotonic()), answers MEM_UPDATE with the real pod
manager's ledger rule (refuse what would pass `limit`), and, like the real one, gives a
connection's bytes back when it closes, and takes back what a RECALL gives.  `recall()` sends
every connection an unsolicited RECALL, `cut()` an unsolicited token cut.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field

from gemini.core import wire
from gemini.core.wire import MEM_CLAIM, Request, RequestType, Response, Status


@dataclass
class FakePodManager:
    name: str = "hooktest"
    limit: int = 1 << 30
    mem_flags: int = 0  # MEM_LIMIT's flags word (wire.MEM_FLAG_*)
    quota_ms: float = 10_000.0
    quota_flags: int = 0  # the QUOTA reply's flags word (wire.QUOTA_FLAG_*)
    sharers: int = 0  # the QUOTA reply's processes sharing the token (0: not said)
    hold_quota: bool = False
    hold_quota_after: int | None = None  # answer this many QUOTA requests, then hold
    quota_delay_s: float = 0.0
    # Each QUOTA answer says it was sent this long before it was (its sent_at word; None: not
    # said, as a v1 pod manager).
    sent_late_s: float | None = None
    requests: list[Request] = field(default_factory=list)
    quota_answered: list[float] = field(default_factory=list)  # when each QUOTA was answered
    quota_asked: list[float] = field(default_factory=list)  # ... and when each came
    used: int = 0
    connections: int = 0
    stray: bytes = b""  # sent once, before the next reply (a stream out of step)
    # While set, MEM_LIMIT and MEM_UPDATE are answered with it (a pod manager that does not
    # know its client's limit yet); memory_refused counts them.
    refuse_memory: Status | None = None
    memory_refused: int = 0
    memory_refused_at: list[float] = field(default_factory=list)  # when each was refused
    close_at_first: int = 0  # this many next connections are closed at their first request

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        self._send = threading.Lock()  # frames from several threads never interleave
        self._held: list[tuple[socket.socket, Request]] = []
        self._per_conn: dict[int, int] = {}
        self._spoken: set[int] = set()  # connections that made a request (close_at_first)
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    # ---- test side ---------------------------------------------------------------------------

    def of_type(self, t: RequestType) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.type is t]

    def wait_for(self, pred, timeout: float = 10.0) -> bool:
        """Wait until pred(self) is true (evaluated under the lock after every request)."""
        with self._lock:
            return self._lock.wait_for(lambda: pred(self), timeout)

    def release(self) -> None:
        """Answer the QUOTA requests held so far and stop holding."""
        with self._lock:
            self.hold_quota = False
            self.hold_quota_after = None
            held, self._held = self._held, []
        for conn, req in held:
            self._reply(conn, req, Status.OK, self._quota_values())

    def recall(self, lacks: int = 1) -> None:
        """Ask every hook connected to give its unspent lease back (unsolicited RECALL)."""
        frame = wire.encode_response(
            RequestType.RECALL, Response(wire.NOTIFY_ID, Status.OK, (lacks,)))
        for c in list(self._conns):
            with self._send, contextlib.suppress(OSError):
                c.sendall(frame)

    def cut(self, left_ms: float, sent_at: float | None = None) -> None:
        """Cut every hook's token to `left_ms` (unsolicited QUOTA, wire.CUT_ID: a lowered
        cap), said to be sent at `sent_at` (time.monotonic(); default: now)."""
        when = time.monotonic() if sent_at is None else sent_at
        values = (left_ms, self.quota_flags, self.sharers, when)
        frame = wire.encode_response(RequestType.QUOTA,
                                     Response(wire.CUT_ID, Status.OK, values))
        for c in list(self._conns):
            with self._send, contextlib.suppress(OSError):
                c.sendall(frame)

    def drop_connections(self) -> None:
        """Cut every hook's connection, as a pod manager that died and came back would (the
        bytes of those connections are given back); new connections are accepted."""
        for c in list(self._conns):
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop = True
        # shutdown() wakes the accept() thread; close() alone leaves it listening until then
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    # ---- server side -------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            with self._lock:
                self.connections += 1
                self._lock.notify_all()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _quota_values(self) -> tuple[float, ...]:
        """A QUOTA answer's values, as now set (held answers get what is set when released)."""
        values = (self.quota_ms, self.quota_flags, self.sharers)
        if self.sent_late_s is None:
            return values
        return *values, time.monotonic() - self.sent_late_s

    def _reply(self, conn: socket.socket, req: Request, status: Status, values: tuple) -> None:
        frame = wire.encode_response(req.type, Response(req.req_id, status, values))
        with self._send, contextlib.suppress(OSError):
            frame, self.stray = self.stray + frame, b""
            conn.sendall(frame)
        if req.type is RequestType.QUOTA:
            with self._lock:
                self.quota_answered.append(time.monotonic())
                self._lock.notify_all()

    def _serve(self, conn: socket.socket) -> None:
        reader = wire.FrameReader(wire.REQ_MSG_LEN)
        key = id(conn)
        try:
            while True:
                data = conn.recv(4096)
                if not data:
                    break
                for frame in reader.feed(data):
                    self._handle(conn, key, wire.decode_request(frame))
        except OSError:
            pass
        finally:
            with self._lock:
                self.used -= self._per_conn.pop(key, 0)
                self._lock.notify_all()
            conn.close()

    def _handle(self, conn: socket.socket, key: int, req: Request) -> None:
        with self._lock:
            if key not in self._spoken and self.close_at_first > 0:
                self.close_at_first -= 1  # (a pod manager that accepts, then goes)
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                return
            self._spoken.add(key)
            self.requests.append(req)
            if req.type is RequestType.QUOTA:
                self.quota_asked.append(time.monotonic())
            self._lock.notify_all()
            if req.name != self.name:
                reply = (Status.UNKNOWN_CLIENT, ())
            elif req.type is RequestType.QUOTA:
                if self.hold_quota_after is not None:
                    self.hold_quota = self.hold_quota or self.hold_quota_after <= 0
                    self.hold_quota_after -= 1
                if self.hold_quota:
                    self._held.append((conn, req))
                    return
                reply = (Status.OK, self._quota_values())
                if self.quota_delay_s > 0:
                    threading.Timer(self.quota_delay_s, self._reply,
                                    (conn, req, *reply)).start()
                    return
            elif (self.refuse_memory is not None
                  and req.type in (RequestType.MEM_LIMIT, RequestType.MEM_UPDATE)):
                reply = (self.refuse_memory, ())
                self.memory_refused += 1
                self.memory_refused_at.append(time.monotonic())
            elif req.type is RequestType.MEM_LIMIT:
                reply = (Status.OK, (self.used, self.limit, self.mem_flags))
            elif req.type is RequestType.MEM_UPDATE:
                size, is_alloc = int(req.args[0]), int(req.args[1])
                mine = self._per_conn.get(key, 0)
                if is_alloc:  # (a claim, MEM_CLAIM, is counted over the limit too)
                    ok = is_alloc == MEM_CLAIM or self.used + size <= self.limit
                    if ok:
                        self.used += size
                        self._per_conn[key] = mine + size
                else:
                    size = min(size, mine)
                    self.used -= size
                    self._per_conn[key] = mine - size
                    ok = True
                reply = (Status.OK, (int(ok),))
            elif req.type is RequestType.RECALL:
                size = min(int(req.args[0]), self._per_conn.get(key, 0))
                self.used -= size
                self._per_conn[key] = self._per_conn.get(key, 0) - size
                reply = (Status.OK, ())
            else:
                reply = (Status.OK, ())
        self._reply(conn, req, *reply)
