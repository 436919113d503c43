/* What one kind of launch costs the GPU; see cost.h.  Pure. */
#include "gemini/cost.h"

/* `replace`: these launches alone (the first, or in place of a stalled cost). */
static void learn(struct gem_cost *c, double ns, double n, double memory, int replace)
{
    double keep = replace ? 0.0 : memory / (memory + n);
    c->ns = keep * c->ns + ns;
    c->launches = keep * c->launches + n;
    c->per = c->ns / c->launches;
}

int gem_cost_learn(struct gem_cost *c, double ns, double n, double memory, int stall)
{
    if (stall && c->per > 0.0 && !c->stalled)
        return GEM_COST_NOT_LEARNT;
    int replaces_stalled = c->stalled && !stall;
    learn(c, ns, n, memory, c->per <= 0.0 || replaces_stalled);
    if (replaces_stalled && c->at_start > c->per)
        c->at_start = c->per; /* (else the stalled one holds to the next grant) */
    c->stalled = stall;
    return replaces_stalled ? GEM_COST_REPLACED_STALLED : GEM_COST_LEARNT;
}

/* A grant queues its whole token early, at the cost learnt so far, and on a power-limited card
 * a grant that starts after a rest runs its first launches fast: learnt from them, its queue
 * ran up to 5 ms past the token's end (H200, torch eager capped at 0.8: overuse p90 2.9 ms
 * against 0.25 while only a grant's end was measured, 2026-12-02).  At the start the cost is
 * the one its latest grant ended with, the slowest of it. */
double gem_cost_queued(const struct gem_cost *c)
{
    return c->per > c->at_start ? c->per : c->at_start;
}

double gem_cost_graph_ns(double ns, uint64_t n, uint64_t graphs, double kernel_per)
{
    double graph_ns = ns - (double)(n - graphs) * kernel_per;
    double floor = ns * (double)graphs / (double)n;
    return graph_ns > floor ? graph_ns : floor;
}

void gem_cost_raise(struct gem_cost *c, double factor)
{
    c->ns *= factor;
    c->per *= factor;
}
