"""When the hook asks for the next token (issue 12, cheap renewal): in the current token's tail,
in the background, while the program goes on launching on what is left of it; at the start of a
burst that does not fit only where processes share the client's token (v1's rule, which
GEMINI_HOOK_BURST_FIT=0 turns off)."""

from __future__ import annotations

import json
import queue
import re
import statistics
import time

import pytest

from gemini.core import wire
from gemini.core.wire import RequestType

from .conftest import prog

pytestmark = pytest.mark.hook

QUOTA_MS = 600.0
COST_LINE = re.compile(r"GPU time per kernel launch ([0-9.]+) us")
TAIL_MS = 300.0  # long, so that launches in the tail are easy to see on a loaded machine


def kernels_so_far(proc, seen: int) -> int:
    """The newest progress count among the lines printed so far (no waiting)."""
    while True:
        try:
            _, line = proc.lines.get_nowait()
        except queue.Empty:
            return seen
        if line.startswith("{"):
            seen = max(seen, json.loads(line)["kernels"])


def test_launches_go_on_while_the_next_token_is_asked_for(fake_env, pm):
    pm.quota_ms = QUOTA_MS
    # --allocs: the hook then knows the client is not a unified-memory one (those ask in the
    # launching thread: their launch prefetches on a grant)
    proc = fake_env.start(
        [prog("gem_client"), "work", "--kernel-ms", "0.05", "--burst", "1", "--sync", "stream",
         "--seconds", "30", "--allocs", "1", "--bytes", str(1 << 20), "--report-every", "0.01"],
        GEMINI_HOOK_TAIL_US=str(int(TAIL_MS * 1000)))
    try:
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 1)
        pm.hold_quota = True  # the next answer waits (the request comes TAIL_MS before the end)
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 2)
        asked = time.monotonic()
        at_request = kernels_so_far(proc, 0)
        # While the answer is held, the program still launches on the rest of its token: the
        # request did not come from the launching thread, which would be waiting for it.
        later = at_request
        while later < at_request + 300:
            _, line = proc.lines.get(timeout=10)  # no progress at all: the launcher waits
            if line.startswith("{"):
                later = max(later, json.loads(line)["kernels"])
        assert len(pm.of_type(RequestType.QUOTA)) == 2  # still the one held request
        held_ms = (time.monotonic() - asked) * 1000  # < TAIL_MS: the launches never stopped
        pm.release()
        assert pm.wait_for(lambda p: len(p.of_type(RequestType.QUOTA)) >= 3)
        # The request handed the token back: what ran from then until the answer is charged as
        # overuse, with the next request.
        overuse_ms = pm.of_type(RequestType.QUOTA)[2].args[0]
        assert held_ms * 0.8 <= overuse_ms <= held_ms + 100, (held_ms, overuse_ms)
    finally:
        proc.kill()


@pytest.mark.parametrize(
    ("burst_fit", "sharers", "kernel_ms"),
    [("1", 2, 5.0), ("0", 2, 5.0), ("1", 1, 5.0), ("1", 0, 5.0), ("1", 2, 0.2)],
)
def test_a_burst_that_does_not_fit_asks_early_where_processes_share_the_token(
    fake_env, pm, burst_fit, sharers, kernel_ms
):
    """v1 asks for a new token at the start of a burst that does not fit in what is left, where
    other processes of the client share its token (each bounds only its own queue) and a launch
    of each costs more than handing the token over.  A process alone in its client, with the
    rule off, or of short launches, runs the burst on (its launches are held once its queue
    would outlast the token) and asks for the next token in the tail: an early ask hands back
    the rest of the token with the GPU idle for a round trip (H200, a 0.3/0.7 pair of torch
    eager: 0.982-0.991 of the GPU's work together with it, 0.999-1.000 without; two processes
    of it beside one: 0.984-0.987 with it, 0.992 without)."""
    pm.quota_ms = 30.0
    pm.sharers = sharers
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", str(kernel_ms), "--burst",
                      str(round(20 / kernel_ms)), "--sync", "ctx", "--bursts", "12"],
                     GEMINI_HOOK_BURST_FIT=burst_fit)
    assert r.out[-1]["rc"] == 0, r.stderr
    # 20 ms bursts in 30 ms tokens: every other burst starts with 10 ms left
    if burst_fit == "1" and sharers > 1 and kernel_ms > 1.0:
        assert r.stats["gate.fetch_burst"] >= 3, r.stats
    else:
        assert r.stats["gate.fetch_burst"] == 0, r.stats
        assert r.stats["gate.fetch_tail"] + r.stats["gate.fetch_expired"] >= 6, r.stats


def test_a_calibration_token_is_run_through_and_its_last_part_measured(fake_env, pm):
    """A calibration grant (wire.QUOTA_FLAG_CALIBRATION) is for the GPU's settled clock: the
    hook does not hand it back at the start of a burst that would not fit (v1's rule above),
    and says the run of its last wire.RUN_MEASURE_MS only, with the request after next."""
    pm.quota_ms = 100.0
    pm.quota_flags = wire.QUOTA_FLAG_CALIBRATION
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "5", "--burst", "4",
                      "--sync", "ctx", "--bursts", "12"])
    assert r.out[-1]["rc"] == 0, r.stderr
    assert r.stats["gate.fetch_burst"] == 0, r.stats
    # Bursts of 40 ms of 1 ms kernels: a calibration token's last 40 ms measured.
    pm.requests.clear()
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "1", "--burst", "40",
                      "--sync", "ctx", "--seconds", "0.6"])
    assert r.out[-1]["rc"] == 0, r.stderr
    runs = [wire.quota_run(q) for q in pm.of_type(RequestType.QUOTA)]
    measured = [(ms, n) for ms, n, graphs in runs if n and not graphs]
    assert max((n for _, n in measured), default=0) >= 30, runs  # most of the 40 ms, once
    # 1 ms kernels: what began to run in a 100 ms token's last 40 ms (and ran on into the
    # next, back to back here), not the whole token
    assert all(ms == pytest.approx(1.0 * n, rel=0.05) and n <= 70 for ms, n in measured), runs


def test_a_warm_up_on_another_stream_leaves_the_calibration_tails_whole(fake_env, pm):
    """PyTorch warms a graph up on a side stream before it captures it, then replays it on
    another.  A segment that starts at a hold is left out of a tail where the process launches
    on several streams (other streams' kernels run beside it), and a calibration holds every
    few ms: "several" meant ever, and a CUDA-graph loop's tails measured 4-13 replays of some
    50 (H200, 2026-12-03; here 5-8 of 50, 0.8 ms replays, their warm-up on the legacy stream).
    Its speed was then read from the clock, 1.05 for 1.09-1.10 of work."""
    pm.quota_ms = 100.0
    pm.quota_flags = wire.QUOTA_FLAG_CALIBRATION
    pm.quota_delay_s = 0.02
    r = fake_env.run([prog("gem_client"), "work", "--launch", "graph", "--kernel-ms", "0.2",
                      "--burst", "4", "--sync", "none", "--seconds", "2.5",
                      "--warmup-bursts", "3", "--warmup-kernel-ms", "0.2",
                      "--warmup-stream", "null"])
    assert r.out[-1]["rc"] == 0, r.stderr
    runs = [n for _, n, graphs in map(wire.quota_run, pm.of_type(RequestType.QUOTA)) if graphs]
    # (markers went to the warm-up's stream within the last second: its first tails are short)
    assert len(runs) >= 12 and all(n >= 30 for n in runs[-5:]), runs


def test_two_threads_calibration_tails_are_measured_over_the_union_of_their_streams(
        fake_env, pm):
    """Two threads, each launching 0.2 ms kernels on a stream of its own, in calibration
    tokens.  A segment of one lane counts every lane's launches but spans one lane's run, so the
    segments that begin at a hold (a calibration holds every few ms) were left out where a
    process launches on several lanes: two threads capped at 0.4 measured 26-32 ms of an 80 ms
    tail (H200, 2026-12-03), and their tails spread 170-206 us a launch against about 196.  Here
    a third of what one thread's tails measure (37-96 launches against 197-219).  Now each
    lane's own launches over the union of the lanes' segments on the GPU's clock."""
    pm.quota_ms = 200.0
    pm.quota_flags = wire.QUOTA_FLAG_CALIBRATION
    pm.quota_delay_s = 0.05
    measured = {}
    for threads in (1, 2):
        pm.requests.clear()
        r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "0.2", "--burst", "50",
                          "--stream", "nonblocking", "--sync", "stream", "--seconds", "2",
                          "--threads", str(threads)])
        assert r.out[-1]["rc"] == 0, r.stderr
        runs = [(ms, n) for ms, n, _ in map(wire.quota_run, pm.of_type(RequestType.QUOTA))]
        measured[threads] = [(ms, n) for ms, n in runs[2:] if n]  # (the first ones learn)
        assert len(measured[threads]) >= 5, runs
    one, two = (statistics.median(n for _, n in measured[t]) for t in (1, 2))
    assert two >= 0.45 * one, measured
    # (the fake GPU runs one kernel at a time: 0.2 ms a launch, whatever the stream)
    for t in (1, 2):
        ms, n = (sum(x) for x in zip(*measured[t], strict=True))
        assert ms / n == pytest.approx(0.2, rel=0.06), measured


def test_two_threads_grants_are_measured_whole_over_the_union_of_their_streams(fake_env, pm):
    """Two threads, each launching 0.5 ms kernels on a stream of its own, in paced 40 ms
    tokens, never a sync.  The marker ring keeps only the newest finished marker of all lanes,
    so a lane's segment whose previous marker had left it went unmeasured, while the other
    lane's segments still covered its time: grants read 47-77 launches at 0.52-0.70 ms each
    (H200, two torch threads capped at 0.4: 186-297 us a launch, 169-180 measured whole).
    Now each window counts a token's worth of launches, at their cost."""
    pm.quota_ms = 40.0
    pm.quota_delay_s = 0.06  # paced, as a capped client is
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "0.5", "--burst", "50",
                      "--stream", "nonblocking", "--sync", "none", "--seconds", "2",
                      "--threads", "2"])
    assert r.out[-1]["rc"] == 0, r.stderr
    runs = [(ms, n) for ms, n, _ in map(wire.quota_run, pm.of_type(RequestType.QUOTA))]
    measured = [(ms, n) for ms, n in runs[3:] if n]  # (the first ones learn)
    assert len(measured) >= 8, runs
    assert all(ms / n == pytest.approx(0.5, rel=0.06) for ms, n in measured), runs
    assert statistics.median(n for _, n in measured) >= 0.9 * 40.0 / 0.5, runs


@pytest.mark.parametrize("streams", [8, 96])
def test_a_program_that_takes_the_next_of_many_streams_leaves_its_speed_to_the_clock(
        fake_env, pm, streams):
    """Bursts of four 0.5 ms kernels, each on the next of `streams` streams (96: more than the
    hook has lanes, GEM_LANES), paced 40 ms tokens, never a sync.  Each lane comes back only
    after the others' bursts, its segment holding their time or launches of earlier tokens,
    and lanes past GEM_LANES count their launches in one slot together: on 96 streams grants
    read 0.65-1.25 of the cost here (on 8, about 1.0), and on the H200 CuPy on 96 streams read
    125-160 us a launch of 181, its speed 1.37-1.39 for 1.15, and its highest second 0.476
    capped at 0.4.  Now no grant of more than UNION_LANES_MAX lanes says what it measured: the
    scheduler reads the clock (for 8 as well: how many lanes read right on a GPU is not
    measured; the clock costs a matmul loop a few points of its cap at most)."""
    pm.quota_ms = 40.0
    pm.quota_delay_s = 0.06
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "0.5", "--burst", "4",
                      "--streams", str(streams), "--sync", "none", "--seconds", "2.5"])
    assert r.out[-1]["rc"] == 0, r.stderr
    runs = [(ms, n) for ms, n, _ in map(wire.quota_run, pm.of_type(RequestType.QUOTA))]
    assert len(runs) >= 15, runs
    assert not [(ms, n) for ms, n in runs[3:] if n], runs  # (the first ones may see few lanes)


@pytest.mark.parametrize("light", [1, 3])
def test_a_program_of_graph_replays_is_measured_per_replay(fake_env, pm, light):
    """Replays of 4 kernels of 1 ms, each followed by light kernels (a compiled model's
    copies, an optimizer step), never a sync.  How many light kernels a run window holds moves
    with where the markers fall, not with the work, and made a compiled model's calibrations
    read it fast (H100); so the hook says its GPU time per replay (wire.RUN_GRAPHS): 4 ms and
    the light kernels' 4 us each, where per launch it said half that (one light kernel).  With
    three, no replay's cost was ever learnt: each waited for the queue to run dry, as with no
    cost known, and was measured after a gap (some 6,000 holds a second, runs of 8 us)."""
    pm.quota_ms = 60.0
    r = fake_env.run([prog("gem_client"), "work", "--launch", "graph", "--kernel-ms", "1",
                      "--burst", "4", "--light-kernels", str(light), "--sync", "none",
                      "--seconds", "1"])
    assert r.out[-1]["rc"] == 0, r.stderr
    runs = [wire.quota_run(q) for q in pm.of_type(RequestType.QUOTA)]
    measured = [(ms, n) for ms, n, graphs in runs if n and graphs]
    assert len(measured) >= 5, runs  # (some 16 tokens; the first ones still learn)
    per_replay = 4.0 + 0.004 * light
    assert all(ms == pytest.approx(per_replay * n, rel=0.05) for ms, n in measured), runs


@pytest.mark.parametrize("light", [1, 3], ids=["1 light", "3 light"])
def test_calibrations_of_heavy_kernels_among_light_ones_keep_the_queues_progress(
        fake_env, pm, light):
    """0.5 ms kernels each followed by light ones (4 us), never a sync, every token a 200 ms
    calibration answered 60 ms late.  A calibration marks about every launch, twice at each
    hold: the 10 ms it queues ahead held more launches' markers than a ring of 64, which
    dropped its oldest, the ones the GPU was nearest to.  Then no marker was seen finished for
    up to 150 ms, the estimate ran on a cost learnt low, and every token ran 6-29 ms past (one
    light kernel to each heavy one: 60 ms past each from the fourth on, 150 ms unseen).  And
    the holds come before heavy launches (those are what no longer fit): while the segments
    after them taught no cost, it was learnt from the light kernels' alone, 13-320 us a launch
    against 252 with one light kernel, and a token in some 20 ran 60 ms past (8 runs in 24,
    beside two busy loops; the cost off by a quarter in 14).  Now those segments teach where
    one lane launches (gate.costs_from_holds)."""
    pm.quota_ms = 200.0
    pm.quota_flags = wire.QUOTA_FLAG_CALIBRATION
    pm.quota_delay_s = 0.06
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "0.5", "--burst", "50",
                      "--light-kernels", str(light), "--sync", "none", "--seconds", "2.5"],
                     GEMINI_LOG="debug")
    assert r.out[-1]["rc"] == 0, r.stderr
    quotas = pm.of_type(RequestType.QUOTA)[3:]
    overuse = [q.args[0] for q in quotas]
    assert len(overuse) >= 5, overuse
    assert max(overuse) < 30.0, overuse
    assert statistics.median(n for _, n, _ in map(wire.quota_run, quotas)) > 0, quotas
    # The cost as the hook learnt it, from its second debug line on (the first can come from a
    # burst's heavy kernels alone): the mean of a heavy kernel and its light ones.
    per_launch_us = (500.0 + 4.0 * light) / (1 + light)
    costs = [float(c) for c in COST_LINE.findall(r.stderr)][1:]
    assert costs and all(c == pytest.approx(per_launch_us, rel=0.25) for c in costs), costs
    assert r.stats["gate.costs_from_holds"] > 0, r.stats  # (one lane: its holds teach)


@pytest.mark.parametrize("threads,sharers", [(2, 0), (1, 2)],
                         ids=["two threads", "a token two processes share"])
def test_a_holds_segment_teaches_no_cost_beside_other_queues(fake_env, pm, threads, sharers):
    """0.5 ms kernels, paced 40 ms tokens.  A segment that begins at a hold spans the time the
    held lane waited: where another lane queued meanwhile, that lane's kernels ran in it (two
    threads taught 640-758 us a launch so, fake GPU), as another process's would where the
    client's token is shared.  There a hold's segment teaches nothing (inflight_costs.c,
    hold_teaches); the queue is then estimated as the token's sharers' (test_shared_token)."""
    pm.quota_ms = 40.0
    pm.quota_delay_s = 0.06
    pm.sharers = sharers
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "0.5", "--burst", "50",
                      "--threads", str(threads), "--sync", "none", "--seconds", "2.5"],
                     GEMINI_LOG="debug")
    assert r.out[-1]["rc"] == 0, r.stderr
    assert r.stats["gate.holds"] > 0 and r.stats["gate.costs_learnt"] > 0, r.stats
    assert r.stats["gate.costs_from_holds"] == 0, r.stats
    if threads == 1:  # (two threads' other segments may hold the other lane's kernels too:
        # 704.5 us once in a full `make test`, the holds teaching nothing)
        costs = [float(c) for c in COST_LINE.findall(r.stderr)]
        assert costs and all(c == pytest.approx(500.0, rel=0.15) for c in costs), costs


def test_a_calibration_token_is_not_queued_to_its_end(fake_env, pm):
    """A calibration runs the GPU continuously, so its clock falls and each launch takes
    longer than in the ordinary grants the cost per launch was learnt in (an H100 10-15 %).
    Queued to the end of a 200 ms token at the ordinary cost, the work ran 17.8-20.6 ms past
    it (CUDA graphs, 2026-11-25).  In a calibration the queue runs at most a few ms ahead, and
    an error of the cost costs a few percent of that.  Here the cost is learnt on 0.5 ms
    kernels and the calibration runs 0.6 ms ones: queued to the end, 400 of them ran 40 ms past
    the token."""
    pm.quota_ms = 200.0
    pm.quota_flags = wire.QUOTA_FLAG_CALIBRATION
    pm.quota_delay_s = 0.05  # paced, as a capped client is: the work past a token is overuse
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "0.6", "--burst", "400",
                      "--warmup-bursts", "4", "--warmup-launches", "100",
                      "--warmup-kernel-ms", "0.5", "--sync", "stream", "--bursts", "2"])
    assert r.out[-1]["rc"] == 0, r.stderr
    overuse = [q.args[0] for q in pm.of_type(RequestType.QUOTA)]
    assert len(overuse) >= 4, overuse  # 200 + 480 ms of work in 200 ms tokens
    assert max(overuse) < 5.0, overuse


@pytest.mark.parametrize("light,flags", [(1, wire.QUOTA_FLAG_CALIBRATION), (3, 0),
                                         (3, wire.QUOTA_FLAG_CALIBRATION)],
                         ids=["1 light, calibration", "3 light", "3 light, calibration"])
def test_replays_among_light_kernels_are_queued_at_their_own_cost(fake_env, pm, light, flags):
    """Replays of 0.8 ms, each followed by light kernels (4 us), never a sync: torch.compile
    with CUDA graphs.  Learnt as one cost per launch, a segment of one light kernel brought it
    down to a fraction of a replay's, and the holds of a calibration (every few ms) left the
    replays' segments out of it and the light ones in: the queue was estimated at a third of
    its length, and every calibration token ran through the 50 ms to the next (ordinary ones
    with 3 light kernels: 3-35 ms)."""
    pm.quota_ms, pm.quota_flags = 200.0, flags
    pm.quota_delay_s = 0.05  # paced, as a capped client is: the work past a token is overuse
    r = fake_env.run([prog("gem_client"), "work", "--launch", "graph", "--kernel-ms", "0.2",
                      "--burst", "4", "--light-kernels", str(light), "--sync", "none",
                      "--seconds", "1.5"])
    assert r.out[-1]["rc"] == 0, r.stderr
    overuse = [q.args[0] for q in pm.of_type(RequestType.QUOTA)]
    assert len(overuse) >= 5, overuse  # (some 6 tokens of 250 ms)
    assert max(overuse) < 5.0, overuse


def last_launches_of_tokens(fake_env, pm, quota_ms: float, launch: str) -> list:
    """Replays of 4 ms (or kernels of 4 ms), never a sync, in `quota_ms` tokens answered 50 ms
    late: the overuse reported with each request."""
    pm.quota_ms = quota_ms
    pm.quota_delay_s = 0.05  # paced, as a capped client is: the queue runs out between tokens
    shape = ["--kernel-ms", "1", "--burst", "4"] if launch == "graph" else [
        "--kernel-ms", "4", "--burst", "1"]
    r = fake_env.run([prog("gem_client"), "work", "--launch", launch, *shape, "--sync", "none",
                      "--bursts", "160"])
    assert r.out[-1]["rc"] == 0, r.stderr
    return [q.args[0] for q in pm.of_type(RequestType.QUOTA)]


@pytest.mark.parametrize("launch", ["graph", "kernel"])
@pytest.mark.parametrize("quota_ms", [31.0, 29.0])
def test_the_last_launch_of_a_token_goes_if_half_of_it_fits(fake_env, pm, quota_ms, launch):
    """Replays of 4 ms (or kernels of 4 ms), never a sync, in tokens answered 50 ms late: seven
    fill 28 ms.  In a 31 ms token the eighth ends 1 ms past it (a quarter of it), and goes; it
    used to be held, and the GPU idled for the token's last 3 ms (on the H100, half a replay a
    token on average: time granted and not used).  In a 29 ms token it would end 3 ms past, and
    is held.  Kernels of 4 ms used to go one more than fitted after each look (the hot path's
    allowance was one at least): on the H200 kernels of 11 ms ran 20-60 ms past their tokens
    (2026-12-02)."""
    overuse = last_launches_of_tokens(fake_env, pm, quota_ms, launch)
    later = overuse[3:]  # (the first tokens learn what a replay costs)
    if quota_ms > 30:  # 640 ms of work: 20 tokens of eight replays (of seven: 23)
        assert len(overuse) <= 21, overuse
        assert 0.5 <= statistics.median(later) <= 2.0, overuse
    else:  # an eighth would end 3 ms past, in every token; an idle machine reads 0 in all
        # (a loaded one read 1.01 once, and 2.06 once in CI: a launch the host stopped at the
        # token's end, in one token of 20)
        assert statistics.median(later) < 1.0, overuse
        assert sum(x >= 2.0 for x in later) <= 2, overuse


def test_a_burst_longer_than_a_token_runs_on_what_is_left(fake_env, pm):
    """Asking early helps a burst that one token would hold.  One that outlasts the tokens is
    split whatever the hook does; asking at its start would only leave the GPU idle for a round
    trip at every sync (issue 12: a capped client lost 1-2 points of its time so)."""
    pm.quota_ms = 30.0
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "5", "--burst", "10",
                      "--sync", "ctx", "--bursts", "8"])
    assert r.out[-1]["rc"] == 0, r.stderr
    # 50 ms bursts in 30 ms tokens: each starts with 10 ms or less left of a token
    assert r.stats["gate.fetch_burst"] == 0, r.stats
    assert r.stats["gate.fetch_tail"] + r.stats["gate.fetch_expired"] >= 12, r.stats


def test_one_burst_cut_by_a_token_does_not_make_short_bursts_ask_early(fake_env, pm):
    """v1 predicts a burst as the longest of the last 3 s, and a burst that a token's end cut
    counts as long as it ran.  After one (a program's start-up), every short burst after it
    found what was left of its token shorter than that and handed it back: 90 tokens in a
    second of warm-up, each used for about 3 ms (H100, torch eager and two-thread loops capped
    at 0.4, 2026-11-25).  Only a burst that fitted in its token says what the next one needs."""
    pm.quota_ms = 30.0
    # one 60 ms burst (cut by its token's end), then 60 bursts of 3 ms: 6 of them to a token
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "1", "--burst", "3",
                      "--warmup-bursts", "1", "--warmup-launches", "60",
                      "--warmup-kernel-ms", "1", "--sync", "ctx", "--bursts", "60"])
    assert r.out[-1]["rc"] == 0, r.stderr
    # A 3 ms burst starts in a token's last 3 ms once a token at most (7 or so); read 23 once
    # in a full `make test` on the loaded 2-core machine (a burst the host stopped reads long,
    # and fits: for 3 s the bursts near a token's end then ask early).  Before, every short
    # burst after the cut one handed its token back.
    assert r.stats["gate.fetch_burst"] <= 30, r.stats


def test_a_sync_empties_the_queue_estimate(fake_env, pm):
    """After a sync nothing launched before it is queued: a burst that starts near a token's
    end is not held for work that has already run (the GPU would sit idle)."""
    pm.quota_ms = 30.0
    # (v1's early request off: with it, most bursts start on a fresh token and hide this)
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "5", "--burst", "4",
                      "--sync", "stream", "--bursts", "30"], GEMINI_HOOK_BURST_FIT="0")
    assert r.out[-1]["rc"] == 0, r.stderr
    # 30 bursts of 20 ms in 30 ms tokens, each answered at once: only the round trips and the
    # kernel in flight at a token's end are not work (0.94-0.98 of the time busy on an idle
    # 2-core machine, 0.846 once under load)
    busy = r.out[-1]["gpu_ms"] / 1000 / r.out[-1]["wall_s"]
    assert busy > 0.8, (busy, r.stats)


def interactive(bursts: int, idle_ms: float = 30) -> list[str]:
    """Short bursts with `idle_ms` of idle after each (in tokens shorter than that, every burst
    finds its token gone)."""
    return [prog("gem_client"), "work", "--kernel-ms", "0.2", "--burst", "1", "--sync", "stream",
            "--idle-ms", str(idle_ms), "--bursts", str(bursts), "--allocs", "1",
            "--bytes", str(1 << 20), "--report-every", "0.001"]


@pytest.mark.parametrize("flags", [0, wire.QUOTA_FLAG_ALONE])
def test_only_a_token_granted_alone_lets_a_launch_go_on_credit(fake_env, pm, flags):
    pm.quota_ms, pm.quota_flags = 20.0, flags
    r = fake_env.run(interactive(12))
    assert r.out[-1]["rc"] == 0, r.stderr
    if flags:  # after the first, every burst went on credit while the renewer asked
        assert r.stats["gate.fetch_credit"] >= 10, r.stats
        assert r.stats["gate.fetch_expired"] <= 1, r.stats
    else:  # each waited for its round trip
        assert r.stats["gate.fetch_credit"] == 0, r.stats
        assert r.stats["gate.fetch_expired"] >= 11, r.stats


def test_a_launch_on_credit_does_not_wait_for_the_answer(fake_env, pm):
    """Alone, a burst that comes after the token ran out during idle does not wait for the
    round trip: it runs while the answer is held; the one after it waits (the credit is a
    tail's worth of work).  The token is 100 ms: the first burst's launch must look before
    the token's tail (with 20 ms, a host that stopped it for 15 ms made it ask there, the
    answer was held, and no burst went again: seen once in CI)."""
    pm.quota_ms, pm.quota_flags = 100.0, wire.QUOTA_FLAG_ALONE
    pm.hold_quota_after = 1  # the first burst's token, then every answer waits
    proc = fake_env.start(interactive(1000, idle_ms=150))
    try:
        kernels = 0
        while kernels < 2:  # the second burst is the credit's (stuck at 1: it waited)
            _, line = proc.lines.get(timeout=10)
            if line.startswith("{"):
                kernels = max(kernels, json.loads(line)["kernels"])
        assert len(pm.of_type(RequestType.QUOTA)) == 2  # its request, still held
        pm.release()
    finally:
        proc.kill()


def busy_over_late_answers(fake_env, pm, quota_ms: float, flags: int, delay_s: float,
                           kernel_ms: str, **env: str) -> tuple[float, dict]:
    """One burst of 2000 kernels that keeps the GPU busy, its tokens answered `delay_s` late:
    the share of its wall time the GPU was busy (the first token's wait included), and the
    hook's gate counters."""
    pm.quota_ms, pm.quota_flags, pm.quota_delay_s = quota_ms, flags, delay_s
    r = fake_env.run(
        [prog("gem_client"), "work", "--kernel-ms", kernel_ms, "--burst", "2000", "--bursts", "1",
         "--sync", "stream", "--allocs", "1", "--bytes", str(1 << 20)], **env)
    end = r.out[-1]
    assert end["rc"] == 0, r.stderr
    return end["gpu_ms"] / 1000 / end["wall_s"], r.stats


@pytest.mark.parametrize("flags", [0, wire.QUOTA_FLAG_ALONE])
def test_alone_the_next_token_is_asked_for_before_the_queue_runs_dry(fake_env, pm, flags):
    """A program that keeps the GPU busy, its answers 40 ms late, the tail 20 ms (all scaled
    up from 1 ms, so that a loaded machine cannot blur them).  Shared, the hook asks in the
    tail and the GPU idles for the rest of the round trip at every token: it must, as what is
    queued at the ask runs on the next client's time.  Alone, it asks GEMINI_HOOK_ALONE_EARLY_US
    sooner, and the queue covers the round trip (before: busy 0.896 of the time either way)."""
    busy, stats = busy_over_late_answers(fake_env, pm, 200.0, flags, 0.04, "1",
                                         GEMINI_HOOK_TAIL_US="20000",
                                         GEMINI_HOOK_ALONE_EARLY_US="40000")
    # The program waits for its first token (40 ms) and, shared, for each next one at its tail
    # (0.23 s in all); alone, for no other.
    waited_s = stats["gate.fetch_ns"] / 1e9
    if flags:  # (0.96-0.99 alone on this machine, 0.931 once in a full `make test`; 0.896
        assert busy >= 0.915 and waited_s < 0.12, (busy, stats)  # before, where the GPU ran
    else:  # dry at every token)
        assert busy <= 0.93 and waited_s > 0.15, (busy, stats)


@pytest.mark.parametrize("learn", [False, True])
def test_alone_the_hook_asks_as_much_sooner_as_its_round_trips_take(fake_env, pm, learn):
    """The same, on a slower host: answers 80 ms late, against the tail's 20 ms and the 20 ms
    asked sooner at least (scaled up 20x from 4 ms, 1 ms and 1 ms).  A lead of 40 ms left the
    GPU idle for the other 40 ms of every round trip; the hook now asks sooner by the round
    trip it measured on its renewals (common/roundtrip.c), within a quarter of its 400 ms token
    (GEMINI_HOOK_ALONE_EARLY_MAX_US set to 20 ms: at most the floor, as before)."""
    busy, stats = busy_over_late_answers(
        fake_env, pm, 400.0, wire.QUOTA_FLAG_ALONE, 0.08, "2", GEMINI_HOOK_TAIL_US="20000",
        GEMINI_HOOK_ALONE_EARLY_US="20000",
        GEMINI_HOOK_ALONE_EARLY_MAX_US="100000" if learn else "20000")
    # (the first renewal's gap included: 0.97 at most learning, 0.91 not learning, as a lead
    # of 40 ms leaves 40 of every 440 idle; 0.9498 once on a loaded 2-core machine)
    # The program waited for its first token (80 ms) and, learning, for the first renewal's
    # (0.12 s in all; 0.45 s not learning, some 40 ms at each token).
    waited_s = stats["gate.fetch_ns"] / 1e9
    if learn:
        assert busy >= 0.935 and waited_s < 0.25, (busy, stats)
    else:
        assert busy <= 0.93 and waited_s > 0.3, (busy, stats)


def test_a_held_launch_of_ms_asks_a_tail_before_the_queue_runs_dry(fake_env, pm):
    """Bursts of two 200 ms kernels, a sync after each, in 290 ms tokens each answered 50 ms
    after it was asked for (a capped client's turns), the tail 20 ms (scaled up from kernels of
    11 ms and the 1 ms tail): one kernel runs, the next does not fit (it would go if half of it
    did), and the GPU runs dry 90 ms before the token's end.  Asking in the token's tail
    handed the token back 270 ms into it, the GPU idle for the last 70 ms of that (on the
    H200 a client capped at 0.4 did 0.354 of its bare work so); now the held launch asks a
    tail before the queue ahead of it runs dry: 180-200 ms into the token.  Before that, the
    50 ms wait for the token was taken off the first kernel's estimate as work done, and the
    second went too, 110 ms past every token."""
    pm.quota_ms, pm.quota_delay_s = 290.0, 0.05
    r = fake_env.run(
        [prog("gem_client"), "work", "--kernel-ms", "200", "--burst", "2", "--bursts", "8",
         "--sync", "stream"], GEMINI_HOOK_TAIL_US="20000")
    assert r.out[-1]["rc"] == 0, r.stderr
    # how far into each token the next was asked for (each answer, and the request after it)
    into = [(asked - granted) * 1000
            for granted, asked in zip(pm.quota_answered, pm.quota_asked[1:], strict=False)]
    assert len(into) >= 8, into
    later = into[2:]  # (the first tokens learn what a kernel costs)
    assert statistics.median(later) <= 230, into
    overuse = [q.args[0] for q in pm.of_type(RequestType.QUOTA)][3:]
    assert statistics.median(overuse) < 20.0, overuse


@pytest.mark.parametrize("ticks", ["auto", "0"])
def test_a_program_the_host_paces_asks_in_every_tokens_tail(fake_env, pm, ticks):
    """A launch every millisecond, never a sync: the GPU keeps up and the hot path may go up to
    1024 launches between looks, so only its clock read sees the token's tail come, read from
    the CPU's time-stamp counter (where the kernel's clocksource is "tsc", as on the machines
    tested) or from clock_gettime (GEMINI_HOOK_TICKS=0).  Without it the next token was asked
    for only once the tracker saw the token gone: 0-1 requests in 50 in the tail."""
    pm.quota_ms = 30.0
    env = {"GEMINI_HOOK_TAIL_US": "5000"}  # (5 launches' worth: a loaded machine's late sleeps)
    if ticks != "auto":
        env["GEMINI_HOOK_TICKS"] = ticks
    r = fake_env.run([prog("gem_client"), "work", "--kernel-ms", "0.02", "--burst", "1",
                      "--sync", "none", "--idle-ms", "1", "--seconds", "1.5"], **env)
    assert r.out[-1]["rc"] == 0, r.stderr
    # (the hot path did go between looks: on an idle allowance, or once each token's first
    # launch, measured alone, taught a cost, on that cost's)
    assert r.stats["gate.slow"] < r.stats["cuLaunchKernel"] // 2, r.stats
    requests = len(pm.of_type(RequestType.QUOTA))
    assert requests >= 20, r.stats  # 1.5 s of 30 ms tokens
    assert r.stats["gate.fetch_tail"] >= requests // 2, r.stats
