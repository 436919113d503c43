"""A process that behaves like a hooked application, for end-to-end tests without a GPU.

It asks its pod manager for the token and "runs kernel bursts" of --burst-ms (sleeping stands in
for GPU work) while a whole burst still fits in what is left of the token; then it asks again,
early, as Gemini's hook does when its next burst would not fit.  It runs for --seconds and prints
one JSON line at the end: the seconds it held the token and the intervals (time.monotonic(), the
same clock in every process) during which it did.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from gemini.client import Connection
from gemini.core.wire import RequestType, Status


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--burst-ms", type=float, default=15.0)
    args = p.parse_args()
    held = 0.0
    grants = 0
    intervals: list[tuple[float, float]] = []
    with Connection("127.0.0.1", args.port, args.name, timeout=None) as conn:
        print(json.dumps({"ready": True}), flush=True)
        end = time.monotonic() + args.seconds
        while (now := time.monotonic()) < end:
            rsp, _ = conn.call(RequestType.QUOTA, 0.0, args.burst_ms)
            if rsp.status is not Status.OK:
                print(json.dumps({"error": rsp.status.name}), flush=True)
                return 1
            grants += 1
            start = time.monotonic()
            burst_s = args.burst_ms / 1000.0
            bursts = int(min(rsp.values[0] / 1000.0, end - start) // burst_s)
            if bursts > 0:
                time.sleep(bursts * burst_s)  # the workload: GPU work, burst after burst
                held += time.monotonic() - start
                intervals.append((start, time.monotonic()))
        del now
    print(json.dumps({"held_s": held, "grants": grants, "intervals": intervals}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
