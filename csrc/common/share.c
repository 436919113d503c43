/* A launch allowance shared among threads; see share.h.  Pure: no globals, no clock.  Any
 * thread may take while one sets: the fields are read and written atomically (relaxed: a
 * thread that reads a share a little late goes at most its old part). */
#include "gemini/share.h"

void gem_share_set(struct gem_share *s, struct gem_share_use *setter, uint64_t allowance)
{
    uint64_t look = __atomic_load_n(&s->word, __ATOMIC_RELAXED) >> GEM_SHARE_PART_BITS;
    /* the threads that launched on the share now ending, the setter among them */
    uint64_t threads = __atomic_exchange_n(&s->threads, 1, __ATOMIC_RELAXED) +
                       (setter->look != look);
    if (s->lately > 0 && (look + 1) % GEM_SHARE_FORGET_LOOKS == 0)
        s->lately--;
    if (threads > s->lately)
        s->lately = (uint32_t)threads;
    uint64_t part = allowance / (s->lately > 0 ? s->lately : 1);
    if (part > GEM_SHARE_PART_MAX)
        part = GEM_SHARE_PART_MAX;
    look++;
    __atomic_store_n(&s->word, look << GEM_SHARE_PART_BITS | part, __ATOMIC_RELAXED);
    setter->look = look;
    setter->used = 0;
}

int gem_share_take(struct gem_share *s, struct gem_share_use *u)
{
    uint64_t word = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
    uint64_t look = word >> GEM_SHARE_PART_BITS;
    if (u->look != look) { /* once per thread and share */
        u->look = look;
        u->used = 0;
        __atomic_fetch_add(&s->threads, 1, __ATOMIC_RELAXED);
    }
    return ++u->used <= (word & GEM_SHARE_PART_MAX);
}
