/* Kernels that wait for their host.
 *
 * XLA times each candidate kernel it autotunes behind a one-thread "delay" kernel that spins
 * on the GPU until the host has queued the candidate and the event after it, or for about 100
 * ms, so that the launch calls are not timed (stream_executor's GpuTimer).  Let go in a token's
 * last moments, the next launch is held to the next token, and the spinning kernel keeps the
 * GPU through the neighbour's turn: JAX processes ran 72-83 ms past a token at their start,
 * charged as overuse, their neighbours' work beside it (H100, 2026-12-06 17:15, and 20:36).
 * So such a kernel is let go only with GEMINI_HOOK_HOST_WAIT_ROOM_US of the token left
 * (token.c), else after the next grant.  (What XLA then times beside a neighbour is stretched
 * either way, by the card's clock: bench/autotune_beside.py.)
 *
 * Told by its launch (one thread in one block) and its name, asked of the driver once per
 * function while it stays among the latest SLOTS seen so launched (cuFuncGetName, CUDA 12.3 and
 * later; without it none is told).  A function unloaded, its address reused by another's, keeps
 * the verdict: at worst a one-thread kernel goes only with room in its token. */
#define _GNU_SOURCE
#include "internal.h"

#include <string.h>

#define SLOTS 16
/* Functions of one-thread launches seen: the function's address, its low bit set for a kernel
 * that waits for its host (a CUfunction is at least 8-byte aligned).  Overwritten in turn. */
static _Atomic uintptr_t seen[SLOTS];
static _Atomic unsigned next_slot;
static _Atomic int said;
static _Atomic int nameless; /* the driver has no cuFuncGetName: not looked up again */

/* XLA's delay kernel, stream_executor::gpu::(anonymous namespace)::DelayKernel, mangled. */
static int names_host_wait(const char *name)
{
    return name != NULL && strstr(name, "stream_executor") != NULL &&
           strstr(name, "DelayKernel") != NULL;
}

static int ask_driver(CUfunction f)
{
    if (atomic_load_explicit(&nameless, memory_order_relaxed))
        return 0;
    __typeof__(&cuFuncGetName) get_name = REAL_AUX(cuFuncGetName);
    const char *name = NULL;
    if (get_name == NULL)
        atomic_store_explicit(&nameless, 1, memory_order_relaxed);
    if (get_name == NULL || get_name(&name, f) != CUDA_SUCCESS)
        return 0;
    int waits = names_host_wait(name);
    if (waits && !atomic_exchange(&said, 1))
        GEM_LOG(GEM_LOG_INFO, "%s waits on the GPU for its host (XLA's autotuning timer): it "
                "is let go only with room in a token (said once)", name);
    return waits;
}

int gem_host_wait_kernel(CUfunction f)
{
    uintptr_t key = (uintptr_t)f;
    if (key == 0 || (key & 1u))
        return 0;
    for (int i = 0; i < SLOTS; i++) {
        uintptr_t v = atomic_load_explicit(&seen[i], memory_order_relaxed);
        if ((v & ~(uintptr_t)1) == key)
            return (int)(v & 1u);
    }
    int waits = ask_driver(f);
    unsigned i = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed) % SLOTS;
    atomic_store_explicit(&seen[i], key | (uintptr_t)waits, memory_order_relaxed);
    return waits;
}
