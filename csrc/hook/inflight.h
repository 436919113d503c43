/* GPU work in flight, per device: how much of what the process launched has not run yet.
 *
 * Why: frameworks launch far ahead of the GPU (CUDA graphs and eager loops queue seconds of
 * kernels), and work still queued when the token ends runs on the next client's time.  The
 * token gate (token.c) asks these files how long the queue would take and holds launches once
 * it would outlast the token (design-notes §1).
 *
 * How: after some launches (never more often than MARK_GAP_NS of host time apart, unless
 * MARK_GPU_GAP_NS of GPU work went unmarked: inflight_marks.c) the launching thread records a
 * marker event on the stream it launched on, so every stream the process uses is covered
 * (legacy, per-thread default, non-blocking, graph launches).  Markers are polled with
 * cuEventQuery, never waited for, on the launch path.  The GPU time per launch is learnt from
 * consecutive finished markers of one lane (a stream; each thread's own, where one handle names
 * every thread's per-thread default stream) (cuEventElapsedTime over the launches between
 * them), for kernel launches and graph launches apart (learn_segment, inflight_costs.c); the
 * queue is the launches after the newest finished marker at their costs, less what ran since
 * that marker was seen finished.  What a token's launches took of the GPU (the scheduler's
 * measure of its speed, gem_inflight_measured) is its segments' GPU time over their launches;
 * where several lanes launch, the union of their segments on the GPU's clock over each lane's
 * own launches (add_span, inflight_measure.c), and nothing where more than a few do
 * (UNION_LANES_MAX, inflight_measure.c) or one counts its launches in the slot that lanes past
 * GEM_LANES share.  Until a cost is known, only a few launches may go past the newest finished
 * marker, unless the GPU is seen keeping up (a launch-bound loop, whose markers never teach a
 * cost: the GPU idles between them).  A host wait (sync) on a queue long enough to measure
 * tells how much slower than its cost the queue drains (other processes' work sharing the GPU:
 * the drain factor); one far longer than the estimate says the cost was learnt on other
 * kernels: it is raised to what the wait shows.  The processes of a client share its token and
 * each bounds only its own queue, while the GPU drains theirs together: a process takes the
 * client's queue to be as many times its own as processes share the token (the pod manager says
 * how many with each grant), or its drain factor if that is more (learnt at syncs, that one
 * lags, and never comes to a program that does not sync).  Each then queued up to a whole token
 * of its own: on the H100 two processes of a client capped at 0.4, syncing once a second, ran
 * up to 14 ms past its tokens (overuse p99 4.8-11.9 ms; now 0.8-1.1 ms), and on the fake GPU
 * two that never sync ran 30-60 ms past its 100 ms tokens.
 * Graph launches wait as with no cost known until a segment with one in it has run: a cost
 * learnt on light kernels alone let whole graph replays run past the token (torch.compile with
 * CUDA graphs).  Meanwhile a marker goes just before each graph launch too, so that its
 * segment is measured even when the GPU ran dry before it (learn_cost).
 * The tracker thread (token_tracker.c) waits for the newest marker of every stream as of a
 * token's end to measure the token's overuse (inflight_wait.c): when the work before it had
 * run, bounded by the GPU's own clock (done_by, inflight_marks.c), not when a thread got to
 * look.
 *
 * The files, one concern each, sharing the per-device state below under its mutex:
 *   inflight.c          that state, the launch counts (the hot path), the queue's estimate at
 *                       the gate, and what a host wait teaches of it (the drain factor)
 *   inflight_marks.c    marker events: when one is due, recording it, moving past the
 *                       finished ones and bounding when their work ran
 *   inflight_costs.c    what a launch costs, learnt from a finished marker's segment
 *   inflight_measure.c  what a token's launches took of the GPU (run windows), for the
 *                       scheduler's measure of its speed
 *   inflight_wait.c     the tracker's wait for a token's last markers (its overuse)
 * internal.h declares what the rest of the hook calls (gem_inflight_*); this header is for
 * these files alone. */
#ifndef GEMINI_HOOK_INFLIGHT_H
#define GEMINI_HOOK_INFLIGHT_H

#include "internal.h"

#include "gemini/cost.h"
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
#define DONE_LOG (4 * MARKS)      /* finished markers whose finish the tracker can still read */

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
    struct gem_cost kernel; /* what a launch of one kernel costs (any launch but a graph's) */
    struct gem_cost graph;  /* ... a graph launch (gemini/cost.h) */
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
     * (token_fetch.c; gem_inflight_measured). */
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

/* ---- shared by the inflight files (f->m held where they take an f, unless said) ----------- */
/* inflight.c */
struct inflight *flight(int dev);
struct gem_launch_count count_of(struct inflight *f); /* (atomics: no lock needed) */
/* inflight_marks.c */
void poll_marks(struct inflight *f);
CUstreamCaptureMode relax(void);
void unrelax(CUstreamCaptureMode mode);
int64_t work_done_by(struct inflight *f, const struct mark *m, int64_t by);
int64_t measured_by(const struct mark *from, const struct mark *m, int64_t by);
/* inflight_costs.c */
void forget_cost(struct inflight *f);
int worth_logging(double now, double logged);
double gpu_ns(const struct inflight *f, uint64_t kernels, uint64_t graphs);
int some_cost(const struct inflight *f);
int several_lanes(const struct inflight *f, int64_t now);
const struct mark *learn_cost(struct inflight *f, const struct mark *done, unsigned index,
                              int64_t now, float *elapsed_ms);
void behind(struct inflight *f, int64_t now);
/* inflight_measure.c */
struct run_window *run_window_of(struct inflight *f, int64_t start_ns);
void note_gap(struct run_window *w, const struct mark *prev, const struct mark *done, float ms);
void add_span(const struct inflight *f, struct run_window *w, const struct mark *prev,
              const struct mark *done, int after_gap);

/* ---- small helpers of every inflight file -------------------------------------------------- */

/* The marker's stream as a handle valid in any thread of the process for this purpose. */
static inline CUstream canonical(CUstream s, int pts)
{
    return (pts && s == NULL) ? CU_STREAM_PER_THREAD : s;
}

/* The stream a launch goes to (c: its canonical handle), each thread's own told apart where
 * one handle names them all (the per-thread default stream): what runs in order, so that a
 * marker with no launch on its lane since the previous one of that lane holds no work of its
 * own, whatever other threads launched meanwhile.  (A thread's pthread_self is an aligned
 * address: xor'd with the handle, 2, it is no stream's handle.) */
static inline uintptr_t lane_of(CUstream c)
{
    return c == CU_STREAM_PER_THREAD ? (uintptr_t)pthread_self() ^ (uintptr_t)c : (uintptr_t)c;
}

static inline struct lane_slot *lane_slot(struct inflight *f, uintptr_t lane)
{
    return &f->lanes[gem_lanes_slot(&f->lane_keys, lane)];
}

/* The slot of the lanes past GEM_LANES, which tells none of their launches apart. */
static inline int shared_slot(const struct inflight *f, const struct lane_slot *l)
{
    return l == &f->lanes[GEM_LANES];
}

static inline struct mark *mark_at(struct inflight *f, unsigned i)
{
    return &f->ring[(f->head + i) % MARKS];
}

/* The driver's cuEventElapsedTime (NULL: none). */
static inline __typeof__(&cuEventElapsedTime) elapsed_fn(void)
{
    __typeof__(&cuEventElapsedTime) elapsed = REAL_AUX(cuEventElapsedTime_v2);
    return elapsed != NULL ? elapsed : REAL_AUX(cuEventElapsedTime);
}

#endif
