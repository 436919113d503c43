/* Burst / window predictor; see predictor.h.  Pure: no globals, no clock. */
#include "gemini/predictor.h"

#include <string.h>

static struct gem_record *at(struct gem_record_keeper *k, int32_t i)
{
    return &k->rec[(k->head + i) % GEM_PRED_CAPACITY];
}

static void drop_outdated(struct gem_record_keeper *k, int64_t now_ns)
{
    while (k->count > 0 && now_ns - at(k, 0)->at_ns > GEM_PRED_KEEP_NS) {
        k->head = (k->head + 1) % GEM_PRED_CAPACITY;
        k->count--;
    }
}

void gem_record_keeper_add(struct gem_record_keeper *k, int64_t value_ns, int64_t now_ns)
{
    drop_outdated(k, now_ns);
    while (k->count > 0 && at(k, k->count - 1)->value_ns <= value_ns)
        k->count--;
    if (k->count == GEM_PRED_CAPACITY) {
        at(k, k->count - 1)->at_ns = now_ns; /* absorb: larger value, newer time */
        return;
    }
    *at(k, k->count) = (struct gem_record){.at_ns = now_ns, .value_ns = value_ns};
    k->count++;
}

int64_t gem_record_keeper_max(struct gem_record_keeper *k, int64_t now_ns)
{
    drop_outdated(k, now_ns);
    return k->count > 0 ? at(k, 0)->value_ns : 0;
}

void gem_predictor_init(struct gem_predictor *p, int64_t merge_ns)
{
    memset(p, 0, sizeof(*p));
    p->merge_ns = merge_ns;
    gem_predictor_interrupt(p);
}

void gem_predictor_interrupt(struct gem_predictor *p)
{
    p->period_begin_ns = GEM_PRED_NONE;
    p->merged_begin_ns = GEM_PRED_NONE;
    p->merged_end_ns = GEM_PRED_NONE;
}

void gem_predictor_exclude(struct gem_predictor *p, int64_t ns)
{
    if (!gem_predictor_running(p) || ns <= 0)
        return;
    p->period_begin_ns += ns;
    if (p->merged_begin_ns != GEM_PRED_NONE)
        p->merged_begin_ns += ns;
}

int gem_predictor_running(const struct gem_predictor *p)
{
    return p->period_begin_ns != GEM_PRED_NONE;
}

int64_t gem_predictor_open_for(const struct gem_predictor *p, int64_t now_ns)
{
    return gem_predictor_running(p) && now_ns > p->period_begin_ns ? now_ns - p->period_begin_ns
                                                                   : 0;
}

void gem_predictor_record_start(struct gem_predictor *p, int64_t now_ns)
{
    if (gem_predictor_running(p))
        return;
    p->period_begin_ns = now_ns;
    if (p->merged_begin_ns == GEM_PRED_NONE || p->merged_end_ns == GEM_PRED_NONE ||
        now_ns - p->merged_end_ns > p->merge_ns) {
        p->merged_begin_ns = now_ns;
        p->merged_end_ns = GEM_PRED_NONE;
    }
}

void gem_predictor_record_stop(struct gem_predictor *p, int64_t now_ns)
{
    if (!gem_predictor_running(p))
        return;
    int64_t merged = now_ns - p->merged_begin_ns;
    gem_record_keeper_add(&p->merged, merged < 0 ? 0 : merged, now_ns);
    p->merged_end_ns = now_ns;
    p->period_begin_ns = GEM_PRED_NONE;
}

int64_t gem_predictor_predict_merged(struct gem_predictor *p, int64_t now_ns)
{
    return gem_record_keeper_max(&p->merged, now_ns);
}

int64_t gem_predictor_estimate_full_burst(int64_t burst_ns, int64_t window_ns,
                                          int64_t overhead_ns)
{
    if (burst_ns <= 0)
        return 0;
    return window_ns < overhead_ns ? 2 * burst_ns : burst_ns;
}
