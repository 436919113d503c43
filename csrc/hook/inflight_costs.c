/* What a launch costs the GPU (inflight.h), learnt from each finished marker and the one before
 * it on its lane: kernels and graph launches apart, each a mean over launches (the arithmetic:
 * gemini/cost.h), from segments the GPU ran without a gap; and what such a segment adds to its
 * token's run window. */
#include "inflight.h"

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
#define UNSEEN_GAP_SLACK_NS 100000 /* a look's clock is read just before its queries */

void forget_cost(struct inflight *f)
{
    f->kernel = f->graph = (struct gem_cost){0};
    f->logged_cost_ns = 0;
    f->drain_factor = f->logged_factor = 1.0;
}

/* A learnt value is written to the debug log when it has moved by a quarter since it last was:
 * it moves a little at every segment or sync. */
int worth_logging(double now, double logged)
{
    return now > 1.25 * logged || now < 0.8 * logged;
}

/* ... a cost at most once a second (any cost: f->logged_cost_ns): a mix of graph replays and
 * light kernels, learnt as one cost, moved it by a third and back at every graph's segment
 * (torch.compile with CUDA graphs wrote 586 such lines a minute on the H100). */
static void log_cost(struct inflight *f, struct gem_cost *c, const char *what, uint64_t n,
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

/* The GPU time of `kernels` launches of one kernel and `graphs` graph launches, by the costs.
 * A kernel's cost not known yet counts nothing where a graph launch's is: the kernels between
 * replays were then in the segments it was learnt from, and so are in it. */
double gpu_ns(const struct inflight *f, uint64_t kernels, uint64_t graphs)
{
    return (double)kernels * gem_cost_queued(&f->kernel) +
           (double)graphs * gem_cost_queued(&f->graph);
}

/* Some cost is known: the queue can be estimated. */
int some_cost(const struct inflight *f)
{
    return f->kernel.per > 0.0 || f->graph.per > 0.0;
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
    int has_graphs = graphs > 0; /* (then it teaches the graph launch's cost alone) */
    struct gem_cost *c = has_graphs ? &f->graph : &f->kernel;
    double taught_ns = has_graphs ? gem_cost_graph_ns(ns, n, graphs, f->kernel.per) : ns;
    double taught = has_graphs ? (double)graphs : (double)n; /* (launches) */
    double before = c->per;
    int learnt = gem_cost_learn(c, taught_ns, taught,
                                has_graphs ? COST_MEMORY_GRAPHS : COST_MEMORY_LAUNCHES, stall);
    if (learnt == GEM_COST_NOT_LEARNT)
        return 0;
    if (learnt == GEM_COST_REPLACED_STALLED)
        GEM_LOG(GEM_LOG_DEBUG, "a cost of %.1f us per launch, read over a stalled launch "
                "call, is replaced by %.1f us", before / 1e3, taught_ns / taught / 1e3);
    log_cost(f, c, has_graphs ? "graph launch" : "kernel launch", n, graphs, ms, now);
    return 1;
}

/* Have markers gone to more than one lane lately (MANY_LANES_NS)?  f->m held. */
int several_lanes(const struct inflight *f, int64_t now)
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

/* Learn the costs from a finished marker and the previous one of its lane.  Returns
 * that one, with the GPU time from its end to `done`'s in *elapsed_ms, where it was measured
 * (else NULL).  f->m held. */
const struct mark *learn_cost(struct inflight *f, const struct mark *done, unsigned index,
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
void behind(struct inflight *f, int64_t now)
{
    f->idle_allowance = 0;
    f->unproven_ns = now;
}
