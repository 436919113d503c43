/* A lane's slot among a device's; see lanes.h.  Pure: no globals, no clock.  Any thread may
 * look a lane up while another takes a slot: the keys are read and written atomically. */
#include "gemini/lanes.h"

static unsigned home(uintptr_t lane)
{
    return (unsigned)(((uint64_t)lane * 0x9E3779B97F4A7C15ull) >> 32) % GEM_LANES;
}

unsigned gem_lanes_slot(struct gem_lanes *t, uintptr_t lane)
{
    uintptr_t key = lane + 1;
    unsigned i = home(lane);
    for (unsigned probe = 0; probe < GEM_LANES; probe++, i = (i + 1) % GEM_LANES) {
        uintptr_t taken = __atomic_load_n(&t->key[i], __ATOMIC_ACQUIRE);
        if (taken == 0 && __atomic_compare_exchange_n(&t->key[i], &taken, key, 0,
                                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return i;
        if (taken == key) /* (found, or taken by another thread launching on this lane) */
            return i;
    }
    return GEM_LANES;
}

/* Slots are taken in probe order and never given back: a free one met first says the lane
 * never took one. */
unsigned gem_lanes_find(const struct gem_lanes *t, uintptr_t lane)
{
    uintptr_t key = lane + 1;
    unsigned i = home(lane);
    for (unsigned probe = 0; probe < GEM_LANES; probe++, i = (i + 1) % GEM_LANES) {
        uintptr_t taken = __atomic_load_n(&t->key[i], __ATOMIC_ACQUIRE);
        if (taken == key)
            return i;
        if (taken == 0)
            return GEM_LANES + 1;
    }
    return GEM_LANES;
}
