/* Unified-memory mode (Gemini_UM, spec §11 and §14.2 item 14).
 *
 * The pod manager's MEM_LIMIT reply carries a flags word (GEM_MEM_FLAG_*).  For a UM client
 * memory.c serves cuMemAlloc_v2 / cuMemAllocPitch_v2 as managed memory, still counted against
 * the limit, and this file moves that memory:
 *  - at each token grant, in the launching thread (the slow path where the token arrived, never
 *    the valid-token fast path): cuMemPrefetchAsync_v2 of every live managed allocation to the
 *    device on the hook's own stream, then an event on that stream that the launching stream
 *    waits for, so the client's next kernels run after the data is there;
 *  - with evict-on-release, when the token expires (in the tracker thread, after its forced
 *    sync): the same allocations back to the host, on the same stream, so the next grant's
 *    prefetch is ordered after them.
 * GEMINI_UM_PREFETCH=0 turns the grant-time prefetch off (the pages then fault in on use; for
 * measurements).  Freed allocations are not prefetched: the list comes from memory.c's live map at each grant.
 * Errors are ignored (a prefetch is a hint; the pages fault in anyway).  No lock is held across
 * a socket call: the flags are fetched before taking `m`. */
#include "internal.h"
#include "gemini/wire.h"

#include <stdlib.h>
#include <string.h>

struct um_dev {
    pthread_mutex_t m; /* guards the fields below, held across driver calls only */
    CUcontext ctx;     /* the context `stream` and `ready` belong to */
    CUstream stream;
    CUevent ready;
};

static _Atomic uint64_t flags_plus_one[GEM_MAX_DEVICES]; /* 0: not known yet */
static struct um_dev devs[GEM_MAX_DEVICES];
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;

static int prefetch_on = 1;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *v = getenv("GEMINI_UM_PREFETCH");
    prefetch_on = !(v != NULL && strcmp(v, "0") == 0);
}

static void devs_init(void)
{
    for (int i = 0; i < GEM_MAX_DEVICES; i++) {
        pthread_mutex_init(&devs[i].m, NULL);
        devs[i].ctx = NULL;
        devs[i].stream = NULL;
        devs[i].ready = NULL;
    }
}

void gem_um_reset_after_fork(void)
{
    /* CUDA state does not survive fork; the child asks for its flags on its own connection */
    pthread_once(&devs_once, devs_init);
    devs_init();
    for (int i = 0; i < GEM_MAX_DEVICES; i++)
        atomic_store(&flags_plus_one[i], 0);
}

void gem_um_note_flags(int dev, uint64_t flags)
{
    if (dev < 0 || dev >= GEM_MAX_DEVICES)
        return;
    uint64_t old = atomic_exchange(&flags_plus_one[dev], flags + 1);
    if (old != flags + 1 && (flags & GEM_MEM_FLAG_UNIFIED_MEMORY))
        GEM_LOG(GEM_LOG_INFO, "device %d: unified-memory mode%s", dev,
                (flags & GEM_MEM_FLAG_EVICT_ON_RELEASE) ? ", evicted on release" : "");
}

void gem_um_forget_flags(int dev)
{
    if (dev >= 0 && dev < GEM_MAX_DEVICES)
        atomic_store(&flags_plus_one[dev], 0);
}

uint64_t gem_um_flags(int dev)
{
    if (dev < 0 || dev >= GEM_MAX_DEVICES)
        return 0;
    uint64_t v = atomic_load_explicit(&flags_plus_one[dev], memory_order_acquire);
    if (v == 0) {
        uint64_t used, limit;
        gem_mem_limit(dev, &used, &limit); /* notes the flags of its reply */
        v = atomic_load_explicit(&flags_plus_one[dev], memory_order_acquire);
    }
    return v ? v - 1 : 0;
}

void gem_um_forget_ctx(CUcontext ctx)
{
    pthread_once(&devs_once, devs_init);
    for (int dev = 0; ctx != NULL && dev < GEM_MAX_DEVICES; dev++) {
        struct um_dev *u = &devs[dev];
        pthread_mutex_lock(&u->m);
        if (u->ctx == ctx) { /* (its stream and event go with it: not destroyed here) */
            u->ctx = NULL;
            u->stream = NULL;
            u->ready = NULL;
        }
        pthread_mutex_unlock(&u->m);
    }
}

/* The hook's stream and event in `ctx` (made current by the caller).  u->m held. */
static int ensure_stream(struct um_dev *u, CUcontext ctx)
{
    __typeof__(&cuStreamCreate) create = REAL_AUX(cuStreamCreate);
    __typeof__(&cuEventCreate) ev_create = REAL_AUX(cuEventCreate);
    if (create == NULL || ev_create == NULL)
        return -1;
    if (u->stream != NULL && u->ctx == ctx)
        return 0;
    /* A new context: the old one's handles died with it (or stay with it); make new ones. */
    u->stream = NULL;
    u->ready = NULL;
    if (create(&u->stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        u->stream = NULL;
        return -1;
    }
    if (ev_create(&u->ready, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        __typeof__(&cuStreamDestroy_v2) destroy = REAL_AUX(cuStreamDestroy_v2);
        if (destroy != NULL)
            destroy(u->stream);
        u->stream = NULL;
        u->ready = NULL;
        return -1;
    }
    u->ctx = ctx;
    return 0;
}

/* Prefetch every live managed allocation of `dev` to `loc` on the hook's stream.  u->m held,
 * ctx current.  Returns how many prefetches the driver accepted. */
static size_t prefetch_all(struct um_dev *u, int dev, CUmemLocation loc)
{
    __typeof__(&cuMemPrefetchAsync_v2) prefetch = REAL_AUX(cuMemPrefetchAsync_v2);
    if (prefetch == NULL)
        return 0;
    size_t n = 0, ok = 0;
    struct gem_um_range *r = gem_mem_um_ranges(dev, &n);
    for (size_t i = 0; i < n; i++)
        if (prefetch(r[i].ptr, (size_t)r[i].bytes, loc, 0, u->stream) == CUDA_SUCCESS)
            ok++;
    free(r);
    return ok;
}

static int capturing(CUstream s)
{
    __typeof__(&cuStreamIsCapturing) is_capturing = REAL_AUX(cuStreamIsCapturing);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (is_capturing == NULL || is_capturing(s, &st) != CUDA_SUCCESS)
        return 0;
    return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void gem_um_on_grant(int dev, CUstream launch_stream, int per_thread)
{
    if (dev < 0 || !(gem_um_flags(dev) & GEM_MEM_FLAG_UNIFIED_MEMORY))
        return;
    pthread_once(&env_once, read_env);
    if (!prefetch_on)
        return;
    __typeof__(&cuCtxGetCurrent) get_ctx = REAL_AUX(cuCtxGetCurrent);
    __typeof__(&cuCtxGetDevice) get_dev = REAL_AUX(cuCtxGetDevice);
    __typeof__(&cuEventRecord) record = REAL_AUX(cuEventRecord);
    __typeof__(&cuStreamWaitEvent) wait_event = REAL_AUX(cuStreamWaitEvent);
    if (get_ctx == NULL || get_dev == NULL || record == NULL || wait_event == NULL)
        return;
    CUcontext ctx = NULL;
    CUdevice ordinal = 0;
    if (get_ctx(&ctx) != CUDA_SUCCESS || ctx == NULL || get_dev(&ordinal) != CUDA_SUCCESS)
        return;
    if (launch_stream == NULL && per_thread)
        launch_stream = CU_STREAM_PER_THREAD;
    if (capturing(launch_stream))
        return; /* recorded into a graph, not run now: the next real grant prefetches */
    pthread_once(&devs_once, devs_init);
    struct um_dev *u = &devs[dev];
    pthread_mutex_lock(&u->m);
    if (ensure_stream(u, ctx) == 0) {
        CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, (int)ordinal};
        if (prefetch_all(u, dev, loc) > 0 && record(u->ready, u->stream) == CUDA_SUCCESS)
            wait_event(launch_stream, u->ready, 0);
    }
    pthread_mutex_unlock(&u->m);
}

int gem_um_maybe(int dev)
{
    if (dev < 0)
        return 0;
    uint64_t v = atomic_load_explicit(&flags_plus_one[dev], memory_order_acquire);
    return v == 0 || ((v - 1) & GEM_MEM_FLAG_UNIFIED_MEMORY); /* unknown: maybe */
}

int gem_um_evicts(int dev)
{
    if (dev < 0)
        return 0;
    uint64_t v = atomic_load_explicit(&flags_plus_one[dev], memory_order_acquire);
    uint64_t want = GEM_MEM_FLAG_UNIFIED_MEMORY | GEM_MEM_FLAG_EVICT_ON_RELEASE;
    /* known at the grant that preceded this expiry; no request from the tracker */
    return v != 0 && ((v - 1) & want) == want;
}

void gem_um_on_expiry(int dev, CUcontext ctx)
{
    if (ctx == NULL || !gem_um_evicts(dev))
        return;
    __typeof__(&cuCtxSetCurrent) set_ctx = REAL_AUX(cuCtxSetCurrent);
    if (set_ctx == NULL || set_ctx(ctx) != CUDA_SUCCESS)
        return;
    pthread_once(&devs_once, devs_init);
    struct um_dev *u = &devs[dev];
    pthread_mutex_lock(&u->m);
    if (ensure_stream(u, ctx) == 0) {
        CUmemLocation host = {CU_MEM_LOCATION_TYPE_HOST, 0};
        prefetch_all(u, dev, host);
    }
    pthread_mutex_unlock(&u->m);
}
