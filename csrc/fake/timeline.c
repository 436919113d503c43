/* The simulated GPU's kernel queue: kernels run one at a time on one timeline per device, in
 * CLOCK_MONOTONIC nanoseconds, shared by every process through the segment (shm.c). */
#define _GNU_SOURCE
#include <errno.h>
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
        uint64_t end = fake_tl_step(now, d->busy_until, *tail, durs[i]);
        if (d->busy_until < now) /* the GPU had gone idle: this kernel starts a run */
            d->busy_since = now;
        d->busy_until = end;
        *tail = end;
        total += durs[i];
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
        const char *v = getenv("GEMINI_FAKE_KERNEL_NS");
        uint64_t x = 0;
        if (v != NULL && *v != '\0')
            x = strtoull(v, NULL, 0);
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
