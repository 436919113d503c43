/* The launch gate's hot-path clock: the CPU's time-stamp counter, read against a deadline set
 * in ticks once per look (hook/token.c), instead of clock_gettime on every launch.
 *
 * Why: alone under the hook a launch-bound loop (200 tiny kernels a step, 158,000 launches a
 * second on the H100's host) lost 3 points of its rate, and the clock read was half of what the
 * gate added to a launch: 30 ns through the vDSO against 12 for the counter on the development
 * machine (mini driver: the gate 55 ns a launch, 31 of them in clock_gettime; perf).
 *
 * How: the counter runs at a fixed rate where the kernel keeps it as its own clocksource
 * ("tsc": invariant, and the same on every CPU).  Its rate in ticks per ns is taken from two
 * readings of both clocks: the hook's start (the anchor) and the look's.  Until they lie
 * GEM_TICKS_CALIBRATE_NS apart the rate is not known and no deadline is given in ticks (the
 * gate then reads clock_gettime).  From then on a reading pair is off by at most the ~30 ns
 * between its two reads, over a span of 5 ms or more: a deadline 100 ms away comes within
 * 0.6 us of its time, and the span only grows.
 *
 * Pure: no globals, no clock.  Also fed to cffi's cdef: declarations and integer #defines. */
#ifndef GEMINI_TICKS_H
#define GEMINI_TICKS_H

#include <stdint.h>

#define GEM_TICKS_CALIBRATE_NS 5000000

struct gem_ticks_anchor { /* both clocks read together, once */
    uint64_t tick;
    int64_t ns;
};

/* The tick count at which `until_ns` comes, from a reading of both clocks now (`tick`, `ns`)
 * and the anchor: `tick` itself when until_ns is not after ns (due), 0 when the rate is not
 * known yet (less than GEM_TICKS_CALIBRATE_NS since the anchor, or a counter that did not move
 * forward).  Saturates at UINT64_MAX. */
uint64_t gem_ticks_at(const struct gem_ticks_anchor *anchor, uint64_t tick, int64_t ns,
                      int64_t until_ns);

#endif
