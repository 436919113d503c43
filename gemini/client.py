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
    WireError,
    decode_response,
    encode_request,
)


class Connection:
    def __init__(self, host: str, port: int, name: str, timeout: float | None = 5.0) -> None:
        self.name = name
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._ids = itertools.count(1)

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


def query_status(host: str, port: int, timeout: float = 5.0) -> dict[str, Any]:
    with Connection(host, port, "gemini-status", timeout) as conn:
        _, body = conn.call(RequestType.STATUS)
    result: dict[str, Any] = json.loads(body)
    return result
