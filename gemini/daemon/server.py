"""The I/O shell shared by both daemons: a TCP (or Unix-socket) server of fixed-size request
frames that feeds a pure core and carries out the actions it returns, plus the core's one timer.

Who may talk is decided here, before the core hears of a connection: with a shared secret, the
first message must be a HELLO carrying it; on a Unix socket, the peer's uid must be allowed."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import itertools
import logging
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable
from typing import Protocol, cast

from gemini.core.actions import Action, Close, ConnId, Log, Reply, SendUpstream
from gemini.core.wire import (
    REQ_MSG_LEN,
    FrameReader,
    Request,
    RequestType,
    Response,
    Status,
    UnknownRequestType,
    WireError,
    decode_request,
    encode_refusal,
    encode_response,
)

log = logging.getLogger("gemini.server")

# A connection that has not proved the secret within this time is closed, so that silent
# connections cannot pile up before anyone knows who they are.
AUTH_TIMEOUT_S = 10.0
BUSY_POLL_ENV = "GEMINI_BUSY_POLL_MS"
# The loop's timers wake up to about a millisecond late (epoll's timeout is whole ms, and so is
# uvloop's clock): the core's deadline is woken this much early (1.5-3 ms on uvloop, which
# rounds it to its whole ms), and the rest of the way is polled, a turn of the loop at a time
# (messages are still served meanwhile).
TIMER_EARLY_S = 0.0015
# A deadline the core failed on is tried again after 20 ms, 40 ms, ... up to 1 s.
TIMER_RETRY_S = 0.01
TIMER_RETRY_MAX_S = 1.0
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
        owner: str = "",
    ) -> None:
        self.core = core
        self.secret = secret
        # The client whose processes connect (a pod manager's), named in each line about one
        # of them: the pod managers of a node may log to one stream.  "" for the scheduler.
        self.owner = owner
        self.allowed_uids: frozenset[int] = frozenset()
        self.unix_path: str | None = None
        self._unix_file: tuple[int, int, int] | None = None  # (which file it is: close())
        self._on_request = on_request
        self._on_disconnect = on_disconnect
        self._on_connect = on_connect
        self._send_upstream = send_upstream
        self.transports: dict[ConnId, asyncio.Transport] = {}
        self._ids = itertools.count(1)
        self._timer: asyncio.Handle | None = None
        self._timer_at: float | None = None
        self._timer_failures = 0  # deadlines the core failed on in a row
        self._failures_traced: set[tuple[str, type]] = set()
        self.server: asyncio.Server | None = None
        self.busy_poll = BusyPoll(busy_poll_from_env())
        if self.busy_poll.window_s > 0.0:
            log.info("busy polling for %g ms after each event (%s)",
                     self.busy_poll.window_s * 1000, BUSY_POLL_ENV)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def now(self) -> float:
        """The core's clock: CLOCK_MONOTONIC, read at each event.  Not the loop's: uvloop's
        is libuv's, in whole milliseconds, so each grant was booked up to a millisecond off
        (H200, 2026-12-04: grants reached their hooks 0.19-1.17 ms, p10 to p90, after the time
        they were booked at; tokens that then ran on past the next holder's start gave the
        pairs' overuse p99 of 2.5-2.7 ms: bench/handovers.py)."""
        return time.monotonic()

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        self.server = await self.loop.create_server(self._connection, host, port,
                                                    reuse_address=True)
        return int(self.server.sockets[0].getsockname()[1])

    async def start_unix(self, path: str, allow_uids: Iterable[int] = ()) -> None:
        """Listen on a Unix stream socket (mode 0660) that only our own uid, root and
        `allow_uids` may use: the file mode keeps strangers out, SO_PEERCRED checks the rest."""
        self.allowed_uids = frozenset({os.getuid(), 0, *allow_uids})
        if _someone_listens(path):  # (asyncio would take the path from under it)
            raise OSError(errno.EADDRINUSE, "another daemon listens there")
        self.server = await self.loop.create_unix_server(self._connection, path)
        os.chmod(path, SOCKET_MODE)
        self.unix_path = path
        self._unix_file = _file_id(path)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.server is not None:
            self.server.close()
        # Before 3.13 asyncio leaves the file behind; but not one that another daemon, started
        # meanwhile, listens on now (a restart whose new daemon came up first lost it).  At
        # once, as listening ends: the awaits below left another daemon the time to take the
        # path over (and a file made within the same clock tick may read as ours: _file_id).
        if self.unix_path is not None and _file_id(self.unix_path) == self._unix_file:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_path)
        for transport in list(self.transports.values()):
            # (abort: close() waits for a peer that does not read its replies to take them,
            # and wait_closed() for every connection since 3.12.1: SIGTERM hung on such a peer)
            transport.abort()
        if self.server is not None:
            await self.server.wait_closed()

    def _connection(self) -> FrameConnection:
        return FrameConnection(self, next(self._ids))

    def feed(self, who: str, what: str, event: Callable[[], list[Action]],
             poll: bool = True) -> bool:
        """Hand the core one event (`event()` returns its actions) and carry the actions out.
        False: the core failed on it (see `_failed`); the caller ends what fed it.  `poll`:
        the clients' next messages come soon after it (BusyPoll)."""
        try:
            actions = event()
        except Exception:
            self._failed(who, what)
            return False
        return self.run(actions, who, what, poll)

    def _failed(self, who: str, what: str) -> None:
        """A core that raises is a bug of ours, and one client's event must not stop the daemon
        serving the rest: it is logged with `who` the event was about (the traceback the first
        time this kind of event fails so, whoever it was about; one line after), and the core's
        timer is re-armed.  (A connection whose request failed is closed by its caller, so that
        its client comes back afresh.)"""
        exc = sys.exc_info()[1]
        key = (what, type(exc))  # (not `who`: a peer's port is new at every reconnection)
        if key in self._failures_traced:
            log.error("[%s] internal error on %s again: %r", who, what, exc)
        else:
            self._failures_traced.add(key)
            log.exception("[%s] internal error on %s; the daemon goes on serving the others "
                          "(please report this traceback)", who, what)
        self._rearm()

    def connected(self, conn: ConnId, peer: str) -> bool:
        """A connection is admitted (its secret proven, where there is one)."""
        on_connect = self._on_connect
        if on_connect is None:
            return True
        return self.feed(peer, "a new connection", lambda: on_connect(conn, self.now()))

    def received(self, conn: ConnId, req: Request) -> bool:
        """One request to the core; False: the core failed on it (the caller closes)."""
        what = f"a {req.type.name} request"
        try:  # (not through feed: no closure on the hot path)
            actions = self._on_request(conn, req, self.now())
        except Exception:
            self._failed(req.name, what)
            return False
        return self.run(actions, req.name, what)

    def disconnected(self, conn: ConnId, peer: str) -> None:
        """An admitted connection is gone."""
        self.feed(peer, "a closed connection", lambda: self._on_disconnect(conn, self.now()))

    def peer_allowed(self, transport: asyncio.BaseTransport, peer: str) -> bool:
        creds = _peer_creds(transport)
        if creds is None or creds[1] in self.allowed_uids:
            return True
        log.warning("[%s] refused: uid %d may not use this socket (gem-pmgr --allow-uid)",
                    peer, creds[1])
        return False

    def _proof_ok(self, req: Request) -> bool:
        if req.type is not RequestType.HELLO:
            return False
        if self.secret is None:
            return True  # clients may always say HELLO, whether or not we have a secret
        proof = req.args[0] if req.args else b""
        return isinstance(proof, bytes) and hmac.compare_digest(proof, self.secret)

    def answer_hello(self, transport: asyncio.Transport, req: Request, peer: str) -> bool:
        """Reply OK to a good proof; refuse anything else (echoing its id).  True: admitted."""
        ok = self._proof_ok(req)
        status = Status.OK if ok else Status.NOT_AUTHORIZED
        if not transport.is_closing():
            transport.write(encode_response(req.type, Response(req.req_id, status)))
        if not ok:
            log.warning("[%s] refused: no or wrong secret", peer)
        return ok

    def run(self, actions: list[Action], who: str, what: str, poll: bool = True) -> bool:
        """Carry out the core's actions on `who`'s `what`.  One that cannot be (a reply that
        does not encode) is logged as the core's failure, and the rest are still carried out:
        a config edit's later replies were dropped, and never sent again.  False: one failed."""
        if poll:
            self.busy_poll.touch(self.loop)  # the next message (a renewal, a reply) comes soon
        ok = True
        for action in actions:
            try:
                self._carry_out(action)
            except Exception:
                self._failed(who, what)
                ok = False
        self._rearm()
        return ok

    def _carry_out(self, action: Action) -> None:
        if isinstance(action, Reply):
            transport = self.transports.get(action.conn)
            if transport is not None and not transport.is_closing():
                transport.write(encode_response(action.type, action.response) + action.body)
        elif isinstance(action, SendUpstream):
            if self._send_upstream is not None:
                self._send_upstream(action)
        elif isinstance(action, Close):
            transport = self.transports.get(action.conn)
            if transport is not None:
                transport.close()
        elif isinstance(action, Log):
            log.log(action.level, "[%s] %s", action.client, action.message)

    def _rearm(self) -> None:
        deadline = self.core.next_deadline()
        if deadline == self._timer_at:
            return  # (most requests leave it where it was)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is not None:
            self._timer = self._wake_at(deadline)

    def _wake_at(self, deadline: float) -> asyncio.Handle:
        """_on_timer at `deadline` (the core's clock): a timer that wakes TIMER_EARLY_S
        before it, then a turn of the loop at a time."""
        delay = deadline - time.monotonic()
        if delay > TIMER_EARLY_S:
            return self.loop.call_later(delay - TIMER_EARLY_S, self._on_timer)
        return self.loop.call_soon(self._on_timer)

    def _on_timer(self) -> None:
        due = self._timer_at
        if due is not None and self.now() < due:  # (woken early on purpose: on to it)
            self._timer = self._wake_at(due)
            return
        self._timer = self._timer_at = None
        if self.feed("timer", "its deadline", lambda: self.core.on_deadline(self.now())):
            self._timer_failures = 0
        elif self._timer is not None and self._timer_at is not None \
                and self._timer_at <= self.now():
            # A deadline the core keeps failing on would spin the loop: it is tried again after
            # a pause that doubles, up to TIMER_RETRY_MAX_S, or at the core's next deadline.
            self._timer.cancel()
            self._timer_failures += 1
            pause = min(TIMER_RETRY_S * 2 ** self._timer_failures, TIMER_RETRY_MAX_S)
            self._timer = self.loop.call_later(pause, self._on_timer)


def _peer_creds(transport: asyncio.BaseTransport) -> tuple[int, int, int] | None:
    """(pid, uid, gid) of a Unix-socket peer, as the kernel saw them at connect; None on TCP."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except OSError:
        return -1, -1, -1  # unknown: no uid is allowed, so the peer is refused (fail closed)
    pid, uid, gid = _PEERCRED.unpack(raw)
    return pid, uid, gid


def _someone_listens(path: str) -> bool:
    """Does a live server answer on the Unix socket `path`?  (A file left by one that died
    refuses the connection: it is taken over.)"""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.setblocking(False)
        try:
            probe.connect(path)
        except BlockingIOError:  # (its backlog is full: it lives)
            return True
        except OSError:
            return False
        return True


def _file_id(path: str) -> tuple[int, int, int] | None:
    """Which file `path` is: its device, inode and change time (ext4 hands a new file the
    inode number just freed: another daemon's socket, made as ours closed, read as ours)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns


def _peer(transport: asyncio.BaseTransport) -> str:
    """How log lines name a peer: host:port, or the pid and uid behind a Unix socket."""
    creds = _peer_creds(transport)
    if creds is not None:
        return f"unix pid {creds[0]} uid {creds[1]}"
    name = transport.get_extra_info("peername")
    if isinstance(name, tuple) and len(name) >= 2:
        return f"{name[0]}:{name[1]}"
    return str(name)


class FrameConnection(asyncio.Protocol):
    """One connection of a FrameServer: 80-byte requests, each handed to the core as soon as it
    is in, in the same turn of the event loop.  (A protocol, not a stream reader's coroutine:
    a stream wakes a task to hand it each frame, one more turn of the loop per message.  An
    echo server on uvloop answered in 157 µs paced as a protocol, 229 as a stream, on the
    development machine; the token round trip on the H100 moved less than its noise:
    bench/JOURNAL-issue12.md.)

    With a secret, the first frame must be a HELLO that carries it, within AUTH_TIMEOUT_S."""

    def __init__(self, server: FrameServer, conn: ConnId) -> None:
        self.server = server
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.admitted = False
        self._frames = FrameReader(REQ_MSG_LEN)
        self._auth_timer: asyncio.TimerHandle | None = None
        self._replies_backed_up = False  # (pause_writing)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # (uvloop's are not subclasses)
        server = self.server
        self.transport = transport
        # Tracked from the start, so that close() also ends connections still proving themselves.
        server.transports[self.conn] = transport
        self.peer = f"{server.owner}: {_peer(transport)}" if server.owner else _peer(transport)
        if not server.peer_allowed(transport, self.peer):
            transport.close()
        elif server.secret is None:
            self._admit()
        else:
            self._auth_timer = server.loop.call_later(AUTH_TIMEOUT_S, self._auth_timed_out)

    def _admit(self) -> None:
        self.admitted = True
        if not self.server.connected(self.conn, self.peer):
            self._close()

    def _auth_timed_out(self) -> None:
        self._auth_timer = None
        log.warning("[%s] refused: no or wrong secret (nothing within %g s)", self.peer,
                    AUTH_TIMEOUT_S)
        self._close()

    def _close(self) -> None:
        self._frames.clear()
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self._frames.push(data)
        self._serve_frames()

    def _serve_frames(self) -> None:
        frames = self._frames
        while not self._replies_backed_up and (frame := frames.pop()) is not None:
            transport = self.transport
            if transport is None or transport.is_closing():
                frames.clear()
                return
            if self.admitted:
                self._on_frame(transport, frame)
            else:
                self._on_first_frame(transport, frame)

    def _on_first_frame(self, transport: asyncio.Transport, frame: bytes) -> None:
        """A connection still proving the secret: its first frame must be the HELLO."""
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        try:
            req = decode_request(frame)
        except WireError:
            req = Request("?", 0, RequestType.HELLO)  # garbage: refused like a wrong secret
        if self.server.answer_hello(transport, req, self.peer):
            self._admit()
        else:
            self._close()

    def _on_frame(self, transport: asyncio.Transport, frame: bytes) -> None:
        server = self.server
        try:
            req = decode_request(frame)
        except UnknownRequestType as exc:  # (closed, a process's memory went with it)
            log.warning("[%s] %s refused (BAD_REQUEST); connection kept", self.peer, exc)
            transport.write(encode_refusal(exc.req_id, Status.BAD_REQUEST))
            return
        except WireError as exc:
            log.warning("[%s] closing connection: %s", self.peer, exc)
            self._close()
            return
        if req.type is RequestType.HELLO:
            # Answered here, never by a core: a HELLO is about the connection.
            if not server.answer_hello(transport, req, self.peer):
                self._close()
            return
        if not server.received(self.conn, req):
            self._close()

    # A peer that does not read its replies (its write buffer past the high-water mark) is not
    # served, nor read from, until it does: one that sent STATUS requests and never read grew
    # the scheduler by 650 MiB in 20 s, and every other client's grants waited behind its
    # replies.  (The frames already read wait in the frame reader.)
    def pause_writing(self) -> None:
        self._replies_backed_up = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._replies_backed_up = False
        self._serve_frames()
        if self.transport is not None and not self.transport.is_closing() \
                and not self._replies_backed_up:
            self.transport.resume_reading()

    def eof_received(self) -> bool:
        # (Whole frames may wait, unserved, where the peer's replies backed up: not truncated.)
        if self._frames.pending % REQ_MSG_LEN and self.admitted:
            log.warning("[%s] closing connection: truncated message", self.peer)
        elif self._frames.pending:  # (a bare connect-and-close, a port probe, is not worth a line)
            log.warning("[%s] refused: no or wrong secret", self.peer)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        server = self.server
        server.transports.pop(self.conn, None)
        self.transport = None
        if self.admitted:
            self.admitted = False
            server.disconnected(self.conn, self.peer)
