"""The I/O shell shared by both daemons: a TCP server of fixed-size request frames that feeds a
pure core and carries out the actions it returns, plus the core's one timer."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Protocol

from gemini.core.actions import Action, Close, ConnId, Log, Reply, SendUpstream
from gemini.core.wire import REQ_MSG_LEN, Request, WireError, decode_request, encode_response

log = logging.getLogger("gemini.server")


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
    ) -> None:
        self.core = core
        self._on_request = on_request
        self._on_disconnect = on_disconnect
        self._on_connect = on_connect
        self._send_upstream = send_upstream
        self.writers: dict[ConnId, asyncio.StreamWriter] = {}
        self._ids = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self.server: asyncio.Server | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def now(self) -> float:
        return self.loop.time()

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.server is not None:
            self.server.close()
        for writer in list(self.writers.values()):
            writer.close()
        if self.server is not None:
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = next(self._ids)
        self.writers[conn] = writer
        peer = writer.get_extra_info("peername")
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

    def run(self, actions: list[Action]) -> None:
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
