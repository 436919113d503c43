"""The daemons' frame server (gemini.daemon.server): requests split or joined any way on the
wire reach the core whole and in order, bad bytes close only their connection, and a
connection that never proves the secret is closed, and a core that fails on one client's
event (a bug of ours) is logged with that client's name while the rest are served, each with
its log line."""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import os
import socket
from collections.abc import Coroutine
from typing import Any

import pytest

import gemini.daemon.server as server_mod
from gemini.core.actions import Action, ConnId, Reply, SendUpstream
from gemini.core.wire import (
    REQ_MSG_LEN,
    RSP_MSG_LEN,
    Request,
    RequestType,
    Response,
    Status,
    decode_response,
    encode_request,
)
from gemini.daemon.podmanager import PodManagerDaemon
from gemini.daemon.server import FrameServer

SECRET = b"0123456789abcdef"


class RecordingCore:
    """Answers every request with its id as the quota; records requests and disconnects."""

    def __init__(self) -> None:
        self.requests: list[tuple[ConnId, Request]] = []
        self.gone: list[ConnId] = []
        self.changed = asyncio.Event()

    def next_deadline(self) -> float | None:
        return None

    def on_deadline(self, now: float) -> list[Action]:
        return []

    def on_request(self, conn: ConnId, req: Request, now: float) -> list[Action]:
        self.requests.append((conn, req))
        self.changed.set()
        return [Reply(conn, req.type, Response(req.req_id, Status.OK, (float(req.req_id), 0, 0)))]

    def on_disconnect(self, conn: ConnId, now: float) -> list[Action]:
        self.gone.append(conn)
        self.changed.set()
        return []

    async def until(self, predicate) -> None:  # type: ignore[no-untyped-def]
        while not predicate():
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)


def quota(req_id: int) -> bytes:
    return encode_request(Request("a", req_id, RequestType.QUOTA, (0.0, 1.0)))


async def serve(secret: bytes | None = None, core: RecordingCore | None = None,
                ) -> tuple[FrameServer, RecordingCore, int]:
    """A server of `core` (a RecordingCore by default) on a free local port."""
    core = core if core is not None else RecordingCore()
    srv = FrameServer(core, core.on_request, core.on_disconnect, secret=secret)
    port = await srv.start("127.0.0.1", 0)
    return srv, core, port


async def read_quotas(reader: asyncio.StreamReader, n: int) -> list[float]:
    out = []
    for _ in range(n):
        frame = await asyncio.wait_for(reader.readexactly(RSP_MSG_LEN), 5)
        out.append(decode_response(RequestType.QUOTA, frame).values[0])
    return out


def test_frames_split_and_joined_on_the_wire_reach_the_core_whole_and_in_order():
    async def main() -> None:
        srv, core, port = await serve()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        wire = quota(1) + quota(2) + quota(3)
        writer.write(wire[:30])  # a frame in pieces, then two and a half at once, then the rest
        await writer.drain()
        await asyncio.sleep(0)  # (the pieces go out as separate writes)
        writer.write(wire[30:200])
        await writer.drain()
        writer.write(wire[200:])
        assert await read_quotas(reader, 3) == [1.0, 2.0, 3.0]
        assert [r.req_id for _, r in core.requests] == [1, 2, 3]
        writer.close()
        await core.until(lambda: core.gone)
        await srv.close()

    asyncio.run(main())


def test_garbage_closes_its_connection_only_and_nothing_after_it_is_read(caplog):
    async def main() -> None:
        srv, core, port = await serve()
        r1, w1 = await asyncio.open_connection("127.0.0.1", port)
        r2, w2 = await asyncio.open_connection("127.0.0.1", port)
        w1.write(quota(1) + b"\xff" * REQ_MSG_LEN + quota(2))
        assert await read_quotas(r1, 1) == [1.0]
        assert await asyncio.wait_for(r1.read(), 5) == b""  # closed after the garbage
        w2.write(quota(7))  # the other connection is served as before
        assert await read_quotas(r2, 1) == [7.0]
        assert [r.req_id for _, r in core.requests] == [1, 7]
        await core.until(lambda: len(core.gone) == 1)
        w2.close()
        await srv.close()

    with caplog.at_level(logging.WARNING, logger="gemini.server"):
        asyncio.run(main())
    assert "closing connection: name length" in caplog.text


def test_a_request_of_an_unknown_type_is_refused_and_its_connection_kept(caplog):
    """Closed, the connection took its process's memory with it at the pod manager, and the
    hook, asking again, was closed again.  Frames are of one size: the stream is in step."""
    async def main() -> None:
        srv, core, port = await serve()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        newer = bytearray(quota(5))
        end = 8 + 1 + 1  # the name's length word, "a" and its NUL
        newer[end + 4:end + 8] = (99).to_bytes(4, "little")  # a type this side does not know
        writer.write(bytes(newer) + quota(6))
        refusal = await asyncio.wait_for(reader.readexactly(RSP_MSG_LEN), 5)
        said = decode_response(RequestType.QUOTA, refusal)
        assert (said.req_id, said.status, set(said.values)) == (5, Status.BAD_REQUEST, {0})
        assert await read_quotas(reader, 1) == [6.0]
        assert [r.req_id for _, r in core.requests] == [6] and not core.gone
        writer.close()
        await core.until(lambda: core.gone)
        await srv.close()

    with caplog.at_level(logging.WARNING, logger="gemini.server"):
        asyncio.run(main())
    assert "unknown request type 99 refused (BAD_REQUEST); connection kept" in caplog.text


def test_a_message_cut_short_by_the_peer_is_said_and_the_connection_ends(caplog):
    async def main() -> None:
        srv, core, port = await serve()
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(quota(1) + quota(2)[:50])
        writer.write_eof()
        await core.until(lambda: core.gone)
        assert [r.req_id for _, r in core.requests] == [1]
        writer.close()
        await srv.close()

    with caplog.at_level(logging.WARNING, logger="gemini.server"):
        asyncio.run(main())
    assert "closing connection: truncated message" in caplog.text


def test_a_connection_that_never_proves_the_secret_is_closed_unheard(caplog, monkeypatch):
    monkeypatch.setattr(server_mod, "AUTH_TIMEOUT_S", 0.05)

    async def main() -> None:
        srv, core, port = await serve(SECRET)
        silent_r, silent_w = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(silent_r.read(), 5) == b""  # closed by the server
        # A request before the proof is refused, echoing its id; the core never hears of it.
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(quota(5))
        refusal = decode_response(RequestType.QUOTA, await r.readexactly(RSP_MSG_LEN))
        assert (refusal.req_id, refusal.status) == (5, Status.NOT_AUTHORIZED)
        assert await asyncio.wait_for(r.read(), 5) == b""
        # The proof, then requests in the same write: all served.
        r, w = await asyncio.open_connection("127.0.0.1", port)
        hello = encode_request(Request("a", 0, RequestType.HELLO, (SECRET,)))
        w.write(hello + quota(8))
        await r.readexactly(RSP_MSG_LEN)  # the HELLO's OK
        assert await read_quotas(r, 1) == [8.0]
        assert [req.req_id for _, req in core.requests] == [8] and core.gone == []
        for writer in (silent_w, w):
            writer.close()
        await srv.close()

    with caplog.at_level(logging.WARNING, logger="gemini.server"):
        asyncio.run(main())
    assert "nothing within 0.05 s" in caplog.text
    assert caplog.text.count("refused: no or wrong secret") == 2


def run_on(loop: str, main: Coroutine[Any, Any, None]) -> None:
    """Run `main` on asyncio's event loop or on uvloop's (a test dependency: `.[test]`)."""
    if loop == "uvloop":
        import uvloop

        uvloop.run(main)
    else:
        asyncio.run(main)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_replies_go_out_on_either_event_loop(loop):
    async def main() -> None:
        srv, _, port = await serve()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(quota(4))
        assert await read_quotas(reader, 1) == [4.0]
        writer.close()
        await srv.close()

    run_on(loop, main())


class TimedCore(RecordingCore):
    """Records the time each request and each deadline were given; one deadline at a time."""

    def __init__(self) -> None:
        super().__init__()
        self.deadline: float | None = None
        self.times: list[float] = []
        self.deadlines_met: list[tuple[float, float]] = []  # (deadline, the time given)

    def next_deadline(self) -> float | None:
        return self.deadline

    def on_deadline(self, now: float) -> list[Action]:
        if self.deadline is not None:
            self.deadlines_met.append((self.deadline, now))
            self.deadline = None
            self.changed.set()
        return []

    def on_request(self, conn: ConnId, req: Request, now: float) -> list[Action]:
        self.times.append(now)
        # (a grant's end, say; request 9's comes within the server's early wake)
        self.deadline = now + (0.0005 if req.req_id == 9 else 0.02)
        return super().on_request(conn, req, now)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_core_is_told_the_time_of_each_event_and_its_deadline_at_it(loop):
    """The core's clock is CLOCK_MONOTONIC read at each event, on either loop: uvloop's own
    is in whole milliseconds, so two requests that came in one read were told one time.  Its
    deadline is given at it, never before (the server wakes early on purpose, then polls to
    it)."""
    async def main() -> None:
        core = TimedCore()
        srv, _, port = await serve(core=core)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(quota(1) + quota(2))  # (one write: read, and handled, in one turn)
        assert await read_quotas(reader, 2) == [1.0, 2.0]
        await core.until(lambda: core.deadlines_met)
        [(deadline, given)] = core.deadlines_met
        assert core.times[0] < core.times[1] <= deadline - 0.02
        assert given >= deadline
        writer.close()
        await srv.close()

    run_on(loop, main())


def test_a_deadline_moved_while_the_server_polls_to_it_is_given_at_its_new_time():
    async def main() -> None:
        core = TimedCore()
        srv, _, port = await serve(core=core)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(quota(9) + quota(2))  # (polled to at once, then moved 20 ms on)
        assert await read_quotas(reader, 2) == [9.0, 2.0]
        moved = core.times[1] + 0.02
        await core.until(lambda: any(d == moved for d, _ in core.deadlines_met))
        # (read in one turn, the first deadline is never given; each given is at or after it)
        assert all(given >= d for d, given in core.deadlines_met), core.deadlines_met
        writer.close()
        await srv.close()

    asyncio.run(main())


class FailingCore(RecordingCore):
    """A core with a bug: it raises on requests from client "bad", and on its first
    `deadline_failures` deadlines (armed by any request), after which the deadline answers the
    requests seen so far with quota 99."""

    def __init__(self, deadline_failures: int = 0) -> None:
        super().__init__()
        self.deadline_failures = deadline_failures
        self.deadline: float | None = None
        self.deadline_calls: list[float] = []

    def next_deadline(self) -> float | None:
        return self.deadline

    def on_deadline(self, now: float) -> list[Action]:
        self.deadline_calls.append(now)
        self.changed.set()
        if len(self.deadline_calls) <= self.deadline_failures:
            raise ZeroDivisionError("float division by zero")
        self.deadline = None
        return [Reply(conn, req.type, Response(req.req_id, Status.OK, (99.0, 0, 0)))
                for conn, req in self.requests]

    def on_request(self, conn: ConnId, req: Request, now: float) -> list[Action]:
        if req.name == "bad":
            raise KeyError(req.name)
        if self.deadline_failures:
            self.requests.append((conn, req))
            self.deadline = now  # answered at the deadline, not here
            return []
        return super().on_request(conn, req, now)


def test_a_core_that_fails_on_one_clients_request_closes_only_that_connection(caplog):
    async def main() -> None:
        core = FailingCore()
        srv, _, port = await serve(core=core)
        r_bad, w_bad = await asyncio.open_connection("127.0.0.1", port)
        r_good, w_good = await asyncio.open_connection("127.0.0.1", port)
        w_bad.write(encode_request(Request("bad", 1, RequestType.QUOTA, (0.0, 1.0))))
        assert await asyncio.wait_for(r_bad.read(), 5) == b""  # closed, so it comes back afresh
        await core.until(lambda: len(core.gone) == 1)  # and the core forgot it
        w_good.write(quota(2))
        assert await read_quotas(r_good, 1) == [2.0]  # the others are served as before
        w_good.close()
        await srv.close()

    with caplog.at_level(logging.ERROR, logger="gemini.server"):
        asyncio.run(main())
    assert "[bad] internal error on a QUOTA request" in caplog.text
    assert "KeyError: 'bad'" in caplog.text  # the traceback, for the report


def test_an_action_that_cannot_be_carried_out_is_logged_and_the_server_goes_on(caplog):
    """(A fetch the scheduler's link could not encode raised out of `feed`, and with it out
    of the pod manager's task that keeps that link: never reconnected, nothing said.)"""
    def cannot_send(action: SendUpstream) -> None:
        raise OverflowError("float too large to pack with f format")

    async def main() -> None:
        core = RecordingCore()
        srv = FrameServer(core, core.on_request, core.on_disconnect, send_upstream=cannot_send)
        port = await srv.start("127.0.0.1", 0)
        fetch = SendUpstream(Request("a", 1, RequestType.QUOTA, (0.0, 1.0)))
        assert srv.feed("a", "the scheduler's connection", lambda: [fetch]) is False
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(quota(7))
        assert await read_quotas(reader, 1) == [7.0]  # still serving
        writer.close()
        await srv.close()

    with caplog.at_level(logging.ERROR, logger="gemini.server"):
        asyncio.run(main())
    assert "[a] internal error on the scheduler's connection" in caplog.text


def test_the_actions_after_one_that_cannot_be_carried_out_still_are(caplog):
    """A config edit's replies: one that does not encode (a limit past the wire's u64) stopped
    the rest, and the pod managers after it never heard of their new limits."""
    async def main() -> None:
        srv, core, port = await serve()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(quota(7))
        assert await read_quotas(reader, 1) == [7.0]
        [(conn, _)] = core.requests
        too_big = Reply(conn, RequestType.MEM_LIMIT, Response(0, Status.OK, (0, 2**64, 0)))
        pushed = Reply(conn, RequestType.QUOTA, Response(8, Status.OK, (8.0, 0, 0)))
        assert srv.feed("config", "a config edit", lambda: [too_big, pushed]) is False
        assert await read_quotas(reader, 1) == [8.0]
        writer.close()
        await srv.close()

    with caplog.at_level(logging.ERROR, logger="gemini.server"):
        asyncio.run(main())
    assert "[config] internal error on a config edit" in caplog.text


class BulkyCore(RecordingCore):
    """Answers every request with a reply and 1 KiB more, as STATUS does."""

    def on_request(self, conn: ConnId, req: Request, now: float) -> list[Action]:
        [reply] = super().on_request(conn, req, now)
        assert isinstance(reply, Reply)
        return [Reply(reply.conn, reply.type, reply.response, b"x" * 1024)]


def test_a_peer_that_does_not_read_its_replies_is_not_read_from_until_it_does():
    """Its replies were buffered without bound (650 MiB in 20 s of STATUS requests), and every
    other client waited behind them."""
    async def main() -> None:
        srv, core, port = await serve(core=BulkyCore())
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sent = 20_000  # 20 MiB of replies, more than the kernel's buffers hold
        writer.write(b"".join(quota(i) for i in range(sent)))
        await core.until(lambda: bool(core.requests))
        [transport] = srv.transports.values()
        await core.until(lambda: len(core.requests) == sent or not transport.is_reading())
        assert transport.get_write_buffer_size() < 1 << 20, len(core.requests)
        got = 0  # read: it is read from again, and every request is answered
        while got < sent * (RSP_MSG_LEN + 1024):
            chunk = await asyncio.wait_for(reader.read(1 << 20), 5)
            assert chunk
            got += len(chunk)
        assert len(core.requests) == sent
        writer.close()
        await srv.close()

    asyncio.run(main())


def test_a_unix_socket_served_is_not_taken_over_and_only_its_own_file_is_removed(tmp_path):
    """A second pod manager on the same path took the socket file over from the first (asyncio
    removes it), and the first, stopped, removed the second's: its hooks reached no one."""
    path = str(tmp_path / "pmgr.sock")

    async def reachable() -> bool:
        try:
            _, writer = await asyncio.open_unix_connection(path)
        except OSError:
            return False
        writer.close()
        return True

    async def main() -> None:
        core = RecordingCore()
        first = FrameServer(core, core.on_request, core.on_disconnect)
        await first.start_unix(path)
        second = FrameServer(core, core.on_request, core.on_disconnect)
        with pytest.raises(OSError) as refused:
            await second.start_unix(path)
        assert refused.value.errno == errno.EADDRINUSE
        assert await reachable()
        os.unlink(path)  # (gone from under it: a new one may take the path)
        await second.start_unix(path)
        await first.close()
        assert await reachable()  # the second's file stays
        await second.close()
        assert not os.path.exists(path)
        stale = socket.socket(socket.AF_UNIX)  # bound, never listening: a dead daemon's file
        stale.bind(path)
        third = FrameServer(core, core.on_request, core.on_disconnect)
        await third.start_unix(path)
        assert await reachable()
        await third.close()
        stale.close()

    asyncio.run(main())


def test_a_daemon_stopping_leaves_the_socket_file_of_one_that_took_the_path_as_it_stopped(
        tmp_path):
    """Between the first daemon's end of listening and its removal of the file, a second one
    took the path over; on ext4 its file got the freed inode number back, and the first,
    comparing the inode alone, removed it."""
    path = str(tmp_path / "pmgr.sock")

    async def main() -> None:
        core = RecordingCore()
        first = FrameServer(core, core.on_request, core.on_disconnect)
        await first.start_unix(path)
        assert first.server is not None
        first.server.close()  # (as close() begins: no longer listening)
        await first.server.wait_closed()
        second = FrameServer(core, core.on_request, core.on_disconnect)
        await second.start_unix(path)
        await first.close()
        _, writer = await asyncio.open_unix_connection(path)  # the second's, still there
        writer.close()
        await second.close()

    asyncio.run(main())


def test_a_deadline_the_core_fails_on_is_tried_again_after_growing_pauses(caplog):
    async def main() -> None:
        core = FailingCore(deadline_failures=3)
        srv, _, port = await serve(core=core)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(quota(1))
        assert await read_quotas(reader, 1) == [99.0]  # answered once the core recovered
        calls = core.deadline_calls
        gaps = [b - a for a, b in itertools.pairwise(calls)]
        pauses = [server_mod.TIMER_RETRY_S * 2 ** n for n in (1, 2, 3)]  # 20, 40, 80 ms
        assert all(g >= 0.9 * p for g, p in zip(gaps, pauses, strict=True)), gaps
        writer.close()
        await srv.close()

    with caplog.at_level(logging.ERROR, logger="gemini.server"):
        asyncio.run(main())
    assert caplog.text.count("[timer] internal error on its deadline") == 3
    assert caplog.text.count("Traceback") == 1  # the first time; a line each time after


def test_a_pod_managers_lines_about_its_processes_connections_name_its_client(caplog):
    async def main() -> None:
        with socket.socket() as unused:  # (bound, never listening: no scheduler there)
            unused.bind(("127.0.0.1", 0))
            pmgr = PodManagerDaemon("a", "127.0.0.1", unused.getsockname()[1])
            port = await pmgr.start("127.0.0.1", 0)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\xff" * REQ_MSG_LEN)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed after the garbage
            writer.close()
            await pmgr.close()

    with caplog.at_level(logging.WARNING, logger="gemini.server"):
        asyncio.run(main())
    assert "[a: 127.0.0.1:" in caplog.text and "closing connection" in caplog.text
