/* GPU work in flight, per device (inflight.h says how it is known): the state, the launch
 * counts on the hot path, the queue's estimate at the gate (gem_inflight_queued_ns,
 * gem_inflight_allowance) and what a host wait teaches of it (gem_inflight_waited). */
#include "inflight.h"

#include <stdio.h>
#include <string.h>

#define UNKNOWN_COST_LAUNCHES 2   /* launches past the newest finished marker before a cost */
#define UNKNOWN_COST_DOUBLING_NS 100000000 /* ... twice as many for each 0.1 s that the oldest
                                             * marker out has been out: a kernel may wait for
                                             * something only a later launch provides (NCCL) */
#define IDLE_ALLOWANCE_MIN 8      /* no cost known, the GPU keeps up: launches between looks */
#define IDLE_ALLOWANCE_MAX 1024
#define RELEARN_MIN_LAUNCHES 8    /* a cost is raised or its drain learnt only on a wait
                                   * for this many launches at least (a wait for a copy is
                                   * not for kernels) */
#define MAX_SHARERS 64            /* processes sharing a token counted at most */
#define DRAIN_FACTOR_MAX 8.0      /* a sync slower than this many times the estimate: the cost
                                   * is wrong, not the drain (raised) */

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

struct inflight *flight(int dev)
{
    pthread_once(&flights_once, flights_init);
    return &flights[dev];
}

void gem_inflight_reset_after_fork(void)
{
    pthread_once(&flights_once, flights_init);
    flights_init(); /* the parent's events are not the child's */
}

void gem_inflight_launch(int dev, CUstream s, int pts)
{
    struct inflight *f = flight(dev);
    atomic_fetch_add_explicit(&lane_slot(f, lane_of(canonical(s, pts)))->launches, 1,
                              memory_order_relaxed);
}

/* The launches on the device so far, and its graph launches. */
struct gem_launch_count count_of(struct inflight *f)
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

struct gem_launch_count gem_inflight_count(int dev)
{
    return count_of(flight(dev));
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
    double kernel = gem_cost_queued(&f->kernel), graph = gem_cost_queued(&f->graph);
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
        const struct gem_cost *c = graph ? &f->graph : &f->kernel;
        *half_ns = (int64_t)(gem_cost_queued(c) * factor / 2);
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
        struct gem_cost *costs[] = {&f->kernel, &f->graph};
        for (int i = 0; i < 2; i++) {
            gem_cost_raise(costs[i], raise);
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
    struct gem_cost c = {.per = l->per_ns, .at_start = l->at_start_ns};
    snprintf(buf, n, "%.3f ms queued by the estimate, %llu launches at %.1f us (learnt %.1f, "
             "%.1f at the token's start), drain factor %.2f; the newest finished marker seen "
             "%.3f ms before, %u out", (double)l->queued_ns / 1e6,
             (unsigned long long)l->pending, gem_cost_queued(&c) / 1e3,
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
    double kernel = gem_cost_queued(&f->kernel) * factor;
    double graph = gem_cost_queued(&f->graph) * factor;
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
