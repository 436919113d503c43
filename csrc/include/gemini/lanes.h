/* Which of a device's slots counts a lane's launches (hook/inflight*.c): each lane (a stream;
 * each thread's own for the per-thread default stream) a slot of its own, as long as there are
 * free ones, the same one at every launch.
 *
 * Why a slot of its own: a marker's finish claims every launch counted in its lane's slot before
 * it as run.  Two lanes that shared a slot (the slot was the lane's hash alone) had a marker of
 * one claim the other's launches queued after it: three threads of 50 us graphs, each on a
 * stream of its own, had two of their streams share a slot in about 1 run in 23 (fake GPU,
 * 2026-12-03: 7 of 160), and 7-10 of their 50 ms tokens then ran 11-26 ms past (a marker
 * claimed some 350 launches the GPU had still to run).
 *
 * How: a lane's slot is found from its hash by linear probing; the first launch on a lane
 * takes a free slot (compare-and-swap: threads may race for one), and every later one finds it
 * at the first probe unless another lane took that slot first.  A slot is never given back (a
 * lane's counts may still be read): lanes past GEM_LANES share slot GEM_LANES, whose markers
 * claim nothing (its counts are several lanes' mixed).  The queue is then read from the
 * launches since the GPU last ran dry, the token still held, at less work: the three threads
 * above, all of their lanes put there, did 24,000 graph launches in 5 s against 49,800.
 *
 * Pure: no globals, no clock.  Also fed to cffi's cdef: declarations and integer #defines. */
#ifndef GEMINI_LANES_H
#define GEMINI_LANES_H

#include <stdint.h>

#define GEM_LANES 64

struct gem_lanes {
    uintptr_t key[GEM_LANES]; /* the lane that took the slot, + 1 (0: free) */
};

/* The slot of `lane` (a stream handle, or a thread's id xor'd with one: never UINTPTR_MAX), in
 * [0, GEM_LANES]; GEM_LANES: the one all lanes past them share.  Any thread, any time. */
unsigned gem_lanes_slot(struct gem_lanes *t, uintptr_t lane);
/* The slot `lane` has, taking none: GEM_LANES + 1 where it never launched (a sync's marker has
 * nothing to say there, and would take a slot for good); GEM_LANES where the slots ran out
 * before it may have come.  Any thread, any time. */
unsigned gem_lanes_find(const struct gem_lanes *t, uintptr_t lane);

#endif
