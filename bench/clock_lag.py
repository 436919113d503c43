"""One-off probe (issue 12): does NVML's SM clock follow the work rate in time?  No gemini.

  python3 bench/clock_lag.py OUT.json

4096² bf16 matmuls, paced 40 ms on / 60 ms off for 2 s, then one 200 ms continuous phase, six
times; then 3 s continuous.  Every matmul is bracketed by CUDA events (its GPU duration gives
the work rate); a thread reads NVML's SM clock every 1 ms.  For each 200 ms phase, by 20 ms
buckets from its start: [ms, matmul rate / continuous rate, NVML MHz in the bucket, the same
read 40 ms later, 80 ms later].  Result: bench/results/…-clock-lag.json.
"""

from __future__ import annotations

import ctypes
import json
import sys
import threading
import time

import torch

N = 4096
NVML_CLOCK_SM = 1


class ClockReader:
    """NVML's SM clock of GPU 0, read every 1 ms in a thread: (time.monotonic(), MHz)."""

    def __init__(self) -> None:
        self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
        self.nvml.nvmlInit_v2()
        self.handle = ctypes.c_void_p()
        self.nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.handle))
        self.samples: list[tuple[float, int]] = []
        self.stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        value = ctypes.c_uint()
        while not self.stop:
            t = time.monotonic()
            self.nvml.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(value))
            self.samples.append((t, value.value))
            time.sleep(0.001)

    def mean(self, start: float, end: float) -> float:
        mhz = [m for t, m in self.samples if start <= t < end and m > 900]
        return sum(mhz) / len(mhz) if mhz else float("nan")


class Matmuls:
    """Matmuls queued for a while of host time, each between two timed events."""

    def __init__(self) -> None:
        self.a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16) / 64
        self.c = torch.empty_like(self.a)
        for _ in range(50):
            torch.mm(self.a, self.b, out=self.c)
        torch.cuda.synchronize()
        self.ref = torch.cuda.Event(enable_timing=True)
        self.ref.record()
        torch.cuda.synchronize()
        self.t_ref = time.monotonic()
        self.events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def run(self, seconds: float) -> tuple[float, float]:
        """Queue matmuls for `seconds` (at most 8 ahead), then sync; (start, end) host times."""
        start = time.monotonic()
        while time.monotonic() < start + seconds:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.mm(self.a, self.b, out=self.c)
            e.record()
            self.events.append((s, e))
            if len(self.events) > 8:
                self.events[-8][1].synchronize()
        torch.cuda.synchronize()
        return start, time.monotonic()

    def spans(self) -> list[tuple[float, float]]:
        """Each matmul's (start, end) on the host clock."""
        def at(ev: torch.cuda.Event) -> float:
            return self.t_ref + self.ref.elapsed_time(ev) / 1e3
        return [(at(s), at(e)) for s, e in self.events]


def main(out_path: str) -> None:
    clock, work = ClockReader(), Matmuls()
    phases: list[tuple[str, float, float]] = []
    time.sleep(2.0)
    for _ in range(6):
        cycle = time.monotonic()
        while time.monotonic() - cycle < 2.0:
            phases.append(("on", *work.run(0.040)))
            time.sleep(max(0.0, 0.100 - (time.monotonic() - phases[-1][1])))
        phases.append(("cal", *work.run(0.200)))
        time.sleep(0.06)
    cont_start, cont_end = work.run(3.0)
    clock.stop = True
    spans = work.spans()
    steady = [e - s for s, e in spans if s > cont_start + 1.0]
    ms_cont = sum(steady) / len(steady)

    def rate(start: float, end: float) -> float:
        d = [e - s for s, e in spans if start <= s < end]
        return ms_cont / (sum(d) / len(d)) if d else float("nan")

    ons = [p for p in phases if p[0] == "on"][-40:]
    out = {"matmul_ms_continuous": ms_cont * 1e3,
           "f_cont": clock.mean(cont_start + 1.0, cont_end),
           "paced_rate": sum(rate(s, e) for _, s, e in ons) / len(ons),
           "paced_mhz": sum(clock.mean(s, e) for _, s, e in ons) / len(ons),
           "cal": []}
    for kind, start, _ in phases:
        if kind != "cal":
            continue
        rows = []
        for ms in range(0, 200, 20):
            a, b = start + ms / 1e3, start + ms / 1e3 + 0.02
            rows.append([ms, round(rate(a, b), 3), round(clock.mean(a, b)),
                         round(clock.mean(a + 0.04, b + 0.04)),
                         round(clock.mean(a + 0.08, b + 0.08))])
        out["cal"].append(rows)
        print("cal", " ".join("{}:{}/{}/{}/{}".format(*r) for r in rows))
    print(f"continuous: {out['matmul_ms_continuous']:.3f} ms a matmul at {out['f_cont']:.0f} MHz;"
          f" paced: {out['paced_rate']:.3f}x at {out['paced_mhz']:.0f} MHz")
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "clock-lag.json")
