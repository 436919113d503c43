/* The launches the token gate's hot path may go between two looks, shared among the threads
 * that launch (pure: the caller keeps each thread's use, the hook in thread-local storage).
 *
 * Why per thread: the hot path must write nothing that other launching threads read.  One
 * count of the device's launches, added to by every thread, cost four threads launching empty
 * kernels 0.5-1.1 us a launch on the H100 (the goal: 0.2).  Here a thread adds to a shared
 * count once per look, not once per launch.
 *
 * How: a look (gem_share_set, serialised by the caller) splits its allowance into equal parts
 * for the threads that launched on the previous share (the setting one among them; at least
 * one), or on the shares before it (the most of them lately: one fewer every
 * GEM_SHARE_FORGET_LOOKS looks).  Each thread goes its part (gem_share_take); the first to use
 * it up looks again, which starts the next share for all.  A thread that begins to launch
 * meanwhile takes a part too, so a share may pass its allowance by one part per such thread,
 * until the next look.  Counted by the previous share alone, a thread the host stopped for a
 * few looks came back to a part as large as the whole allowance, and so did each other one:
 * three threads of tiny graphs on a loaded 2-core machine went three allowances, a token's
 * half each time, and ran 6.5-19 ms past a 50 ms token in a run of five (fake GPU,
 * 2026-12-02).  More threads than launches allowed: parts of 0, and every launch looks (a look
 * costs a few microseconds; a launch past the room could cost the next client's time).
 *
 * Also fed to cffi's cdef: declarations and integer #defines only. */
#ifndef GEMINI_SHARE_H
#define GEMINI_SHARE_H

#include <stdint.h>

/* a share's word holds each thread's part (at most GEM_SHARE_PART_MAX launches) in its low
 * GEM_SHARE_PART_BITS */
#define GEM_SHARE_PART_BITS 16
#define GEM_SHARE_PART_MAX 65535
#define GEM_SHARE_FORGET_LOOKS 16

struct gem_share {
    uint64_t word;    /* the look's number << GEM_SHARE_PART_BITS | each thread's part */
    uint32_t threads; /* threads that launched on this share */
    uint32_t lately;  /* the most that launched on a share lately (the setter's to read) */
};

struct gem_share_use { /* one thread's */
    uint64_t look;     /* the look whose share it is using */
    uint64_t used;     /* its launches on that share */
};

/* A look: `allowance` more launches, shared; `setter` is the looking thread's use. */
void gem_share_set(struct gem_share *s, struct gem_share_use *setter, uint64_t allowance);
/* One launch of the thread whose use is `u`: 1 if within its part, else 0 (look again). */
int gem_share_take(struct gem_share *s, struct gem_share_use *u);

#endif
