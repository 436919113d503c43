/* Host synchronisation points: the end of a burst for the predictor (spec §6.7, widened to
 * stream/event syncs and every blocking copy as §14.2 asks).  The stop is marked after the
 * real call returns, whatever it returned.
 *
 * A context or stream sync that succeeded also tells inflight.c that what was launched before
 * it has run: else the launches after the newest marker (hot-path ones carry none) would still
 * count as queued, and a burst starting near a token's end would be held with the GPU idle.
 * Every sync point tells it how long the host waited (see gem_inflight_waited). */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

/* `call`, then: a burst ended, and inflight.c hears how long the host waited (markers that
 * ran meanwhile prove nothing of the GPU keeping up; a long wait, that the GPU was behind) and,
 * `all_ran` and the call succeeded, that everything launched before it has run. */
#define WAITED_FOR(call, all_ran, before_wait)                                                   \
    do {                                                                                         \
        if (GEM_PASS())                                                                          \
            return call;                                                                         \
        int dev_ = gem_current_dev();                                                            \
        struct gem_launch_count before_ = {0};                                                   \
        if (dev_ >= 0)                                                                           \
            before_ = gem_inflight_count(dev_);                                                  \
        int64_t from_ = gem_now_ns();                                                            \
        if (dev_ >= 0)                                                                           \
            before_wait;                                                                         \
        CUresult r_ = call;                                                                      \
        int64_t to_ = gem_now_ns(), ran_by_ = to_;                                               \
        if (dev_ >= 0)                                                                           \
            ran_by_ = gem_inflight_waited(dev_, before_, from_, to_,                             \
                                          (all_ran) && r_ == CUDA_SUCCESS);                      \
        gem_token_note_sync(dev_, from_, to_, ran_by_, r_ == CUDA_SUCCESS);                      \
        gem_pools_settle(); /* a pool over its release threshold trims at a sync (pools.c) */     \
        return r_;                                                                               \
    } while (0)
#define WAITED(call) WAITED_FOR(call, 0, (void)0)
/* (a stream sync marks its stream first, a context sync the default streams:
 * gem_token_before_stream_sync, gem_token_before_ctx_sync) */
#define STREAM_SYNCED(call, s, pts) \
    WAITED_FOR(call, 1, gem_token_before_stream_sync(dev_, (s), (pts), from_))
#define CTX_SYNCED(call) WAITED_FOR(call, 1, gem_token_before_ctx_sync(dev_, from_))

GEM_EXPORT CUresult cuCtxSynchronize(void)
{
    GEM_ENTER(cuCtxSynchronize);
    CTX_SYNCED(REAL(cuCtxSynchronize)());
}

GEM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    GEM_ENTER(cuCtxSynchronize_v2);
    CTX_SYNCED(REAL(cuCtxSynchronize_v2)(ctx));
}

GEM_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    GEM_ENTER(cuStreamSynchronize);
    STREAM_SYNCED(REAL(cuStreamSynchronize)(s), s, 0);
}

GEM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    GEM_ENTER(cuStreamSynchronize_ptsz);
    STREAM_SYNCED(REAL(cuStreamSynchronize_ptsz)(s), s, 1);
}

GEM_EXPORT CUresult cuEventSynchronize(CUevent e)
{
    GEM_ENTER(cuEventSynchronize);
    WAITED(REAL(cuEventSynchronize)(e));
}

GEM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    GEM_ENTER(cuMemcpy);
    WAITED(REAL(cuMemcpy)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    GEM_ENTER(cuMemcpy_ptds);
    WAITED(REAL(cuMemcpy_ptds)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    GEM_ENTER(cuMemcpyHtoD_v2);
    WAITED(REAL(cuMemcpyHtoD_v2)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
    GEM_ENTER(cuMemcpyHtoD_v2_ptds);
    WAITED(REAL(cuMemcpyHtoD_v2_ptds)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    GEM_ENTER(cuMemcpyDtoH_v2);
    WAITED(REAL(cuMemcpyDtoH_v2)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
    GEM_ENTER(cuMemcpyDtoH_v2_ptds);
    WAITED(REAL(cuMemcpyDtoH_v2_ptds)(dst, src, n));
}

/* A host function (cuLaunchHostFunc) runs on a thread of the driver's once the GPU has run
 * what was queued before it.  XLA tells block_until_ready that its work ran this way (H100:
 * JAX queued 5,789 host functions in 3 s of 3,576 steps, and made no sync it waited in), so
 * such a program waits in no call of ours.  Each one is wrapped: when it runs, the time since
 * it was queued, or since the one before it ran if that is later, counts as waited on the GPU
 * if the device saw no launch meanwhile (the program had nothing more to run until the GPU got
 * there; launching meanwhile, it was busy, not waiting).  Not inside a capture: a graph's host
 * node runs at every replay. */
struct host_fn {
    CUhostFn fn;
    void *data;
    int dev;
    int64_t queued_ns;
    uint64_t launches; /* the device's launches when it was queued */
};

static pthread_mutex_t host_fn_m = PTHREAD_MUTEX_INITIALIZER;
static int64_t host_fn_ran_ns[GEM_MAX_DEVICES]; /* when the latest one ran, per device ... */
static uint64_t host_fn_ran_launches[GEM_MAX_DEVICES]; /* ... and the launches then */

static uint64_t launches_of(int dev)
{
    return gem_inflight_count(dev).launches;
}

static void run_host_fn(void *arg)
{
    struct host_fn h = *(struct host_fn *)arg;
    free(arg);
    int64_t now = gem_now_ns();
    uint64_t launches = launches_of(h.dev);
    pthread_mutex_lock(&host_fn_m);
    int64_t from = h.queued_ns;
    uint64_t then = h.launches;
    if (host_fn_ran_ns[h.dev] > from) {
        from = host_fn_ran_ns[h.dev];
        then = host_fn_ran_launches[h.dev];
    }
    host_fn_ran_ns[h.dev] = now;
    host_fn_ran_launches[h.dev] = launches;
    pthread_mutex_unlock(&host_fn_m);
    if (launches == then)
        gem_token_note_waited(h.dev, now - from);
    h.fn(h.data);
}

static CUresult launch_host_fn(CUstream s, int pts, CUhostFn fn, void *data,
                               __typeof__(&cuLaunchHostFunc) real)
{
    int dev = gem_current_dev();
    struct host_fn *h = NULL;
    if (dev >= 0 && fn != NULL && !gem_inflight_capturing(s, pts))
        h = malloc(sizeof(*h));
    if (h == NULL)
        return real(s, fn, data);
    *h = (struct host_fn){fn, data, dev, gem_now_ns(), launches_of(dev)};
    CUresult r = real(s, run_host_fn, h);
    if (r != CUDA_SUCCESS)
        free(h);
    return r;
}

GEM_EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
    GEM_ENTER(cuLaunchHostFunc);
    if (GEM_PASS())
        return REAL(cuLaunchHostFunc)(s, fn, data);
    return launch_host_fn(s, 0, fn, data, REAL(cuLaunchHostFunc));
}

GEM_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *data)
{
    GEM_ENTER(cuLaunchHostFunc_ptsz);
    if (GEM_PASS())
        return REAL(cuLaunchHostFunc_ptsz)(s, fn, data);
    return launch_host_fn(s, 1, fn, data, REAL(cuLaunchHostFunc_ptsz));
}

/* A program may also wait by asking again and again (cuEventQuery, cuStreamQuery) until its
 * work has run, in no call that blocks.  A thread's queries that answer "not ready", each
 * within GEM_SPIN_GAP_NS of the one before and with at most GEM_SPIN_WORK_NS of the thread's
 * own CPU time between them, on a device that saw no launch meanwhile, are a spin: when one
 * then answers "ready", the spin counts as waited on the GPU.  A thread that queries between
 * other work, or launches meanwhile, was not waiting; nor is one that looks now and then
 * (a watchdog's thread: NCCL's looks every 100 ms).  (CPU time beside wall time: a spinning
 * thread that the kernel preempts on a busy host still waits; with wall-time gaps of 1 ms
 * alone, the fake GPU's test read 0.04 of its grants waited beside two busy loops on its two
 * cores, 0.98 without them.) */
#define GEM_SPIN_WORK_NS 1000000 /* 1 ms */
#define GEM_SPIN_GAP_NS 20000000 /* 20 ms */

static _Thread_local struct {
    int64_t from_ns;   /* its first "not ready"; 0: not spinning */
    int64_t last_ns;   /* its latest */
    int64_t cpu_ns;    /* the thread's CPU time then */
    uint64_t launches; /* the device's launches at its first */
    int dev;
} spin;

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static CUresult queried(CUresult r)
{
    if (r != CUDA_ERROR_NOT_READY && spin.from_ns == 0)
        return r; /* (the usual answer: ready, and nothing to end) */
    int64_t now = gem_now_ns(), cpu = thread_cpu_ns();
    int dev = gem_current_dev();
    uint64_t launches = dev >= 0 ? launches_of(dev) : 0;
    int going = spin.from_ns != 0 && dev == spin.dev && launches == spin.launches &&
                now - spin.last_ns <= GEM_SPIN_GAP_NS && cpu - spin.cpu_ns <= GEM_SPIN_WORK_NS;
    if (r == CUDA_ERROR_NOT_READY) {
        if (!going)
            spin.from_ns = now, spin.launches = launches, spin.dev = dev;
        spin.last_ns = now, spin.cpu_ns = cpu;
        return r;
    }
    if (going && r == CUDA_SUCCESS)
        gem_token_note_waited(dev, now - spin.from_ns);
    spin.from_ns = 0;
    return r;
}

GEM_EXPORT CUresult cuEventQuery(CUevent e)
{
    GEM_ENTER(cuEventQuery);
    if (GEM_PASS())
        return REAL(cuEventQuery)(e);
    return queried(REAL(cuEventQuery)(e));
}

GEM_EXPORT CUresult cuStreamQuery(CUstream s)
{
    GEM_ENTER(cuStreamQuery);
    if (GEM_PASS())
        return REAL(cuStreamQuery)(s);
    return queried(REAL(cuStreamQuery)(s));
}

GEM_EXPORT CUresult cuStreamQuery_ptsz(CUstream s)
{
    GEM_ENTER(cuStreamQuery_ptsz);
    if (GEM_PASS())
        return REAL(cuStreamQuery_ptsz)(s);
    return queried(REAL(cuStreamQuery_ptsz)(s));
}
