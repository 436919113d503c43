/* The tracker's wait for the newest marker of every lane as of a token's end (inflight.h): by
 * when the work before them had run, on the GPU's clock where it tells, for the token's
 * overuse. */
#include "inflight.h"

#define WAIT_STEP_MIN_NS 20000   /* the tracker polls the markers of a token's end ... */
#define WAIT_STEP_MAX_NS 2000000  /* ... this often at most and at least */

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
