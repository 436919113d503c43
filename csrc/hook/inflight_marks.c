/* Marker events of the work in flight (inflight.h): whether one is due on a lane, recording it,
 * moving past the finished ones and bounding by when the work before each had run.
 *
 * A marker that cannot be recorded (capture, a foreign context, a driver error) is skipped and
 * said once in the log: the estimate then covers less, never more.
 *
 * Stream capture: while any thread captures a CUDA graph in the default (global) mode, an
 * event query or sync from any thread not in relaxed mode invalidates the capture
 * (torch.compile's reduce-overhead, PyTorch's CUDA graphs).  Our markers are never recorded
 * into a capture, so querying them is safe: each call of the inflight files that touches them
 * runs in relaxed mode (relax / unrelax), whichever thread makes it. */
#include "inflight.h"

#define MARK_GAP_NS 200000        /* at most one marker per 0.2 ms of host time ... */
#define MARK_GPU_GAP_NS 2000000   /* ... unless this much GPU work went unmarked (see below) */
#define LATE_LOOK_NS 2000000      /* a look this long after the one before came late */

static void failed(struct inflight *f, const char *what, CUresult rc)
{
    if (!f->failure_logged)
        GEM_LOG(GEM_LOG_WARN,
                "cannot measure GPU work in flight (%s: error %d): queued work is not bounded "
                "for that stream",
                what, (int)rc);
    f->failure_logged = 1;
}

/* Put this thread in relaxed capture mode for our own event calls; returns its mode. */
CUstreamCaptureMode relax(void)
{
    __typeof__(&cuThreadExchangeStreamCaptureMode) exchange =
        REAL_AUX(cuThreadExchangeStreamCaptureMode);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (exchange == NULL || exchange(&mode) != CUDA_SUCCESS)
        return CU_STREAM_CAPTURE_MODE_RELAXED; /* (nothing to restore) */
    return mode;
}

void unrelax(CUstreamCaptureMode mode)
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
int64_t work_done_by(struct inflight *f, const struct mark *m, int64_t by)
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
int64_t measured_by(const struct mark *from, const struct mark *m, int64_t by)
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
void poll_marks(struct inflight *f)
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

/* The markers start anew, in context ctx (NULL: none yet).  Their old events are destroyed
 * only while their context lives: f->ctx is NULL once it was destroyed or reset, which freed
 * them (gem_inflight_forget_ctx), and their handles may be the application's events since.
 * f->m held. */
static void restart_marks(struct inflight *f, CUcontext ctx)
{
    __typeof__(&cuEventDestroy_v2) destroy = f->ctx != NULL ? REAL_AUX(cuEventDestroy_v2) : NULL;
    for (unsigned i = 0; i < MARKS; i++) {
        if (f->ring[i].ev != NULL && destroy != NULL)
            destroy(f->ring[i].ev);
        /* all of it: a tracker waiting for one of them finds it gone (finished_by), where it
         * queried its event, NULL now, and lost that token's overuse */
        f->ring[i] = (struct mark){0};
    }
    if (f->anchor.ev != NULL && destroy != NULL)
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
}

static int current_ctx_ok(struct inflight *f)
{
    __typeof__(&cuCtxGetCurrent) get_ctx = REAL_AUX(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    if (get_ctx == NULL || get_ctx(&ctx) != CUDA_SUCCESS || ctx == NULL)
        return 0;
    if (f->ctx != ctx) /* a new context (or the first): the old markers belong to the old one */
        restart_marks(f, ctx);
    return 1;
}

void gem_inflight_forget_ctx(CUcontext ctx)
{
    for (int dev = 0; ctx != NULL && dev < GEM_MAX_DEVICES; dev++) {
        struct inflight *f = flight(dev);
        pthread_mutex_lock(&f->m);
        if (f->ctx == ctx) {
            f->ctx = NULL; /* (its events go with it: not destroyed here) */
            restart_marks(f, NULL);
        }
        pthread_mutex_unlock(&f->m);
    }
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
