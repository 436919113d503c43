"""Memory back at once (issue 15, item 3): what goes while the process runs gives its bytes back
to the client's limit then, not at exit; what has not gone stays counted.  Each program holds on
stdin after the step under test, so the pod manager's ledger is read while it still runs, and
the exact MEM_UPDATE trace shows the bytes came back by a free, not by the process leaving.
(A destroyed context: test_hook_paths.py.)"""

from __future__ import annotations

import pytest

from gemini.core.wire import MEM_ALLOC, MEM_FREE, RequestType

from .conftest import prog

pytestmark = pytest.mark.hook
MIB = 1 << 20
SIZE = 8 * MIB


def trace(pm) -> list[tuple]:
    return [tuple(u.args) for u in pm.of_type(RequestType.MEM_UPDATE)]


def go_on(proc) -> None:
    proc.popen.stdin.write("\n")
    proc.popen.stdin.flush()


def finish(proc) -> None:
    proc.popen.stdin.close()
    assert proc.popen.wait(timeout=20) == 0


def test_a_released_vmm_handle_gives_its_bytes_back_at_once(fake_env, pm):
    proc = fake_env.start([prog("gem_client"), "alloc", "--path", "vmm", "--bytes", str(SIZE),
                           "--hold-freed"])
    assert '"free_rc": 0' in proc.wait_line('"free_rc"')
    assert pm.wait_for(lambda p: p.used == 0 and len(trace(p)) == 2)
    assert proc.popen.poll() is None  # still running
    assert trace(pm) == [(SIZE, MEM_ALLOC), (SIZE, MEM_FREE)]
    finish(proc)


def test_a_destroyed_pool_s_allocation_counts_until_it_is_freed(fake_env, pm):
    """cuMemPoolDestroy returns at once and the pool's allocations stay valid until freed (the
    driver releases the pool after them): so they stay counted, and go back at their free."""
    proc = fake_env.start([prog("gem_client"), "pool-destroy", "--bytes", str(SIZE), "--hold"])
    line = proc.wait_line('"destroy_rc"')
    assert '"rc": 0' in line and '"destroy_rc": 0' in line, line
    assert pm.used == SIZE and trace(pm) == [(SIZE, MEM_ALLOC)]
    go_on(proc)  # now free it
    assert '"free_rc": 0' in proc.wait_line('"free_rc"')
    assert pm.wait_for(lambda p: p.used == 0)
    assert proc.popen.poll() is None
    assert trace(pm) == [(SIZE, MEM_ALLOC), (SIZE, MEM_FREE)]
    finish(proc)


@pytest.mark.parametrize("how", [(), ("--release",)], ids=["reset", "last release"])
@pytest.mark.parametrize("path", ["alloc", "async"])
def test_a_reset_primary_context_gives_its_memory_back_at_once(fake_env, pm, how, path):
    proc = fake_env.start([prog("gem_client"), "primary-reset", "--path", path,
                           "--bytes", str(SIZE), "--hold", *how])
    line = proc.wait_line('"reset_rc"')
    assert '"rc": 0' in line and '"reset_rc": 0' in line, line
    assert pm.wait_for(lambda p: p.used == 0 and len(trace(p)) == 2)
    assert proc.popen.poll() is None
    assert trace(pm) == [(SIZE, MEM_ALLOC), (SIZE, MEM_FREE)]
    finish(proc)


def test_a_release_that_leaves_the_primary_context_retained_gives_nothing_back(fake_env, pm):
    proc = fake_env.start([prog("gem_client"), "primary-reset", "--bytes", str(SIZE), "--hold",
                           "--release", "--retain-twice"])
    line = proc.wait_line('"reset_rc"')
    assert '"rc": 0' in line and '"reset_rc": 0' in line, line
    assert pm.used == SIZE and trace(pm) == [(SIZE, MEM_ALLOC)]  # its memory is still there
    finish(proc)
    assert pm.wait_for(lambda p: p.used == 0)  # and goes with the process
