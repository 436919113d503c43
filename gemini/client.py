"""A small blocking client of the protocol, for tools and tests (`gemini status`, fake hooks)."""

from __future__ import annotations

import itertools
import json
import socket
from typing import Any

from gemini.core.wire import (
    MAX_STATUS_BODY,
    RSP_MSG_LEN,
    Request,
    RequestType,
    Response,
    Status,
    WireError,
    decode_response,
    encode_request,
)


class NotAuthorized(ConnectionError):
    """The server wants a shared secret we do not have (or have wrong): --secret-file."""


class NotAScheduler(ConnectionError):
    """What answered is no gem-schd (a pod manager's port, say), or its reply made no sense."""


class Connection:
    """One connection to a daemon: TCP to host:port, or the Unix socket `unix` when given.
    With a `secret`, the first message proves it (a server with a secret refuses all else)."""

    def __init__(
        self,
        host: str,
        port: int,
        name: str,
        timeout: float | None = 5.0,
        *,
        secret: bytes | None = None,
        unix: str | None = None,
    ) -> None:
        self.name = name
        self._ids = itertools.count(1)
        if unix is not None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            try:
                self.sock.connect(unix)
            except OSError:
                self.sock.close()
                raise
        else:
            self.sock = socket.create_connection((host, port), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if secret is not None:
            self.hello(secret)

    def hello(self, secret: bytes) -> None:
        try:
            rsp, _ = self.call(RequestType.HELLO, secret)
        except ConnectionError:
            rsp = None  # closed on us: an old server that does not know HELLO, or a refusal
        if rsp is None or rsp.status is not Status.OK:
            self.close()
            raise NotAuthorized("the server refused our secret (no or wrong --secret-file)")

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("connection closed by the server")
            data += chunk
        return data

    def call(self, req_type: RequestType, *args: float | int | bytes) -> tuple[Response, bytes]:
        """Send one request and wait for its reply (skipping unsolicited notices)."""
        req = Request(self.name, next(self._ids), req_type, tuple(args))
        self.sock.sendall(encode_request(req))
        while True:
            rsp = decode_response(req_type, self._read(RSP_MSG_LEN))
            if rsp.req_id == req.req_id:
                break
        body = b""
        if req_type is RequestType.STATUS:
            size = int(rsp.values[0])
            if size > MAX_STATUS_BODY:
                raise WireError(f"status body of {size} bytes is too large")
            body = self._read(size)
        return rsp, body


def query_status(
    host: str, port: int, timeout: float = 5.0, secret: bytes | None = None
) -> dict[str, Any]:
    """The scheduler's status; an OSError for anything else (NotAuthorized: a secret is wanted,
    NotAScheduler: another daemon answered, or nonsense)."""
    try:
        with Connection(host, port, "gemini-status", timeout, secret=secret) as conn:
            rsp, body = conn.call(RequestType.STATUS)
        if rsp.status is Status.NOT_AUTHORIZED:
            raise NotAuthorized("the scheduler wants a shared secret: --secret-file")
        if rsp.status is not Status.OK:
            raise NotAScheduler(f"port {port} answered {rsp.status.name}: not a gem-schd (a pod "
                                "manager's port?)")
        result = json.loads(body)
    except (WireError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotAScheduler(f"port {port} does not answer as a gem-schd does ({exc})") from None
    if not isinstance(result, dict):
        raise NotAScheduler(f"port {port} does not answer as a gem-schd does (a JSON "
                            f"{type(result).__name__})")
    return result
