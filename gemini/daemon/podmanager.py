"""gem-pmgr's shell: a server for the hooks of one client and a client of the scheduler."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import cast

from gemini.core.actions import SendUpstream
from gemini.core.podmanager import PodCore
from gemini.core.wire import (
    RSP_MSG_LEN,
    FrameReader,
    Request,
    RequestType,
    Status,
    WireError,
    decode_response,
    encode_request,
)
from gemini.daemon.server import FrameServer

log = logging.getLogger("gemini.pmgr")

RETRY_MIN_S = 0.05
RETRY_MAX_S = 2.0
# A link lost sooner than this was refused (a scheduler that wants a secret we lack, or fails on
# our first request), not broken: the next try backs off as after a refused connection.
STABLE_LINK_S = 1.0
HELLO_TIMEOUT_S = 5.0
# The core numbers its requests from 1 up; the HELLO's id stays clear of them.
HELLO_ID = 0


def jittered(step_s: float, draw: Callable[[], float] = random.random) -> float:
    """A retry's pause, drawn from the upper half of its backoff step: the pod managers that
    lost a restarted scheduler at one instant came back at the same instants, step after step
    (the hook's own, csrc/include/gemini/jitter.h, says more)."""
    return step_s * (1.0 - draw() / 2)


async def _backed_off(delay_s: float) -> float:
    """A jittered pause of `delay_s`; the next one's step, doubled up to RETRY_MAX_S."""
    await asyncio.sleep(jittered(delay_s))
    return min(delay_s * 2, RETRY_MAX_S)


class PodManagerDaemon:
    def __init__(
        self, name: str, scheduler_host: str, scheduler_port: int, secret: bytes | None = None,
        time_from_grant: bool = False,
    ) -> None:
        self.core = PodCore(name, time.monotonic(), time_from_grant)  # (FrameServer.now's clock)
        self.scheduler = (scheduler_host, scheduler_port)
        self.secret = secret
        self.server = FrameServer(
            self.core,
            self.core.on_hook_request,
            self.core.on_hook_disconnect,
            on_connect=self.core.on_hook_connect,
            send_upstream=self._send_upstream,
            secret=secret,
            owner=name,
        )
        self._upstream: UpstreamLink | None = None
        self._upstream_task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()
        self._refused_logged = False

    async def start(self, host: str, port: int) -> int:
        bound = await self.server.start(host, port)
        self._upstream_task = asyncio.create_task(self._keep_upstream())
        return bound

    async def start_unix(self, path: str, allow_uids: Iterable[int] = ()) -> None:
        await self.server.start_unix(path, allow_uids)
        self._upstream_task = asyncio.create_task(self._keep_upstream())

    async def close(self) -> None:
        if self._upstream_task is not None:
            self._upstream_task.cancel()
        if self._upstream is not None:
            self._upstream.close()
        await self.server.close()

    def _send_upstream(self, action: SendUpstream) -> None:
        link = self._upstream
        if link is not None and link.transport is not None and not link.transport.is_closing():
            link.transport.write(encode_request(action.request))

    async def _keep_upstream(self) -> None:
        """Stay connected to the scheduler, reconnecting with back-off after any failure."""
        delay = RETRY_MIN_S
        name = self.core.name
        loop = asyncio.get_running_loop()
        while True:
            try:
                _, link = await loop.create_connection(lambda: UpstreamLink(self),
                                                       *self.scheduler)
            except OSError as exc:
                if delay == RETRY_MIN_S:
                    log.warning("[%s] scheduler %s:%d unreachable (%s); retrying", name,
                                *self.scheduler, exc.strerror or exc)
                delay = await _backed_off(delay)
                continue
            if not await self._hello(link):
                link.close()
                delay = await _backed_off(delay)
                continue
            log.info("[%s] connected to scheduler %s:%d", name, *self.scheduler)
            self._upstream = link
            self.connected.set()
            self.server.feed(name, "the scheduler's connection",
                             lambda: self.core.on_scheduler_connected(self.server.now()))
            link.start()
            connected_at = loop.time()
            await link.lost
            self._upstream = None
            self.connected.clear()
            link.close()
            self.server.feed(name, "the scheduler's loss",
                             lambda: self.core.on_scheduler_lost(self.server.now()))
            if loop.time() - connected_at >= STABLE_LINK_S:
                # (a first pause too: every pod manager lost a restarted scheduler at once)
                delay = RETRY_MIN_S
                await asyncio.sleep(jittered(delay))
                continue
            delay = await _backed_off(delay)  # (it reconnected some 3,000 times a second)

    async def _hello(self, link: UpstreamLink) -> bool:
        """Prove the secret before anything else; False (logged once per streak) if refused."""
        if self.secret is None:
            return True
        hello = Request(self.core.name, HELLO_ID, RequestType.HELLO, (self.secret,))
        try:
            frame = await asyncio.wait_for(link.ask_first(encode_request(hello)),
                                           HELLO_TIMEOUT_S)
            status = decode_response(RequestType.HELLO, frame).status
        except (asyncio.TimeoutError, ConnectionError, OSError, WireError):
            status = Status.NOT_AUTHORIZED  # a scheduler that closes on us refused the proof
        if status is Status.OK:
            self._refused_logged = False
            return True
        if not self._refused_logged:
            log.error("[%s] scheduler %s:%d refused our secret (--secret-file); retrying",
                      self.core.name, *self.scheduler)
            self._refused_logged = True
        return False

    def on_upstream_frame(self, frame: bytes) -> bool:
        """A reply (or notice) from the scheduler; False: bad bytes, drop the connection."""
        req_id = int.from_bytes(frame[:4], "little", signed=True)
        req_type = self.core.upstream_type(req_id)
        if req_type is None:
            return self.server.feed(self.core.name, "a reply to no request",
                                    lambda: self.core.stray_reply(req_id))
        try:
            rsp = decode_response(req_type, frame)
        except WireError as exc:
            log.warning("[%s] bad reply from the scheduler: %s", self.core.name, exc)
            return False
        # (False on an internal error: the link is dropped, and the token asked again afresh)
        return self.server.feed(self.core.name, f"the scheduler's {req_type.name} reply",
                                lambda: self.core.on_upstream_response(rsp, self.server.now()))


class UpstreamLink(asyncio.Protocol):
    """The pod manager's connection to the scheduler: each 40-byte reply goes to the daemon
    as soon as it is in (a protocol, as daemon.server.FrameConnection says why).  Replies that
    come before `start()` (the scheduler's notices, right after the HELLO) wait for it, so the
    core hears of the scheduler's connection first."""

    def __init__(self, daemon: PodManagerDaemon) -> None:
        self.daemon = daemon
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._frames = FrameReader(RSP_MSG_LEN)
        self._first: asyncio.Future[bytes] | None = None  # the HELLO's reply, while awaited
        self._started = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's are not subclasses)

    def ask_first(self, frame: bytes) -> asyncio.Future[bytes]:
        """Send `frame`; the future is the first reply."""
        self._first = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(frame)
        return self._first

    def start(self) -> None:
        self._started = True
        self._drain()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self._frames.push(data)
        self._drain()

    def _drain(self) -> None:
        frames = self._frames
        while (first := self._first) is not None or self._started:
            frame = frames.pop()
            if frame is None:
                return
            if first is not None:
                self._first = None
                if not first.done():
                    first.set_result(frame)
            elif not self.daemon.on_upstream_frame(frame):
                frames.clear()
                self.close()
                return

    def connection_lost(self, exc: Exception | None) -> None:
        if self._first is not None and not self._first.done():
            self._first.set_exception(ConnectionError("the scheduler closed the connection"))
        if not self.lost.done():
            self.lost.set_result(None)


async def serve_pod_manager(
    name: str,
    host: str,
    port: int,
    scheduler_host: str,
    scheduler_port: int,
    stop: asyncio.Event,
    *,
    secret: bytes | None = None,
    unix: str | None = None,
    allow_uids: Iterable[int] = (),
    time_from_grant: bool = False,
) -> None:
    """Serve the hooks on host:port, or on the Unix socket `unix` instead when given."""
    daemon = PodManagerDaemon(name, scheduler_host, scheduler_port, secret, time_from_grant)
    guarded = ", hooks must prove the secret" if secret is not None else ""
    if unix is not None:
        await daemon.start_unix(unix, allow_uids)
        uids = ", ".join(str(u) for u in sorted(daemon.server.allowed_uids))
        log.info("[%s] pod manager listening on unix:%s (uids %s)%s", name, unix, uids, guarded)
    else:
        bound = await daemon.start(host, port)
        log.info("[%s] pod manager listening on %s:%d%s", name, host, bound, guarded)
    try:
        await stop.wait()
    finally:
        await daemon.close()
