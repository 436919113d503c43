"""The scheduler's logic for one GPU, without sockets or clocks (Gemini spec §3).

Rules:
- One token per GPU.  A token is granted to a waiting QUOTA request and ends when its quota
  expires or when its holder sends its next QUOTA request (the implicit early return), but for
  a request that comes within RENEWAL_LEAD_S of the grant's hand-over while others wait (or from
  a capped client): its hook's queue runs to the token's end, and so does the grant.
- A request first ends the client's last interval if it still runs (an early return), then
  charges the overuse it reports at that interval's end.  (Gemini extends the last interval,
  `end = min(now, end + overuse)`, which loses the overuse of a token returned early: the
  hook reports a token's overuse with a later request, once measured.)  The hook reports only
  what ran while the client held no token (csrc/hook/token_tracker.c).  The clients granted the GPU
  while it ran lost that time from their grants: it is given back to them (`overrun_s`), to
  the next grant too where it was reported before that grant was made.
- When a quota expires, its holder counts as waiting for `return_grace_s` more: if it is the one
  to serve next, the token waits that long for its request (the decision is otherwise unfair
  to busy clients, whose next request races the expiry).
- Waiting clients are picked by `policy.pick`: the one owed most GPU time (`policy.Credits`, a
  bounded lag against its target share, not Gemini's 10 s usage, whose catch-ups echo a window
  later); a client at its limit waits even if the GPU is idle (the limit is a hard cap).
- A cap holds over the short window (`Timing.short_window_s`, 1 s) as well as the long one,
  and no grant is longer than a tenth of the short window (`_short_grant_s`; but, with
  `Timing.lone_turns`, a capped client alone's, paced in turns of a whole part of the short
  window: `_lone_turn_s`, and with `Timing.shared_turns` capped neighbours' too); 0 turns both
  off (Gemini's own quotas).  While others wait, grants are in proportion to the target shares
  (a round of turns lasts about one such grant), so every share holds over the short window.
- A connection that goes away loses its queued requests; if it held the token, the token ends now.
- A new config applies to the next decision (a lowered cap: its windows count from the edit,
  not the time used under the old cap, and a grant its client holds is cut to the new cap:
  `_cut_lowered_holder`); removed clients are refused new tokens, changed
  memory limits (and unified-memory flags) are pushed to the pod managers of that client.
- Unified-memory clients (gemini.core.um) get their flags in MEM_LIMIT replies and a quota of at
  least the UM minimum, so that migrating their data stays a small part of their time.
- Caps hold by work where the GPU's clock is known (`on_clock`: the shell's samples of the SM
  clock): a capped client's grants are charged at its speed (gemini.core.speed: how much faster the
  GPU runs its grants than it runs it continuously, which its idle gaps cause, as far as the GPU
  sets its pace: the QUOTA request's gpu_wait_ms), as a charge at its grant's end when it next asks;
  alone (or beside capped clients only that leave the GPU idle between them: `_idles_between`), a
  capped client gets a calibration grant (`speed.CALIBRATION_S`, or half what its short window
  allows it: `_calibration`; no longer than its 1 s windows can pay back, `speed.LUMP_BOUND`,
  where its speed is read by work or it has capped neighbours; none under 0.1 s, as for a cap
  of 0.1, or of 0.2 beside capped neighbours)
  `speed.FIRST_CALIBRATION_S` after its first reading, every `speed.SETTLING_EVERY_S` for its first
  `speed.SETTLE_S`, and every `speed.CALIBRATE_EVERY_S` after that, once it has the room for it.
  Until its speed is known it is charged a likely one, scaled down where it and its neighbours leave
  the card idle less (`_idle_share`: none beside an uncapped client).
- With `Timing.shared_speed`, shares of uncapped clients beside each other hold by work too:
  the power limiter sets one clock for all, which a light program runs slower at than alone
  and a power-hungry one faster.  Each gets short calibration grants
  (`speed.SHARED_CALIBRATION_S`: alone, while the others wait, once the GPU has been busy for
  `speed.SHARED_STEADY_S`: the power limiter dips the clock after an idle; half its excess
  charged ahead, `speed.SHARED_PREPAY`) and is charged its speed in its credit, and the credit
  each earns is shifted alike for all (`_by_work`) so that the GPU's time adds up.

Inputs are `on_*` methods taking `now` (seconds, any monotonic origin); each returns actions.
`next_deadline()` says when `on_deadline` must be called.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

from gemini.core import actions as act
from gemini.core.actions import Action, ConnId, Reply
from gemini.core.config import ClientSpec, ResourceConfig
from gemini.core.policy import Credits, Pacer, Standing, by_work, next_quota, pick, targets
from gemini.core.speed import (
    CALIBRATION_S,
    IDLE_GAP_S,
    LUMP_BOUND,
    SHARED_CALIBRATED_MAX,
    SHARED_CALIBRATION,
    SHARED_PREPAY,
    SHARED_STEADY_S,
    SHARED_STEADY_WAIT_S,
    Calibration,
    SpeedMeter,
    capped_calibration,
    fitted_calibration,
)
from gemini.core.um import UmPolicy, is_um, mem_flags, um_least_s, um_quota
from gemini.core.window import Interval, UsageHistory
from gemini.core.wire import (
    CUT_ID,
    DELIVERY_MAX_MS,
    NOTIFY_ID,
    QUOTA_FLAG_ALONE,
    QUOTA_FLAG_CALIBRATION,
    REPORT_APPLIES_CUTS,
    Request,
    RequestType,
    Response,
    Status,
    quota_alias,
    quota_args,
    quota_run,
    said_name,
)

MS = 1000.0
# When every waiting client is capped, look again no sooner than this (seconds).
MIN_RECHECK_S = 0.001
# Clock samples older than this say the shell no longer reads the clock: no calibrations then.
CLOCK_STALE_S = 1.0
# A capped client's windows allow this part of one paced grant over limit x window (30 ms at
# 0.4): room to catch up the time it waited for a calibration's room and for round trips.  A
# whole grant kept its share within a point (0.398 on the simulator) but let windows that catch
# up reach the limit + 4 points by the books, 0.442-0.458 by work on an H100 (2026-11-25);
# three quarters: 0.392, 0.431 on the simulator.
WINDOW_EDGE = 0.75
# ...and at most this part of the short window (40 ms of 1 s), a point under the issue's bound
# for the speed's error: a paced grant is longer where the minimum quota stretches it
# (gem-schd's default -m 100: 100 ms at any cap, so 75 ms over, and a 0.4 cap's seconds
# reached 0.475 of its work on the simulator, now 0.439) or at a high cap (0.7: 52 ms; the
# highest second of torch eager capped at 0.7 read 0.750-0.752 on the H100, 2026-11-26; on the
# simulator 0.738, now 0.731).  30 ms left a 0.7 cap 2.1 points under over 10 s there: its
# calibrations' windows could not catch up.
WINDOW_EDGE_MAX = 0.04
# With Timing.lone_turns, a capped client alone is paced in turns of a whole part of the short
# window (1/K s), each grant at least this much of its work: a calibration then fits in one
# of its grants, and is no lump.  Paced in 100 ms turns, each grant 40 ms at 0.4, a 125 ms
# calibration put 75 ms more in the 1 s windows that held it, paid back around it, and those
# windows read 4.5-8.2 points under on the H100 (2026-12-06; no split of the pay-back does
# better than half of it).  And each grant is its limit's part of a turn in work, not in time
# (its length ÷ its speed), so that its pace comes round in exactly one turn and every 1 s
# window holds K whole turns: 40 ms granted at a speed of 1.1 came round every 110 ms, and a
# 1 s window held 9 or 10 of them.  On the simulator a 0.4 cap alone read -4.5 / +4.3 points
# over its 1 s windows, with them -0.7 / +2.0.  The cost: longer rests between its grants
# (200 ms at 0.4, 800 at 0.2), where nobody else wants the GPU.  A calibration's clock settles
# in ~100 ms (speed.py), and a grant of 120 ms of work is that long in time at a speed up to
# 1.2.
LONE_PACED_WORK_S = 0.12
# The room a capped grant waits for: a little under the grant will do.  A holder that returned
# its token early left intervals a little shorter than the room they were given, and waiting
# for the whole room would then wait for a whole interval more to slide out.
ENOUGH_OF_A_GRANT = 0.9
LONE_RECHECK_S = 0.001  # (_room_wait_s)
# ...for a client whose bursts, as its hook says, fill the longest grant it has had, less a
# tenth.  A hook says no burst longer than its longest token (csrc/hook/token.h), so a program
# that runs on says that, while one that syncs every 60 ms says 60 once it has had a longer
# grant, and leaves for good (the longest only grows: no going back and forth).  Not its
# quota: that follows the grants, and a quota checked against a lone grant kept Triton in
# 40 ms grants for good, and sent torch eager from one kind to the other every second or so
# (H100, 2026-12-06 22:34).  Nor a calibration: JAX's first, 200 ms while it still set itself
# up, was longer than the bursts its hook said after (114-125 ms), and kept it in 40 ms grants,
# its seconds 0.335-0.432 of its work at 0.4 (H100, 2026-12-07 01:00).  Nor its longest grant
# where its latest in lone or shared turns was shorter: those shrink as its speed is read
# higher, and a program that runs on says its bursts as long as its tokens: 0.5 beside 0.4
# in shared turns, its grants from 166 to 146 ms at a speed of 1.14, said 146 and left them
# for good (H200, 2026-12-07 05:55).  One that syncs every 60 ms still leaves for good: its
# latest grant in turns stays the one it could not fill.  It leaves on two such bursts in a
# row, not one (ClientState.previous_burst_s).
LONG_BURST = 0.9
# With Timing.shared_turns, capped clients side by side are paced in such turns too, all in
# the same (K the smallest of theirs), each its own grant, while their caps add up to no more
# than this (a calibration beside others is no longer than such a grant already:
# speed.LUMP_BOUND).  In 100 ms turns a calibration's lump sat in the windows of both, and
# the lows of two capped at 0.3 read 5.0-8.8 points under on the H100 (2026-12-06); in
# shared turns on the simulator (`bench/sim_seconds.py --shared-turns`) two at 0.3 read
# -2.7 / +3.3 (-6.0 / +4.5 without), 0.4 + 0.5 -5.7 / +2.9 (-4.9 / +4.5).  Not in
# turns of a whole second (K = 1, a cap under 0.2 among them; SHARED_PACED_WORK_MIN_S): 0.3 +
# 0.3 beside 0.2 in those held 0.268 of their work each over 40 s, each grant as long as the
# room its last left (2026-12-07, before half seconds for 0.2).  Each is paced from its
# grant's start there, not from its request (policy.Pacer.granted): their caps leave the GPU
# idle, so a wait for it need not be made up, and made up it was a second grant at once,
# whose 1 s window then held nothing more: a 0.3 beside a cap raised from 0.3 to 0.6 held
# 0.129 of its work over a second (H200, 2026-12-07) and 0.141-0.175 on the simulator, 0.296
# now (the raised one 0.586-0.611 from the edit on).
SHARED_TURNS_MAX = 0.95
# ...and one that may go waits for a neighbour there whose pace and room come round within
# this: else it went just before, and the neighbour's grants moved on by its grant for good
# (paced from their grants).  A trio of 0.3, 0.35 and 0.3, the 0.35 lowered to 0.3: its
# calibration, waiting for room, went 20 ms before a neighbour's pace, which held 0.179 of
# its work over a second (0.251 in 100 ms turns), 0.289 now; 10-100 ms read the same on the
# simulator.
SHARED_TURNS_YIELD_S = 0.025
# ...and a group whose smallest cap LONE_PACED_WORK_S leaves whole seconds (K = 1, a cap from
# 0.2 to 0.24 among them) is in half seconds all the same, that cap's grant as short as this
# much of its work: 0.2 + 0.3 + 0.3 stayed in 100 ms turns, whose lumps left their 1 s
# windows 3.5-7.8 points under on the simulator (6.2-7.1 on the H100), in half seconds
# 0.1-1.8 (seeds 1-4, 40 s; on the H100, 2026-12-07 10:52, 1.2 / 1.9 / 3.1 against 3.7 /
# 6.1 / 5.7 in 100 ms turns, one machine).  Not for pairs that K = 2 already holds:
# 0.3 + 0.3 in thirds of a second read 3.3 under, in halves 1.5.
SHARED_PACED_WORK_MIN_S = 0.1


@dataclass(frozen=True)
class Timing:
    base_quota_s: float = 0.250
    min_quota_s: float = 0.100
    window_s: float = 10.0
    # How long an expired holder that should go next may take to ask again before the token goes
    # to someone else.  A busy client asks at about its expiry; without this the scheduler would
    # only ever see the other clients waiting then, and alternate them whatever their shares.
    return_grace_s: float = 0.005
    # The longest quota.  The original allowed LIMIT x window (10 s): a client that runs alone
    # predicts long bursts, and a newcomer then waits that long for its first token.
    max_quota_s: float = 1.0
    # The short window: caps and shares hold over it too, not only over `window_s` (a 0.4 cap
    # over 10 s alone allows 4 s at full speed, then 6 s of nothing).  0 turns it off.
    short_window_s: float = 1.0
    # Uncapped clients beside others share by work (gem-schd --shared-speed; README: "Uncapped
    # clients beside others share by work"), on by default since measured on the H100,
    # 2026-12-06: Triton beside JAX at 0.3/0.7 did 6.1 / 5.7 points off by time over 10 s,
    # within 1.5 by work; alike programs 0.3-0.6 by time, up to 2.2-2.5 by work (a trio's
    # tails, two each at first, read the same program 6-11 % slower for one client than for
    # the others; since 66aa268 alike programs share by time: speed.ALIKE_COST_SPREAD).
    # --no-shared-speed: by time.
    shared_speed: bool = True
    # Hand a holder's GPU on when its hook's token ends, not when its grant does (gem-schd
    # --hand-over-at-arrival, on by default since measured on the H100, 2026-12-05: README,
    # "Hand-overs at the grant's arrival"; off, as in Gemini: --no-...): the grant's end plus the
    # time grants take to reach its pod manager, which the pod manager reports (wire's
    # _REPORT_DELIVERY), up to HAND_OVER_DELAY_MAX_S.  A hook times its token
    # from its receipt, so it ran on past the next holder's start by the difference of the two
    # grants' delays (H200: 0.2-1.7 ms for the 2-6 % of tokens that ran 2.5 ms over, as the
    # GPU time-sliced the two contexts); timing it from the grant instead (gem-pmgr
    # --time-from-grant) cost each client that delay from every token.  Here the GPU idles
    # through the next grant's delivery, booked to no one.
    hand_over_at_arrival: bool = True
    # A capped client alone is paced in turns of a whole part of the short window, each grant
    # as long as a calibration (LONE_PACED_WORK_S; gem-schd --[no-]lone-turns).  On by default
    # since 2026-12-07: alone at 0.4 on the H100, the lowest 1 s window of torch eager, CUDA
    # graphs, Triton and JAX rose from 0.321-0.349 to 0.364-0.386 of their bare work, their
    # highest held at 0.426-0.438 (bench/JOURNAL-issue12.md).
    lone_turns: bool = True
    # Capped clients side by side in shared turns (SHARED_TURNS_MAX; gem-schd
    # --[no-]shared-turns), where lone turns are on.  On by default since 2026-12-07: on the
    # H100, torch eager, the worst 1 s window of two capped at 0.3 went from 6.7 to 3.5 points
    # off, of 0.4 + 0.5 from 8.7 to 4.5, of a trio with a cap lowered from 8.7 to 3.3
    # (bench/JOURNAL-issue12.md, "Shared turns on by default").
    shared_turns: bool = True


def describe_timing(t: Timing) -> str:
    """One line for the log at start: what a run's logs must show to be read right."""
    options = [name for name, on in (("shares by time", not t.shared_speed),
                                     ("hand-overs at the grant's end",
                                      not t.hand_over_at_arrival),
                                     ("no lone turns", not t.lone_turns),
                                     ("no shared turns",
                                      t.lone_turns and not t.shared_turns)) if on]
    return (f"quota {t.base_quota_s * MS:g} ms (min {t.min_quota_s * MS:g}, max "
            f"{t.max_quota_s * MS:g}), window {t.window_s:g} s, short window "
            f"{t.short_window_s:g} s, grace {t.return_grace_s * MS:g} ms"
            + "".join(f", {o}" for o in options))


# The longest delivery delay a hand-over waits for (gem-schd --hand-over-at-arrival).
HAND_OVER_DELAY_MAX_S = DELIVERY_MAX_MS / MS
# A holder that asks again this close to its hand-over, while another client waits (or a
# capped one), is renewing, not done: its hook asks with up to 1 ms of its queue left
# (csrc/hook/token.c DEFAULT_TAIL_NS), queued to its token's end, so the GPU goes on at the
# hand-over, not at the request (_renewing).  Handed over at the request, the next holder's
# first launches reached the GPU while that queue still ran, the GPU switched contexts at once,
# and the last of the queue ran a whole time slice later: 2.2-2.9 ms past the token in 7 % of
# the tokens of pairs of JAX, Triton beside JAX and CUDA graphs, whose requests reached the
# scheduler 0.2 ms (p50) before their grant's end (H100, 2026-12-06; torch eager's 0.6-0.7 ms
# after it, 1.0 ms from hook to scheduler against 0.45).  An early return this close (a program
# whose work ran out) idles the GPU up to this long.
RENEWAL_LEAD_S = 0.002
# A grant made alone (QUOTA_FLAG_ALONE): its hook asks up to 4 ms sooner still, to go on
# without a gap (csrc/hook/token_fetch.c, alone_early_max_ns), its queue running to the end.
ALONE_RENEWAL_LEAD_S = RENEWAL_LEAD_S + 0.004
# A grant a lowered cap would shorten by less than this runs on (_cut_lowered_holder): the cut
# costs two messages, and the GPU's queue past it runs as overuse all the same.
CUT_MIN_S = 0.005
# No capped client is calibrated this long after a cap changed: the card's load changed with
# it, and its power limiter swings the clock for the first seconds after (as after the card goes
# busy: speed.SHARED_STEADY_S).  On the H100 (2026-12-07 16:04-16:11, b raised from 0.3 to 0.6
# beside a at 0.3) a's calibration 1.0-1.4 s after the edit read 224-236 us a launch, 15-23 %
# over its tails before and 9-15 % over its next ones (202-208: the card busier): its tails
# then disagreed (speed.RUN_SPREAD_MAX), it was read by the clock, the pair left shared turns,
# and a's 1 s windows read 0.207-0.217 of its work, in 4 runs of 6.
CAPS_SETTLE_S = 3.0


@dataclass
class TopUp:
    """What a cap raised in shared turns owes its client before its next grant's place comes
    round (SchedulerCore._top_up_raised)."""

    seconds: float  # still to be granted
    until: float  # its next grant's place (its pace): from then the new cap holds grant by grant


@dataclass
class ClientState:
    spec: ClientSpec
    quota_s: float
    burst_s: float = 0.0
    previous_burst_s: float = 0.0  # (the one said before: LONG_BURST)
    # The grant each of those was said after (_turns_grant_s then, or the turn grant before it
    # where shorter; inf: none yet): its hook's burst follows its grants, a grant or two late,
    # and is judged against what it knew.
    burst_after_s: float = math.inf
    previous_burst_after_s: float = math.inf
    mem_used: int = 0
    processes: int = 0
    waiting: int = 0
    conns: set[ConnId] = field(default_factory=set)
    tokens: int = 0  # grants so far (for the metrics: counters never go down)
    longest_grant_s: float = 0.0  # (but calibrations; its hook says no longer burst: LONG_BURST)
    turn_grant_s: float = 0.0  # its latest such grant in lone or shared turns (LONG_BURST)
    previous_turn_grant_s: float = 0.0  # the one before it
    turn_s: float = 0.0  # the turn its latest grant was paced in (_lone_turn_s; 0: 100 ms ones)
    turn_mates: frozenset[str] = frozenset()  # the others in that turn, if shared (speed.py)
    overuse_s: float = 0.0  # overuse charged so far
    overrun_s: float = 0.0  # of its grants, what others' overuse took and was given back
    speed_charge_s: float = 0.0  # charged for its speed so far (gemini.core.speed)
    placed_at: float = -math.inf  # when a raised cap last placed its pace (_top_up_raised)
    # The grant weighed before the latest: a request's run is that grant's (its queue ran out
    # after the client asked for the next: wire.quota_run), read as its flags say then (a
    # calibration, shared, cut short: a grant weighed as its hook asked ahead may be cut after).
    weighed_before: Interval | None = None
    calibration: Calibration | None = None  # its latest calibration grant's, as meant
    delivery_s: float = 0.0  # how long its grants take to reach its pod manager (REPORT)
    delivery_warned: bool = False  # (a delay out of range is logged once a client)


@dataclass(frozen=True)
class TurnVerdict:
    """Which turns a capped client's grant is paced in (SchedulerCore._turn_and_why)."""

    turn_s: float  # 0: the usual ones (_turn_s)
    why: str = ""  # where 0, why (for the log's "back in 100 ms turns")
    mates: frozenset[str] = frozenset()  # the others in it, where shared


@dataclass
class Candidate:
    conn: ConnId
    name: str
    req_id: int
    arrived: float


@dataclass
class Grant:
    conn: ConnId
    interval: Interval
    # Its pod manager gone while its processes ran (on_disconnect): when the GPU goes on, as
    # their hooks run on to their token's end.
    orphaned_until: float | None = None
    alone: bool = False  # made with QUOTA_FLAG_ALONE: its hook asks sooner (_renewing)
    limit: float = 1.0  # its client's cap when it was made (_cut_lowered_holder)


class SchedulerCore:
    def __init__(
        self, config: ResourceConfig, timing: Timing, now: float, um: UmPolicy | None = None
    ) -> None:
        self.timing = timing
        self.um = um if um is not None else UmPolicy()
        self.started_at = now
        # The window fills from the first request on, not from start-up: counting an idle
        # start as part of a young window gives a capped client nothing to slide out when the
        # window turns full, and it stalls for as long as the daemon sat idle (bench S5).
        self.first_request_at: float | None = None
        self.clients: dict[str, ClientState] = {}
        self.removed: set[str] = set()
        self.history = UsageHistory()
        self.candidates: list[Candidate] = []
        self.holder: Grant | None = None
        self._recheck_at: float | None = None  # set when every waiting client is capped
        # (a client waited for, until when: _waits_in_shared_turns)
        self._waited_for: tuple[str, float] | None = None
        self._grace: tuple[str, float] | None = None  # expired holder, until when
        self._refused: set[ConnId] = set()  # connections refused since they were last served
        # A client's overrun that no grant covered yet when it was reported: (its client,
        # from, until); the next grant to another client within it was partly taken by it.
        self._overrun: tuple[str, float, float] | None = None
        # Enough to owe a waiting client what one whole grant of another costs it (set with
        # each config: _credit_bound_s).
        self.credits = Credits(2 * self._turn_s, now)
        self.pacer = Pacer()
        self.speed = SpeedMeter()
        self._clock_at: float | None = None  # when clock samples last came in
        # Calibration grants whose readings are not all in yet (said in the log once they are).
        self._calibrations: list[Interval] = []
        # The calibration due to each client at the latest decision (_standings), granted as is
        self._due_calibrations: dict[str, Calibration | None] = {}
        # The latest grant, and when the GPU's stretch of grants with no idle between them
        # began (_steady).
        self._latest_grant: Interval | None = None
        self._busy_since = now
        # Since when each uncapped client with a calibration due has waited for a steady card.
        self._unsteady_since: dict[str, float] = {}
        # Whether the log last said each client was taken for one program with others.
        self._alike_said: dict[str, bool] = {}
        # Each uncapped client's speed beside others, as of its latest grant weighed.
        self._shared_speeds: dict[str, float] = {}
        # When a client's cap was last lowered (or set): its windows count from then (_room).
        self._capped_since: dict[str, float] = {}
        # A cap raised in shared turns: what its client is owed before its next grant's place
        # comes round (_top_up_raised), and the part of it each may be granted at the latest
        # decision.
        self._top_ups: dict[str, TopUp] = {}
        self._top_up_grants: dict[str, float] = {}
        # When a cap last changed (CAPS_SETTLE_S); the partitions of one card share it: their
        # grants run on one power limiter (PartitionRouter).
        self.caps_changed_at = -math.inf
        # When each client's books began: its grants from before are on none (_end_early).
        self._books_since: dict[str, float] = {}
        self._removed_asking: dict[str, float] = {}  # a removed client's latest request
        # The pod manager connections, and the memory in use, of a client not in the config
        # (removed, or not added yet: a scheduler restarted with a config from before it):
        # told its limit when it is added (_apply_config).
        self._absent_books: dict[str, tuple[set[ConnId], int]] = {}
        # How many processes each pod manager connection said it serves (on_disconnect).
        self._conn_processes: dict[ConnId, int] = {}
        # The pod manager connections whose latest REPORT said they apply cuts (wire.CUT_ID).
        self._cutting_conns: set[ConnId] = set()
        # When the latest cap edit came, and the share of the time the card's grants were to
        # hold it after it (_busy_through_edit)
        self._busy_after_edit: tuple[float, float] | None = None
        self._apply_config(config, now)

    # ---- inputs -------------------------------------------------------------------------------

    def on_request(self, conn: ConnId, req: Request, now: float) -> list[Action]:
        """(A QUOTA or REPORT request beside a long name carries its alias: PartitionRouter, in
        front of this core in gem-schd, gives it the name back.)"""
        if req.type is RequestType.STATUS:
            return [self._status_reply(conn, req, now)]
        if req.type is RequestType.HELLO:
            return [Reply(conn, req.type, Response(req.req_id, Status.OK))]
        if req.type is RequestType.REPORT:
            self._conn_processes[conn] = int(req.args[1])  # type: ignore[call-overload]
        client = self.clients.get(req.name)
        if client is None:
            if req.name in self.removed:  # (its processes still run: status says so)
                self._removed_asking[req.name] = now
            self._keep_absent_books(conn, req)
            return self._refuse(conn, req) + self._removed_holder_asked(conn, req, now)
        self._refused.discard(conn)
        client.conns.add(conn)
        if req.type is RequestType.QUOTA:
            self._earn(now)
            return self._on_quota(conn, req, client, now)
        if req.type is RequestType.MEM_LIMIT:
            values = (client.mem_used, client.spec.gpu_mem, mem_flags(client.spec, self.um))
            return [Reply(conn, req.type, Response(req.req_id, Status.OK, values))]
        if req.type is RequestType.MEM_UPDATE:
            # Memory is enforced by the pod manager (spec §3.6); the scheduler agrees.
            return [Reply(conn, req.type, Response(req.req_id, Status.OK, (1,)))]
        if req.type is not RequestType.REPORT:  # a hook's message (PROCESS, RECALL) sent here
            why = f"refused a {req.type.name} request: only a pod manager's hooks send it"
            return [Reply(conn, req.type, Response(req.req_id, Status.BAD_REQUEST)),
                    act.warning(req.name, why)]
        mem_used, processes, waiting, *delivery = req.args
        if len(delivery) > 1 and int(delivery[1]) & REPORT_APPLIES_CUTS:  # type: ignore[call-overload]
            self._cutting_conns.add(conn)
        else:
            self._cutting_conns.discard(conn)
        if not client.spec.capped and client.processes <= 1 < int(processes):  # type: ignore[call-overload]
            # By time from now (_by_time): its speed out of the credit at once.  Its meter
            # keeps what one process read, for when it is one again (a second process may come
            # and go: read anew each time, it was calibrated each time).
            self._shared_speeds.pop(req.name, None)
        client.mem_used, client.processes, client.waiting = (
            int(mem_used),
            int(processes),
            int(waiting),
        )
        out: list[Action] = [Reply(conn, req.type, Response(req.req_id, Status.OK))]
        if delivery:  # (0: not known; a report that leaves it out keeps the last one)
            out += self._said_delivery(client, req.name, float(delivery[0]))  # type: ignore[arg-type]
        return out + self._holder_without_processes(conn, client, now)

    @staticmethod
    def _said_delivery(client: ClientState, name: str, said_ms: float) -> list[Action]:
        """A pod manager's delivery delay, kept within [0, HAND_OVER_DELAY_MAX_S]: one out of
        range (a peer's garbage, or a host so loaded that each hand-over would idle the GPU
        longer) is logged, once a client."""
        said = said_ms / MS
        fits = 0.0 <= said <= HAND_OVER_DELAY_MAX_S  # (NaN compares false)
        client.delivery_s = min(said, HAND_OVER_DELAY_MAX_S) if said > 0.0 else 0.0
        if fits or client.delivery_warned:
            return []
        client.delivery_warned = True
        return [act.warning(name, f"its pod manager said its grants' delivery takes "
                                  f"{said_ms:g} ms: taken as {client.delivery_s * MS:g} ms")]

    def _holder_without_processes(
        self, conn: ConnId, client: ClientState, now: float
    ) -> list[Action]:
        """A holder whose last process ended gives the rest of its grant to the next client
        (else a finished job keeps the GPU idle until its quota runs out)."""
        holder = self.holder
        if client.processes or holder is None or holder.conn != conn:
            return []
        self._earn(now)
        self._end_early(holder.interval, now)
        self.holder = None
        gone = act.info(holder.interval.name, "no processes left; token taken back")
        return [gone, *self._schedule(now)]

    def on_disconnect(self, conn: ConnId, now: float) -> list[Action]:
        self._earn(now)
        self._refused.discard(conn)
        out: list[Action] = []
        self.candidates = [c for c in self.candidates if c.conn != conn]
        holder = self.holder if self.holder is not None and self.holder.conn == conn else None
        running = holder is not None and self.processes_said(conn) > 0
        self._conn_processes.pop(conn, None)
        self._cutting_conns.discard(conn)
        if holder is not None and running:  # (before its delivery delay is forgotten below)
            holder.orphaned_until = self._hand_over_at(holder)
        for name, (conns, _) in list(self._absent_books.items()):
            conns.discard(conn)
            if not conns:
                del self._absent_books[name]
        for name, client in self.clients.items():
            if conn in client.conns:
                client.conns.discard(conn)
                if not client.conns:
                    client.mem_used = client.processes = client.waiting = 0
                    client.delivery_s = 0.0  # (a new one's first QUOTA comes before its REPORT)
                out.append(act.info(name, "pod manager disconnected"))
        if holder is not None and running:
            # Its processes' hooks run on to their token's end without it (they ask it for
            # the next one): a grant made now would share the GPU with them until then.
            out.append(act.info(holder.interval.name, "token holder's pod manager gone; "
                                f"the token ends as granted, in "
                                f"{(holder.interval.end - now) * MS:.1f} ms"))
        elif holder is not None:
            self._end_early(holder.interval, now)
            out.append(act.info(holder.interval.name, "token holder gone; token taken back"))
            self.holder = None
        return out + self._schedule(now)

    def reported(self, conn: ConnId) -> bool:
        """Has the pod manager on `conn` sent a REPORT (ours do; v1 ones never)?"""
        return conn in self._conn_processes

    def applies_cuts(self, conn: ConnId) -> bool:
        """Did the pod manager on `conn` say, in its latest REPORT, that it applies cuts?"""
        return conn in self._cutting_conns

    def processes_said(self, conn: ConnId) -> int:
        """How many processes the pod manager on `conn` last said it serves (0: never said)."""
        return self._conn_processes.get(conn, 0)

    def on_config(self, config: ResourceConfig, now: float) -> list[Action]:
        self._earn(now)
        return self._apply_config(config, now) + self._schedule(now)

    def on_deadline(self, now: float) -> list[Action]:
        self._earn(now)
        return self._schedule(now)

    def on_clock(self, samples: list[tuple[float, float]], now: float) -> list[Action]:
        """The GPU's SM clock, (time, MHz) in time order, read since the last call: each
        sample taken in a capped client's grant tells its speed (gemini.core.speed)."""
        self._clock_at = now
        intervals = self.history.intervals
        for t, mhz in samples:
            # The latest grants first: samples are recent.  Past charges, which stand after the
            # grant they were made in (UsageHistory.charge): a neighbour's overuse reported in a
            # grant cost it every later reading of it (17 % of a capped pair's on the simulator).
            for interval in reversed(intervals):
                if interval.start <= t and not interval.extra:
                    break
            else:
                continue
            client = self.clients.get(interval.name)
            if t >= interval.end or client is None or not client.spec.capped:
                continue
            meant_s = 0.0  # (a calibration: how long it was meant to last)
            if interval.calibrating:
                cal = client.calibration
                meant_s = cal.length_s if cal is not None else math.inf
            self.speed.sample(interval.name, mhz, t, t - interval.start,
                              interval.end - interval.start, interval.calibrating, meant_s)
        return self._calibrated(samples[-1][0]) if samples else []

    def _calibrated(self, read_until: float) -> list[Action]:
        """Say what each calibration that ended before `read_until` read: then its tail is in
        (the client may ask again before the last readings are fed)."""
        done = [i for i in self._calibrations if i.end <= read_until]
        self._calibrations = [i for i in self._calibrations if i.end > read_until]
        return [act.debug(i.name, f"calibrated: speed {self._speed(i.name, i.end):.3f} ("
                                  + self.speed.describe(i.name, mates=self._mates(i.name)) + ")")
                for i in done if i.name in self.clients]

    def wants_clock(self) -> bool:
        """Does a client have a cap (the clock's readings are for capped clients only)?"""
        return any(c.spec.capped for c in self.clients.values())

    def next_deadline(self) -> float | None:
        if self.holder is not None:
            return self._hand_over_at(self.holder)
        return self._recheck_at

    def _hand_over_at(self, holder: Grant) -> float:
        """When the holder's GPU goes on: its grant's end, or, with hand_over_at_arrival, as
        much later as its grants take to reach it."""
        if holder.orphaned_until is not None:
            return holder.orphaned_until
        client = self.clients.get(holder.interval.name)
        if not self.timing.hand_over_at_arrival or client is None:
            return holder.interval.end
        return holder.interval.end + client.delivery_s

    # ---- token ---------------------------------------------------------------------------------

    def _on_quota(
        self, conn: ConnId, req: Request, client: ClientState, now: float
    ) -> list[Action]:
        overuse_ms, burst_ms, gpu_wait_ms = quota_args(req)
        name = req.name
        if self.first_request_at is None:
            self.first_request_at = now
        latest = self.history.latest(name)
        # (A request through its new pod manager does not end a grant whose processes under
        # the old one run on: on_disconnect.)
        orphaned = self.holder is not None and self.holder.orphaned_until is not None and (
            self.holder.interval.name == name)
        renewing = self._renewing(name, now)
        if latest is not None and not orphaned and not renewing:
            self._end_early(latest, now)  # returned early, if it was
        if overuse_ms > 0.0:  # (NaN compares false)
            # From the grant's end, with hand-overs at arrival too: there the hook's token ends
            # a delivery after it, and the next grant, made then, reaches its hook a delivery
            # later still, so only the overuse past one delivery takes that grant's time, and
            # the refund below (its overlap with the next grant) is that part.
            at = latest.end if latest is not None else now
            charged = min(overuse_ms / MS, self.timing.window_s)
            self._charge(name, at, charged, latest)
            client.overuse_s += charged
            self._refund_overrun(name, at, charged)
        waited = "" if gpu_wait_ms is None else f", waited {gpu_wait_ms:.3f} ms on the GPU"
        run = quota_run(req)
        run_ms, run_count, run_graphs = run
        unit = "graph launches" if run_graphs else "launches"
        ran = f", ran {run_count} {unit} in {run_ms:.3f} ms" if run_count else ""
        out: list[Action] = [act.debug(name, f"asks for a token ({burst_ms:.3f} ms burst, "
                                             f"{overuse_ms:.3f} ms overuse{waited}{ran})")]
        if latest is not None and not latest.weighed:
            out += self._weigh(client, latest, gpu_wait_ms, run)
        if renewing:
            out.append(act.debug(name, "asks ahead; its token runs to its end"))
        elif self.holder is not None and self.holder.interval.name == name and not orphaned:
            self.holder = None  # the holder's next request returns its token
            out.append(act.debug(name, "token returned"))
        client.previous_burst_s, client.burst_s = client.burst_s, max(burst_ms, 0.0) / MS
        client.previous_burst_after_s = client.burst_after_s
        # (against the grant before the latest too: its hook's burst follows its grants a grant
        # or two late, and a cap raised from 0.3 to 0.6 whose first grant was a whole 285 ms
        # said 143 ms after it, 253 after the next, and the pair left shared turns)
        client.burst_after_s = min(self._turns_grant_s(client),
                                   client.previous_turn_grant_s or math.inf)
        self.candidates.append(Candidate(conn, name, req.req_id, now))
        return out + self._schedule(now)

    def _renewing(self, name: str, now: float) -> bool:
        """Is `name`'s request, made while it holds the token, its hook asking ahead for the
        next one while another client waits, or while it is capped (RENEWAL_LEAD_S)?  Then its
        grant runs on to its hand-over, charged whole.  An uncapped client alone returns the
        token at once, and the next grant is made now: its hook goes on without a gap, and no
        one else's work meets its queue.  Not a unified-memory client's: its hook asks in the
        tail from the launching thread, stops launching, and reports its overuse from the ask
        (csrc/hook/token.c), which the grant's end would charge twice."""
        holder = self.holder
        if holder is None or holder.interval.name != name or holder.orphaned_until is not None:
            return False
        spec = self.clients[name].spec
        if is_um(spec, self.um):
            return False
        hand_over = self._hand_over_at(holder)
        # (another's return grace counts while it lasts past the hand-over: _schedule clears
        # it only once the holder is gone)
        others = any(c.name != name for c in self.candidates) or (
            self._grace is not None and self._grace[0] != name and self._grace[1] > hand_over)
        lead = ALONE_RENEWAL_LEAD_S if holder.alone else RENEWAL_LEAD_S
        return (others or spec.capped) and now < hand_over <= now + lead

    def _schedule(self, now: float) -> list[Action]:
        self._recheck_at = None
        out = self._drop_removed_candidates()
        if self.holder is not None:
            if now < self._hand_over_at(self.holder):
                return out
            name = self.holder.interval.name
            out.append(act.debug(name, "quota expired"))
            self.holder = None
            back = name in self.clients and bool(self.clients[name].conns)  # (none: it is gone)
            if back and all(c.name != name for c in self.candidates):
                self._grace = (name, now + self.timing.return_grace_s)
        if self._grace is not None and (
            now >= self._grace[1]
            or self._grace[0] not in self.clients
            or any(c.name == self._grace[0] for c in self.candidates)
        ):
            self._grace = None
        if not self.candidates:
            return out
        chosen = self._select(now)
        if chosen is None:
            return out
        candidate, standing = chosen
        self.candidates.remove(candidate)
        client = self.clients[candidate.name]
        client.quota_s = next_quota(
            client.quota_s,
            client.burst_s,
            self.timing.base_quota_s,
            self.timing.min_quota_s,
            min(client.spec.limit * self.timing.window_s, self.timing.max_quota_s),
        )
        longest = self._short_grant_s
        verdict = TurnVerdict(0.0) if standing is None else self._turn_and_why(
            standing.limit, candidate.name, now)
        turn = verdict.turn_s
        if turn:
            longest = math.inf  # (its pace cuts it: _grant_length)
        top_up = self._top_up_grants.get(candidate.name)  # (its length read: _with_top_ups)
        if top_up is not None:
            length = top_up
            self._take_top_up(candidate.name, top_up)
        else:
            length = min(self._grant_length(client.quota_s, standing, candidate.name, now, turn),
                         longest)
        if is_um(client.spec, self.um):  # (its speed read for UM clients only)
            length = um_quota(length, client.spec, self.um, self._um_window_s(candidate.name, now))
        cal = self._due_calibrations.get(candidate.name) if standing is not None else None
        calibrating = cal is not None
        if cal is not None:
            assert standing is not None
            client.calibration = cal
            length = max(length, min(cal.length_s, standing.remaining))
            self.speed.calibrating(candidate.name, now, shared=not client.spec.capped)
            self.credits.give_back_ahead(candidate.name)  # (speed.SHARED_PREPAY)
            self._unsteady_since.pop(candidate.name, None)
        if not calibrating and top_up is None:  # (LONG_BURST: a calibration is no pace of its
            # own, nor a top-up)
            client.longest_grant_s = max(client.longest_grant_s, length)
            if turn:
                client.previous_turn_grant_s, client.turn_grant_s = client.turn_grant_s, length
        interval = self.history.record(candidate.name, now, now + length)
        interval.top_up = top_up is not None
        self._note_busy(interval)
        self._refund_pending_overrun(interval)
        interval.calibrating = calibrating
        interval.shared = standing is not None and (
            bool(self.candidates) or self._grace is not None)
        if calibrating and client.spec.capped:  # (the clock's readings: for capped clients)
            self._calibrations.append(interval)
        self.credits.spend(candidate.name, length)
        client.turn_mates = verdict.mates
        if client.spec.capped and top_up is None:  # (a top-up moves no pace: _top_up_raised)
            # (in shared turns, paced from the grant: SHARED_TURNS_MAX)
            asked = now if client.turn_mates else candidate.arrived
            self.pacer.granted(candidate.name, asked, length, client.spec.limit)
        # No standing: _select found this client the only one waiting, no expired holder due
        # back, and no cap.  Then the hook may run on a little past this token's end instead
        # of stopping for a round trip (wire.QUOTA_FLAG_ALONE), and asks sooner (_renewing).
        alone = standing is None
        self.holder = Grant(candidate.conn, interval, alone=alone, limit=client.spec.limit)
        client.tokens += 1
        flags = QUOTA_FLAG_ALONE if alone else 0
        if calibrating:
            flags |= QUOTA_FLAG_CALIBRATION
        response = Response(candidate.req_id, Status.OK, (length * MS, flags, 0, now))
        if turn != client.turn_s:
            out.append(act.debug(candidate.name,
                                 self._describe_turn(turn, verdict)))
            client.turn_s = turn
        # (logged first: a debug line's time stamp is then when the reply left, not after)
        out.append(act.debug(candidate.name, f"token granted for {length * MS:.1f} ms"))
        out.append(Reply(candidate.conn, RequestType.QUOTA, response))
        return out

    def _take_top_up(self, name: str, length: float) -> None:
        """A grant of `length` from what `name` is owed for its raised cap (_with_top_ups read
        it): that much less owed."""
        top = self._top_ups[name]
        top.seconds -= length
        if top.seconds < self._capped_grant_s * ENOUGH_OF_A_GRANT:
            del self._top_ups[name]

    def _charge(self, name: str, at: float, seconds: float, grant: Interval | None = None) -> None:
        """`seconds` more (or, negative, fewer) of GPU time used at `at`, for `grant` where
        given: in the windows, the credit and the pace (but where _moves_pace says not)."""
        self.history.charge(name, at, seconds)
        self.credits.spend(name, seconds)
        if grant is None or self._moves_pace(grant):
            self._pace(name, seconds, until=at + self.timing.window_s)

    def _refund_overrun(self, name: str, at: float, seconds: float) -> None:
        """`name`'s work ran `seconds` past its token's end at `at` (its overuse): the clients
        granted the GPU meanwhile did not have it for that long.  Each is given that part of
        its grant back, as it is charged to `name`; else every overrun is paid twice, once by
        the client that ran and once by its neighbour."""
        covered = at  # (how far the grants made so far reach into it)
        for grant in self.history.overlapping(at, at + seconds):
            covered = max(covered, grant.end)
            self._refund(grant, at, at + seconds, name)
        self._overrun = (name, covered, at + seconds) if covered < at + seconds else None

    def _refund_pending_overrun(self, grant: Interval) -> None:
        """A new grant: the part of it that the latest reported overrun still takes (it was
        reported before the grant was made: a hook reports its overuse with the request that
        hands its token back, or a later one) is given back, as in _refund_overrun."""
        if self._overrun is not None:
            name, start, until = self._overrun
            self._refund(grant, start, until, name)
            self._overrun = None

    def _refund(self, grant: Interval, start: float, until: float, overran: str) -> None:
        """`grant` did not have the GPU over its part of [start, until], where `overran`'s
        work ran: given back to it (a grant of `overran` itself loses nothing to another)."""
        other = self.clients.get(grant.name)
        lost = min(grant.end, until) - max(grant.start, start)
        if grant.name != overran and other is not None and lost > 0.0:
            self._charge(grant.name, max(grant.start, start), -lost, grant)
            other.overrun_s += lost

    def _weigh(self, client: ClientState, grant: Interval, gpu_wait_ms: float | None,
               run: tuple[float, int, bool]) -> list[Action]:
        """An ended grant: what its hook measured goes to the speed meter, and the grant is
        charged at its client's speed (a capped client's, or an uncapped one's beside others:
        gemini.core.speed).  `gpu_wait_ms`: how long the client waited on the GPU since its
        last request, in this grant (None: not said); `run`: the GPU time (ms) and launches
        (or graph launches) its hook measured in the grant before (wire.quota_run)."""
        grant.weighed = True
        capped = client.spec.capped
        if not capped and (not self.timing.shared_speed or client.processes > 1):
            return []  # (its processes' runs, each timed among the others', tell nothing)
        out = self._record_run(client, grant, run)
        if not capped:
            if not grant.shared:  # alone and uncapped: nothing to charge
                return out
            self.speed.seen(grant.name, grant.start)  # (a capped one's clock says when)
        if gpu_wait_ms is not None and grant.end > grant.start and not grant.calibrating:
            self.speed.waited(grant.name, gpu_wait_ms / MS / (grant.end - grant.start))
        self._charge_speed(client, grant)
        return out + self._said_alike()

    def _said_alike(self) -> list[Action]:
        """A line (-v) for each client compared with others (speed.SpeedMeter.alike) whose
        verdict changed: taken for one program with them (they share by time, uncalibrated),
        or told apart from them.  Not for one that merely went away, nor again each time it
        comes back."""
        compared, alike = self.speed.last_comparison
        out = []
        for n in sorted(compared):
            if self._alike_said.get(n) == alike:
                continue
            self._alike_said[n] = alike
            others = ", ".join(sorted(compared - {n}))
            out.append(act.debug(n, f"runs one program with {others} (their grants' cost per "
                                    "launch alike): shares by time, uncalibrated" if alike else
                                 f"told apart from {others} (their grants' cost per launch "
                                 "differs): shares by work"))
        return out

    def _record_run(self, client: ClientState, grant: Interval,
                    run: tuple[float, int, bool]) -> list[Action]:
        """The run its hook measured in the grant before this one (a calibration's tail, if
        that one calibrated) goes to the speed meter."""
        run_ms, run_count, run_graphs = run
        capped = client.spec.capped
        before = client.weighed_before or Interval(grant.name, 0.0, 0.0)  # (none: a plain one)
        # (alone and uncapped: nothing to weigh; a calibration cut short: its hook measured
        # its start, or a late process's share, not its continuous tail)
        if (capped or before.shared) and not before.cut_calibration:
            self.speed.ran(grant.name, run_ms, run_count, before.calibrating, run_graphs,
                           shared=not capped)
        out = self._said_calibrated(client, grant.name, run_count)
        client.weighed_before = grant
        return out

    def _charge_speed(self, client: ClientState, grant: Interval) -> None:
        """A second of the grant did `speed` seconds of the client's continuous work: the
        difference is charged, to a capped client in its windows, credit and pace (but where
        _moves_pace says not), to an uncapped one in its credit only (it has no cap for windows
        to hold).  A calibration runs continuously: it is charged its time, but for its first
        `settle_s`, which run as fast as an ordinary grant before the limiter settles (H100,
        torch eager and CUDA graphs: 1.03-1.06 of the bare rate over a whole calibration,
        2026-11-25)."""
        fast_s = grant.end - grant.start  # how long it ran faster than continuously
        cal = client.calibration if grant.calibrating else None
        if cal is not None:
            fast_s = min(fast_s, cal.settle_s)
        speed = self._speed(grant.name, grant.end)
        extra = (speed - 1.0) * fast_s
        if client.spec.capped:
            if extra > 1e-6:
                self._charge(grant.name, grant.end, extra, grant)
                client.speed_charge_s += extra
            return
        self._shared_speeds[grant.name] = speed  # (read at every earn: _by_work)
        self.credits.spend(grant.name, extra)
        client.speed_charge_s += extra

    def _moves_pace(self, grant: Interval) -> bool:
        """Does what is charged or given back for `grant` move its client's pace?  Not for a
        client gone, nor for a top-up (it has no pace of its own: _top_up_raised), nor for a
        grant made before the client's pace was placed for a raised cap (ClientState.placed_at):
        the place is where its next grant fits (_raised_place), and the speed charges of the
        grant it held at the edit and of its top-up, which came after, moved it 17.6 ms on, the
        GPU idle meanwhile (the simulator: b's windows from the edit held that much less)."""
        client = self.clients.get(grant.name)
        return client is not None and not grant.top_up and grant.start >= client.placed_at

    def _said_calibrated(self, client: ClientState, name: str, run_count: int) -> list[Action]:
        """What an uncapped client's calibration read, once its hook said (a capped one's is
        said when the clock's readings are in: _calibrated)."""
        before = client.weighed_before
        if client.spec.capped or before is None or not before.calibrating or not run_count:
            return []
        return [act.debug(name, f"calibrated beside others: speed {self._speed(name):.3f} "
                                f"({self.speed.describe(name, shared=True)})")]

    def _speed(self, name: str, now: float = math.inf, in_turns: bool | None = None) -> float:
        """Its work per second of its grants ÷ its work run continuously alone; `in_turns`:
        whether its grant is one of lone or shared turns (None: as its latest was), which
        have their own floor while it settles (speed.LONG_GRANTS_UNKNOWN_SPEED).  A capped
        client is read with the tails of those it shared its latest turn with (_mates: the
        first grant into shared turns is sized with its own, the first out of them with its
        old mates')."""
        client = self.clients.get(name)
        if client is None or self._by_time(client, now):
            return 1.0
        spec = client.spec
        return self.speed.speed(name, now, shared=not spec.capped,
                                calibrates=self._calibration(spec, alone=True, by_work=False)
                                is not None,
                                idle=self._idle_share(sorted(self._wanting() | {name}))
                                if spec.capped else 1.0,
                                long_grants=client.turn_s > 0.0 if in_turns is None else in_turns,
                                mates=self._mates(name))

    def _mates(self, name: str) -> frozenset[str]:
        """The capped clients `name` shared its latest turn with (speed.ALIKE_TAILS_AGE_S)."""
        client = self.clients[name]
        return frozenset(n for n in client.turn_mates
                         if n in self.clients and self.clients[n].spec.capped)

    def _by_time(self, client: ClientState, now: float, names: list[str] | None = None) -> bool:
        """Does this uncapped client share by time, its speed beside others not charged?  Where
        its pod manager serves several processes: each one's hook times its launches among the
        others' (their kernels run in its segments), and on the fake GPU a client of two read
        8.0 ms a launch in its grants and 15.0 in its first tail for kernels of 5 ms, was
        charged 1.87, and did 0.375 of the GPU beside one at 0.5 (2026-12-06).  And where the
        uncapped clients that share the GPU (`names` want it too) are too many or alike
        (_shares_by_time)."""
        return not client.spec.capped and (client.processes > 1
                                           or self._shares_by_time(now, names))

    def _shares_by_time(self, now: float, names: list[str] | None = None) -> bool:
        """Do the uncapped clients that share the GPU share it by time: more of them than
        speed.SHARED_CALIBRATED_MAX, or alike (speed.ALIKE_COST_SPREAD; a client of several
        processes by the costs of its grants when it had one, as its processes' are not
        weighed)?  Those that want it now (or are `names`), or held it within the short window
        (the long one without): a count of those that wanted it at the moment made a trio of
        four clients, whose speeds read as a trio then stayed (a review), and of three between
        two requests, whose old speeds came back."""
        since = now - (self._short_window_s or self.timing.window_s)
        sharing = {n for n, c in self.clients.items() if not c.spec.capped and (
            (i := self.history.latest(n)) is not None and i.end > since)}
        sharing |= {n for n in self._wanting() | set(names or ())
                    if n in self.clients and not self.clients[n].spec.capped}
        return len(sharing) > SHARED_CALIBRATED_MAX or self.speed.alike(sharing)

    def _wanting(self) -> set[str]:
        """The clients that want the GPU now: those waiting, and the holder."""
        names = {c.name for c in self.candidates}
        if self.holder is not None:
            names.add(self.holder.interval.name)
        return names

    def _idle_share(self, names: list[str]) -> float:
        """The share of the GPU that `names`, wanting it, leave idle: 1 less their caps, or
        none beside an uncapped one (its work keeps the card at its continuous clock)."""
        specs = [self.clients[n].spec for n in names if n in self.clients]
        if not all(s.capped for s in specs):
            return 0.0
        return max(1.0 - sum(s.limit for s in specs), 0.0)

    def _calibration(self, spec: ClientSpec, alone: bool, by_work: bool,
                     beside_cap: float = 0.0) -> Calibration | None:
        """Its calibration grant: an uncapped client's beside others, or a capped one's, as
        long as its windows allow, its 1 s windows can pay back both ways and its capped
        neighbours' (`beside_cap`, the largest of their caps) can make up their wait through
        it (None: too little for one; speed.capped_calibration), but for one alone whose speed
        is not read by work (`by_work`: SpeedMeter.reads_by_work; its hook does not measure its
        work, or its tails disagree): its tail is then read by the GPU's clock, which NVML
        says 40-120 ms late (speed.py), and a tail 60 ms into a 125 ms calibration read it
        still boosted (H200, 2026-12-03: 1745-1965 MHz, against 1483-1575 in 200 ms ones)."""
        if not spec.capped:
            return SHARED_CALIBRATION
        lump_cap = spec.limit if by_work or not alone else None
        return capped_calibration(self._allowed_s(spec, self._cap_window_s), lump_cap, alone,
                                  beside_cap)

    def _due_calibration(self, name: str, names: list[str], now: float) -> Calibration | None:
        """The calibration due to a capped client waiting where the GPU idles between its
        grants (_idles_between), with the clock read, or to an uncapped one beside others,
        its grants measured by its hook (`names`: those that want the GPU now), once the card is
        steady (_steady) or it waited speed.SHARED_STEADY_WAIT_S for that; None: none."""
        spec = self.clients[name].spec
        if not spec.capped:
            due = self._shared_due(name, names, now)
            return SHARED_CALIBRATION if self._paid_ahead(name, names, due) else None
        clocked = self._clock_at is not None and now - self._clock_at < CLOCK_STALE_S
        if not (clocked and self._idles_between(names) and self.speed.due(name, now)):
            return None
        if now - self.caps_changed_at < CAPS_SETTLE_S:
            return None  # (the card still settles to the new caps: CAPS_SETTLE_S)
        # (None where none fits its windows)
        beside = max((self.clients[n].spec.limit for n in names if n != name and n in self.clients),
                     default=0.0)
        # (measured: not one due just after an edit, its grants' costs still those of the caps
        # before, a grant's cost now unread: a tail fitted to its grant would be weighed
        # against them, so it is a whole one, as where read by the clock: duty_changed)
        by_work = self.speed.reads_by_work(name) and self.speed.measured(name)
        cal = self._calibration(spec, alone=len(names) == 1, by_work=by_work, beside_cap=beside)
        if (cal is not None and by_work and len(names) == 1
                and (grant := self._lone_paced_grant_s(spec.limit, name, now))):
            # (one of its grants, where that is long enough for its work to settle: no lump;
            # a tail read by the clock needs the whole calibration, _calibration says why)
            cal = fitted_calibration(cal, grant)
        return cal

    def _shared_due(self, name: str, names: list[str], now: float) -> bool:
        """Is a calibration due to `name`, uncapped, beside others, with the card steady
        (_steady), or after it waited speed.SHARED_STEADY_WAIT_S beside them for that?"""
        due = (self.timing.shared_speed and len(names) > 1 and self.speed.measured(name)
               and not self._by_time(self.clients[name], now, names)
               and self.speed.due(name, now, True))
        if not due or self._steady(now):
            self._unsteady_since.pop(name, None)
            return due
        # (from the first decision that found it waiting, not from when it fell due: one due
        # in an idle came at once when the work came back, in the limiter's dip)
        return now - self._unsteady_since.setdefault(name, now) >= SHARED_STEADY_WAIT_S

    def _paid_ahead(self, name: str, names: list[str], due: bool) -> bool:
        """Has `name`, an uncapped client whose calibration is `due`, been charged part of its
        lump ahead (speed.SHARED_PREPAY)?  When one falls due, it is charged now, and its lump
        comes at its next turn after this decision; a calibration no longer due gives it back."""
        if not due:
            self.credits.give_back_ahead(name)
            return False
        if self.credits.charged_ahead(name):
            return True
        # (a side effect of _standings: it runs once a decision)
        rate = self._targets(names).get(name, 0.0)
        self.credits.charge_ahead(name, SHARED_PREPAY * SHARED_CALIBRATION.length_s * (1.0 - rate))
        return False

    def _note_busy(self, grant: Interval) -> None:
        """A grant was made: the GPU's busy stretch goes on, or began with it after an idle."""
        latest = self._latest_grant
        if latest is None or grant.start - latest.end >= IDLE_GAP_S:
            self._busy_since = grant.start
        self._latest_grant = grant

    def _steady(self, now: float) -> bool:
        """Has the GPU been busy for speed.SHARED_STEADY_S, grant after grant, with no idle gap
        between them, so that the power limiter has settled (a calibration beside others reads
        its client's speed in it)?"""
        latest = self._latest_grant
        return (latest is not None and now - latest.end < IDLE_GAP_S
                and now - self._busy_since >= SHARED_STEADY_S)

    def _idles_between(self, names: list[str]) -> bool:
        """Do the clients that want the GPU leave it idle between a capped one's grants, so
        that they run faster than it runs continuously?  Alone, or beside capped clients only
        whose limits add up to less than the GPU.  (Two clients capped at 0.3, each charged
        its time as no calibration came to either while the other wanted the GPU, did
        0.32-0.34 of their bare work over 10 s on the simulator.)  Beside an uncapped client,
        or caps that add up to the whole GPU, the card is kept busy and the grants run at its
        continuous speed: no calibration is needed, and its lump would cost the others.
        (`names` hold the capped client asked about.)"""
        return self._idle_share(names) > 0.0

    def _end_early(self, interval: Interval, now: float, keep_pace: bool = False) -> None:
        """The token came back (or its holder went): if before its quota ran out, it ends now
        (`keep_pace`: its pace stays, _cut_lowered_holder; nor does one _moves_pace keeps)."""
        if now >= interval.end:
            return
        # (A grant made before its client was removed, or before it was added again, is not
        # on its books: the unused part went back to none, or to the new ones.)
        if interval.start >= self._books_since.get(interval.name, math.inf):
            self.credits.spend(interval.name, now - interval.end)  # the unused part, given back
            if not keep_pace and self._moves_pace(interval):
                self._pace(interval.name, now - interval.end)
        self.history.shorten(interval, now)

    def _pace(self, name: str, seconds: float, until: float = math.inf) -> None:
        client = self.clients.get(name)
        if client is not None and client.spec.capped:
            self.pacer.adjust(name, seconds, client.spec.limit, until)

    def _earn(self, now: float) -> None:
        """Credit the clients that wanted the GPU since the last event (holder, waiting, or an
        expired holder expected back) at their target shares."""
        wanting = self._wanting()
        held = self.holder.interval if self.holder is not None else None
        until = now
        if self.timing.hand_over_at_arrival and held is not None and held.end < now:
            # The hand-over waits for the holder's hook: that time is booked to no one, and
            # earned by no one (else every hand-over added its delay to everyone's credit, and
            # all of it sat near the bound, where the order falls back to turns by time).
            until = held.end
        if self._grace is not None:
            # Until its grace ends only: no event may come before the next request, and an
            # expired holder with no one waiting then earned the whole idle time (alone, up to
            # the bound: 0.2 s) and took it in one lump when the others came back (H200, a
            # trio back from a pause: 0.569 / 0.271 / 0.165 of the next second for 0.5 / 0.3 /
            # 0.2).
            name, grace_end = self._grace
            if grace_end < until:
                self._earn_until(wanting | {name}, grace_end)
            else:
                wanting.add(name)
        self._earn_until(wanting, until)
        if until < now:
            self.credits.earn({}, now)

    def _earn_until(self, wanting: set[str], until: float) -> None:
        """`wanting` earned credit until `until`.  One alone is owed nothing: it is served
        whenever it asks, and what it earned in the hand-overs' gaps (a round trip a grant)
        reached the bound in seconds and was taken in one lump from the next client to come
        (the simulator, a client alone 3-12 s before another joined: 6.5 points off its
        neighbour's first second).  Nor does it owe more than the rest of a grant it holds
        (spent when it was made): its overuse, charged with each request, reached the bound
        the other way, and the next to come took that in one lump (H200, 0.4/0.5 uncapped, b
        joining a alone for 10 s: four 50 ms grants in a row, 0.593 of its first second)."""
        held = self.holder.interval if self.holder is not None else None
        unspent = {held.name: held.end - until} if held is not None else {}
        self.credits.earn(self._by_work(self._targets(wanting), until), until, unspent)
        if len(wanting) == 1 and wanting <= self.clients.keys():
            (name,) = wanting
            self.credits.owe_nothing(name, max(unspent.get(name, 0.0), 0.0))

    def _targets(self, names: set[str] | list[str]) -> dict[str, float]:
        specs = {n: self.clients[n].spec for n in names if n in self.clients}
        return targets({n: (s.request, s.limit) for n, s in specs.items()})

    def _by_work(self, rates: dict[str, float], now: float) -> dict[str, float]:
        """The rates at which clients earn credit, those of uncapped ones beside others
        shifted for their speeds (policy.by_work); capped ones earn their targets."""
        if len(rates) < 2 or not self._shared_speeds or self._shares_by_time(now, list(rates)):
            return rates
        speeds = {n: self._shared_speeds.get(n, 1.0) for n in rates
                  if not self.clients[n].spec.capped}
        return by_work(rates, speeds)

    def _grant_length(
        self, quota_s: float, standing: Standing | None, name: str, now: float, turn: float
    ) -> float:
        """The adaptive quota, cut short where a whole one would overshoot its limit, and while
        others wait, to its target's part of one turn (never below the minimum quota): a 0.3 /
        0.7 pair takes turns of 30 and 70 ms, and each holds its share over any second.  `turn`:
        its lone or shared turn (_lone_turn_s, as the caller read it; 0: none)."""
        if standing is None:
            return min(quota_s, self._alone_after_others_s(name, now))
        length = min(quota_s, standing.remaining)  # >= a minimum quota: see _capped_grant_s
        if lone := self._paced_in_turn_s(standing.limit, name, now, turn):
            return min(standing.remaining, lone)  # (its quota follows its grants)
        if standing.limit < 1.0:
            length = min(length, self._paced_grant_s(standing.limit))
        if self.candidates or self._grace is not None:  # others want it too
            length = min(length, max(standing.target * self._turn_s, self.timing.min_quota_s))
        return length

    def _alone_after_others_s(self, name: str, now: float) -> float:
        """The longest grant to a client alone at the moment where others had the GPU within
        the window: its target's part of a turn among them, as if they still wanted it.  Those
        that paused together (a job's epoch end, a file system's stall) come back a moment
        apart, and the first one back took its whole burst while the others waited it out (H200,
        a trio back from a pause: a 97 ms grant for a at 0.2, paid back over the next second;
        the simulator, 100 ms bursts: 4.9-6.5 points off over a sliding 1 s window, 1.2-3.0
        now).  The long window, not the short one: a pause of seconds did the same (up to 8.8
        points).  A client alone for a window goes on at its whole burst; until then it renews
        more often, without draining (QUOTA_FLAG_ALONE).  None without a short window (Gemini's
        own quotas)."""
        if self._short_window_s <= 0:
            return math.inf
        recent = self._others_within_window(name, now)
        if not recent:
            return math.inf
        target = self._targets(recent | {name})[name]
        return max(target * self._turn_s, self.timing.min_quota_s)

    def _others_within_window(self, name: str, now: float) -> set[str]:
        """The clients but `name` granted the GPU within the window."""
        since = now - self.timing.window_s
        return {n for n in self.clients if n != name and (i := self.history.latest(n)) is not None
                and i.end > since}

    @property
    def _short_grant_s(self) -> float:
        """The longest grant: a tenth of the short window, so that a share can be right over
        one short window (none without a short window: Gemini's own quotas), but a capped
        client's alone (_lone_turn_s)."""
        short = self._short_window_s
        return max(self.timing.min_quota_s, short / 10) if short > 0 else math.inf

    @property
    def _turn_s(self) -> float:
        """How long a round of turns lasts when everyone wants the GPU."""
        short = self._short_grant_s
        return short if math.isfinite(short) else self.timing.base_quota_s

    def _paced_grant_s(self, limit: float) -> float:
        """A capped client's longest grant: its limit's part of a turn (40 ms at 0.4), so that
        with its pace (policy.Pacer) its time is spread within each turn."""
        return max(limit * self._turn_s, self.timing.min_quota_s)

    def _lone_turn_s(self, limit: float, name: str, now: float) -> float:
        """The turn that a capped client alone is paced in (LONE_PACED_WORK_S): a whole part of
        the short window; 0 where it is not alone (another client wants the GPU, or had it
        within the short window) and not in shared turns (SHARED_TURNS_MAX), has no cap, or its
        cap is too small for such a grant (a neighbour's too, in shared turns, where that may be
        as short as SHARED_PACED_WORK_MIN_S), or its bursts
        are (LONG_BURST), is a unified-memory client, is read by the clock, or has had no
        ordinary grant yet (in this group: one moved between partitions keeps its tokens, not
        its grants)."""
        return self._turn_and_why(limit, name, now).turn_s

    def _turn_and_why(self, limit: float, name: str, now: float) -> TurnVerdict:
        """_lone_turn_s, where that is 0 why, and where its turns are shared who with."""
        short = self._short_window_s
        if limit >= 1.0:
            return TurnVerdict(0.0, f"{name} has no cap")
        if not self.timing.lone_turns or short <= 0:
            return TurnVerdict(0.0, "no lone turns")
        if not self.timing.shared_turns and (
                self._grace is not None or any(c.name != name for c in self.candidates)):
            # (at once: this is asked several times a decision)
            return TurnVerdict(0.0, "beside others")
        group = self._turn_group(name, now)
        shared = len(group) > 1
        if shared and not self.timing.shared_turns:
            return TurnVerdict(0.0, "beside others")
        limits = {n: self.clients[n].spec.limit for n in sorted(group)}
        if shared:
            if uncapped := [n for n, cap in limits.items() if cap >= 1.0]:
                return TurnVerdict(0.0, f"{uncapped[0]} has no cap")
            if (caps := sum(limits.values())) > SHARED_TURNS_MAX:
                return TurnVerdict(0.0, f"caps adding up to {caps:.2f} side by side")
        for n in limits:
            if why := self._turns_misfit(n):
                return TurnVerdict(0.0, why)
        smallest = min(limits.values()) * short
        parts = math.floor(smallest / LONE_PACED_WORK_S + 1e-9)
        least = 2 if shared else 1  # (SHARED_TURNS_MAX says why)
        if parts < least and shared:  # (SHARED_PACED_WORK_MIN_S)
            parts = math.floor(smallest / SHARED_PACED_WORK_MIN_S + 1e-9)
        if parts < least:
            return TurnVerdict(0.0, "a cap too small for such turns")
        if short / parts <= self._turn_s:
            return TurnVerdict(0.0, f"turns of {short / parts * MS:.0f} ms, no longer than the "
                                    "usual")
        return TurnVerdict(short / parts, mates=frozenset(group - {name}))

    def _describe_turn(self, turn: float, verdict: TurnVerdict) -> str:
        """The log's line for a client whose grants go to turns of `turn` (0: the usual ones,
        _turn_s: 100 ms with the default short window, for `verdict`'s reason)."""
        if not turn:
            why = verdict.why
            return f"back in {self._turn_s * MS:.0f} ms turns" + (f": {why}" if why else "")
        mates = sorted(verdict.mates)
        beside = f"shared turns with {', '.join(mates)}" if mates else "lone turns"
        return f"paced in turns of {turn * MS:.0f} ms ({beside})"

    def _turn_group(self, name: str, now: float) -> set[str]:
        """`name` and the clients that want the GPU, are expected back (the return grace), or
        held it within the short window."""
        since = now - self._short_window_s
        group = {name} | {c.name for c in self.candidates}
        group |= {n for n in self.clients
                  if (i := self.history.latest(n)) is not None and i.end > since}
        if self._grace is not None:
            group.add(self._grace[0])
        return group & set(self.clients)

    def _turns_misfit(self, name: str) -> str:
        """Why `name` cannot be paced in whole turns (_lone_turn_s; "": it can)."""
        client = self.clients[name]
        if client.longest_grant_s == 0.0:  # (clients that start together ask apart; a 10 ms
            # burst moved between partitions took a 125 ms turn: a review)
            return f"{name} has had no grant"
        if is_um(client.spec, self.um):  # (its grants: a second or more)
            return f"{name} uses unified memory"
        if self._clock_at is not None and not self.speed.reads_by_work(name):
            # (read by the clock, its calibrations are whole ones, lumps whatever its grants:
            # in turns of a third of a second, a 0.4 cap did 0.372 of its work over 8 s on the
            # simulator)
            return f"{name} is read by the clock"
        grant = self._turns_grant_s(client)
        said = ((client.burst_s, client.burst_after_s),
                (client.previous_burst_s, client.previous_burst_after_s))
        # (each against the grant it was said after, if that was shorter: its hook's burst
        # follows its grants a grant or two late, and a cap raised from 0.3 to 0.6 left shared
        # turns on its bursts of 143 and 253 ms after its first grant of 285, its neighbour's
        # 1 s windows 0.17 of its work on the H100, 0.14 on the simulator, 2026-12-07)
        if all(burst < LONG_BURST * min(grant, after) for burst, after in said):  # (shorter:
            # they pace it; two in a row, as one may sync early once: a JAX pair left shared
            # turns for 0.7 s on one burst of 64 ms among its 160s, H100 2026-12-07 09:25)
            return (f"{name}'s bursts of {client.previous_burst_s * MS:.0f} and "
                    f"{client.burst_s * MS:.0f} ms, its grants {grant * MS:.0f}")
        return ""

    @staticmethod
    def _turns_grant_s(client: ClientState) -> float:
        """The grant a client's bursts are judged against (LONG_BURST): its longest, or its
        latest in lone or shared turns if that was shorter (its grants there shrink as its
        speed rises, and its hook's bursts with them)."""
        return min(client.longest_grant_s, client.turn_grant_s or math.inf)

    def _lone_paced_grant_s(self, limit: float, name: str, now: float) -> float:
        """A capped client's grant alone (or in shared turns): its limit's part of its turn
        in work, so that its pace, which each grant moves on by its work ÷ its limit, comes
        round in one turn (0: not in lone or shared turns, _lone_turn_s)."""
        return self._paced_in_turn_s(limit, name, now, self._lone_turn_s(limit, name, now))

    def _paced_in_turn_s(self, limit: float, name: str, now: float, turn: float) -> float:
        """_lone_paced_grant_s for a `turn` already read (0: none)."""
        # (in_turns: the first grant into them too, sized before the client's turn is set)
        return limit * turn / max(self._speed(name, now, in_turns=True), 1.0) if turn else 0.0

    @property
    def _short_window_s(self) -> float:
        """The short window as it counts: never longer than the long one; 0: none."""
        return min(self.timing.short_window_s, self.timing.window_s)

    @property
    def _cap_window_s(self) -> float:
        """The shortest window a cap holds over: the short one, or the long one where there is
        none (--short-window 0)."""
        return self._short_window_s or self.timing.window_s

    @property
    def _capped_grant_s(self) -> float:
        """A client at its limit waits until it has room for this much.  Shorter grants cost a
        switch each; longer ones leave the client, on average, half of this below its limit
        over the short window (at most 1 point of it)."""
        t = self.timing
        return max(t.min_quota_s, min(4 * t.min_quota_s, self._cap_window_s / 50))

    def _window(self, now: float, length: float | None = None) -> tuple[float, float]:
        """(start, size) of the window of `length` (the long one by default) ending now."""
        origin = self.started_at if self.first_request_at is None else self.first_request_at
        size = min(self.timing.window_s if length is None else length, now - origin)
        return now - size, size

    def _select(self, now: float) -> tuple[Candidate, Standing | None] | None:
        self._top_up_grants = {}  # (this decision's: _standings)
        window_start, _ = self._window(now)
        self.history.expire(window_start)
        front = self.candidates[0]
        capped = self.clients[front.name].spec.capped
        alone = len(self.candidates) == 1 and self._grace is None
        if alone and not capped:
            return front, None  # alone and uncapped: nothing to weigh
        names = [c.name for c in self.candidates]
        if self._grace is not None:
            names.append(self._grace[0])  # the expired holder, expected back at once
        least = ENOUGH_OF_A_GRANT * self._capped_grant_s
        standings = self._standings(names, now, least)
        best = pick(standings, least)
        waited, self._waited_for = self._waited_for, None
        if best is None:
            # Everyone waiting is at its limit or paced; usage falls as the window slides, so
            # look again when the closest one has room for a capped grant and its pace is due.
            short = min(max(self._room_wait_s(s, least, now), s.ready_in) for s in standings)
            self._recheck_at = now + max(short, MIN_RECHECK_S)
            return None
        index = standings.index(best)
        if index == len(self.candidates):
            assert self._grace is not None
            self._recheck_at = self._grace[1]  # wait for the expired holder's request
            return None
        others = [s for s in standings[:len(self.candidates)] if s is not best]  # (no grace)
        if self._waits_in_shared_turns(best, others, least, now, waited):
            return None
        return self.candidates[index], best

    def _waits_in_shared_turns(self, best: Standing, others: list[Standing], least: float,
                               now: float, waited: tuple[str, float] | None) -> bool:
        """Does `best` (pick's), in shared turns, wait for a neighbour there (of `others`, the
        rest that asked: not an expired holder, whose grace is shorter) that may go within
        SHARED_TURNS_YIELD_S?  Then it looks again then, and picks again: that the neighbour
        go first then, whatever its credit, left a 0.3 beside a cap raised to 0.6 a second of
        0.143 on the simulator, 0.296 without.
        Once (`waited`: the neighbour the decision before waited for, and until when): not
        again for it once that time came, nor for another one after it."""
        if not others or (waited is not None and now >= waited[1]):
            return False  # (alone, as in lone turns: no turn read again)
        if best.name in self._top_up_grants:
            return False  # (its top-up ends before any of them may go)
        mates = self._turn_and_why(best.limit, best.name, now).mates  # (none: not shared)
        for s in others:
            if s.name not in mates or (waited is not None and s.name != waited[0]):
                continue
            wait = self._goes_in_s(s, least, now, SHARED_TURNS_YIELD_S)
            if 0 < wait <= SHARED_TURNS_YIELD_S:
                until = now + max(wait, MIN_RECHECK_S) if waited is None else waited[1]
                self._recheck_at = min(now + max(wait, MIN_RECHECK_S), until)
                self._waited_for = (s.name, until)
                return True
        return False

    def _goes_in_s(self, standing: Standing, least: float, now: float, within: float) -> float:
        """Seconds until `standing` may go, up to `within`: its pace come round, with room for
        its grant then (its windows slide on; inf: not within that)."""
        wait = max(standing.ready_in, 0.0)
        want = max(least, standing.need)
        if wait == 0.0 and standing.remaining >= want:
            return 0.0
        if standing.remaining < want:  # (not resting: its room was read, and is short)
            slide = self.history.next_slide(standing.name, now, self._short_window_s)
            wait = max(wait, slide)
        if wait > within:  # (no room read for one resting longer: _resting)
            return math.inf
        then = now + wait
        _, long_size = self._window(then)
        room = self._room(standing.name, long_size, then, max(self._room_horizon_s, want),
                          self._due_calibrations.get(standing.name))
        return wait if room >= want else math.inf

    def _room_wait_s(self, standing: Standing, least: float, now: float) -> float:
        """How long `standing` may wait before its room is read again: what it lacks of the
        room it waits for (room comes back no faster than the windows slide), but for a capped
        client alone no later than its short window's start reaches its next grant or charge
        (UsageHistory.next_slide), and no sooner than LONE_RECHECK_S: its room comes back all at
        once there, and one 155 ms look past that put a 0.2 cap's grants 1.06-1.13 s apart,
        its 1 s windows 13 points under (the simulator).  (Every 2 ms instead, a client whose
        pace lagged its room after its cap was lowered was looked at ~300 times a second for
        up to 50 s: a review.)"""
        wait = max(least, standing.need) - standing.remaining
        if self._lone_turn_s(standing.limit, standing.name, now):
            slide = self.history.next_slide(standing.name, now, self._short_window_s)
            wait = min(wait, max(slide, LONE_RECHECK_S))
        return wait

    def _standings(self, names: list[str], now: float, least: float) -> list[Standing]:
        """Where each of `names` stands; `least`: the room that a grant waits for.  Once a
        decision: it charges an uncapped client whose calibration falls due part of its lump
        ahead (_paid_ahead)."""
        _, long_size = self._window(now)
        rates = self._targets(names)
        far = self._room_horizon_s
        out = []
        self._due_calibrations = {}
        for n in names:
            cal = self._due_calibrations[n] = self._due_calibration(n, names, now)
            need = ENOUGH_OF_A_GRANT * cal.length_s if cal is not None else 0.0
            need = max(need, self._um_least_s(n, now))  # (room for a whole UM grant)
            lone = self._lone_paced_grant_s(self.clients[n].spec.limit, n, now)
            need = max(need, ENOUGH_OF_A_GRANT * lone)  # (_lone_least_s)
            ready_in = self.pacer.ready_in(n, now)
            resting = self._resting(ready_in, max(least, need))
            # (read as far as a whole grant in turns: one in shared turns may be longer than
            # the horizon, 300 ms for a 0.6 cap beside a 0.3, and read only to its need it
            # was cut to that, 0.9 of it each time: 0.536 of its work a second)
            room = math.inf if resting else self._room(n, long_size, now, max(far, need, lone),
                                                       cal)
            out.append(Standing(n, self.credits.of(n), rates[n], room, ready_in,
                                self.clients[n].spec.limit, need, self.clients[n].tokens == 0))
        return self._with_top_ups(out, least, now, long_size) if self._top_ups else out

    def _lone_least_s(self, name: str, now: float) -> float:
        """The room a capped client alone (or in shared turns) waits for: a whole one of its
        grants, less a tenth (as for any).  Else one that came round early (its speed moved,
        and with it its pace) took what room there was (53 ms of 126 on the simulator), and the
        second that held it read 7.7 points under."""
        return ENOUGH_OF_A_GRANT * self._lone_paced_grant_s(self.clients[name].spec.limit, name,
                                                            now)

    def _um_least_s(self, name: str, now: float) -> float:
        """The room a capped unified-memory client waits for: a whole one of its grants
        (um_least_s)."""
        spec = self.clients[name].spec
        if not spec.capped or not is_um(spec, self.um):
            return 0.0
        return um_least_s(spec, self.um, self._um_window_s(name, now))

    def _um_window_s(self, name: str, now: float) -> float:
        """The long window as a UM client's grants are charged in it: each of their seconds
        at its speed (_charge_speed), so that k of them fit its allowance.  Cut by length
        alone, the k-th never fitted, and a 0.12 cap with the GPU's clock fed got 0.061 of its
        work on the simulator, one 0.6 s grant in 9.5 s (0.106 now)."""
        return self.timing.window_s / max(self._speed(name, now), 1.0)

    @staticmethod
    def _resting(ready_in: float, least: float) -> bool:
        """Does its pace hold a client longer than any room it could wait for (`least`)?  Then
        no one reads its room (pick passes it over, and the next look waits for its pace), and
        its windows are not walked: with many capped clients, most rest at any decision."""
        return ready_in >= least

    def _room(self, name: str, long_size: float, now: float, far: float,
              cal: Calibration | None = None) -> float:
        """How long a grant to `name` (a calibration `cal`, where one is due) may be under its
        limit, up to `far` (_room_horizon_s), each of its seconds weighed at what it will be
        charged (_charge_rate)."""
        spec = self.clients[name].spec
        room = math.inf
        if spec.capped:
            # A young window counts as one short window at least, so that a new client's
            # first grant may fill its first short window, and no more.
            short = self._short_window_s
            young = max(long_size, short)
            if is_um(spec, self.um):  # (its grants fill the long window's part, from the start)
                young = max(young, self.timing.window_s)
            # Its cap lowered (or set again): its windows hold no use from before
            # (UsageHistory.room's `since`).  Windows shortened to the time since the edit
            # instead, at least a turn, still held the grant before it: a 0.6 cap lowered to
            # 0.3 within shared turns waited for them to grow, 0.5 s, and its 1 s window from
            # the edit held 0.148 of its work (the simulator, bench/sim_edits.py).
            since = self._capped_since.get(name, -math.inf)
            # The pace holds the limit on average; each window allows a little more.
            history = self.history
            rate = self._charge_rate(name, now, cal)
            allowed = self._allowed_s(spec, young, rate)
            if young > short > 0:
                # Alone, its pace fills each window to its limit, and one grant that waited
                # for room (its pace came round early as its speed moved) was a phase shift
                # that the long window met again 10 s later: there it waited 60 ms more, and
                # that 1 s window read 6 points under (the simulator).  A grant more over 10 s
                # (1.1 points at 0.4, up to 2.2 for a grant of 240 ms at 0.23) takes the echo
                # out; the short window still holds it.
                allowed += self._lone_least_s(name, now)
            # (A unified-memory client's grants are a second or more, for migration: its cap
            # holds over the long window only, as the README says.)
            held_short = short > 0 and not is_um(spec, self.um)
            if cal is not None and young >= self.timing.window_s and held_short:
                # Once the long window is full its pace holds it at the limit, and a lump
                # waited there for room too (210 ms with no grant before one at 0.4, against
                # 150-185 before its others: its second before read 7 points under on the
                # simulator).  The pace after it pays its excess back well within the window,
                # where the short window bounds the lump (not without one: a 0.05 cap with
                # Gemini's own quotas read 2.2 points over 10 s; nor for a UM client, whose
                # calibration is an ordinary grant of a second).  Half of it is room enough
                # (the 1 s windows read the same with all of it, the 10 s ones higher: a 0.2
                # cap at gem-schd's own quotas 1.8 points over, 1.5 with half).
                allowed += cal.length_s * (1.0 - spec.limit) / 2
            room = history.room(name, now, young, allowed, far, rate, since)
            if held_short:
                allowed = self._allowed_s(spec, short, rate)
                if cal is not None:
                    allowed += self._lump_share_s(spec, cal)
                room = min(room, history.room(name, now, short, allowed, far, rate, since))
        return room

    def _lump_share_s(self, spec: ClientSpec, cal: Calibration) -> float:
        """What a calibration may hold of its 1 s window beyond the window's allowance: half
        its lump's excess over the limit, L (1 - limit) / 2, less a paced grant (what a
        window holds of a paced client more or less anyway); the pace after it pays that back
        (policy.Pacer).  It waited until the pace before it had paid the whole lump back, and
        the seconds before one read 6.5-8.1 points under for two clients capped at 0.3 on the
        simulator, 4.8-6.0 now (H100, 2026-12-06: 6.7-8.0 under, 2.4-3.3 over).  For a lump
        LUMP_BOUND sizes (read by work, or beside others), nothing at 0.4 and up with the
        launchers' quotas (a paced grant of 40 ms there), nor where grants are 100 ms at
        least (gem-schd's own -m 100)."""
        excess = cal.length_s * (1.0 - spec.limit)
        share = excess / 2 - self._paced_grant_s(spec.limit)
        # ...and never past LUMP_BOUND over the limit, with the window's edge: a lone client
        # read by the clock has a lump that bound does not size (170 ms at 0.3), and its
        # seconds read 5.2 points over on the simulator.
        short = self._short_window_s
        return max(0.0, min(share, LUMP_BOUND * short - self._window_edge_s(spec.limit)))

    def _charge_rate(self, name: str, now: float, cal: Calibration | None) -> float:
        """What a second of a capped grant starting now is charged on average (_charge_speed),
        as far as its room must count it: a calibration's settling part at its speed, spread
        over it, where no other client had the GPU within the window.  Its room counted its
        time only, and the windows that held one read highest (H200, 2026-12-03, torch eager
        alone: 0.445 of its bare work at a 0.4 cap, 0.864 at 0.8 in another sitting; 0.436
        and 0.847 with it, which cost the simulator's caps of 0.3-0.4 alone 0.3-0.4 points
        of their work over 30 s).  Not beside others: there a lump is already sized to be paid
        back both ways (speed.LUMP_BOUND), and waiting longer for its room, the simulator's
        pairs capped at 0.3 read 1 s windows 1-4 points lower.  An
        ordinary grant's speed-up is counted in the room of the grants after it only (weighed
        at it too, the same pairs read as low, and a 0.4 cap did 0.3 points less)."""
        if cal is None or self._others_within_window(name, now):
            return 1.0
        speed = self._speed(name, now)
        return 1.0 + (speed - 1.0) * min(cal.settle_s / cal.length_s, 1.0)

    def _allowed_s(self, spec: ClientSpec, window_s: float, rate: float = 1.0) -> float:
        """The most a capped client may hold of a window of `window_s`: its limit's part, and a
        little more (the most a window catches of a client on its pace is about one paced
        grant: WINDOW_EDGE; with a short window, no more than WINDOW_EDGE_MAX of it), but never
        less than the room a client at its limit waits for (`_capped_grant_s`): else a small
        cap beside long minimum quotas waits for ever (0.05 with gem-schd's -m 100: 90 ms
        allowed, 100 waited for; on the simulator, not one grant in 30 s), as charged at
        `rate` (_charge_rate)."""
        edge = self._window_edge_s(spec.limit)
        return max(spec.limit * window_s + edge, self._capped_grant_s * rate)

    def _window_edge_s(self, limit: float) -> float:
        """What a window allows a client capped at `limit` over it (_allowed_s)."""
        edge = WINDOW_EDGE * self._paced_grant_s(limit)
        if self._short_window_s > 0:
            edge = min(edge, WINDOW_EDGE_MAX * self._short_window_s)
        return edge

    @property
    def _room_horizon_s(self) -> float:
        """The most of a capped client's room that a decision reads: its longest grant (a
        quota, cut to the short window's tenth, or a grant in lone turns: LONE_PACED_WORK_S,
        at most twice that), a calibration, or the room that a client at its limit waits for.  Room
        past it changes nothing, and the windows are walked only this far (the two windows of a
        paced client then cost ~8 us a decision, not ~140 us: the long one holds hundreds of
        its grants and charges)."""
        t = self.timing
        longest = min(max(t.max_quota_s, t.base_quota_s), self._short_grant_s)
        # (a grant in shared turns may be longer: _standings reads that far for it)
        lone = 2 * LONE_PACED_WORK_S if t.lone_turns else 0.0
        return max(longest, CALIBRATION_S, self._capped_grant_s, lone)

    # ---- config --------------------------------------------------------------------------------

    def _apply_config(self, config: ResourceConfig, now: float) -> list[Action]:
        out: list[Action] = []
        old = self.clients
        old_limits = {name: c.spec.limit for name, c in old.items()}  # (specs change in place)
        in_shared_turns = self._staying_in_shared_turns(config, now)
        self.clients = {}
        limit_changed = False
        lowered: set[str] = set()  # the clients whose caps were lowered
        raised: list[str] = []  # the clients whose caps were raised in shared turns
        for spec in config.clients:
            state = old.get(spec.name)
            self._removed_asking.pop(spec.name, None)  # (in the config: not a removed one)
            if state is None:
                state = self.clients[spec.name] = ClientState(spec, self.timing.base_quota_s)
                self._books_since[spec.name] = now
                if old:
                    out.append(act.info(spec.name, "client added"))
                # (its pod manager keeps another limit; kept only while a connection is open,
                # never empty; a long name's REPORTs came by its alias: wire.report_name)
                books = [self._absent_books.pop(n) for n in (spec.name, quota_alias(spec.name))
                         if n in self._absent_books]
                if books:
                    state.conns = set().union(*(conns for conns, _ in books))
                    state.mem_used = max(mem_used for _, mem_used in books)
                    out += self._push_memory_limit(state, spec)
                if spec.capped and self.history.has(spec.name):
                    # Removed and added again (two saves of the config): its cap holds from
                    # now on, as a cap lowered in place does, not against the time it used
                    # before (0.3 added back after running alone: nothing for 7 s).
                    self._capped_since[spec.name] = now
                continue
            if state.spec != spec:
                out.append(act.info(spec.name, f"client changed: {_describe(spec)}"))
            if spec.limit < state.spec.limit:
                # A lower cap holds from now on: the time it used under the old one does not
                # count against the new (a 0.4 cap lowered to 0.1 had 4 s in its 10 s window
                # against the 1 s now allowed, and got nothing for 8 s).
                self._capped_since[spec.name] = now
                lowered.add(spec.name)
            if spec != state.spec:
                self._top_ups.pop(spec.name, None)  # (its pace holds the new spec from now)
            if spec.limit > state.spec.limit and spec.name in in_shared_turns:
                raised.append(spec.name)  # (_top_up_raised)
            elif spec.limit > state.spec.limit:
                # (staying in shared turns, its next grant goes to a place in the turn where it
                # runs into no neighbour's, topped up until then: brought forward by its pace
                # alone, it took the GPU just before a neighbour's pace came round, and that
                # neighbour's 1 s windows lost a whole grant in 6 of 20 edits on the simulator,
                # bench/sim_edits.py; leaving them, for 100 ms turns, it is brought forward: at
                # its old pace a 0.3 raised to 0.7 held 0.27-0.31 of its first half second,
                # 0.46-0.67 brought forward)
                self.pacer.raised(spec.name, state.spec.limit, spec.limit, now)
            limit_changed = limit_changed or spec.limit != state.spec.limit
            if not spec.capped:
                self.pacer.forget(spec.name)  # its cap lifted: no longer paced
            else:
                self._shared_speeds.pop(spec.name, None)  # (charged in its windows now)
                self.credits.give_back_ahead(spec.name)
            if state.spec.gpu_mem != spec.gpu_mem or mem_flags(state.spec, self.um) != mem_flags(
                spec, self.um
            ):
                out += self._push_memory_limit(state, spec)
            state.spec = spec
            self.clients[spec.name] = state
        for name in old.keys() - self.clients.keys():
            if old[name].conns:
                self._absent_books[name] = (old[name].conns, old[name].mem_used)
            self.credits.forget(name)
            self._books_since.pop(name, None)
            self._capped_since.pop(name, None)
            self._shared_speeds.pop(name, None)
            self._alike_said.pop(name, None)
            self._unsteady_since.pop(name, None)
            self.pacer.forget(name)
            self._top_ups.pop(name, None)
            self.speed.forget(name)
            out.append(act.info(name, "client removed: no new tokens"))
        self.removed = (self.removed | old.keys()) - self.clients.keys()
        if limit_changed:
            self.caps_changed_at = now
            busy = self._busy_through_edit(old_limits, now)
            for name in self.clients:  # (a cap changed: the others' grants run otherwise too)
                self.speed.duty_changed(name, busy)
        self.credits.bound = self._credit_bound_s()
        for name in [n for n in self._top_ups if n not in in_shared_turns]:
            del self._top_ups[name]  # (its group left shared turns: a review)
        for name in raised:
            out += self._top_up_raised(name, now)
        return out + self._cut_lowered_holder(lowered, now)

    def _busy_through_edit(self, old_limits: dict[str, float],
                           now: float) -> tuple[float, float]:
        """The share of the time the card's grants hold it, before a cap edit and after it
        (speed.EDIT_BUSIER_FROM): before, over the cap's window (or as the edit before this
        one left it, where that came within the window: the grants have not caught up); after,
        that plus each changed cap's rise over its speed, for a client that ran, less the share
        of a client removed.  (A client its own demand holds under its cap is read as if at
        it.)"""
        start, size = self._window(now, self._cap_window_s)
        if size <= 0.0:
            return 1.0, 1.0
        held: dict[str, float] = {}
        for grant in self.history.overlapping(start, now):
            part = min(grant.end, now) - max(grant.start, start)
            held[grant.name] = held.get(grant.name, 0.0) + part / size
        before = sum(held.values())
        if self._busy_after_edit is not None and now - self._busy_after_edit[0] < size:
            before = self._busy_after_edit[1]
        rise = sum((min(c.spec.limit, 1.0) - min(old_limits[n], 1.0)) / self._speed(n, now)
                   for n, c in self.clients.items() if n in old_limits and n in held)
        gone = sum(share for n, share in held.items() if n in old_limits and n not in self.clients)
        after = min(max(before + rise - gone, 0.0), 1.0)
        self._busy_after_edit = (now, after)
        return before, after

    def _cut_lowered_holder(self, lowered: set[str], now: float) -> list[Action]:
        """A cap lowered while its client holds the token: the grant, made at the old cap, is
        cut to what the new one gives (its length times new / old, which keeps its pace), or
        to now where it ran longer; its pod manager is told (wire.CUT_ID).  Run to its end, a
        283 ms grant at 0.6 lowered to 0.3 18 ms in held the next at the new cap's room since
        the edit, 0.72 s later, and the 1 s window between them held 0.149 of its work (H100,
        2026-12-07).  A calibration too: its run is not read by work (`Interval.
        cut_calibration`: its hook measured its start, not its continuous tail), nor by the
        clock where it was cut below 0.75 of its length (SpeedMeter.sample); the next comes
        when due.  Not a grant whose processes run on without their pod manager, nor one whose
        pod manager did not say it applies cuts (wire.REPORT_APPLIES_CUTS: a v1 one, or one of
        ours from before, ran on to the grant's end beside the next holder, uncharged), nor a
        unified-memory client's (its long grants are for its migrations, and its cap holds
        over the long window only); not by less than CUT_MIN_S."""
        holder = self.holder
        if holder is None or holder.interval.name not in lowered:
            return []
        grant = holder.interval
        # (by the cap it was made at: raised and lowered back within it, it is not cut, a review)
        ratio = self.clients[grant.name].spec.limit / holder.limit
        end = max(now, grant.start + (grant.end - grant.start) * ratio)
        applies = self.applies_cuts(holder.conn)
        um = is_um(self.clients[grant.name].spec, self.um)
        if holder.orphaned_until is not None or not applies or um or grant.end - end < CUT_MIN_S:
            return []
        was = grant.end
        holder.limit = self.clients[grant.name].spec.limit  # (what it is now made at)
        grant.cut_calibration = grant.calibrating
        holder.alone = False  # (its hook goes on no credit past the cut: token_fetch.c)
        self._end_early(grant, end, keep_pace=True)  # (the rest at the new cap keeps it)
        left = end - now
        said = act.info(grant.name, f"cap lowered: its token cut by {(was - end) * MS:.1f} ms, "
                                    f"{left * MS:.1f} ms left")
        cut = Response(CUT_ID, Status.OK, (left * MS, 0, 0, now))
        return [said, Reply(holder.conn, RequestType.QUOTA, cut)]

    def _top_up_raised(self, name: str, now: float) -> list[Action]:
        """A cap raised in shared turns: its next grant comes at the first place from the edit
        on where its grown grants run into no neighbour's and its windows have room for them
        (not brought forward onto a neighbour's grant: Pacer.raised), or at its old pace where
        there is none (_raised_place).  Until then it is owed its new cap's part of that time,
        less what a grant it holds gives it of it, and no more than its short window has room
        for beside the grants its pace will bring (_short_window_left_s, read again at each
        top-up); that is granted in the GPU's free time before any neighbour may go, as no pace
        of its own (_with_top_ups; nor do its speed charges, or those of the grants made before
        its place, move that place: _moves_pace).
        Without it, b raised from 0.3 to 0.6 beside a at 0.3 held 0.465-0.54 of its work in
        its first second for edits 50-250 ms into their half-second turns: its grant held at
        the edit, made at the old cap, ran out, and its next came at the old pace (the
        simulator, bench/sim_edits.py); now 0.561-0.586.  Unbounded by its window, 0.648 for
        edits late in its rest, whose window held two of its new grants.  (The mirror of the
        lowered cap's cut, the grant held made longer, would need its pod manager and hooks
        told of a later end, and does nothing for a client resting at the edit.)"""
        if is_um(self.clients[name].spec, self.um):
            return []  # (its grants are sized for its migrations: um_quota)
        pace = now + self.pacer.ready_in(name, now)
        place = self._raised_place(name, pace, now)
        if place is not None:  # (none: it stays at its pace, which moves as ever)
            self.pacer.place_at(name, place)
            self.clients[name].placed_at = now
            pace = place
        # (the new cap's part of the time to its next grant, less what the grant it holds, if
        # it does, gives it of that time)
        owed = self.clients[name].spec.limit * (pace - now) - self._held_left_s(name, now)
        owed = min(owed, self._short_window_left_s(name, pace, now))
        if owed < ENOUGH_OF_A_GRANT * self._capped_grant_s:
            return []
        self._top_ups[name] = TopUp(owed, pace)
        return [act.debug(name, f"cap raised: {owed * MS:.1f} ms more owed before its pace comes "
                                f"round, in {(pace - now) * MS:.1f} ms")]

    def _raised_place(self, name: str, pace: float, now: float) -> float | None:
        """Where the next grant of a client whose cap was raised in shared turns fits: the first of
        the end of the grant held now (or now), its pace and its turn-mates' next grants' ends,
        within a turn of its pace, where it runs into no turn-mate's grant and its windows have room
        for it and the grant a turn after it.  Its grants grew, and its place may be too short for
        them: at a place 210 ms before a's, a 0.3 raised to 0.6 took 281 ms, a's grants moved on by
        70-100 ms for good (paced from its grants), and a's 1 s windows read 0.14-0.23 of its work
        on the simulator (b starting 0.2-0.4 s after a: bench/sim_edits.py --b-starts), 0.20 on the
        H100 (2026-12-07 16:20).  Searched from its pace on only, its grant went after a's next
        one, up to 750 ms after the edit, and the top-up its window had room for left it idle 325
        ms before it: 0.482-0.547 of its work over a second, 12.5 points under at worst over five
        places (7.3 with it, a 1.9 at worst against 2.6).  Without room for the grant a turn
        after it, that one waited for its window into the next mate's place (a trio, 0.3 raised
        to 0.4: 10 points under).  Until then it is topped up (_top_up_raised).  None: no place
        fits, or it is not in turns (it stays at its pace)."""
        limit = self.clients[name].spec.limit
        turn = self._lone_turn_s(limit, name, now)
        if not turn:
            return None
        grant = self._paced_in_turn_s(limit, name, now, turn)
        slots = []  # (each mate's next three grants: one a turn, at its speed)
        for m in self._turn_group(name, now) - {name}:
            due = now + max(self.pacer.ready_in(m, now), 0.0)
            length = self._paced_in_turn_s(self.clients[m].spec.limit, m, now, turn)
            slots += [(due + k * turn, length) for k in range(3)]  # (its pace: a turn a
            # grant, its speed's charge included)

        def fits(at: float) -> bool:  # (a mate held up to SHARED_TURNS_YIELD_S: fits)
            if not all(at >= due + length or at + grant <= due + SHARED_TURNS_YIELD_S
                       for due, length in slots):
                return False
            # (room for it and the next, read as one run ending where the next one does, a turn
            # at a speed of 1 on, a little sooner than it comes: the windows that hold the next
            # hold it too.  Read a whole turn on, b raised in a trio read 9.9 points under on
            # the simulator, against 4.8: its place went further on)
            then = at + grant / limit - grant
            return self._room(name, self._window(then)[1], then, 2 * grant) >= 2 * grant

        # The first of these places (the end of the grant held now, its own or a mate's, its
        # pace, a mate's grant's end), within a turn of its pace, where it fits; none (their
        # grants leave no gap that long: 0.4 beside 0.2 and 0.3): its pace, where the mate it
        # runs into waits once (moved past them all, it ran into the next turn's, its place
        # 879 ms on, and a and c read 10-15 points under on the simulator).
        first = max(now, self.holder.interval.end) if self.holder is not None else now
        places = sorted({first, pace, *(due + length for due, length in slots)})
        return next((at for at in places if first <= at < pace + turn and fits(at)), None)

    def _short_window_left_s(self, name: str, pace: float, now: float) -> float:
        """The longest top-up for `name`, from the end of a grant it holds (or now), after which
        each short window ending where one of its grants from `pace` on ends holds no more than
        _allowed_s (its cap's part and the edge), all in work at its speed read now (inf: not
        in turns).  Its grants come a turn apart (its pace moves on by a grant's work / its
        cap), each its cap's part of a turn in work; its use before now is counted (from when
        its cap last held anew: _capped_since, as _room reads it).  Those windows are the ones
        its room is read over as each of those grants comes (_room reads them all, each second
        of a grant at 1, its speed charged at its end), so a top-up within this bound leaves
        them room, as far as its speed holds (a speed that rose after the edit cut its second
        grant by 13 ms on the simulator).  Read at the edit, the grant it holds counts at 1
        before now (its speed charge comes at its end); read again at each top-up's grant.
        (The bounds tried before: bench/JOURNAL-issue12.md, 2026-12-07 from 19:45.)"""
        limit = self.clients[name].spec.limit
        turn = self._lone_turn_s(limit, name, now)
        short = self._short_window_s
        if not turn or not short:
            return math.inf
        grant = self._paced_in_turn_s(limit, name, now, turn)
        speed = limit * turn / grant  # (a granted second's work: _paced_in_turn_s)
        allowed = self._allowed_s(self.clients[name].spec, short)
        since = self._capped_since.get(name, -math.inf)
        start = now + self._held_left_s(name, now)  # (where the top-up would begin)
        left = math.inf
        k = 0
        while (end := pace + k * turn + grant) - short < pace:  # (windows that may hold it)
            window = end - short
            ahead = sum(min(pace + j * turn + grant, end) - max(pace + j * turn, window)
                        for j in range(k + 1) if pace + j * turn + grant > window)
            held = max(start - max(window, now), 0.0)
            before = self.history.used(name, max(window, since), now) if window < now else 0.0
            room = allowed - before - (held + ahead) * speed
            left = min(left, room / speed + max(window - start, 0.0))  # (the top-up's part in it)
            k += 1
        return left

    def _held_left_s(self, name: str, now: float) -> float:
        """What is left of the grant `name` holds (0: it holds none)."""
        held = self.holder.interval if self.holder is not None else None
        return max(held.end - now, 0.0) if held is not None and held.name == name else 0.0

    def _with_top_ups(self, standings: list[Standing], least: float, now: float,
                      long_size: float) -> list[Standing]:
        """`standings`, each client owed a top-up (_top_up_raised) paced to go now (a
        standing made up for pick: ready, with room for the top-up only) for as much of it as
        fits before any other may go (each waiting one's pace, and its room then; a turn-mate's
        pace, asked or not, its room unread: _free_for_top_up_s) and its own room: at least
        `least`, with no calibration due to it (none is, to a capped client, for CAPS_SETTLE_S
        after the raise: a guard).  One whose pace came round is owed no more."""
        out = list(standings)
        for i, s in enumerate(standings):
            top = self._top_ups.get(s.name)
            if top is None:
                continue
            if now >= top.until or s.ready_in <= 0:
                del self._top_ups[s.name]  # (its pace came round: the new cap holds)
                continue
            if self._due_calibrations.get(s.name) is not None:
                continue
            free = self._free_for_top_up_s(s, standings, least, now, top.seconds)
            window = self._short_window_left_s(s.name, top.until, now)  # (read again now)
            grant = min(top.seconds, free, top.until - now, window)
            if grant >= least:
                grant = min(grant, self._room(s.name, long_size, now, grant))
            if grant >= least:
                out[i] = replace(s, ready_in=0.0, remaining=grant, need=min(s.need, grant))
                self._top_up_grants[s.name] = grant
        return out

    def _free_for_top_up_s(self, owed: Standing, standings: list[Standing], least: float,
                           now: float, within: float) -> float:
        """How long the GPU is free for `owed`'s top-up: until another waiting client may go
        (_goes_in_s), or a turn-mate's pace comes round, whether or not it asked yet, and with
        or without room then (a review: one not asked yet was held up by the top-up)."""
        others = [o for o in standings if o is not owed]
        free = min((self._goes_in_s(o, least, now, within) for o in others), default=math.inf)
        for mate in self._turn_and_why(owed.limit, owed.name, now).mates:
            free = min(free, max(self.pacer.ready_in(mate, now), 0.0))
        return free

    def _staying_in_shared_turns(self, config: ResourceConfig, now: float) -> set[str]:
        """The clients in shared turns whose group's caps in `config` still allow them."""
        limits = {spec.name: spec.limit for spec in config.clients}
        staying = set()
        for name, client in self.clients.items():
            group = self._turn_group(name, now) if client.turn_s else set()
            if len(group) > 1 and sum(limits.get(n, 1.0) for n in group) <= SHARED_TURNS_MAX:
                staying.add(name)
        return staying

    def _credit_bound_s(self) -> float:
        """Two of the longest grants made while others wait: a turn, or a UM client's minimum
        (1 s).  Bounded at two turns of 100 ms, each UM grant was mostly forgiven, and turns
        went round as if all asked alike (simulator: an all-UM 0.3/0.7 pair 0.433/0.567, a UM
        0.3 beside a plain 0.7 0.664 of the GPU)."""
        longest = self._turn_s
        if any(is_um(c.spec, self.um) for c in self.clients.values()):
            longest = max(longest, self.um.min_quota_s)
        return 2 * longest

    def _keep_absent_books(self, conn: ConnId, req: Request) -> None:
        """The pod manager of a client not in the config, there all the same: its connection
        and its memory, for the limit it is told if the client is added (kept while the
        connection is open)."""
        conns, mem_used = self._absent_books.get(req.name, (set(), 0))
        conns.add(conn)
        if req.type is RequestType.REPORT:
            mem_used = int(req.args[0])  # type: ignore[call-overload]
        self._absent_books[req.name] = (conns, mem_used)

    def _push_memory_limit(self, state: ClientState, spec: ClientSpec) -> list[Action]:
        values = (state.mem_used, spec.gpu_mem, mem_flags(spec, self.um))
        response = Response(NOTIFY_ID, Status.OK, values)
        return [Reply(conn, RequestType.MEM_LIMIT, response) for conn in sorted(state.conns)]

    def _drop_removed_candidates(self) -> list[Action]:
        out: list[Action] = []
        for c in [c for c in self.candidates if c.name not in self.clients]:
            self.candidates.remove(c)
            out += self._refuse(c.conn, Request(c.name, c.req_id, RequestType.QUOTA))
        return out

    def _removed_holder_asked(self, conn: ConnId, req: Request, now: float) -> list[Action]:
        """A client removed while it held the token asks for the next: it is done with this
        one, as any holder that asks is (else the GPU idled for the rest of its grant)."""
        if req.type is not RequestType.QUOTA:
            return []
        return self.on_holder_asked_elsewhere(conn, now)

    def on_holder_asked_elsewhere(self, conn: ConnId, now: float) -> list[Action]:
        """`conn`'s client, gone from this core's config (removed, or moved to another MPS
        partition: PartitionRouter), asked for a token: if it holds ours, it is done with it."""
        if self.holder is None or self.holder.conn != conn:
            return []
        self._earn(now)
        self._end_early(self.holder.interval, now)
        self.holder = None
        return self._schedule(now)

    def _refuse(self, conn: ConnId, req: Request) -> list[Action]:
        """Said once a connection until it is served again: its hooks ask again every second
        or so, each a line, for as long as the client is not in the config."""
        if req.name in self.removed:
            status, why = Status.CLIENT_REMOVED, "client was removed from the config"
        else:
            status, why = Status.UNKNOWN_CLIENT, "unknown client: not in the config"
        said = act.warning if conn not in self._refused else act.debug
        self._refused.add(conn)
        return [Reply(conn, req.type, Response(req.req_id, status)), said(said_name(req.name), why)]

    # ---- status --------------------------------------------------------------------------------

    def snapshot(self, now: float) -> dict[str, object]:
        window_start, window_size = self._window(now)
        usage = self.history.usage(window_start, now)
        # ...and over the short window, where the caps hold second by second (none: 0)
        short_start, short_size = self._window(now, self._short_window_s)
        short_usage = self.history.usage(short_start, now) if short_size > 0 else {}
        holder = self.holder.interval.name if self.holder is not None else None
        waiting = {c.name for c in self.candidates}
        clients = [
            {
                "name": name,
                "request": c.spec.request,
                "limit": c.spec.limit,
                "gpu_mem": c.spec.gpu_mem,
                "gpu": c.spec.gpu,
                "mem_used": c.mem_used,
                "unified_memory": is_um(c.spec, self.um),
                "share": usage.get(name, 0.0) / window_size if window_size > 0 else 0.0,
                "share_short": short_usage.get(name, 0.0) / short_size if short_size > 0
                else 0.0,
                "quota_ms": c.quota_s * MS,
                "holder": name == holder,
                "waiting": name in waiting,
                "processes": c.processes,
                "waiting_processes": c.waiting,
                "connected": bool(c.conns),
                "tokens": c.tokens,
                "overuse_s": c.overuse_s,
                "overrun_s": c.overrun_s,
                "speed": self._speed(name, now),
                "turn_ms": c.turn_s * MS,  # (0: the usual turns, _turn_s)
                "speed_charge_s": c.speed_charge_s,
                "gpu_wait": self.speed.gpu_wait(name),
                "delivery_ms": c.delivery_s * MS,
            }
            for name, c in self.clients.items()
        ]
        history = [
            [i.name, i.start - self.started_at, min(i.end, now) - self.started_at]
            for i in self.history.intervals
            if i.start <= now and not i.extra
        ]
        # Removed clients whose pod managers still asked within the window: their programs
        # wait, unseen in the table (they vanished from it, and from the metrics).
        asking = sorted(n for n, at in self._removed_asking.items()
                        if n in self.removed and now - at <= window_size)
        return {
            "uptime_s": now - self.started_at,
            "window_s": window_size,
            "short_window_s": self._short_window_s,
            "holder": holder,
            "waiting_clients": len(waiting),
            "clients": clients,
            "history": history,
            "removed_asking": asking,
        }

    def _status_reply(self, conn: ConnId, req: Request, now: float) -> Reply:
        body = json.dumps(self.snapshot(now)).encode()
        return Reply(conn, req.type, Response(req.req_id, Status.OK, (len(body),)), body)


def _describe(spec: ClientSpec) -> str:
    um = ", unified memory" if spec.unified_memory else ""
    return f"request {spec.request:g}, limit {spec.limit:g}, memory {spec.gpu_mem} B{um}"
