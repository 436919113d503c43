"""gem-schd's /metrics endpoint: a minimal HTTP/1.x server on the daemon's own event loop, so a
scrape reads the scheduler's state in the thread that changes it (no locks, no second thread).

GET /metrics answers the Prometheus text format (gemini.core.metrics); any other path is a 404,
any other method a 405, anything that is not HTTP a 400 — then the connection closes.  A client
that sends nothing is dropped after READ_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from gemini.core.metrics import CONTENT_TYPE

log = logging.getLogger("gemini.metrics")
READ_TIMEOUT_S = 5.0
MAX_HEAD = 8192
# How long a rendered page is served again.  A page is a status snapshot, whose windows are
# walked on the scheduler's own loop (~0.8 ms with 8 clients): a flood of scrapes from the
# pod network delayed the tokens; Prometheus scrapes every 10-60 s.
PAGE_MAX_AGE_S = 1.0


def cached(page: Callable[[], bytes], max_age_s: float,
           clock: Callable[[], float]) -> Callable[[], bytes]:
    """`page`, rendered at most once per `max_age_s` of `clock`."""
    last: list[tuple[float, bytes]] = []

    def fresh_enough() -> bytes:
        now = clock()
        if not last or not 0.0 <= now - last[0][0] < max_age_s:
            last[:] = [(now, page())]
        return last[0][1]

    return fresh_enough


def _response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


def answer(head: bytes, page: Callable[[], bytes]) -> bytes:
    """The whole response to a request head (pure but for `page`)."""
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return _response("400 Bad Request", b"not an HTTP/1.x request\n")
    method, target = parts[0], parts[1].split(b"?", 1)[0]
    if method not in (b"GET", b"HEAD"):
        return _response("405 Method Not Allowed", b"GET /metrics\n")
    if target != b"/metrics":
        return _response("404 Not Found", b"see /metrics\n")
    body = page()
    response = _response("200 OK", body, CONTENT_TYPE)
    return response[: len(response) - len(body)] if method == b"HEAD" else response


class MetricsServer:
    def __init__(self, page: Callable[[], bytes]) -> None:
        self.page = page
        self.server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                asyncio.TimeoutError, ConnectionError) as exc:  # (two classes before 3.11)
            head = getattr(exc, "partial", b"") or b""
            if not head:
                writer.close()
                return
        try:
            writer.write(answer(head[:MAX_HEAD], self.page))
            await writer.drain()
        except ConnectionError:
            pass
        except Exception:  # a broken page must not take the scheduler down
            log.exception("metrics page failed")
            writer.write(_response("500 Internal Server Error", b"see the scheduler's log\n"))
        finally:
            writer.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
