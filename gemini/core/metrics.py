"""The scheduler's status snapshot in the Prometheus text format (pure: dict in, text out).

One family per quantity, the client (and its GPU) as labels, so a dashboard can plot every
client of every GPU from one query.  `gemini.daemon.metrics` serves it at /metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LABELS = ["client", "gpu"]

# (name, help, snapshot field, kind)
PER_CLIENT = [
    ("gemini_usage_ratio", "Share of GPU time over the scheduler's window.", "share", "gauge"),
    ("gemini_usage_short_ratio", "Share of GPU time over the scheduler's short window (1 s by "
     "default), where caps hold second by second.", "share_short", "gauge"),
    ("gemini_request_ratio", "Guaranteed share (REQUEST).", "request", "gauge"),
    ("gemini_limit_ratio", "Maximum share (LIMIT).", "limit", "gauge"),
    ("gemini_memory_used_bytes", "GPU memory the client's processes hold.", "mem_used", "gauge"),
    ("gemini_memory_limit_bytes", "GPU memory limit (GPU_MEM).", "gpu_mem", "gauge"),
    ("gemini_tokens", "Tokens granted.", "tokens", "counter"),
    ("gemini_overuse_seconds", "GPU time used past the client's tokens, charged to it.",
     "overuse_s", "counter"),
    ("gemini_overrun_seconds", "GPU time of the client's tokens that other clients' overuse "
     "took, given back to it.", "overrun_s", "counter"),
]


class _SnapshotCollector:
    def __init__(self, snapshot: dict[str, Any], gpu: str) -> None:
        self.snapshot = snapshot
        self.gpu = gpu

    def collect(self) -> Iterator[Metric]:
        clients = self.snapshot["clients"]
        for name, help_text, key, kind in PER_CLIENT:
            if key == "share_short" and not self.snapshot.get("short_window_s"):
                continue  # (no short window: a 0 there would read as idle)
            family: Metric
            if kind == "counter":  # the library adds the _total suffix
                family = CounterMetricFamily(name, help_text, labels=LABELS)
            else:
                family = GaugeMetricFamily(name, help_text, labels=LABELS)
            for c in clients:
                family.add_metric([c["name"], str(c.get("gpu", self.gpu))], float(c.get(key, 0)))
            yield family
        waiting = GaugeMetricFamily("gemini_waiting_clients",
                                    "Clients waiting for the token.", labels=["gpu"])
        waiting.add_metric([self.gpu], float(self.snapshot.get("waiting_clients", 0)))
        yield waiting


def exposition(snapshot: dict[str, Any], gpu: str = "0") -> bytes:
    """The snapshot as a /metrics page (`gpu`: the scheduler's GPU, for its own families)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(snapshot, gpu))  # type: ignore[arg-type]
    return generate_latest(registry)
