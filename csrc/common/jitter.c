/* A retry's jittered pause; see jitter.h.  Pure. */
#include "gemini/jitter.h"

int64_t gem_jitter_ns(int64_t pause_ns, uint64_t *state)
{
    if (pause_ns < 2)
        return pause_ns;
    uint64_t x = *state ? *state : 1;
    x ^= x >> 12; /* xorshift64* (Vigna, 2016) */
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    uint64_t draw = x * 0x2545F4914F6CDD1DULL;
    uint64_t half = (uint64_t)pause_ns / 2;
    return pause_ns - (int64_t)(draw % (half + 1));
}
