"""gem-schd's reading of its GPU's SM clock through NVML, for the capped clients' speed
(gemini.core.speed: caps by work).  A thread reads the clock every `SAMPLE_S`; the event loop
hands what it read to the scheduler core every `FEED_S`, and the thread reads only while some
client has a cap (else it waits: ~500 NVML calls a second for nothing, beside a program that
may need the CPU).  Where NVML or the GPU cannot be found, nothing is read and caps stay in
time (said once in the log)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("gemini.schd")

SAMPLE_S = 0.002  # a calibration grant's 80 ms tail gets ~40 readings (each ~2 µs on an H100)
FEED_S = 0.05
NVML_CLOCK_SM = 1
# An idle GPU drops to its idle clock (345 MHz on an H100, against 1100-1980 while it works):
# such a reading says the GPU had nothing to run, not how fast it runs a client's work.
IDLE_BELOW = 0.5  # of the GPU's highest SM clock

ReadMhz = Callable[[], float]


def nvml_sm_clock(gpu: str) -> tuple[ReadMhz | None, str]:
    """A function that reads the SM clock (MHz) of `gpu` (an index or a UUID, as the config
    spells it), or None and why not."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None, "nvmlInit_v2 failed"
        handle = ctypes.c_void_p()
        if gpu.isdigit():
            rc = nvml.nvmlDeviceGetHandleByIndex_v2(int(gpu), ctypes.byref(handle))
        else:
            rc = nvml.nvmlDeviceGetHandleByUUID(gpu.encode(), ctypes.byref(handle))
        if rc != 0:
            return None, f"NVML has no GPU {gpu} (error {rc})"
        get_clock = nvml.nvmlDeviceGetClockInfo
        highest = ctypes.c_uint()
        if nvml.nvmlDeviceGetMaxClockInfo(handle, NVML_CLOCK_SM, ctypes.byref(highest)) != 0:
            return None, f"GPU {gpu} does not report its highest SM clock"
    except (OSError, AttributeError) as exc:
        return None, f"no NVML ({exc})"
    value = ctypes.c_uint()
    idle_below = IDLE_BELOW * highest.value

    def read() -> float:
        """MHz, or 0 (no reading: gemini.core.speed ignores it) where it failed or the GPU
        was idle."""
        if get_clock(handle, NVML_CLOCK_SM, ctypes.byref(value)) != 0:
            return 0.0
        return float(value.value) if value.value >= idle_below else 0.0

    if get_clock(handle, NVML_CLOCK_SM, ctypes.byref(value)) != 0:
        return None, f"GPU {gpu} does not report its SM clock"
    return read, ""


class ClockSampler:
    """Reads `read()` every `period` seconds in a thread while wanted (`want`); `drain()` takes
    what was read, as (time.monotonic(), MHz) pairs."""

    def __init__(self, read: ReadMhz, period: float = SAMPLE_S) -> None:
        self.read, self.period = read, period
        self._samples: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wanted = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gem-schd-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def want(self, wanted: bool) -> None:
        if wanted:
            self._wanted.set()
        else:
            self._wanted.clear()

    def _run(self) -> None:
        while self._wanted.wait() and not self._stop.wait(self.period):
            sample = (time.monotonic(), self.read())
            with self._lock:
                self._samples.append(sample)

    def drain(self) -> list[tuple[float, float]]:
        with self._lock:
            samples, self._samples = self._samples, []
        return samples

    def stop(self) -> None:
        self._stop.set()
        self._wanted.set()  # (wakes a thread waiting to be wanted)
        if self._thread.is_alive():
            self._thread.join(1.0)


async def feed_clock(sampler: ClockSampler, core, feed,  # type: ignore[no-untyped-def]
                     now: Callable[[], float], stop: asyncio.Event) -> None:
    """Every FEED_S, the samples to `core.on_clock(samples, now)` on the clock of `now`
    (FrameServer.now: CLOCK_MONOTONIC, the sampler's too), through `feed` (FrameServer.feed);
    the sampler reads while `core.wants_clock()`."""
    while not stop.is_set():
        sampler.want(core.wants_clock())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), FEED_S)
        offset = now() - time.monotonic()  # (0 with FrameServer.now; kept for another `now`)
        samples = [(t + offset, mhz) for t, mhz in sampler.drain()]
        # (No client's message comes sooner for it: the busy poll, where on, is not started;
        # every 50 ms, it held an idle scheduler at 40 % of a core.)
        feed("clock", "the SM clock's samples", lambda s=samples: core.on_clock(s, now()),
             poll=False)
