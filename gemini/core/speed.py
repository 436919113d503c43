"""How much faster the GPU runs a capped client's grants than it runs the client continuously,
from the GPU's SM clock (issue 12: caps by work).  Pure: samples come in with their times.

Why: a GPU's clock is set by its power limit from what it ran in the last ~100 ms.  A
power-hungry program (matmuls) that runs continuously holds the clock down (1400-1550 MHz on an
H100); paced at 0.4 (40 ms on, 60 ms idle) each grant starts on a cool card at up to 1980 MHz,
and the program does 1.15x its continuous work per second of GPU time (H100, no gemini:
bench/results/…-211739-duty-cycle-synced.json).  A cap in time then gives 0.46 of the bare work.

So each capped client is calibrated: now and then one of its grants is long (`CALIBRATION_S`),
and the clock in that grant's last `TAIL_S`, when the limiter has caught up, is the clock the
client runs at continuously.  The clock in its ordinary grants over that is its speed: the
scheduler charges each second it grants as `speed` seconds (gemini.core.scheduler).  A program
the clock does not slow (memory-bound, launch-bound, or light) reads the same clock in both and
is charged its time.  The clock stands for the work, in part (below; the probe:
bench/results/…-212420-clock-probe.json).

A calibration can read high, never low: if the program leaves the GPU idle in part of it, or
the limiter has not caught up (its power average still holds the cool seconds before), the
clock stays up (H100: tails of 1840-1965 MHz beside 1540-1560 for the same programs).  So the
continuous clock is the lowest of the latest few tails, and a speed below 1 (a tail above the
grants' clock) is read as 1: a cap never gives more than its time.  And a client is
calibrated again early when its grants' clock moves (the program's load, or the card's heat,
changed since) while its speed reads 1: early in a run the tails follow the grants' clock
down (H100: 1965, 1868, 1809 MHz beside 1933, 1871, 1806 in the grants, 2 s apart) before
they part (1647 beside 1868, 8 s in); once a speed is known, every `CALIBRATE_EVERY_S` is
enough (the grants' clock wanders by 3-4 % between grants).

The work does not follow the clock in full (memory and launch time do not scale with it):
speed = clock ratio ** `WORK_PER_CLOCK`.  Measured on the H100 (60 s at a 0.4 cap, 2026-11-24),
work per granted second ÷ bare against the clock ratio to the tails: 1.11-1.15 against
1.15-1.19 for torch eager, CUDA graphs and JAX, and in the probe above 1.10-1.12 against
1.15-1.18.  At 1.0 the caps delivered 0.381-0.401 of the bare work (22:04), at 0.7
0.414-0.432 (22:34): 0.85 sits between.  The run-to-run spread of the tails (±3 %) is as
large as that choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CALIBRATION_S = 0.2  # a calibration grant: the clock settles in ~100 ms of continuous work
TAIL_S = 0.08  # its last part, read as the client's continuous clock
CALIBRATE_EVERY_S = 10.0  # the continuous clock drifts with the card's temperature
# The first calibration waits this long after the client's first reading: at its first grant
# the program is still starting and the card is cold (H100: 1980 MHz read "continuously").
FIRST_CALIBRATION_S = 2.0
MIN_TAIL_READINGS = 20  # fewer: the grant was cut short, or the GPU idled in it
RECENT_TAILS = 3  # the continuous clock is the lowest of this many latest tails
# While its speed reads 1, calibrate again (no sooner than FIRST_CALIBRATION_S after the last)
# once the grants' clock has moved this much from what it was at the last calibration.
DRIFT = 0.03
WORK_PER_CLOCK = 0.85  # work ∝ clock ** this
# Each reading's weight in the ordinary grants' running mean: it forgets over ~10 grants (at a
# reading every 2 ms).
GRANT_WEIGHT = 0.01
SPEED_RANGE = (1.0, 2.0)  # below 1 is a tail read high; a bad reading must not stop a client


@dataclass
class _Clocks:
    in_grants: float = 0.0  # MHz, running mean over ordinary grants (0: none yet)
    tails: list[float] = field(default_factory=list)  # MHz, the latest full tails' means
    first_at: float | None = None  # its first reading
    calibrated_at: float | None = None  # when its latest calibration grant began
    in_grants_then: float = 0.0  # in_grants when it began
    tail_sum: float = 0.0  # that calibration's tail readings
    tail_samples: int = 0

    @property
    def continuous(self) -> float:
        """MHz run continuously (0: not known yet)."""
        return min(self.tails, default=0.0)


def _mean(old: float, sample: float, weight: float) -> float:
    return sample if old <= 0.0 else old + weight * (sample - old)


class SpeedMeter:
    """Each capped client's clocks and speed."""

    def __init__(self, every_s: float = CALIBRATE_EVERY_S) -> None:
        self.every_s = every_s
        self._clocks: dict[str, _Clocks] = {}

    def sample(self, name: str, mhz: float, at: float, into_grant_s: float, grant_s: float,
               calibrating: bool) -> None:
        """The SM clock read at `at`, `into_grant_s` after the start of a grant of `grant_s`
        seconds that `name` held then."""
        if mhz <= 0.0:
            return
        clocks = self._clocks.setdefault(name, _Clocks())
        if clocks.first_at is None:
            clocks.first_at = at
        if not calibrating:
            clocks.in_grants = _mean(clocks.in_grants, mhz, GRANT_WEIGHT)
        elif grant_s >= CALIBRATION_S * 0.75 and into_grant_s >= grant_s - TAIL_S:
            clocks.tail_sum += mhz
            clocks.tail_samples += 1
            if clocks.tail_samples < MIN_TAIL_READINGS:
                return
            mean = clocks.tail_sum / clocks.tail_samples
            if clocks.tail_samples == MIN_TAIL_READINGS:  # this calibration's tail counts now
                clocks.tails = [*clocks.tails, mean][-RECENT_TAILS:]
            else:
                clocks.tails[-1] = mean

    def due(self, name: str, now: float) -> bool:
        """Is it time for a calibration grant?"""
        clocks = self._clocks.get(name)
        if clocks is None or clocks.first_at is None:
            return False  # no reading yet
        if clocks.calibrated_at is None:
            return now - clocks.first_at >= FIRST_CALIBRATION_S
        since = now - clocks.calibrated_at
        then = clocks.in_grants_then
        drifted = then > 0.0 and abs(clocks.in_grants - then) > DRIFT * then
        unsure = drifted and self.speed(name) <= 1.0 and since >= FIRST_CALIBRATION_S
        return since >= self.every_s or unsure

    def calibrating(self, name: str, now: float) -> None:
        """A calibration grant begins: its tail will be the continuous clock."""
        clocks = self._clocks.setdefault(name, _Clocks())
        clocks.calibrated_at, clocks.tail_sum, clocks.tail_samples = now, 0.0, 0
        clocks.in_grants_then = clocks.in_grants

    def speed(self, name: str) -> float:
        """Work per second of its grants ÷ work per second run continuously (1 until known)."""
        clocks = self._clocks.get(name)
        if clocks is None or clocks.in_grants <= 0.0 or clocks.continuous <= 0.0:
            return 1.0
        low, high = SPEED_RANGE
        ratio = clocks.in_grants / clocks.continuous
        return min(max(ratio, low) ** WORK_PER_CLOCK, high)

    def describe(self, name: str) -> str:
        """Its clocks, for the log."""
        clocks = self._clocks.get(name, _Clocks())
        tails = ", ".join(f"{mhz:.0f}" for mhz in clocks.tails) or "none"
        return (f"{clocks.in_grants:.0f} MHz in its grants, {clocks.continuous:.0f} MHz run "
                f"continuously (the lowest of the latest tails: {tails})")

    def forget(self, name: str) -> None:
        self._clocks.pop(name, None)
