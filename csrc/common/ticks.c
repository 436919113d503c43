/* The hot path's deadline in time-stamp counter ticks; see ticks.h.  Pure. */
#include "gemini/ticks.h"

uint64_t gem_ticks_at(const struct gem_ticks_anchor *anchor, uint64_t tick, int64_t ns,
                      int64_t until_ns)
{
    int64_t span_ns = ns - anchor->ns;
    if (span_ns < GEM_TICKS_CALIBRATE_NS || tick <= anchor->tick)
        return 0;
    if (until_ns <= ns)
        return tick;
    double per_ns = (double)(tick - anchor->tick) / (double)span_ns;
    double ahead = (double)(until_ns - ns) * per_ns;
    if (ahead >= (double)(UINT64_MAX - tick))
        return UINT64_MAX;
    return tick + (uint64_t)ahead;
}
