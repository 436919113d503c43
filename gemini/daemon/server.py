"""The I/O shell shared by both daemons: a TCP (or Unix-socket) server of fixed-size request
frames that feeds a pure core and carries out the actions it returns, plus the core's one timer.

Who may talk is decided here, before the core hears of a connection: with a shared secret, the
first message must be a HELLO carrying it; on a Unix socket, the peer's uid must be allowed."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import logging
import os
import socket
import struct
from collections.abc import Callable, Iterable
from typing import Protocol

from gemini.core.actions import Action, Close, ConnId, Log, Reply, SendUpstream
from gemini.core.wire import (
    REQ_MSG_LEN,
    Request,
    RequestType,
    Response,
    Status,
    WireError,
    decode_request,
    encode_response,
)

log = logging.getLogger("gemini.server")

# A connection that has not proved the secret within this time is closed, so that silent
# connections cannot pile up before anyone knows who they are.
AUTH_TIMEOUT_S = 10.0
BUSY_POLL_ENV = "GEMINI_BUSY_POLL_MS"
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
SOCKET_MODE = 0o660


def busy_poll_from_env() -> float:
    """GEMINI_BUSY_POLL_MS in seconds (0: off); a bad value is said once and ignored."""
    text = os.environ.get(BUSY_POLL_ENV, "").strip()
    try:
        ms = float(text) if text else 0.0
    except ValueError:
        ms = -1.0
    if not 0.0 <= ms <= 60_000.0:
        log.warning("%s=%r is not a time in ms (0-60000): busy polling stays off",
                    BUSY_POLL_ENV, text)
        return 0.0
    return ms / 1000.0


class BusyPoll:
    """Keeps the event loop polling, never sleeping, for `window_s` after each event the
    server handles (a message; also a timer of the core's, a config edit: the clients' next
    messages come soon after).

    Why: on the VMs we measured, a process woken from idle answers 150-300 µs later (bench
    S6's echo floor); a token round trip wakes two daemons.  One that polls answers in tens of
    µs, at the cost of a CPU core while it polls.  How: a callback that re-queues itself keeps
    a ready callback in the loop, so the selector is asked with timeout 0."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.until = 0.0
        self.spinning = False
        self.spins = 0  # loop turns spent polling (for tests)

    def touch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.window_s <= 0.0:
            return
        self.until = loop.time() + self.window_s
        if not self.spinning:
            self.spinning = True
            loop.call_soon(self._spin, loop)

    def _spin(self, loop: asyncio.AbstractEventLoop) -> None:
        self.spins += 1
        if loop.time() < self.until:
            loop.call_soon(self._spin, loop)
        else:
            self.spinning = False


class Core(Protocol):
    def next_deadline(self) -> float | None: ...
    def on_deadline(self, now: float) -> list[Action]: ...


class FrameServer:
    """Accepts connections, decodes 80-byte requests and hands them to `on_request`.

    Bad bytes close only the connection that sent them, with a log line."""

    def __init__(
        self,
        core: Core,
        on_request: Callable[[ConnId, Request, float], list[Action]],
        on_disconnect: Callable[[ConnId, float], list[Action]],
        on_connect: Callable[[ConnId, float], list[Action]] | None = None,
        send_upstream: Callable[[SendUpstream], None] | None = None,
        secret: bytes | None = None,
    ) -> None:
        self.core = core
        self.secret = secret
        self.allowed_uids: frozenset[int] = frozenset()
        self.unix_path: str | None = None
        self._on_request = on_request
        self._on_disconnect = on_disconnect
        self._on_connect = on_connect
        self._send_upstream = send_upstream
        self.writers: dict[ConnId, asyncio.StreamWriter] = {}
        self._ids = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self.server: asyncio.Server | None = None
        self.busy_poll = BusyPoll(busy_poll_from_env())
        if self.busy_poll.window_s > 0.0:
            log.info("busy polling for %g ms after each event (%s)",
                     self.busy_poll.window_s * 1000, BUSY_POLL_ENV)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def now(self) -> float:
        return self.loop.time()

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        return int(self.server.sockets[0].getsockname()[1])

    async def start_unix(self, path: str, allow_uids: Iterable[int] = ()) -> None:
        """Listen on a Unix stream socket (mode 0660) that only our own uid, root and
        `allow_uids` may use: the file mode keeps strangers out, SO_PEERCRED checks the rest."""
        self.allowed_uids = frozenset({os.getuid(), 0, *allow_uids})
        self.unix_path = path
        self.server = await asyncio.start_unix_server(self._serve, path)
        os.chmod(path, SOCKET_MODE)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.server is not None:
            self.server.close()
        for writer in list(self.writers.values()):
            writer.close()
        if self.server is not None:
            await self.server.wait_closed()
        if self.unix_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_path)  # before 3.13 asyncio leaves the file behind

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = next(self._ids)
        # Tracked from the start, so that close() also ends connections still proving themselves.
        self.writers[conn] = writer
        peer = _peer(writer)
        try:
            admitted = self._peer_allowed(writer, peer) and await self._authenticate(
                reader, writer, peer)
        except (ConnectionError, OSError, asyncio.CancelledError):
            admitted = False
        if not admitted:
            self.writers.pop(conn, None)
            writer.close()
            return
        if self._on_connect is not None:
            self.run(self._on_connect(conn, self.now()))
        try:
            while True:
                frame = await reader.readexactly(REQ_MSG_LEN)
                try:
                    req = decode_request(frame)
                except WireError as exc:
                    log.warning("[%s] closing connection: %s", peer, exc)
                    break
                if req.type is RequestType.HELLO:
                    # Answered here, never by a core: a HELLO is about the connection.
                    if not self._answer_hello(writer, req, peer):
                        break
                    continue
                self.run(self._on_request(conn, req, self.now()))
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                log.warning("[%s] closing connection: truncated message", peer)
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass  # the peer went away, or we are shutting down: either way the connection ends
        finally:
            self.writers.pop(conn, None)
            writer.close()
            self.run(self._on_disconnect(conn, self.now()))

    def _peer_allowed(self, writer: asyncio.StreamWriter, peer: str) -> bool:
        creds = _peer_creds(writer)
        if creds is None or creds[1] in self.allowed_uids:
            return True
        log.warning("[%s] refused: uid %d may not use this socket (gem-pmgr --allow-uid)",
                    peer, creds[1])
        return False

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> bool:
        """With a secret, the first message must be a HELLO that carries it."""
        if self.secret is None:
            return True
        try:
            frame = await asyncio.wait_for(reader.readexactly(REQ_MSG_LEN), AUTH_TIMEOUT_S)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:  # a bare connect-and-close (a port probe) is not worth a line
                log.warning("[%s] refused: no or wrong secret", peer)
            return False
        except asyncio.TimeoutError:
            log.warning("[%s] refused: no or wrong secret (nothing within %g s)", peer,
                        AUTH_TIMEOUT_S)
            return False
        try:
            req = decode_request(frame)
        except WireError:
            req = Request("?", 0, RequestType.HELLO)  # garbage: refused like a wrong secret
        return self._answer_hello(writer, req, peer)

    def _proof_ok(self, req: Request) -> bool:
        if req.type is not RequestType.HELLO:
            return False
        if self.secret is None:
            return True  # clients may always say HELLO, whether or not we have a secret
        proof = req.args[0] if req.args else b""
        return isinstance(proof, bytes) and hmac.compare_digest(proof, self.secret)

    def _answer_hello(self, writer: asyncio.StreamWriter, req: Request, peer: str) -> bool:
        """Reply OK to a good proof; refuse anything else (echoing its id).  True: admitted."""
        ok = self._proof_ok(req)
        status = Status.OK if ok else Status.NOT_AUTHORIZED
        if not writer.is_closing():
            writer.write(encode_response(req.type, Response(req.req_id, status)))
        if not ok:
            log.warning("[%s] refused: no or wrong secret", peer)
        return ok

    def run(self, actions: list[Action]) -> None:
        self.busy_poll.touch(self.loop)  # the next message (a renewal, a reply) comes soon
        for action in actions:
            if isinstance(action, Reply):
                writer = self.writers.get(action.conn)
                if writer is not None and not writer.is_closing():
                    writer.write(encode_response(action.type, action.response) + action.body)
            elif isinstance(action, SendUpstream):
                if self._send_upstream is not None:
                    self._send_upstream(action)
            elif isinstance(action, Close):
                writer = self.writers.get(action.conn)
                if writer is not None:
                    writer.close()
            elif isinstance(action, Log):
                log.log(action.level, "[%s] %s", action.client, action.message)
        self._rearm()

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.core.next_deadline()
        if deadline is not None:
            self._timer = self.loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.run(self.core.on_deadline(self.now()))


def _peer_creds(writer: asyncio.StreamWriter) -> tuple[int, int, int] | None:
    """(pid, uid, gid) of a Unix-socket peer, as the kernel saw them at connect; None on TCP."""
    sock = writer.get_extra_info("socket")
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except OSError:
        return -1, -1, -1  # unknown: no uid is allowed, so the peer is refused (fail closed)
    pid, uid, gid = _PEERCRED.unpack(raw)
    return pid, uid, gid


def _peer(writer: asyncio.StreamWriter) -> str:
    """How log lines name a peer: host:port, or the pid and uid behind a Unix socket."""
    creds = _peer_creds(writer)
    if creds is not None:
        return f"unix pid {creds[0]} uid {creds[1]}"
    name = writer.get_extra_info("peername")
    if isinstance(name, tuple) and len(name) >= 2:
        return f"{name[0]}:{name[1]}"
    return str(name)
