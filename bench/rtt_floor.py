"""Where a paced token round trip's time goes (issue 12: "token round trip p50 <= 100 us").

  python3 bench/rtt_floor.py [--out DIR]

A client asks for tokens through one pod manager and the scheduler, as bench/scenarios.py's S6,
in every combination of: the daemons sleeping between messages or busy polling
(GEMINI_BUSY_POLL_MS=20, longer than the pace); the client sleeping in recv or polling a
non-blocking socket; requests back to back, every 1 ms or every 10 ms (the pace slept, or
spun, by the client).  Also a pod-manager-only trip (MEM_LIMIT) and a token answered from the
pod manager's cache.  p50 / p90 in microseconds.  What it tells apart: the wake-ups of idle
processes (gone when everyone polls) from the cost of the messages' path through two Python
daemons once it has gone cold (left when everyone polls).  Beside them, the same messages
between C processes that block in read() (bench/echo_floor.c: one echo server, and a relay in
front of it as the pod manager is in front of the scheduler): what any daemon that sleeps
between messages pays on this host, whatever its language.

--cpu-latency-us N holds a PM QoS request on /dev/cpu_dma_latency for the whole run (the
kernel keeps every CPU out of idle states that take longer than N us to leave, and drops the
request when the file is closed): it tells how much of a paced round trip is CPUs waking from
deep idle.  It needs write access to that file (root); the run says whether it was held.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import GIB, Backend, Client, Procs, gpu_name, print_and_write
from scenarios import PollingSocket


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _series(call: Callable[[], object], n: int, pace_s: float, spin_pace: bool) -> list[float]:
    out = []
    for _ in range(n):
        if pace_s and spin_pace:
            _spin(pace_s)
        elif pace_s:
            time.sleep(pace_s)
        t = time.perf_counter_ns()
        call()
        out.append((time.perf_counter_ns() - t) / 1000)
    out.sort()
    return [round(out[len(out) // 2], 1), round(out[int(len(out) * 0.9)], 1)]


@contextlib.contextmanager
def cpu_latency_held(us: int | None) -> Iterator[str]:
    """Hold /dev/cpu_dma_latency at `us` while the block runs; yields what was done."""
    if us is None:
        yield "not asked"
        return
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    except OSError as e:
        yield f"not held: {e}"
        return
    try:
        os.write(fd, struct.pack("i", us))
        yield f"held at {us} us"
    finally:
        os.close(fd)


def idle_states() -> list[dict[str, str]]:
    """cpu0's idle states (name, exit latency in us, disabled), as the kernel lists them."""
    out = []
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cpuidle").glob("state*")):
        def read(name: str, d: Path = d) -> str:
            try:
                return (d / name).read_text().strip()
            except OSError:
                return "?"
        out.append({"name": read("name"), "latency_us": read("latency"),
                    "disabled": read("disable")})
    return out


def measure(procs: Procs) -> dict:
    from gemini.client import Connection
    from gemini.core.wire import RequestType

    res: dict = {}
    for poll in ("0", "20"):
        backend = Backend(procs, [Client("rtt", 1.0, 1.0, GIB)], tag=f"rtt-floor{poll}",
                          daemon_env={"GEMINI_BUSY_POLL_MS": poll})
        try:
            with Connection("127.0.0.1", backend.pmgrs["rtt"].port, "rtt") as c:
                for _ in range(200):  # warm-up
                    c.call(RequestType.MEM_LIMIT)

                def token() -> None:
                    c.call(RequestType.QUOTA, 0.0, 1e9)  # never fits the cached token

                daemons = "polling" if poll != "0" else "sleeping"
                res[f"daemons_{daemons}"] = d = {
                    "client_sleeps": {"back_to_back": _series(token, 300, 0, False),
                                      "every_1ms": _series(token, 300, 0.001, False),
                                      "every_10ms": _series(token, 200, 0.01, False)}}
                c.sock = PollingSocket(c.sock)  # type: ignore[assignment]
                d["client_polls"] = {
                    "back_to_back": _series(token, 300, 0, True),
                    "every_10ms": _series(token, 200, 0.01, False),
                    "every_10ms_pace_spun": _series(token, 200, 0.01, True),
                    "pmgr_only_every_10ms_pace_spun": _series(
                        lambda: c.call(RequestType.MEM_LIMIT), 200, 0.01, True),
                    "cached_token_every_10ms_pace_spun": _series(
                        lambda: c.call(RequestType.QUOTA, 0.0, 0.0), 200, 0.01, True)}
        finally:
            backend.stop()
    return res


def c_echo_floor(paced: int = 200, back_to_back: int = 2000) -> dict:
    """bench/echo_floor.c, built with the host's cc: 1 and 2 hops, `back_to_back` requests
    back to back and `paced` every 10 ms (the client sleeping, or spinning, in between)."""
    src = Path(__file__).resolve().parent / "echo_floor.c"
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "echo_floor"
        subprocess.run(["cc", "-O2", "-o", str(exe), str(src)], check=True)

        def series(hops: int, pace_us: int, n: int, spin: int) -> list[float]:
            out = subprocess.run([str(exe), str(hops), str(pace_us), str(n), str(spin)],
                                 check=True, capture_output=True, text=True, timeout=60).stdout
            return [float(x) for x in out.split()]

        return {f"{hops}_hop{'s' if hops > 1 else ''}": {
            "back_to_back": series(hops, 0, back_to_back, 0),
            "every_10ms": series(hops, 10000, paced, 0),
            "every_10ms_pace_spun": series(hops, 10000, paced, 1)} for hops in (1, 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--cpu-latency-us", type=int, default=None,
                   help="hold /dev/cpu_dma_latency at this many microseconds during the run")
    args = p.parse_args(argv)
    with cpu_latency_held(args.cpu_latency_us) as held:
        with Procs() as procs:
            res = measure(procs)
        res["c_processes_sleeping"] = c_echo_floor()
    out = {"device": gpu_name(), "date": time.strftime("%Y-%m-%d %H:%M"),
           "command": "python3 bench/rtt_floor.py " + " ".join(argv or sys.argv[1:]),
           "unit": "[p50, p90] microseconds per round trip", "cpu_latency": held,
           "cpu0_idle_states": idle_states(), **res}
    kind = "rtt-floor"
    if args.cpu_latency_us is not None:
        kind += f"-cpu-latency-{args.cpu_latency_us}"
    print_and_write(out, args.out, kind)
    return 0


if __name__ == "__main__":
    sys.exit(main())
