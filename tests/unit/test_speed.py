"""Caps by work: the clock-weighted charge of capped clients (gemini.core.speed, issue 12)."""

import asyncio
import dataclasses
import math
import statistics

import pytest

from gemini.core import config as cfg
from gemini.core.actions import Log
from gemini.core.partitions import PartitionRouter
from gemini.core.scheduler import CAPS_SETTLE_S, WINDOW_EDGE, SchedulerCore, Timing
from gemini.core.speed import (
    ALIKE_COST_SPREAD,
    ALIKE_TAILS_AGE_S,
    CALIBRATION_S,
    CALIBRATION_SETTLE_S,
    DRIFT,
    FIRST_CALIBRATION_S,
    FIRST_TAIL_MAX,
    GPU_BOUND,
    HOST_PACED,
    IDLE_FOR_UNKNOWN,
    LONG_GRANTS_UNKNOWN_SPEED,
    MIN_CALIBRATION_S,
    MIN_RUN_LAUNCHES,
    MIN_RUN_MS,
    MIN_TAIL_READINGS,
    RECENT_GRANTS,
    RECENT_TAILS,
    RUN_SPREAD_LEAVE,
    RUN_SPREAD_MAX,
    SETTLE_S,
    SETTLING_EVERY_S,
    SPEED_RANGE,
    TAIL_S,
    TAILS_AVERAGED,
    UNCALIBRATED_SPEED,
    UNKNOWN_SPEED,
    UNKNOWN_SPEED_S,
    WORK_PER_CLOCK,
    Calibration,
    SpeedMeter,
    busier_scale,
    capped_calibration,
    fitted_calibration,
)
from gemini.core.wire import QUOTA_FLAG_CALIBRATION, Request, RequestType
from gemini.daemon.clock import feed_clock
from tests.unit.sim import GpuClock, Sim
from tests.unit.test_scheduler import HUNDRED_MS_TURNS, LAUNCHER, config, grants, quota_req


def one_second_windows(sim: Sim, name: str, steps: range, per_s: int = 20,
                       at: float = 0.0) -> list[float]:
    """`name`'s work in each 1 s window from `at` + k / `per_s` on, for k in `steps`."""
    assert sim.clock is not None
    return [sim.clock.work(name, at + k / per_s, at + k / per_s + 1.0) for k in steps]


def speed(in_grants_mhz: float, continuous_mhz: float) -> float:
    return (in_grants_mhz / continuous_mhz) ** WORK_PER_CLOCK


def in_grant(meter: SpeedMeter, mhz: float, at: float = 0.0) -> None:
    """A reading 10 ms into an ordinary 40 ms grant."""
    meter.sample("a", mhz, at, 0.01, 0.04, calibrating=False)


def tail(meter: SpeedMeter, mhz: float, readings: int = MIN_TAIL_READINGS,
         grant_s: float = CALIBRATION_S) -> None:
    for _ in range(readings):
        meter.sample("a", mhz, 5.0, grant_s - TAIL_S / 2, grant_s, calibrating=True)


def test_speed_is_one_until_both_clocks_are_known():
    meter = SpeedMeter()
    assert meter.speed("a") == 1.0
    in_grant(meter, 1900.0)
    assert meter.speed("a") == 1.0  # no continuous clock yet
    tail(meter, 1500.0)
    assert meter.speed("a") == pytest.approx(speed(1900.0, 1500.0))


def test_only_a_full_tail_of_a_long_enough_calibration_grant_is_the_continuous_clock():
    meter = SpeedMeter()
    in_grant(meter, 1800.0)
    meter.sample("a", 1980.0, 0.0, 0.01, CALIBRATION_S, calibrating=True)  # its start: cool
    tail(meter, 1000.0, grant_s=0.1)  # cut short: never settled
    tail(meter, 1000.0, readings=MIN_TAIL_READINGS - 1)  # too few readings: the GPU idled
    assert meter.speed("a") == 1.0
    meter.calibrating("a", 5.0)  # the next calibration starts its own tail
    tail(meter, 1500.0)
    assert meter.speed("a") == pytest.approx(speed(1800.0, 1500.0))


def test_a_bad_reading_cannot_stop_a_client_or_lift_its_cap():
    meter = SpeedMeter()
    in_grant(meter, 5000.0)
    tail(meter, 100.0)
    assert meter.speed("a") == SPEED_RANGE[1]
    in_grant(meter, 0.0)  # no reading: ignored
    assert meter.speed("a") == SPEED_RANGE[1]


def test_a_tail_read_high_does_not_replace_a_lower_one():
    # H100, torch eager: a second calibration read 1965 MHz where the first read ~1560, and the
    # client was charged 0.92 of its time for the next 10 s (0.50 of its bare work a second).
    meter = SpeedMeter()
    in_grant(meter, 1800.0)
    meter.calibrating("a", 2.0)
    tail(meter, 1500.0)
    meter.calibrating("a", 12.0)
    tail(meter, 1965.0)  # the GPU idled in part of it, or the limiter lagged
    assert meter.speed("a") == pytest.approx(speed(1800.0, 1500.0))
    for at in range(RECENT_TAILS - 1):  # ...until it is older than the latest few
        meter.calibrating("a", 22.0 + 10 * at)
        tail(meter, 1700.0)
    assert meter.speed("a") == pytest.approx(speed(1800.0, 1700.0))


def test_a_speed_below_one_is_a_tail_read_high_and_counts_as_one():
    meter = SpeedMeter()
    in_grant(meter, 1800.0)
    tail(meter, 1950.0)
    assert meter.speed("a") == 1.0


def test_the_clocks_speed_up_is_charged_as_far_as_the_gpu_sets_the_pace():
    # H100, torch.compile (no CUDA graphs): speed 1.03-1.10 by the clock, 0.96-0.98 of its bare
    # work per granted second; its launching thread, not the GPU, sets its pace.
    meter = SpeedMeter()
    in_grant(meter, 1800.0)
    tail(meter, 1500.0)
    full = speed(1800.0, 1500.0)
    assert meter.speed("a") == pytest.approx(full)  # its hook did not say: in full
    meter.waited("a", 0.0)
    assert meter.speed("a") == 1.0
    for _ in range(50):
        meter.waited("a", GPU_BOUND / 2)
    assert meter.speed("a") == pytest.approx(1.0 + (full - 1.0) / 2, rel=1e-3)
    for _ in range(50):
        meter.waited("a", 0.45)  # (H100, capped at 0.4: the GPU-bound paths waited 0.32-0.91)
    assert meter.speed("a") == pytest.approx(full)
    assert meter.gpu_wait("a") == pytest.approx(0.45, rel=1e-3)
    for garbage in (math.nan, -5.0, math.inf):  # (a hook's word is anything it sends)
        meter.waited("a", garbage)
        assert 1.0 <= meter.speed("a") <= full


def test_a_client_whose_grants_clock_moves_is_calibrated_again_early():
    # H100, JAX: calibrated at 1966 MHz in its grants and in the tail (speed 1), its grants'
    # clock then fell to 1891 while the next calibration was 10 s away.
    meter = SpeedMeter(every_s=10.0)
    in_grant(meter, 1966.0)
    at = SETTLE_S + 2.0  # (settled: the period is every_s)
    meter.calibrating("a", at)
    tail(meter, 1966.0)
    for _ in range(20):  # moved, but within DRIFT
        in_grant(meter, 1966.0 * (1 - DRIFT / 2), at + 1.0)
    assert not meter.due("a", at + SETTLING_EVERY_S)
    for _ in range(200):
        in_grant(meter, 1891.0, at + 1.0)
    assert not meter.due("a", at + SETTLING_EVERY_S - 0.1)  # not at once after the last
    assert meter.due("a", at + SETTLING_EVERY_S)


def test_a_client_whose_speed_is_read_by_work_is_not_calibrated_early_when_its_clock_moves():
    # H100, 2026-12-06, CUDA graph capped at 0.4: by work its speed read 1.151-1.157, but its
    # grants' clock (1751 MHz) fell under its tails' (1825), and it was calibrated again 5.4 s
    # and 4.4 s after the one before: each calibration waits for room in its 1 s window, and the
    # second before the last did 0.276 of its bare work (JAX the same, 3.7 s after one).
    meter = SpeedMeter(every_s=10.0)
    in_grant(meter, 1900.0)
    for calibration in range(3):  # (the first tail is not kept)
        meter.calibrating("a", calibration * SETTLING_EVERY_S)
        tail(meter, 1825.0)
        meter.ran("a", 80.0, 400, calibrating=True)  # 0.2 ms a launch run continuously
    for _ in range(RECENT_GRANTS):
        meter.ran("a", 40.0, 230, calibrating=False)  # 0.174 in its grants: speed 1.15
    at = SETTLE_S + 2.0
    meter.calibrating("a", at)
    tail(meter, 1825.0)
    meter.ran("a", 80.0, 400, calibrating=True)
    for _ in range(200):
        in_grant(meter, 1751.0, at + 1.0)  # its grants' clock under the tails': 1 by the clock
    assert meter.speed("a") == pytest.approx(0.2 / (40.0 / 230), rel=1e-3)
    assert not meter.due("a", at + SETTLING_EVERY_S)
    assert meter.due("a", at + 10.0)
    # ...but where its work changed (heavier kernels: its grants' cost per launch up a fifth),
    # its tails are another program's, and it is calibrated again early (a review).
    for _ in range(RECENT_GRANTS):
        meter.ran("a", 40.0, 192, calibrating=False)
    assert not meter.due("a", at + SETTLING_EVERY_S - 0.1)
    assert meter.due("a", at + SETTLING_EVERY_S)


def test_the_first_calibration_waits_for_the_program_to_run_and_then_comes_every_period():
    meter = SpeedMeter(every_s=10.0)
    assert not meter.due("a", 0.0)  # no reading yet
    in_grant(meter, 1900.0, 1.0)
    assert not meter.due("a", 1.0 + FIRST_CALIBRATION_S - 0.1)
    assert meter.due("a", 1.0 + FIRST_CALIBRATION_S)
    # While it settles (its program warming up, the card heating), every SETTLING_EVERY_S...
    meter.calibrating("a", 4.0)
    assert not meter.due("a", 4.0 + SETTLING_EVERY_S - 0.1)
    assert meter.due("a", 4.0 + SETTLING_EVERY_S)
    # ...then every period.
    at = 1.0 + SETTLE_S
    meter.calibrating("a", at)
    assert not meter.due("a", at + 9.9)
    assert meter.due("a", at + 10.0)


def test_a_client_its_host_paces_is_not_calibrated_until_it_waits_on_the_gpu():
    # H100, capped at 0.4: the launch-bound loop waits on the GPU in none of its grants, and its
    # calibrations only made lumps (its highest 1 s window held one: 0.455 of its bare work).
    meter = SpeedMeter(every_s=10.0)
    in_grant(meter, 1900.0, 1.0)
    meter.waited("a", 0.0)
    assert not meter.due("a", 1.0 + FIRST_CALIBRATION_S)
    assert not meter.due("a", 60.0)
    while meter.gpu_wait("a") < HOST_PACED:  # its program now waits on the GPU
        assert not meter.due("a", 60.0)
        meter.waited("a", 0.5)
    assert meter.due("a", 60.0)


def test_a_capped_client_that_never_waits_on_the_gpu_gets_no_calibration_grant():
    core = SchedulerCore(config(("a", 0.1, 0.4, 1 << 30)), LAUNCHER, 0.0)
    now, lengths, flags = 0.0, [], 0
    for req_id in range(1, 100):  # 10 s of grants, a reading in each, none of it waited
        replies = grants(core.on_request(1, Request("a", req_id, RequestType.QUOTA,
                                                    (0.0, 5000.0, 0.0)), now))
        while not replies:
            now = core.next_deadline()
            replies = grants(core.on_deadline(now))
        length = replies[0].response.values[0] / 1000
        flags |= replies[0].response.values[1]
        lengths.append(length)
        core.on_clock([(now + 0.01, 1900.0)], now + length)
        now += length
    assert now > 5 * FIRST_CALIBRATION_S
    assert not flags & QUOTA_FLAG_CALIBRATION
    assert max(lengths) == pytest.approx(0.04)  # its part of each 100 ms turn, never more


def test_a_calibration_fitted_to_a_grant_is_as_long_but_never_shorter_than_the_clock_needs():
    cal = capped_calibration(0.43, 0.4, alone=True)  # 125 ms
    assert fitted_calibration(cal, 0.121).length_s == pytest.approx(0.121)
    assert fitted_calibration(cal, 0.121).settle_s < cal.settle_s
    assert fitted_calibration(cal, 0.2) == cal  # (never longer)
    assert fitted_calibration(cal, 0.06).length_s == pytest.approx(MIN_CALIBRATION_S)


def test_without_clock_samples_no_grant_is_a_calibration():
    core = SchedulerCore(config(("a", 0.1, 0.4, 1 << 30)), LAUNCHER, 0.0)
    [g] = grants(core.on_request(1, quota_req("a", 1, burst=5000.0), 0.0))
    assert g.response.values[0] == pytest.approx(40.0)  # its part of a 100 ms turn


# A client capped at 0.4 alone: its calibration, as long as its 1 s windows can pay back.
LONE_AT_04 = capped_calibration(0.43, 0.4, alone=True)


@pytest.mark.parametrize("by_work", [False, True])
def test_with_the_clock_read_a_capped_client_alone_is_calibrated_once_it_runs(by_work):
    """...by work, where its hook measures its work: it is in lone turns, and its calibration
    is one of its grants there, at most its part of a turn of a third of a second (no longer
    bounded by what its 1 s windows can pay back, 125 ms at 0.4); else as long as its room
    allows (200 ms): its tail is then read by the clock, which NVML says late."""
    core = SchedulerCore(config(("a", 0.1, 0.4, 1 << 30)), LAUNCHER, 0.0)
    longest = 0.4 / 3 if by_work else CALIBRATION_S
    now, lengths = 0.0, []
    for req_id in range(1, 100):  # asks again at each grant's end, a reading in each grant
        length, now, calibration = ask_flagged(core, req_id, now)
        lengths.append(length)
        core.on_clock([(now + 0.01, 1900.0)], now + length)
        if by_work:
            core.speed.ran("a", length * 1000 * 0.177, round(length * 1000), calibrating=False)
        if calibration:
            break
        now += length
    assert lengths[0] == pytest.approx(0.04)  # not at once: the program is starting
    assert 0.9 * longest <= lengths[-1] <= longest
    assert now >= FIRST_CALIBRATION_S


@pytest.mark.parametrize(("latest_tail", "reads_by_work"), [(0.195, True), (0.195 * 1.2, False)],
                         ids=["agree", "disagree"])
def test_a_lone_client_whose_tails_disagree_gets_a_whole_calibration_for_the_clock(
        latest_tail, reads_by_work):
    """Tails that disagree (RUN_SPREAD_MAX) leave its speed to the clock, whose tail needs the
    whole calibration; while they agree, one as short as its seconds can pay back."""
    core = SchedulerCore(config(("a", 0.1, 0.4, 1 << 30)), LAUNCHER, 0.0)
    core.on_clock([], 0.0)
    core.speed.sample("a", 1800.0, -30.0, 0.01, 0.04, calibrating=False)
    for _ in range(3):
        core.speed.ran("a", 40 * 0.177, 40, calibrating=False)
    for at, cost in ((-20.0, 0.195), (-15.0, 0.195), (-10.0, latest_tail)):  # (the first: not kept)
        core.speed.calibrating("a", at)
        core.speed.ran("a", 200 * cost, 200, calibrating=True)
    assert core.speed.reads_by_work("a") is reads_by_work
    calibration_s, _ = ask(core, 1, 0.0)
    longest = LONE_AT_04.length_s if reads_by_work else CALIBRATION_S
    assert 0.9 * longest <= calibration_s <= longest


def test_a_client_whose_grants_its_hook_no_longer_measures_is_read_by_the_clock_again():
    """A program that went from a few streams to many: its hook says nothing of its grants
    any more (more lanes than it reads a union of).  Its first grants' costs are forgotten once
    RECENT_GRANTS in a row said nothing, and alone it gets the whole calibration the clock
    needs; a grant said in between starts the count again."""
    core = SchedulerCore(config(("a", 0.1, 0.4, 1 << 30)), LAUNCHER, 0.0)
    core.on_clock([], 0.0)
    core.speed.sample("a", 1800.0, -30.0, 0.01, 0.04, calibrating=False)
    for _ in range(3):
        core.speed.ran("a", 40 * 0.177, 40, calibrating=False)
    for _ in range(RECENT_GRANTS - 1):
        core.speed.ran("a", 0.0, 0, calibrating=False)
    core.speed.ran("a", 0.0, 0, calibrating=True)  # (a tail said nothing: not a grant)
    assert core.speed.reads_by_work("a")
    core.speed.ran("a", 40 * 0.177, 40, calibrating=False)
    for _ in range(RECENT_GRANTS - 1):
        core.speed.ran("a", 0.0, 0, calibrating=False)
    assert core.speed.measured("a") and core.speed.reads_by_work("a")
    core.speed.ran("a", 0.0, 0, calibrating=False)
    assert not core.speed.measured("a") and not core.speed.reads_by_work("a")
    calibration_s, _ = ask(core, 1, 0.0)
    assert 0.9 * CALIBRATION_S <= calibration_s <= CALIBRATION_S
    core.speed.ran("a", 40 * 0.177, 40, calibrating=False)  # measured again
    assert core.speed.reads_by_work("a")


def meter_read_by_work() -> SpeedMeter:
    """A meter that reads a by work: its grants cost 177 us a launch, its tails 195 (the clock
    says 1: NVML lags)."""
    meter = SpeedMeter()
    in_grant(meter, 1500.0)
    tail(meter, 1500.0)
    for _ in range(3):
        meter.ran("a", 40 * 0.177, 40, calibrating=False)
    for at in (-20.0, -15.0):  # (the first tail: not kept)
        meter.calibrating("a", at)
        meter.ran("a", 200 * 0.195, 200, calibrating=True)
    return meter


@pytest.mark.parametrize("next_grant_said", [True, False])
def test_an_edit_leaves_a_client_read_by_work_so_until_its_next_grant_says(next_grant_said):
    """A cap edited beside it leaves what its grants cost under the caps before (duty_changed)
    and its tails, and it stays read by work until its next grant says: read by the clock
    meanwhile, two capped clients in shared turns went back to 100 ms turns for a grant, and a
    0.3 beside one lowered from 0.6 to 0.3 held 0.142 of its work over a second (the
    simulator).  Its speed is read from those costs until then (until 2026-12-07 22:50 by the
    clock, and a raised cap's grants ran long where the H100's clock read no speed-up).  A
    next grant that says nothing leaves it to the clock."""
    meter = meter_read_by_work()
    assert meter.reads_by_work("a")
    meter.duty_changed("a")
    assert meter.reads_by_work("a") and not meter.measured("a")
    assert meter.speed("a") == pytest.approx(0.195 / 0.177)  # (its costs before the edit)
    assert "177.0 us per launch in its grants (before the edit)" in meter.describe("a")
    meter.ran("a", 0.0, 0, calibrating=True)  # (a tail: not a grant)
    assert meter.reads_by_work("a")
    meter.ran("a", 40 * 0.18 if next_grant_said else 0.0, 40 if next_grant_said else 0,
              calibrating=False)
    assert meter.reads_by_work("a") is next_grant_said
    assert meter.measured("a") is next_grant_said
    assert "(before the edit)" not in meter.describe("a")
    # (its grants' cost now, alone: those before the edit are dropped)
    assert meter.speed("a") == pytest.approx(0.195 / 0.18 if next_grant_said else 1.0)
    meter.ran("a", 40 * 0.18, 40, calibrating=False)
    meter.duty_changed("b")  # (one it never measured: nothing to keep)
    assert meter.reads_by_work("a") and not meter.reads_by_work("b")


def test_a_speed_up_kept_through_an_edit_is_scaled_until_its_next_grant_is_measured():
    """(speed.EDIT_BUSIER_FROM.)  A card 0.5 busy made 0.75: the square root of a half.  A
    second edit before the next grant is measured scales from the busy share the costs were
    measured at, not from the first edit's; the next grant's cost replaces them, and its speed
    is read from it as it stands.  An uncapped client's speed is not scaled (below 1 too, it
    would be moved up), nor from a card past EDIT_BUSIER_FROM, nor where it idles more."""
    meter = meter_read_by_work()
    up = 0.195 / 0.177 - 1.0
    meter.duty_changed("a", (0.5, 0.75))
    assert meter.speed("a") == pytest.approx(1.0 + up * math.sqrt(0.5))
    assert meter.speed("a", shared=True) == pytest.approx(1.0 + up)
    meter.duty_changed("a", (0.75, 0.875))  # (before the next grant: from 0.5 still)
    assert meter.speed("a") == pytest.approx(1.0 + up * math.sqrt(0.25))
    meter.ran("a", 40 * 0.18, 40, calibrating=False)
    assert meter.speed("a") == pytest.approx(0.195 / 0.18)
    assert busier_scale(0.96, 0.99) == busier_scale(0.6, 0.5) == 1.0
    assert busier_scale(0.5, 1.2) == 0.0


def test_a_calibration_grant_is_charged_its_speed_until_the_gpu_settles_and_then_its_time():
    core = SchedulerCore(config(("a", 0.1, 0.4, 1 << 30)), LAUNCHER, 0.0)
    core.on_clock([], 0.0)
    core.speed.sample("a", 1800.0, -30.0, 0.01, 0.04, calibrating=False)
    core.speed.calibrating("a", -20.0)  # the last calibration: long ago, so one is due
    for _ in range(MIN_TAIL_READINGS):
        core.speed.sample("a", 1500.0, -19.9, 0.19, 0.2, calibrating=True)
    calibration_s, now = ask(core, 1, 0.0)
    assert calibration_s >= 0.9 * CALIBRATION_S
    length, now = ask(core, 2, calibration_s)
    fast = speed(1800.0, 1500.0) - 1.0
    calibration_charge = fast * (calibration_s - CALIBRATION_SETTLE_S)  # then it ran continuously
    assert core.snapshot(now)["clients"][0]["speed_charge_s"] == pytest.approx(calibration_charge)
    core.on_clock([], now + length)
    ask(core, 3, now + length)
    charged = core.snapshot(now + length)["clients"][0]["speed_charge_s"]
    assert charged == pytest.approx(calibration_charge + fast * length)


def test_the_log_says_what_a_calibration_read_once_its_readings_are_in():
    # The client asks again at its calibration's end, before the shell feeds the last readings
    # (every 50 ms): a line written then showed the previous calibration's tail.
    core = SchedulerCore(config(("a", 0.1, 0.4, 1 << 30)), LAUNCHER, 0.0)
    core.on_clock([], 0.0)
    core.speed.sample("a", 1800.0, -30.0, 0.01, 0.04, calibrating=False)
    core.speed.calibrating("a", -20.0)
    for _ in range(MIN_TAIL_READINGS):
        core.speed.sample("a", 1700.0, -19.9, 0.19, 0.2, calibrating=True)
    length, _ = ask(core, 1, 0.0)
    readings = [(length - TAIL_S + i * 0.002, 1500.0) for i in range(30)]
    assert not calibrated_lines(core.on_clock(readings, length - 0.01))
    asked = core.on_request(1, quota_req("a", 2, burst=5000.0), length)
    assert not calibrated_lines(asked)
    [line] = calibrated_lines(core.on_clock([(length + 0.002, 1800.0)], length + 0.05))
    assert "1500 MHz run continuously" in line
    assert f"speed {speed(1800.0, 1500.0):.3f}" in line
    assert not calibrated_lines(core.on_clock([(length + 0.004, 1800.0)], length + 0.1))


def test_a_grants_clock_is_read_past_a_neighbours_charge_made_in_it():
    """a's overuse, reported 1 ms into b's grant, is charged at b's start and stands after b's
    grant in the history: the readings of b's grant were matched to the charge, and dropped."""
    core = SchedulerCore(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.3, 0.3, 1 << 30)), LAUNCHER,
                         0.0)
    core.on_request(1, quota_req("a", 1, burst=50.0), 0.0)
    core.on_request(2, quota_req("b", 1, burst=50.0), 0.001)
    [g] = grants(core.on_deadline(0.030))  # a's 30 ms are up: b's turn
    assert g.conn == 2
    core.on_request(1, quota_req("a", 2, overuse=2.0, burst=50.0), 0.031)
    core.on_clock([(0.032 + 0.002 * k, 1800.0) for k in range(10)], 0.055)
    assert "1800 MHz in its grants" in core.speed.describe("b")


def test_the_log_says_the_speed_charged_where_the_card_idles_less():
    """Capped at 0.85 alone the card idles 15 % of the time, and a client not yet calibrated
    by work is charged three quarters of the likely speed-up (1.075); the line said 1.100
    (H200, 2026-12-02: b raised to 0.6 beside a at 0.3 read "speed 1.100", charged 1.035)."""
    core = SchedulerCore(config(("a", 0.1, 0.85, 1 << 30)), LAUNCHER, 0.0)
    core.on_clock([], 0.0)
    core.speed.sample("a", 1800.0, -3.0, 0.01, 0.04, calibrating=False)
    length, _ = ask(core, 1, 0.0)
    readings = [(length - TAIL_S + i * 0.002, 1780.0) for i in range(30)]
    [line] = calibrated_lines(core.on_clock([*readings, (length + 0.002, 1800.0)], length + 0.05))
    assert "speed 1.075" in line, line


def calibrated_lines(actions: list) -> list[str]:
    return [a.message for a in actions if isinstance(a, Log) and "calibrated" in a.message]


def ask(core: SchedulerCore, req_id: int, now: float) -> tuple[float, float]:
    """Client a asks for a token at `now`: its length and when it came, in seconds.  (A grant
    says it is a calibration: the hook runs it through and measures its tail.)"""
    length, now, _ = ask_flagged(core, req_id, now)
    return length, now


def ask_flagged(core: SchedulerCore, req_id: int, now: float) -> tuple[float, float, bool]:
    """ask(), and whether the grant is a calibration."""
    replies = grants(core.on_request(1, quota_req("a", req_id, burst=5000.0), now))
    while not replies:
        now = core.next_deadline()
        replies = grants(core.on_deadline(now))
    length_ms, flags, *_ = replies[0].response.values
    if flags & QUOTA_FLAG_CALIBRATION:  # (in lone turns its ordinary grants may be as long)
        assert length_ms >= 0.9 * MIN_CALIBRATION_S * 1000
    return length_ms / 1000, now, bool(flags & QUOTA_FLAG_CALIBRATION)


def test_a_client_with_neighbours_waiting_is_not_calibrated():
    core = SchedulerCore(config(("a", 0.1, 0.4, 1 << 30), ("b", 0.5, 1.0, 1 << 30)), LAUNCHER, 0.0)
    core.on_clock([], 0.0)
    assert grants(core.on_request(2, quota_req("b", 1, burst=5000.0), 0.0))
    core.on_request(1, quota_req("a", 1, burst=5000.0), 0.001)
    [g] = grants(core.on_request(2, quota_req("b", 2, burst=5000.0), 0.002))  # b hands over
    assert g.response.values[0] < CALIBRATION_S * 1000


def run_capped(clock: GpuClock | None, seconds: float, limit: float = 0.4,
               gpu_wait: float | None = None, launch_s: float = 0.0,
               hook_bursts: bool = False, timing: Timing = LAUNCHER) -> Sim:
    sim = Sim([("capped", 0.1, limit)], timing=timing, burst_ms=5000.0, clock=clock,
              gpu_wait=gpu_wait, launch_s=launch_s, hook_bursts=hook_bursts)
    sim.start("capped")
    sim.run_until(seconds)
    return sim


def test_a_capped_client_alone_does_its_cap_of_work_on_a_power_limited_gpu():
    # Paced at 0.4, each 40 ms grant starts on a GPU cooled by 60 ms of idle, and the client's
    # work was 1.15x its time (H100, matmuls: 0.46 of bare at a 0.4 cap; in 100 ms turns, as
    # before lone turns).
    seconds = 20.0
    blind = run_capped(None, seconds, timing=dataclasses.replace(LAUNCHER, lone_turns=False))
    blind_clock = GpuClock()
    blind_clock.advance(seconds, blind.running)
    assert blind_clock.work("capped", 2.0, seconds) / (seconds - 2.0) > 0.44  # the old miss

    sim = run_capped(GpuClock(), seconds)
    assert sim.clock is not None
    for start in (2.0, 10.0):  # after the first calibration, and later
        work = sim.clock.work("capped", start, start + 8.0) / 8.0
        assert work == pytest.approx(0.4, abs=0.015), (start, work)
    # ...and every second: no lump for the calibration grants
    for t in range(2, 18):
        assert sim.clock.work("capped", t, t + 1.0) <= 0.4 + 0.05, t


@pytest.mark.parametrize("limit", [0.1, 0.2, 0.3])
def test_a_capped_client_alone_does_its_cap_of_work_every_second_at_any_limit(limit):
    # A 200 ms calibration fits a 0.4 cap's 1 s window (0.43 s), not a 0.1 cap's (0.115 s):
    # that client waited for the room for ever from its first calibration on (nothing from
    # 1 s in), and at 0.2 its seconds read 0.06-0.23, its 10 s windows 0.17-0.20.
    sim = run_capped(GpuClock(), 30.0, limit=limit, launch_s=0.0002)
    assert sim.clock is not None
    for t in range(0, 20):
        work = sim.clock.work("capped", t, t + 10.0) / 10.0
        assert work == pytest.approx(limit, abs=0.02), (t, work)
    for t in range(0, 29 * 4):  # (every 1 s window, sliding by 250 ms)
        work = sim.clock.work("capped", t / 4, t / 4 + 1.0)
        assert limit / 2 <= work <= limit + 0.05, (t / 4, work)


@pytest.mark.parametrize("hook_bursts", [False, True], ids=["long-bursts", "hook-bursts"])
@pytest.mark.parametrize("limit", [0.2, 0.3, 0.4, 0.5, 0.7])
def test_a_capped_client_alone_holds_its_cap_by_work_over_every_1_s_window(limit, hook_bursts):
    # (gem-schd's lone turns, on by default)  Calibrated by work, alone: paced in turns of a
    # whole part of the second, each grant as long as a calibration (the scheduler's
    # LONE_PACED_WORK_S), a 1 s window holds the same
    # whole turns wherever it starts, and a calibration is one of them, no lump.  In 100 ms
    # turns a 125 ms calibration at 0.4 put 75 ms more in the windows that held it: they read
    # 3.4-9.2 points under here (4.5-8.2 on the H100, 2026-12-06), now 0.7-2.3.  Its hook says
    # no burst longer than its longest grant: it gets there at its second grant, its bursts
    # as long as its first (checked against its quota, which follows its grants, it never did
    # on the H100).  Over, a window may hold the window's edge by the books (_window_edge_s:
    # 4 points at 0.7, 1.5 at 0.2), and a little more by work where the simulator's tails read
    # its speed low once it has settled (1.047 for 1.065 at 0.7): which windows catch that
    # moves with the phase of its turns (its highest at 0.7 reads 0.717-0.743 for floors of
    # 1.03-1.1 on its speed while it settles; on the H100, 2026-12-07, 0.701-0.718).
    sim = run_capped(GpuClock(), 30.0, limit=limit, launch_s=0.0002, hook_bursts=hook_bursts)
    assert sim.clock is not None
    assert sim.clients["capped"].calibrations  # (its speed read as before)
    edge = sim.core._window_edge_s(limit)
    for t in range(40, 29 * 20):  # every 1 s window from 2 s on, sliding by 50 ms
        work = sim.clock.work("capped", t / 20, t / 20 + 1.0)
        assert limit - 0.035 <= work <= limit + max(0.035, edge + 0.005), (t / 20, work)


def test_a_cap_alone_gets_into_its_turns_after_a_set_up_that_was_calibrated_whole():
    # JAX's set-up synced every few ms and launched nothing its hook measured, so its first
    # calibration was read by the clock, 200 ms.  Its hook then said bursts of 114-125 ms, as
    # long as the grants it ran on, and the scheduler, checking them against its longest grant
    # (that calibration), kept it in 40 ms grants: its seconds 0.335-0.432 of its work at 0.4
    # (H100, 2026-12-07; here 0.356-0.442).
    launch_s = {"capped": 0.0}
    sim = Sim([("capped", 0.1, 0.4)], timing=LAUNCHER, burst_ms=30.0, clock=GpuClock(),
              launch_s=launch_s, hook_bursts=True)
    sim.start("capped")
    sim.run_until(2.5)
    calibration = max(e - s for s, e in sim.clients["capped"].busy)
    assert calibration > 0.15  # (whole, by the clock)
    sim.burst_ms, launch_s["capped"] = 115.0, 0.0002  # (it runs on from here)
    sim.run_until(30.0)
    assert sim.clock is not None
    for t in range(100, 29 * 20):  # every 1 s window from 5 s on, sliding by 50 ms
        work = sim.clock.work("capped", t / 20, t / 20 + 1.0)
        assert work == pytest.approx(0.4, abs=0.035), (t / 20, work)


@pytest.mark.parametrize(("limit", "timing"), [
    (0.4, Timing()),  # gem-schd's own defaults (-q 250 -m 100): grants of 100 ms at any cap
    (0.7, LAUNCHER),  # a high cap: a paced grant of 70 ms
])
def test_a_capped_clients_seconds_hold_at_most_four_points_more_by_the_books(limit, timing):
    # A window allowed three quarters of a paced grant over the cap: 75 ms where the minimum
    # quota stretches grants to 100 ms (a 0.4 cap's seconds then read up to 0.45-0.475 of its work
    # here), 52 ms at 0.7 (the H100's highest second at 0.7: 0.750-0.752).  Now at most 40 ms,
    # and by work a point more: a calibration alone as short as its seconds can pay back (125
    # ms at 0.4) reads its tail a little fast (0.438 here with 200 ms ones, 0.452 now; its
    # lowest second 0.284 -> 0.324).
    sim = Sim([("capped", 0.1, limit)], timing=timing, burst_ms=5000.0, clock=GpuClock(),
              launch_s=0.0002)
    sim.start("capped")
    sim.run_until(30.0)
    assert sim.clock is not None
    for t in range(4, 29 * 4):  # (every 1 s window after the first, sliding by 250 ms)
        ran = sim.share("capped", t / 4, t / 4 + 1.0)  # (charged at least that)
        assert ran <= limit + 0.04 + 1e-9, (t / 4, ran)
        assert sim.clock.work("capped", t / 4, t / 4 + 1.0) <= limit + 0.055, t / 4
    for t in range(0, 20):
        assert sim.clock.work("capped", t, t + 10.0) / 10.0 == pytest.approx(limit, abs=0.02)


@pytest.mark.parametrize("limit", [0.02, 0.05])
def test_a_cap_smaller_than_gem_schds_minimum_quota_is_still_served(limit):
    # With gem-schd's own -m 100 a capped client waits for room for 100 ms in its 1 s window;
    # capped at 40 ms over its cap, a 0.05 cap's window allowed 90 ms and it never got a grant.
    sim = Sim([("capped", limit / 2, limit)], timing=Timing(), burst_ms=5000.0,
              clock=GpuClock(), launch_s=0.0002)
    sim.start("capped")
    sim.run_until(30.0)
    assert sim.clock is not None
    for t in range(0, 20):
        work = sim.clock.work("capped", t, t + 10.0) / 10.0
        assert work == pytest.approx(limit, abs=0.015), (t, work)


@pytest.mark.parametrize("caps", [(0.3, 0.3), (0.4, 0.5), (0.3, 0.6)])
def test_with_shared_turns_capped_neighbours_hold_every_1_s_window_by_work(caps):
    # (gem-schd --shared-turns, on by default)  Two capped at 0.3 in 100 ms turns: each
    # calibration's lump sits in both neighbours' windows, 0.240-0.255 of their work at worst
    # here (5.0-8.8 points under on the H100, 2026-12-06).  In shared turns of half a second:
    # 0.299 each, 0.4 beside 0.5 0.401 and 0.497, 0.3 beside 0.6 0.298 and 0.598 (seed 3;
    # the 0.6 held 0.536 while its room was read only to 0.9 of its 300 ms grant).
    sim = run_caps(caps, 3, 30.0)
    for n, cap in zip("ab", caps, strict=True):
        low = min(one_second_windows(sim, n, range(100, 29 * 20)))
        assert low >= cap - 0.02, (n, low)  # every 1 s window from 5 s on, sliding by 50 ms
        assert max(e - s for s, e in sim.clients[n].busy) > 0.12  # (a turn's: 0.15 of work)


@pytest.mark.parametrize("shared_turns", [True, False])
def test_capped_neighbours_read_their_tails_together_in_shared_turns_only(shared_turns):
    # (in 100 ms turns the order changes from turn to turn, and with it where each
    # calibration falls)
    sim = run_caps((0.4, 0.5), 3, 20.0,
                   timing=dataclasses.replace(LAUNCHER, shared_turns=shared_turns))
    said = [log.message for log in sim.logs if log.client == "a" and "calibrated" in log.message]
    assert said and "by work" in said[-1]
    assert ("; read with b's " in said[-1]) == shared_turns, said[-1]


@pytest.mark.parametrize("caps", [(0.2, 0.3, 0.3), (0.22, 0.5)])
def test_a_group_with_a_cap_too_small_for_thirds_of_a_second_shares_half_seconds(caps):
    # 0.2's part of a third of a second is 67 ms, short of LONE_PACED_WORK_S: the group was
    # left in 100 ms turns, and its lowest 1 s windows read 3.5-7.8 points under here (the
    # trio 6.2-7.1 on the H100, 2026-12-07), in half seconds 0.1-1.8 (SHARED_PACED_WORK_MIN_S).
    sim = run_caps(caps, 4, 30.0)
    for n, cap in zip("abc", caps, strict=False):
        low = min(one_second_windows(sim, n, range(100, 29 * 20)))
        assert low >= cap - 0.025, (n, low)  # every 1 s window from 5 s on, sliding by 50 ms
    said = {log.message for log in sim.logs if log.client == "a" and "turns" in log.message}
    assert any(m.startswith("paced in turns of 500 ms (shared turns with b") for m in said)


@pytest.mark.parametrize(("bursts", "leaves"), [([60.0], False), ([60.0, 60.0], True)])
def test_in_shared_turns_one_short_burst_is_no_reason_to_leave_them(bursts, leaves):
    # A JAX pair at 0.4 + 0.5 left shared turns for 0.7 s on one burst of 64 ms among its
    # 160s (H100, 2026-12-07 09:25): two in a row are a program that syncs that often.
    sim = Sim([("a", 0.3, 0.3), ("b", 0.3, 0.3)], timing=LAUNCHER, burst_ms=5000.0,
              clock=GpuClock(), launch_s=0.0002)
    sim.start("a"), sim.start("b", 0.001)
    sim.run_until(6.0)
    assert sim.clients["a"].busy[-1][1] - sim.clients["a"].busy[-1][0] > 0.12  # (in turns)
    sim.next_bursts["a"] = bursts
    before = len(sim.logs)
    sim.run_until(8.0)
    said = [log.message for log in sim.logs[before:] if "turns" in log.message]
    assert bool(said) == leaves, said
    if leaves:
        assert said[0].startswith("back in 100 ms turns: a's bursts of 60 and 60 ms"), said


@pytest.mark.parametrize("cap", [0.1, 0.119])
def test_a_cap_alone_too_small_for_a_grant_of_lone_paced_work_keeps_100_ms_turns(cap):
    # (SHARED_PACED_WORK_MIN_S is for groups: alone, 0.1-0.119 went into whole seconds of
    # 87-103 ms grants, shorter than a calibration; a review)
    sim = run_caps((cap,), 1, 10.0)
    assert not [log.message for log in sim.logs if "turns" in log.message]


def capped_pair(b_cap: float, until: float, seed: int = 1, b_start: float = 0.001) -> Sim:
    """a capped at 0.3 and b at `b_cap`, in shared turns with the GPU's clock read, b starting
    `b_start` after a (its place in their turns: 0.001, 0.28 s before a's), run to `until`."""
    sim = Sim([("a", 0.3, 0.3), ("b", b_cap, b_cap)], timing=LAUNCHER, burst_ms=5000.0,
              seed=seed, clock=GpuClock(), launch_s=0.0002, gpu_wait=0.8)
    sim.start("a")
    sim.start("b", b_start)
    sim.run_until(until)
    return sim


def capped_trio(b_start: float, until: float) -> Sim:
    """a, b and c capped at 0.2, 0.3 and 0.3, in shared turns with the GPU's clock read, b
    starting `b_start` after a and c twice that and 2 ms after it, run to `until`."""
    sim = Sim([("a", 0.2, 0.2), ("b", 0.3, 0.3), ("c", 0.3, 0.3)], timing=LAUNCHER,
              burst_ms=5000.0, seed=1, clock=GpuClock(), launch_s=0.0002, gpu_wait=0.8)
    sim.start("a")
    sim.start("b", b_start)
    sim.start("c", 2 * b_start + 0.002)
    sim.run_until(until)
    return sim


def shared_turns_edit(caps_after: tuple[float, float], seed: int, at: float = 10.0,
                      b_start: float = 0.001) -> Sim:
    """a and b capped at 0.3 and 0.6 (0.3 and 0.3 for a raise), in shared turns with the GPU's
    clock read, `caps_after` from `at` on; 30 s in all, the clock run to the end.  b starts
    `b_start` after a (its place in their turns: 0.001, 0.28 s before a's)."""
    sim = capped_pair(0.3 if caps_after[1] > 0.3 else 0.6, at, seed, b_start)
    cap_a, cap_b = caps_after
    sim.configure(config(("a", cap_a, cap_a, 1 << 30), ("b", cap_b, cap_b, 1 << 30)))
    sim.run_until(30.0)
    assert sim.clock is not None
    sim.clock.advance(30.0, sim.running)
    return sim


@pytest.mark.parametrize("seed", [1, 2])
def test_in_shared_turns_a_cap_lowered_beside_a_capped_neighbour_leaves_both_whole(seed):
    """b, capped at 0.6 beside a at 0.3, is lowered to 0.3.  The edit cleared what their
    grants cost, both were read by the clock until their next grants, and went back to 100 ms
    turns for one: a's 1 s windows held 0.142 of its work at worst (0.258 with only this
    undone).  Read by work through the edit (SpeedMeter.duty_changed): 0.294-0.310, b
    0.286-0.324 from 11 s on (seeds 1-4).  With b's grant cut at the edit, b 0.295-0.312
    from the edit on, and a 0.276-0.325: the cut leaves the GPU idle before a's grants,
    which run faster after it, and a's speed read from the first of them (1.03) held it
    2.4 points under for a second (seeds 1-4)."""
    sim = shared_turns_edit((0.3, 0.3), seed)
    for name, since in (("a", 8), ("b", 10)):
        seconds = one_second_windows(sim, name, range(since * 20, 29 * 20))
        assert min(seconds) >= 0.3 - 0.03 and max(seconds) <= 0.3 + 0.035, (name, seconds)


@pytest.mark.parametrize("at", [10.0, 10.1, 10.25, 10.3, 10.4, 10.45])
def test_in_shared_turns_a_cap_lowered_at_any_phase_of_the_turns_holds_from_the_edit(at):
    """b lowered from 0.6 to 0.3 beside a at 0.3, at phases of their half-second turns.  The
    grant b held ran on at the old cap, and its next waited for the new cap's windows, which
    still held the grant before the edit: b's 1 s windows from the edit held 0.145-0.18 of its
    work at phases 300-450 ms, and a's 0.18-0.20 at 250 and 450 ms (bench/sim_edits.py).  Its
    grant cut to the new cap (wire.CUT_ID), its windows counting no use from before the edit:
    b 0.285-0.297, a 0.275-0.281 at worst over the 20 edits."""
    sim = shared_turns_edit((0.3, 0.3), 1, at)
    for name in ("a", "b"):
        seconds = one_second_windows(sim, name, range(120), at=at)
        assert min(seconds) >= 0.3 - 0.03 and max(seconds) <= 0.3 + 0.035, (name, min(seconds),
                                                                           max(seconds))


@pytest.mark.parametrize("seed", [1, 2])
def test_in_shared_turns_a_cap_raised_beside_a_capped_neighbour_leaves_it_whole(seed):
    """b, capped at 0.3 beside a at 0.3, is raised to 0.6.  Its grants, 300 ms now, took the
    GPU just before a's pace came round, and a, paced from its request, took two grants at
    once after its wait and then waited a second: a held 0.143 of its work in the second after
    the edit, its 1 s windows 0.141 at worst.  Paced from its grants (SHARED_TURNS_MAX):
    0.296-0.308, and b 0.586-0.611 from the edit on (seeds 1-4).  (And b held 0.54 for good:
    its room was read only as far as the 0.9 of a grant it waits for, and each grant cut to
    that.)"""
    sim = shared_turns_edit((0.3, 0.6), seed)
    for name, cap in (("a", 0.3), ("b", 0.6)):
        seconds = one_second_windows(sim, name, range(10 * 20, 29 * 20))
        assert min(seconds) >= cap - 0.02 and max(seconds) <= cap + 0.035, (name, seconds)


@pytest.mark.parametrize("at", [10.0, 10.05, 10.1, 10.2, 10.25, 10.3, 10.45])
def test_in_shared_turns_a_cap_raised_at_any_phase_of_the_turns_holds_from_the_edit(at):
    """b raised from 0.3 to 0.6 beside a at 0.3, at phases of their half-second turns.  Its
    pace, brought forward to what the new cap asks (policy.Pacer.raised), came round 35-80 ms
    before a's, and its 285 ms grant pushed a's on by a whole one, which its 1 s windows lost:
    0.143 of its work at worst in 6 of 20 edits on the simulator (bench/sim_edits.py).  Its
    next grant at its old pace, in its turn, kept a whole, but b's first second held what its
    old pace gave: 0.465-0.54 of its work for edits 50-250 ms into the turn.  Topped up at
    once, in the time free before a's pace, by what the new cap gives over the rest of its old
    pace's period as far as its 1 s windows from each top-up on have room beside its coming
    grants (_top_up_raised, _with_top_ups): b 0.521-0.588 at worst from the edit on, 0.605 at
    most, a 0.274-0.295.  With that bound read over its windows from now only, its grants a
    turn at a speed of 1 apart (sooner than they come), and its place moved on by its grants'
    speed charges from before it: b 0.527-0.539 for edits 50-200 ms in; read over each window
    ending where one of its grants does, its use before the edit counted, and its place kept:
    0.561-0.586, 0.608 at most, a 0.294-0.300."""
    sim = shared_turns_edit((0.3, 0.6), 1, at)
    a = one_second_windows(sim, "a", range(120), at=at)
    b = one_second_windows(sim, "b", range(120), at=at)
    assert min(a) >= 0.3 - 0.03, min(a)
    assert min(b) >= 0.6 - 0.045 and max(b) <= 0.6 + 0.035, (min(b), max(b))


def test_a_raised_caps_place_is_not_moved_on_by_the_speed_charges_of_grants_before_it():
    """b raised from 0.3 to 0.6 while it holds its grant: its place is read at the edit, as a's
    next grant ends.  That grant's speed charge, and its top-up's, came after and moved its
    pace on by 17.6 ms, the GPU idle meanwhile (the simulator: b's windows from the edit then
    hold a grant's end less).  Neither moves the place now (ClientState.placed_at)."""
    at = 10.15
    sim = capped_pair(0.3, at)
    assert sim.running(at) == "b"
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    sim.run_until(at + 1.0)
    a_grant = min((s, e) for s, e in sim.clients["a"].busy if s >= at)
    placed = min((s, e) for s, e in sim.clients["b"].busy if s >= a_grant[0])
    assert placed[0] == pytest.approx(a_grant[1], abs=0.003)


@pytest.mark.parametrize("b_start, at", [(0.2, 10.05), (0.3, 10.2), (0.3, 10.25), (0.4, 10.25),
                                         (0.4, 10.3)])
def test_a_cap_raised_in_shared_turns_finds_a_place_that_leaves_its_neighbour_whole(b_start, at):
    """b raised from 0.3 to 0.6 beside a at 0.3, its place in their turns 210 ms before a's:
    its grants, 281 ms now, ran into a's, and a's moved on by 70-100 ms for good (paced from
    its grants): a held 0.143-0.148 of its work over a second (bench/sim_edits.py --b-starts
    0.2,0.3,0.4; 0.20 on the H100, 2026-12-07 16:20).  Its next grant now goes after a's
    (_raised_place), topped up until then: a 0.276-0.298."""
    sim = shared_turns_edit((0.3, 0.6), 1, at, b_start)
    a = one_second_windows(sim, "a", range(120), at=at)
    assert min(a) >= 0.3 - 0.05, min(a)


@pytest.mark.parametrize("b_start, at", [(0.2, 10.05), (0.2, 10.1), (0.2, 10.15), (0.3, 10.05)])
def test_a_cap_raised_in_shared_turns_takes_the_first_free_place_from_the_edit_on(b_start, at):
    """b raised from 0.3 to 0.6 beside a at 0.3.  Placed from its old pace on, its next grant
    went after a's next one, 750 ms after the edit, topped up until then as far as its 1 s
    window had room beside that grant: the top-up ended 325 ms before it, and b's 1 s windows
    held 0.482-0.547 of its work (bench/sim_edits.py --b-starts; 12.5 points under at worst
    over five places).  Placed from the edit on, where it runs into no grant of a's and its
    windows have room for its next two grants (_raised_place): 0.569-0.584, a whole."""
    sim = shared_turns_edit((0.3, 0.6), 1, at, b_start)
    a = one_second_windows(sim, "a", range(120), at=at)
    b = one_second_windows(sim, "b", range(120), at=at)
    assert min(a) >= 0.3 - 0.03, min(a)
    assert min(b) >= 0.6 - 0.05 and max(b) <= 0.6 + 0.035, (min(b), max(b))


def test_a_raised_caps_place_is_kept_when_the_grant_it_held_comes_back_early():
    """b raised from 0.3 to 0.6 while it holds its grant, which its hook hands back 10 ms
    later, its program gone idle: the unused part given back does not move b's place either
    (a review: it moved it on by that part / its new cap, toward a's grant; _moves_pace)."""
    at = 10.1
    sim = capped_pair(0.3, at)
    held = sim.core.holder
    assert held is not None and held.interval.name == "b" and held.interval.end > at + 0.05
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    place = at + sim.core.pacer.ready_in("b", at)
    sim.run_until(at + 0.01)
    sim.request("b")  # (its token back, 0.05 s and more before its end)
    assert held.interval.end == pytest.approx(at + 0.01)
    assert sim.now + sim.core.pacer.ready_in("b", sim.now) == pytest.approx(place, abs=1e-9)


@pytest.mark.parametrize("b_start, at", [(0.001, 10.1), (0.15, 10.3)])
def test_a_cap_raised_where_no_place_fits_stays_at_its_pace_as_it_moves(b_start, at):
    """0.2 + 0.3 + 0.3, b raised to 0.4 where no gap fits its grown grant: it stays at its
    pace, and nothing is placed, so what its grants are charged moves that pace as ever (a
    review: marked placed all the same, the speed charge of the grant it held was left out of
    its pace, which then came ~12 ms early, toward the mate it runs into)."""
    sim = capped_trio(b_start, at)
    pace = at + sim.core.pacer.ready_in("b", at)
    sim.configure(config(("a", 0.2, 0.2, 1 << 30), ("b", 0.4, 0.4, 1 << 30),
                         ("c", 0.3, 0.3, 1 << 30)))
    assert at + sim.core.pacer.ready_in("b", at) == pace
    assert sim.core.clients["b"].placed_at == -math.inf


def test_a_cap_raised_while_its_neighbour_holds_the_gpu_is_placed_after_that_grant():
    """b raised while a holds the GPU: its place is read from the end of a's grant, where b
    may start, not from the edit (a review: placed at the edit, it fit beside a's next grants
    as if it ran now)."""
    at = 10.4
    sim = capped_pair(0.3, at)
    assert sim.running(at) == "a"
    held_end = sim.core.holder.interval.end
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    assert at + sim.core.pacer.ready_in("b", at) >= held_end


def test_a_cap_raised_in_shared_turns_tops_up_in_the_free_time_before_its_neighbours_pace():
    """b rests after its grant (at 0.3, 143 ms a half-second turn) when it is raised to 0.6:
    it is granted what the new cap gives more at once, in the GPU's free time, ending before
    a's pace comes round, and its next grant comes at the first place where it runs into no
    grant of a's and its windows have room, here as a's grant ends, before its old pace
    (_top_up_raised, _raised_place)."""
    at = 10.2
    sim = capped_pair(0.3, at)
    pace = at + sim.core.pacer.ready_in("b", at)
    a_next = at + sim.core.pacer.ready_in("a", at)
    assert sim.running(at) is None and a_next - at > 0.1  # (b rests, a is due in 125 ms)
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    sim.run_until(at + 1.0)
    [top_up, following] = [(s, e) for s, e in sim.clients["b"].busy if s >= at][:2]
    [a_grant] = [(s, e) for s, e in sim.clients["a"].busy if at <= s < following[0]]
    assert top_up[0] == pytest.approx(at) and top_up[1] <= a_grant[0]
    assert top_up[1] - top_up[0] >= 0.02  # (its window holds its next two grants too)
    assert following[0] == pytest.approx(a_grant[1], abs=0.005) and following[0] < pace


@pytest.mark.parametrize("at", [10.2, 10.4])  # (where its next grant after the edit is old)
def test_a_raised_cap_whose_hooks_bursts_follow_its_grants_late_stays_in_shared_turns(at):
    """b raised from 0.3 to 0.6 beside a at 0.3; its hook's burst follows its grants a grant
    or two late: 143 ms after its top-up, 253 after its first grant of 285 (H100, 2026-12-07
    16:42).  Both under 0.9 of 285, the pair left shared turns for 100 ms ones, and a's 1 s
    windows read 0.179-0.19 of its work (0.173 on the H100).  Each burst is judged against
    the grant it was said after (ClientState.burst_after_s): a 0.276-0.295."""
    sim = capped_pair(0.3, at)
    sim.next_bursts["b"] = [143.0, 253.0]
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    sim.run_until(at + 7.0)
    assert sim.clock is not None
    sim.clock.advance(at + 7.0, sim.running)
    a = one_second_windows(sim, "a", range(120), at=at)
    assert min(a) >= 0.3 - 0.03, min(a)


@pytest.mark.parametrize("b_start, at", [(0.15, 10.3), (0.001, 10.1), (0.1, 10.25)])
def test_a_cap_raised_in_a_trio_leaves_the_others_no_further_under(b_start, at):
    """0.2 + 0.3 + 0.3, b raised to 0.4: a turn of theirs has no gap for b's grown grant.
    Topped up to the edge its windows allow, a top-up granted late and b's next two grants
    filled a window, the second waited for room 110-150 ms into the others' places, and a
    read 8.8-10 points under, b 11.9-17.4 (the rule before: 5.4 and 5.9 at worst).  The
    bound read again at each top-up, over the windows ending at b's next grants, with the
    edge those allow (_short_window_left_s): b 0.370-0.379, 0.353 at 10.25.
    Placed from the edit on (_raised_place) where its windows had room for its first grown
    grant only, the next waited for its window into c's place, and b read 0.316 of its work
    over a second (0.341 with room for both)."""
    sim = capped_trio(b_start, at)
    sim.configure(config(("a", 0.2, 0.2, 1 << 30), ("b", 0.4, 0.4, 1 << 30),
                         ("c", 0.3, 0.3, 1 << 30)))
    sim.run_until(at + 7.0)
    assert sim.clock is not None
    sim.clock.advance(at + 7.0, sim.running)
    for name, cap, slack in (("a", 0.2, 0.06), ("b", 0.4, 0.07), ("c", 0.3, 0.06)):
        low = min(one_second_windows(sim, name, range(120), at=at))
        assert low >= cap - slack, (name, low)


def status_speeds(sim: Sim, now: float) -> dict[str, float]:
    return {c["name"]: c["speed"] for c in sim.core.snapshot(now)["clients"]}


def held_share(sim: Sim, now: float) -> float:
    """The share of the second before `now` that grants held the GPU (charges left out)."""
    return sum(min(g.end, now) - max(g.start, now - 1.0)
               for g in sim.core.history.overlapping(now - 1.0, now))


def test_a_cap_edit_that_makes_the_card_busier_scales_the_speed_ups_kept_through_it():
    """Raised from 0.3 to 0.6 beside a at 0.3: each one's speed-up, read from its grants'
    costs before the edit until its next grant is measured, is scaled by the square root of
    the idle share the card keeps (speed.EDIT_BUSIER_FROM: on the H100 the raised clients'
    grants ran 0.016 slower than before in their first 1.5 s, rms 0.021).  Two edits in a
    row, before the grants catch up, scale as one; a neighbour removed as b is raised leaves
    the card no busier (a review).  A lowering leaves them as they were."""
    at = 25.0  # (past speed.SETTLE_S: no settling floor over the speeds)
    sim = capped_pair(0.3, at)
    before = status_speeds(sim, at)
    busy = held_share(sim, at)
    assert 0.5 < busy < 0.6 and min(before.values()) > 1.02
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    scale = math.sqrt((1.0 - (busy + 0.3 / before["b"])) / (1.0 - busy))
    after = status_speeds(sim, at)
    for name in "ab":
        assert after[name] - 1.0 == pytest.approx((before[name] - 1.0) * scale), name
    # Raised in two edits before a grant is measured: as in one.
    sim = capped_pair(0.3, at)
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.45, 0.45, 1 << 30)))
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    # (the second rise is read at b's speed as the first edit scaled it)
    assert status_speeds(sim, at) == pytest.approx(after, abs=0.001)
    # ...and raised as its neighbour goes, the card hardly busier: as where a went alone
    # (b's speed then read from its own tails, no longer pooled with a's).
    sim = capped_pair(0.3, at)
    sim.configure(config(("b", 0.3, 0.3, 1 << 30)))
    alone = status_speeds(sim, at)["b"]
    sim = capped_pair(0.3, at)
    sim.configure(config(("b", 0.6, 0.6, 1 << 30)))
    assert status_speeds(sim, at)["b"] == pytest.approx(alone, abs=0.002)
    assert alone - 1.0 > 1.5 * (after["b"] - 1.0)  # (scaled as by a raise: far under it)
    sim = capped_pair(0.6, at)
    before = status_speeds(sim, at)
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.3, 0.3, 1 << 30)))
    assert status_speeds(sim, at) == pytest.approx(before)


def test_a_cap_raised_as_its_pace_comes_round_where_the_clock_reads_no_speed_up_holds():
    """H100, 2026-12-07 22:12: b raised from 0.3 to 0.6 beside a at 0.3 just as its pace came
    round was read by the clock after the edit (its grants' costs cleared), which said no
    speed-up (NVML: 1942 MHz in its grants, 1937 continuously), against 1.077 by work: its
    top-up was sized at 1, 182.5 ms, and charged at 1.077 once measured, and its windows had
    no room for its grant at its pace: it waited 49 ms, the GPU idle, and held 0.532 of its
    work over a second.  On the simulator with its clock so read, b 0.482 and a 0.274 (seed 3,
    b starting 0.3 s after a); its speed read from its grants' costs before the edit, 0.553
    and 0.297 (SpeedMeter.duty_changed)."""
    probe = capped_pair(0.3, 11.0, seed=3, b_start=0.3)
    at = next(s for s, _ in probe.clients["b"].busy if s > 9.9) - 0.002
    sim = capped_pair(0.3, at, seed=3, b_start=0.3)
    for clocks in sim.core.speed._clocks.values():
        clocks.in_grants = clocks.continuous  # (the clock says no speed-up)
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    end = at + 4.0
    sim.run_until(end)
    assert sim.clock is not None
    sim.clock.advance(end, sim.running)
    for name, least in (("a", 0.3 - 0.02), ("b", 0.6 - 0.055)):
        low = min(one_second_windows(sim, name, range(21), at=at))
        assert low >= least, (name, low)


@pytest.mark.parametrize(("at", "topped_up"),
                         [(10.2, True), (10.25, True), (10.3, True), (10.32, False)])
def test_a_top_up_ends_before_the_neighbours_pace_comes_round(at, topped_up):
    """b raised from 0.2 to 0.6 beside a at 0.3, resting with a due 12-130 ms later: b's
    top-up goes first, and ends as a's pace comes round (a review: unbounded, it held a up
    by 33-46 ms); where the time left before a's pace is too short for one (12 ms), b waits
    for its place after a's grant.  (At 10.3, 32 ms before a's pace, no top-up while its
    bound read the window from now only, its grants a turn at a speed of 1 apart.)"""
    sim = capped_pair(0.2, at)
    due = at + sim.core.pacer.ready_in("a", at)
    assert sim.running(at) is None and due > at
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    sim.run_until(at + 1.0)
    [first, *_] = [(s, e) for s, e in sim.clients["b"].busy if s >= at]
    a_next = min((s, e) for s, e in sim.clients["a"].busy if s >= at)
    assert a_next[0] <= due + 0.001
    if topped_up:
        assert first[0] == pytest.approx(at) and first[1] <= due + 0.001
    else:
        assert first[0] >= a_next[1]


def test_a_cap_raised_and_lowered_back_is_owed_nothing():
    """Raised while b holds its grant (its top-up would follow it), then lowered back: b's
    next grant comes at its pace, after a's."""
    sim = capped_pair(0.3, 10.1)
    assert sim.running(10.1) == "b"
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    sim.run_until(10.12)
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.3, 0.3, 1 << 30)))
    sim.run_until(11.0)
    b_next = min(s for s, _ in sim.clients["b"].busy if s >= 10.12)
    a_next = min(s for s, _ in sim.clients["a"].busy if s >= 10.12)
    assert b_next > a_next


def test_a_client_topped_up_then_uncapped_alone_is_served():
    """Its top-up granted, its cap lifted, its neighbour removed: it asks alone, uncapped, and
    the decision weighs no one (_select).  The top-up an earlier decision left in its
    standings was read for this grant, and taking it from what was owed, dropped with the
    cap, raised a KeyError (a review)."""
    sim = capped_pair(0.3, 10.2)
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)))
    assert sim.running(10.2) == "b"  # (its top-up: _top_up_raised)
    sim.configure(config(("b", 0.6, 1.0, 1 << 30)))
    sim.run_until(11.0)
    assert sim.share("b", 10.5, 11.0) > 0.9


@pytest.mark.parametrize("at", [10.05, 10.1])
def test_a_cap_raised_out_of_shared_turns_comes_up_to_its_new_pace_at_once(at):
    # (0.3 + 0.7 fill the GPU: 100 ms turns, where a raise brings its pace forward; kept at
    # the old pace, as within shared turns, it held 0.27-0.31 of its first half second)
    sim = Sim([("a", 0.3, 0.3), ("b", 0.3, 0.3)], timing=LAUNCHER, burst_ms=5000.0, seed=1,
              clock=GpuClock(), launch_s=0.0002, gpu_wait=0.8)
    sim.start("a"), sim.start("b", 0.001)
    sim.run_until(at)
    sim.configure(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.7, 0.7, 1 << 30)))
    sim.run_until(at + 1.0)
    assert sim.share("b", at, at + 0.5) >= 0.5


@pytest.mark.parametrize("seed", [1, 2])
def test_in_shared_turns_a_cap_lowered_in_a_trio_leaves_the_others_whole(seed):
    """Three capped at 0.3, 0.35 and 0.3; b is lowered to 0.3.  Its calibration, waiting for
    room after the edit, took the GPU 20 ms before a's pace came round, and a's grants moved
    on by 115 ms for good (paced from its grants): a held 0.179-0.183 of its work over a
    second (0.251 in 100 ms turns).  Waiting for a neighbour due that soon
    (SHARED_TURNS_YIELD_S): 0.289-0.296, c 0.289-0.290, b 0.282-0.285 from 11 s on."""
    specs = [("a", 0.3), ("b", 0.35), ("c", 0.3)]
    sim = Sim([(n, cap, cap) for n, cap in specs],
              timing=LAUNCHER, burst_ms=5000.0,
              seed=seed, clock=GpuClock(), launch_s=0.0002)
    for i, (n, _) in enumerate(specs):
        sim.start(n, 0.001 * i)
    sim.run_until(10.0)
    sim.configure(config(*[(n, 0.3, 0.3, 1 << 30) for n, _ in specs]))
    sim.run_until(30.0)
    assert sim.clock is not None
    sim.clock.advance(30.0, sim.running)
    for name, since, slack in (("a", 8, 0.02), ("c", 8, 0.02), ("b", 11, 0.025)):
        seconds = one_second_windows(sim, name, range(since * 20, 29 * 20))
        assert min(seconds) >= 0.3 - slack and max(seconds) <= 0.3 + 0.035, (name, seconds)


@pytest.mark.parametrize(("specs", "launch_s"), [
    # 0.2 allows one 120 ms grant a second only: 0.3 + 0.3 beside it held 0.268 of their work
    # each over 40 s in whole-second turns (SHARED_TURNS_MAX)
    ([("a", 0.15, 0.15), ("b", 0.3, 0.3), ("c", 0.3, 0.3)], {}),  # (0.2: half seconds)
    ([("a", 0.5, 0.5), ("b", 0.5, 0.5)], {}),  # caps that fill the GPU
    ([("a", 0.3, 0.3), ("b", 0.3, 1.0)], {}),  # an uncapped neighbour
    ([("a", 0.3, 0.3), ("b", 0.3, 0.3)], {"b": 0.0}),  # one read by the clock: b's hook
    # measures none of its launches
], ids=["whole-second", "full", "uncapped", "by-the-clock"])
def test_in_shared_turns_a_group_that_cannot_share_them_keeps_100_ms_turns(specs, launch_s):
    sim = Sim(specs, timing=LAUNCHER, burst_ms=5000.0,
              clock=GpuClock(), launch_s={n: launch_s.get(n, 0.0002) for n, _, _ in specs})
    for i, (n, _, _) in enumerate(specs):
        sim.start(n, 0.001 * i)
    sim.run_until(20.0)
    for n, _, limit in specs:
        c = sim.clients[n]
        ordinary = [e - s for i, (s, e) in enumerate(c.busy) if i not in c.calibrations]
        if limit < 1.0:  # (its limit's part of a 100 ms turn, the minimum quota at least)
            assert max(ordinary) <= max(limit * 0.1, LAUNCHER.min_quota_s) + 1e-9, n


def test_capped_clients_that_leave_the_gpu_idle_between_them_do_their_caps_of_work():
    # Neither is ever alone, so neither was calibrated, and each was charged its time while
    # its grants ran on a card the idle 40 % cooled: 0.32-0.34 of its bare work over 10 s.
    sim = Sim([("a", 0.1, 0.3), ("b", 0.1, 0.3)], timing=LAUNCHER, burst_ms=5000.0,
              clock=GpuClock(), launch_s=0.0002)
    sim.start("a"), sim.start("b")
    sim.run_until(30.0)
    assert sim.clock is not None
    for name in ("a", "b"):
        for t in range(0, 20):
            work = sim.clock.work(name, t, t + 10.0) / 10.0
            assert work == pytest.approx(0.3, abs=0.02), (name, t, work)


def test_a_few_slow_grants_do_not_move_the_speed():
    # JAX capped at 0.4 on the H100: its grants' median 175-179 us a launch, but 21 of 523
    # read 200-234, some over three times the launches of the others; a mean over launches
    # read 185-190 for 20 s, and its speed fell from 1.10 to 1.02 (2026-11-26 17:36).
    meter = SpeedMeter()
    in_grant(meter, 1900.0)
    for _ in range(10):
        meter.ran("a", 40 * 0.177, 40, calibrating=False)
    for at in (1.0, 4.0):  # (the first tail is not kept)
        meter.calibrating("a", at)
        meter.ran("a", 200 * 0.195, 200, calibrating=True)
    assert meter.speed("a", SETTLE_S) == pytest.approx(195 / 177)
    for _ in range(3):
        meter.ran("a", 125 * 0.225, 125, calibrating=False)
        meter.ran("a", 40 * 0.177, 40, calibrating=False)
    assert meter.speed("a", SETTLE_S) == pytest.approx(195 / 177)


def test_a_calibration_fits_its_clients_windows_or_none_comes():
    longest = Calibration(CALIBRATION_S, CALIBRATION_SETTLE_S)
    assert capped_calibration(0.43) == longest  # a 0.4 cap's 1 s window: 200 ms
    half = capped_calibration(0.215)  # 0.2's: half its room, half of it to settle
    assert half is not None
    assert half.length_s == pytest.approx(0.1075)
    assert half.settle_s == pytest.approx(half.length_s * CALIBRATION_SETTLE_S / CALIBRATION_S)
    assert capped_calibration(0.115) is None  # 0.1's: its tail would read a clock unsettled


def test_beside_capped_neighbours_a_calibration_is_no_longer_than_its_seconds_can_pay_back():
    # a lump of L at a cap r is paid back within 4 points both ways only if L (1.04 - r) <= 0.08
    assert capped_calibration(0.43, lump_cap=0.4).length_s == pytest.approx(0.08 / 0.64)
    assert capped_calibration(0.32, lump_cap=0.3).length_s == pytest.approx(0.08 / 0.74)
    assert capped_calibration(0.43, lump_cap=0.6).length_s == pytest.approx(0.08 / 0.44)
    assert capped_calibration(0.43, lump_cap=0.7).length_s == CALIBRATION_S  # (from 0.64 up)
    # too short to settle (under 0.24): none, charged UNCALIBRATED_SPEED...
    assert capped_calibration(0.215, lump_cap=0.2) is None
    # ...but alone one that settles: its own seconds a point further under, no one else's
    assert capped_calibration(0.215, lump_cap=0.2, alone=True).length_s == MIN_CALIBRATION_S
    assert LONE_AT_04.length_s == pytest.approx(0.08 / 0.64)  # as beside others


def test_a_calibration_is_no_longer_than_its_capped_neighbours_can_make_up():
    # a neighbour capped at r waits through a lump of L: r L short in a 1 s window, so
    # L <= 0.04 / r (0.133 s beside 0.3, where a 0.6 cap's own bound allows 0.182)...
    beside_03 = capped_calibration(0.65, lump_cap=0.6, beside_cap=0.3)
    assert beside_03 is not None and beside_03.length_s == pytest.approx(0.04 / 0.3)
    assert beside_03.settle_s == pytest.approx(
        beside_03.length_s * CALIBRATION_SETTLE_S / CALIBRATION_S)
    # ...but shortened to MIN_CALIBRATION_S at most, never to none (charged UNCALIBRATED_SPEED)
    assert capped_calibration(0.43, lump_cap=0.4, beside_cap=0.5).length_s == MIN_CALIBRATION_S
    # a neighbour small enough leaves its own bound as it was
    assert capped_calibration(0.32, lump_cap=0.3, beside_cap=0.3) == capped_calibration(
        0.32, lump_cap=0.3)
    assert capped_calibration(0.215, lump_cap=0.2, beside_cap=0.1) is None


def test_a_capped_client_alone_does_not_pay_its_calibrations_back_in_seconds_far_under():
    """Alone, a 200 ms calibration at 0.4 left a hole of 300 ms before it and 240 after (its
    windows' room), and its seconds read down to 0.27-0.33 of its bare work (H200, 2026-12-03:
    worst 1 s 7.1-12.0 points; 125 ms ones: 3.6-5.1).  On the simulator 0.313 -> 0.357."""
    sim = run_capped(GpuClock(), 30.0, limit=0.4, launch_s=0.0002)
    assert sim.clock is not None
    worst = min(one_second_windows(sim, "capped", range(4, 29 * 4), per_s=4))
    assert worst >= 0.35


@pytest.mark.parametrize("seed", [3, 4])
def test_a_capped_client_alone_waits_no_longer_for_a_calibration_once_its_long_window_is_full(
        seed):
    """Once its 10 s window is full, its pace holds it at the limit, and a calibration waited
    for room there too, not only in its 1 s window: 210 ms with no grant before one (150-185
    before the others), and its second before 0.337 of its work on the simulator (seed 4; on
    the H100, 2026-12-06, torch eager's seconds before its calibrations read 0.30-0.32 from
    25 s on, 0.32-0.35 before).  The pace after it pays its lump back well within that window.
    (0.361-0.362 where the simulator's hooks handed their tokens back idle up to 2.5 ms early;
    0.355 since they ask up to 1 ms ahead, their queue running to the end, and are charged
    that grant whole: RENEWAL_LEAD_S.)"""
    sim = run_caps((0.4,), seed, 40.0)
    assert sim.clock is not None
    worst = min(one_second_windows(sim, "a", range(10 * 20, 39 * 20)))
    assert worst >= 0.4 - 0.05, worst
    for start in range(10, 30):  # (the long window holds as before)
        assert sim.clock.work("a", start, start + 10.0) / 10.0 <= 0.4 + 0.015, start


def run_caps(caps: tuple[float, ...], seed: int, seconds: float, timing: Timing = LAUNCHER,
             launch_s: float = 0.0002) -> Sim:
    """Saturating clients a, b, ... capped at `caps`, started together, for `seconds` on the
    simulator's power-limited GPU, its clock run to the end (`launch_s` 0: read by the clock)."""
    names = "abc"[:len(caps)]
    sim = Sim([(n, cap, cap) for n, cap in zip(names, caps, strict=True)], timing=timing,
              burst_ms=5000.0, seed=seed, clock=GpuClock(), launch_s=launch_s)
    for i, name in enumerate(names):
        sim.start(name, 0.001 * i)
    sim.run_until(seconds)
    assert sim.clock is not None
    sim.clock.advance(seconds, sim.running)
    return sim


def test_two_clients_capped_at_0_3_keep_their_seconds_around_each_others_calibrations():
    """150 ms calibrations beside a capped neighbour left the seconds on either side 6.6-8.9
    points under (H200, 2026-12-02; 133 ms: 5.5-6.5, 108 ms: 2.8-3.5).  Here, over seeds 1-4,
    the clients' worst whole seconds read a median 0.233 with 148 ms calibrations, 0.248 with
    131 ms ones, 0.258 with 108 ms ones.  (One seed's worst alone moves a few points with any
    change that moves the grants: seed 1's a read 0.269, then 0.219 once clock readings past a
    neighbour's charge counted, the 12 seeds' median 0.257 and 0.259.)  In 100 ms turns
    (--no-shared-turns, or caps adding up past SHARED_TURNS_MAX; shared turns' grants are
    calibrations' length already)."""
    worst = []
    for seed in range(1, 5):
        sim = run_caps((0.3, 0.3), seed, 30.0, timing=HUNDRED_MS_TURNS)
        assert sim.clock is not None
        for name in ("a", "b"):
            c = sim.clients[name]
            lengths = [c.busy[i][1] - c.busy[i][0] for i in c.calibrations]
            assert lengths and max(lengths) <= 0.08 / 0.74 + 1e-9, lengths
            worst.append(min(sim.clock.work(name, t, t + 1.0) for t in range(2, 29)))
    assert statistics.median(worst) >= 0.3 - 0.05 and min(worst) >= 0.2, worst


@pytest.mark.parametrize("seed", [2, 4])
def test_without_a_short_window_a_calibration_gets_no_more_room_in_the_long_one(seed):
    """With Gemini's own quotas (no short window) a calibration is not bounded by what a 1 s
    window pays back, and the pace of a small cap pays its lump back over seconds: given its
    excess in the long window too, a 0.05 cap read 2.2 points over its cap over 10 s on the
    simulator (1.4 with half of it, as now where a short window bounds the lump; 0.4 before;
    a review)."""
    sim = run_caps((0.05,), seed, 40.0, timing=Timing(short_window_s=0.0), launch_s=0.0)
    assert sim.clock is not None
    tens = [sim.clock.work("a", t / 10, t / 10 + 10.0) / 10.0 for t in range(0, 300)]
    assert max(tens) <= 0.05 + 0.01, max(tens)


@pytest.mark.parametrize("seed", [9, 10])
def test_a_lone_calibration_read_by_the_clock_takes_no_more_of_its_second_than_a_lump_may(seed):
    """Read by the clock, a lone client's calibration is not bounded by LUMP_BOUND (170 ms at
    0.3): half its excess less a paced grant in its 1 s window, on top of the window's edge,
    read 5.1-5.2 points over at 0.3 on the simulator (3.4 before; a review)."""
    sim = run_caps((0.3,), seed, 40.0, launch_s=0.0)
    assert sim.clock is not None
    seconds = one_second_windows(sim, "a", range(20, 390), per_s=10)
    assert max(seconds) <= 0.3 + 0.045, max(seconds)


def test_two_clients_capped_at_0_3_split_each_others_lumps_before_and_after_them():
    """A calibration waited for room in its 1 s window until the pace before it had paid its
    whole lump back, and the second before one read 6.5-8.1 points under on the simulator
    (every 1 s window sliding by 50 ms, seeds 1-4; on the H100, 2026-12-06, two at 0.3 read
    6.7-8.0 points under, highs 2.4-3.3 over).  Half its excess beyond one paced grant may now
    come in its own window, the pace after it paying that back: 4.8-6.0 points under (seeds
    1-8: 4.6-7.4, the median 5.7; 4.2-7.4 and 5.75 with the newest tail no longer counted
    where slower than the mean, 2026-12-07 22:40, seed 4's a 5.6 -> 7.3).  In 100 ms turns.
    The bound on the lowest is loosened from 6.5 to 7.5 points for that, a regression on the
    simulator accepted for the H100's 10 s windows (speed._tails_mean); the median's holds,
    which the rule before the split broke."""
    worst = []
    for seed in range(1, 5):
        sim = run_caps((0.3, 0.3), seed, 40.0, timing=HUNDRED_MS_TURNS)
        assert sim.clock is not None
        for name in ("a", "b"):
            seconds = one_second_windows(sim, name, range(40, 39 * 20))
            worst.append(min(seconds))
            assert max(seconds) <= 0.3 + 0.05, (seed, name, max(seconds))
    assert statistics.median(worst) >= 0.3 - 0.06 and min(worst) >= 0.3 - 0.075, worst


def test_a_client_too_small_to_calibrate_is_charged_the_likely_speed_as_far_as_it_waits():
    meter = SpeedMeter()
    in_grant(meter, 1900.0)
    assert meter.speed("a", calibrates=False) == UNCALIBRATED_SPEED
    meter.waited("a", GPU_BOUND / 2)
    assert meter.speed("a", calibrates=False) == pytest.approx(1 + (UNCALIBRATED_SPEED - 1) / 2)
    assert meter.speed("a") == 1.0  # (one that calibrates: its time until a tail says)


def test_a_fresh_capped_client_is_charged_a_likely_speed_until_a_calibration_tells_its_own():
    meter = SpeedMeter()
    assert meter.speed("a", 0.0) == 1.0  # never read: no clock, no calibration to come
    in_grant(meter, 1900.0, 1.0)
    assert meter.speed("a", 1.5) == UNKNOWN_SPEED
    assert meter.speed("a", 1.0 + UNKNOWN_SPEED_S) == 1.0  # none came (never alone): its time
    meter.ran("a", 40.0, 200, calibrating=False)
    meter.calibrating("a", 2.0)
    meter.ran("a", 80.0, 400, calibrating=True)  # 1.00: the first tail, read on a cold card
    assert meter.speed("a", 2.5) == UNKNOWN_SPEED  # (not kept)
    meter.calibrating("a", 5.0)
    meter.ran("a", 80.0, 400, calibrating=True)
    assert meter.speed("a", 5.5) == 1.0  # its own, once measured


def test_a_capped_client_whose_neighbours_keep_the_card_busy_is_charged_no_likely_speed():
    meter = SpeedMeter()
    in_grant(meter, 1900.0, 1.0)
    assert meter.speed("a", 1.5) == UNKNOWN_SPEED
    assert meter.speed("a", 1.5, idle=0.0) == 1.0  # (its grants: the card's continuous clock)
    assert meter.speed("a", 1.5, calibrates=False) == UNCALIBRATED_SPEED
    assert meter.speed("a", 1.5, calibrates=False, idle=0.0) == 1.0
    # where the card idles less, its idle time speeds it up less
    assert meter.speed("a", 1.5, idle=IDLE_FOR_UNKNOWN) == UNKNOWN_SPEED
    assert meter.speed("a", 1.5, idle=IDLE_FOR_UNKNOWN / 4) == pytest.approx(
        1.0 + (UNKNOWN_SPEED - 1.0) / 4)


@pytest.mark.parametrize("seed", [1, 2])
def test_caps_that_leave_the_card_idle_a_tenth_of_the_time_hold_over_their_first_10_s(seed):
    """0.4 + 0.5: charged UNKNOWN_SPEED while they settled, for speeds of 1.01-1.06, they were
    2.1 and 1.3 points under over 10 s (H200, 2026-12-02); here up to 3.5 (12 runs: seeds 1-6,
    two start times), and within 1.3 now (their 1 s windows 3.7-10.3 under, 2.9-8.9 now).  In
    100 ms turns, and in shared turns, as by default."""
    for timing in (HUNDRED_MS_TURNS, LAUNCHER):
        sim = run_caps((0.4, 0.5), seed, 30.0, timing=timing)
        assert sim.clock is not None
        for name, limit in (("a", 0.4), ("b", 0.5)):
            tens = [sim.clock.work(name, t, t + 10.0) / 10.0 for t in range(2, 20)]
            assert max(abs(x - limit) for x in tens) <= 0.015, (timing.shared_turns, name, tens)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_cap_set_beside_an_uncapped_neighbour_holds_from_its_first_seconds(seed):
    """b, uncapped at 0.75 beside a, capped at 0.3 by a config edit: its neighbour keeps the
    card busy, so its grants run at the continuous clock, but it was charged UNKNOWN_SPEED for
    5 s from its first clock reading (H200, 2026-12-02: granted 0.259-0.283 of those seconds,
    0.280 of its work over 10 s; here 0.284-0.287, and 0.299-0.300 now)."""
    sim = Sim([("a", 0.25, 1.0), ("b", 0.75, 1.0)], timing=LAUNCHER, burst_ms=5000.0,
              seed=seed, clock=GpuClock(), launch_s=0.0002)
    sim.start("a")
    sim.start("b", 0.001)
    sim.run_until(10.0)
    sim.configure(cfg.ResourceConfig((cfg.ClientSpec("a", 0.25, 1.0, 1 << 30),
                                      cfg.ClientSpec("b", 0.3, 0.3, 1 << 30))))
    sim.run_until(20.0)
    assert sim.clock is not None
    sim.clock.advance(20.0, sim.running)
    assert sim.clock.work("b", 10.0, 15.0) / 5.0 == pytest.approx(0.3, abs=0.01)
    assert sim.clock.work("b", 10.0, 20.0) / 10.0 == pytest.approx(0.3, abs=0.008)


def test_while_it_settles_a_client_its_rests_speed_up_is_charged_the_likely_speed_at_least():
    # Its tails read fast while the card heats under the new load.
    for grants_launches, measured, settling in ((200, 1.05, UNKNOWN_SPEED), (200, 1.2, 1.2),
                                                 (210, 1.0, 1.0)):  # (the last: as Triton)
        meter = SpeedMeter()
        in_grant(meter, 1900.0, 0.0)
        meter.ran("a", 40.0, grants_launches, calibrating=False)
        for at in (1.0, 4.0):  # (the first tail is not kept)
            meter.calibrating("a", at)
            meter.ran("a", 40.0 * measured * (210 / grants_launches), 210, calibrating=True)
        assert meter.speed("a", 5.0) == pytest.approx(settling)
        assert meter.speed("a", SETTLE_S) == pytest.approx(measured)


def test_with_long_grants_a_settling_client_is_charged_their_lower_floor():
    """Grants of 120-240 ms run less fast than 40 ms ones (H100, 2026-12-07: 1.057-1.076 of
    their bare work per granted second, charged 1.079-1.099 under UNKNOWN_SPEED)."""
    for measured, floor in ((1.04, LONG_GRANTS_UNKNOWN_SPEED), (1.07, 1.07)):
        meter = SpeedMeter()
        in_grant(meter, 1900.0, 0.0)
        meter.ran("a", 40.0, 200, calibrating=False)
        for at in (1.0, 4.0):  # (the first tail is not kept)
            meter.calibrating("a", at)
            meter.ran("a", 40.0 * measured * (210 / 200), 210, calibrating=True)
        assert meter.speed("a", 5.0) == pytest.approx(UNKNOWN_SPEED)
        assert meter.speed("a", 5.0, long_grants=True) == pytest.approx(floor)
        assert meter.speed("a", SETTLE_S, long_grants=True) == pytest.approx(measured)


def test_a_cap_alone_in_lone_turns_does_its_cap_of_work_while_it_settles():
    # A card that speeds its grants up less (a peak clock of 1760 MHz): in its lone turns the
    # program did 1.04-1.05 of its bare work per granted second and was charged UNKNOWN_SPEED's
    # 1.1, 1.7 points under at 0.4 (0.383 here; on the H100, 2026-12-07, 1-2 points).
    sim = run_capped(GpuClock(peak_mhz=1760.0), 20.0, limit=0.4, launch_s=0.0002)
    assert sim.clock is not None
    assert sim.core.clients["capped"].turn_s > 0.0  # (in its lone turns)
    assert sim.clock.work("capped", 3.0, 19.0) / 16.0 == pytest.approx(0.4, abs=0.008)


def test_a_client_in_lone_turns_whose_speed_is_read_higher_stays_in_them():
    """Its grants there shrink as its speed is read higher, and a program that runs on says
    bursts as long as its tokens: 110 ms bursts after 110 ms grants, against its longest grant
    of 127, left its turns for good (H200, 2026-12-07: 0.5 beside 0.4 in shared turns, 166 ms
    grants to 146 at a speed of 1.14)."""
    sim = Sim([("capped", 0.1, 0.4)], timing=LAUNCHER, burst_ms=5000.0, clock=GpuClock(),
              launch_s=0.0002, token_bursts=True)
    sim.start("capped")
    sim.run_until(10.0)
    meter = sim.core.speed
    assert sim.core.clients["capped"].turn_s > 0 and meter.reads_by_work("capped")
    tail = max(meter._clocks["capped"].tail_costs) * 1.14  # (still agrees: RUN_SPREAD_MAX)
    for _ in range(TAILS_AVERAGED):  # (the mean of the latest: all of them slower)
        meter.calibrating("capped", 10.0)
        meter.ran("capped", 200 * tail, 200, calibrating=True)
    assert sim.core._speed("capped", 10.0) > 1.2
    sim.run_until(13.0)
    later = [e - s for s, e in sim.clients["capped"].busy if s > 10.3]
    assert len(later) >= 8 and min(later) > 0.1, later  # (0.4 of a 100 ms turn: 40 ms)
    assert sim.core.clients["capped"].turn_s > 0


@pytest.mark.parametrize(("before", "after"), [(0.3, 0.5), (0.35, 0.25)])
def test_a_cap_edited_alone_keeps_its_lone_turns_and_every_1_s_window(before, after):
    """(Lone turns are on by default.)  Its hook says bursts as long as its tokens.  Raised
    from 0.3 to 0.5, it was read by the clock until its next grant (duty_changed), took a 50 ms
    grant in 100 ms turns, said a 50 ms burst and never went back: 0.442 of its work over a
    second at worst.  Lowered from 0.35 to 0.25, its grants in turns shrank under 0.9 of its
    longest and it left them for good (LONG_BURST): 0.193.  Now 0.506 and 0.233."""
    sim = Sim([("c", before, before)], timing=LAUNCHER, burst_ms=5000.0, clock=GpuClock(),
              launch_s=0.0002, token_bursts=True)
    sim.start("c")
    sim.run_until(10.0)
    sim.configure(config(("c", after, after, 1 << 30)))
    sim.run_until(25.0)
    assert sim.clock is not None
    sim.clock.advance(25.0, sim.running)
    seconds = one_second_windows(sim, "c", range(10 * 20, 24 * 20))
    assert min(seconds) >= after - 0.02 and max(seconds) <= after + 0.035, seconds
    assert sim.core.clients["c"].turn_s > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_no_capped_client_is_calibrated_while_the_card_settles_to_changed_caps(seed):
    """b raised from 0.3 to 0.6 beside a at 0.3: the card idles less, and its power limiter
    swings the clock for seconds.  On the H100 a's calibration 1.0-1.4 s after the edit read
    15-23 % slow, its tails disagreed, and it was read by the clock out of shared turns: its
    1 s windows 0.207-0.217 of its work in 4 runs of 6 (2026-12-07).  The calibrations due
    then (here at 10.5 and 11.8 s) wait CAPS_SETTLE_S, and come just after it."""
    sim = shared_turns_edit((0.3, 0.6), seed)
    for name in ("a", "b"):
        c = sim.clients[name]
        starts = [c.busy[i][0] for i in c.calibrations]
        assert not [t for t in starts if 10.0 < t < 10.0 + CAPS_SETTLE_S], (name, starts)
        assert [t for t in starts if 10.0 + CAPS_SETTLE_S <= t < 10.0 + CAPS_SETTLE_S + 1.0]


def test_a_calibration_due_just_after_an_edit_is_a_whole_one():
    """An edit leaves a lone client in its turns (SpeedMeter.duty_changed), but its grants'
    cost under the new caps is unread until its next grant: a tail taken before then would be
    weighed against the costs of the caps before (until 2026-12-07 22:50 read by the clock,
    which needs a whole calibration: one fitted to its grant read its clock still boosted), so
    it is a whole one still."""
    sim = Sim([("c", 0.4, 0.4)], timing=LAUNCHER, burst_ms=5000.0, clock=GpuClock(),
              launch_s=0.0002)
    sim.start("c")
    sim.run_until(10.0)
    core = sim.core
    lone = core._lone_paced_grant_s(0.4, "c", sim.now)
    sim.configure(config(("c", 0.45, 0.45, 1 << 30)))
    assert core.speed.reads_by_work("c") and not core.speed.measured("c")
    core.speed._clocks["c"].calibrated_at = sim.now - 60.0  # (one is due now)
    core.caps_changed_at -= CAPS_SETTLE_S  # (and the card settled: none comes sooner)
    cal = core._due_calibration("c", ["c"], sim.now)
    assert cal is not None and cal.length_s > 1.2 * lone, (cal, lone)


def test_the_first_grant_into_lone_turns_is_as_long_as_the_ones_after_it():
    # (a review)  Sized before its turn was set, at the floor of 100 ms turns: 121.2 ms, then
    # 127.0, and its pace came round early once each time it went into its turns.
    sim = run_capped(GpuClock(peak_mhz=1760.0), 6.0, limit=0.4, launch_s=0.0002)
    lone = [e - s for s, e in sim.clients["capped"].busy if e - s > 0.1]
    assert lone[0] == pytest.approx(statistics.median(lone), rel=0.005), lone[:4]


def test_until_a_tail_is_kept_the_first_tail_is_a_floor_never_a_ceiling():
    """A first tail reads fast on a cool card (a speed too low): what it says is the least the
    client is charged until a tail is kept, and it never lowers a charge (H200, 2026-12-01:
    torch eager's first tail 1.15 while it was charged UNKNOWN_SPEED's 1.1)."""
    def first_tail(cost_ratio: float, launches: int = 200) -> SpeedMeter:
        meter = SpeedMeter()
        in_grant(meter, 1900.0, 0.0)
        meter.ran("a", 40.0, launches, calibrating=False)  # 0.2 ms a launch
        meter.calibrating("a", 1.0)
        meter.ran("a", 40.0 * cost_ratio, launches, calibrating=True)
        return meter

    assert first_tail(1.15).speed("a", 2.0) == pytest.approx(1.15)  # UNKNOWN_SPEED: 1.1
    assert first_tail(1.15).speed("a", SETTLE_S - 0.1) == pytest.approx(1.15)
    assert first_tail(1.15).speed("a", SETTLE_S) == 1.0  # settled: the clock (here 1) says
    assert first_tail(1.0).speed("a", 2.0) == UNKNOWN_SPEED  # a fast tail lowers nothing
    assert first_tail(0.9).speed("a", 2.0) == UNKNOWN_SPEED
    assert first_tail(3.0).speed("a", 2.0) == FIRST_TAIL_MAX  # a slow kernel of its start
    short = first_tail(1.15, launches=MIN_RUN_LAUNCHES)
    short.ran("a", MIN_RUN_MS - 1, 100, calibrating=True)  # too little to say anything
    assert short.speed("a", 2.0) == pytest.approx(1.15)
    meter = first_tail(1.15)  # the hook starts to count graph launches: measured afresh
    meter.ran("a", 40.0, 58, calibrating=False, graphs=True)
    assert meter.speed("a", 2.0) == UNKNOWN_SPEED
    assert "the first, a floor: 230.0" in first_tail(1.15).describe("a")
    # Once a tail is kept it says the speed: a first tail that read a slow kernel of the
    # program's start weighs no more.
    for first, kept in ((1.25, 1.2), (3.0, 1.1)):
        meter = first_tail(first)
        meter.calibrating("a", 4.0)
        meter.ran("a", 40.0 * kept, 200, calibrating=True)
        assert meter.speed("a", 5.0) == pytest.approx(max(kept, UNKNOWN_SPEED))
        assert meter.speed("a", SETTLE_S) == pytest.approx(kept)


def test_a_fresh_capped_client_holds_its_cap_over_its_first_seconds():
    # Charged its time until its first calibration, 2 s in, a matmul loop at 0.4 did 0.47-0.48
    # of its bare work in its first second (H100, 2026-11-25; here 0.47).
    for launch_s in (0.0, 0.0002):  # by the clock, by work
        sim = run_capped(GpuClock(), 6.0, launch_s=launch_s)
        assert sim.clock is not None
        for start in range(0, 8):
            assert sim.clock.work("capped", start / 2, start / 2 + 1.0) <= 0.4 + 0.05, start


def test_by_work_a_capped_client_does_its_cap_though_the_clock_reads_late():
    # H100: NVML's SM clock follows the work rate 40-100 ms late, so a calibration's tail often
    # reads the cool clock of its start, and the client is charged too little.  Its hook's GPU
    # time per launch is the work itself.
    def work(sim: Sim, start: float, end: float) -> float:
        assert sim.clock is not None
        return sim.clock.work("capped", start, end) / (end - start)

    late = run_capped(GpuClock(read_lag_s=0.15), 20.0)
    assert work(late, 10.0, 20.0) > 0.425  # the clock alone
    sim = run_capped(GpuClock(read_lag_s=0.15), 20.0, launch_s=0.0002)
    for start in (2.0, 10.0):
        assert work(sim, start, start + 8.0) == pytest.approx(0.4, abs=0.012), start
    # ...and a program the clock does not slow keeps its time so too, once its speed is known.
    steady = run_capped(GpuClock(continuous_mhz=1980.0, read_lag_s=0.15), 20.0, launch_s=0.0002)
    assert steady.share("capped", UNKNOWN_SPEED_S, 20.0) == pytest.approx(0.4, abs=0.01)
    assert steady.share("capped", 0.0, UNKNOWN_SPEED_S) >= 0.4 / UNKNOWN_SPEED - 0.01


def test_the_speed_by_work_is_its_latest_tails_cost_over_the_grants_cost_per_launch():
    """The continuous cost: the mean of the latest TAILS_AVERAGED tails but the fastest.  (The
    slowest of the latest 8, a rule before, charged capped clients on the H100 0.9 points under
    their caps on average, 13 of 147 runs past 2 points; the newest where slower than the mean,
    the next, 0.61, 20 of 301: bench/tail_estimators.py.)"""
    meter = SpeedMeter()
    in_grant(meter, 1900.0)
    tail(meter, 1800.0)  # the clock says 1.05
    for _ in range(20):
        meter.ran("a", 40.0, 200, calibrating=False)  # 0.2 ms per launch
    assert meter.speed("a") == pytest.approx(speed(1900.0, 1800.0))  # no tail measured yet
    meter.calibrating("a", 0.0)
    meter.ran("a", 80.0, 400, calibrating=True)  # the first tail: not kept
    assert meter.speed("a") == pytest.approx(speed(1900.0, 1800.0))
    meter.calibrating("a", 3.0)
    meter.ran("a", 80.0, 320, calibrating=True)  # 0.25 ms
    assert meter.speed("a") == pytest.approx(1.25)
    meter.ran("a", 80.0, 360, calibrating=True)  # 0.222: read before the GPU slowed
    assert meter.speed("a") == pytest.approx((0.25 + 0.08 / 0.36) / 2 / 0.2)  # (two: the mean)
    meter.ran("a", 80.0, 320, calibrating=True)  # 0.25 again: the fastest of three is left out
    assert meter.speed("a") == pytest.approx(1.25)
    # Too little of a tail, or too few launches, say nothing.
    meter.ran("a", MIN_RUN_MS - 1, 100, calibrating=True)
    meter.ran("a", MIN_RUN_MS - 1, MIN_RUN_LAUNCHES - 1, calibrating=False)
    meter.ran("a", math.nan, 100, calibrating=False)
    meter.ran("a", 0.0, 100, calibrating=False)
    assert meter.speed("a") == pytest.approx(1.25)
    assert "by work: 200.0 us per launch in its grants" in meter.describe("a")
    meter.ran("a", 50.8, 200, calibrating=True)  # 0.254, the newest: one in the mean
    assert meter.speed("a") == pytest.approx(statistics.fmean([0.25, 0.25, 0.254]) / 0.2)
    for _ in range(TAILS_AVERAGED):  # (0.254 is then no longer among the latest four)
        meter.ran("a", 80.0, 320, calibrating=True)
    assert meter.speed("a") == pytest.approx(1.25)


def alike_pair(b_cost: float = 0.1956, b_graphs: bool = False, b_at: float = -20.0,
               b_tails: tuple[float, ...] = (20.4, 20.5, 20.7, 20.6)) -> SpeedMeter:
    """a and b capped, a's grants 189.5 us a launch and its tails 194.0-197.0 (ms per 100
    launches); b's grants `b_cost` ms, its tails `b_tails`, begun `b_at` s after a's (H100,
    torch eager at 0.4 + 0.5 in shared turns, 2026-12-07 11:26: a went after the idle part of
    each turn, b just after it; their bare run 200 us a launch)."""
    meter = SpeedMeter()
    for name, cost, tails, at, graphs in (
            ("a", 0.1895, (19.4, 19.5, 19.7, 19.6), 0.0, False),
            ("b", b_cost, b_tails, b_at, b_graphs)):
        for _ in range(RECENT_GRANTS):
            meter.ran(name, cost * 100, 100, calibrating=False, graphs=graphs)
        meter.calibrating(name, at)  # (the first: a floor only)
        meter.ran(name, tails[0] + 1.0, 100, calibrating=True, graphs=graphs)
        for k, run_ms in enumerate(tails, start=1):
            meter.calibrating(name, at + 3.0 * k)
            meter.ran(name, run_ms, 100, calibrating=True, graphs=graphs)
    return meter


def test_capped_clients_alike_in_shared_turns_read_their_continuous_cost_from_all_their_tails():
    meter = alike_pair()
    own_a = statistics.fmean([0.195, 0.196, 0.197]) / 0.1895  # (its fastest left out)
    own_b = statistics.fmean([0.205, 0.206, 0.207]) / 0.1956
    assert meter.speed("a") == pytest.approx(own_a)  # (no turn shared: each its own)
    assert meter.speed("b") == pytest.approx(own_b)
    pooled = statistics.fmean([0.195, 0.196, 0.197, 0.204, 0.205, 0.206, 0.207])  # (but 0.194)
    assert meter.speed("a", mates={"b"}) == pytest.approx(pooled / 0.1895)
    assert meter.speed("b", mates={"a"}) == pytest.approx(pooled / 0.1956)
    assert "read with" not in meter.describe("a")
    assert "read with b's 204.0, 205.0, 207.0, 206.0" in meter.describe("a", mates={"b"})


def test_alike_clients_read_together_are_charged_their_pooled_tails_whoever_calibrated_last():
    """Not the newest tail of all: b's always read slower than a's where its calibration falls
    in the turn, and whoever calibrated last would set both clients' cost.  Nor the newest's
    excess over its own client's mean (the rule until 2026-12-07 22:40): over 188 H100
    client-runs in shared turns it left them 0.56 points under their caps on average, 14 more
    than 2 under; without it 0.27 and 5 (bench/tail_estimators.py)."""
    meter = alike_pair()
    meter.calibrating("b", 40.0)  # (b's newest, 206.0, is under its own mean: nothing added)
    meter.ran("b", 20.6, 100, calibrating=True)
    pooled = statistics.fmean([0.195, 0.196, 0.197, 0.205, 0.206, 0.206, 0.207])
    assert meter.speed("a", mates={"b"}) == pytest.approx(pooled / 0.1895)
    assert "read with b's 205.0, 207.0, 206.0, 206.0;" in meter.describe("a", mates={"b"})
    meter.calibrating("a", 43.0)  # a's newest 1.0 us over its own mean: in the pool, no more
    meter.ran("a", 19.8, 100, calibrating=True)
    pooled = statistics.fmean([0.196, 0.197, 0.198, 0.205, 0.206, 0.206, 0.207])
    assert meter.speed("b", mates={"a"}) == pytest.approx(pooled / 0.1956)


def test_whether_a_client_is_read_by_work_is_its_own_tails_not_those_it_is_read_with():
    """TAIL_SPEED_MAX: a's own tails 1.333 times its grants, b's 1.344; pooled, a's cost
    passed 1.35 times its grants and a was charged by the clock, 1.0 (a review)."""
    meter = SpeedMeter()
    for name, cost, tail in (("a", 0.150, 0.200), ("b", 0.160, 0.215)):
        for _ in range(RECENT_GRANTS):
            meter.ran(name, cost * 100, 100, calibrating=False)
        for k in range(3):  # (the first: a floor only)
            meter.calibrating(name, 3.0 * k)
            meter.ran(name, tail * 100, 100, calibrating=True)
    assert meter.reads_by_work("a")
    pooled = statistics.fmean([0.200, 0.215, 0.215])  # (the fastest of a's and b's left out)
    assert meter.speed("a", mates={"b"}) == pytest.approx(pooled / 0.150)
    # ...and one whose own tails read 1.36 times its grants (they were of another program:
    # its grants cost 0.160 then) is read by the clock, whoever it shares its turns with:
    # pooled with b's, 1.28 by work.
    meter = SpeedMeter()
    for name, cost, tail in (("a", 0.160, 0.204), ("b", 0.155, 0.170)):
        for _ in range(RECENT_GRANTS):
            meter.ran(name, cost * 100, 100, calibrating=False)
        for k in range(3):
            meter.calibrating(name, 3.0 * k)
            meter.ran(name, tail * 100, 100, calibrating=True)
    for _ in range(RECENT_GRANTS):
        meter.ran("a", 15.0, 100, calibrating=False)
    assert not meter.reads_by_work("a")
    assert meter.speed("a", mates={"b"}) == pytest.approx(meter.speed("a"))


@pytest.mark.parametrize("apart", [
    {"b_cost": 0.1895 * ALIKE_COST_SPREAD * 1.01},  # (another program)
    {"b_graphs": True},  # (its hook counts graph launches)
    {"b_at": -ALIKE_TAILS_AGE_S - 10.0},  # (tails of another time)
    {"b_tails": (20.4, 24.6, 20.5, 24.7)}])  # (its own tails disagree: read by the clock)
def test_capped_clients_not_alike_read_their_own_tails_in_shared_turns(apart):
    meter = alike_pair(**apart)
    own_a = statistics.fmean([0.195, 0.196, 0.197]) / 0.1895
    assert meter.speed("a", mates={"b"}) == pytest.approx(own_a)
    assert "read with" not in meter.describe("a", mates={"b"})


def test_a_tail_far_slower_than_any_clock_could_make_it_is_not_kept():
    """One CUDA-graph tail read 1034 us a launch against 703 in the grants and 788 in the
    others (H200, 2026-12-02): kept as the slowest, it charged its client 1.47."""
    meter = SpeedMeter()
    for _ in range(RECENT_GRANTS):
        meter.ran("a", 70.3, 100, calibrating=False)  # 0.703 ms a launch
    for at, run_ms in ((0.0, 78.8), (3.0, 78.8), (6.0, 103.4), (9.0, 79.0)):
        meter.calibrating("a", at)  # (the first tail: a floor only)
        meter.ran("a", run_ms, 100, calibrating=True)
    assert meter.speed("a") == pytest.approx((0.788 + 0.790) / 2 / 0.703)
    assert "103" not in meter.describe("a")  # (not among its tails)


def test_a_lone_slow_tail_stops_counting_once_later_tails_read_faster():
    """H200, two clients capped at 0.4 and 0.5: one of a's tails read 216.9 us a launch, its
    next five 196.7-202.0 against 194-198 in its grants; kept as the slowest of its latest 8 it
    charged a 1.10-1.12, and a did 2.5 points under its cap over 10 s.  A newest tail that
    reads slowest counts, in the mean (tails that keep rising, a card still heating, are
    followed by the mean alone since 2026-12-07 22:40: on the H100 a slow newest tail was
    more often one that read slow: speed._tails_mean)."""
    meter = SpeedMeter()
    for _ in range(RECENT_GRANTS):
        meter.ran("a", 19.6, 100, calibrating=False)  # 196 us a launch
    tails = (19.83, 21.69, 19.71, 19.85, 20.20)  # (the first: a floor only)
    for at, run_ms in enumerate(tails):
        meter.calibrating("a", 3.0 * at)
        meter.ran("a", run_ms, 100, calibrating=True)
    assert meter.speed("a") == pytest.approx((0.1985 + 0.2020) / 2 / 0.196)  # (0.1971 fastest)
    # One later tail alone does not outvote it: the card may have cooled for a moment.
    heating = SpeedMeter()
    for _ in range(RECENT_GRANTS):
        heating.ran("a", 17.6, 100, calibrating=False)
    for at, run_ms in enumerate((18.9, 18.9, 19.0, 20.0, 19.0)):
        heating.calibrating("a", 3.0 * at)
        heating.ran("a", run_ms, 100, calibrating=True)
    assert heating.speed("a") == pytest.approx((0.190 + 0.200 + 0.190) / 3 / 0.176)


def test_a_cap_changed_by_an_edit_leaves_the_grants_costs_of_before_behind():
    """b capped at 0.3 beside a at 0.3 is raised to 0.6, and the card idles a tenth of the
    time, not 0.4: a's grants went from 176.5 to 198.6 us a launch, its tails 199-200, and it
    was charged 1.13 until its latest 16 grants were all after the edit (H200, 2026-12-02)."""
    core = SchedulerCore(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.3, 0.3, 1 << 30)), LAUNCHER,
                         0.0)
    meter = core.speed
    for name in ("a", "b"):
        for at in (0.0, 3.0, 6.0):  # (the first tail is a floor only)
            meter.calibrating(name, at)
            meter.ran(name, 19.95, 100, calibrating=True)  # 199.5 us a launch
        for _ in range(RECENT_GRANTS):
            meter.ran(name, 17.65, 100, calibrating=False)  # 176.5
        assert meter.speed(name) == pytest.approx(199.5 / 176.5)
    core.on_config(config(("a", 0.3, 0.3, 1 << 30), ("b", 0.6, 0.6, 1 << 30)), 10.0)
    for name in ("a", "b"):
        meter.ran(name, 19.86, 100, calibrating=False)  # 198.6: its grants after the edit
        assert meter.speed(name) == pytest.approx(199.5 / 198.6)


def test_a_few_long_launches_tell_the_speed_by_their_gpu_time():
    """11 ms matmuls run 2-3 to a 40 ms grant and to a calibration's tail: too few launches to
    count, they left the speed to the clock, which said 1.22 where the work ran 1.12 times
    faster (H200, 2026-12-02: the client capped at 0.4 did 0.375 of its bare work).  Enough of
    their GPU time counts as a run."""
    meter = SpeedMeter()
    in_grant(meter, 1845.0)
    tail(meter, 1453.0)
    assert meter.speed("a") == pytest.approx(speed(1845.0, 1453.0))  # by the clock
    for _ in range(5):
        meter.ran("a", 22.7, 2, calibrating=False)  # 11.35 ms a launch
        meter.ran("a", 11.4, 1, calibrating=False)
    for at in (0.0, 3.0, 6.0):  # (the first tail is a floor only)
        meter.calibrating("a", at)
        meter.ran("a", 25.4, 2, calibrating=True)  # 12.7 ms a launch
    assert meter.speed("a") == pytest.approx(12.7 / 11.4, rel=0.01)


@pytest.mark.parametrize(("apart", "by_work"), [(RUN_SPREAD_LEAVE * 1.02, False),
                                               (RUN_SPREAD_MAX * 1.02, True)],
                         ids=["a lighter mix", "the card drifted"])
def test_launches_too_unlike_to_tell_the_speed_leave_it_to_the_clock(apart, by_work):
    """Once its tails agreed, a tail further from them than RUN_SPREAD_LEAVE leaves its speed
    to the clock; one further than RUN_SPREAD_MAX only does not (a card's clock moves them
    that far within a run)."""
    meter = SpeedMeter()
    in_grant(meter, 1900.0)
    tail(meter, 1800.0)
    meter.ran("a", 40.0, 200, calibrating=False)
    meter.calibrating("a", 0.0)  # (the first tail is not kept)
    for at, launches in ((3.0, 320), (6.0, 320)):
        meter.calibrating("a", at)
        meter.ran("a", 80.0, launches, calibrating=True)
    assert meter.speed("a") == pytest.approx(1.25)  # alike: by work
    meter.calibrating("a", 9.0)
    meter.ran("a", 80.0, round(320 * apart), calibrating=True)
    assert meter.reads_by_work("a") is by_work
    if not by_work:
        assert meter.speed("a") == pytest.approx(speed(1900.0, 1800.0))
        assert "by the clock" in meter.describe("a")


def test_a_client_whose_tails_wander_with_the_card_stays_read_by_work():
    """H100, 2026-12-07 16:40: b, capped at 0.6 beside a at 0.3, its grants 191.7-196.1 us a
    launch, read tails of 190.4-203.9, then one of 219.3 (the card heating, its clock
    wandering).  Read by the clock then (1.152 apart), the pair left shared turns and b's 1 s
    windows fell 11-15 points.  Tails that part at once (two threads' launches, 172.7 then
    225.1) still leave it to the clock."""
    def client(tails: tuple[float, ...]) -> SpeedMeter:
        meter = SpeedMeter()
        for _ in range(RECENT_GRANTS):
            meter.ran("b", 19.61, 100, calibrating=False)
        meter.calibrating("b", 0.0)  # (the first: a floor only)
        meter.ran("b", 19.11, 100, calibrating=True)
        for k, run_ms in enumerate(tails, start=1):
            meter.calibrating("b", 3.0 * k)
            meter.ran("b", run_ms, 100, calibrating=True)
        return meter

    wandered = client((19.04, 19.12, 19.17, 20.39, 20.06, 19.81, 21.93))
    assert wandered.reads_by_work("b")
    # (the newest alone past RUN_SPREAD_MAX is read in the mean, as any newest is...)
    assert wandered.speed("b") == pytest.approx(statistics.fmean([20.06, 20.39, 21.93]) / 19.61)
    # (...and the next with it)
    heated = client((19.04, 19.12, 19.17, 20.39, 20.06, 19.81, 21.93, 22.10))
    assert heated.speed("b") == pytest.approx(statistics.fmean([20.06, 21.93, 22.10]) / 19.61)
    assert not client((17.27, 22.51)).reads_by_work("b")  # (parted at once)
    assert not client((19.04, 22.0)).reads_by_work("b")  # (1.155: never agreed)
    # (parted past RUN_SPREAD_LEAVE, they must agree within RUN_SPREAD_MAX again)
    assert not client((19.04, 19.12, 25.0, 22.0, 22.2)).reads_by_work("b")


def test_a_lone_slow_tail_of_one_client_does_not_charge_the_clients_read_with_it():
    """b's newest tail reads 1.18 times its others (a stall in it): b stays read by work
    (RUN_SPREAD_LEAVE), and neither it nor a, whose tails are read with it, is charged as if
    the card had heated that much (a review: both charged 1.16 until two faster tails of b's
    dropped it)."""
    meter = alike_pair(b_at=1.0, b_tails=(20.4, 20.5, 20.7, 24.0))
    assert meter.reads_by_work("b")
    pooled = statistics.fmean(sorted([19.4, 19.5, 19.7, 19.6, 20.4, 20.5, 20.7, 24.0])[1:])
    assert meter.speed("a", mates={"b"}) == pytest.approx(pooled / 100 / 0.1895)


def test_a_hook_that_starts_to_count_graph_launches_is_measured_afresh():
    """Costs per launch and per graph replay do not compare: once the hook counts replays
    (wire.RUN_GRAPHS) what it measured in launches is forgotten, tails and grants alike, and
    the speed is the replays' (the clock's until a tail of them is kept)."""
    meter = SpeedMeter()
    in_grant(meter, 1900.0)
    tail(meter, 1800.0)
    meter.ran("a", 40.0, 200, calibrating=False)  # 0.2 ms a launch
    meter.calibrating("a", 0.0)  # (the first tail is not kept)
    meter.calibrating("a", 3.0)
    meter.ran("a", 40.0, 190, calibrating=True)  # 0.21 ms a launch
    assert meter.speed("a") == pytest.approx(200 / 190)
    meter.ran("a", 40.0, 58, calibrating=False, graphs=True)  # 0.69 ms a replay
    assert meter.speed("a") == pytest.approx(speed(1900.0, 1800.0))  # (no replay tail yet)
    meter.calibrating("a", 6.0)
    meter.ran("a", 40.0, 54, calibrating=True, graphs=True)  # 0.74 ms a replay
    assert meter.speed("a") == pytest.approx(0.74 / 0.69, abs=0.01)
    assert "689.7 us per graph launch in its grants" in meter.describe("a")


def test_a_program_the_clock_does_not_slow_keeps_its_time():
    # Memory-bound or light: the clock stays high whether it runs continuously or not.  (Charged
    # UNKNOWN_SPEED at first: no tail by work comes here.)
    sim = run_capped(GpuClock(continuous_mhz=1980.0), 20.0)
    assert sim.share("capped", UNKNOWN_SPEED_S, 20.0) == pytest.approx(0.4, abs=0.01)


def test_a_program_its_launches_pace_keeps_its_time_on_a_power_limited_gpu():
    # Its kernels run faster in its cool grants, but it waits on its host, not on them.
    launch_bound = run_capped(GpuClock(), 20.0, gpu_wait=0.0)
    assert launch_bound.share("capped", 2.0, 20.0) == pytest.approx(0.4, abs=0.01)
    gpu_bound = run_capped(GpuClock(), 20.0, gpu_wait=0.45)
    assert gpu_bound.share("capped", 2.0, 20.0) < 0.37


def test_the_status_shows_the_speed_charged():
    sim = run_capped(GpuClock(), 5.0)
    [c] = sim.core.snapshot(sim.now)["clients"]
    assert c["speed"] > 1.1
    assert c["speed_charge_s"] > 0.05
    assert c["gpu_wait"] is None  # (the simulated hook does not say)
    sim = run_capped(GpuClock(), 5.0, gpu_wait=0.3)
    [c] = sim.core.snapshot(sim.now)["clients"]
    assert c["gpu_wait"] == pytest.approx(0.3, abs=0.05)


def test_the_clock_is_wanted_only_while_a_client_has_a_cap():
    core = SchedulerCore(config(("a", 0.1, 1.0, 1 << 30)), LAUNCHER, 0.0)
    assert not core.wants_clock()
    core.on_config(config(("a", 0.1, 1.0, 1 << 30), ("b", 0.1, 0.4, 1 << 30)), 1.0)
    assert core.wants_clock()
    router = PartitionRouter(cfg.parse_text("2\na 1 1 1GiB sm=50@p\nb 0.5 0.5 1GiB\n"),
                             LAUNCHER, 0.0)
    assert router.wants_clock()


def test_the_sampler_reads_as_the_core_wants_it():
    class Sampler:
        def __init__(self) -> None:
            self.wanted: list[bool] = []

        def want(self, wanted: bool) -> None:
            self.wanted.append(wanted)

        def drain(self) -> list[tuple[float, float]]:
            return []

    class Core:
        def __init__(self, capped: bool, stop: asyncio.Event) -> None:
            self.capped, self.stop = capped, stop

        def wants_clock(self) -> bool:
            return self.capped

        def on_clock(self, samples: list[tuple[float, float]], now: float) -> list[object]:
            self.stop.set()  # one round
            return []

    polls: list[bool] = []

    def feed_server(who: str, what: str, event, poll: bool = True) -> bool:  # type: ignore[no-untyped-def]
        polls.append(poll)
        return bool(event())

    async def feed(capped: bool) -> list[bool]:
        sampler, stop = Sampler(), asyncio.Event()
        await feed_clock(sampler, Core(capped, stop), feed_server, lambda: 0.0, stop)
        return sampler.wanted

    assert asyncio.run(feed(False)) == [False]
    assert asyncio.run(feed(True)) == [True]
    # No client's message comes sooner for the clock's samples: with GEMINI_BUSY_POLL_MS, an
    # idle scheduler polled on for them, every 50 ms, at 40 % of a core.
    assert polls == [False, False]


def test_a_lone_capped_clients_calibration_fits_its_windows_by_what_it_is_charged():
    # Its room counted a calibration's time, while its settling part is charged its speed:
    # the 1 s windows that held one held 13 ms more than they allow at a 0.4 cap by the
    # books, and read highest by work (H200, 2026-12-03: 0.445 of its bare work).
    sim = run_capped(GpuClock(), 12.0, launch_s=0.0002)
    core, c = sim.core, sim.clients["capped"]
    allowed = 0.4 * 1.0 + WINDOW_EDGE * 0.04  # (its paced grant: 40 ms)
    ends = [c.busy[i][1] for i in c.calibrations if c.busy[i][1] > 3.0]  # (kept: the last 10 s)
    assert len(ends) >= 2, ends
    for end in ends:
        used = core.history.usage(end - 1.0, end)["capped"]
        assert used <= allowed + 1e-3, (end, used)


def test_a_capped_client_whose_program_launches_cheaper_kernels_is_not_charged_double():
    """A new job under the same pod manager: its grants' cost per launch fell 4x, its tails still
    the old program's, and the ratio (no clock explains more than TAIL_SPEED_MAX) was charged at
    SPEED_RANGE's 2: 0.19-0.23 of its work at a 0.4 cap, until its next calibration."""
    sim = Sim([("a", 0.1, 0.4)], timing=Timing(0.3, 0.02, 10.0), burst_ms=40.0, clock=GpuClock(),
              gpu_wait=0.8, launch_s=0.0002, seed=1)
    sim.start("a")
    sim.run_until(20.0)
    sim.launch_s = 0.00005
    sim.run_until(28.0)
    assert sim.clock is not None
    for t in range(21, 28):
        assert sim.clock.work("a", t - 1.0, t) >= 0.33, t
