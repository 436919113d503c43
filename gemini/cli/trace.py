"""gemini trace: record token grants for N seconds; write a Chrome trace and a PNG timeline."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gemini.cli._args import add_secret_file, load_secret_arg
from gemini.core.trace import Interval, TraceRecorder, chrome_trace, shares_over_time
from gemini.secret import SecretError

POLL_S = 0.2  # well inside the scheduler's window, so no grant is missed


def record(ip: str, port: int, seconds: float, secret: bytes | None = None) -> list[Interval]:
    from gemini.client import query_status

    recorder = TraceRecorder()
    end = time.monotonic() + seconds
    while True:
        recorder.add(query_status(ip, port, secret=secret)["history"])
        if time.monotonic() >= end:
            return recorder.intervals()
        time.sleep(POLL_S)


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
    p.add_argument("--port", type=int, default=50051)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--out", type=Path, default=Path("gemini-trace.json"))
    p.add_argument("--png", type=Path, default=None, help="PNG path (default: --out with .png)")
    p.add_argument("--bin", type=float, default=1.0, help="seconds per share bin in the PNG")
    add_secret_file(p, from_env=True)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        secret = load_secret_arg("gemini trace", args.secret_file)
    except SecretError as exc:
        print(f"gemini trace: {exc}", file=sys.stderr)
        return 2
    try:
        intervals = record(args.ip, args.port, args.seconds, secret)
    except OSError as exc:
        print(f"gemini trace: cannot reach the scheduler at {args.ip}:{args.port}: {exc}",
              file=sys.stderr)
        return 1
    args.out.write_text(json.dumps(chrome_trace(intervals, f"GPU :{args.port}")))
    png = args.png or args.out.with_suffix(".png")
    plot(intervals, png, args.bin)
    print(f"{len(intervals)} grants: {args.out} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
