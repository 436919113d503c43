"""gem-schd --metrics-port on the fake GPU: a Prometheus scrape sees each client's share, limits,
memory and token counters while it runs; garbage on the port gets an error, not a dead daemon."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.procs import start_pod_manager, start_scheduler
from tests.system.conftest import FAST, result

pytestmark = pytest.mark.system


def scrape(port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {
        (s.name, s.labels.get("client", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_scrape_sees_the_clients_and_survives_garbage(system, tmp_path):
    config = tmp_path / "resource-config.txt"
    config.write_text("2\na 0.2 0.5 1GiB\nb 0.5 1.0 2GiB\n")
    schd = start_scheduler(config, *FAST, "--metrics-port", "0")
    try:
        port = int(schd.wait_for(r"metrics on http://[\d.]+:(\d+)/metrics").group(1))
        system.schd = schd
        system.pmgrs = {"a": start_pod_manager("a", schd.port)}
        system.pmgrs["a"].wait_for("memory limit")
        before = scrape(port)
        assert before[("gemini_limit_ratio", "a")] == 0.5
        assert before[("gemini_memory_limit_bytes", "b")] == 2 << 30
        assert before[("gemini_tokens_total", "a")] == 0
        r = result(system.work("a", 2))
        assert r["rc"] == 0
        after = scrape(port)
        assert after[("gemini_tokens_total", "a")] > 0
        assert 0.1 < after[("gemini_usage_ratio", "a")] <= 0.5 + 0.05
        assert after[("gemini_usage_ratio", "b")] == 0
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 400")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
        assert info.value.code == 404
        assert scrape(port)[("gemini_tokens_total", "a")] == after[("gemini_tokens_total", "a")]
    finally:
        system.pmgrs["a"].stop()
        schd.stop()


def test_the_metrics_page_listens_where_metrics_ip_says_and_the_tokens_where_ip_does(tmp_path):
    """A Kubernetes agent's schedulers listen on the pod's loopback for their tokens, and
    their metrics pages were there too: Prometheus, outside the pod, could never scrape them."""
    config = tmp_path / "resource-config.txt"
    config.write_text("1\na 0.2 0.5 1GiB\n")
    schd = start_scheduler(config, *FAST, "--metrics-port", "0", "--metrics-ip", "0.0.0.0")
    try:
        port = int(schd.wait_for(r"metrics on http://0\.0\.0\.0:(\d+)/metrics").group(1))
        assert ("gemini_limit_ratio", "a") in scrape(port)
    finally:
        schd.stop()
