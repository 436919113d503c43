"""Rendering the scheduler's status snapshot as a table (pure: dict in, text out).

A spatial partition's client (issue 13) shows its mode, and its share is of its partition's time
(its partition's token); the head names each partition's token holder."""

from __future__ import annotations

import unicodedata
from typing import Any

BAR_WIDTH = 20


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    filled = max(0, min(width, round(fraction * width)))
    return "█" * filled + "·" * (width - filled)


def mode(client: dict[str, Any]) -> str:
    """A client's mode as the table shows it (spatial partitions, issue 13)."""
    if client.get("partition") is None:
        return "time-sliced"
    where = f"{client['partition']} {client['sm']}%"
    if client.get("mode") == "spatial":
        return f"spatial {where}"
    return f"time-sliced ({where}, no MPS)"


def _tokens(snapshot: dict[str, Any]) -> str:
    """Who holds the GPU's token, and each partition's (spatial partitions have one each)."""
    tokens = f"token: {snapshot['holder'] or '-'}"
    for part in snapshot.get("partitions", []):
        tokens += f", {part['name']}: {part['holder'] or '-'}"
    return tokens


def render(snapshot: dict[str, Any], title: str = "", with_bars: bool = False) -> str:
    gpus = {c.get("gpu", "0") for c in snapshot["clients"]}
    gpu = f"GPU {gpus.pop()}, " if len(gpus) == 1 else ""
    head = (
        f"{title}{gpu}uptime {snapshot['uptime_s']:.1f} s, window {snapshot['window_s']:.1f} s, "
        f"{_tokens(snapshot)}"
    )
    # The mode column only where a client has a partition: v1 configs look as they did.
    modes = any(c.get("partition") is not None for c in snapshot["clients"])
    # The share over the short window beside the long one's, where there is one.
    short = snapshot.get("short_window_s") or 0.0
    shares = ["share", f"{short:g} s"] if short > 0 else ["share"]
    columns = ["client", "request", "limit", *shares, "quota ms", "token", "procs", "waiting",
               "memory MiB used/limit"] + (["mode"] if modes else [])
    rows = []
    for c in snapshot["clients"]:
        token = "held" if c["holder"] else ("wait" if c["waiting"] else "")
        short_share = [f"{c.get('share_short', 0.0):.3f}"] if short > 0 else []
        rows.append([
            c["name"], f"{c['request']:.2f}", f"{c['limit']:.2f}", f"{c['share']:.3f}",
            *short_share, f"{c['quota_ms']:.0f}", token, str(c["processes"]),
            str(c["waiting_processes"]), f"{_mib(c['mem_used'])}/{_mib(c['gpu_mem'])}",
        ])
        if modes:
            rows[-1].append(mode(c))
        if with_bars:
            rows[-1].append(bar(c["share"]))
    if with_bars:
        columns.append("share of window")
    widths = [max(cells(r[i]) for r in [columns, *rows]) for i in range(len(columns))]
    lines = [head] + ["  ".join(pad(v, w) for v, w in zip(r, widths, strict=True))
                      for r in [columns, *rows]]
    if asking := snapshot.get("removed_asking"):
        lines.append(f"removed from the config, its processes still waiting: {', '.join(asking)}")
    return "\n".join(line.rstrip() for line in lines)


def cells(text: str) -> int:
    """Terminal cells `text` takes: two for a wide character (CJK), none for a mark or a
    format character (Thai vowel signs, zero-width joiners and spaces)."""
    return sum(0 if unicodedata.category(ch) in ("Mn", "Me", "Cf") else
               2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int) -> str:
    return text + " " * (width - cells(text))
