/* The hook's token per device (Gemini v1, spec §6.5-6.7, plus a check on every launch and a
 * bound on the work queued on the GPU).
 *
 * Rules, in the order a launch applies them:
 *  - Hot path: a burst is running, the launch is before `go_until` and within its thread's
 *    share of the launches allowed since the last look (`go_share`; `graph_share` for a graph
 *    launch, `heavy`) -> go (one read of the time-stamp counter, or of the clock where it is
 *    not to be trusted: ticks.h; an atomic add on its stream's count and a few atomic loads,
 *    no lock, no driver call, and nothing written that other launching threads read:
 *    common/share.c; a graph launch adds to its stream's count of them too).
 *    A graph launch carries many kernels: its allowance is its own, at its own cost, none
 *    until that is known (inflight.c), and every graph launch on the slow path is marked.
 *    Always checked, a loop of tiny graphs did 0.43 of its bare work alone (H100).
 *  - The queue bound (inflight.c): a launch waits while the GPU work already queued would
 *    outlast the token, so that at expiry at most the tail (GEMINI_HOOK_TAIL_US, 1 ms) of work
 *    is left (design-notes §1); in a calibration token, while it would run more than
 *    MEASURE_AHEAD_NS ahead.  Each slow-path launch is followed by a marker event, and a
 *    token's first (unless held for the token) has one just before it too.  A launch
 *    held so asks for the next token a tail before the queue ahead of it runs dry, where that
 *    comes before the token's own tail (a launch of ms: room_or_hold).
 *  - In the token's tail (its last `tail` of time) the next launch asks for the next token,
 *    without draining the queue: when no one else waits the scheduler renews it at once, and
 *    the queued tail keeps the GPU busy over the round trip.  When another client gets the
 *    GPU, the tail is what runs on its time, measured and charged as overuse.  The asking is
 *    done by a renewer thread, so that the launches go on meanwhile (until the token ends);
 *    a unified-memory client asks in the launching thread, whose launch then prefetches.
 *    Alone (below) it asks sooner, by the round trip it learnt from its renewals (at least
 *    GEMINI_HOOK_ALONE_EARLY_US, 1 ms, more; at most GEMINI_HOOK_ALONE_EARLY_MAX_US, 4 ms, and
 *    a quarter of the token): the queue then covers a slow round trip too (ask_at).
 *  - Alone (the latest grant said that no other client of its group wanted the GPU, and the
 *    client has no cap: wire QUOTA_FLAG_ALONE), running past a token's end costs no one
 *    anything.  So a launch that finds the token gone (the program sat idle, or the answer
 *    is late) does not wait for the round trip: it goes on credit, up to a tail's worth of
 *    queued work, while the renewer asks; the credit comes off the next token.  An inference
 *    server alone in its partition pays no round trip per request (issue 13's latency case).
 *  - At the start of a burst (first launch after a sync point), ask for a token early when the
 *    predicted burst does not fit in what is left of the current one (v1; not when alone), the
 *    program's latest burst fitted in one token, other processes of the client share its
 *    token, and one launch of each of them costs more than the hand-over (early_ask_pays).
 *    A burst that outlasts the tokens the client gets is split whatever it does, and
 *    asking early would only add a round trip with the GPU idle, at every sync (issue 12: a
 *    capped client lost 1-2 points of its time so).  A process alone in its client needs no
 *    early ask either: its launches are held once its queue would outlast the token, so it
 *    runs its next burst on what is left and asks in the tail.  The early ask handed back the
 *    rest of each token after each sync and cost a round trip of idle GPU each time (H200,
 *    torch eager 0.3/0.7 syncing every 50 ms: the pair did 0.982 and 0.991 of the GPU's work
 *    together with it, 0.999 and 1.000 without, 2026-12-01).
 *    The prediction is the longest burst of the last 3 s that fitted in its token: v1's, the
 *    longest of all, kept a burst that a token's end cut as long as it ran, and for 3 s after
 *    one every short burst handed back what was left of its token (H100, capped at 0.4: 80-90
 *    tokens in the second of a program's warm-up, each used for about 3 ms).
 *    Never in a calibration token (wire QUOTA_FLAG_CALIBRATION): it is for the GPU's clock
 *    under continuous load, and its last part is measured (the request after next says how
 *    fast its launches ran; inflight_measure.c).  GEMINI_HOOK_BURST_FIT=0 turns it off (then the
 *    processes of one client, each bounding only its own queue, overrun the client's turns
 *    together and take more than its share).
 *  - One thread per device fetches; the others wait on the condition with a predicate.  The
 *    mutex is never held across a socket call.
 *  - A tracker thread per device measures each token's overuse in the background: when the
 *    token ends (expiry, or a launch asking for the next one) it waits for the newest marker of
 *    every stream and reports the time past the token's end in a later QUOTA request (a sync
 *    that began inside the token and returned past its end raises it: sync_seen).  A token
 *    that expires ends the burst, so a program that never syncs predicts bursts no longer than
 *    a grant.  For a unified-memory client with evict-on-release it then moves the client's
 *    managed memory back to the host (um.c), and the next request waits for that (a drain).
 *  - gem_token_acquire says when it fetched a new token, so that the launch can have um.c
 *    prefetch the client's memory before the kernel (the slow path only).
 * The arithmetic lives in common/predictor.c, common/share.c and common/roundtrip.c; the asking
 * in token_fetch.c, the tracker in token_tracker.c (token.h lists the three). */
#include "token.h"
#include "gemini/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TAIL_NS 1000000 /* GEMINI_HOOK_TAIL_US: queued work left when asking again */
/* Alone, ask this much sooner at least (GEMINI_HOOK_ALONE_EARLY_US) and at most
 * (GEMINI_HOOK_ALONE_EARLY_MAX_US): learn_round_trip */
#define DEFAULT_ALONE_EARLY_NS 1000000
#define DEFAULT_ALONE_EARLY_MAX_NS 4000000
#define MIN_HOLD_NS 50000       /* a held launch looks again after at least this ... */
#define HOLD_LOOK_NS 1000000    /* ... and at most this */
#define MARK_LOOK_SLACK_NS 20000 /* looking for a marker this long after it should finish */
#define MARK_OVERDUE_LOOK_NS 100000 /* and this often once it is late */
/* In a calibration token the hot path goes at most this long, and this many launches, between
 * looks, so that markers split the queue into segments the GPU runs back to back, some in its
 * measured last GEM_RUN_MEASURE_MS: a program whose bursts fit in half a long token went
 * unmarked from sync to sync, and an H100 measured 1 of 10 of its calibrations (inflight_measure.c,
 * gem_inflight_measured).  A look costs a few microseconds; a calibration comes every 2-10 s. */
#define MEASURE_LOOK_NS 2000000
#define MEASURE_LOOK_LAUNCHES 8
/* ... and its queue runs at most this far ahead.  A calibration runs the GPU continuously, so
 * its clock falls and a launch takes longer than in the ordinary grants its cost was learnt
 * in: queued to the end of a 180 ms calibration at that cost, a CUDA-graph loop ran 17.8-20.6
 * ms past it (H100, 2026-11-25).  Ahead by this much, the GPU never runs dry between looks
 * (HOLD_LOOK_NS), and a cost 15 % low costs 1.5 ms. */
#define MEASURE_AHEAD_NS 10000000
/* In an ordinary grant of a client not alone (capped, or beside others), the hot path goes at
 * most this much GPU time, at the cost per launch, between looks: the segments measured tell
 * the scheduler how fast the grant ran (its speed: gemini.core.speed), and with an allowance
 * of half the room left they fell at each grant's end, where a power-limited card has slowed
 * most.  An H200 capped at 0.6 and 0.8 read torch eager's grants at 187.5-194 us a launch
 * where the program's own events said 180-187 (the first 40 ms of an 80 ms grant read none),
 * charged 1.04-1.09 for 1.08-1.13 of work: 2-3.6 points over (2026-12-02).  A look costs a
 * few microseconds, at most one per this much of the GPU's work. */
#define GRANT_LOOK_GPU_NS 2000000
/* What handing a token back costs the GPU: the round trip to the next holder and its first
 * launch (H200, a torch eager pair: its first step ended 1.2-1.6 ms into a grant, a step 0.84
 * ms; the round trip p50 0.55-0.7 ms).  v1's early request is made only where one launch of
 * each process sharing the token costs more (early_ask_pays). */
#define HANDOVER_NS 1000000
/* A client not alone takes its queue to run this much longer than its cost per launch says:
 * a queue that reaches the token's end is held short of it and let go again as it runs.  A
 * power-limited card steps its clock within a grant, not in step with grants (an H200 under
 * torch eager matmuls capped at 0.7: the last steps of 146 of 251 grants 9-17 % slower than
 * the first, 50 faster), and a step down under a queue estimated to reach the end ran it 2-3
 * ms past (the gate's last look 13-39 ms before the end; overuse p99 2.8 ms, 0.16 with the
 * swing, the share 0.706 both; 2026-12-03).  Where the estimate was right, the queue runs dry
 * up to this fraction of the room at the last look early: 0.06 ms a token at p50. */
#define CLOCK_SWING 0.15
/* A kernel that waits for its host (host_wait.c) goes only with this much of its token left
 * (GEMINI_HOOK_HOST_WAIT_ROOM_US), at most half the token (a shorter token would be handed
 * back whole, again and again): room for XLA to queue the candidate it times behind it and for
 * the candidate to run, a few milliseconds at most for a matmul (the H100's 4096^2 bf16 ones
 * take 0.2 ms).  Not alone: at its end the launches go on credit, the host never held. */
#define DEFAULT_HOST_WAIT_ROOM_NS 10000000

struct token tokens[GEM_MAX_DEVICES];
static pthread_once_t tokens_once = PTHREAD_ONCE_INIT;
/* Each launching thread's use of its device's go_share (initial-exec: the hook is preloaded,
 * and a thread's first launch must not allocate). */
static __thread struct gem_share_use go_uses[GEM_MAX_DEVICES]
    __attribute__((tls_model("initial-exec")));
static __thread struct gem_share_use graph_uses[GEM_MAX_DEVICES] /* (graph_share) */
    __attribute__((tls_model("initial-exec")));
int64_t tail_ns = DEFAULT_TAIL_NS;
int64_t alone_early_ns = DEFAULT_ALONE_EARLY_NS;
int64_t alone_early_max_ns = DEFAULT_ALONE_EARLY_MAX_NS;
static int64_t host_wait_room_ns = DEFAULT_HOST_WAIT_ROOM_NS;
static int burst_fit = 1; /* GEMINI_HOOK_BURST_FIT=0 turns v1's early request off (below) */

static void token_init(struct token *t)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->m, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    gem_predictor_init(&t->burst, GEM_PRED_MERGE_NS);
    gem_predictor_init(&t->window, 0);
}

/* Microseconds from the environment variable `name`, in ns: 0 to 10 s (a knob, not a quota). */
static int64_t env_us_as_ns(const char *name, int64_t dflt)
{
    return gem_env_number(name, dflt / 1000, 0, 10 * 1000 * 1000) * 1000;
}

static void reset_tokens(void)
{
    for (int i = 0; i < GEM_MAX_DEVICES; i++)
        token_init(&tokens[i]);
}

static void tokens_init(void)
{
    tail_ns = env_us_as_ns("GEMINI_HOOK_TAIL_US", DEFAULT_TAIL_NS);
    alone_early_ns = env_us_as_ns("GEMINI_HOOK_ALONE_EARLY_US", DEFAULT_ALONE_EARLY_NS);
    alone_early_max_ns = env_us_as_ns("GEMINI_HOOK_ALONE_EARLY_MAX_US", DEFAULT_ALONE_EARLY_MAX_NS);
    host_wait_room_ns = env_us_as_ns("GEMINI_HOOK_HOST_WAIT_ROOM_US", DEFAULT_HOST_WAIT_ROOM_NS);
    const char *fit = getenv("GEMINI_HOOK_BURST_FIT");
    burst_fit = fit == NULL || strcmp(fit, "0") != 0;
    reset_tokens();
}

void gem_token_reset_after_fork(void)
{
    /* The child has none of the parent's threads, and CUDA state does not survive fork; the
     * knobs it keeps as the parent read them (a bad one is said once, not by every worker). */
    pthread_once(&tokens_once, tokens_init);
    reset_tokens();
    memset(go_uses, 0, sizeof(go_uses));
    memset(graph_uses, 0, sizeof(graph_uses));
    gem_inflight_reset_after_fork();
}

/* Mark the end of a burst (a host sync point, or a token's expiry).  t->m held. */
void burst_stopped(struct token *t, int64_t now)
{
    gem_predictor_record_stop(&t->burst, now);
    gem_predictor_record_start(&t->window, now);
    atomic_store_explicit(&t->burst_running, 0, memory_order_relaxed);
}

/* Alone at the last grant, with the token gone: let the launches go on credit, up to a tail's
 * worth of queued work, while the renewer asks (see the rules at the top).  0 if there is no
 * renewer: the caller asks itself.  t->m held. */
static int launch_on_credit(struct token *t, int64_t expired_at, int64_t now)
{
    post_end(t, expired_at); /* the spent token ends at its expiry, before the credit's launches */
    if (!renew_in_background(t, now))
        return 0;
    t->credit_from_ns = now;
    atomic_store_explicit(&t->expires_at_ns, now + tail_ns, memory_order_release);
    return 1;
}

/* When a launch asks for the next token: in the token's tail, sooner when alone (t->early_ns,
 * learn_round_trip).  t->m held. */
static int64_t ask_at(const struct token *t, int64_t at)
{
    return at - tail_ns - t->early_ns;
}

static void hold_for(int64_t ns)
{
    gem_stat_add(GEM_STAT_HOLDS, 1);
    gem_stat_add(GEM_STAT_HOLD_NS, (uint64_t)ns);
    gem_sleep_ns(ns);
}

/* Wait (no lock held) until the queued work fits in what is left of the token, or the time
 * to ask for the next one (`*ask`) comes, the queue ahead of the launch taken to run `swing`
 * (CLOCK_SWING) longer than estimated.  Returns the room left for more work (> 0: go), or 0
 * (look again).  A launch held as it does not fit moves `*ask` to `lead` before the queue
 * ahead of it runs dry, where that comes first (lead < 0: not): a launch of ms goes if half
 * of it fits, so the queue may run dry up to half a launch before the token's end, and asked
 * for in the tail, the next token (ours, or another client's) came after the GPU had sat
 * idle that long: a program of 11 ms kernels capped at 0.4 did 0.354 of its bare work, its
 * 40 ms tokens each 5.3 ms short of their end, and alone 0.947 (H200, 2026-12-02).  Asking
 * hands the rest of the token back.  A launch that would not fit in the whole token
 * (`whole`) fits in none: it goes once the queue ahead of it ran dry.  Before the first hold of a
 * launch (`*marked` 0) a marker goes at the end of its stream's queue: the estimate may be
 * long (hot-path launches since the newest marker, counted at the cost times the processes
 * sharing the token), and a hold then ends when the GPU has really run the queue, not when
 * the estimate says so.  Held for their estimates, two processes of a client that never sync
 * left the fake GPU idle a fifth of their tokens; on the H100, capped at 0.4, two torch eager
 * processes did 0.394 of one bare process without the marker and 0.406 with it (Triton:
 * 0.334 and 0.348; 2026-11-24). */
static int64_t room_or_hold(int dev, CUstream s, int pts, int graph, int64_t now, int64_t at,
                            int64_t whole, int64_t lead, double swing, int64_t *ask, int *marked)
{
    int64_t half = 0;
    int64_t end = gem_inflight_queued_ns(dev, s, pts, now, graph, &half);
    if (end == GEM_INFLIGHT_UNKNOWN) { /* learning what a launch costs: look again soon */
        gem_stat_add(GEM_STAT_UNKNOWN_HOLDS, 1);
        hold_for(MIN_HOLD_NS);
        return 0;
    }
    /* Up to the middle of the launch: it goes if half of it fits.  Held unless all of it
     * fitted, the last replay of a token was held whenever it would end past the token, and
     * the GPU idled for half a replay on average before each token's end, time granted and not
     * used: 0.55 ms of every 40 ms token of torch.compile with CUDA graphs (H100, a replay 0.67
     * ms, 2026-11-26).  It runs past the end as often and as far as it stopped short, and what
     * runs past is charged as overuse.  Going only if all of it fitted (the held launch handing
     * the rest of the token back a tail before its queue ran dry) left the GPU idle that much
     * more: with 11 ms kernels on an H200 a client of two processes beside one was 4.1 points
     * under its half over 10 s (1.3 with half fitting, in the same call), the GPU's work 0.968
     * against 0.991 (2026-12-02). */
    int64_t ahead = end > 2 * half ? end - 2 * half : 0; /* the queue ahead of the launch */
    int64_t queued = ahead + half;
    /* (The swing on the queue ahead, not the launch's own half, a bet either way already:
     * swung too, the last 4 ms replay of a token went only on a look within 0.1 ms of the
     * replay ahead of it ending, and in half the runs of tests/hook/test_renewal.py's half-fit
     * cases some went a token late.) */
    int64_t room = at - now - queued - (int64_t)((double)ahead * swing);
    if (room > 0)
        return room;
    int64_t dry = now + ahead; /* (held) */
    if (ahead < MIN_HOLD_NS && queued >= whole)
        return 1; /* it fits in no token this long: it goes once the queue ahead ran dry */
    /* Held by the swing alone, it goes once the queue ahead has run down enough: the token is
     * not handed back early (asked for as the queue was first held, each grant went back
     * short by the swing: the fake GPU's card did up to 4 % less work a second capped at 0.8). */
    int fits_later = at - dry >= half;
    if (lead >= 0 && !fits_later && dry - lead < *ask)
        *ask = dry - lead;
    /* Else the queue ends after the token does, and waiting does not change that (both move
     * with the clock): hold until the tail, looking again when the next marker should finish
     * (the estimate counts from when a marker was seen finished: seen late, it reads long, and the
     * GPU would run dry over the next token's round trip), or every HOLD_LOOK_NS. */
    if (!*marked) {
        gem_inflight_mark(dev, s, pts, now, GEM_MARK_BEFORE_LAUNCH | GEM_MARK_QUEUE_END);
        *marked = 1;
    }
    int64_t hold = *ask - now;
    if (hold > HOLD_LOOK_NS)
        hold = HOLD_LOOK_NS;
    int64_t next_done = gem_inflight_next_done_ns(dev);
    if (next_done != 0) {
        int64_t next = next_done + MARK_LOOK_SLACK_NS - now;
        if (next < MARK_OVERDUE_LOOK_NS) /* late: the launches cost more than estimated */
            next = MARK_OVERDUE_LOOK_NS;
        if (next < hold)
            hold = next;
    }
    hold = hold > MIN_HOLD_NS ? hold : MIN_HOLD_NS;
    atomic_fetch_add_explicit(&tokens[dev].gpu_wait_ns, hold, memory_order_relaxed);
    hold_for(hold);
    return 0;
}

/* Until when the hot path goes, in ns and, where the hot path reads the time-stamp counter, in
 * ticks (0 while their rate is not known yet: ns are read then).  t->m held. */
static void set_go_until(struct token *t, int64_t until)
{
    if (gem_cfg.ticks) {
        uint64_t tick = gem_ticks(); /* (a fresh pair: `now` may be a hold old) */
        uint64_t at = gem_ticks_at(&gem_cfg.ticks_anchor, tick, gem_now_ns(), until);
        atomic_store_explicit(&t->go_until_ticks, at, memory_order_release);
    }
    atomic_store_explicit(&t->go_until_ns, until, memory_order_release);
}

/* The hot path's clock read: before the go_until of the latest look. */
static inline int before_go_until(struct token *t)
{
    if (gem_cfg.ticks) {
        uint64_t at = atomic_load_explicit(&t->go_until_ticks, memory_order_acquire);
        if (__builtin_expect(at != 0, 1))
            return gem_ticks() < at;
    }
    return gem_now_ns() < atomic_load_explicit(&t->go_until_ns, memory_order_acquire);
}

/* Is v1's early request worth its hand-over?  Without it, each process sharing the token lets
 * up to about one launch of its queue run past the token's end (one goes if half of it fits,
 * and the queue drains as many times slower as processes share it), charged as overuse.  With
 * it, the rest of the token goes back with the GPU idle for HANDOVER_NS.  Two torch eager
 * processes (a launch 0.17 ms) beside one on an H200 did 0.984-0.987 of the GPU's work
 * together with it and 0.992 without, their shares alike; two processes of 5 ms kernels on
 * the fake GPU, which runs them in queue order, took 0.512-0.516 of a 0.5/0.5 GPU without
 * it and 0.492-0.496 with it (2026-12-02).  A cost not learnt yet: asked, as before. */
static int early_ask_pays(int dev)
{
    int64_t launch = gem_inflight_launch_ns(dev);
    return launch == 0 || launch * (int64_t)gem_inflight_sharers(dev) >= HANDOVER_NS;
}

/* The token a kernel that waits for its host must have left, expiring at `at` (0: none).
 * t->m held. */
static int64_t host_wait_room(struct token *t, int64_t at)
{
    const struct recent_token *r = recent_of(t, t->generation);
    int64_t half = r != NULL && !t->alone ? (at - r->granted_ns) / 2 : 0;
    return host_wait_room_ns < half ? host_wait_room_ns : half;
}

/* GEM_GATE_* bits.  host_waits: the launch is of a kernel that waits for its host
 * (host_wait.c). */
static int acquire_slow(struct token *t, int dev, CUstream s, int pts, int heavy, int host_waits)
{
    /* A launch into a stream capture runs nothing now (its graph's launches are gated), and a
     * wait here could outlast, or an event query invalidate, the capture. */
    if (gem_inflight_capturing(s, pts))
        return 0;
    int out = GEM_GATE_MARK;
    int marked = 0; /* the queue's end, before a hold */
    int64_t held_at = 0, held_ask = 0; /* a hold's time to ask (room_or_hold), in token held_at */
    gem_stat_add(GEM_STAT_SLOW, 1);
    pthread_mutex_lock(&t->m);
    uint64_t seen = t->generation;
    for (;;) {
        /* A launching thread's request is out: it handed the token back (v1's early request,
         * or a tail the renewer could not take), and the tracker stopped counting what runs on
         * it.  Another thread's launch in the tail went on, unmeasured, while another client
         * held the GPU (not so the renewer's: the token is ours until its answer comes). */
        if (t->fetching && !t->renewing) {
            pthread_cond_wait(&t->cv, &t->m);
            continue;
        }
        int64_t now = gem_now_ns();
        int64_t at = atomic_load_explicit(&t->expires_at_ns, memory_order_relaxed);
        int64_t ask = ask_at(t, at);
        if (held_at == at && held_ask < ask)
            ask = held_ask;
        int running = atomic_load_explicit(&t->burst_running, memory_order_relaxed);
        int need; /* 0, or why a token is needed: a GEM_STAT_FETCH_* */
        if (at == 0 || now >= at)
            need = GEM_STAT_FETCH_EXPIRED;
        else if (host_waits && at - now < host_wait_room(t, at) && !(out & GEM_GATE_FETCHED))
            need = GEM_STAT_FETCH_ROOM; /* hand the rest back: the launch goes on the next */
        else if (now >= ask && !(out & GEM_GATE_FETCHED))
            need = GEM_STAT_FETCH_TAIL; /* ask for the next one while the queue keeps the GPU busy */
        else if (burst_fit && gem_inflight_sharers(dev) > 1 && !t->alone && !t->calibration &&
                 !running && !t->long_bursts && t->generation == seen &&
                 !(out & GEM_GATE_FETCHED) &&
                 now + gem_record_keeper_max(&t->fitted, now) >= at && early_ask_pays(dev))
            need = GEM_STAT_FETCH_BURST; /* v1: the next burst does not fit */
        else
            need = 0;
        /* In the tail a unified-memory client asks itself: its launch prefetches on a grant. */
        int um = gem_um_maybe(dev);
        int in_tail = need == GEM_STAT_FETCH_TAIL && !um;
        if (need && t->renewing && in_tail)
            need = 0; /* the renewer is asking: go on with what is left */
        if (need) {
            if (t->fetching) {
                int renewing = t->renewing;
                int64_t waited = gem_now_ns();
                pthread_cond_wait(&t->cv, &t->m);
                if (renewing) /* the token ran out before the renewer's answer came */
                    gem_stat_add(GEM_STAT_FETCH_NS, (uint64_t)(gem_now_ns() - waited));
                continue;
            }
            /* Asking hands the token back: a marker now on the launch's stream lets the
             * tracker wait for everything launched on it so far, hot-path launches included. */
            if (t->generation != 0 && t->ended_generation != t->generation)
                gem_inflight_mark(dev, s, pts, now, GEM_MARK_BEFORE_LAUNCH);
            if (need == GEM_STAT_FETCH_EXPIRED && t->alone && !um &&
                launch_on_credit(t, at, now)) {
                gem_stat_add(GEM_STAT_FETCH_CREDIT, 1);
                continue;
            }
            gem_stat_add((enum gem_gate_stat)need, 1);
            if (need == GEM_STAT_FETCH_ROOM) /* (mid-burst: the other threads stop too) */
                stop_hot_path(t);
            if (in_tail && renew_in_background(t, now))
                continue; /* (now fetching: the next look goes on, in the tail) */
            fetch(t, dev, now, 1);
            gem_stat_add(GEM_STAT_FETCH_NS, (uint64_t)(gem_now_ns() - now));
            out |= GEM_GATE_FETCHED;
            seen = t->generation;
            continue;
        }
        int64_t fill_to = t->calibration && at > now + MEASURE_AHEAD_NS ? now + MEASURE_AHEAD_NS
                                                                        : at;
        uint64_t looks = t->looks;
        int64_t lead = t->calibration ? -1 : tail_ns + t->early_ns; /* (as ask_at asks) */
        const struct recent_token *r = recent_of(t, t->generation);
        int64_t whole = r != NULL ? at - r->granted_ns : INT64_MAX;
        double swing = t->alone ? 0.0 : CLOCK_SWING;
        pthread_mutex_unlock(&t->m);
        int64_t room = room_or_hold(dev, s, pts, heavy, now, fill_to, whole, lead, swing, &ask,
                                    &marked);
        struct gem_look look = {0};
        if (room > 0 && gem_log_level >= GEM_LOG_DEBUG)
            look = gem_inflight_latest_look(dev);
        pthread_mutex_lock(&t->m);
        if (room == 0) {
            held_at = at;
            held_ask = ask;
            continue;
        }
        if (look.at_ns != 0)
            t->go_look = look;
        /* Another thread's look was set meanwhile: this room was read before it, and counts
         * the launches that went on that look's allowance as room again.  Set over the newer
         * look, it let two threads of tiny graphs queue the room twice at a token's end (fake
         * GPU: 3.4 ms past a 50 ms token, where the newer look had left none). */
        if (t->looks != looks)
            continue;
        /* Nor a look at a token another thread handed back meanwhile (a look set then let
         * launches go on no token, unmeasured, until the answer came). */
        if (t->fetching && !t->renewing)
            continue;
        t->looks++;
        /* Look again after half the room, before the time to ask, and before the launches that
         * would fill it: the hot path needs no estimate in between. */
        int64_t until = now + room / 2;
        if (until > ask && now < ask)
            until = ask;
        uint64_t allowance = 0, graphs = 0;
        int64_t spread = t->alone || room < 2 * GRANT_LOOK_GPU_NS ? room : 2 * GRANT_LOOK_GPU_NS;
        gem_inflight_allowance(dev, spread, &allowance, &graphs);
        if (t->calibration) {
            if (until > now + MEASURE_LOOK_NS)
                until = now + MEASURE_LOOK_NS;
            if (allowance > MEASURE_LOOK_LAUNCHES)
                allowance = MEASURE_LOOK_LAUNCHES;
            if (graphs > MEASURE_LOOK_LAUNCHES)
                graphs = MEASURE_LOOK_LAUNCHES;
            out |= GEM_GATE_MARK_ALWAYS;
        }
        /* (each allowance fills at most half the room: both together, at most all of it) */
        gem_share_set(&t->go_share, &go_uses[dev], allowance);
        gem_share_set(&t->graph_share, &graph_uses[dev], graphs);
        set_go_until(t, until);
        /* A token's first launch is measured alone, from a marker just before it: where every
         * token starts with the GPU idle (a cap's rest), no other segment between markers is
         * run without a gap, and a cost learnt on a light kernel of the program's set-up was
         * never learnt again.  11 ms matmuls capped at 0.4 went at 0.62 ms, 4-5 ms past each
         * token for 1.6 s and 233 ms past a calibration (H200, 2026-12-02).  Not a launch that
         * was held here: its hold's marker ends the old token's queue, and one recorded as it
         * goes read as the old token's work running until the new token came (fake GPU: 51 ms
         * of overuse a token, the answers 50 ms late).  Nor a kernel that waits for its host:
         * its time is the host's. */
        if (t->measured_alone != t->generation && !marked && !host_waits) {
            t->measured_alone = t->generation;
            out |= GEM_GATE_MARK_BEFORE;
        }
        break;
    }
    int64_t now = gem_now_ns();
    gem_predictor_record_stop(&t->window, now);
    if (!atomic_load_explicit(&t->burst_running, memory_order_relaxed)) {
        gem_predictor_record_start(&t->burst, now);
        atomic_store_explicit(&t->burst_running, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&t->m);
    return out;
}

/* Every launch, before its gate: the in-flight tracker counts it. */
static struct token *launch_seen(int dev, CUstream s, int pts)
{
    pthread_once(&tokens_once, tokens_init);
    gem_inflight_launch(dev, s, pts);
    return &tokens[dev];
}

int gem_token_acquire(int dev, CUstream s, int pts, int heavy)
{
    struct token *t = launch_seen(dev, s, pts);
    if (atomic_load_explicit(&t->burst_running, memory_order_relaxed) &&
        gem_share_take(heavy ? &t->graph_share : &t->go_share,
                       heavy ? &graph_uses[dev] : &go_uses[dev]) &&
        before_go_until(t))
        return 0;
    return acquire_slow(t, dev, s, pts, heavy, 0);
}

int gem_token_acquire_host_wait(int dev, CUstream s, int pts)
{
    return acquire_slow(launch_seen(dev, s, pts), dev, s, pts, 0, 1);
}

/* A sync that began while our latest token ran, waited for the GPU, and returned after the
 * token ended, with no token since: the GPU ran work of ours, launched on that token, until
 * `to_ns` (when it returned, or earlier where a marker says so: gem_inflight_waited).  The
 * tracker measures a token's overuse from the newest marker as of its end, and launches that
 * went through unmarked after it (an allowance granted at a cost per launch far too low) ran
 * on no token unseen: on the fake GPU, 100 kernels of 2 ms after a set-up of
 * 4 us ones ran 150 ms past a 50 ms token, reported as 0.1 ms of overuse.  (A sync that began
 * after the end may wait for a copy launched on no token: it tells nothing.)  t->m held. */
static void sync_seen(struct token *t, int64_t from_ns, int64_t to_ns)
{
    if (t->generation == 0 || t->ended_generation != t->generation || t->end_pending ||
        from_ns >= t->end_ns || to_ns <= t->end_ns)
        return;
    double more = charge_end(t, t->generation, t->end_ns, to_ns);
    if (more > 0.0)
        /* (worded apart from the tracker's "overuse X ms" line, one per token, which
         * bench/paths.py counts) */
        GEM_LOG(GEM_LOG_DEBUG, "token end: a sync saw our work run %.3f ms past it (%.3f ms "
                "more than the markers showed)", (double)(to_ns - t->end_ns) / 1e6, more);
}

/* The latest grant came alone (QUOTA_FLAG_ALONE): no other client waits on its
 * tokens' ends. */
static int alone_on(int dev)
{
    pthread_once(&tokens_once, tokens_init);
    struct token *t = &tokens[dev];
    pthread_mutex_lock(&t->m);
    int alone = t->alone;
    pthread_mutex_unlock(&t->m);
    return alone;
}

/* The sync's end is read from a marker the GPU's clock bounds where one follows everything it
 * waits for (gem_inflight_waited); else from when it returned, which a host that got back late
 * puts past the work's end, and a sync that began in a token and returned after it charges
 * (sync_seen).  The launches before it that went on the hot path carry no marker: a process
 * stopped 3 ms before its token's end, its queue run out 4.9 ms before it, was charged the
 * 37.4 ms to the stop's end (fake GPU, a loaded 2-core machine, 1 run in about 100; with every
 * sync 20 ms late, 19.9 ms a token).  So a stream sync marks its stream first where such
 * launches went (the stopped process still read 37.6 ms once in 100 runs after; one cause
 * found since, a sync right after the first launch in a token's tail: inflight_marks.c's
 * marker_due; 0 in 60 after it).  Not alone: no other client waits
 * on its tokens' ends, and alone under the hook a program pays nothing a sync (a record is a
 * few microseconds). */
void gem_token_before_stream_sync(int dev, CUstream s, int pts, int64_t now)
{
    if (!alone_on(dev))
        gem_inflight_mark(dev, s, pts, now, GEM_MARK_IF_LAUNCHED);
}

/* A context sync waits for every stream, and returned late it was charged its lateness as a
 * stream sync was (fake GPU, every sync 20 ms late: 18.3 ms a token).  It marks the legacy
 * default stream first (PyTorch's default stream, and most programs' only one) and the
 * calling thread's per-thread default stream, not the program's own streams: one may have
 * been destroyed since it was launched on, and a handle of a destroyed stream is not to be
 * recorded on.  (Where the program launched on others, the markers bound nothing:
 * gem_inflight_waited.) */
void gem_token_before_ctx_sync(int dev, int64_t now)
{
    if (alone_on(dev))
        return;
    gem_inflight_mark(dev, NULL, 0, now, GEM_MARK_IF_LAUNCHED);
    gem_inflight_mark(dev, NULL, 1, now, GEM_MARK_IF_LAUNCHED);
}

void gem_token_note_waited(int dev, int64_t ns)
{
    if (dev < 0)
        return;
    pthread_once(&tokens_once, tokens_init);
    if (ns > 0)
        atomic_fetch_add_explicit(&tokens[dev].gpu_wait_ns, ns, memory_order_relaxed);
}

void gem_token_note_sync(int dev, int64_t from_ns, int64_t to_ns, int64_t ran_by_ns, int ok)
{
    if (dev < 0)
        return;
    int64_t waited_ns = to_ns - from_ns;
    gem_token_note_waited(dev, waited_ns); /* (tokens initialised there) */
    struct token *t = &tokens[dev];
    int behind = ok && waited_ns >= GEM_SYNC_BEHIND_NS;
    /* (neither: no launch since the last sync, nor a burst cut at a token's end) */
    int bursting = atomic_load_explicit(&t->burst_running, memory_order_relaxed) ||
                   atomic_load_explicit(&t->burst_spans, memory_order_relaxed);
    if (!behind && !bursting)
        return;
    pthread_mutex_lock(&t->m);
    if (behind)
        sync_seen(t, from_ns, ran_by_ns);
    if (bursting) {
        t->long_bursts = atomic_exchange_explicit(&t->burst_spans, 0, memory_order_relaxed);
        if (atomic_load_explicit(&t->burst_running, memory_order_relaxed)) {
            int64_t now = gem_now_ns();
            if (!t->long_bursts)
                gem_record_keeper_add(&t->fitted, gem_predictor_open_for(&t->burst, now), now);
            burst_stopped(t, now);
        }
    }
    pthread_mutex_unlock(&t->m);
}
