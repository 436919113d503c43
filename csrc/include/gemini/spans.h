/* The union of time spans on one clock (hook/inflight_measure.c: the GPU time a token's
 * launches kept the GPU busy, where several lanes ran side by side).
 *
 * Why: a process that launches on several streams runs their kernels beside each other on the
 * GPU, and the sum of each lane's segments counts the time they overlap twice.  So a segment
 * of one lane was measured with every lane's launches in it, and the segments that begin at a
 * hold, whose launches are not all in their lane's span, were left out: two threads capped at
 * 0.4 measured 26-32 ms of an 80 ms calibration tail (H200, 2026-12-03), and their tails
 * spread 170-206 us a launch against about 196.  The union of every lane's segments, over
 * each lane's own launches, counts each launch once and each busy moment once.
 *
 * How: at most GEM_SPANS_MAX disjoint spans, kept sorted; a span added is merged with those it
 * touches.  Full, the two spans with the shortest gap between them become one (the gap then
 * counts as busy: an error of at most that gap).
 *
 * Pure: no globals, no clock.  Also fed to cffi's cdef: declarations and integer #defines. */
#ifndef GEMINI_SPANS_H
#define GEMINI_SPANS_H

#define GEM_SPANS_MAX 64

struct gem_spans {
    int n;             /* spans held, in order: lo[i] <= hi[i] < lo[i + 1] */
    double lo[64];     /* (GEM_SPANS_MAX: cffi's cdef takes no macro in a size) */
    double hi[64];
};

void gem_spans_clear(struct gem_spans *s);
/* Add [lo, hi] (ignored where hi < lo, or either is not a number). */
void gem_spans_add(struct gem_spans *s, double lo, double hi);
/* The length of the union. */
double gem_spans_total(const struct gem_spans *s);

#endif
