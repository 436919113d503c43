"""A daemon whose core raises (a bug of ours) says so with the client's name and goes on: the
pod manager drops its link to the scheduler and asks for the token again once it is back,
so the hook that waited gets its token (gemini.daemon.server.FrameServer.feed)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gemini.core.config import parse_text
from gemini.core.scheduler import Timing
from gemini.core.wire import (
    RSP_MSG_LEN,
    Request,
    RequestType,
    Status,
    decode_response,
    encode_request,
)
from gemini.daemon.podmanager import RETRY_MIN_S, PodManagerDaemon, jittered
from gemini.daemon.scheduler import SchedulerDaemon


def test_a_pod_manager_that_fails_on_a_scheduler_reply_asks_again_and_the_hook_is_served(caplog):
    async def main() -> tuple[Status, float]:
        schd = SchedulerDaemon(parse_text("1\na 0.5 1.0 1073741824\n"), Timing())
        schd_port = await schd.start("127.0.0.1", 0)
        pmgr = PodManagerDaemon("a", "127.0.0.1", schd_port)
        real = pmgr.core.on_upstream_response
        failed: list[RequestType] = []

        def fails_on_the_first_token(rsp, now):  # type: ignore[no-untyped-def]
            kind = pmgr.core.upstream_type(rsp.req_id)
            if kind is RequestType.QUOTA and not failed:
                failed.append(kind)
                raise RuntimeError("a bug in the pod manager's core")
            return real(rsp, now)

        pmgr.core.on_upstream_response = fails_on_the_first_token  # type: ignore[method-assign]
        pmgr_port = await pmgr.start("127.0.0.1", 0)
        await asyncio.wait_for(pmgr.connected.wait(), 5)
        reader, writer = await asyncio.open_connection("127.0.0.1", pmgr_port)
        writer.write(encode_request(Request("a", 1, RequestType.QUOTA, (0.0, 10.0))))
        reply = decode_response(RequestType.QUOTA,
                                await asyncio.wait_for(reader.readexactly(RSP_MSG_LEN), 10))
        assert failed == [RequestType.QUOTA]  # the first token's reply did fail
        writer.close()
        await pmgr.close()
        await schd.close()
        return reply.status, float(reply.values[0])

    with caplog.at_level(logging.INFO):
        status, quota_ms = asyncio.run(main())
    assert status is Status.OK and quota_ms > 0.0
    assert "[a] internal error on the scheduler's QUOTA reply" in caplog.text
    assert "RuntimeError: a bug in the pod manager's core" in caplog.text
    assert "[a] lost the scheduler" in caplog.text  # the link was dropped, then made again


def test_a_pod_manager_refused_at_once_by_its_scheduler_backs_off(caplog):
    """A scheduler that closes each link at its first request (here: it wants a secret this
    pod manager lacks) is asked again after 50 ms, 100 ms, ... (it was asked again at once,
    some 3,000 times a second, three log lines each time)."""
    async def main() -> list[float]:
        schd = SchedulerDaemon(parse_text("1\na 0.5 1.0 1073741824\n"), Timing(),
                               secret=b"k" * 16)
        pmgr = PodManagerDaemon("a", "127.0.0.1", await schd.start("127.0.0.1", 0))
        lost: list[float] = []
        third = asyncio.Event()
        loop = asyncio.get_running_loop()

        class Losses(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "lost the scheduler" in record.getMessage():
                    lost.append(loop.time())
                    if len(lost) == 3:
                        third.set()

        handler = Losses()
        logging.getLogger("gemini").addHandler(handler)
        try:
            await pmgr.start("127.0.0.1", 0)
            await asyncio.wait_for(third.wait(), 10)
        finally:
            logging.getLogger("gemini").removeHandler(handler)
            await pmgr.close()
            await schd.close()
        return lost

    with caplog.at_level(logging.INFO):
        lost = asyncio.run(main())
    # (each pause at least half its step: jittered)
    assert lost[2] - lost[0] >= 0.9 * (RETRY_MIN_S + 2 * RETRY_MIN_S) / 2, lost


def test_a_pod_managers_retries_are_jittered_within_the_upper_half_of_each_step():
    """Pod managers that lost a restarted scheduler at one instant came back at the same
    instants, step after step; each pause is now drawn from the upper half of its step."""
    assert jittered(0.4, lambda: 0.0) == 0.4
    assert jittered(0.4, lambda: 0.5) == pytest.approx(0.3)
    pauses = [jittered(0.4) for _ in range(200)]
    assert all(0.2 < p <= 0.4 for p in pauses) and len(set(pauses)) > 100
