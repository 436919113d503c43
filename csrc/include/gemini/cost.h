/* What one kind of launch costs the GPU, learnt from the segments between finished markers
 * (hook/inflight_costs.c: kernels and graph launches have a cost each, a graph launch carrying
 * many kernels).
 *
 * A cost is the GPU time of the launches learnt over their number, each older one's weight
 * fading by memory / (memory + n) as n more come in: a mean over launches, not over segments.
 * A program whose kernels differ (a compiled model's matmuls among small element-wise kernels)
 * has segments of one small kernel beside segments of several large ones; averaged per
 * segment, each small one pulled the cost down by a quarter, and the next burst went through
 * at a fraction of its cost.
 *
 * A segment with a launch call in it that held the host (a kernel's first launch, which loads
 * its module) may hold the GPU's idling too: it teaches a cost only while none is known but
 * from such segments, and the first segment without one replaces what they taught.  Averaged
 * in, torch's first `add_` read 2466 us, and a loop of them (launch-bound, whose segments
 * mostly follow a gap and teach nothing) learnt a few a second: its cost came down to 10 us
 * over 18 s, held at 0.26-0.36 of bare under a 0.4 cap meanwhile (H200, 2026-12-03).
 *
 * Pure: no globals, no clock.  Also fed to cffi's cdef: declarations and integer #defines. */
#ifndef GEMINI_COST_H
#define GEMINI_COST_H

#include <stdint.h>

struct gem_cost {
    double ns;       /* GPU time of the launches learnt ... */
    double launches; /* ... and how many, fading alike */
    double per;      /* ns / launches; 0: not known yet */
    double at_start; /* `per` as of the latest token's start (hook: gem_inflight_measure_from) */
    double logged;   /* `per` as last written to the hook's debug log (the hook's to keep) */
    int stalled;     /* learnt from segments with a stall in them only */
};

/* gem_cost_learn's answers: not learnt, learnt, learnt in place of a cost learnt over stalls
 * alone */
#define GEM_COST_NOT_LEARNT 0
#define GEM_COST_LEARNT 1
#define GEM_COST_REPLACED_STALLED 2

/* `n` launches (> 0) of this kind that ran in `ns` of GPU time (a graph launch's: the share of
 * its segment that gem_cost_graph_ns gives, over the segment's graph launches), a launch call
 * in the segment having held the host (`stall`) or not, learnt with a memory of `memory`
 * launches.  In place of a stalled cost, `at_start` comes down to the new cost too (else the
 * stalled one holds the queue's estimate to the next grant). */
int gem_cost_learn(struct gem_cost *c, double ns, double n, double memory, int stall);
/* What a launch queued now is taken to cost: `per`, or what it was as of the token's start if
 * that was more. */
double gem_cost_queued(const struct gem_cost *c);
/* The GPU time of the `graphs` graph launches of a segment of `n` launches (graphs <= n, n > 0)
 * that ran in `ns`: its time less its kernels' at `kernel_per`, but never under its mean per
 * launch (a kernel's cost learnt on heavier ones). */
double gem_cost_graph_ns(double ns, uint64_t n, uint64_t graphs, double kernel_per);
/* A wait showed the cost learnt on other kernels: it is `factor` times what it was (the
 * launches learnt kept; `logged` left to the caller). */
void gem_cost_raise(struct gem_cost *c, double factor);

#endif
