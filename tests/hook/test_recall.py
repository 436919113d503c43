"""The hook's side of a lease recall: an unsolicited RECALL from the pod manager is answered
with the process's whole unspent lease, whatever the process is doing: idle (the watcher thread
reads it), or waiting for a token in a request of its own (that request's thread reads it and
leaves it to the watcher)."""

from __future__ import annotations

import pytest

from gemini.core.wire import MEM_LEASE, RequestType

from .conftest import prog

pytestmark = pytest.mark.hook
MIB = 1 << 20
LEASE = {"GEMINI_MEM_LEASE_MB": "32"}


def recall_answers(pm) -> list[int]:
    return [int(r.args[0]) for r in pm.of_type(RequestType.RECALL)]


def test_an_idle_process_gives_its_unspent_lease_back(fake_env, pm):
    proc = fake_env.start([prog("gem_client"), "alloc", "--bytes", str(MIB), "--hold"], **LEASE)
    assert '"rc": 0' in proc.wait_line('"mem_free"')
    assert pm.used == 33 * MIB  # 1 MiB allocated, 32 MiB of lease unspent
    pm.recall()  # while the process sits in fgets(), making no CUDA call
    assert pm.wait_for(lambda p: recall_answers(p) == [32 * MIB] and p.used == MIB)
    assert proc.popen.poll() is None
    proc.popen.stdin.close()  # the free stays local: the lease is spent, nothing to ask
    assert proc.popen.wait(timeout=20) == 0
    assert [tuple(u.args) for u in pm.of_type(RequestType.MEM_UPDATE)] == [(33 * MIB, MEM_LEASE)]


def test_a_process_waiting_for_its_token_answers_at_once(fake_env, pm):
    pm.hold_quota = True
    proc = fake_env.start([prog("gem_client"), "work", "--allocs", "1", "--bytes", str(MIB),
                           "--kernel-ms", "1", "--burst", "1", "--bursts", "1"], **LEASE)
    assert pm.wait_for(lambda p: p.of_type(RequestType.QUOTA) and p.used == 33 * MIB)
    pm.recall()
    # Answered while its QUOTA is still held: the thread blocked in it read the RECALL.
    assert pm.wait_for(lambda p: recall_answers(p) == [32 * MIB] and p.used == MIB)
    assert pm.hold_quota and proc.popen.poll() is None
    pm.release()
    assert proc.popen.wait(timeout=20) == 0


def test_a_process_without_a_lease_answers_with_nothing(fake_env, pm):
    proc = fake_env.start([prog("gem_client"), "alloc", "--bytes", str(MIB), "--hold"])
    proc.wait_line('"mem_free"')
    pm.recall()
    assert pm.wait_for(lambda p: recall_answers(p) == [0])
    assert pm.used == MIB  # its allocation stays counted
    proc.popen.stdin.close()
    assert proc.popen.wait(timeout=20) == 0


def test_recalls_reach_each_process_of_a_forked_pair(fake_env, pm):
    """A forked child has its own connection and watcher (threads do not survive fork)."""
    pm.hold_quota = True
    proc = fake_env.start([prog("gem_client"), "fork-work", "--allocs", "1", "--bytes", str(MIB),
                           "--kernel-ms", "1", "--burst", "1", "--bursts", "1"], **LEASE)
    assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) == 2 and p.used == 66 * MIB)
    pm.recall()
    assert pm.wait_for(lambda p: recall_answers(p) == [32 * MIB] * 2 and p.used == 2 * MIB)
    pm.release()
    assert proc.popen.wait(timeout=20) == 0
