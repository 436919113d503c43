"""Rendering the scheduler's status snapshot as a table (pure: dict in, text out)."""

from __future__ import annotations

from typing import Any

BAR_WIDTH = 20


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    filled = max(0, min(width, round(fraction * width)))
    return "█" * filled + "·" * (width - filled)


def render(snapshot: dict[str, Any], title: str = "", with_bars: bool = False) -> str:
    gpus = {c.get("gpu", "0") for c in snapshot["clients"]}
    gpu = f"GPU {gpus.pop()}, " if len(gpus) == 1 else ""
    head = (
        f"{title}{gpu}uptime {snapshot['uptime_s']:.1f} s, window {snapshot['window_s']:.1f} s, "
        f"token: {snapshot['holder'] or '-'}"
    )
    columns = ["client", "request", "limit", "share", "quota ms", "token", "procs", "waiting",
               "memory MiB used/limit"]
    rows = []
    for c in snapshot["clients"]:
        token = "held" if c["holder"] else ("wait" if c["waiting"] else "")
        rows.append([
            c["name"], f"{c['request']:.2f}", f"{c['limit']:.2f}", f"{c['share']:.3f}",
            f"{c['quota_ms']:.0f}", token, str(c["processes"]), str(c["waiting_processes"]),
            f"{_mib(c['mem_used'])}/{_mib(c['gpu_mem'])}",
        ])
        if with_bars:
            rows[-1].append(bar(c["share"]))
    if with_bars:
        columns.append("share of window")
    widths = [max(len(r[i]) for r in [columns, *rows]) for i in range(len(columns))]
    lines = [head, "  ".join(col.ljust(w) for col, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)
