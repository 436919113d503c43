/* The tracker thread per device (token.h): when a token ends (expiry, or a launch asking for the
 * next one) it waits for the newest marker of every stream as of the end, and charges what ran
 * past it as the token's overuse, reported with a later request (token.c's rules say why). */
#include "token.h"

#include <errno.h>

/* A token's end past which its queue ran this long (more than the tail and half a launch the
 * gate leaves) has the gate's latest estimate written beside it in the debug log: where an
 * estimate fell short (H200, caps of 0.6-0.8: 2-3 ms in about 2.5 % of tokens, 2026-12-02:
 * the card's clock stepping down under a queue to the end: token.c's CLOCK_SWING). */
#define LOOK_LOG_OVERUSE_MS 1.5

/* Wait, t->m held, until the tracker has measured (and, with evict-on-release, evicted) every
 * token end posted so far, at most `most_ns`: 0 when it has, -1 when it has not.  (Its queue may
 * wait on a later launch of ours, a stream waiting on a value or an event that launch sets:
 * waited for without end, that launch never went.) */
int wait_for_tracker(struct token *t, int64_t most_ns)
{
    struct timespec ts;
    gem_timespec_at(&ts, gem_now_ns() + most_ns);
    while (t->end_pending || t->measuring)
        if (pthread_cond_timedwait(&t->cv, &t->m, &ts) == ETIMEDOUT)
            return t->end_pending || t->measuring ? -1 : 0;
    return 0;
}

/* Token `generation`'s slot, or NULL when a later token took it over. */
struct recent_token *recent_of(struct token *t, uint64_t generation)
{
    struct recent_token *r = &t->recent[generation % RECENT_TOKENS];
    return r->generation == generation ? r : NULL;
}

/* Hand the current token's end to the tracker (once per token).  t->m held. */
void post_end(struct token *t, int64_t end_ns)
{
    if (t->generation == 0 || t->ended_generation == t->generation || !t->tracker_started)
        return; /* (without a tracker, nothing would take it, and an eviction waited forever) */
    t->ended_generation = t->generation;
    t->end_pending = 1;
    t->end_ns = end_ns;
    t->end_seq = gem_inflight_seq((int)(t - tokens));
    t->end_generation = t->generation;
    pthread_cond_broadcast(&t->cv);
}

/* The ended token `generation` (ended at `end_ns`) had work of ours running until `until`:
 * charge what of that is not charged yet.  Both the tracker (from the markers) and a sync
 * (token.c's sync_seen) tell it; the longer counts.  t->m held. */
double charge_end(struct token *t, uint64_t generation, int64_t end_ns, int64_t until)
{
    struct recent_token *r = recent_of(t, generation);
    if (r == NULL) /* RECENT_TOKENS came since: too old to tell what is charged already */
        return 0.0;
    int64_t more = until - end_ns - r->charged_ns;
    if (more <= 0)
        return 0.0;
    r->charged_ns += more;
    t->overuse_ms += (double)more / 1e6;
    return (double)more / 1e6;
}

static void *tracker_main(void *arg)
{
    struct token *t = arg;
    int dev = (int)(t - tokens);
    pthread_mutex_lock(&t->m);
    for (;;) {
        int expired = 0;
        while (!t->end_pending) {
            int64_t at = atomic_load(&t->expires_at_ns);
            if (t->ended_generation == t->generation || at == 0) {
                pthread_cond_wait(&t->cv, &t->m);
            } else if (gem_now_ns() >= at) {
                post_end(t, at);
                expired = 1;
            } else {
                struct timespec ts;
                gem_timespec_at(&ts, at);
                pthread_cond_timedwait(&t->cv, &t->m, &ts);
            }
        }
        t->end_pending = 0;
        t->measuring = 1;
        int64_t end_ns = t->end_ns;
        uint64_t end_seq = t->end_seq, end_generation = t->end_generation;
        CUcontext ctx = t->ctx;
        struct gem_look look = t->go_look; /* the latest that let a launch go before the end */
        pthread_mutex_unlock(&t->m);
        int64_t done = gem_inflight_wait_all(dev, end_seq);
        pthread_mutex_lock(&t->m);
        /* Our next token came while the queue ran (fetch waited no longer: wait_for_tracker):
         * the GPU is ours again, and evicting now would only fault the data back. */
        int ours_again = t->generation > end_generation;
        pthread_mutex_unlock(&t->m);
        if (!ours_again)
            gem_um_on_expiry(dev, ctx); /* evict-on-release; else nothing */
        pthread_mutex_lock(&t->m);
        double overuse = done > end_ns ? (double)(done - end_ns) / 1e6 : 0.0;
        /* What ran once our next token had come is that token's time, already counted: only
         * the rest ran on no token of ours, and that is what the scheduler is told. */
        int64_t covered = done;
        if (t->generation > end_generation) { /* our next token came meanwhile: when */
            struct recent_token *next = recent_of(t, end_generation + 1);
            if (next != NULL && next->granted_ns < covered)
                covered = next->granted_ns;
        }
        double charged = charge_end(t, end_generation, end_ns, covered);
        t->measuring = 0;
        if (expired && atomic_load_explicit(&t->burst_running, memory_order_relaxed)) {
            burst_stopped(t, gem_now_ns());
            atomic_store_explicit(&t->burst_spans, 1, memory_order_relaxed);
        }
        if (done < 0)
            GEM_LOG(GEM_LOG_DEBUG, "token end: overuse not measured (event wait failed)");
        else if (done < end_ns) /* (the GPU idled on our time: too early, or nothing to run) */
            GEM_LOG(GEM_LOG_DEBUG, "token end: overuse 0.000 ms (our work ran out %.3f ms "
                    "before it)", (double)(end_ns - done) / 1e6);
        else
            GEM_LOG(GEM_LOG_DEBUG, "token end: overuse %.3f ms (%.3f ms charged: what ran "
                    "before our next token, less what a sync charged)", overuse, charged);
        if (overuse > LOOK_LOG_OVERUSE_MS && look.at_ns != 0) {
            char said[192];
            gem_look_describe(&look, said, sizeof(said));
            GEM_LOG(GEM_LOG_DEBUG, "... the gate's latest look that let a launch go, %.3f ms "
                    "before the end: %s", (double)(end_ns - look.at_ns) / 1e6, said);
        }
        pthread_cond_broadcast(&t->cv);
    }
    return NULL;
}

void start_tracker(struct token *t)
{
    if (t->tracker_started)
        return;
    if (gem_thread_start(tracker_main, t) == 0)
        t->tracker_started = 1;
    /* else: no overuse measurement, tokens still work (and post_end posts nothing) */
}
