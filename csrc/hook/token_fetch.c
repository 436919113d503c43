/* Asking for the next token (token.h): the request to the pod manager, with what the ended
 * token's launches measured and the burst predicted, and the grant's bookkeeping; from the
 * launching thread, or from the renewer thread in the token's tail. */
#include "token.h"
#include "gemini/wire.h"

#include <stdio.h>

/* The longest token taken as one: a scheduler's grant is at most its window (10 s by default).
 * A longer one, infinite or not a number is a peer's garbage, and its nanoseconds would not
 * fit an int64_t (the token would read as expired at once, and be asked for again, unpaced). */
#define QUOTA_MAX_MS 3600000.0

/* With evict-on-release, how long the next token's request waits for the ended one's queue to
 * run and its data to go back to the host (wait_for_tracker); a queue that runs longer is left
 * running, its data where it is. */
#define EVICT_WAIT_MAX_NS 2000000000LL
static atomic_int evict_wait_said;

/* Asks for the next token in the current one's tail, so that the launching thread goes on
 * meanwhile: when no one else waits the renewed token is there before the old one ends, and
 * the program never stops for the round trip (issue 12: cheap renewal). */
static void *renewer_main(void *arg)
{
    struct token *t = arg;
    int dev = (int)(t - tokens);
    pthread_mutex_lock(&t->m);
    for (;;) {
        while (!t->renew_wanted)
            pthread_cond_wait(&t->cv, &t->m);
        t->renew_wanted = 0;
        fetch(t, dev, t->renew_asked_ns, 0);
    }
    return NULL;
}

/* Have the renewer ask now; 0 if it cannot (no thread): the caller asks itself.  t->m held. */
int renew_in_background(struct token *t, int64_t now)
{
    if (!t->renewer_started) {
        if (gem_thread_start(renewer_main, t) != 0)
            return 0;
        t->renewer_started = 1;
    }
    t->fetching = 1; /* from now: a launch that needs the token waits for this request */
    t->renewing = 1;
    t->renew_wanted = 1;
    t->renew_asked_ns = now;
    pthread_cond_broadcast(&t->cv);
    return 1;
}

static CUcontext current_ctx(void)
{
    __typeof__(&cuCtxGetCurrent) get_ctx = REAL_AUX(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    if (get_ctx == NULL || get_ctx(&ctx) != CUDA_SUCCESS)
        return NULL;
    return ctx;
}

/* Alone, the scheduler renews at once, and the queue left at the ask is all that keeps the GPU
 * busy over the round trip: with a tail's worth, the GPU idled for whatever of the round trip
 * outlasted the tail (H100: 0.8 ms p50, 2.3 ms p99 idle), and JAX alone under the hook did
 * 0.986 of its bare rate, 1.004 with the ask 1 ms sooner (2026-11-25).  So alone it asks
 * sooner by the round trip learnt from the grants that came at once (common/roundtrip.c), at
 * least alone_early_ns; at most alone_early_max_ns, and a quarter of the token (a short token
 * must not be asked for again as soon as it comes).  A neighbour that comes meanwhile finds
 * at most that much of ours queued, charged to us as overuse.  `rtt_ns`: from the ask to the
 * grant just come; `was_alone`: the token before it was alone too (else the request may have
 * waited for a neighbour's turn, and the first one for the pod manager to register the
 * client); `retried`: the pod manager said "not yet" first.  With other processes of the
 * client (`sharers`) or an eviction before the request, the grant may also wait for more
 * than the round trip.  t->m held, t->alone already the new grant's. */
static void learn_round_trip(struct token *t, int dev, int was_alone, int64_t rtt_ns,
                             double quota_ms, int retried, uint32_t sharers)
{
    if (t->alone && was_alone && !retried && sharers <= 1 && !gem_um_evicts(dev))
        gem_roundtrip_sample(&t->roundtrip, rtt_ns);
    int64_t most = (int64_t)(quota_ms * 1e6) / 4;
    if (most > alone_early_max_ns)
        most = alone_early_max_ns;
    t->early_ns = t->alone ? gem_roundtrip_early(&t->roundtrip, tail_ns, alone_early_ns, most) : 0;
}

/* Get the next token.  t->m held on entry and exit; dropped around the request.  `blocking`:
 * the launching thread waits for it (else the renewer asks while the launches go on). */
void fetch(struct token *t, int dev, int64_t now, int blocking)
{
    const int64_t asked = now;
    t->fetching = 1;
    int64_t at = atomic_load(&t->expires_at_ns);
    const int64_t end_ns = at != 0 && at < now ? at : now; /* asking returns the current token */
    /* The renewer's launches go on until the answer: the tracker must wait for those too. */
    if (blocking)
        post_end(t, end_ns);
    if (gem_um_evicts(dev)) { /* the data must be back on the host before the next grant */
        if (wait_for_tracker(t, EVICT_WAIT_MAX_NS) != 0 && !atomic_exchange(&evict_wait_said, 1))
            GEM_LOG(GEM_LOG_WARN, "evict-on-release: our queued work still ran %.0f ms after "
                    "the token's end; asking for the next token without waiting for it (it "
                    "may wait on a launch of ours; said once)", EVICT_WAIT_MAX_NS / 1e6);
        now = gem_now_ns();
    }
    int64_t burst_ns = gem_predictor_estimate_full_burst(
        gem_predictor_predict_merged(&t->burst, now), gem_predictor_predict_merged(&t->window, now),
        GEM_PRED_MERGE_NS);
    if (t->max_quota_ms > 0.0 && (double)burst_ns > t->max_quota_ms * 1e6)
        burst_ns = (int64_t)(t->max_quota_ms * 1e6); /* a program that never syncs */
    if (blocking)
        gem_predictor_interrupt(&t->window); /* the gap of the request is not the app's */
    double overuse_ms = t->overuse_ms;
    t->overuse_ms = 0.0;
    double gpu_wait_ms =
        (double)atomic_exchange_explicit(&t->gpu_wait_ns, 0, memory_order_relaxed) / 1e6;
    pthread_mutex_unlock(&t->m);
    /* (Not under t->m: it may poll the markers, driver calls the launching threads need not
     * wait for; only this thread, the device's fetcher, moves the run windows.) */
    double run_ms = 0.0;
    uint64_t run_count = 0;
    int run_graphs = 0;
    gem_inflight_measured(dev, &run_ms, &run_count, &run_graphs);
    uint32_t run_launches = gem_wire_run_word(run_count, run_graphs);

    double quota_ms = 0.0, sent_at = 0.0;
    uint32_t flags = 0, sharers = 0;
    int64_t backoff = 10000000;
    int answered_at_once = 1; /* the first answer was a token (round trip: learn_round_trip) */
    GEM_LOG(GEM_LOG_DEBUG, "asking for a token (%s; ran %llu %s in %.3f ms)",
            blocking ? "the launch waits" : "renewer", (unsigned long long)run_count,
            run_graphs ? "graph launches" : "launches", run_ms);
    for (;;) {
        gem_ipc_quota(dev, overuse_ms, (double)burst_ns / 1e6, gpu_wait_ms, (float)run_ms,
                      run_launches, &quota_ms, &flags, &sharers, &sent_at);
        int garbage = !(quota_ms <= QUOTA_MAX_MS); /* (NaN compares false) */
        if (quota_ms > 0.0 && !garbage)
            break;
        if (garbage && answered_at_once)
            GEM_LOG(GEM_LOG_ERROR, "pod manager answered a token of %g ms, which no scheduler "
                    "grants: asking again", quota_ms);
        else
            GEM_LOG(GEM_LOG_DEBUG, "pod manager answered %.3f ms left; asking again", quota_ms);
        answered_at_once = 0;
        gem_sleep_ns(backoff);
        backoff = backoff * 2 > 200000000 ? 200000000 : backoff * 2;
    }
    int64_t granted = gem_now_ns();
    CUcontext ctx = current_ctx();
    pthread_mutex_lock(&t->m);
    if (!blocking)
        post_end(t, end_ns); /* (a no-op if the token expired meanwhile: it ended then) */
    if (ctx != NULL)
        t->ctx = ctx;
    if (quota_ms > t->max_quota_ms)
        t->max_quota_ms = quota_ms;
    /* A burst that waited for this token is no longer for it: else under a cap every burst
     * that met the token's end reads as long as the wait, does not fit the next token, and
     * hands it back.  The launches stopped when the asking thread asked, or, while the renewer
     * asked, when the old token ran out.  Once, whatever the number of threads that waited. */
    if (atomic_load_explicit(&t->burst_running, memory_order_relaxed)) /* goes on in this one */
        atomic_store_explicit(&t->burst_spans, 1, memory_order_relaxed);
    int64_t stopped = blocking || at < asked ? asked : at;
    if (granted > stopped)
        gem_predictor_exclude(&t->burst, granted - stopped);
    t->generation++;
    t->recent[t->generation % RECENT_TOKENS] =
        (struct recent_token){.generation = t->generation, .granted_ns = granted};
    int was_alone = t->alone;
    t->alone = (flags & GEM_QUOTA_FLAG_ALONE) != 0;
    learn_round_trip(t, dev, was_alone, granted - asked, quota_ms, !answered_at_once, sharers);
    gem_inflight_set_sharers(dev, sharers);
    /* A reply that came late: the scheduler handed the GPU on without waiting for it. */
    int64_t quota_ns = (int64_t)(quota_ms * 1e6);
    int64_t hop = gem_roundtrip_hop_ns(granted, sent_at);
    int64_t expires = granted + quota_ns - gem_roundtrip_late_ns(hop, quota_ns);
    int64_t gone = granted + quota_ns - expires; /* (for the log) */
    if (sent_at > 0.0 && sent_at <= t->cut_sent_at && t->cut_end_ns < expires) {
        expires = t->cut_end_ns; /* sent before a cut that came first (gem_token_on_cut) */
        t->alone = 0;
        t->early_ns = 0;
    }
    t->sent_at = sent_at;
    if (t->credit_from_ns != 0) { /* what ran on credit comes off this token */
        int64_t credit = granted - t->credit_from_ns;
        expires -= credit < tail_ns ? credit : tail_ns;
        t->credit_from_ns = 0;
    }
    /* The request after next says how fast the GPU ran what it ran in this token (in a
     * calibration's last GEM_RUN_MEASURE_MS only: by then the clock has settled; wire.h). */
    t->calibration = (flags & GEM_QUOTA_FLAG_CALIBRATION) != 0;
    int64_t measure_from = expires - (int64_t)GEM_RUN_MEASURE_MS * 1000000;
    if (!t->calibration || measure_from < granted)
        measure_from = granted;
    gem_inflight_measure_from(dev, measure_from, granted);
    stop_hot_path(t);
    atomic_store_explicit(&t->expires_at_ns, expires, memory_order_release);
    start_tracker(t);
    t->fetching = 0;
    t->renewing = 0;
    char alone_note[64] = "", late_note[80] = "";
    if (t->alone && GEM_LOG_DEBUG <= gem_log_level) /* (formatted only for the debug line) */
        snprintf(alone_note, sizeof alone_note,
                 "; alone: the next asked for %.3f ms before the tail", (double)t->early_ns / 1e6);
    if (gone != 0 && GEM_LOG_DEBUG <= gem_log_level)
        snprintf(late_note, sizeof late_note, "; came %.3f ms after it was sent: %.3f ms of it gone",
                 (double)hop / 1e6, (double)gone / 1e6);
    GEM_LOG(GEM_LOG_DEBUG, "token: %.3f ms (asked for a %.3f ms burst, reported %.3f ms overuse; "
            "%u process(es) share it%s%s)", quota_ms, (double)burst_ns / 1e6, overuse_ms,
            sharers > 1 ? sharers : 1, alone_note, late_note);
    pthread_cond_broadcast(&t->cv);
}

/* The pod manager cut the token it handed us (its client's cap was lowered: the scheduler cut
 * the grant, wire.h GEM_CUT_ID): it ends `quota_ms` after the message was sent, less a late
 * message's delay, as a grant does.  Launches stop there as at any token's end (the hot path
 * looks again, a held launch wakes), and what the queue runs past it is overuse.  A cut is
 * for the token handed before it was sent: one that a token sent later overtook (the watcher
 * runs it after the launching thread took that token) is not applied to it, and one that
 * overtook the token it cuts (the launching thread had not taken it yet) is applied when it is
 * (fetch).  On the connection's watcher thread. */
void gem_token_on_cut(int dev, const uint8_t *msg)
{
    if (dev < 0 || dev >= GEM_MAX_DEVICES)
        return;
    struct token *t = &tokens[dev];
    double left_ms = gem_wire_rsp_quota_ms(msg), sent_at = gem_wire_rsp_quota_sent_at(msg);
    if (!(left_ms >= 0.0 && left_ms <= QUOTA_MAX_MS) || !(sent_at > 0.0)) {
        GEM_LOG(GEM_LOG_WARN, "pod manager cut our token to %g ms (sent at %g): ignored",
                left_ms, sent_at);
        return;
    }
    int64_t now = gem_now_ns();
    int64_t left_ns = (int64_t)(left_ms * 1e6);
    int64_t end = now + left_ns - gem_roundtrip_late_ns(gem_roundtrip_hop_ns(now, sent_at), left_ns);
    pthread_mutex_lock(&t->m);
    t->cut_sent_at = sent_at;
    t->cut_end_ns = end;
    int64_t at = atomic_load(&t->expires_at_ns);
    int applies = at > end && t->sent_at <= sent_at;
    if (applies) {
        t->alone = 0; /* (capped now: no credit past the end, no early ask) */
        t->early_ns = 0;
        t->looks++; /* (a look read before the cut is not set after it: acquire_slow) */
        stop_hot_path(t);
        atomic_store_explicit(&t->expires_at_ns, end, memory_order_release);
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->m);
    GEM_LOG(GEM_LOG_INFO, "token cut by the pod manager (a lowered cap): %.3f ms left%s", left_ms,
            applies ? "" : "; it had ended, or a later one came");
}
