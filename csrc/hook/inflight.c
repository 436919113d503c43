/* GPU work in flight, per device: how much of what the process launched has not run yet.
 *
 * Why: frameworks launch far ahead of the GPU (CUDA graphs and eager loops queue seconds of
 * kernels), and work still queued when the token ends runs on the next client's time.  The
 * token gate (token.c) asks this file how long the queue would take and holds launches once
 * it would outlast the token (design-notes §1).
 *
 * How: after some launches (never more often than MARK_GAP_NS of host time apart, unless
 * MARK_GPU_GAP_NS of GPU work went unmarked) the launching thread records a marker event on
 * the stream it launched on, so every stream the process uses is covered (legacy, per-thread
 * default, non-blocking, graph launches).  Markers are polled with cuEventQuery, never waited
 * for, on the launch path.  The GPU time per launch is learnt from consecutive finished
 * markers of one lane (a stream; each thread's own, where one handle names
 * every thread's per-thread default stream) (cuEventElapsedTime over the launches between
 * them), for kernel launches and graph launches apart (learn_segment); the queue is the
 * launches after the newest finished marker at their costs, less what ran since that marker
 * was seen finished.  What a token's launches took of the GPU (the scheduler's measure of its
 * speed, gem_inflight_measured) is its segments' GPU time over their launches; where several
 * lanes launch, the union of their segments on the GPU's clock over each lane's own launches
 * (add_span), and nothing where more than a few do (UNION_LANES_MAX) or one counts its
 * launches in the slot that lanes past GEM_LANES share.  Until a cost is
 * known, only a few launches may go past the newest finished marker, unless the GPU is seen
 * keeping up (a launch-bound loop, whose markers never teach a cost: the GPU idles between
 * them).  A host wait (sync) on a
 * queue long enough to measure tells how much slower than its cost the queue drains (other
 * processes' work sharing the GPU: the drain factor); one far longer than the estimate says the
 * cost was learnt on other kernels: it is raised to what the wait shows.  The processes of a
 * client share its token and each bounds only its own queue, while the GPU drains theirs
 * together: a process takes the client's queue to be as many times its own as processes
 * share the token (the pod manager says how many with each grant), or its drain factor if
 * that is more (learnt at syncs, that one lags, and never comes to a program that does not
 * sync).  Each then queued up to a whole token of its own: on the H100 two processes of a
 * client capped at 0.4, syncing once a second, ran up to 14 ms past its tokens (overuse p99
 * 4.8-11.9 ms; now 0.8-1.1 ms), and on the fake GPU two that never sync ran 30-60 ms past
 * its 100 ms tokens.
 * Graph launches wait as with no cost known until a segment with one in it has run: a cost
 * learnt on light kernels alone let whole graph replays run past the token (torch.compile with
 * CUDA graphs).  Meanwhile a marker goes just before each graph launch too, so that its
 * segment is measured even when the GPU ran dry before it (learn_cost).
 * The tracker thread (token.c) waits for the newest marker of every stream as of a token's
 * end to measure the token's overuse: when the work before it had run, bounded by the GPU's own
 * clock (done_by), not when a thread got to look.
 *
 * A marker that cannot be recorded (capture, a foreign context, a driver error) is skipped and
 * said once in the log: the estimate then covers less, never more.
 *
 * Stream capture: while any thread captures a CUDA graph in the default (global) mode, an
 * event query or sync from any thread not in relaxed mode invalidates the capture
 * (torch.compile's reduce-overhead, PyTorch's CUDA graphs).  Our markers are never recorded
 * into a capture, so querying them is safe: each call here that touches them runs in relaxed
 * mode (relax / unrelax), whichever thread makes it. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#include "gemini/lanes.h"
#include "gemini/spans.h"

/* Marker ring per device.  Full, it drops its oldest marker out, the one the GPU is nearest
 * to, and with it the queue's progress: then no marker finishes until the GPU reaches the
 * ones left, and the estimate runs on the cost alone from the last one seen.  A calibration
 * marks about every launch, twice at each hold, and a program of heavy kernels each followed
 * by a light one had some 80 launches in the 10 ms it queues ahead: with 64 slots, no marker
 * was seen finished for 150 ms at a time, a cost learnt low read 150 ms of queue as 0.5 ms,
 * and it ran 15-60 ms past every calibration token (fake GPU, 2026-12-04). */
#define MARKS 256
#define MARK_GAP_NS 200000        /* at most one marker per 0.2 ms of host time ... */
#define MARK_GPU_GAP_NS 2000000   /* ... unless this much GPU work went unmarked (see below) */
#define UNKNOWN_COST_LAUNCHES 2   /* launches past the newest finished marker before a cost */
#define UNKNOWN_COST_DOUBLING_NS 100000000 /* ... twice as many for each 0.1 s that the oldest
                                             * marker out has been out: a kernel may wait for
                                             * something only a later launch provides (NCCL) */
#define IDLE_ALLOWANCE_MIN 8      /* no cost known, the GPU keeps up: launches between looks */
#define IDLE_ALLOWANCE_MAX 1024
#define RELEARN_MIN_LAUNCHES 8    /* a cost is raised or its drain learnt only on a wait
                                   * for this many launches at least (a wait for a copy is
                                   * not for kernels) */
#define WAIT_STEP_MIN_NS 20000   /* the tracker polls the markers of a token's end ... */
#define WAIT_STEP_MAX_NS 2000000  /* ... this often at most and at least */
#define COST_MEMORY_LAUNCHES 64.0 /* a kernel's cost is a mean over about this many ... */
#define COST_MEMORY_GRAPHS 16.0   /* ... a graph launch's over this many */
#define COST_LOG_GAP_NS 1000000000 /* its debug line at most this often (see below) */
/* Markers went to more than one lane this recently: other lanes' kernels may run beside a
 * lane's segment (learn_cost).  Not "ever": PyTorch warms a graph up on a side stream before
 * its capture, and a CUDA-graph loop's calibration tails, every segment starting at a hold
 * left out for good, measured 4-13 replays of some 50 (H200, capped at 0.8: its speed by the
 * clock, 1.05, for 9 s, while it did 1.09-1.10 of its bare work per granted second; its
 * highest second 0.879, 2026-12-03). */
#define MANY_LANES_NS 1000000000
#define UNION_LANES_MAX 4         /* a token's launches on more lanes: not measured */
_Static_assert(GEM_LANES <= 64, "a run window notes its lanes' slots in 64 bits (slots_seen)");
#define MAX_SHARERS 64            /* processes sharing a token counted at most */
#define DRAIN_FACTOR_MAX 8.0      /* a sync slower than this many times the estimate: the cost
                                   * is wrong, not the drain (raised) */
#define DONE_LOG (4 * MARKS)      /* finished markers whose finish the tracker can still read */
#define LATE_LOOK_NS 2000000      /* a look this long after the one before came late */
#define UNSEEN_GAP_SLACK_NS 100000 /* a look's clock is read just before its queries */

struct mark {
    CUevent ev;
    uintptr_t lane;    /* its stream, as the thread that recorded it sees it (lane_of) */
    unsigned slot;     /* its lane's slot (gemini/lanes.h: GEM_LANES, the one lanes share) */
    uint64_t launches; /* launches on the device before this marker */
    uint64_t graphs;   /* ... of which graph launches */
    uint64_t lane_launches; /* launches counted in its lane's slot before it */
    uint64_t lane_graphs;   /* ... and graph launches */
    double at_ms;      /* where it finished on the GPU's clock, from the marker of `epoch` */
    uint64_t epoch;    /* (place_mark; 0: not placed) */
    uint64_t claim;         /* the launches known to have run once it has (claim_of) ... */
    uint64_t claim_graphs;  /* ... of which graph launches */
    int64_t host_ns;   /* when it was recorded */
    int64_t seen_ns;   /* when it was seen finished (0: not yet) */
    int64_t ev_ns;     /* by when it finished itself, at the latest (with seen_ns) ... */
    int64_t done_ns;   /* ... and the work before it (earlier, if none since the one before) */
    uint64_t seq;      /* markers recorded on the device before, this one included */
    int queue_end;     /* recorded before a hold (token.c): the launch after it comes an
                        * unknown time later, and the segment it starts teaches a cost only
                        * where no other lane or process queues meanwhile (hold_teaches) */
    int alone;         /* recorded just before a launch measured alone (GEM_MARK_ALONE,
                        * GEM_MARK_BEFORE_GRAPH) */
    int after_stall;   /* recorded after a launch call that held the host (GEM_MARK_AFTER_STALL) */
};

/* What is known of a lane (common/lanes.c gives each its slot; the last, of lanes past them,
 * is shared): its launches, and its newest finished marker.  Cache lines of their own (the hot
 * path writes only the first two counts): a program's threads launch on lanes of their own.
 * The device's launches are the sum over the slots, read off the hot path: a count of the
 * device's own, added to by every launching thread, cost four threads launching empty kernels
 * 0.5-1.1 us a launch on the H100 (bench/results/...-1726-s1-per-thread-share.md). */
struct lane_slot {
    _Alignas(64) _Atomic uint64_t launches;
    _Atomic uint64_t graphs; /* ... of which graph launches (counted once queued) */
    struct mark done;       /* the newest finished marker here (lane 0: none; its event not
                             * kept: the ring's slot records it again) */
    int64_t last_mark_ns;   /* when a marker was last due here, */
    uint64_t mark_launches; /* and the launches, and graph launches, counted here by then */
    uint64_t mark_graphs;
    uint64_t followed;      /* the launches here that the newest marker follows */
    uint64_t others;        /* the other slots' launches as of the latest marked launch here */
    uint64_t others_graphs; /* (claim_of), and graph launches, */
    uint64_t looked;        /* ... and as of the latest look here */
    uint64_t looked_graphs; /* f->m held for these eight. */
};

/* What one kind of launch costs the GPU: a mean over the launches learnt, older ones fading
 * (learn).  Kernels and graph launches apart: a graph launch carries many kernels. */
struct cost {
    double ns;       /* GPU time of the launches learnt ... */
    double launches; /* ... and how many, fading alike */
    double per;      /* ns / launches; 0: not known yet */
    double at_start; /* `per` as of the latest token's start (gem_inflight_measure_from) */
    double logged;   /* `per` as last written to the debug log */
    int stalled;     /* learnt from segments with a stall in them only (learn_into) */
};

struct inflight {
    pthread_mutex_t m;
    struct gem_lanes lane_keys;            /* which lane has which slot ... */
    struct lane_slot lanes[GEM_LANES + 1]; /* ... [GEM_LANES]: the lanes past them */
    CUcontext ctx;
    struct mark ring[MARKS]; /* in record order: oldest at head */
    unsigned head, count;
    unsigned kept;          /* 1: the head is the newest finished marker, already counted */
    uint64_t done_launches; /* launches before the newest finished marker ... */
    uint64_t done_graphs;   /* ... of which graph launches */
    int64_t done_seen_ns;   /* when that marker was seen finished */
    int64_t looked_ns;      /* when poll_marks last looked */
    struct cost kernel;     /* a launch of one kernel (any launch but a graph's) */
    struct cost graph;      /* a graph launch */
    double drain_factor;    /* >= 1: the queue drains this much slower than its cost says */
    _Atomic uint32_t sharers; /* processes sharing the client's token (0, 1: this one alone) */
    double logged_factor;   /* the drain factor last written to the debug log */
    int64_t logged_cost_ns; /* when a cost was last written to the debug log */
    uint64_t idle_allowance; /* no cost known, the GPU keeps up: launches between checks */
    int64_t unproven_ns;     /* markers recorded before this ran while the host waited (a
                              * sync, a hold): they prove nothing of the GPU keeping up */
    uintptr_t last_lane; /* the newest marker's lane ... */
    int64_t lane_switch_ns; /* ... and when one last went to a lane not its predecessor's (0:
                             * never; markers have gone to one lane only) */
    int graph_unit;      /* its work is counted in graph launches (gem_inflight_measured) */
    uint64_t epochs;     /* chains of placed markers begun (place_mark) */
    struct mark anchor;  /* the newest placed marker that left the ring full (its event kept) */
    /* The segments measured that ran in the latest token ([0], open; in a calibration's last
     * part) and in the one before ([1]): a token's queue runs out after it asks for the next
     * (token.c's fetch; gem_inflight_measured). */
    struct run_window {
        int64_t from_ns, to_ns; /* began to run in [from, to) (to 0: open; from 0: none) */
        double ns;              /* their GPU time ... */
        uint64_t launches;      /* ... and launches (graphs: of which graph launches, and */
        uint64_t graphs;        /* graph_ns: the GPU time of the segments with one) */
        double graph_ns;
        /* For the debug log only: segments left out, after a gap (the GPU may have idled:
         * their GPU time then measured anyway) and at a hold of a process of several lanes */
        double gap_ns;
        uint64_t gap_launches, gap_graphs, hold_launches, hold_graphs;
        /* Where segments of several lanes ran in it: their union on the GPU's clock, over
         * each lane's own launches (add_span; gemini/spans.h says why) */
        struct gem_spans spans;
        uint64_t epoch;               /* the chain its spans were placed on */
        uint64_t own_launches, own_graphs;
        uint64_t placed_launches;     /* of own_launches, placed at their costs (after gaps) */
        uint64_t slots_seen;          /* the lanes' slots (bit i: slot i) of its segments; */
        int shared_seen;              /* and a lane past GEM_LANES came */
        uintptr_t lane;               /* the first lane of its segments ... */
        int several;                  /* ... and whether another's came (1; 0: not yet),
                                       * or a segment could not be placed (-1: no union) */
    } run[2];
    uint64_t seq; /* markers recorded so far */
    /* The finished markers' done_ns by seq (slot seq % DONE_LOG), for the tracker: a marker
     * leaves the ring once a later one has finished, and under load the launching threads see
     * that first. */
    struct done_entry {
        uint64_t seq;
        int64_t done_ns;
    } done_log[DONE_LOG];
    int failure_logged;
    int elapsed_rc_logged; /* 1 + the last cuEventElapsedTime error written to the debug log */
    struct gem_look look; /* the gate's latest estimate, for the debug log */
};

static struct inflight flights[GEM_MAX_DEVICES];
static pthread_once_t flights_once = PTHREAD_ONCE_INIT;

static void flights_init(void)
{
    for (int i = 0; i < GEM_MAX_DEVICES; i++) {
        memset(&flights[i], 0, sizeof(flights[i]));
        pthread_mutex_init(&flights[i].m, NULL);
        flights[i].drain_factor = flights[i].logged_factor = 1.0;
    }
}

static void forget_cost(struct inflight *f)
{
    f->kernel = f->graph = (struct cost){0};
    f->logged_cost_ns = 0;
    f->drain_factor = f->logged_factor = 1.0;
}

/* A learnt value is written to the debug log when it has moved by a quarter since it last was:
 * it moves a little at every segment or sync. */
static int worth_logging(double now, double logged)
{
    return now > 1.25 * logged || now < 0.8 * logged;
}

/* ... a cost at most once a second (any cost: f->logged_cost_ns): a mix of graph replays and
 * light kernels, learnt as one cost, moved it by a third and back at every graph's segment
 * (torch.compile with CUDA graphs wrote 586 such lines a minute on the H100). */
static void log_cost(struct inflight *f, struct cost *c, const char *what, uint64_t n,
                     uint64_t graphs, float ms, int64_t now)
{
    if (!worth_logging(c->per, c->logged) ||
        (f->logged_cost_ns != 0 && now - f->logged_cost_ns < COST_LOG_GAP_NS))
        return;
    GEM_LOG(GEM_LOG_DEBUG, "GPU time per %s %.1f us (last %llu launches, %llu graphs: %.3f ms)",
            what, c->per / 1e3, (unsigned long long)n, (unsigned long long)graphs, (double)ms);
    c->logged = c->per;
    f->logged_cost_ns = now;
}

/* A cost is the GPU time of the launches learnt over their number, each older one's weight
 * fading by memory / (memory + n) as n more come in: a mean over launches, not over segments.
 * A program whose kernels differ (a compiled model's matmuls among small element-wise kernels)
 * has segments of one small kernel beside segments of several large ones; averaged per
 * segment, each small one pulled the cost down by a quarter, and the next burst went through
 * at a fraction of its cost.  `replace`: these launches alone (the first).  f->m held. */
static void learn(struct cost *c, double ns, double n, double memory, int replace)
{
    double keep = replace ? 0.0 : memory / (memory + n);
    c->ns = keep * c->ns + ns;
    c->launches = keep * c->launches + n;
    c->per = c->ns / c->launches;
}

/* A segment with a launch call in it that held the host (a kernel's first launch, which loads
 * its module) may hold the GPU's idling too: it teaches a cost only while none is known but
 * from such segments, and the first segment without one replaces what they taught.  Averaged
 * in, torch's first `add_` read 2466 us, and a loop of them (launch-bound, whose segments
 * mostly follow a gap and teach nothing) learnt a few a second: its cost came down to 10 us
 * over 18 s, held at 0.26-0.36 of bare under a 0.4 cap meanwhile (H200, 2026-12-03).
 * Returns whether it was learnt.  f->m held. */
static int learn_into(struct cost *c, double ns, double n, double memory, int stall)
{
    if (stall && c->per > 0.0 && !c->stalled)
        return 0;
    int replaces_stalled = c->stalled && !stall;
    if (replaces_stalled)
        GEM_LOG(GEM_LOG_DEBUG, "a cost of %.1f us per launch, read over a stalled launch "
                "call, is replaced by %.1f us", c->per / 1e3, ns / n / 1e3);
    learn(c, ns, n, memory, c->per <= 0.0 || replaces_stalled);
    if (replaces_stalled && c->at_start > c->per)
        c->at_start = c->per; /* (queued_cost: else the stalled one holds to the next grant) */
    c->stalled = stall;
    return 1;
}

/* What a launch queued now is taken to cost: its cost, or what it was as of the token's start
 * if that was more.  A grant queues its whole token early, at the cost learnt so far, and on a
 * power-limited card a grant that starts after a rest runs its first launches fast: learnt
 * from them, its queue ran up to 5 ms past the token's end (H200, torch eager capped at 0.8:
 * overuse p90 2.9 ms against 0.25 while only a grant's end was measured, 2026-12-02).  At the
 * start the cost is the one its latest grant ended with, the slowest of it. */
static double queued_cost(const struct cost *c)
{
    return c->per > c->at_start ? c->per : c->at_start;
}

/* The GPU time of `kernels` launches of one kernel and `graphs` graph launches, by the costs.
 * A kernel's cost not known yet counts nothing where a graph launch's is: the kernels between
 * replays were then in the segments it was learnt from, and so are in it. */
static double gpu_ns(const struct inflight *f, uint64_t kernels, uint64_t graphs)
{
    return (double)kernels * queued_cost(&f->kernel) + (double)graphs * queued_cost(&f->graph);
}

/* Some cost is known: the queue can be estimated. */
static int some_cost(const struct inflight *f)
{
    return f->kernel.per > 0.0 || f->graph.per > 0.0;
}

static struct inflight *flight(int dev)
{
    pthread_once(&flights_once, flights_init);
    return &flights[dev];
}

void gem_inflight_reset_after_fork(void)
{
    pthread_once(&flights_once, flights_init);
    flights_init(); /* the parent's events are not the child's */
}

/* The marker's stream as a handle valid in any thread of the process for this purpose. */
static CUstream canonical(CUstream s, int pts)
{
    return (pts && s == NULL) ? CU_STREAM_PER_THREAD : s;
}

/* The stream a launch goes to (c: its canonical handle), each thread's own told apart where
 * one handle names them all (the per-thread default stream): what runs in order, so that a
 * marker with no launch on its lane since the previous one of that lane holds no work of its
 * own, whatever other threads launched meanwhile.  (A thread's pthread_self is an aligned
 * address: xor'd with the handle, 2, it is no stream's handle.) */
static uintptr_t lane_of(CUstream c)
{
    return c == CU_STREAM_PER_THREAD ? (uintptr_t)pthread_self() ^ (uintptr_t)c : (uintptr_t)c;
}

static struct lane_slot *lane_slot(struct inflight *f, uintptr_t lane)
{
    return &f->lanes[gem_lanes_slot(&f->lane_keys, lane)];
}

/* The slot of the lanes past GEM_LANES, which tells none of their launches apart. */
static int shared_slot(const struct inflight *f, const struct lane_slot *l)
{
    return l == &f->lanes[GEM_LANES];
}

void gem_inflight_launch(int dev, CUstream s, int pts)
{
    struct inflight *f = flight(dev);
    atomic_fetch_add_explicit(&lane_slot(f, lane_of(canonical(s, pts)))->launches, 1,
                              memory_order_relaxed);
}

/* The launches on the device so far, and its graph launches. */
static struct gem_launch_count count_of(struct inflight *f)
{
    struct gem_launch_count n = {0, 0};
    for (unsigned i = 0; i <= GEM_LANES; i++) {
        n.launches += atomic_load_explicit(&f->lanes[i].launches, memory_order_relaxed);
        n.graphs += atomic_load_explicit(&f->lanes[i].graphs, memory_order_relaxed);
    }
    return n;
}

void gem_inflight_graph_launch(int dev, CUstream s, int pts)
{
    struct inflight *f = flight(dev);
    atomic_fetch_add_explicit(&lane_slot(f, lane_of(canonical(s, pts)))->graphs, 1,
                              memory_order_relaxed);
}

static struct mark *mark_at(struct inflight *f, unsigned i)
{
    return &f->ring[(f->head + i) % MARKS];
}

static void failed(struct inflight *f, const char *what, CUresult rc)
{
    if (!f->failure_logged)
        GEM_LOG(GEM_LOG_WARN,
                "cannot measure GPU work in flight (%s: error %d): queued work is not bounded "
                "for that stream",
                what, (int)rc);
    f->failure_logged = 1;
}

/* The run window of a segment that began to run at `start_ns` (NULL: none).  f->m held. */
static struct run_window *run_window_of(struct inflight *f, int64_t start_ns)
{
    for (int i = 0; i < 2; i++) {
        struct run_window *w = &f->run[i];
        if (w->from_ns != 0 && start_ns >= w->from_ns && (w->to_ns == 0 || start_ns < w->to_ns))
            return w;
    }
    return NULL;
}

/* The driver's cuEventElapsedTime (NULL: none). */
static __typeof__(&cuEventElapsedTime) elapsed_fn(void)
{
    __typeof__(&cuEventElapsedTime) elapsed = REAL_AUX(cuEventElapsedTime_v2);
    return elapsed != NULL ? elapsed : REAL_AUX(cuEventElapsedTime);
}

/* For the debug log: a segment from `prev` to `done`, `ms` long, left out of run window w after
 * a gap. */
static void note_gap(struct run_window *w, const struct mark *prev, const struct mark *done,
                     float ms)
{
    w->gap_ns += (double)ms * 1e6;
    w->gap_launches += done->launches - prev->launches;
    w->gap_graphs += done->graphs - prev->graphs;
}

/* The segment of `prev`'s lane from `prev` to `done`, in run window w: its span on the GPU's
 * clock joins the window's union, its lane's own launches the window's count (gemini/spans.h).
 * A segment after a gap, or from a hold, (its lane's queue ran dry in it, or may have) joins
 * with the part its launches took at their costs, just before its end: left out, its launches
 * went uncounted while another lane's segments still covered their time (fake GPU, two
 * threads: 0.213-0.216 ms a launch of 0.2), and whole, a hold's span of one launch held 8.5
 * ms the GPU idled in.  A segment not placed on the window's chain (place_mark) leaves the
 * window without a union.  The lanes' slots are noted: a union of many says nothing
 * (gem_inflight_measured).  f->m held. */
static void add_span(const struct inflight *f, struct run_window *w, const struct mark *prev,
                     const struct mark *done, int after_gap)
{
    if (w == NULL)
        return;
    if (done->slot < GEM_LANES)
        w->slots_seen |= 1ull << done->slot;
    else
        w->shared_seen = 1;
    if (w->several < 0)
        return;
    if (prev->epoch == 0 || prev->epoch != done->epoch || (w->epoch && w->epoch != done->epoch)) {
        w->several = -1;
        return;
    }
    if (w->epoch == 0) {
        w->epoch = done->epoch;
        w->lane = done->lane;
    } else if (done->lane != w->lane) {
        w->several = 1;
    }
    uint64_t n = done->lane_launches - prev->lane_launches;
    uint64_t graphs = done->lane_graphs - prev->lane_graphs;
    graphs = graphs < n ? graphs : n;
    double from = prev->at_ms;
    if (after_gap) {
        double busy = ((double)(n - graphs) * f->kernel.per + (double)graphs * f->graph.per) / 1e6;
        if (done->at_ms - busy > from)
            from = done->at_ms - busy;
    }
    gem_spans_add(&w->spans, from, done->at_ms);
    if (after_gap)
        w->placed_launches += n;
    w->own_launches += n;
    w->own_graphs += graphs;
}

/* A segment after a gap: counted, and for the debug log, left out of the run window it began
 * in (about when `done` was recorded: `prev` had run out by then).  NULL.  f->m held. */
static const struct mark *gap(struct inflight *f, const struct mark *prev,
                              const struct mark *done, __typeof__(&cuEventElapsedTime) elapsed)
{
    gem_stat_add(GEM_STAT_COST_GAPS, 1);
    struct run_window *w = run_window_of(f, done->host_ns);
    add_span(f, w, prev, done, 1);
    float ms = 0.0f;
    if (w != NULL && GEM_LOG_DEBUG <= gem_log_level &&
        elapsed(&ms, prev->ev, done->ev) == CUDA_SUCCESS)
        note_gap(w, prev, done, ms);
    return NULL;
}

/* A segment of n launches, `graphs` of them graph launches, ran in `ns` of GPU time.  Kernels
 * and graph launches have a cost each: learnt as one, a program that mixes replays with light
 * kernels (torch.compile with CUDA graphs: two replays and about three light kernels a step)
 * had it move between a replay's and a fraction of it with where the markers fell.  A segment
 * of one light kernel brought it to a third of a replay's (H100: 212.7 us against 690), and
 * calibrations, which mark every launch and so learn such segments, ran 6-10 ms past their
 * end; on the fake GPU, where the holds of a calibration left the replays' segments out and
 * the light ones in, whole 50 ms waits.  A segment with graph launches in it teaches their
 * cost: its time less its kernels' at their cost, but never under its mean per launch (a
 * kernel's cost learnt on heavier ones).  While other processes' work shares the GPU, a
 * segment of a few launches reads long or short by a whole time slice of theirs: each cost is
 * a mean (the drain factor, learnt at syncs, covers the sharing).  f->m held. */
static int learn_segment(struct inflight *f, double ns, uint64_t n, uint64_t graphs,
                         int64_t now, float ms, int stall)
{
    graphs = graphs < n ? graphs : n; /* (counted after the launch: another thread's may lag) */
    if (graphs == 0) {
        if (!learn_into(&f->kernel, ns, (double)n, COST_MEMORY_LAUNCHES, stall))
            return 0;
        log_cost(f, &f->kernel, "kernel launch", n, graphs, ms, now);
        return 1;
    }
    double graph_ns = ns - (double)(n - graphs) * f->kernel.per;
    double floor = ns * (double)graphs / (double)n;
    if (!learn_into(&f->graph, graph_ns > floor ? graph_ns : floor, (double)graphs,
                    COST_MEMORY_GRAPHS, stall))
        return 0;
    log_cost(f, &f->graph, "graph launch", n, graphs, ms, now);
    return 1;
}

/* Have markers gone to more than one lane lately (MANY_LANES_NS)?  f->m held. */
static int several_lanes(const struct inflight *f, int64_t now)
{
    return f->lane_switch_ns != 0 && now - f->lane_switch_ns < MANY_LANES_NS;
}

/* Does a segment that begins at a hold (queue_end), the GPU not idle in it (learn_cost),
 * teach the cost?  Only where this process launches alone on one lane: with other processes of
 * the client queueing on the GPU meanwhile, or other lanes' kernels beside its own, it reads
 * their time too (42dd9f3; two threads' calibration tails, H100: 360 us a launch against 203).
 * On one lane alone it reads as the others (torch eager, H100: 202.3 us against 202.4), and
 * left out, a program of heavy kernels among light ones learnt from the light ones alone: the
 * holds come before heavy launches, as those are what no longer fit (fake GPU, 0.5 ms kernels
 * each followed by one of 4 us, every token a calibration, beside two busy loops: 13-320 us a
 * launch against 252, and 11 tokens of 168 ran past 5 ms in 8 runs of 24, 8 of them 57-65 ms;
 * with it 253.9 us, one token 8.2 ms).  f->m held. */
static int hold_teaches(const struct inflight *f, int64_t now)
{
    uint32_t sharers = atomic_load_explicit(&f->sharers, memory_order_relaxed);
    return !several_lanes(f, now) && sharers <= 1;
}

/* Was `prev` seen finished before `done` was recorded?  Then its lane's queue ran dry between
 * them, or may have: the segment from it follows a gap. */
static int seen_done_before(const struct mark *prev, const struct mark *done)
{
    return prev->seen_ns != 0 && prev->seen_ns <= done->host_ns;
}

/* A finished marker whose lane's previous one has left the ring, which keeps only the newest
 * finished marker of all lanes: its segment joins its run window's union from that one, as
 * the lane's slot keeps it (placed on the GPU's clock), as learn_cost adds the ring's.  Left
 * out, two threads' ordinary grants counted half their launches over two thirds of their time,
 * and read 186-297 us a launch, moving with what was lost (H200, capped at 0.4: its highest
 * second 0.475, 2026-12-03); with it, 169-180 (0.439-0.456, 2026-12-04).  f->m held. */
static void span_from_slot(struct inflight *f, const struct mark *done)
{
    const struct mark *prev = &lane_slot(f, done->lane)->done;
    if (prev->lane != done->lane || prev->seq >= done->seq)
        return; /* (none yet, or the shared slot's of another lane) */
    int after_gap = seen_done_before(prev, done);
    int placed = prev->epoch != 0 && prev->epoch == done->epoch;
    int64_t began = after_gap || !placed
                        ? done->host_ns
                        : done->seen_ns - (int64_t)((done->at_ms - prev->at_ms) * 1e6);
    add_span(f, run_window_of(f, began), prev, done, after_gap || prev->queue_end);
}

/* Learn the costs from a finished marker and the previous one of its lane.  Returns
 * that one, with the GPU time from its end to `done`'s in *elapsed_ms, where it was measured
 * (else NULL).  f->m held. */
static const struct mark *learn_cost(struct inflight *f, const struct mark *done, unsigned index,
                                     int64_t now, float *elapsed_ms)
{
    __typeof__(&cuEventElapsedTime) elapsed = elapsed_fn();
    if (elapsed == NULL)
        return NULL;
    for (unsigned i = index; i-- > 0;) {
        const struct mark *prev = mark_at(f, i);
        if (prev->lane != done->lane)
            continue;
        /* Only a segment the GPU ran without a gap: `done` was queued before `prev` ran out.
         * One that starts at a hold is measured (the hold's last look polled `prev`: it was
         * still running when the held launch went), and teaches as hold_teaches says.  A
         * graph launch alone, from a marker recorded just before it, has no gap in it but the
         * launch call's own: until one graph's cost is known, graph launches wait for the queue
         * to run dry, and a program with two light kernels or more between its replays (an
         * optimizer step's) then launched every replay after a gap and never learnt what one
         * costs, held step by step (fake GPU: 6,290 holds a second, a run window of 8 us). */
        uint64_t n = done->launches - prev->launches;
        int after_gap = seen_done_before(prev, done);
        int launch_alone = prev->alone && n == 1;
        if (after_gap && !launch_alone)
            return gap(f, prev, done, elapsed);
        float ms = 0.0f;
        if (n == 0)
            return NULL;
        CUresult rc = elapsed(&ms, prev->ev, done->ev);
        if (rc != CUDA_SUCCESS || ms <= 0.0f) {
            gem_stat_add(GEM_STAT_COST_FAILS, 1);
            if (f->elapsed_rc_logged != (int)rc + 1)
                GEM_LOG(GEM_LOG_DEBUG, "marker segment of %llu launches: elapsed %.3f ms, rc %d",
                        (unsigned long long)n, (double)ms, (int)rc);
            f->elapsed_rc_logged = (int)rc + 1;
            return NULL;
        }
        /* A gap no look saw: `prev` ran out before `done` was recorded if the segment is longer
         * than the time from that record to this look, by when `done` had run.  Where no
         * thread looked while the GPU idled (a program that launches, then works on its host
         * for seconds, as torch.compile compiles, with no sync), `prev` is first seen in the
         * look just before `done` is recorded, a moment after its `now`: the idle seconds were
         * learnt as GPU time (H200, alone: 8.5 s over 7 launches, every launch then held, 0.12
         * of bare speed for 4 s). */
        if ((double)ms * 1e6 > (double)(now - done->host_ns + UNSEEN_GAP_SLACK_NS))
            after_gap = 1;
        if (after_gap && !launch_alone) /* (one seen after a gap returned above) */
            return gap(f, prev, done, elapsed);
        /* ... if the launch call took a small part of it: a thread the host stopped between
         * the two markers put the stop in it (a loaded machine: a 4 ms replay read 47). */
        if (after_gap && (double)(done->host_ns - prev->host_ns) > (double)ms * 1e6 / 8)
            return gap(f, prev, done, elapsed);
        *elapsed_ms = ms;
        /* Not one that begins at a hold where the process launches on several lanes: it counts
         * its own thread's launches after the hold while other lanes' kernels ran beside them
         * on the GPU, and reads up to twice their cost (H100, two threads capped at 0.4, in
         * calibration tails: 360 us a launch, a median of 406 per segment, against 203 for
         * the other segments).  A calibration holds every few launches (MEASURE_AHEAD_NS):
         * its tails read 5-20 % slow, and the scheduler charged a speed-up of 1.17-1.32 for
         * 1.11-1.13 of work per granted second.  One lane's hold segments read as its others
         * (torch eager: 202.3 us against 202.4).  When a segment ran, on the host's clock: it
         * ended by the time it was seen finished (now, within a look's interval), `ms` before
         * that it began.  Nor a graph launch alone after a gap: the launch call's own is in
         * it (it teaches the cost, where too long is the safe side). */
        struct run_window *w = run_window_of(f, done->seen_ns - (int64_t)((double)ms * 1e6));
        uint64_t graphs = done->graphs - prev->graphs;
        if (w != NULL && after_gap) { /* (left out: the debug log) */
            note_gap(w, prev, done, ms);
            add_span(f, w, prev, done, 1);
        } else if (w != NULL && prev->queue_end && several_lanes(f, now)) {
            w->hold_launches += n;
            w->hold_graphs += graphs;
            add_span(f, w, prev, done, 1); /* (its lane may have run dry in the hold) */
        } else if (w != NULL) {
            w->ns += (double)ms * 1e6;
            w->launches += n;
            w->graphs += graphs;
            if (graphs > 0)
                w->graph_ns += (double)ms * 1e6;
            add_span(f, w, prev, done, 0);
        }
        /* Nor one that ends at a marker whose finish does not claim every launch in it
         * (claim_of): some of the other lanes' run after it (fake GPU, two threads of 50 us
         * graphs: 30.9 us a graph launch, and a token's queue went 30 ms past it).  It still
         * counts in the run window: the speed's measurements, tails and grants alike, read
         * such segments as before (H100, two threads capped at 0.4: left out there, the tails
         * read 255 us a launch against 184 in the grants, and the client was granted 0.30). */
        if ((prev->queue_end && !hold_teaches(f, now)) || done->claim != done->launches ||
            !learn_segment(f, (double)ms * 1e6, n, graphs, now, ms, done->after_stall)) {
            gem_stat_add(GEM_STAT_COST_GAPS, 1);
            return prev;
        }
        gem_stat_add(GEM_STAT_COSTS, 1);
        if (prev->queue_end)
            gem_stat_add(GEM_STAT_HOLD_COSTS, 1);
        return prev;
    }
    span_from_slot(f, done);
    return NULL;
}

/* The GPU is behind the launches: no launch goes unmarked until it is seen keeping up again
 * (or a cost is known).  f->m held. */
static void behind(struct inflight *f, int64_t now)
{
    f->idle_allowance = 0;
    f->unproven_ns = now;
}

/* Put this thread in relaxed capture mode for our own event calls; returns its mode. */
static CUstreamCaptureMode relax(void)
{
    __typeof__(&cuThreadExchangeStreamCaptureMode) exchange =
        REAL_AUX(cuThreadExchangeStreamCaptureMode);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (exchange == NULL || exchange(&mode) != CUDA_SUCCESS)
        return CU_STREAM_CAPTURE_MODE_RELAXED; /* (nothing to restore) */
    return mode;
}

static void unrelax(CUstreamCaptureMode mode)
{
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return;
    __typeof__(&cuThreadExchangeStreamCaptureMode) exchange =
        REAL_AUX(cuThreadExchangeStreamCaptureMode);
    if (exchange != NULL)
        exchange(&mode);
}

/* By when the work launched before marker m had run, given that it finished by `by`: the
 * work's end, not the marker's, is what a token's overuse counts, and a marker recorded after
 * the work (a launch that asks for the next token once the queue has run out) finishes when it
 * is recorded, after however long the host took to get there.  With no launch on its lane
 * since the newest finished marker of that lane, that one's end is the work's.  Per lane, not
 * per device, and kept apart from the ring (which keeps only the newest finished marker of
 * all): a program of two launching threads, each on its stream, stopped by the host across a
 * token's end, was charged the stop (37 ms a token on the fake GPU), as the other thread's
 * launches, or its marker finishing last, hid the previous marker.  f->m held. */
static int64_t work_done_by(struct inflight *f, const struct mark *m, int64_t by)
{
    const struct lane_slot *l = lane_slot(f, m->lane);
    int nothing_since = l->done.lane == m->lane && l->done.seq < m->seq &&
                        l->done.lane_launches == m->lane_launches;
    return nothing_since && l->done.done_ns < by ? l->done.done_ns : by;
}

/* `by`, or earlier where `m` finished `elapsed_ms` of GPU time after `from` did (whose ev_ns is
 * set), unless that puts it before m was recorded (not to be had).  From the event's end, not
 * its work's: a marker recorded long after its work (on asking, after a stop) ends when it is
 * recorded, and the work after it runs from then. */
static int64_t chained_by(const struct mark *from, float elapsed_ms, const struct mark *m,
                          int64_t by)
{
    int64_t chained = from->ev_ns + (int64_t)((double)elapsed_ms * 1e6);
    return chained < by && chained >= m->host_ns ? chained : by;
}

/* `by`, or earlier where the GPU time from `from` (finished, its ev_ns set; any lane: the GPU's
 * clock is one) to `m`, one cuEventElapsedTime, bounds m's end (chained_by; negative where m's
 * came first).  Relaxed. */
static int64_t measured_by(const struct mark *from, const struct mark *m, int64_t by)
{
    __typeof__(&cuEventElapsedTime) elapsed = elapsed_fn();
    float ms = 0.0f;
    return elapsed != NULL && elapsed(&ms, from->ev, m->ev) == CUDA_SUCCESS
               ? chained_by(from, ms, m, by)
               : by;
}

/* Marker m was seen finished, by `ev_ns` at the latest: the look's time, or earlier where the
 * GPU time from an earlier marker bounds it, which is the tighter when the look came late (the
 * host stopped the process, or no thread looked): the tracker and the syncs charge a token's
 * overuse from it, and a look 7.6 ms late once charged an H100 client 7.6 ms its program's own
 * events put 1.8 ms before the token's end.  Its work had run by then, or earlier
 * (work_done_by).  f->m held. */
static void done_by(struct inflight *f, struct mark *m, int64_t ev_ns)
{
    m->ev_ns = ev_ns;
    m->done_ns = work_done_by(f, m, ev_ns);
    struct lane_slot *l = lane_slot(f, m->lane);
    l->done = *m;
    l->done.ev = NULL;
    f->done_log[m->seq % DONE_LOG] = (struct done_entry){.seq = m->seq, .done_ns = m->done_ns};
}

/* A full ring drops its head (gem_inflight_mark): placed, it stays the anchor that the next
 * chain is placed from (place_mark), its event swapped for the anchor's before (the slot's
 * next marker records that one).  Two threads in a calibration, marking every few launches,
 * filled the ring of 64 every fraction of a millisecond (fake GPU), and each time a new chain
 * began and the window's union was lost.  f->m held. */
static void keep_anchor(struct inflight *f, struct mark *gone)
{
    if (gone->epoch == 0)
        return;
    CUevent spare = f->anchor.ev;
    f->anchor = *gone;
    gone->ev = spare;
    gone->epoch = 0;
}

/* Where marker i, finished, finished on the GPU's clock: from the marker before it in the ring
 * (for the ring's head, the anchor), placed, by one cuEventElapsedTime (negative where i's came
 * first: the GPU's clock is one); else a new chain begins at it.  Only while several lanes
 * launch (MANY_LANES_NS): the union of their segments needs one clock (add_span), and one
 * lane's segments follow each other without it.  f->m held, relaxed. */
static void place_mark(struct inflight *f, unsigned i)
{
    struct mark *m = mark_at(f, i);
    const struct mark *prev = i > 0 ? mark_at(f, i - 1) : &f->anchor;
    __typeof__(&cuEventElapsedTime) elapsed = elapsed_fn();
    float ms = 0.0f;
    if (prev->epoch != 0 && elapsed != NULL && elapsed(&ms, prev->ev, m->ev) == CUDA_SUCCESS) {
        m->at_ms = prev->at_ms + (double)ms;
        m->epoch = prev->epoch;
        return;
    }
    m->at_ms = 0.0;
    m->epoch = ++f->epochs;
}

/* Move past the finished markers at the head of the ring.  On a clock read of its own: a
 * caller's `now` may be milliseconds old (its thread waited for f->m, or the host stopped
 * it), and a marker seen finished earlier than it was puts the work before it that much
 * earlier: with two launching threads, a queue read 6.5 ms short so (fake GPU), and went 5.3 ms
 * past its token.  f->m held. */
static void poll_marks(struct inflight *f)
{
    int64_t now = gem_now_ns();
    __typeof__(&cuEventQuery) query = REAL_AUX(cuEventQuery);
    if (query == NULL)
        return;
    int late = now - f->looked_ns > LATE_LOOK_NS;
    f->looked_ns = now;
    unsigned finished = f->kept;
    if (finished == f->count)
        return; /* nothing out: no driver call */
    CUstreamCaptureMode mode = relax();
    while (finished < f->count && query(mark_at(f, finished)->ev) == CUDA_SUCCESS)
        finished++;
    if (finished == f->kept) {
        unrelax(mode);
        return;
    }
    for (unsigned i = f->kept; i < finished; i++)
        mark_at(f, i)->seen_ns = now;
    /* Every segment that finished, not only the newest: the GPU time per launch measured in a
     * token's last part tells the scheduler how fast the GPU ran it (gem_inflight_measured),
     * and the newest alone covered a fraction of it.  (cuEventElapsedTime: still relaxed.)
     * Each marker's end is bounded from the GPU time learn_cost measured anyway (its lane's
     * previous marker), and, where it measured nothing (the segment began with the GPU idle,
     * or the lane's previous marker left the ring as another lane's finished) and this look
     * came late, from the marker before it in the ring: two launching threads stopped by the
     * host across token ends were still charged 1-2 of 8 stops in 4 runs of 5 on the fake GPU
     * without it.  Not at every look: a cuEventElapsedTime of its own per marker made a capped
     * JAX client ask early at 3-5 times as many token starts (H100), its tracker waiting up to
     * 70 ms for a token's end. */
    int several = several_lanes(f, now);
    for (unsigned i = f->kept; i < finished; i++) {
        struct mark *m = mark_at(f, i);
        if (several)
            place_mark(f, i);
        float ms = 0.0f;
        const struct mark *from = i > 0 ? learn_cost(f, m, i, now, &ms) : NULL;
        if (from != NULL)
            done_by(f, m, chained_by(from, ms, m, now));
        else if (late && i > 0)
            done_by(f, m, measured_by(mark_at(f, i - 1), m, now));
        else
            done_by(f, m, now);
    }
    const struct mark *told = mark_at(f, finished - 1); /* (the one that tells the most) */
    for (unsigned i = f->kept; i < finished; i++)
        if (mark_at(f, i)->claim > told->claim)
            told = mark_at(f, i);
    unrelax(mode);
    if (told->claim >= f->done_launches) { /* (a sync may have told of more already) */
        f->done_launches = told->claim;
        f->done_graphs = told->claim_graphs;
        f->done_seen_ns = now;
    }
    /* Keep the newest finished marker: the next segment's cost is measured from it. */
    f->head = (f->head + finished - 1) % MARKS;
    f->count -= finished - 1;
    f->kept = 1;
}

/* How many times longer than their cost our launches keep the queue busy: how much slower
 * than that it drains, at least as many times as processes share the token. */
static double wall_factor(const struct inflight *f)
{
    double sharers = (double)atomic_load_explicit(&f->sharers, memory_order_relaxed);
    return f->drain_factor > sharers ? f->drain_factor : sharers;
}

uint32_t gem_inflight_sharers(int dev)
{
    return atomic_load_explicit(&flight(dev)->sharers, memory_order_relaxed);
}

int64_t gem_inflight_launch_ns(int dev)
{
    struct inflight *f = flight(dev);
    pthread_mutex_lock(&f->m);
    double kernel = queued_cost(&f->kernel), graph = queued_cost(&f->graph);
    double per = kernel > graph ? kernel : graph;
    pthread_mutex_unlock(&f->m);
    return (int64_t)per;
}

void gem_inflight_set_sharers(int dev, uint32_t sharers)
{
    if (sharers > MAX_SHARERS) /* (a peer that sent garbage would hold every launch) */
        sharers = MAX_SHARERS;
    atomic_store_explicit(&flight(dev)->sharers, sharers, memory_order_relaxed);
}

/* The GPU time of the launches counted in `upto` after the newest finished marker.  f->m
 * held. */
static double pending_gpu_ns(const struct inflight *f, struct gem_launch_count upto)
{
    if (upto.launches <= f->done_launches)
        return 0.0;
    uint64_t n = upto.launches - f->done_launches;
    uint64_t graphs = upto.graphs > f->done_graphs ? upto.graphs - f->done_graphs : 0;
    graphs = graphs < n ? graphs : n;
    return gpu_ns(f, n - graphs, graphs);
}

/* The estimate, as of `at`, of the work queued by the launches counted in `upto`, each keeping
 * the queue busy `factor` times its cost.  f->m held. */
static int64_t estimate_with(const struct inflight *f, struct gem_launch_count upto, int64_t at,
                             double factor)
{
    int64_t q = (int64_t)(pending_gpu_ns(f, upto) * factor) - (at - f->done_seen_ns);
    return q > 0 ? q : 0;
}

struct gem_launch_count gem_inflight_count(int dev)
{
    return count_of(flight(dev));
}

int64_t gem_inflight_queued_ns(int dev, CUstream s, int pts, int64_t asked_ns, int graph,
                               int64_t *half_ns)
{
    *half_ns = 0;
    struct inflight *f = flight(dev);
    struct lane_slot *l = lane_slot(f, lane_of(canonical(s, pts)));
    pthread_mutex_lock(&f->m);
    poll_marks(f);
    /* As of now, and then as seen from the caller's time (which may be long past: the room it
     * works out from it is then right). */
    int64_t now = gem_now_ns();
    struct gem_launch_count upto = count_of(f);
    l->looked = upto.launches - atomic_load_explicit(&l->launches, memory_order_relaxed);
    l->looked_graphs = upto.graphs - atomic_load_explicit(&l->graphs, memory_order_relaxed);
    upto.graphs += graph != 0; /* (this launch is counted, as a graph launch once queued) */
    uint64_t pending = upto.launches - f->done_launches;
    int64_t queued = 0;
    /* A graph launch carries many kernels: until one's cost is known, they wait as with no
     * cost known. */
    int cost_known = some_cost(f) && (upto.graphs <= f->done_graphs || f->graph.per > 0.0);
    if (cost_known) {
        double factor = wall_factor(f);
        struct gem_launch_count ahead = {.launches = upto.launches - 1,
                                         .graphs = upto.graphs - (graph != 0)};
        if (pending > 0 && f->count == f->kept && estimate_with(f, ahead, now, factor) == 0) {
            /* By the estimate the GPU has run out of the work ahead of this launch (counted
             * at the gate, not queued yet): count from here.  Else the time it then sat idle
             * (the program waited for a token, or did host work) would be taken off this
             * launch and the next as work done, and a whole burst would read as an empty
             * queue.  Only once that time outlasted this launch too was it counted from here:
             * a kernel of 200 ms launched after a sync and a wait of 50 ms for the token read
             * as 150 ms, and the next one went where it did not fit (fake GPU); kernels of 11
             * ms ran past their tokens by up to one (H200, 2026-12-02).  Never while a marker
             * is out (this look polled them all): the GPU has not run out then, the estimate
             * is short.  A cost learnt from one light kernel of a program's set-up read its
             * queue as empty again and again, and counting from there hid what was queued
             * for good: 0.5 ms kernels ran 61 ms past every paced token (fake GPU). */
            f->done_launches += pending - 1;
            f->done_graphs = ahead.graphs;
            f->done_seen_ns = now;
        }
        queued = estimate_with(f, upto, now, factor);
        const struct cost *c = graph ? &f->graph : &f->kernel;
        *half_ns = (int64_t)(queued_cost(c) * factor / 2);
        if (gem_log_level >= GEM_LOG_DEBUG) /* (read for the debug log only) */
            f->look = (struct gem_look){.at_ns = now, .queued_ns = queued,
                                        .pending = upto.launches - f->done_launches,
                                        .per_ns = c->per, .at_start_ns = c->at_start,
                                        .factor = factor, .seen_ns = f->done_seen_ns,
                                        .out = f->count - f->kept};
    } else if (f->count > f->kept) {
        /* No cost known and markers out: every launch is marked meanwhile (see allowance), so
         * the cost is learnt from the next two that finish.  Beyond a few launches, hold in
         * short steps: holding longer would let the queue run dry and leave nothing to learn
         * from (a gap between two markers is never taken as their cost).  The longer the
         * oldest marker is out, the more may go: its kernel may be waiting for something only
         * a later launch provides. */
        int64_t age = now - mark_at(f, f->kept)->host_ns; /* of the oldest marker out */
        int64_t doublings = age / UNKNOWN_COST_DOUBLING_NS;
        if (pending > (uint64_t)UNKNOWN_COST_LAUNCHES << (doublings < 20 ? doublings : 20)) {
            queued = GEM_INFLIGHT_UNKNOWN;
            behind(f, now); /* mark every launch until the cost is learnt */
        }
    } else if (f->kept && mark_at(f, 0)->host_ns > f->unproven_ns &&
               f->idle_allowance < IDLE_ALLOWANCE_MAX) {
        /* The newest marker had run by this look, with no wait since it was recorded: the GPU
         * keeps up (a launch-bound loop, whose markers never teach a cost); look less often.
         * A marker that ran while the host waited (a sync, a hold) proves nothing: a heavy
         * kernel loop that syncs every burst would otherwise go unmarked, never learn its cost,
         * and queue whole bursts past the token (no marker at all proves nothing either:
         * launches into a capture are counted too). */
        f->idle_allowance = f->idle_allowance ? 2 * f->idle_allowance : IDLE_ALLOWANCE_MIN;
    }
    pthread_mutex_unlock(&f->m);
    return queued == GEM_INFLIGHT_UNKNOWN ? queued : queued + (now - asked_ns);
}

/* What a wait for the launches counted in `before` that ran them all says of the queue's
 * drain.  The costs are learnt from markers a fraction of a ms apart; over a whole burst the
 * queue may drain slower than it says, when other processes' work shares the GPU (the other
 * processes of a client, which share its token: on the H100 two of them each waited 2.2 times
 * the estimate at every sync, and a token's queue ran up to 28 ms past its end).  A wait on a
 * queue long enough to measure moves the drain factor half way to what it saw (never below 1).
 * A wait far longer than that says the cost was learnt on other kernels (a framework's set-up,
 * an earlier phase): else whole bursts go unmarked at a cost that says they fit, and run past
 * the token.  They are raised by as much as the wait was longer than those launches' cost (a
 * floor, as some of them may have run before it), never lowered: a program that launches
 * slower than the GPU runs (torch.compile) waits at each sync for its last kernels alone,
 * over a hundred launches.  It used to be forgotten and learnt again from the next segment,
 * often one small kernel (torch.compile on the H100: the same test fired 309 times a minute,
 * and its next bursts ran up to 5 ms past the token).  (Not on a wait for few launches: a
 * stream sync after a copy waits for the copy.)  f->m held. */
static void learn_drain(struct inflight *f, struct gem_launch_count before, int64_t from,
                        int64_t waited)
{
    if (!some_cost(f) || before.launches < f->done_launches + RELEARN_MIN_LAUNCHES)
        return;
    int64_t raw = estimate_with(f, before, from, 1.0);
    if (raw >= GEM_SYNC_BEHIND_NS && (double)waited <= DRAIN_FACTOR_MAX * (double)raw) {
        double factor = (f->drain_factor + (double)waited / (double)raw) / 2;
        f->drain_factor = factor > 1.0 ? factor : 1.0;
        if (worth_logging(f->drain_factor, f->logged_factor)) {
            GEM_LOG(GEM_LOG_DEBUG, "the queue drains %.2f times slower than its cost per launch "
                    "(waited %.3f ms for %.3f ms)", f->drain_factor, (double)waited / 1e6,
                    (double)raw / 1e6);
            f->logged_factor = f->drain_factor;
        }
        return;
    }
    int64_t estimate = estimate_with(f, before, from, wall_factor(f));
    double cost = pending_gpu_ns(f, before); /* (0: kernels only, their cost not known) */
    if (waited > 2 * estimate + GEM_SYNC_BEHIND_NS && cost > 0.0 && (double)waited > cost) {
        double raise = (double)waited / cost;
        GEM_LOG(GEM_LOG_DEBUG, "GPU time per launch was too low (waited %.3f ms for an "
                "estimated %.3f ms, %llu launches): kernel launches %.1f -> %.1f us, graph "
                "launches %.1f -> %.1f us", (double)waited / 1e6, (double)estimate / 1e6,
                (unsigned long long)(before.launches - f->done_launches), f->kernel.per / 1e3,
                f->kernel.per * raise / 1e3, f->graph.per / 1e3, f->graph.per * raise / 1e3);
        struct cost *costs[] = {&f->kernel, &f->graph};
        for (int i = 0; i < 2; i++) {
            costs[i]->ns *= raise;
            costs[i]->per *= raise;
            costs[i]->logged = costs[i]->per;
        }
        f->logged_cost_ns = from + waited;
        f->drain_factor = f->logged_factor = 1.0;
    }
}

int64_t gem_inflight_waited(int dev, struct gem_launch_count before, int64_t from, int64_t now,
                            int all_ran)
{
    int64_t ran_by = now;
    struct inflight *f = flight(dev);
    pthread_mutex_lock(&f->m);
    int64_t waited = now - from;
    if (all_ran)
        learn_drain(f, before, from, waited);
    if (waited < GEM_SYNC_BEHIND_NS)
        f->unproven_ns = now;
    else
        behind(f, now);
    if (all_ran) {
        poll_marks(f); /* the markers before the sync are done too: learn from them first */
        /* The newest finished marker came after them all: they ran by when it did, if they
         * were all on its lane (a context sync waits for every stream, and each thread's
         * per-thread default stream is a lane of its own). */
        if (f->kept && f->lane_switch_ns == 0 && mark_at(f, 0)->launches >= before.launches)
            ran_by = mark_at(f, 0)->done_ns;
        if (before.launches > f->done_launches) {
            f->done_launches = before.launches;
            f->done_graphs = before.graphs;
            f->done_seen_ns = now;
        }
    }
    pthread_mutex_unlock(&f->m);
    return ran_by;
}

int64_t gem_inflight_next_done_ns(int dev)
{
    struct inflight *f = flight(dev);
    int64_t at = 0;
    pthread_mutex_lock(&f->m);
    if (some_cost(f) && f->count > f->kept && f->done_seen_ns != 0) {
        const struct mark *m = mark_at(f, f->kept); /* the oldest one out */
        struct gem_launch_count upto = {.launches = m->launches, .graphs = m->graphs};
        /* (counted with the others' work too, it held the launches past the queue's end) */
        at = f->done_seen_ns + (int64_t)(pending_gpu_ns(f, upto) * f->drain_factor);
    }
    pthread_mutex_unlock(&f->m);
    return at;
}

struct gem_look gem_inflight_latest_look(int dev)
{
    struct inflight *f = flight(dev);
    pthread_mutex_lock(&f->m);
    struct gem_look l = f->look;
    pthread_mutex_unlock(&f->m);
    return l;
}

void gem_look_describe(const struct gem_look *l, char *buf, size_t n)
{
    snprintf(buf, n, "%.3f ms queued by the estimate, %llu launches at %.1f us (learnt %.1f, "
             "%.1f at the token's start), drain factor %.2f; the newest finished marker seen "
             "%.3f ms before, %u out", (double)l->queued_ns / 1e6,
             (unsigned long long)l->pending,
             queued_cost(&(struct cost){.per = l->per_ns, .at_start = l->at_start_ns}) / 1e3,
             l->per_ns / 1e3, l->at_start_ns / 1e3, l->factor,
             (double)(l->at_ns - l->seen_ns) / 1e6, l->out);
}

/* Launches that each keep the queue busy `cost` ns (> 0) in half of room_ns: look again before
 * it is full. */
static uint64_t launches_in(int64_t room_ns, double cost)
{
    double n = (double)room_ns / cost / 2;
    return n > 256.0 ? 256 : (uint64_t)n;
}

void gem_inflight_allowance(int dev, int64_t room_ns, uint64_t *kernels, uint64_t *graphs)
{
    struct inflight *f = flight(dev);
    pthread_mutex_lock(&f->m);
    double factor = wall_factor(f);
    double kernel = queued_cost(&f->kernel) * factor, graph = queued_cost(&f->graph) * factor;
    int markers_out = f->count > f->kept;
    uint64_t idle = f->idle_allowance;
    pthread_mutex_unlock(&f->m);
    /* Until its cost is known every graph launch looks.  Near the token's end a launch that
     * may cost ms looks, graph launch or kernel, and goes if half of it fits: an allowance of
     * one kernel at least let one more go after each look than fitted, and kernels of 11 ms
     * ran 20-60 ms past their tokens, two clients' overruns slowing each other's next turns
     * (H200, 2026-12-02: a 0.3/0.7 pair 5.7 / 7.7 points off over 10 s). */
    *graphs = graph > 0.0 ? launches_in(room_ns, graph) : 0;
    if (kernel > 0.0) {
        *kernels = launches_in(room_ns, kernel);
    } else if (markers_out) { /* the next launch goes slow and gets a marker */
        *kernels = 0;
    } else {
        gem_stat_add(GEM_STAT_IDLE_GO, idle);
        *kernels = idle;
    }
}

static int current_ctx_ok(struct inflight *f)
{
    __typeof__(&cuCtxGetCurrent) get_ctx = REAL_AUX(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    if (get_ctx == NULL || get_ctx(&ctx) != CUDA_SUCCESS || ctx == NULL)
        return 0;
    if (f->ctx == ctx)
        return 1;
    /* A new context (or the first): the old markers belong to the old one. */
    __typeof__(&cuEventDestroy_v2) destroy = REAL_AUX(cuEventDestroy_v2);
    for (unsigned i = 0; i < MARKS; i++) {
        if (f->ring[i].ev != NULL && destroy != NULL && f->ctx != NULL)
            destroy(f->ring[i].ev);
        f->ring[i].ev = NULL;
    }
    if (f->anchor.ev != NULL && destroy != NULL && f->ctx != NULL)
        destroy(f->anchor.ev);
    f->anchor = (struct mark){0};
    f->head = f->count = f->kept = 0;
    for (unsigned i = 0; i <= GEM_LANES; i++)
        f->lanes[i].done = (struct mark){0};
    forget_cost(f);
    struct gem_launch_count counted = count_of(f);
    f->done_launches = counted.launches;
    f->done_graphs = counted.graphs;
    f->ctx = ctx;
    return 1;
}

/* 1: the stream captures; 0: it does not; -1: not to be had (the legacy default stream while
 * a blocking stream captures, whose capture a record there would join). */
static int capture_status(CUstream s, int pts)
{
    __typeof__(&cuStreamIsCapturing) capturing = REAL_AUX(cuStreamIsCapturing);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (capturing == NULL)
        return 0;
    if (capturing(canonical(s, pts), &st) != CUDA_SUCCESS)
        return -1;
    return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

int gem_inflight_capturing(CUstream s, int pts)
{
    return capture_status(s, pts) == 1;
}

/* What m's finish says has run: every launch before it on its lane, and the other lanes'
 * launches counted when its lane's latest marked launch looked (the slow path's look, at the
 * gate), queued before that launch.  Not the others' launches since, counted when m was
 * recorded: they are queued beside its lane's in no order the GPU keeps.  A marker recorded
 * after a launch, or at a hold, finished at once and said that the other threads' queues had
 * run (fake GPU, two threads of 50 us graphs: 52 launches claimed 70 us after they were
 * queued; a token's queue went up to 30 ms past it).  A lane's launches on the hot path since
 * its look are claimed by its own markers, and by the other lanes' after their next look.
 * One of a lane past GEM_LANES claims nothing: its slot's counts and looks are its lane's and
 * others' mixed.  f->m held. */
static void claim_of(const struct inflight *f, struct lane_slot *l, struct mark *m,
                     int before_launch)
{
    if (shared_slot(f, l)) {
        m->claim = m->claim_graphs = 0;
        return;
    }
    if (!before_launch) { /* after a launch that looked (the slow path marks its launch) */
        l->others = l->looked;
        l->others_graphs = l->looked_graphs;
    }
    uint64_t claim = m->lane_launches + l->others;
    uint64_t graphs = m->lane_graphs + l->others_graphs;
    m->claim = claim < m->launches ? claim : m->launches;
    m->claim_graphs = graphs < m->graphs ? graphs : m->graphs;
}

/* The GPU time of the launches counted in slot l since its latest marker was due, at their
 * costs.  A host that launches far faster than the GPU runs (CUDA graphs, a C program) put a
 * marker, MARK_GAP_NS apart, only at the start of a grant's queue, however often it looked: the
 * segments measured then fell at the grant's end, where a power-limited card has slowed most
 * (token.c, GRANT_LOOK_GPU_NS).  f->m held. */
static double unmarked_gpu_ns(const struct inflight *f, struct lane_slot *l)
{
    uint64_t n = atomic_load_explicit(&l->launches, memory_order_relaxed) - l->mark_launches;
    uint64_t graphs = atomic_load_explicit(&l->graphs, memory_order_relaxed) - l->mark_graphs;
    graphs = graphs < n ? graphs : n;
    return gpu_ns(f, n - graphs, graphs);
}

/* Is a marker due on lane `l`?  While no cost is known every slow-path launch is marked: the
 * cost is learnt from them.  Before a sync, where the newest marker does not follow every launch
 * here: not mark_launches, which counts the launch a marker went just before as marked (the
 * first launch in a token's tail, whose sync then put none, and was charged its lateness: fake
 * GPU, 20.3-22.1 ms a token).  Due per lane: due per device, one thread's markers took the turns
 * of another's on its own stream, whose launches then went unmarked for most of a token (two
 * threads stopped by the host across a token's end: the stop was charged, on the fake GPU).
 * f->m held. */
static int marker_due(struct inflight *f, struct lane_slot *l, int how, int64_t now)
{
    if (how & GEM_MARK_IF_LAUNCHED)
        return atomic_load_explicit(&l->launches, memory_order_relaxed) != l->followed;
    return how != 0 || f->kernel.per <= 0.0 || now - l->last_mark_ns >= MARK_GAP_NS ||
           unmarked_gpu_ns(f, l) >= MARK_GPU_GAP_NS;
}

/* The slot of `lane` (the stream s's) where a marker is to go now, else GEM_LANES + 1.  Whether
 * one is due comes first: most slow-path launches need none, and the capture check is a driver
 * call.  A lane takes its slot only once its stream is known not to capture (one that only
 * captures would hold it for good), and a sync's marker takes none (gem_lanes_find).  f->m
 * held. */
static unsigned marked_slot(struct inflight *f, CUstream s, int pts, uintptr_t lane, int how,
                            int64_t now)
{
    const unsigned none = GEM_LANES + 1;
    if ((how & GEM_MARK_BEFORE_GRAPH) && f->graph.per > 0.0)
        return none;
    unsigned slot = gem_lanes_find(&f->lane_keys, lane);
    if (slot > GEM_LANES ? (how & GEM_MARK_IF_LAUNCHED) != 0
                         : !marker_due(f, &f->lanes[slot], how, now))
        return none;
    int capture = capture_status(s, pts);
    /* (launched into a graph: nothing runs now; a sync's marker goes only where it is sure to
     * join no capture, as no launch of the program's put it there) */
    if (capture == 1 || (capture < 0 && (how & GEM_MARK_IF_LAUNCHED)))
        return none;
    if (slot > GEM_LANES) {
        slot = gem_lanes_slot(&f->lane_keys, lane);
        if (!marker_due(f, &f->lanes[slot], how, now))
            return none;
    }
    return current_ctx_ok(f) ? slot : none;
}

void gem_inflight_mark(int dev, CUstream s, int pts, int64_t now, int how)
{
    int before_launch = (how & GEM_MARK_BEFORE_LAUNCH) != 0;
    struct inflight *f = flight(dev);
    __typeof__(&cuEventCreate) create = REAL_AUX(cuEventCreate);
    __typeof__(&cuEventRecord) record = REAL_AUX(cuEventRecord);
    if (create == NULL || record == NULL)
        return;
    CUstream stream = canonical(s, pts);
    uintptr_t lane = lane_of(stream);
    pthread_mutex_lock(&f->m);
    unsigned slot = marked_slot(f, s, pts, lane, how, now);
    if (slot > GEM_LANES) {
        pthread_mutex_unlock(&f->m);
        return;
    }
    struct lane_slot *l = &f->lanes[slot];
    poll_marks(f);
    if (f->count == MARKS) { /* full: drop the oldest unfinished one (see MARKS: rare now) */
        keep_anchor(f, mark_at(f, 0));
        f->head = (f->head + 1) % MARKS;
        f->count--;
        f->kept = 0;
    }
    struct mark *m = mark_at(f, f->count);
    CUresult rc = CUDA_SUCCESS;
    CUstreamCaptureMode mode = relax();
    if (m->ev == NULL)
        rc = create(&m->ev, CU_EVENT_DEFAULT);
    if (rc == CUDA_SUCCESS)
        rc = record(m->ev, stream);
    unrelax(mode);
    if (rc != CUDA_SUCCESS) {
        failed(f, "cuEventRecord", rc);
        pthread_mutex_unlock(&f->m);
        return;
    }
    gem_stat_add(GEM_STAT_MARKS, 1);
    m->lane = lane;
    m->slot = slot;
    /* Before a launch, that launch is counted (gem_inflight_launch) but not queued yet, on the
     * device and on this lane.  (Read after the record: a launch counted before it went to the
     * driver, so every launch queued before the marker is in the counts.) */
    uint64_t own = before_launch != 0;
    struct gem_launch_count all = count_of(f);
    m->launches = all.launches - own;
    m->lane_launches = atomic_load_explicit(&l->launches, memory_order_relaxed) - own;
    m->lane_graphs = atomic_load_explicit(&l->graphs, memory_order_relaxed);
    m->graphs = all.graphs;
    m->epoch = 0;
    claim_of(f, l, m, before_launch);
    m->host_ns = now;
    m->seen_ns = m->ev_ns = m->done_ns = 0;
    m->queue_end = (how & GEM_MARK_QUEUE_END) != 0;
    m->alone = (how & (GEM_MARK_BEFORE_GRAPH | GEM_MARK_ALONE)) != 0;
    m->after_stall = (how & GEM_MARK_AFTER_STALL) != 0;
    m->seq = ++f->seq;
    l->followed = m->lane_launches;
    if (f->seq > 1 && m->lane != f->last_lane)
        f->lane_switch_ns = now;
    f->last_lane = m->lane;
    f->count++;
    if (!m->queue_end) { /* (the launch after a hold is marked as if it had not been) */
        l->last_mark_ns = now;
        l->mark_launches = m->lane_launches + own;
        l->mark_graphs = m->lane_graphs;
    }
    pthread_mutex_unlock(&f->m);
}

uint64_t gem_inflight_seq(int dev)
{
    struct inflight *f = flight(dev);
    pthread_mutex_lock(&f->m);
    uint64_t seq = f->seq;
    pthread_mutex_unlock(&f->m);
    return seq;
}

void gem_inflight_measure_from(int dev, int64_t from_ns, int64_t now)
{
    struct inflight *f = flight(dev);
    pthread_mutex_lock(&f->m);
    f->run[1] = f->run[0];
    if (f->run[1].from_ns != 0)
        f->run[1].to_ns = now;
    f->run[0] = (struct run_window){.from_ns = from_ns};
    f->kernel.at_start = f->kernel.per;
    f->graph.at_start = f->graph.per;
    pthread_mutex_unlock(&f->m);
}

void gem_inflight_measured(int dev, double *gpu_ms, uint64_t *count, int *graphs)
{
    struct inflight *f = flight(dev);
    __typeof__(&cuCtxGetCurrent) get_ctx = REAL_AUX(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    pthread_mutex_lock(&f->m);
    /* What finished since the last look counts too: a program that asks after a sync has run
     * its queue, and nothing looked at the markers since (a thread of our context only). */
    if (get_ctx != NULL && get_ctx(&ctx) == CUDA_SUCCESS && ctx != NULL && ctx == f->ctx)
        poll_marks(f);
    const struct run_window *w = &f->run[1];
    /* A program whose graph replays carry most of its GPU time is counted in them from then
     * on.  Its other launches are light, and how many of them a window holds moves with where
     * the markers fall, not with the work: torch.compile's CUDA graphs (two replays and about
     * three light kernels a step) read 2.44-2.57 launches a graph in its ordinary grants and
     * 2.35-2.95 in its calibration tails, so a tail read 251-311 us a launch against 275 in
     * the grants, and its speed 0.94-1.02, while a replay took 731-769 us in the tails against
     * 690 (1.06-1.11) and the program did 1.09 of its bare work per granted second (H100,
     * 2026-11-26 02:28).  The GPU time is every segment's: a light kernel that goes unmarked
     * in a grant is inside a graph's segment, and marked in a tail it is a segment of its own. */
    if (!f->graph_unit && w->graphs > 0 && 2.0 * w->graph_ns >= w->ns)
        f->graph_unit = 1;
    /* Several lanes: their segments' union over their own launches (gemini/spans.h).  Not
     * of many lanes (UNION_LANES_MAX), or of lanes past GEM_LANES, which count their launches
     * in one slot together: a program that takes the next of many streams for each step has
     * each lane back only after the others' work, its segment then holding that work's time,
     * or launches of earlier tokens.  A program of 96 streams so read 125-160 us a launch of
     * 181 in its grants and its speed 1.37-1.39 for 1.15 (H200, 2026-12-04: its highest
     * second 0.476 capped at 0.4), and leaving the earlier tokens' launches out made its tails
     * read the cost back, its speed 1.0 (0.43 of its bare work).  The scheduler then reads its
     * speed by the clock. */
    int lanes = __builtin_popcountll(w->slots_seen) + w->shared_seen;
    int by_union = w->several > 0 && w->spans.n > 0;
    int unknown = w->shared_seen || lanes > UNION_LANES_MAX;
    double union_ms = by_union ? gem_spans_total(&w->spans) : 0.0;
    *gpu_ms = unknown ? 0.0 : by_union ? union_ms : w->ns / 1e6;
    if (unknown)
        *count = 0;
    else if (by_union)
        *count = f->graph_unit ? w->own_graphs : w->own_launches;
    else
        *count = f->graph_unit ? w->graphs : w->launches;
    *graphs = f->graph_unit;
    if (by_union || unknown)
        GEM_LOG(GEM_LOG_DEBUG, "measured over %d lanes%s: %.3f ms of their segments' union "
                "(%d spans), %llu of their own launches (%llu graphs), %llu of them placed at "
                "their costs%s",
                lanes, w->shared_seen ? ", some past the slots" : "", union_ms, w->spans.n,
                (unsigned long long)w->own_launches, (unsigned long long)w->own_graphs,
                (unsigned long long)w->placed_launches, unknown ? ": not said" : "");
    if (w->from_ns != 0)
        GEM_LOG(GEM_LOG_DEBUG, "measured %.3f ms over %llu launches (%llu graphs, %.3f ms); left "
                "out: %llu launches (%llu graphs) after gaps, %.3f ms, %llu (%llu) after holds",
                w->ns / 1e6, (unsigned long long)w->launches, (unsigned long long)w->graphs,
                w->graph_ns / 1e6, (unsigned long long)w->gap_launches,
                (unsigned long long)w->gap_graphs, w->gap_ns / 1e6,
                (unsigned long long)w->hold_launches, (unsigned long long)w->hold_graphs);
    f->run[1] = (struct run_window){0}; /* (said once) */
    pthread_mutex_unlock(&f->m);
}

/* The ring slots of the newest marker of each lane recorded up to `seq` (each thread's
 * per-thread default stream its own: one handle names them all).  f->m held. */
static int newest_per_lane(struct inflight *f, uint64_t seq, unsigned *slot, uint64_t *slot_seq)
{
    int n = 0;
    for (unsigned i = f->count; i-- > 0;) {
        const struct mark *m = mark_at(f, i);
        if (m->seq > seq)
            continue;
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = f->ring[slot[j]].lane == m->lane;
        if (!seen) {
            slot[n] = (f->head + i) % MARKS;
            slot_seq[n++] = m->seq;
        }
    }
    return n;
}

/* By when the marker `seq` (of ring slot `slot`) finished, at the latest, if it has; 0 if not
 * yet, -1 on a driver error.  f->m held, relaxed. */
static int64_t finished_by(struct inflight *f, unsigned slot, uint64_t seq, int64_t now)
{
    const struct mark *m = &f->ring[slot];
    if (m->seq != seq) { /* it finished, and left the ring since: as logged then */
        const struct done_entry *e = &f->done_log[seq % DONE_LOG];
        return e->seq == seq ? e->done_ns : now;
    }
    if (m->seen_ns != 0)
        return m->done_ns;
    CUresult rc = REAL_AUX(cuEventQuery)(m->ev);
    if (rc == CUDA_ERROR_NOT_READY)
        return 0;
    if (rc != CUDA_SUCCESS)
        return -1;
    /* Finished, not yet seen by poll_marks: no launching thread looked since (they may all be
     * waiting for a token), or an older marker of another lane is still out.  Bounded as a
     * late look bounds it (poll_marks), from the newest marker seen (left to poll_marks to
     * move past: who sees a marker first decides what a launching thread learns from it, and
     * the tracker seeing them at a token's end let bursts of a fake GPU's test run 30 ms past
     * every token). */
    int64_t by = f->kept ? measured_by(mark_at(f, 0), m, now) : now;
    return work_done_by(f, m, by);
}

/* The tracker's thread has no context of its own: cuEventElapsedTime is for ours.  f->m held. */
static void use_our_context(struct inflight *f)
{
    __typeof__(&cuCtxGetCurrent) get_ctx = REAL_AUX(cuCtxGetCurrent);
    __typeof__(&cuCtxSetCurrent) set_ctx = REAL_AUX(cuCtxSetCurrent);
    CUcontext ctx = NULL;
    if (f->ctx != NULL && get_ctx != NULL && set_ctx != NULL &&
        get_ctx(&ctx) == CUDA_SUCCESS && ctx != f->ctx)
        set_ctx(f->ctx);
}

int64_t gem_inflight_wait_all(int dev, uint64_t seq)
{
    struct inflight *f = flight(dev);
    if (REAL_AUX(cuEventQuery) == NULL)
        return -1;
    unsigned slot[MARKS];
    uint64_t slot_seq[MARKS];
    pthread_mutex_lock(&f->m);
    int n = newest_per_lane(f, seq, slot, slot_seq);
    if (n > 0)
        use_our_context(f);
    pthread_mutex_unlock(&f->m);
    /* Polled, not waited for with cuEventSynchronize: the launching threads re-record a slot's
     * event once its marker is done, and a wait would then wait for their later work. */
    int64_t start = gem_now_ns(), step = WAIT_STEP_MIN_NS;
    int64_t latest = n > 0 ? 0 : start; /* (no marker at all: nothing to bound it by) */
    while (n > 0) {
        pthread_mutex_lock(&f->m);
        CUstreamCaptureMode mode = relax();
        int64_t now = gem_now_ns();
        for (int i = n; i-- > 0;) {
            int64_t by = finished_by(f, slot[i], slot_seq[i], now);
            if (by < 0) {
                unrelax(mode);
                pthread_mutex_unlock(&f->m);
                return -1;
            }
            if (by == 0)
                continue;
            latest = by > latest ? by : latest;
            slot[i] = slot[--n];
            slot_seq[i] = slot_seq[n];
        }
        unrelax(mode);
        pthread_mutex_unlock(&f->m);
        if (n == 0)
            break;
        gem_sleep_ns(step);
        /* Precise for the short waits that matter (a token's tail), cheap for long ones. */
        int64_t waited = gem_now_ns() - start;
        step = waited / 20 > step ? waited / 20 : step;
        if (step > WAIT_STEP_MAX_NS)
            step = WAIT_STEP_MAX_NS;
    }
    return latest;
}
