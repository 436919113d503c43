/* Burst / window predictor of Gemini v1 (spec §6.7), pure: explicit state, explicit now_ns.
 *
 * A predictor times periods: record_start() opens one (no-op if one is open), record_stop()
 * closes it.  The hook runs two: "burst" (first launch after a sync -> the next sync) and
 * "window" (sync -> the next launch).  Periods separated by at most merge_ns are joined into one
 * "merged" period.  The prediction is the maximum over the merged periods that ended in the
 * last GEM_PRED_KEEP_NS (a sliding-window maximum kept as a monotonic queue).  v1 also kept
 * each period unmerged, for its early request; the hook's early request goes by the bursts
 * that fitted in their token instead (hook/token.c), so that record is not kept.
 *
 * Also fed to cffi's cdef: declarations and integer #defines only. */
#ifndef GEMINI_PREDICTOR_H
#define GEMINI_PREDICTOR_H

#include <stdint.h>

#define GEM_PRED_KEEP_NS 3000000000
#define GEM_PRED_MERGE_NS 2000000
#define GEM_PRED_NONE -1
#define GEM_PRED_CAPACITY 64

struct gem_record {
    int64_t at_ns;
    int64_t value_ns;
};

/* Values strictly decrease from the oldest (head) to the newest record.  When full, the newest
 * record absorbs the new one (keeps the larger value, takes the newer time): the error is an
 * over-estimate that lasts at most GEM_PRED_KEEP_NS. */
struct gem_record_keeper {
    struct gem_record rec[64];
    int32_t head;
    int32_t count;
};

struct gem_predictor {
    int64_t merge_ns;
    int64_t period_begin_ns; /* GEM_PRED_NONE when no period is open */
    int64_t merged_begin_ns;
    int64_t merged_end_ns;
    struct gem_record_keeper merged;
};

void gem_predictor_init(struct gem_predictor *p, int64_t merge_ns);
void gem_predictor_record_start(struct gem_predictor *p, int64_t now_ns);
void gem_predictor_record_stop(struct gem_predictor *p, int64_t now_ns);
void gem_predictor_interrupt(struct gem_predictor *p);
/* The open period (and its merged one) spent ns not running: waiting for a token.  A burst is
 * the GPU time a program needs between syncs; a wait for the token inside it is not. */
void gem_predictor_exclude(struct gem_predictor *p, int64_t ns);
int gem_predictor_running(const struct gem_predictor *p);
/* How long the open period has run, waits excluded (0: none open). */
int64_t gem_predictor_open_for(const struct gem_predictor *p, int64_t now_ns);
int64_t gem_predictor_predict_merged(struct gem_predictor *p, int64_t now_ns);
/* The next burst to ask the scheduler for: 0 if none seen; doubled when the window is shorter
 * than overhead_ns (the application keeps the GPU busy, the burst we saw may be cut short). */
int64_t gem_predictor_estimate_full_burst(int64_t burst_ns, int64_t window_ns,
                                          int64_t overhead_ns);

void gem_record_keeper_add(struct gem_record_keeper *k, int64_t value_ns, int64_t now_ns);
int64_t gem_record_keeper_max(struct gem_record_keeper *k, int64_t now_ns);

#endif
