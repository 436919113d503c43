/* What a token's launches took of the GPU (inflight.h), for the scheduler's measure of its
 * speed: the segments that began to run in its run window, their GPU time over their launches,
 * or, where several lanes launch, their union on the GPU's clock over each lane's own. */
#include "inflight.h"

#define UNION_LANES_MAX 4         /* a token's launches on more lanes: not measured */
_Static_assert(GEM_LANES <= 64, "a run window notes its lanes' slots in 64 bits (slots_seen)");

/* The run window of a segment that began to run at `start_ns` (NULL: none).  f->m held. */
struct run_window *run_window_of(struct inflight *f, int64_t start_ns)
{
    for (int i = 0; i < 2; i++) {
        struct run_window *w = &f->run[i];
        if (w->from_ns != 0 && start_ns >= w->from_ns && (w->to_ns == 0 || start_ns < w->to_ns))
            return w;
    }
    return NULL;
}

/* For the debug log: a segment from `prev` to `done`, `ms` long, left out of run window w after
 * a gap. */
void note_gap(struct run_window *w, const struct mark *prev, const struct mark *done,
                     float ms)
{
    w->gap_ns += (double)ms * 1e6;
    w->gap_launches += done->launches - prev->launches;
    w->gap_graphs += done->graphs - prev->graphs;
}

/* The segment of `prev`'s lane from `prev` to `done`, in run window w: its span on the GPU's
 * clock joins the window's union, its lane's own launches the window's count (gemini/spans.h).
 * A segment after a gap, or from a hold, (its lane's queue ran dry in it, or may have) joins
 * with the part its launches took at their costs, just before its end: left out, its launches
 * went uncounted while another lane's segments still covered their time (fake GPU, two
 * threads: 0.213-0.216 ms a launch of 0.2), and whole, a hold's span of one launch held 8.5
 * ms the GPU idled in.  A segment not placed on the window's chain (place_mark) leaves the
 * window without a union.  The lanes' slots are noted: a union of many says nothing
 * (gem_inflight_measured).  f->m held. */
void add_span(const struct inflight *f, struct run_window *w, const struct mark *prev,
                     const struct mark *done, int after_gap)
{
    if (w == NULL)
        return;
    if (done->slot < GEM_LANES)
        w->slots_seen |= 1ull << done->slot;
    else
        w->shared_seen = 1;
    if (w->several < 0)
        return;
    if (prev->epoch == 0 || prev->epoch != done->epoch || (w->epoch && w->epoch != done->epoch)) {
        w->several = -1;
        return;
    }
    if (w->epoch == 0) {
        w->epoch = done->epoch;
        w->lane = done->lane;
    } else if (done->lane != w->lane) {
        w->several = 1;
    }
    uint64_t n = done->lane_launches - prev->lane_launches;
    uint64_t graphs = done->lane_graphs - prev->lane_graphs;
    graphs = graphs < n ? graphs : n;
    double from = prev->at_ms;
    if (after_gap) {
        double busy = ((double)(n - graphs) * f->kernel.per + (double)graphs * f->graph.per) / 1e6;
        if (done->at_ms - busy > from)
            from = done->at_ms - busy;
    }
    gem_spans_add(&w->spans, from, done->at_ms);
    if (after_gap)
        w->placed_launches += n;
    w->own_launches += n;
    w->own_graphs += graphs;
}

void gem_inflight_measure_from(int dev, int64_t from_ns, int64_t now)
{
    struct inflight *f = flight(dev);
    pthread_mutex_lock(&f->m);
    f->run[1] = f->run[0];
    if (f->run[1].from_ns != 0)
        f->run[1].to_ns = now;
    f->run[0] = (struct run_window){.from_ns = from_ns};
    f->kernel.at_start = f->kernel.per;
    f->graph.at_start = f->graph.per;
    pthread_mutex_unlock(&f->m);
}

void gem_inflight_measured(int dev, double *gpu_ms, uint64_t *count, int *graphs)
{
    struct inflight *f = flight(dev);
    __typeof__(&cuCtxGetCurrent) get_ctx = REAL_AUX(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    pthread_mutex_lock(&f->m);
    /* What finished since the last look counts too: a program that asks after a sync has run
     * its queue, and nothing looked at the markers since (a thread of our context only). */
    if (get_ctx != NULL && get_ctx(&ctx) == CUDA_SUCCESS && ctx != NULL && ctx == f->ctx)
        poll_marks(f);
    const struct run_window *w = &f->run[1];
    /* A program whose graph replays carry most of its GPU time is counted in them from then
     * on.  Its other launches are light, and how many of them a window holds moves with where
     * the markers fall, not with the work: torch.compile's CUDA graphs (two replays and about
     * three light kernels a step) read 2.44-2.57 launches a graph in its ordinary grants and
     * 2.35-2.95 in its calibration tails, so a tail read 251-311 us a launch against 275 in
     * the grants, and its speed 0.94-1.02, while a replay took 731-769 us in the tails against
     * 690 (1.06-1.11) and the program did 1.09 of its bare work per granted second (H100,
     * 2026-11-26 02:28).  The GPU time is every segment's: a light kernel that goes unmarked
     * in a grant is inside a graph's segment, and marked in a tail it is a segment of its own. */
    if (!f->graph_unit && w->graphs > 0 && 2.0 * w->graph_ns >= w->ns)
        f->graph_unit = 1;
    /* Several lanes: their segments' union over their own launches (gemini/spans.h).  Not
     * of many lanes (UNION_LANES_MAX), or of lanes past GEM_LANES, which count their launches
     * in one slot together: a program that takes the next of many streams for each step has
     * each lane back only after the others' work, its segment then holding that work's time,
     * or launches of earlier tokens.  A program of 96 streams so read 125-160 us a launch of
     * 181 in its grants and its speed 1.37-1.39 for 1.15 (H200, 2026-12-04: its highest
     * second 0.476 capped at 0.4), and leaving the earlier tokens' launches out made its tails
     * read the cost back, its speed 1.0 (0.43 of its bare work).  The scheduler then reads its
     * speed by the clock. */
    int lanes = __builtin_popcountll(w->slots_seen) + w->shared_seen;
    int by_union = w->several > 0 && w->spans.n > 0;
    int unknown = w->shared_seen || lanes > UNION_LANES_MAX;
    double union_ms = by_union ? gem_spans_total(&w->spans) : 0.0;
    *gpu_ms = unknown ? 0.0 : by_union ? union_ms : w->ns / 1e6;
    if (unknown)
        *count = 0;
    else if (by_union)
        *count = f->graph_unit ? w->own_graphs : w->own_launches;
    else
        *count = f->graph_unit ? w->graphs : w->launches;
    *graphs = f->graph_unit;
    if (by_union || unknown)
        GEM_LOG(GEM_LOG_DEBUG, "measured over %d lanes%s: %.3f ms of their segments' union "
                "(%d spans), %llu of their own launches (%llu graphs), %llu of them placed at "
                "their costs%s",
                lanes, w->shared_seen ? ", some past the slots" : "", union_ms, w->spans.n,
                (unsigned long long)w->own_launches, (unsigned long long)w->own_graphs,
                (unsigned long long)w->placed_launches, unknown ? ": not said" : "");
    if (w->from_ns != 0)
        GEM_LOG(GEM_LOG_DEBUG, "measured %.3f ms over %llu launches (%llu graphs, %.3f ms); left "
                "out: %llu launches (%llu graphs) after gaps, %.3f ms, %llu (%llu) after holds",
                w->ns / 1e6, (unsigned long long)w->launches, (unsigned long long)w->graphs,
                w->graph_ns / 1e6, (unsigned long long)w->gap_launches,
                (unsigned long long)w->gap_graphs, w->gap_ns / 1e6,
                (unsigned long long)w->hold_launches, (unsigned long long)w->hold_graphs);
    f->run[1] = (struct run_window){0}; /* (said once) */
    pthread_mutex_unlock(&f->m);
}
