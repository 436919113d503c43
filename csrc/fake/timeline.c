/* The simulated GPU's kernel queue: kernels run one at a time on one timeline per device, in
 * CLOCK_MONOTONIC nanoseconds, shared by every process through the segment (shm.c).
 * Unlike a GPU, which time-slices between the contexts of several processes, the timeline runs
 * their kernels in the order they were queued: a process's kernel waits behind all that the
 * others queued before it.  So the processes of one client, each bounding its own queue (the
 * hook's drain factor counts the others as sharing the GPU evenly), run further past its
 * tokens here than on a GPU: two processes of 5 ms kernels about 10 ms past most tokens, where
 * two torch eager processes on an H200 ran p50 0.2 ms, p99 3 ms past (2026-12-02,
 * bench/JOURNAL-issue12.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "fake_internal.h"

uint64_t fake_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void fake_sleep_until(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000ULL), (long)(t_ns % 1000000000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

uint64_t fake_tl_step(uint64_t now, uint64_t busy_until, uint64_t tail, uint64_t dur)
{
    uint64_t start = now;
    if (busy_until > start)
        start = busy_until;
    if (tail > start)
        start = tail;
    return start + dur;
}

#define FAKE_COOL_NS 1000000ULL

/* A whole number > 0 from the environment, or `fallback`. */
static unsigned env_uint(const char *name, unsigned fallback)
{
    uint64_t x = fake_env_u64(name, 0);
    return x > 0 && x <= UINT_MAX ? (unsigned)x : fallback;
}

/* A power-limited GPU, as the fake NVML's clock (the same variables): a kernel that starts
 * while the clock is boosted (fake_clock_boosted) runs at GEMINI_FAKE_SM_PEAK_MHZ, in its
 * length times GEMINI_FAKE_SM_MHZ / peak (no boost unless asked for), so that a program paced
 * in short grants does more work per second of them than run continuously, as on an H100.
 * Read in the launching process (the segment's lock held: once). */
static uint64_t boosted(uint64_t dur, uint64_t run_since, uint64_t start)
{
    static unsigned settled, peak;
    if (settled == 0) {
        peak = env_uint("GEMINI_FAKE_SM_PEAK_MHZ", env_uint("GEMINI_FAKE_SM_MHZ", 1410));
        settled = env_uint("GEMINI_FAKE_SM_MHZ", 1410);
    }
    if (peak <= settled || !fake_clock_boosted(run_since, start))
        return dur;
    return dur * settled / peak;
}

static uint64_t settle_ns, swing_ns;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

static void read_clock_env(void)
{
    settle_ns = (uint64_t)env_uint("GEMINI_FAKE_SM_SETTLE_MS", 50) * 1000000ULL;
    swing_ns = fake_env_u64("GEMINI_FAKE_SM_SWING_MS", 0) * 1000000ULL;
}

/* Boosted until a run of kernels has lasted GEMINI_FAKE_SM_SETTLE_MS (50), or, where
 * GEMINI_FAKE_SM_SWING_MS is set, in every other stretch of that many ms of the clock, busy or
 * not: an H200's power limiter under matmuls steps its clock 10-17 % up and down within a
 * grant and across the rests between, not in step with them (bench/JOURNAL-issue12.md). */
int fake_clock_boosted(uint64_t run_since, uint64_t at)
{
    pthread_once(&clock_once, read_clock_env); /* (the fake NVML calls from any thread) */
    if (swing_ns > 0)
        return at / swing_ns % 2 == 0;
    return at - run_since < settle_ns;
}

CUresult fake_tl_enqueue(int dev, uint64_t *tail, const uint64_t *durs, size_t n, uint64_t *ends)
{
    dev = fake_physical(dev);
    if (dev < 0 || dev >= FAKE_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct fake_proc_slot *me = fake_self_locked(s);
    struct fake_dev_state *d = &s->dev[dev];
    uint64_t now = fake_now_ns();
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        /* The GPU had gone idle: this kernel starts a run.  (A gap shorter than a power
         * limiter's reaction, a program's sync and its next launch, does not cool it.) */
        if (d->busy_until + FAKE_COOL_NS < now)
            d->busy_since = now;
        uint64_t dur = boosted(durs[i], d->busy_since, fake_tl_step(now, d->busy_until, *tail, 0));
        uint64_t end = fake_tl_step(now, d->busy_until, *tail, dur);
        d->busy_until = end;
        *tail = end;
        total += dur;
        if (ends != NULL)
            ends[i] = end;
    }
    d->busy_ns += total;
    d->kernels += n;
    if (me != NULL) {
        me->gpu_ns += total;
        me->kernels += n;
        if (me->client >= 0 && me->client < FAKE_MAX_CLIENTS) {
            s->clients[me->client].gpu_ns += total;
            s->clients[me->client].kernels += n;
        }
    }
    fake_unlock(s);
    return CUDA_SUCCESS;
}

static uint64_t g_env_kernel_ns; /* 0: not set in this process's environment */
static int g_env_read;

uint64_t fake_kernel_ns_default(void)
{
    if (!__atomic_load_n(&g_env_read, __ATOMIC_ACQUIRE)) {
        uint64_t x = fake_env_u64("GEMINI_FAKE_KERNEL_NS", 0);
        __atomic_store_n(&g_env_kernel_ns, x, __ATOMIC_RELAXED);
        __atomic_store_n(&g_env_read, 1, __ATOMIC_RELEASE);
    }
    uint64_t x = __atomic_load_n(&g_env_kernel_ns, __ATOMIC_RELAXED);
    if (x != 0)
        return x;
    struct fake_shm *s = fake_shm_get();
    return s != NULL ? __atomic_load_n(&s->default_kernel_ns, __ATOMIC_RELAXED)
                     : FAKE_DEFAULT_KERNEL_NS;
}
