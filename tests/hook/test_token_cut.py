"""A token the pod manager cuts (its client's cap lowered: wire.CUT_ID): the hook stops
launching at the new end and asks for the next token then, not at the old end; a cut sent
before the token the hook holds was sent is for an older one, and cuts nothing."""

from __future__ import annotations

import time

import pytest

from gemini.core.wire import RequestType

from .conftest import prog

pytestmark = pytest.mark.hook

TOKEN_MS = 60_000.0  # never runs out in these tests


def start_client(fake_env, pm):
    """The client, started on tokens of TOKEN_MS whose answers say when they were sent (a cut
    is ordered by it)."""
    pm.quota_ms = TOKEN_MS
    pm.sent_late_s = 0.0
    return fake_env.start(
        [prog("gem_client"), "work", "--kernel-ms", "0.5", "--burst", "4", "--sync", "stream",
         "--seconds", "60", "--report-every", "0.05"])


def start_working(fake_env, pm):
    proc = start_client(fake_env, pm)
    assert pm.wait_for(lambda p: len(p.quota_answered) >= 1)
    proc.wait_line('"kernels"')  # (launching on it)
    return proc


def test_a_cut_token_ends_at_the_cut_and_the_next_is_asked_for_then(fake_env, pm):
    proc = start_working(fake_env, pm)
    try:
        cut_at = time.monotonic()
        pm.cut(20.0)
        proc.wait_line("token cut by the pod manager")
        # (the old token had a minute left)
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 2, timeout=20.0)
        assert pm.quota_asked[1] >= cut_at + 0.015  # (not before the 20 ms left)
    finally:
        proc.kill()


def test_a_cut_sent_before_the_token_held_cuts_nothing(fake_env, pm):
    proc = start_working(fake_env, pm)
    try:
        pm.cut(0.0, sent_at=pm.quota_answered[0] / 2)  # (before the token's own sent_at)
        proc.wait_line("it had ended, or a later one came")
        assert len(pm.of_type(RequestType.QUOTA)) == 1
    finally:
        proc.kill()


def test_a_cut_that_overtook_the_token_it_cuts_cuts_it_when_it_is_taken(fake_env, pm):
    """The pod manager sent a token, then a cut; the watcher ran the cut before the launching
    thread took the token (here: the cut comes first, while the answer is held, stamped after
    it).  The token, once taken, ends at the cut."""
    pm.hold_quota = True
    proc = start_client(fake_env, pm)
    try:
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 1)
        pm.cut(20.0, sent_at=time.monotonic() + 1.0)  # (the answer's sent_at comes before it)
        proc.wait_line("token cut by the pod manager")
        pm.release()
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 2, timeout=20.0)
    finally:
        proc.kill()


def test_a_recall_and_a_cut_that_come_together_are_both_served(fake_env, pm):
    """Unsolicited messages of two kinds: the watcher keeps one of each (a single slot kept
    the later one, and the recall went unanswered)."""
    proc = start_working(fake_env, pm)
    try:
        pm.recall()
        pm.cut(20.0)
        proc.wait_line("token cut by the pod manager")
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.RECALL)) >= 1)
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 2, timeout=20.0)
    finally:
        proc.kill()


@pytest.mark.parametrize("left_ms, sent_at", [(float("nan"), None), (-5.0, None), (5.0, 0.0)])
def test_a_garbage_cut_is_said_and_ignored(fake_env, pm, left_ms, sent_at):
    """A cut that is no number of ms, or says no send time, cuts nothing: the hook says so and
    runs on (it never ends the program)."""
    proc = start_working(fake_env, pm)
    try:
        pm.cut(left_ms, sent_at=sent_at)
        proc.wait_line("pod manager cut our token to")
        pm.cut(0.0, sent_at=pm.quota_answered[0] / 2)  # (a stale one after it: said in turn)
        proc.wait_line("it had ended, or a later one came")
        assert len(pm.of_type(RequestType.QUOTA)) == 1 and proc.popen.poll() is None
    finally:
        proc.kill()
