"""gem-schd's unified-memory flags: an oversubscribed config is refused at start (exit 2) and on a
live edit (one line, the last good config stays); UM clients get their flags."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gemini.client import Connection
from gemini.core.wire import MEM_FLAG_EVICT_ON_RELEASE, MEM_FLAG_UNIFIED_MEMORY, RequestType
from tests.procs import ROOT, start_pod_manager, start_scheduler

UM = ("--device-memory", "1GiB", "--oversubscription", "1.5")


def test_an_oversubscribed_config_stops_gem_schd_with_exit_2(tmp_path):
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text("2\na 0.5 1 1GiB um\nb 0.5 1 1GiB um\n")
    proc = subprocess.run(
        [sys.executable, "-m", "gemini.cli.schd", "-P", "0", "-p", str(tmp_path), "-f", cfg.name,
         *UM], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert proc.returncode == 2
    assert "resource-config.txt: unified-memory clients (a, b) ask for 2147483648 B" in proc.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "gemini.cli.schd", "-p", str(tmp_path), "-f", cfg.name,
         "--oversubscription", "0"], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert bad.returncode == 2 and "oversubscription" in bad.stderr


@pytest.mark.system
def test_a_live_oversubscribing_edit_is_refused_and_flags_reach_the_hooks(tmp_path):
    cfg = tmp_path / "resource-config.txt"
    cfg.write_text("2\na 0.5 1 1GiB um\nb 0.5 1 512MiB\n")
    schd = start_scheduler(cfg, *UM, "--evict-on-release")
    pm = start_pod_manager("a", schd.port)
    try:
        pm.wait_for("memory limit 1073741824 B .*unified memory, evicted on release")
        with Connection("127.0.0.1", pm.port, "a") as conn:
            flags = MEM_FLAG_UNIFIED_MEMORY | MEM_FLAG_EVICT_ON_RELEASE
            assert conn.call(RequestType.MEM_LIMIT)[0].values == (0, 1 << 30, flags)
        mark = schd.mark()
        cfg.write_text("2\na 0.5 1 1GiB um\nb 0.5 1 1GiB um\n")  # 2 GiB > 1.5 x 1 GiB
        schd.wait_for(r"unified-memory clients \(a, b\).*keeping the last good config",
                      since=mark)
        mark = pm.mark()
        cfg.write_text("2\na 0.5 1 768MiB um\nb 0.5 1 768MiB um\n")  # fits: applied
        pm.wait_for("memory limit 805306368 B", since=mark)
    finally:
        pm.stop()
        schd.stop()
