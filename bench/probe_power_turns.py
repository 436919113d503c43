"""Exploration (not a benchmark): can the power each program draws in its turns tell its own
clock, the one it would run at alone?  A light program (Triton's FMA chain, 1980 MHz alone) and
a power-hungry one (torch eager's bf16 matmuls) run alone, then in turns of 30 / 70 ms (a
0.3 / 0.7 pair), then the heavy one alone again right after; a thread reads the SM clock, the
instantaneous power (NVML field 186) and the averaged power every millisecond.

  python3 bench/probe_power_turns.py [--out DIR]

What it found on the H100 (driver 580.159.04, 2026-11-26, `…-131759-probe-power-turns.json`):
NVML's SM clock and both power readings change only every 100 ms, so turns of 30-70 ms are not
told apart by them (the per-turn figures of both programs are one mix); and after the turns
the heavy program alone held 1590-1605 MHz for 0.8 s, until the averaged power (a 1 s mean)
reached its limit, and only then fell to its own 1335-1590.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import path_app

FI_POWER_INSTANT = 186


class FieldValue(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint),
                ("timestamp", ctypes.c_longlong), ("latencyUsec", ctypes.c_longlong),
                ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


class Sampler:
    def __init__(self) -> None:
        self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
        assert self.nvml.nvmlInit_v2() == 0
        self.h = ctypes.c_void_p()
        assert self.nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.h)) == 0
        self.samples: list[tuple[float, float, float, float]] = []  # t, MHz, W instant, W avg
        self.stop = False

    def read(self) -> tuple[float, float, float]:
        mhz, mw = ctypes.c_uint(), ctypes.c_uint()
        self.nvml.nvmlDeviceGetClockInfo(self.h, 1, ctypes.byref(mhz))
        self.nvml.nvmlDeviceGetPowerUsage(self.h, ctypes.byref(mw))
        fv = FieldValue(fieldId=FI_POWER_INSTANT)
        rc = self.nvml.nvmlDeviceGetFieldValues(self.h, 1, ctypes.byref(fv))
        inst = fv.value / 1000.0 if rc == 0 and fv.nvmlReturn == 0 else math.nan
        return float(mhz.value), inst, mw.value / 1000.0

    def run(self) -> None:
        while not self.stop:
            t = time.monotonic()
            self.samples.append((t, *self.read()))
            time.sleep(0.001)

    def over(self, a: float, b: float) -> dict:
        inside = [s for s in self.samples if a <= s[0] <= b]
        return {"n": len(inside), **medians(inside)} if inside else {}


def medians(samples: list[tuple[float, float, float, float]]) -> dict:
    """The median clock and powers of `samples`, with their 10th and 90th percentiles."""
    out: dict = {}
    for i, key in ((1, "mhz"), (2, "w_instant"), (3, "w_avg")):
        vals = sorted(s[i] for s in samples if not math.isnan(s[i]))
        if vals:
            out[key] = round(statistics.median(vals), 1)
            out[key + "_p10_p90"] = [round(vals[len(vals) // 10], 1),
                                     round(vals[(9 * len(vals)) // 10], 1)]
    return out


def run_for(work, seconds: float) -> int:
    steps, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        work.step()
        work.sync()
        steps += 1
    return steps


def alone(work, sampler: Sampler, seconds: float) -> dict:
    run_for(work, 0.5)
    t0 = time.monotonic()
    steps = run_for(work, seconds)
    t1 = time.monotonic()
    return {"rate": steps / (t1 - t0), **sampler.over(t0, t1)}


def turns(light, heavy, sampler: Sampler, seconds: float, light_ms: float, heavy_ms: float,
          skip_ms: float) -> dict:
    log: dict[str, list[tuple[float, float, int]]] = {"light": [], "heavy": []}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, work, ms in (("light", light, light_ms), ("heavy", heavy, heavy_ms)):
            a = time.monotonic()
            n = run_for(work, ms / 1000)
            log[name].append((a, time.monotonic(), n))
    out = {}
    for name, spans in log.items():
        spans = spans[2:]
        busy = sum(b - a for a, b, _ in spans)
        inside = [s for s in sampler.samples
                  if any(a + skip_ms / 1000 <= s[0] <= b for a, b, _ in spans)]
        out[name] = {"rate_in_turns": sum(n for *_, n in spans) / busy, "turns": len(spans),
                     "samples": len(inside), **medians(inside)}
    return out


def settle(work, sampler: Sampler, seconds: float, bin_ms: float) -> list[dict]:
    t0 = time.monotonic()
    run_for(work, seconds)
    bins = []
    for i in range(int(seconds * 1000 / bin_ms)):
        a = t0 + i * bin_ms / 1000
        got = sampler.over(a, a + bin_ms / 1000)
        bins.append({"from_ms": i * bin_ms, "mhz": got.get("mhz"),
                     "w_instant": got.get("w_instant"), "w_avg": got.get("w_avg")})
    return bins


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    sampler = Sampler()
    threading.Thread(target=sampler.run, daemon=True).start()
    light, heavy = path_app.make("triton"), path_app.make("torch-eager")
    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                    "light": "triton", "heavy": "torch-eager"}
    result["light_alone"] = alone(light, sampler, 3.0)
    result["heavy_alone"] = alone(heavy, sampler, 3.0)
    for light_ms, heavy_ms in ((30, 70), (70, 30), (50, 50)):
        key = f"turns_{light_ms}_{heavy_ms}"
        result[key] = turns(light, heavy, sampler, 6.0, light_ms, heavy_ms, skip_ms=5)
        for name in ("light", "heavy"):
            r = result[key][name]
            r["speed"] = round(r["rate_in_turns"] / result[f"{name}_alone"]["rate"], 4)
    time.sleep(0.3)
    result["heavy_after_turns"] = settle(heavy, sampler, 1.5, 25)
    time.sleep(1.0)
    run_for(light, 3.0)
    result["heavy_after_light"] = settle(heavy, sampler, 1.5, 25)
    sampler.stop = True
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "probe-power-turns.json").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
