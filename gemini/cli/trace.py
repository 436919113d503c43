"""gemini trace: record token grants for N seconds; write a Chrome trace and a PNG timeline."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

from gemini.cli._args import add_secret_file, load_secret_arg, port_list, positive
from gemini.core.trace import (
    Interval,
    TraceRecorder,
    chrome_trace,
    from_zero,
    shares_over_time,
)
from gemini.secret import SecretError

POLL_S = 0.2  # well inside the scheduler's window, so no grant is missed



def record(
    ip: str, ports: list[int], seconds: float, secret: bytes | None = None
) -> tuple[dict[int, list[Interval]], dict[int, str]]:
    """The grants of each scheduler (one per GPU), by port; and why each one that did not
    answer the first look did not (it is left out at once, not asked five times a second for
    the whole recording).  A later look that fails is skipped: the scheduler's history covers
    the gap if it answers again within its window."""
    from gemini.client import query_status

    recorders = {port: TraceRecorder() for port in ports}
    errors: dict[int, str] = {}
    end = time.monotonic() + seconds
    first = True
    while recorders:
        for port, recorder in list(recorders.items()):
            try:
                snapshot = query_status(ip, port, secret=secret)
                recorder.add(snapshot["history"], snapshot.get("uptime_s"), time.monotonic())
            except (OSError, KeyError, TypeError, ValueError) as exc:
                if first:
                    del recorders[port]
                    errors[port] = f"{ip}:{port}: {exc}"
        first = False
        if time.monotonic() >= end:
            break
        time.sleep(POLL_S)
    return from_zero({port: r.intervals() for port, r in recorders.items()}), errors


def merged(traces: dict[int, list[Interval]]) -> tuple[dict[str, Any], list[Interval]]:
    """One Chrome trace with a process row per GPU, and the intervals for the PNG (clients
    named with their scheduler's port when there are several)."""
    events: list[dict[str, Any]] = []
    flat: list[Interval] = []
    for pid, (port, intervals) in enumerate(traces.items(), start=1):
        events += chrome_trace(intervals, f"GPU :{port}", pid)["traceEvents"]
        suffix = f" :{port}" if len(traces) > 1 else ""
        flat += [(f"{n}{suffix}", s, e) for n, s, e in intervals]
    return {"traceEvents": events, "displayTimeUnit": "ms"}, flat


def plot(intervals: list[Interval], path: Path, bin_s: float = 1.0) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({n for n, _, _ in intervals})
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 2 + 0.5 * len(names) + 3), sharex=True)
    t0 = min((s for _, s, _ in intervals), default=0.0)
    for row, name in enumerate(names):
        spans = [(s - t0, e - s) for n, s, e in intervals if n == name]
        top.broken_barh(spans, (row - 0.4, 0.8), color=f"C{row}")
    top.set_yticks(range(len(names)), names)
    top.set_title("token held (one bar per grant)")
    for row, (name, series) in enumerate(sorted(shares_over_time(intervals, bin_s).items())):
        top_times = [t - t0 + bin_s / 2 for t, _ in series]
        bottom.plot(top_times, [v for _, v in series], label=name, color=f"C{row}")
    bottom.set_ylim(0, 1.05)
    bottom.set_ylabel(f"share per {bin_s:g} s")
    bottom.set_xlabel("seconds")
    bottom.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="gemini trace",
        description="Record token grants and returns; write a Chrome/Perfetto trace (JSON, open "
        "in ui.perfetto.dev) and a PNG with per-client shares over time.",
        epilog="example: gemini trace --seconds 10 --out trace.json   (also writes trace.png)",
    )
    p.add_argument("--ip", default="127.0.0.1")
    p.add_argument("--port", type=port_list, default=[50051],
                   help="scheduler port(s), comma-separated: one scheduler per GPU (50051)")
    p.add_argument("--seconds", type=positive, default=10.0)
    p.add_argument("--out", type=Path, default=Path("gemini-trace.json"))
    p.add_argument("--png", type=Path, default=None, help="PNG path (default: --out with .png)")
    p.add_argument("--bin", type=positive, default=1.0, help="seconds per share bin in the PNG")
    add_secret_file(p, from_env=True)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        secret = load_secret_arg("gemini trace", args.secret_file)
    except SecretError as exc:
        print(f"gemini trace: {exc}", file=sys.stderr)
        return 2
    png = args.png or args.out.with_suffix(".png")
    # Said before the recording, not after it, which they would throw away.
    for path in (args.out, png):
        if not path.absolute().parent.is_dir():
            print(f"gemini trace: no directory {path.absolute().parent} for {path}",
                  file=sys.stderr)
            return 2
    can_plot = importlib.util.find_spec("matplotlib") is not None
    intervals_by_port, errors = record(args.ip, args.port, args.seconds, secret)
    for why in errors.values():
        print(f"gemini trace: no answer from the scheduler at {why}", file=sys.stderr)
    if not intervals_by_port:
        return 1
    trace, intervals = merged(intervals_by_port)
    args.out.write_text(json.dumps(trace))
    if can_plot:
        plot(intervals, png, args.bin)
        print(f"{len(intervals)} grants: {args.out} and {png}")
    else:
        print(f"{len(intervals)} grants: {args.out} (no PNG without matplotlib: "
              "pip install '.[plot]')")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
