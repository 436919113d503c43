"""The /metrics page from a status snapshot, and the HTTP answers around it (pure)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from gemini.core.metrics import exposition
from gemini.daemon.metrics import answer, cached

SNAPSHOT = {
    "waiting_clients": 1,
    "short_window_s": 1.0,
    "clients": [
        {"name": "a", "gpu": "1", "share": 0.3, "share_short": 0.35, "request": 0.25,
         "limit": 0.5, "mem_used": 1024, "gpu_mem": 4096, "tokens": 7, "overuse_s": 0.002,
         "overrun_s": 0.001},
        {"name": "b", "gpu": "1", "share": 0.6, "request": 0.5, "limit": 1.0, "mem_used": 0,
         "gpu_mem": 8192, "tokens": 0, "overuse_s": 0.0},
    ],
}


def samples(page: bytes) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(page.decode())
        for s in family.samples
    }


def test_every_quantity_of_every_client_with_its_gpu() -> None:
    got = samples(exposition(SNAPSHOT, "1"))
    a = (("client", "a"), ("gpu", "1"))
    assert got[("gemini_usage_ratio", a)] == 0.3
    assert got[("gemini_usage_short_ratio", a)] == 0.35
    assert got[("gemini_request_ratio", a)] == 0.25
    assert got[("gemini_limit_ratio", a)] == 0.5
    assert got[("gemini_memory_used_bytes", a)] == 1024
    assert got[("gemini_memory_limit_bytes", a)] == 4096
    assert got[("gemini_tokens_total", a)] == 7
    assert got[("gemini_overuse_seconds_total", a)] == 0.002
    assert got[("gemini_overrun_seconds_total", a)] == 0.001
    assert got[("gemini_waiting_clients", (("gpu", "1"),))] == 1
    assert got[("gemini_usage_ratio", (("client", "b"), ("gpu", "1")))] == 0.6


def test_without_a_short_window_no_share_over_it_is_served() -> None:
    # (a 0 there would read as a client that did not use the GPU)
    got = samples(exposition({**SNAPSHOT, "short_window_s": 0.0}, "1"))
    assert not any(name == "gemini_usage_short_ratio" for name, _ in got)
    assert got[("gemini_usage_ratio", (("client", "a"), ("gpu", "1")))] == 0.3


def test_no_clients_is_a_valid_page() -> None:
    got = samples(exposition({"clients": [], "waiting_clients": 0}))
    assert got == {("gemini_waiting_clients", (("gpu", "0"),)): 0.0}


def page() -> bytes:
    return b"x 1\n"


def test_get_metrics() -> None:
    response = answer(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", page)
    assert response.startswith(b"HTTP/1.1 200 OK\r\n") and response.endswith(b"\r\n\r\nx 1\n")
    assert b"Content-Length: 4\r\n" in response
    head = answer(b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n", page)
    assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")


def test_a_flood_of_scrapes_renders_the_page_once_a_second() -> None:
    """(Each page walks the scheduler's windows on its loop: scrapes in a burst delayed tokens.)"""
    now = [100.0]
    rendered = []

    def render() -> bytes:
        rendered.append(now[0])
        return f"at {now[0]}\n".encode()

    page_of = cached(render, 1.0, lambda: now[0])
    for _ in range(200):
        assert page_of() == b"at 100.0\n"
        now[0] += 0.004  # 200 scrapes in 0.8 s
    now[0] = 101.0
    assert page_of() == b"at 101.0\n"
    now[0] = 50.0  # a clock that went back: rendered again, not served for ever
    assert page_of() == b"at 50.0\n"
    assert rendered == [100.0, 101.0, 50.0]


def test_anything_else_is_refused_plainly() -> None:
    assert answer(b"GET / HTTP/1.1\r\n\r\n", page).startswith(b"HTTP/1.1 404")
    assert answer(b"POST /metrics HTTP/1.1\r\n\r\n", page).startswith(b"HTTP/1.1 405")
    assert answer(b"\x00\xffgarbage", page).startswith(b"HTTP/1.1 400")
    assert answer(b"", page).startswith(b"HTTP/1.1 400")


def test_the_grafana_dashboard_plots_only_metrics_we_serve() -> None:
    import json
    import re
    from pathlib import Path

    dashboard = Path(__file__).resolve().parents[2] / "deploy/grafana/gemini-dashboard.json"
    panels = json.loads(dashboard.read_text())["panels"]
    served = {name for name, _ in samples(exposition(SNAPSHOT, "1"))}
    used = {m for p in panels for t in p["targets"] for m in re.findall(r"gemini_\w+", t["expr"])}
    assert used == served
