/* The hook's token per device, shared by the token files (token.c says the rules):
 *   token.c          the state, the launch gate (gem_token_acquire: the hot path, the queue
 *                    bound, the tail's ask, credit alone) and what a host sync tells it
 *   token_fetch.c    asking the pod manager for the next token: the launching thread, or the
 *                    renewer thread in the tail, so that the launches go on meanwhile
 *   token_tracker.c  the tracker thread: each ended token's overuse, from the markers
 * internal.h declares what the rest of the hook calls (gem_token_*); this header is for these
 * files alone. */
#ifndef GEMINI_HOOK_TOKEN_H
#define GEMINI_HOOK_TOKEN_H

#include "internal.h"
#include "gemini/predictor.h"
#include "gemini/roundtrip.h"
#include "gemini/share.h"

/* A token of the latest few: when it came, and the overuse charged for it so far.  The
 * tracker bounds a token's overuse by when the next one came, and the tracker and a sync both
 * charge an ended token's overuse (the longer of the two counts). */
#define RECENT_TOKENS 4
struct recent_token {
    uint64_t generation;
    int64_t granted_ns;
    int64_t charged_ns;
};

struct token {
    _Atomic int64_t expires_at_ns; /* 0: no token */
    _Atomic int64_t go_until_ns;   /* the hot path goes before this (or go_until_ticks) ... */
    _Atomic uint64_t go_until_ticks; /* (ticks.h; 0: not known, go_until_ns is read) */
    struct gem_share go_share;     /* ... and within its thread's part of these launches */
    struct gem_share graph_share;  /* ... of these graph launches */
    _Atomic int burst_running;
    _Atomic int burst_spans;  /* the program's running burst went on past a token's end */
    int long_bursts;          /* its latest burst did (v1's early request then does not help) */
    pthread_mutex_t m;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    struct gem_predictor burst, window;
    /* The bursts of the last GEM_PRED_KEEP_NS that fitted in their token (ended by a sync with
     * no token's end inside): what v1's early request goes by (token.c). */
    struct gem_record_keeper fitted;
    int fetching;
    uint64_t generation; /* grants so far */
    double max_quota_ms; /* the longest grant so far: bursts are reported no longer */
    double overuse_ms;   /* measured since the last request, reported with the next one */
    /* How long the launching threads waited on the GPU (held for a full queue, or in a sync)
     * since the last request, reported with the next one: the scheduler charges a capped
     * client the GPU's clock speed-up only as far as the GPU, not its launching threads, set
     * its pace (gemini/core/speed.py). */
    _Atomic int64_t gpu_wait_ns;
    uint64_t ended_generation; /* the last token whose end went to the tracker */
    int end_pending;           /* an end for the tracker to measure */
    int64_t end_ns;            /* when that token ended */
    uint64_t end_seq;          /* the markers recorded by then (gem_inflight_seq) */
    uint64_t end_generation;   /* the ended token */
    struct recent_token recent[RECENT_TOKENS]; /* the latest tokens, by generation */
    int measuring;
    int tracker_started;
    uint64_t looks; /* looks set so far (acquire_slow) */
    uint64_t measured_alone; /* the token whose first launch was measured alone (acquire_slow) */
    struct gem_look go_look; /* the latest look that let a launch go (debug log only) */
    int renew_wanted;     /* the renewer is to ask for the next token ... */
    int64_t renew_asked_ns; /* ... as of this time */
    int renewing;           /* its request is out */
    int renewer_started;
    int alone;              /* the latest grant carried QUOTA_FLAG_ALONE */
    int64_t early_ns;       /* then: how much sooner than the tail to ask (ask_at) */
    struct gem_roundtrip roundtrip; /* of the renewals the scheduler answered at once */
    int calibration;         /* the latest grant carried QUOTA_FLAG_CALIBRATION */
    double sent_at;          /* when the pod manager sent it, on its clock (0: not said) */
    /* The latest cut (a lowered cap: gem_token_on_cut): when the pod manager sent it, and
     * when the token it cut ends, on our clock.  A token sent no later ends then too. */
    double cut_sent_at;
    int64_t cut_end_ns;
    int64_t credit_from_ns; /* launching on credit since then (0: not) */
    CUcontext ctx;
};

/* ---- shared by the token files (t->m held where they take a t, unless said) --------------- */
/* token.c */
extern struct token tokens[GEM_MAX_DEVICES]; /* by device */
extern int64_t tail_ns;            /* GEMINI_HOOK_TAIL_US */
extern int64_t alone_early_ns;     /* GEMINI_HOOK_ALONE_EARLY_US */
extern int64_t alone_early_max_ns; /* GEMINI_HOOK_ALONE_EARLY_MAX_US */
void burst_stopped(struct token *t, int64_t now);
/* The hot path stops: every launch looks again (a new token, or the old one handed back). */
static inline void stop_hot_path(struct token *t)
{
    atomic_store_explicit(&t->go_until_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&t->go_until_ticks, 0, memory_order_relaxed);
}
/* token_fetch.c */
void fetch(struct token *t, int dev, int64_t now, int blocking);
int renew_in_background(struct token *t, int64_t now);
/* token_tracker.c */
/* Token `generation`'s slot, or NULL when a later token took it over. */
struct recent_token *recent_of(struct token *t, uint64_t generation);
void post_end(struct token *t, int64_t end_ns);
int wait_for_tracker(struct token *t, int64_t most_ns);
double charge_end(struct token *t, uint64_t generation, int64_t end_ns, int64_t until);
void start_tracker(struct token *t);

#endif
