/* The hook's token per device (Gemini v1, spec §6.5-6.7, plus a check on every launch).
 *
 * Rules, in the order a launch applies them:
 *  - Hot path: a burst is running and the token has not expired -> go (one clock read, two
 *    atomic loads, no lock).
 *  - At the start of a burst (first launch after a sync point), ask for a token early when the
 *    predicted burst does not fit in what is left of the current one (v1).
 *  - Inside a burst, a launch after expiry waits for a new token (v1 let it through; this keeps
 *    a cap even for code that never syncs: design-notes §1).
 *  - One thread per device fetches; the others wait on the condition with a predicate.  The
 *    mutex is never held across a socket call.
 *  - A tracker thread per device wakes at expiry (or when a launch needs the next token early),
 *    records a driver event, waits for it and reports GPU time past the quota as overuse in the
 *    next QUOTA request.  Its forced sync ends the burst, as in v1.  For a unified-memory client
 *    with evict-on-release it then moves the client's managed memory back to the host (um.c):
 *    at expiry, or when a launch asks for the next token early (which returns this one), in
 *    either case before the next QUOTA request goes out.
 *  - gem_token_acquire says when it fetched a new token, so that the launch can have um.c
 *    prefetch the client's memory before the kernel (the slow path only).
 * The arithmetic lives in common/predictor.c. */
#include "internal.h"
#include "gemini/predictor.h"

#include <string.h>

enum { TRACK_IDLE = 0, TRACK_ARMED = 1, TRACK_MEASURING = 2 };

struct token {
    _Atomic int64_t expires_at_ns; /* 0: no token */
    _Atomic int burst_running;
    pthread_mutex_t m;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    struct gem_predictor burst, window;
    int fetching;
    uint64_t generation; /* grants so far */
    double quota_ms;
    double overuse_ms; /* measured for the last token, reported with the next request */
    int track;
    int track_now;
    int tracker_started;
    pthread_t tracker;
    int events_ok;
    CUcontext ctx;
    CUevent ev_grant, ev_end;
};

static struct token tokens[GEM_MAX_DEVICES];
static pthread_once_t tokens_once = PTHREAD_ONCE_INIT;

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

static void tokens_init(void)
{
    for (int i = 0; i < GEM_MAX_DEVICES; i++)
        token_init(&tokens[i]);
}

void gem_token_reset_after_fork(void)
{
    /* The child has none of the parent's threads, and CUDA state does not survive fork. */
    pthread_once(&tokens_once, tokens_init);
    tokens_init();
}

static void timespec_at(struct timespec *ts, int64_t at_ns)
{
    ts->tv_sec = at_ns / 1000000000;
    ts->tv_nsec = at_ns % 1000000000;
}

/* Mark the end of a burst (a host sync point, or the tracker's forced sync).  t->m held. */
static void burst_stopped(struct token *t, int64_t now)
{
    gem_predictor_record_stop(&t->burst, now);
    gem_predictor_record_start(&t->window, now);
    atomic_store_explicit(&t->burst_running, 0, memory_order_relaxed);
}

/* GPU time from the grant to now, minus the quota; 0 when it cannot be measured. */
static double measure_overuse(struct token *t, CUcontext ctx, double quota_ms)
{
    __typeof__(&cuCtxSetCurrent) set_ctx = REAL_AUX(cuCtxSetCurrent);
    __typeof__(&cuEventRecord) record = REAL_AUX(cuEventRecord);
    __typeof__(&cuEventElapsedTime) elapsed = REAL_AUX(cuEventElapsedTime_v2);
    if (elapsed == NULL)
        elapsed = REAL_AUX(cuEventElapsedTime);
    if (set_ctx == NULL || record == NULL || elapsed == NULL)
        return 0.0;
    float ms = 0.0f;
    if (set_ctx(ctx) != CUDA_SUCCESS || record(t->ev_end, NULL) != CUDA_SUCCESS)
        return 0.0;
    /* the real cuEventSynchronize, not our wrapper: this is not an application sync */
    if (REAL(cuEventSynchronize)(t->ev_end) != CUDA_SUCCESS)
        return 0.0;
    if (elapsed(&ms, t->ev_grant, t->ev_end) != CUDA_SUCCESS)
        return 0.0;
    return ms > quota_ms ? (double)ms - quota_ms : 0.0;
}

static void *tracker_main(void *arg)
{
    struct token *t = arg;
    pthread_mutex_lock(&t->m);
    for (;;) {
        while (t->track != TRACK_ARMED)
            pthread_cond_wait(&t->cv, &t->m);
        for (;;) {
            int64_t at = atomic_load(&t->expires_at_ns);
            if (t->track_now || gem_now_ns() >= at)
                break;
            struct timespec ts;
            timespec_at(&ts, at);
            pthread_cond_timedwait(&t->cv, &t->m, &ts);
        }
        t->track = TRACK_MEASURING;
        int events_ok = t->events_ok;
        CUcontext ctx = t->ctx;
        double quota_ms = t->quota_ms;
        pthread_mutex_unlock(&t->m);
        double overuse = events_ok ? measure_overuse(t, ctx, quota_ms) : 0.0;
        if (events_ok) /* the token ended (expired, or returned early to ask for the next) */
            gem_um_on_expiry((int)(t - tokens), ctx); /* evict-on-release; else nothing */
        pthread_mutex_lock(&t->m);
        t->overuse_ms = overuse;
        burst_stopped(t, gem_now_ns());
        t->track = TRACK_IDLE;
        t->track_now = 0;
        if (overuse > 0.0)
            GEM_LOG(GEM_LOG_DEBUG, "token overused by %.3f ms", overuse);
        pthread_cond_broadcast(&t->cv);
    }
    return NULL;
}

/* Record the grant event in the launching thread (it has the application's context). */
static void record_grant(struct token *t)
{
    __typeof__(&cuCtxGetCurrent) get_ctx = REAL_AUX(cuCtxGetCurrent);
    __typeof__(&cuEventCreate) create = REAL_AUX(cuEventCreate);
    __typeof__(&cuEventRecord) record = REAL_AUX(cuEventRecord);
    if (get_ctx == NULL || create == NULL || record == NULL)
        return;
    CUcontext ctx = NULL;
    if (get_ctx(&ctx) != CUDA_SUCCESS || ctx == NULL)
        return;
    if (!t->events_ok || t->ctx != ctx) {
        if (create(&t->ev_grant, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
            create(&t->ev_end, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
            t->events_ok = 0;
            return;
        }
        t->ctx = ctx;
        t->events_ok = 1;
    }
    if (record(t->ev_grant, NULL) != CUDA_SUCCESS)
        t->events_ok = 0;
}

/* Get the next token.  t->m held on entry and exit; dropped around the request. */
static void fetch(struct token *t, int dev, int64_t now)
{
    t->fetching = 1;
    if (t->track == TRACK_ARMED || t->track == TRACK_MEASURING) {
        t->track_now = 1; /* measure the old token's overuse now, then ask */
        pthread_cond_broadcast(&t->cv);
        while (t->track != TRACK_IDLE)
            pthread_cond_wait(&t->cv, &t->m);
        now = gem_now_ns();
    }
    int64_t burst_ns = gem_predictor_estimate_full_burst(
        gem_predictor_predict_merged(&t->burst, now), gem_predictor_predict_merged(&t->window, now),
        GEM_PRED_MERGE_NS);
    gem_predictor_interrupt(&t->window); /* the gap the tracker just opened is not the app's */
    double overuse_ms = t->overuse_ms;
    pthread_mutex_unlock(&t->m);

    double quota_ms = 0.0;
    int64_t backoff = 10000000;
    for (;;) {
        gem_ipc_quota(dev, overuse_ms, (double)burst_ns / 1e6, &quota_ms);
        if (quota_ms > 0.0)
            break;
        GEM_LOG(GEM_LOG_DEBUG, "pod manager answered %.3f ms left; asking again", quota_ms);
        gem_sleep_ns(backoff);
        backoff = backoff * 2 > 200000000 ? 200000000 : backoff * 2;
    }
    int64_t granted = gem_now_ns();
    pthread_mutex_lock(&t->m);
    record_grant(t);
    t->overuse_ms = 0.0;
    t->quota_ms = quota_ms;
    t->generation++;
    atomic_store_explicit(&t->expires_at_ns, granted + (int64_t)(quota_ms * 1e6),
                          memory_order_release);
    t->track = TRACK_ARMED;
    t->track_now = 0;
    if (!t->tracker_started) {
        if (pthread_create(&t->tracker, NULL, tracker_main, t) == 0) {
            pthread_detach(t->tracker);
            t->tracker_started = 1;
        } else {
            t->track = TRACK_IDLE; /* no overuse measurement, tokens still work */
        }
    }
    t->fetching = 0;
    GEM_LOG(GEM_LOG_DEBUG, "token: %.3f ms (asked for a %.3f ms burst, reported %.3f ms overuse)",
            quota_ms, (double)burst_ns / 1e6, overuse_ms);
    pthread_cond_broadcast(&t->cv);
}

/* 1 if this call fetched the token. */
static int acquire_slow(struct token *t, int dev)
{
    int fetched = 0;
    pthread_mutex_lock(&t->m);
    uint64_t seen = t->generation;
    for (;;) {
        int64_t now = gem_now_ns();
        int64_t at = atomic_load_explicit(&t->expires_at_ns, memory_order_relaxed);
        int running = atomic_load_explicit(&t->burst_running, memory_order_relaxed);
        int need;
        if (at == 0 || now >= at)
            need = 1;
        else if (!running && t->generation == seen) /* v1: does the next burst fit? */
            need = now + gem_predictor_predict_unmerged(&t->burst, now) >= at;
        else
            need = 0; /* a grant arrived while we waited: take it */
        if (!need)
            break;
        if (t->fetching) {
            pthread_cond_wait(&t->cv, &t->m);
            continue;
        }
        fetch(t, dev, now);
        fetched = 1;
        break;
    }
    int64_t now = gem_now_ns();
    gem_predictor_record_stop(&t->window, now);
    if (!atomic_load_explicit(&t->burst_running, memory_order_relaxed)) {
        gem_predictor_record_start(&t->burst, now);
        atomic_store_explicit(&t->burst_running, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&t->m);
    return fetched;
}

int gem_token_acquire(int dev)
{
    if (dev < 0)
        return 0;
    pthread_once(&tokens_once, tokens_init);
    struct token *t = &tokens[dev];
    if (atomic_load_explicit(&t->burst_running, memory_order_relaxed) &&
        gem_now_ns() < atomic_load_explicit(&t->expires_at_ns, memory_order_acquire))
        return 0;
    return acquire_slow(t, dev);
}

void gem_token_note_sync(int dev)
{
    if (dev < 0)
        return;
    pthread_once(&tokens_once, tokens_init);
    struct token *t = &tokens[dev];
    if (!atomic_load_explicit(&t->burst_running, memory_order_relaxed))
        return;
    pthread_mutex_lock(&t->m);
    burst_stopped(t, gem_now_ns());
    pthread_mutex_unlock(&t->m);
}
