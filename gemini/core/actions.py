"""What the pure cores ask their I/O shells to do.  The shells only carry these out."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gemini.core.wire import Request, RequestType, Response

ConnId = int


@dataclass(frozen=True)
class Reply:
    """Send a response frame (and an optional body, for STATUS) on a connection."""

    conn: ConnId
    type: RequestType
    response: Response
    body: bytes = b""


@dataclass(frozen=True)
class SendUpstream:
    """Pod manager only: send a request to the scheduler."""

    request: Request


@dataclass(frozen=True)
class Close:
    conn: ConnId
    reason: str


@dataclass(frozen=True)
class Log:
    level: int
    client: str
    message: str


Action = Reply | SendUpstream | Close | Log


def info(client: str, message: str) -> Log:
    return Log(logging.INFO, client, message)


def warning(client: str, message: str) -> Log:
    return Log(logging.WARNING, client, message)


def debug(client: str, message: str) -> Log:
    return Log(logging.DEBUG, client, message)
