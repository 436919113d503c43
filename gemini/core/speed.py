"""How much faster the GPU runs a capped client's grants than it runs the client continuously,
from the GPU's SM clock (issue 12: caps by work).  Pure: samples come in with their times.

Why: a GPU's clock is set by its power limit from what it ran in the last ~100 ms.  A
power-hungry program (matmuls) that runs continuously holds the clock down (1400-1550 MHz on an
H100); paced at 0.4 (40 ms on, 60 ms idle) each grant starts on a cool card at up to 1980 MHz,
and the program does 1.15x its continuous work per second of GPU time (H100, no gemini:
bench/results/…-211739-duty-cycle-synced.json).  A cap in time then gives 0.46 of the bare work.

So each capped client the GPU paces is calibrated (HOST_PACED: not one its host paces): now and
then one of its grants is long (`CALIBRATION_S`, or what its cap's windows leave room for:
`capped_calibration`; a cap too small for one is charged `UNCALIBRATED_SPEED`), and the clock
in that grant's last `TAIL_S`, when the limiter has caught up, is the clock the client runs at
continuously.  The clock in its ordinary grants over that is its speed: the scheduler charges
each second it grants as `speed` seconds (gemini.core.scheduler).  A program the clock does
not slow (memory-bound, launch-bound, or light) reads the same clock in both and is charged its
time.  The clock stands for the work, in part (below; the probe:
bench/results/…-212420-clock-probe.json).

A calibration can read high, never low: if the program leaves the GPU idle in part of it, or
the limiter has not caught up (its power average still holds the cool seconds before), the
clock stays up (H100: tails of 1840-1965 MHz beside 1540-1560 for the same programs).  So the
continuous clock is the lowest of the latest few tails, and a speed below 1 (a tail above the
grants' clock) is read as 1: a cap never gives more than its time.  And a client is
calibrated again early when its grants' clock moves (the program's load, or the card's heat,
changed since) while its speed reads 1 by the clock (by work: where its grants' cost per
launch moved, SHARED_DRIFT): early in a run the tails follow the grants' clock down (H100:
1965, 1868, 1809 MHz beside 1933, 1871, 1806 in the grants, 2 s apart) before they part (1647
beside 1868, 8 s in); once a speed is known, every `CALIBRATE_EVERY_S` is enough (the grants'
clock wanders by 3-4 % between grants).

By work, where the hook measures it (wire: the QUOTA request's run words).  NVML's SM clock
follows the GPU 40-120 ms late and in steps (H100, bench/results/…-0645-clock-lag.json: the
work rate settles 60-80 ms into a continuous phase, while the clock read in its last 80 ms
still said 1920 MHz in some phases, 1410 run continuously), so a calibration's tail wandered
1530-1965 MHz for one program, and its speed 1.05-1.18 from one calibration to the next.  The
hook times its own launches: the GPU time per launch of the queue segments it saw run back to
back in each token (in a calibration, flagged as one, those that ran in its last 40 ms;
wire.quota_run).  A capped client's speed is that cost in its calibration tails (the mean
of the latest TAILS_AVERAGED but the fastest: a tail reads fast more often than slow, and
one that reads slow by far had something else run slow in it: LONE_SLOW_TAIL) over its
ordinary grants' (the median of its latest RECENT_GRANTS): 1.13-1.16 on the H100 for matmul
loops, steady, 1.00 for Triton (2026-11-25 07:28-07:38).  Where its tails' costs disagree (a
program whose launches differ: RUN_SPREAD_MAX, or RUN_SPREAD_LEAVE once they agreed) or none
was measured yet, the clock below tells the speed.  Early tails read fast (a cold
card, one still heating under the new load), so the first calibration's is not kept (only
a floor until one is kept: FIRST_TAIL_MAX), and a fresh client is charged
UNKNOWN_SPEED at least until a tail is kept, and while it settles if its rests speed it up
at all (H100, 2026-11-25 08:25-09:09: the highest 1 s window of a 0.4
cap from 0.442-0.469 to 0.428-0.450; bench/JOURNAL-issue12.md); in the scheduler's lone or
shared turns, whose grants are longer, LONG_GRANTS_UNKNOWN_SPEED.

The work does not follow the clock in full (memory and launch time do not scale with it):
speed = clock ratio ** `WORK_PER_CLOCK`.  Measured on the H100 (60 s at a 0.4 cap, 2026-11-24),
work per granted second ÷ bare against the clock ratio to the tails: 1.11-1.15 against
1.15-1.19 for torch eager, CUDA graphs and JAX, and in the probe above 1.10-1.12 against
1.15-1.18.  At 1.0 the caps delivered 0.381-0.401 of the bare work (22:04), at 0.7
0.414-0.432 (22:34): 0.85 sits between.  The run-to-run spread of the tails (±3 %) is as
large as that choice.

And only as far as the GPU sets the program's pace: a program bound by its launching thread
(torch.compile without CUDA graphs, a loop of tiny kernels) leaves longer gaps when its
kernels run faster, and does no more work.  On the H100 torch.compile read speed 1.03-1.10
and did 0.96-0.98 of its bare work per granted second: 0.338-0.357 of bare at a 0.4 cap,
0.384 without the clock (2026-11-24).  The hook says how long its launching threads waited
on the GPU since its last request (held for a full queue, or in a sync: the QUOTA request's
gpu_wait_ms).  Capped at 0.4 on the H100, torch eager, CUDA graphs and CuPy waited 69-91 % of
their grants, JAX 32-44 %, torch.compile with CUDA graphs 17-39 %, torch.compile 1-5 %, the
launch-bound loop none (2026-11-24).  The clock's speed-up is charged in proportion to that
share, in full from `GPU_BOUND` up; where the hook does not say (a v1 hook), in full.

Uncapped clients that share the GPU are weighed by work too (`shared=True`): the power limiter
sets one clock for all of them, which is not the clock each runs at alone.  On the H100 a
Triton kernel runs alone at 1980 MHz and a JAX matmul at 1440; side by side at 1515-1680, and
Triton did 0.79-0.82 of its bare work per granted second, JAX 1.05-1.14: a 0.3/0.7 pair shared
by time was 5-6 points off by work (2026-11-25, 2026-11-26).  With gem-schd --shared-speed
(on by default since 2026-12-06; its lumps cost the clients of different programs 5-8 points
of their 1 s windows, README), such a client is calibrated while others want the GPU (its
tail runs alone: three times at first, SHARED_SECOND_S apart, once the card is steady,
SHARED_STEADY_S, each paid half ahead, SHARED_PREPAY), where at most SHARED_CALIBRATED_MAX
uncapped clients share it, their grants' costs per launch tell their programs apart
(ALIKE_COST_SPREAD) and its pod manager serves one process, and its speed is its tails' cost
per launch over its shared grants', below 1 too (SHARED_RANGE).  Its tails can read on either
side: the clock climbs or falls from the pair's to its own, so the median of the latest is
taken, not the slowest.  Alone, an uncapped client's speed is nobody's business.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection
from dataclasses import dataclass, field

CALIBRATION_S = 0.2  # a calibration grant: the clock settles in ~100 ms of continuous work
TAIL_S = 0.08  # its last part, read as the client's continuous clock
CALIBRATION_SETTLE_S = 0.1  # its first part runs as fast as an ordinary grant (scheduler)
# A capped client's calibration is at most this part of what its short window allows it (a
# 0.4 cap: 0.43 s of a 1 s window, so 200 ms), and none shorter than MIN_CALIBRATION_S comes:
# its tail would still read fast.  Below (caps under ~0.19 with the launcher's quotas), it is
# charged UNCALIBRATED_SPEED (capped_calibration, SpeedMeter.speed).
CALIBRATION_ALLOWANCE = 0.5
MIN_CALIBRATION_S = 0.1
# No longer than its 1 s windows can pay back within this of its cap both ways (a cap is its
# client's guarantee too: a second far under it is as wrong as one over).  A lump of L at a
# cap r puts L (1 - r) more in the windows that hold it; what pays it back falls in the
# windows either side, and no split keeps both within B unless L (1 - r + B) <= 2 B.  Bounded
# by the 5 points judged, the lumps left no room for the scheduler's own slack; so a point
# under: 108 ms at 0.3, 125 at 0.4, the whole CALIBRATION_S from 0.64 up, none under 0.24
# beside others (MIN_CALIBRATION_S: charged UNCALIBRATED_SPEED; alone, one of that length;
# alone with its speed not read by work, not bounded: the scheduler's _calibration says why).
# H200, 2026-12-02, torch eager: two clients capped at 0.3, worst 1 s 6.6-8.9 points under
# with 150-155 ms calibrations, 5.5-6.5 with 133 ms ones (B = 0.05), 3.5 and 2.8 with 108 ms
# ones; three at 0.2, 0.3 and 0.3 6.7 / 9.4 / 4.5 -> 2.2 / 4.3 / 6.6, every 10 s window but
# one (2.1) within 2 points either way.  Alone at 0.4 (2026-12-03), 200 ms calibrations left
# a hole of 300 ms before each and 240 after: torch eager, CuPy and CUDA graphs 7.1-12.0
# points under in their worst second; with 125 ms ones 3.6-5.1, and highs of 0.442-0.450
# against 0.436-0.446, but 0.406-0.409 over 20 s against 0.397-0.399 (their short tails read
# the clock a little less settled: speed 1.13-1.14 charged for 1.16 of work).
LUMP_BOUND = 0.04
# A neighbour capped at r waits through the lump, and it can only make the r L it missed up
# after it, in the next 1 s window where the lump falls late in one: so no longer than
# LUMP_BOUND / r for the largest such r, but never shorter than MIN_CALIBRATION_S (none at all
# would charge the client UNCALIBRATED_SPEED, off for its 10 s windows).  H200, 2026-12-04, a
# capped at 0.3 beside b raised to 0.6: b's 180 ms calibrations left a 0.254 of its bare work
# in the second that held one (b 0.636 in it, 0.544 the next).  On the simulator (12 seeds) the
# worst 1 s window of that pair 6.1 points off on average (3.9-11.1) -> 5.0 (3.7-6.0), and of
# two capped at 0.4 and 0.5 4.9 (3.7-7.5) -> 4.0 (3.1-5.3) (b's calibrations 182 -> 133 ms;
# at 0.4 and 0.5 125 and 148 -> 100 ms, the length of two at 0.3 already: 108 ms).
# What a capped client too small to calibrate is charged (as far as the GPU sets its pace):
# the middle of the speeds seen paced (1.0 for Triton, up to ~1.3 for a matmul loop on a cool
# card), so that either is off by under a seventh of its cap (1.4 points at 0.1).
UNCALIBRATED_SPEED = 1.15
CALIBRATE_EVERY_S = 10.0  # the continuous clock drifts with the card's temperature
# The first calibration waits this long after the client's first reading.  Its tail is not
# kept: at first the card is cold and the program still starting (H100, 2026-11-25: 1980 MHz
# read "continuously"; by work, CuPy's first tail 2 s in read 180.8 us per launch, its next ones
# 194-211, JAX's 0.5 s in 178, then 192-200).
FIRST_CALIBRATION_S = 1.0
# Until a tail is kept, a client's speed is at least this: charged its time, a fresh matmul
# loop at 0.4 did 0.47-0.49 of its bare work over its first second (H100, 2026-11-25, CuPy,
# JAX).  On an H100 a program's own speed is 1-1.16 (Triton 1.00, matmul loops 1.13-1.16): one
# at 1 does 0.36 of its bare work for those four seconds, one at 1.16 0.42.
UNKNOWN_SPEED = 1.1
# ...for at most this long after its first reading (no calibration comes to a client that
# always has an uncapped neighbour, whose work keeps the card at its continuous clock; no tail
# by work to a program its hook cannot time).
UNKNOWN_SPEED_S = 5.0
# The first calibration's tail is not kept, but until a tail is kept it is a floor on the
# charge: on a cool card a tail reads fast (a speed too low), so a first tail that reads its
# program faster in its grants than UNKNOWN_SPEED says is so, near enough.  H200, 2026-12-01:
# torch eager's first tail read 199.3 us a launch against 173 in its grants (1.15; its later
# tails 198-204), while it was charged UNKNOWN_SPEED for 5 s and did 1.17-1.19 of its bare
# work per granted second (its highest second 0.455).  No higher than FIRST_TAIL_MAX, and
# only until the next tail is kept (3 s later): a first tail can read slow too (CuPy's 212.1
# against its kept 207.1-207.3; a program still starting may run a slow kernel in it).
FIRST_TAIL_MAX = 1.3
# And while it settles (SETTLE_S), a client whose rests speed it up at all (by more than this)
# is charged UNKNOWN_SPEED at least: its tails then read fast, as the card is still heating
# under the new load (H100, 2026-11-25, torch eager's second and third tails 189 and 190 us
# per launch, 200 from the fourth on: speed 1.07 for 6 s, windows of 0.453-0.458; JAX 194,
# then 200-202; its work per granted second over the run 1.12-1.14).
SPED_UP = 1.03
# ...in proportion to the GPU's share left idle around its grants, below this: two clients
# capped at 0.4 and 0.5 (the card idle a tenth of the time) read 1.01-1.06 in their tails and
# did 1.04-1.06 of their bare work per granted second uncalibrated, but were charged 1.1 for
# 20 s, 2.1 points under over 10 s (H200, 2026-12-02); alone at 0.8 (idle 0.2) torch eager
# and CUDA graphs did 1.09-1.10 (2026-12-03), at 0.7 1.115, at 0.4 or 0.3 beside 0.3 (idle
# 0.6, 0.4) 1.13-1.17.  (A CUDA-graph loop capped at 0.8, charged half of it, 1.05, for its
# first 9 s, while no tail by work was kept, did 0.879 of its bare work in its highest second.)
IDLE_FOR_UNKNOWN = 0.2
# In lone or shared turns (the scheduler's: a grant of 120-240 ms of work each 1/7 s to 1 s)
# a program runs less fast in its grants than in 40 ms ones, so that floor is this one: H100,
# 2026-12-07, torch eager, CUDA graphs and JAX alone at 0.2, 0.4 and 0.7 did 1.057-1.076 of
# their bare work per granted second over their first 20 s (1.134-1.138 in 100 ms turns), and
# were charged 1.079-1.099, 1-2 points under; their tails read 1.036-1.076 meanwhile.  With
# this floor, at 0.4 torch eager and CUDA graphs did 0.400 and 0.403 of their bare work over
# 15 s, charged 1.070 and 1.056 for 1.069 and 1.067 (0.389 and 0.390 with 1.1, side by side:
# bench/results/…-20261207-033546-…-floor-new-cap-0.4).  At 0.7 the tails read over it.
LONG_GRANTS_UNKNOWN_SPEED = 1.05
# ...and for its first SETTLE_S it is calibrated every SETTLING_EVERY_S: meanwhile its program
# warms up (other kernels) and the card heats under the new load, and the tails fall.  H100, a
# CUDA-graph loop: 1881, 1900, 1735 MHz in its first 8 s, 1545 from 18 s on; until then it was
# charged near its time and did 0.44-0.46 of its bare work (2026-11-24).
SETTLE_S = 20.0
SETTLING_EVERY_S = 3.0
MIN_TAIL_READINGS = 20  # fewer: the grant was cut short, or the GPU idled in it
RECENT_TAILS = 3  # the continuous clock is the lowest of this many latest tails
# While its speed reads 1 by the clock, calibrate again (no sooner than SETTLING_EVERY_S after
# the last) once the grants' clock has moved this much from what it was at the last calibration.
DRIFT = 0.03
WORK_PER_CLOCK = 0.85  # work ∝ clock ** this
# A cap edit that makes the card busier scales each capped client's speed-up, read from its
# grants' costs before the edit until its next grant is measured (duty_changed), by the square
# root of the idle share the card keeps, sqrt((1 - busy after) / (1 - busy before)): a
# power-limited card runs its clock lower as it idles less.  On the H100 (the 12-06/07 logs,
# bench/edit_speeds.py's "code", the busy shares as the scheduler reads them) the 49 raised
# clients' grants ran 0.016 slower in their first 1.5 s than before the edit (rms 0.021) and
# 0.004 faster than the scaled speed (0.012); their 53 neighbours 0.010 slower (0.026), and
# 0.011 faster (0.024).
# Not where the card idles more: its speed takes its time to rise, and the costs kept read the
# 13 lowered clients as well as the scaled speed would (0.026), their 16 neighbours better
# (0.034 against 0.041).  Nor from a card this busy, whose clock the caps hardly set (no raise
# on record began past 0.79 busy, no edit at all past 0.95: a guard, not a measured bound).
EDIT_BUSIER_FROM = 0.95
# Each reading's weight in the ordinary grants' running mean: it forgets over ~10 grants (at a
# reading every 2 ms).
GRANT_WEIGHT = 0.01
# From this share of its grants spent waiting on the GPU a program is taken to be bound by it.
GPU_BOUND = 0.2
# Below this share its host paces it: its speed-up counts for at most a quarter (speed()), and
# it is not calibrated, as a 200 ms grant would only put a lump in its seconds.  H100, capped
# at 0.4 (2026-11-25): the launch-bound loop (waits on the GPU in none of its grants) and
# torch.compile (1-5 %) did 0.455 and 0.486 of their bare work in their highest 1 s windows,
# each holding a calibration and granted 0.428-0.429 of the time.  Once its share rises (its
# program now waits on the GPU) it is calibrated again.
HOST_PACED = GPU_BOUND / 4
WAIT_WEIGHT = 0.2  # each grant's weight in the running mean of that share
SPEED_RANGE = (1.0, 2.0)  # below 1 is a tail read high; a bad reading must not stop a client
SHARED_RANGE = (0.5, 2.0)  # beside others a program may well run slower than alone
# An uncapped client's calibration beside others: shorter, as the others wait through it and a
# lump of L seconds in a 1 s window of a share r leaves some window L (1 - r) / 2 off (a 200 ms
# one: 7 points at 0.3).  The clock moves from the pair's to its own, not from idle, and the
# hook measures its last 40 ms (wire.RUN_MEASURE_MS), after SHARED_SETTLE_S.
SHARED_CALIBRATION_S = 0.12
SHARED_SETTLE_S = 0.08
# ...and only SHARED_FIRST_TAILS times at first (SHARED_SECOND_S apart: tails to take the
# median of), then again once its shared grants' cost per launch has moved this much since the
# latest (its program or its neighbours changed), or after SHARED_EVERY_S.  Each is a lump in
# the seconds around it (simulator, a trio calibrated every 10 s: worst 1 s window 2.6 -> 5.7
# points), and same programs side by side read a speed of 1 and would only pay for them.  A
# calibration whose tail was not kept (its client idle in it) counts for none, up to
# SHARED_FIRST_TRIES.
# Three, 2.4 s apart: for its first seconds busy the H100's power limiter swings the clock
# with a period of about 1 s (2026-12-06, alike pairs and trios by work: grants 6-14 % slower
# a launch 0.8-1.1, 1.8-2.1 and 2.8-3.0 s into a busy stretch, flat between).  Two trains of
# calibrations 1.0 s apart put each client's tails at the same phase both times: the third of
# a CUDA-graph trio's train in the 1.8 s dip and a second later in the next, read 7 % and
# 17 % slow, charged 1.07-1.12 for 1.00 of work (2.6 points under over 10 s, and the client
# first in line, with one tail read on a flat stretch, 2.6 over).  Three trains 1.4 s apart
# put each client's tails at three phases of the swing, and the median left out the one in a
# dip: every 10 s window of those pairs and trios within 2.1 points (10:44-10:49); but a 1 s
# window then held the pay-back of one train and the lump of the next, 7.8-9.7 points off
# where one train alone made 5.7-8.1.  2.4 s apart, the same phases, and a train's 1 s windows
# hold no other.
SHARED_FIRST_TAILS = 3
SHARED_SECOND_S = 2.4
SHARED_FIRST_TRIES = 5
SHARED_DRIFT = 0.1
SHARED_EVERY_S = 60.0
# Uncapped clients beside others are calibrated (the scheduler's Timing.shared_speed) only
# where at most this many want the GPU.  Each calibration is a lump the others wait through,
# one a client, while each one's share, what its 1 s windows can take in, shrinks: on the
# simulator alike clients at equal shares read 5.4 / 8.9 / 7.8 points off over a 1 s window
# by work, four, eight and sixteen of them, against 2.8 / 1.6 / 4.3 by time (a pair or trio of
# different programs, where work pays: 4.7-6.0 points off over 10 s by time, 1.3-1.6 by
# work).  More share by time, as all did before 2026-12-06.
SHARED_CALIBRATED_MAX = 3
# ...and none where their grants cost the same per launch, within this (each the median of its
# latest RECENT_GRANTS), all counted in graph launches or all not: one program side by side,
# most likely, and the limiter's clock for them is the clock each runs at alone, so their
# speeds are all 1 and by time is by work.  Their calibrations only cost them: a lump of L at a
# share r leaves some 1 s window L (1 - r) / 2 off at best (4.2 points at 0.3), and on the H100
# alike pairs and trios by work read 5.6-9.2 points off over their worst 1 s windows, each at a
# calibration, against 3.4 at most by time (2026-12-06).  There, twins' medians read at most
# 4.4 % apart (torch eager 194-203 us a launch, CUDA graphs 776-817 a graph launch, JAX alike),
# and 6.4 % where calibrations' lumps swung the clock (a torch eager trio at 11:01); Triton
# beside JAX 591-717 against 177-187, 3.5-3.9 times.  Programs of different kinds whose
# launches happen to cost the same within this are taken for one and share by time, which for
# Triton beside JAX would be 5-6 points off over 10 s (above).  torch eager's and JAX's matmul
# loops, 200 and 177-187 us a launch, sit about at it.
ALIKE_COST_SPREAD = 1.08
# ...and once taken for one, the same clients are told apart only past this: at the edge, a
# pair on the simulator went from by time to by work and back 32 times in 30 s (a review).
ALIKE_LEAVE_SPREAD = 1.12
# A client whose hook measured fewer of its grants than this is not told apart from the others
# yet (its first launches may be its program's set-up): the others are compared among
# themselves, and two or more such newcomers with one other at most are alike so far.  One
# measured in none says nothing.
ALIKE_MIN_GRANTS = 8
# A calibration beside others waits until the card is steady: the GPU busy, grant after grant
# with no gap of IDLE_GAP_S, for SHARED_STEADY_S (or it comes anyway once it has waited
# SHARED_STEADY_WAIT_S beside others for that).  After an idle the power limiter dips the
# clock: on the H100 (2026-12-06, alike trios and pairs by work) shared grants ran 15-25 %
# slower a launch 1.05-1.12 s after the card went from idle to busy, and 40-220 ms after an
# idle of 250-290 ms.  The lumps that began 1.10-1.15 s into a busy stretch, or 18-66 ms, read
# their program 3-11 % slower than their neighbours' did later in the same train of
# calibrations (6 of 12 trains; lumps that began 0.27 s or 1.18-3.0 s in did not): a 0.5
# client so read was charged 1.08-1.09 and did 0.475-0.478 of its bare work over its worst
# 10 s window.
IDLE_GAP_S = 0.05
SHARED_STEADY_S = 1.5
SHARED_STEADY_WAIT_S = 5.0
# A calibration beside others is paid this much of its excess ahead.  A lump of L at a share r
# puts L (1 - r) more in the 1 s windows that hold it, and paid back after it all falls in the
# next (6-11 points on the H100, 2026-12-06).  So when one falls due, its client is charged
# SHARED_PREPAY L (1 - r) at once (its neighbours are served that much before the lump, which
# comes at its next turn) and given it back with the lump.  On the simulator
# (`bench/sim_seconds.py --shared`, seeds 1-4, every client's worst 1 s window from 1 s,
# bench/results/devbox-20261206-1118-sim-shared-*.json) pairs 6.8-10.4 points -> 4.3-6.7,
# trios 5.0-10.3 -> 4.5-7.7 (two calibrations unpaid, at 84ce9f3: 4.7-9.5, 4.6-9.1), the 10 s
# windows as before; 0.8 of it did better for alike pairs and worse for trios (a scratch run).
# (Clients that start together fall due in one decision, and are charged ahead together: that
# part of the shift cancels.)
SHARED_PREPAY = 0.5
# Its grants' cost per launch is the median of this many latest grants': a grant that ran slow
# for reasons of its own does not move it.  On the H100 a torch eager loop's grants read
# 196-217 us a launch (p10-p90; median 200) beside its twin, and a mean over ~10 of them
# wandered 201-215 against tails of 195-205 (speeds 0.91-0.99 for the same program; 5
# calibrations in 11 s on drift of 5 %).  Capped at 0.4, JAX's grants read a median of
# 175-179 us in every 5 s, but 21 of 523 read 200-234, some over three times the launches of
# the others: a mean over launches fading by 0.9 a grant read 185-190 for 20 s, and its speed
# fell from 1.10 to 1.02 while its work did not change (its highest second 0.475; 2026-11-26
# 17:36).
RECENT_GRANTS = 16
# ...and as many grants in a row that its hook measured nothing of make it unmeasured again
# (its grants' costs forgotten): a program that went from a few streams to many (the hook then
# says nothing: more lanes than it reads a union of) kept the costs of its first grants, and
# was calibrated short, as if its tails were read by work, while the clock read them.
# By work (the hook's GPU time per launch, see the docstring): a grant's run counts from this
# many launches measured, or this much GPU time; a calibration's from this much of its tail
# measured.  By launches alone, 11 ms matmuls (2-3 to a 40 ms grant, and to a tail) were never
# measured, and a client capped at 0.4 was charged by the clock, 1.22, where its work ran 1.12
# times faster: it did 0.375 of its bare work (H200, 2026-12-02 04:34; its tails read 12.7 ms a
# launch against 11.4 in its grants).
MIN_RUN_LAUNCHES = 8
MIN_RUN_MS = 10.0
# The continuous cost is read from this many latest tails (more than the clock's: on an
# H100 most tails read fast, 190-201 us per launch for JAX and torch eager, 757-823 for CUDA
# graphs, against 207 and 822 run bare: the limiter settles more slowly after the rest before
# a calibration than in a probe's 60 ms; 2026-11-25 07:28)...
RECENT_RUN_TAILS = 8
# ...but the cost is the mean of the latest TAILS_AVERAGED of them less the fastest (a tail
# reads fast, as above, more often than slow) once there are TAILS_FOR_DROP.  The slowest of
# the 8, the rule until 2026-12-07 11:40, charged capped clients on the H100 for more than
# their grants did: 0.9 points of share under their caps on average over their steady part
# as charged, 13 of 147 client-runs more than 2 points under.  From then to 22:40 the newest
# counted where slower than that mean (a card still heating reads each tail slower than the
# last: the simulator's does), but a slow newest tail is more often a tail that read slow:
# over 301 H100 client-runs of 2026-12-06/07 with their logs kept, that rule left them 0.61
# points under on average, 20 more than 2 under (the scheduler's own lines: 0.78, 21), this
# one 0.33 under, 6 past 2 (3.2 at most); on the H200 (27) 0.09 and 0.23 over, none past 2.
# (bench/tail_estimators.py: "new4trim" and "4trim";
# bench/results/no-gpu-20261207-2240-tail-estimators.txt.)  A card that heats under a new
# load does so in the first seconds, which the settling floor charges (UNKNOWN_SPEED).
TAILS_AVERAGED = 4
TAILS_FOR_DROP = 3
# Capped clients alike in shared turns (the scheduler names those in its turns; their grants'
# costs per launch within ALIKE_COST_SPREAD of its own, all in graph launches or none, each
# one's tails by work agreeing, the newest of each within ALIKE_TAILS_AGE_S of its own) read
# their continuous cost from their tails together (_pooled_cost): one program on one card runs
# continuously at one cost, but the order within a shared turn holds, and with it where each
# one's calibration falls, which moves its tails.  H100, 2026-12-07 11:26, torch eager at
# 0.4 + 0.5: a went after the idle part of each turn, b just after a; a's tails read 195.8 us
# a launch on average, b's 205.6, their bare run 200, and a was charged 1.033 for 1.053 done a
# granted second, b 1.051 for 1.023: b ran 2.3 points under its cap over 10 s.  Over the
# capped pairs in shared turns with logs (each client's last calibration line; bench/
# tail_estimators.py, "pooled"; bench/results/no-gpu-20261207-1305-pooled-tails.txt), the
# share off the cap: the H100's 57 client-runs, rms 1.11 -> 0.54 points, 5 -> 0 past 2; the
# H200's 19, 0.71 -> 0.66, none past 2 either way.  On one H200, 2026-12-07 12:53, 0.4 + 0.5
# with and without (torch eager twice, JAX once): every client within 1.8 points over 10 s
# and 3.7 over 1 s either way (there the two clients' latest tails differed by 1-5 %, which
# one read slower changing from run to run).  Nothing more for the newest tail of one of
# them (until 22:40 the amount its newest read over its own mean was added): over the 188 H100
# client-runs in shared turns since, rms 1.16 -> 0.76 points, 14 -> 5 past 2, mean -0.56 ->
# -0.27; the H200's 19 +0.10 -> +0.19, none past 2 (bench/tail_estimators.py, "pooled" and
# "no-heat").  Not in 100 ms turns, where the order changes from turn to turn (the H100's 61
# client-runs there: 1.19 -> 1.04 only), nor in lone ones.
ALIKE_TAILS_AGE_S = 3 * CALIBRATE_EVERY_S
# The latest tails' costs per launch further apart than this: the program's launches differ
# too much for their cost to tell its speed (a compiled model's mix); the clock tells it then.
RUN_SPREAD_MAX = 1.15
# ...but once two or more of its tails agreed within RUN_SPREAD_MAX, only further apart than
# this: a card's clock moves one program's tails further over a run.  H100, 2026-12-07, torch
# eager capped beside a neighbour: tails of 190.4-203.9 us a launch, then one of 219.3 (its
# grants 196); 189.7-227.9 in another run; read by the clock, each time the pair left shared
# turns for 100 ms ones, and its 1 s windows fell 11-15 points (4 runs of 18 that day, every
# one at 1.150-1.183).  A mix's tails part at once: two threads' launches 172.7 then 225.1,
# 96 streams 200.1 then 136.5 (H200, 2026-12-03/04); one program's kept tails spread up to
# 1.235 within a run (JAX, H100, 2026-12-07 09:14).
RUN_SPREAD_LEAVE = 1.30
# A tail that reads its program more than this much slower than its grants is not kept: no
# GPU's clock moves that far between a rest and continuous work (matmul loops 1.13-1.19 on
# the H100 and H200), so something else ran slow in it (a stall, a slow kernel).  H200,
# 2026-12-02, two CUDA-graph clients capped at 0.3: one tail read 1034 us a graph launch
# against 703 in its grants and 788-790 in the others'; kept as the slowest, it charged its
# client 1.47 for 6 s, then, as the tails now disagreed, left its speed to the clock for
# longer: 4.2 points under over 10 s.  (The first tail's floor is held to FIRST_TAIL_MAX.)
TAIL_SPEED_MAX = 1.35
# Nor does a tail count once LATER_TAILS_FASTER tails after it have each read its program
# more than this much faster: a card that keeps heating under the same load does not speed up
# so (a program's kept tails spread 2-3 %: H200 torch eager alone 196.5-198.2 us a launch at
# 0.8, 201.8-204.0 at 0.6).  Where the slowest is the newest it is kept (in the mean).
# H200, 2026-12-02 22:18, two clients capped at 0.4 and 0.5: one of a's tails read 216.9 us a
# launch, its next five 196.7-202.0; as the slowest of its latest 8 it charged a 1.10-1.12
# for its grants' 194-198, and a did 2.5 points under its cap over 10 s.
LONE_SLOW_TAIL = 1.05
LATER_TAILS_FASTER = 2


@dataclass(frozen=True)
class Calibration:
    """A calibration grant's shape: how long it is, and how much of its start runs as fast as
    an ordinary grant (the scheduler charges that part at the client's speed, the rest at 1)."""

    length_s: float
    settle_s: float


SHARED_CALIBRATION = Calibration(SHARED_CALIBRATION_S, SHARED_SETTLE_S)


def capped_calibration(allowance_s: float, lump_cap: float | None = None,
                       alone: bool = False, beside_cap: float = 0.0) -> Calibration | None:
    """A capped client's calibration, where its windows allow it `allowance_s` (its limit's
    part of the short window, and the edge): at most CALIBRATION_ALLOWANCE of that, so that
    the rest of a 1 s window around it is not starved, with `lump_cap` (its cap) no longer
    than LUMP_BOUND allows, and None where that is too short for the clock to settle
    (MIN_CALIBRATION_S).  A client capped at 0.1 may hold 0.115 s of a 1 s window, and
    waited for room for a 200 ms calibration for ever (simulator: nothing from its first
    second on; at 0.2 its seconds 0.06-0.21).  `alone` (no other client wants the GPU), one
    of MIN_CALIBRATION_S where LUMP_BOUND allows less: its seconds around it then a point or
    two further under, where beside others it would stretch its neighbours' too.
    `beside_cap`: the largest cap of the others that want the GPU, who wait through it
    (no longer than LUMP_BOUND / beside_cap: the comment after LUMP_BOUND says why)."""
    length = min(CALIBRATION_S, CALIBRATION_ALLOWANCE * allowance_s)
    if lump_cap is not None:
        lump = 2 * LUMP_BOUND / (1.0 - lump_cap + LUMP_BOUND)
        length = min(length, max(lump, MIN_CALIBRATION_S) if alone else lump)
    if beside_cap > 0.0:
        length = min(length, max(LUMP_BOUND / beside_cap, MIN_CALIBRATION_S))
    if length < MIN_CALIBRATION_S:
        return None
    return _calibration_of(length)


def fitted_calibration(cal: Calibration, grant_s: float) -> Calibration:
    """`cal` no longer than an ordinary grant of `grant_s`, nor shorter than the clock needs
    to settle (MIN_CALIBRATION_S): a calibration that is one of its client's grants is no lump
    in its seconds (the scheduler's LONE_PACED_WORK_S), and one a little longer a small one."""
    length = max(grant_s, MIN_CALIBRATION_S)
    return cal if length >= cal.length_s else _calibration_of(length)


def _calibration_of(length_s: float) -> Calibration:
    """A calibration of `length_s`, its settling part in proportion."""
    return Calibration(length_s, length_s / CALIBRATION_S * CALIBRATION_SETTLE_S)


@dataclass
class _Clocks:
    in_grants: float = 0.0  # MHz, running mean over ordinary grants (0: none yet)
    tails: list[float] = field(default_factory=list)  # MHz, the latest full tails' means
    first_at: float | None = None  # its first reading
    calibrated_at: float | None = None  # when its latest calibration grant began
    in_grants_then: float = 0.0  # in_grants when it began
    cost_then: float = 0.0  # ms per launch in its grants when it began (0: not measured)
    tail_sum: float = 0.0  # that calibration's tail readings
    tail_samples: int = 0
    gpu_wait: float | None = None  # mean share of its grants waited on the GPU (None: not said)
    grant_costs: list[float] = field(default_factory=list)  # ms per launch, the latest grants'
    unsaid: int = 0  # ordinary grants in a row its hook measured nothing of (RECENT_GRANTS)
    tail_costs: list[float] = field(default_factory=list)  # ms per launch, the latest tails'
    tails_agreed: bool = False  # two or more of them agreed (RUN_SPREAD_LEAVE), and still do
    tail_at: float = 0.0  # when the calibration of the newest of them began
    graphs: bool = False  # its hook counts graph launches, not launches (wire.RUN_GRAPHS)
    calibrations: int = 0  # begun (the first one's tail is not kept: FIRST_CALIBRATION_S)
    shared_calibrations: int = 0  # of them, begun beside others uncapped (SHARED_FIRST_TRIES)
    first_tail_cost: float = 0.0  # ms per launch in the first one's tail (FIRST_TAIL_MAX)
    # grant_costs were measured under the caps before an edit (duty_changed): its speed is
    # read from them until the next ordinary grant's run comes in (or says its hook measured
    # nothing), which replaces them; its speed-up scaled by edit_scale meanwhile, from the
    # card's busy share when they were measured (busy_then) to that after the latest edit
    costs_before_edit: bool = False
    busy_then: float = 1.0
    edit_scale: float = 1.0

    @property
    def continuous(self) -> float:
        """MHz run continuously (0: not known yet)."""
        return min(self.tails, default=0.0)


def _work_speed(clocks: _Clocks, shared: bool = False,
                alike: list[_Clocks] | None = None) -> float | None:
    """GPU time per launch run continuously over that in its grants (None: not known); with
    `shared`, an uncapped client's beside others: the median of its tails, below 1 too (see
    the docstring); `alike`: capped clients in its shared turns whose tails it is read with
    (ALIKE_TAILS_AGE_S)."""
    costs = _spread_tails(clocks, shared)
    grants = _grants_cost(clocks)
    if grants <= 0.0 or not costs or max(costs) > _spread_allowed(clocks) * min(costs):
        return None
    continuous = statistics.median(costs) if shared else _tails_mean(costs)
    if not shared and continuous > TAIL_SPEED_MAX * grants:
        # No clock makes that (TAIL_SPEED_MAX): its grants run other kernels than its tails
        # did, a new program under the same pod manager.  Charged 2x (SPEED_RANGE) until the
        # next calibration, a client capped at 0.4 did 0.19-0.23 of its work for 7 s.  (Its
        # own tails say so, not those it is read with: whether it is read by work at all is
        # its own, as reads_by_work and describe say.)
        return None
    if alike:
        continuous = _pooled_cost([clocks, *alike])
    low, high = SHARED_RANGE if shared else SPEED_RANGE
    return min(max(continuous / grants, low), high)


def _spread_tails(clocks: _Clocks, shared: bool) -> list[float]:
    """The tails whose costs must agree for its speed to be read by work."""
    return clocks.tail_costs if shared else _believable_tails(clocks.tail_costs)


def _spread_allowed(clocks: _Clocks) -> float:
    """How far apart its tails may read (RUN_SPREAD_MAX, RUN_SPREAD_LEAVE)."""
    return RUN_SPREAD_LEAVE if clocks.tails_agreed else RUN_SPREAD_MAX


def _by_work(clocks: _Clocks) -> bool:
    """Its hook measures its grants, and its tails so far agree (SpeedMeter.reads_by_work)."""
    return bool(clocks.grant_costs) and (not clocks.tail_costs or _work_speed(clocks) is not None)


def _tails_mean(costs: list[float]) -> float:
    """A capped client's continuous cost from its latest tails (oldest first): the mean of the
    latest TAILS_AVERAGED but the fastest."""
    return _mean_but_fastest(costs[-TAILS_AVERAGED:])


def _mean_but_fastest(costs: list[float]) -> float:
    """The mean of `costs` but the fastest (of all, where there are fewer than
    TAILS_FOR_DROP)."""
    return statistics.fmean(sorted(costs)[1:] if len(costs) >= TAILS_FOR_DROP else costs)


def _pooled_cost(group: list[_Clocks]) -> float:
    """The continuous cost of capped clients alike in shared turns (ALIKE_TAILS_AGE_S): the
    mean of the latest TAILS_AVERAGED tails of each but the fastest of them all."""
    tails = [c for clocks in group for c in _believable_tails(clocks.tail_costs)[-TAILS_AVERAGED:]]
    return _mean_but_fastest(tails)


def _believable_tails(costs: list[float]) -> list[float]:
    """The tails' costs (oldest first) less any that LATER_TAILS_FASTER later tails all read
    more than LONE_SLOW_TAIL times faster: something else ran slow in it."""
    return [c for i, c in enumerate(costs)
            if len(costs) - i - 1 < LATER_TAILS_FASTER or max(costs[i + 1:]) * LONE_SLOW_TAIL >= c]


def _grants_cost(clocks: _Clocks) -> float:
    """ms per launch in its ordinary grants: the median of its latest grants' (RECENT_GRANTS;
    0: none measured)."""
    return statistics.median(clocks.grant_costs) if clocks.grant_costs else 0.0


def _cost_moved(clocks: _Clocks) -> bool:
    then = clocks.cost_then
    return then > 0.0 and abs(_grants_cost(clocks) - then) > SHARED_DRIFT * then


def _first_tail_speed(clocks: _Clocks) -> float:
    """The speed its first calibration's tail says it has at least (1: none measured)."""
    grants = _grants_cost(clocks)
    if clocks.first_tail_cost <= 0.0 or grants <= 0.0:
        return 1.0
    return min(max(clocks.first_tail_cost / grants, 1.0), FIRST_TAIL_MAX)


def _clock_speed(clocks: _Clocks) -> float:
    """How much faster its grants' clock makes its kernels (1 until both clocks are known)."""
    if clocks.in_grants <= 0.0 or clocks.continuous <= 0.0:
        return 1.0
    low, high = SPEED_RANGE
    return min(max(clocks.in_grants / clocks.continuous, low) ** WORK_PER_CLOCK, high)


def busier_scale(busy_then: float, busy_now: float) -> float:
    """What a speed-up measured with the card `busy_then` busy is scaled by with it `busy_now`
    busy (EDIT_BUSIER_FROM): the square root of the idle share it keeps, where it gets busier."""
    if busy_now <= busy_then or busy_then >= EDIT_BUSIER_FROM:
        return 1.0
    return math.sqrt((1.0 - min(busy_now, 1.0)) / (1.0 - busy_then))


def _tail_s(grant_s: float) -> float:
    """The part of a calibration grant read as the continuous clock: TAIL_S, or half of a
    short one (capped_calibration)."""
    return min(TAIL_S, grant_s / 2)


def _read_within(clocks: _Clocks, now: float, seconds: float) -> bool:
    """First read less than `seconds` before `now`."""
    return clocks.first_at is not None and now - clocks.first_at < seconds


def _unknown(clocks: _Clocks, now: float) -> bool:
    """Read lately, and its speed not told yet by a tail measured by work."""
    return _read_within(clocks, now, UNKNOWN_SPEED_S) and not clocks.tail_costs


def _mean(old: float, sample: float, weight: float) -> float:
    return sample if old <= 0.0 else old + weight * (sample - old)


class SpeedMeter:
    """Each capped client's clocks and speed."""

    def __init__(self, every_s: float = CALIBRATE_EVERY_S) -> None:
        self.every_s = every_s
        self._clocks: dict[str, _Clocks] = {}
        self._compared: frozenset[str] = frozenset()  # the clients alike() compared last
        self._found_alike = False  # ...and whether it found them alike

    def sample(self, name: str, mhz: float, at: float, into_grant_s: float, grant_s: float,
               calibrating: bool, calibration_s: float = CALIBRATION_S) -> None:
        """The SM clock read at `at`, `into_grant_s` after the start of a grant of `grant_s`
        seconds that `name` held then; with `calibrating`, a calibration meant to last
        `calibration_s` (its tail counts only if it was not cut much shorter)."""
        if mhz <= 0.0:
            return
        clocks = self._clocks.setdefault(name, _Clocks())
        if clocks.first_at is None:
            clocks.first_at = at
        if not calibrating:
            clocks.in_grants = _mean(clocks.in_grants, mhz, GRANT_WEIGHT)
        elif grant_s >= 0.75 * calibration_s and into_grant_s >= grant_s - _tail_s(grant_s):
            clocks.tail_sum += mhz
            clocks.tail_samples += 1
            if clocks.tail_samples < MIN_TAIL_READINGS:
                return
            mean = clocks.tail_sum / clocks.tail_samples
            if clocks.tail_samples == MIN_TAIL_READINGS:  # this calibration's tail counts now
                clocks.tails = [*clocks.tails, mean][-RECENT_TAILS:]
            else:
                clocks.tails[-1] = mean

    def seen(self, name: str, at: float) -> None:
        """A grant of `name` began at `at`: its first, for a client the clock is not read for
        (an uncapped one beside others: its calibrations count from it)."""
        clocks = self._clocks.setdefault(name, _Clocks())
        if clocks.first_at is None:
            clocks.first_at = at

    def reads_by_work(self, name: str) -> bool:
        """Is its speed read by work, or soon to be: its hook measures its grants, and its tails
        so far agree?  Else its calibrations' tails are read by the clock (_clock_speed), and
        need the clock settled and NVML caught up: a whole CALIBRATION_S (the scheduler)."""
        clocks = self._clocks.get(name)
        return clocks is not None and _by_work(clocks)

    def alike(self, names: set[str] | list[str]) -> bool:
        """Do `names` run launches of one cost in their grants, as far as their hooks measured
        them: at least two measured, all in graph launches or all not, and those measured in
        ALIKE_MIN_GRANTS grants or more within ALIKE_COST_SPREAD (ALIKE_LEAVE_SPREAD where the
        same ones were found alike last time: it remembers which)?"""
        known = {n: c for n in names if (c := self._clocks.get(n)) is not None and c.grant_costs}
        if len(known) < 2 or len({c.graphs for c in known.values()}) > 1:
            return False
        told = {n: c for n, c in known.items() if len(c.grant_costs) >= ALIKE_MIN_GRANTS}
        if len(told) < 2:
            return True
        costs = [_grants_cost(c) for c in told.values()]
        held = self._found_alike and told.keys() == self._compared
        alike = max(costs) <= (ALIKE_LEAVE_SPREAD if held else ALIKE_COST_SPREAD) * min(costs)
        self._compared, self._found_alike = frozenset(told), alike
        return alike

    @property
    def last_comparison(self) -> tuple[frozenset[str], bool]:
        """The clients alike() compared last, and whether it found them alike (none where
        fewer than two of them are left)."""
        if len(self._compared) < 2:
            return frozenset(), False
        return self._compared, self._found_alike

    def measured(self, name: str) -> bool:
        """Has its hook measured its grants' cost per launch since the caps last changed (a
        grant's run, said a grant late, may still be of one before: duty_changed)?  (No
        calibration is of use to an uncapped client until then: it has nothing to compare its
        tails with.)"""
        clocks = self._clocks.get(name)
        return clocks is not None and bool(clocks.grant_costs) and not clocks.costs_before_edit

    def waited(self, name: str, share: float) -> None:
        """An ordinary grant of `name` ended, and its launching threads waited on the GPU for
        `share` of it (garbage from a hook, NaN, is dropped; the rest is held to 0..1)."""
        if math.isnan(share):
            return
        clocks = self._clocks.setdefault(name, _Clocks())
        share = min(max(share, 0.0), 1.0)
        old = clocks.gpu_wait
        clocks.gpu_wait = share if old is None else old + WAIT_WEIGHT * (share - old)

    def ran(self, name: str, run_ms: float, launches: int, calibrating: bool,
            graphs: bool = False, shared: bool = False) -> None:
        """A grant of `name` ended, and its hook measured `launches` of it (graph launches,
        with `graphs`) run back to back in `run_ms` of GPU time (in a calibration, in its tail:
        wire.RUN_MEASURE_MS).  When the hook starts to count graph launches, what it measured
        in launches is forgotten: costs per launch and per replay do not compare.  `shared`:
        an uncapped client's, beside others; its first tail is kept (the card was busy
        before it, not cold)."""
        said = math.isfinite(run_ms) and run_ms > 0.0 and launches >= 1
        known = self._clocks.get(name)  # (a grant said nothing of makes no record: an empty
        # one would charge a cap too small to calibrate UNCALIBRATED_SPEED, not 1)
        if known is not None and not calibrating:
            if known.costs_before_edit:  # (said now, one way or the other)
                known.grant_costs, known.costs_before_edit = [], False
            known.unsaid = 0 if said else known.unsaid + 1
            if known.unsaid >= RECENT_GRANTS:
                known.grant_costs = []
        if not said or (launches < MIN_RUN_LAUNCHES and run_ms < MIN_RUN_MS):
            return
        clocks = known if known is not None else self._clocks.setdefault(name, _Clocks())
        if graphs != clocks.graphs:
            clocks.graphs = graphs
            clocks.grant_costs, clocks.tail_costs = [], []
            clocks.first_tail_cost, clocks.tails_agreed = 0.0, False
        if calibrating:
            if run_ms < MIN_RUN_MS:
                return
            if shared or clocks.calibrations > 1:
                grants = _grants_cost(clocks)
                if not shared and grants > 0.0 and run_ms / launches > TAIL_SPEED_MAX * grants:
                    return  # (not believable: see TAIL_SPEED_MAX)
                clocks.tail_costs = [*clocks.tail_costs, run_ms / launches][-RECENT_RUN_TAILS:]
                clocks.tail_at = clocks.calibrated_at or 0.0
                costs = _spread_tails(clocks, shared)
                clocks.tails_agreed = (len(costs) >= 2
                                       and max(costs) <= _spread_allowed(clocks) * min(costs))
            else:
                clocks.first_tail_cost = run_ms / launches
            return
        clocks.grant_costs = [*clocks.grant_costs, run_ms / launches][-RECENT_GRANTS:]

    def due(self, name: str, now: float, shared: bool = False) -> bool:
        """Is it time for a calibration grant?  (Never for a client its host paces.)  With
        `shared` (an uncapped client beside others): see SHARED_DRIFT."""
        clocks = self._clocks.get(name)
        if clocks is None or clocks.first_at is None:
            return False  # no reading yet
        if clocks.gpu_wait is not None and clocks.gpu_wait < HOST_PACED:
            return False  # its host paces it: nothing to calibrate
        if clocks.calibrated_at is None:
            return now - clocks.first_at >= FIRST_CALIBRATION_S
        since = now - clocks.calibrated_at
        if shared:
            if (len(clocks.tail_costs) < SHARED_FIRST_TAILS
                    and clocks.shared_calibrations < SHARED_FIRST_TRIES):
                return since >= SHARED_SECOND_S
            return since >= SHARED_EVERY_S or (since >= SETTLING_EVERY_S and _cost_moved(clocks))
        settling = _read_within(clocks, now, SETTLE_S)
        then = clocks.in_grants_then
        drifted = then > 0.0 and abs(clocks.in_grants - then) > DRIFT * then
        # A speed read by work is not the clock's: its calibrations come every period, or
        # early where its grants' cost moved (other kernels: its tails are of another program).
        by_clock = _work_speed(clocks) is None
        unsure = (drifted and _clock_speed(clocks) <= 1.0) if by_clock else _cost_moved(clocks)
        return since >= (SETTLING_EVERY_S if settling else self.every_s) or (
            unsure and since >= SETTLING_EVERY_S)

    def calibrating(self, name: str, now: float, shared: bool = False) -> None:
        """A calibration grant begins: its tail will be the continuous clock (`shared`: an
        uncapped client's, beside others)."""
        clocks = self._clocks.setdefault(name, _Clocks())
        clocks.calibrated_at, clocks.tail_sum, clocks.tail_samples = now, 0.0, 0
        clocks.calibrations += 1
        clocks.shared_calibrations += shared
        clocks.in_grants_then = clocks.in_grants
        clocks.cost_then = _grants_cost(clocks)  # (for clients beside others)

    def speed(self, name: str, now: float = math.inf, shared: bool = False,
              calibrates: bool = True, idle: float = 1.0, long_grants: bool = False,
              mates: Collection[str] = ()) -> float:
        """Work per second of its grants ÷ work per second run continuously, at `now` (by
        default, long after its first reading): the GPU's speed-up, as far as the GPU sets its
        pace (its share waited, up to GPU_BOUND).  1 for a client never read; at least
        UNKNOWN_SPEED (LONG_GRANTS_UNKNOWN_SPEED with `long_grants`) for one read lately but
        not yet calibrated by work, and for one sped up while it settles, and until a tail is
        kept what its first tail says (FIRST_TAIL_MAX);
        UNCALIBRATED_SPEED for one whose cap is too small to calibrate
        (not `calibrates`: capped_calibration), unless tails by work say.  With `shared` (an
        uncapped client beside others): by work only, 1 until measured, and below 1 too.
        `idle`: the share of the GPU that it and its neighbours leave idle (0 beside an uncapped
        one, or caps that fill it: no floor, as its grants run at the card's continuous clock
        and no calibration comes; under IDLE_FOR_UNKNOWN, a floor that much lower).
        `long_grants`: it is paced in lone or shared turns (LONG_GRANTS_UNKNOWN_SPEED);
        `mates`: the capped clients in its shared turns (ALIKE_TAILS_AGE_S)."""
        clocks = self._clocks.get(name)
        if clocks is None:
            return 1.0
        bound = 1.0 if clocks.gpu_wait is None else min(clocks.gpu_wait / GPU_BOUND, 1.0)
        work = _work_speed(clocks, shared, None if shared else [*self._alike(name, mates).values()])
        if work is not None and work > 1.0 and clocks.costs_before_edit and not shared:
            work = 1.0 + (work - 1.0) * clocks.edit_scale
        if shared:
            fast = 1.0 if work is None else work
        else:
            fast = _clock_speed(clocks) if work is None else work
            settling = _read_within(clocks, now, SETTLE_S)
            if idle <= 0.0:
                pass  # (a capped client newly beside an uncapped one was charged 1.1 for 5 s)
            elif work is None and not calibrates:
                fast = UNCALIBRATED_SPEED
            else:
                if settling and not clocks.tail_costs:
                    fast = max(fast, _first_tail_speed(clocks))
                if _unknown(clocks, now) or (settling and fast > SPED_UP):
                    unknown = LONG_GRANTS_UNKNOWN_SPEED if long_grants else UNKNOWN_SPEED
                    likely = min(idle / IDLE_FOR_UNKNOWN, 1.0) * (unknown - 1.0)
                    fast = max(fast, 1.0 + likely)
        return 1.0 + (fast - 1.0) * bound

    def _alike(self, name: str, mates: Collection[str]) -> dict[str, _Clocks]:
        """Those of `mates` whose tails `name`'s continuous cost is read with
        (ALIKE_TAILS_AGE_S says which), by name."""
        clocks = self._clocks.get(name)
        cost = 0.0 if clocks is None else _grants_cost(clocks)
        if clocks is None or not clocks.tail_costs or cost <= 0.0:
            return {}
        return {n: other for n in sorted(mates)
                if n != name and (other := self._clocks.get(n)) is not None
                and other.tail_costs and other.graphs == clocks.graphs
                and abs(other.tail_at - clocks.tail_at) <= ALIKE_TAILS_AGE_S
                and (theirs := _grants_cost(other)) > 0.0
                and max(theirs, cost) <= ALIKE_COST_SPREAD * min(theirs, cost)
                and _work_speed(other) is not None}

    def gpu_wait(self, name: str) -> float | None:
        """The mean share of its grants it waited on the GPU (None: not said)."""
        clocks = self._clocks.get(name)
        return None if clocks is None else clocks.gpu_wait

    def describe(self, name: str, shared: bool = False, mates: Collection[str] = ()) -> str:
        """Its clocks, for the log (`mates`: as speed's, the tails it is read with)."""
        clocks = self._clocks.get(name, _Clocks())
        tails = ", ".join(f"{mhz:.0f}" for mhz in clocks.tails) or "none"
        wait = "not said" if clocks.gpu_wait is None else f"{clocks.gpu_wait:.1%}"
        cost = _grants_cost(clocks)
        grants = f"{1e3 * cost:.1f}" if cost > 0.0 else "not measured"
        costs = ", ".join(f"{1e3 * c:.1f}" for c in clocks.tail_costs) or "none"
        if clocks.first_tail_cost > 0.0 and not shared:
            costs += f" (the first, a floor: {1e3 * clocks.first_tail_cost:.1f})"
        edit = " (before the edit)" if clocks.costs_before_edit and cost > 0.0 else ""
        unit = "graph launch" if clocks.graphs else "launch"
        if shared:  # (a tail its hook measured less than MIN_RUN_MS of is not kept)
            alone = f"alone in the latest tails {costs}" if clocks.tail_costs else \
                "no tail measured long enough yet"
            return (f"beside others: {grants} us per {unit} in its grants (median){edit}, {alone}; "
                    f"waited on the GPU in {wait} of its grants")
        by = "the clock" if _work_speed(clocks) is None else "work"
        if by == "work" and (alike := self._alike(name, mates)):
            costs += "; read with " + "; ".join(  # (the tails of theirs that are pooled)
                f"{n}'s " + ", ".join(f"{1e3 * c:.1f}" for c in
                                      _believable_tails(other.tail_costs)[-TAILS_AVERAGED:])
                for n, other in alike.items())
        return (f"by {by}: {grants} us per {unit} in its grants{edit}, in the latest tails "
                f"{costs}; {clocks.in_grants:.0f} MHz in its grants, {clocks.continuous:.0f} MHz "
                f"run continuously (the lowest of the latest tails: {tails}); waited on the GPU "
                f"in {wait} of its grants")

    def duty_changed(self, name: str, busy: tuple[float, float] = (1.0, 1.0)) -> None:
        """The caps around it changed, so the card idles more or less between its grants: what
        its grants cost before says little of what they cost now (its tails still hold).  Its
        speed is read from them all the same until its next ordinary grant is measured, which
        replaces them (or says nothing, and leaves it to the clock); meanwhile it counts as read
        by work (reads_by_work: it stays in lone or shared turns), but not as measured (no
        calibration fitted to its grants).  Out of its turns for that one grant, two capped
        clients in shared turns went to 100 ms turns, and a 0.3 cap beside one lowered from 0.6
        held 0.258 of its work over a second on the simulator (0.295 now); a lone 0.3 raised to
        0.5 took ten 50 ms grants before it went back (0.466 over a second, 0.506 now).  Read by
        the clock meanwhile, as until 2026-12-07 22:50, a raised cap's grants ran long where the
        H100's clock read no speed-up (NVML lags: 1942 MHz in its grants, 1937 continuously),
        were charged at its speed by work once measured, and its windows then had no room for
        its next grant at its pace: b raised from 0.3 to 0.6 beside a waited 49 ms, the GPU
        idle, and held 0.532 of its work over a second (and on the simulator with its clock so
        read, b 0.482 and a 0.274).  (The run that replaces them is its hook's of the grant
        before the one it then asks after, said a grant late (wire.quota_run): it may be of a
        grant under the caps before, as when they were cleared.  An uncapped client's stay
        until its next grant beside others: alone, its runs are not weighed.)
        `busy`: the card's busy share before the edit and after it (the share of the time its
        grants hold it): a capped client's speed-up read from them is scaled meanwhile where the
        card gets busier than when they were measured (busier_scale; after edits in a row, than
        before the first).  The run that replaces them comes a grant late, so the first grant
        after the edit is sized at the scaled speed and charged at the speed before: kept
        through a run of a grant begun before the edit, the scale read the simulator's raised
        b 7.40 points under at worst over a second, 4.95 as it is (a review's point)."""
        clocks = self._clocks.get(name)
        if clocks is None:
            return
        if not clocks.costs_before_edit:
            clocks.busy_then = busy[0]
        clocks.costs_before_edit = bool(clocks.grant_costs)
        clocks.edit_scale = busier_scale(clocks.busy_then, busy[1])

    def forget(self, name: str) -> None:
        self._clocks.pop(name, None)
        self._compared -= {name}  # (added again, it is compared anew)
