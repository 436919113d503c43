/* Memory limit on every allocation path, frees, and the virtualised totals.
 *
 * Allocation shape: reserve the bytes at the pod manager BEFORE the driver call
 * (MEM_UPDATE(bytes, 1); refused -> CUDA_ERROR_OUT_OF_MEMORY and the driver is not called),
 * call the driver, give the reservation back if the driver failed, else remember
 * (kind, handle) -> (bytes, device).  Frees that succeed give the bytes back; frees of unknown
 * handles pass through.  The map has its own mutex and is never touched on the launch path.
 *
 * Unified-memory clients (um.c): cuMemAlloc_v2 and cuMemAllocPitch_v2 are served by
 * cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL), reserved and counted the same way; their entries are
 * marked `um` so that um.c can prefetch the live ones.  The async, pool, VMM and array paths are
 * not converted (their memory cannot be managed): limited all the same, and said once per path
 * in the log.
 *
 * A destroyed context, and a primary context reset or released for the last time (device.c),
 * give back every allocation made while it was current.
 *
 * Memory from a pool (cuMemAllocAsync, cuMemAllocFromPoolAsync) stays counted after its free
 * while the pool keeps it, and a destroyed pool's allocations outlive it until freed
 * ("released automatically once there are no more outstanding allocations"), its reserve with
 * the last of them (pools.c).
 *
 * cuMemGetInfo_v2 / cuDeviceTotalMem_v2: total = the limit, free = limit - used by the whole
 * client (never below 0, never above what the driver says is free).  NVML (nvml.c) shows the
 * same figures. */
#include "internal.h"
#include "gemini/wire.h"

#include <stdlib.h>
#include <string.h>

enum kind { K_PTR = 1, K_HANDLE = 2, K_ARRAY = 3, K_MIPMAP = 4 };

struct entry {
    struct entry *next;
    uint64_t key;
    uint64_t bytes;
    int kind;
    short dev;
    short um; /* managed memory served for a plain allocation: prefetched at each grant */
    CUcontext ctx; /* current when allocated: destroying it frees the memory */
    uint64_t pool_ticket; /* lent by a memory pool (pools.c): its free goes back to it */
    uint64_t claim; /* taken for a free: the reconnection claims made by then (take) */
};

#define NBUCKETS 4096
static struct entry *buckets[NBUCKETS];
static uint64_t live[GEM_MAX_DEVICES];
static pthread_mutex_t map_m = PTHREAD_MUTEX_INITIALIZER;
/* The claims made by the time this thread's latest reservation was granted (reserve; a claim
 * is a lease dropped, lease.c): bytes reserved at a pod manager that is gone since are counted
 * by none, booked or given back. */
static __thread uint64_t claims_at_reserve;

/* The reconnections' claims of `live` so far: each drops the lease (claim_live), and the count
 * is the lease's (lease.c).  Read under map_m where it is compared with what is live. */
static uint64_t claims(int dev)
{
    return gem_lease_drops(dev);
}

static unsigned bucket(int kind, uint64_t key)
{
    uint64_t h = (key ^ ((uint64_t)kind << 61)) * 0x9E3779B97F4A7C15ull;
    return (unsigned)(h >> 52) % NBUCKETS;
}

void gem_mem_reset_after_fork(void)
{
    /* the parent's allocations are the parent's (accounted on its own connection) */
    pthread_mutex_init(&map_m, NULL);
    for (int i = 0; i < NBUCKETS; i++) {
        struct entry *e = buckets[i];
        while (e != NULL) {
            struct entry *next = e->next;
            free(e);
            e = next;
        }
        buckets[i] = NULL;
    }
    memset(live, 0, sizeof(live));
    gem_pools_reset_after_fork();
    gem_lease_reset_after_fork();
    gem_um_reset_after_fork();
}

struct gem_um_range *gem_mem_um_ranges(int dev, size_t *n)
{
    struct gem_um_range *out = NULL;
    size_t count = 0, cap = 0;
    pthread_mutex_lock(&map_m);
    for (int i = 0; i < NBUCKETS; i++)
        for (struct entry *e = buckets[i]; e != NULL; e = e->next) {
            if (!e->um || e->dev != dev)
                continue;
            if (count == cap) {
                size_t want = cap ? 2 * cap : 64;
                struct gem_um_range *bigger = realloc(out, want * sizeof(*out));
                if (bigger == NULL)
                    goto done; /* prefetch what we have: it is only a hint */
                out = bigger;
                cap = want;
            }
            out[count++] = (struct gem_um_range){(CUdeviceptr)e->key, e->bytes};
        }
done:
    pthread_mutex_unlock(&map_m);
    *n = count;
    return out;
}

uint64_t gem_mem_live_bytes(int dev)
{
    pthread_mutex_lock(&map_m);
    uint64_t v = live[dev];
    pthread_mutex_unlock(&map_m);
    return v;
}

/* The bytes a new connection claims: those live now, and those the memory pools keep.  A free
 * in flight took its allocation out before (take): it is not in them, and its bytes go back to
 * no one (taken_freed). */
static uint64_t claim_live(int dev)
{
    pthread_mutex_lock(&map_m);
    gem_lease_drop(dev); /* (under map_m: the count moves with what the claim reads) */
    uint64_t v = live[dev] + gem_pools_kept(dev); /* (lock order: map_m, then the pools') */
    pthread_mutex_unlock(&map_m);
    return v;
}

/* An allocation into the books (or back into them: taken_freed), `reserved` of its bytes at
 * the pod manager of claim number `stamp`.  Reached again since, the claim made on the new
 * connection left them out (the allocation was in the driver): claimed now, on the connection
 * open now only (a newer one's claim counts them: they are live). */
static void book(struct entry *e, uint64_t reserved, uint64_t stamp)
{
    unsigned b = bucket(e->kind, e->key);
    pthread_mutex_lock(&map_m);
    e->next = buckets[b];
    buckets[b] = e;
    live[e->dev] += e->bytes;
    int missed = claims(e->dev) != stamp;
    pthread_mutex_unlock(&map_m);
    int verdict = 0;
    if (missed && reserved > 0 && gem_ipc_mem_update_open(e->dev, reserved, GEM_MEM_CLAIM,
                                                          &verdict) == 0)
        GEM_LOG(GEM_LOG_DEBUG, "%llu B allocated across a reconnection claimed",
                (unsigned long long)reserved);
}

/* Is this thread's latest reservation still counted at the pod manager we reach now?  (Not
 * once a claim was made since: its bytes went back with the connection they were asked on.) */
static int reservation_counted(int dev)
{
    return claims(dev) == claims_at_reserve;
}

/* `pool_ticket`: its pool's book (pools.c; 0: none, its free gives its bytes back at once). */
static void remember(int kind, uint64_t key, uint64_t bytes, int dev, int um, uint64_t pool_ticket,
                     uint64_t reserved)
{
    struct entry *e = malloc(sizeof(*e));
    if (e == NULL) { /* cannot track it: give it back now rather than leak the reservation */
        gem_lease_give(dev, bytes + (pool_ticket ? gem_pool_returned(pool_ticket, bytes, 0) : 0));
        return;
    }
    __typeof__(&cuCtxGetCurrent) get_ctx = REAL_AUX(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    if (get_ctx != NULL && get_ctx(&ctx) != CUDA_SUCCESS)
        ctx = NULL;
    *e = (struct entry){.key = key, .bytes = bytes, .kind = kind, .dev = (short)dev,
                        .um = (short)um, .ctx = ctx, .pool_ticket = pool_ticket};
    book(e, reserved, claims_at_reserve);
}

/* A handle about to be freed: its entry out of the books before the free, not after.  Once
 * the driver has freed it, another thread's allocation may get the same address, and the
 * entry found after the free by that key was the new one's: 512 MiB live, uncounted (mini
 * driver).  NULL: not ours. */
static struct entry *take(int kind, uint64_t key)
{
    unsigned b = bucket(kind, key);
    struct entry *found = NULL;
    pthread_mutex_lock(&map_m);
    for (struct entry **p = &buckets[b]; *p != NULL; p = &(*p)->next)
        if ((*p)->kind == kind && (*p)->key == key) {
            found = *p;
            *p = found->next;
            live[found->dev] -= found->bytes;
            found->claim = claims(found->dev);
            break;
        }
    pthread_mutex_unlock(&map_m);
    return found;
}

/* The free that `e` was taken for (take) returned `r`: its bytes go back, or it goes back
 * into the books if the free failed. */
static void taken_freed(struct entry *e, CUresult r, uint64_t key)
{
    if (e == NULL) {
        if (r == CUDA_SUCCESS)
            GEM_LOG(GEM_LOG_DEBUG, "freeing unknown memory %#llx", (unsigned long long)key);
        return;
    }
    if (r != CUDA_SUCCESS) {
        book(e, e->bytes, e->claim); /* (a pool's too: claims count what pools keep, not lend) */
        return;
    }
    /* A pod manager reached meanwhile never counted these bytes: given to it, they came off
     * allocations still alive (which it caps its give-backs at), and those went uncounted.  A
     * pool's: kept in its book in the same step, so that no claim reads them in neither place. */
    pthread_mutex_lock(&map_m);
    int counted = e->claim == claims(e->dev);
    uint64_t back = e->pool_ticket == 0 ? (counted ? e->bytes : 0)
                                        : gem_pool_returned(e->pool_ticket, e->bytes, counted);
    pthread_mutex_unlock(&map_m);
    if (back > 0)
        gem_lease_give(e->dev, back);
    free(e);
}

/* The last MEM_LIMIT figures per device, for NVML while the pod manager cannot be reached. */
static _Atomic uint64_t seen_used[GEM_MAX_DEVICES], seen_limit[GEM_MAX_DEVICES];
static _Atomic uint32_t seen_devs; /* bit d: figures for device d */

static void note_figures(int dev, uint64_t used, uint64_t limit, uint64_t flags)
{
    gem_um_note_flags(dev, flags);
    atomic_store(&seen_used[dev], used);
    atomic_store(&seen_limit[dev], limit);
    atomic_fetch_or(&seen_devs, 1u << dev);
}

void gem_mem_limit(int dev, uint64_t *used, uint64_t *limit)
{
    uint64_t flags = 0;
    gem_ipc_mem_limit(dev, used, limit, &flags);
    note_figures(dev, *used, *limit, flags);
}

int gem_mem_view(int dev, uint64_t *used, uint64_t *limit)
{
    uint64_t flags = 0;
    if (gem_ipc_mem_limit_once(dev, used, limit, &flags) == 0) {
        note_figures(dev, *used, *limit, flags);
        return 0;
    }
    if (!(atomic_load(&seen_devs) & (1u << dev)))
        return -1;
    *used = atomic_load(&seen_used[dev]);
    *limit = atomic_load(&seen_limit[dev]);
    return 1;
}

uint64_t gem_mem_used_seen(int dev, uint64_t used)
{
    uint64_t mine_unspent = gem_lease_spare(dev); /* counted as used, yet ours to allocate */
    return used > mine_unspent ? used - mine_unspent : 0;
}

int gem_mem_on_connect(int dev, int reconnect)
{
    gem_um_forget_flags(dev); /* a new pod manager may say otherwise: ask when needed */
    if (!reconnect)
        return 0;
    /* The pod manager gave this process's bytes back when the old connection closed, and the
     * one we reached never granted our lease (claim_live drops it); the allocations are still
     * alive: claim them. */
    uint64_t live = claim_live(dev);
    int verdict = 0;
    if (live == 0)
        return 0;
    if (gem_ipc_mem_update_once(dev, live, GEM_MEM_CLAIM, &verdict) != 0)
        return -1; /* lost again (the next connection claims them), or refused as a whole (a
                    * pod manager that does not know its limit yet): again before the next
                    * request (dropped, they went uncounted for good) */
    if (!verdict) /* (a pod manager from before claims, which took it as an allocation) */
        GEM_LOG(GEM_LOG_WARN, "pod manager refused to take back %llu B still allocated",
                (unsigned long long)live);
    return 0;
}

void gem_mem_forget_ctx(CUcontext ctx)
{
    if (ctx == NULL)
        return; /* allocations made with no context current are not tied to one */
    uint64_t back[GEM_MAX_DEVICES] = {0};
    struct entry *gone = NULL;
    pthread_mutex_lock(&map_m);
    for (int i = 0; i < NBUCKETS; i++)
        for (struct entry **p = &buckets[i]; *p != NULL;) {
            struct entry *e = *p;
            /* VMM handles belong to the device, not to the context: they stay until released. */
            if (e->ctx != ctx || e->kind == K_HANDLE) {
                p = &e->next;
                continue;
            }
            *p = e->next;
            live[e->dev] -= e->bytes;
            back[e->dev] += e->bytes;
            e->next = gone;
            gone = e;
        }
    pthread_mutex_unlock(&map_m);
    while (gone != NULL) {
        struct entry *e = gone;
        gone = e->next;
        if (e->pool_ticket != 0) /* (its bytes are in back[] already) */
            back[e->dev] += gem_pool_returned(e->pool_ticket, e->bytes, 0);
        free(e);
    }
    for (int d = 0; d < GEM_MAX_DEVICES; d++)
        if (back[d] > 0) {
            GEM_LOG(GEM_LOG_DEBUG, "context destroyed: %llu B back", (unsigned long long)back[d]);
            gem_lease_give(d, back[d]);
        }
    gem_pools_settle(); /* a primary context's reset takes its device's pools' reserves too */
}

/* CUDA_SUCCESS: reserved (or nothing to reserve); else what the allocation returns: over the
 * limit, or on a device without a pod manager (device.c logged that). */
static CUresult reserve(int dev, uint64_t bytes, const char *what)
{
    if (dev < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (bytes == 0) {
        claims_at_reserve = claims(dev);
        return CUDA_SUCCESS;
    }
    if (gem_lease_take(dev, bytes, &claims_at_reserve) ||
        (gem_pools_settle() && gem_lease_take(dev, bytes, &claims_at_reserve)))
        return CUDA_SUCCESS; /* (the second time: the pools had released what they kept) */
    GEM_LOG(GEM_LOG_WARN, "%s of %llu B refused: over the memory limit", what,
            (unsigned long long)bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void give_back(int dev, uint64_t bytes)
{
    if (dev >= 0 && bytes > 0 && reservation_counted(dev))
        gem_lease_give(dev, bytes);
}

/* After the driver call: track on success, return the reservation on failure. */
static CUresult settle_as(CUresult r, int dev, int kind, uint64_t key, uint64_t bytes, int um)
{
    if (dev < 0 || bytes == 0)
        return r;
    if (r == CUDA_SUCCESS)
        remember(kind, key, bytes, dev, um, 0, bytes);
    else
        give_back(dev, bytes);
    return r;
}

static CUresult settle(CUresult r, int dev, int kind, uint64_t key, uint64_t bytes)
{
    return settle_as(r, dev, kind, key, bytes, 0);
}

static int um_client(int dev)
{
    return dev >= 0 && (gem_um_flags(dev) & GEM_MEM_FLAG_UNIFIED_MEMORY) != 0;
}

/* A UM client allocating on a path that cannot be managed (async, pool, VMM, arrays): device
 * memory, counted against the limit like any other, but it does not page out when the UM
 * clients together oversubscribe the card.  Said once per path, never silently. */
static void note_not_managed(int dev, const char *sym, _Atomic int *said)
{
    if (!um_client(dev) || atomic_exchange(said, 1))
        return;
    GEM_LOG(GEM_LOG_WARN,
            "%s: unified-memory client, but this path cannot be managed: served as device memory "
            "(counted against the limit; it does not page out)",
            sym);
}

/* Reserve, call the driver, settle.  `managed`: the path allocates managed memory itself. */
#define ALLOC_AS(sym, managed, dev, bytes, kind, keyexpr, call)                                  \
    do {                                                                                         \
        GEM_ENTER(sym);                                                                          \
        if (GEM_PASS())                                                                          \
            return REAL(sym) call;                                                               \
        int d_ = (dev);                                                                          \
        uint64_t b_ = (bytes);                                                                   \
        static _Atomic int said_;                                                                \
        if (!(managed))                                                                          \
            note_not_managed(d_, #sym, &said_);                                                  \
        CUresult q_ = reserve(d_, b_, #sym);                                                     \
        if (q_ != CUDA_SUCCESS)                                                                  \
            return q_;                                                                           \
        CUresult r_ = REAL(sym) call;                                                            \
        return settle(r_, d_, kind, r_ == CUDA_SUCCESS ? (uint64_t)(keyexpr) : 0, b_);           \
    } while (0)

/* The paths that are never converted to managed memory (async, pool, VMM, arrays). */
#define ALLOC(sym, ...) ALLOC_AS(sym, 0, __VA_ARGS__)

/* From a memory pool: what the pool kept of earlier frees is counted already and serves the
 * allocation first; only the rest is reserved (pools.c). */
static CUresult pool_alloc_done(CUresult r, CUdeviceptr *dptr, int dev, uint64_t bytes,
                                const struct gem_pool_draw *d)
{
    if (r != CUDA_SUCCESS) {
        give_back(dev, bytes - d->drawn);
        gem_pool_undraw(d, dev);
    } else {
        remember(K_PTR, *dptr, bytes, dev, 0, gem_pool_lent(d, dev, bytes), bytes - d->drawn);
    }
    return r;
}

/* Captured into a graph, an allocation is a graph memory node: made from the graph's pool at
 * each launch, not from `pool` now (counted as a plain allocation, at capture). */
#define POOL_ALLOC(sym, poolexpr, bytes, stream, pts, call)                                      \
    do {                                                                                         \
        GEM_ENTER(sym);                                                                          \
        if (GEM_PASS())                                                                          \
            return REAL(sym) call;                                                               \
        int d_ = gem_current_dev();                                                              \
        uint64_t b_ = (bytes);                                                                   \
        static _Atomic int said_;                                                                \
        note_not_managed(d_, #sym, &said_);                                                      \
        if (d_ < 0 || b_ == 0)                                                                   \
            return d_ < 0 ? CUDA_ERROR_INVALID_DEVICE : REAL(sym) call;                          \
        CUmemoryPool p_ = gem_inflight_capturing((stream), (pts)) ? NULL : (poolexpr);           \
        struct gem_pool_draw draw_ = {0};                                                        \
        if (p_ != NULL)                                                                          \
            gem_pool_draw(p_, d_, b_, &draw_);                                                   \
        CUresult q_ = reserve(d_, b_ - draw_.drawn, #sym);                                       \
        if (q_ != CUDA_SUCCESS) {                                                                \
            gem_pool_undraw(&draw_, d_);                                                         \
            return q_;                                                                           \
        }                                                                                        \
        CUresult r_ = REAL(sym) call;                                                            \
        if (p_ == NULL)                                                                          \
            return settle(r_, d_, K_PTR, r_ == CUDA_SUCCESS ? *dptr : 0, b_);                    \
        return pool_alloc_done(r_, dptr, d_, b_, &draw_);                                        \
    } while (0)

#define FREE(sym, kind, key, call)                                                               \
    do {                                                                                         \
        GEM_ENTER(sym);                                                                          \
        if (GEM_PASS())                                                                          \
            return REAL(sym) call;                                                               \
        struct entry *e_ = take(kind, (uint64_t)(key));                                          \
        CUresult r_ = REAL(sym) call;                                                            \
        taken_freed(e_, r_, (uint64_t)(key));                                                    \
        return r_;                                                                               \
    } while (0)

GEM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    GEM_ENTER(cuMemAlloc_v2);
    if (GEM_PASS())
        return REAL(cuMemAlloc_v2)(dptr, bytesize);
    int dev = gem_current_dev();
    int um = um_client(dev);
    CUresult q = reserve(dev, bytesize, "cuMemAlloc_v2");
    if (q != CUDA_SUCCESS)
        return q;
    CUresult r = um ? REAL(cuMemAllocManaged)(dptr, bytesize, CU_MEM_ATTACH_GLOBAL)
                    : REAL(cuMemAlloc_v2)(dptr, bytesize);
    return settle_as(r, dev, K_PTR, r == CUDA_SUCCESS ? *dptr : 0, bytesize, um);
}

GEM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    ALLOC_AS(cuMemAllocManaged, 1, gem_current_dev(), bytesize, K_PTR, *dptr,
             (dptr, bytesize, flags));
}

GEM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    POOL_ALLOC(cuMemAllocAsync, gem_pool_current(), bytesize, s, 0, (dptr, bytesize, s));
}

GEM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    POOL_ALLOC(cuMemAllocAsync_ptsz, gem_pool_current(), bytesize, s, 1, (dptr, bytesize, s));
}

GEM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                            CUstream s)
{
    POOL_ALLOC(cuMemAllocFromPoolAsync, pool, bytesize, s, 0, (dptr, bytesize, pool, s));
}

GEM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                 CUmemoryPool pool, CUstream s)
{
    POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz, pool, bytesize, s, 1, (dptr, bytesize, pool, s));
}

static int device_of_prop(const CUmemAllocationProp *prop)
{
    if (prop != NULL && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        return gem_dev_of_ordinal(prop->location.id);
    return gem_current_dev();
}

/* Host memory made through the VMM API (NCCL's buffers, with its cuMem host allocations on):
 * not the GPU's, so not counted against its limit. */
static int on_host(const CUmemAllocationProp *prop)
{
    return prop != NULL && (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
                            prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                            prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
}

GEM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (on_host(prop)) {
        GEM_ENTER(cuMemCreate);
        return REAL(cuMemCreate)(handle, size, prop, flags);
    }
    ALLOC(cuMemCreate, device_of_prop(prop), size, K_HANDLE, *handle, (handle, size, prop, flags));
}

/* Bytes per element of one channel (all CUarray_format values; unknown ones count 4). */
static uint64_t format_bytes(CUarray_format f, unsigned channels)
{
    switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return channels;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2ull * channels;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4ull * channels;
    case CU_AD_FORMAT_NV12:
        return 2; /* 1.5 B per pixel, rounded up */
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X1:
        return 1;
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1:
        return 2;
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X2:
        return 4;
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X4:
        return 8;
    default:
        return 4ull * (channels ? channels : 1); /* block-compressed and newer: over-estimate */
    }
}

static uint64_t dim(size_t v)
{
    return v ? v : 1;
}

static uint64_t array_bytes(const CUDA_ARRAY_DESCRIPTOR *d)
{
    return d ? dim(d->Width) * dim(d->Height) * format_bytes(d->Format, d->NumChannels) : 0;
}

/* A sparse array, or one whose memory is mapped later, has none of its own: its pages come
 * from cuMemCreate handles, counted there, mapped by cuMemMapArrayAsync (a 1 GiB sparse array
 * under a 512 MiB limit was refused, its memory counted as if it had it). */
static int memory_of_its_own(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    return d != NULL && (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) == 0;
}

static uint64_t array3d_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (!memory_of_its_own(d))
        return 0;
    return dim(d->Width) * dim(d->Height) * dim(d->Depth) * format_bytes(d->Format, d->NumChannels);
}

static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    if (!memory_of_its_own(d))
        return 0;
    int layered = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    uint64_t w = dim(d->Width), h = dim(d->Height), z = dim(d->Depth), total = 0;
    for (unsigned l = 0; l < (levels ? levels : 1); l++) {
        total += w * h * z * format_bytes(d->Format, d->NumChannels);
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : 1;
        if (!layered)
            z = z > 1 ? z / 2 : 1;
    }
    return total;
}

GEM_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    ALLOC(cuArrayCreate_v2, gem_current_dev(), array_bytes(desc), K_ARRAY, (uintptr_t)*pHandle,
          (pHandle, desc));
}

GEM_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    ALLOC(cuArray3DCreate_v2, gem_current_dev(), array3d_bytes(desc), K_ARRAY,
          (uintptr_t)*pHandle, (pHandle, desc));
}

GEM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                           const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                           unsigned int numMipmapLevels)
{
    ALLOC(cuMipmappedArrayCreate, gem_current_dev(), mipmap_bytes(desc, numMipmapLevels), K_MIPMAP,
          (uintptr_t)*pHandle, (pHandle, desc, numMipmapLevels));
}

/* Pitch for a UM client: managed memory has no pitched allocator, so the rows are laid out
 * 512-byte aligned (the alignment the guess below assumes) in one managed allocation. */
static CUresult alloc_pitch_managed(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes, int dev,
                                    uint64_t bytes)
{
    if (dptr == NULL || pPitch == NULL || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult q = reserve(dev, bytes, "cuMemAllocPitch_v2");
    if (q != CUDA_SUCCESS)
        return q;
    CUresult r = REAL(cuMemAllocManaged)(dptr, (size_t)bytes, CU_MEM_ATTACH_GLOBAL);
    if (r == CUDA_SUCCESS)
        *pPitch = (size_t)(bytes / Height);
    return settle_as(r, dev, K_PTR, r == CUDA_SUCCESS ? *dptr : 0, bytes, 1);
}

/* Pitch: reserve WidthInBytes rounded up to 512 B x Height before (the pitch is not known
 * yet), then settle to the real pitch x Height. */
GEM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                       size_t Height, unsigned int ElementSizeBytes)
{
    GEM_ENTER(cuMemAllocPitch_v2);
    if (GEM_PASS())
        return REAL(cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    int dev = gem_current_dev();
    uint64_t guess = ((uint64_t)WidthInBytes + 511) / 512 * 512 * Height;
    if (um_client(dev))
        return alloc_pitch_managed(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes, dev,
                                   guess);
    CUresult q = reserve(dev, guess, "cuMemAllocPitch_v2");
    if (q != CUDA_SUCCESS)
        return q;
    CUresult r = REAL(cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (r != CUDA_SUCCESS || guess == 0)
        return settle(r, dev, K_PTR, 0, guess);
    uint64_t actual = (uint64_t)*pPitch * Height;
    uint64_t first = claims_at_reserve; /* (the guess's: the rest may come from a newer one) */
    if (actual > guess && reserve(dev, actual - guess, "cuMemAllocPitch_v2") != CUDA_SUCCESS) {
        REAL(cuMemFree_v2)(*dptr);
        claims_at_reserve = first;
        give_back(dev, guess);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (actual < guess)
        give_back(dev, guess - actual);
    claims_at_reserve = first; /* what a claim since left out: the guess's part */
    remember(K_PTR, *dptr, actual, dev, 0, 0, actual < guess ? actual : guess);
    return r;
}

GEM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    FREE(cuMemFree_v2, K_PTR, dptr, (dptr));
}

GEM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    FREE(cuMemFreeAsync, K_PTR, dptr, (dptr, s));
}

GEM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    FREE(cuMemFreeAsync_ptsz, K_PTR, dptr, (dptr, s));
}

GEM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    FREE(cuMemRelease, K_HANDLE, handle, (handle));
}

GEM_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    FREE(cuArrayDestroy, K_ARRAY, (uintptr_t)hArray, (hArray));
}

GEM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    FREE(cuMipmappedArrayDestroy, K_MIPMAP, (uintptr_t)hMipmappedArray, (hMipmappedArray));
}

GEM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    GEM_ENTER(cuMemGetInfo_v2);
    CUresult r = REAL(cuMemGetInfo_v2)(free_bytes, total_bytes);
    int dev = GEM_PASS() ? -1 : gem_current_dev();
    if (r != CUDA_SUCCESS || dev < 0)
        return r;
    gem_pools_settle(); /* what the pools released since is free again */
    uint64_t used = 0, limit = 0;
    gem_mem_limit(dev, &used, &limit);
    used = gem_mem_used_seen(dev, used);
    uint64_t left = used >= limit ? 0 : limit - used;
    if (free_bytes != NULL && left < *free_bytes)
        *free_bytes = left;
    if (total_bytes != NULL)
        *total_bytes = limit;
    return r;
}

GEM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device)
{
    GEM_ENTER(cuDeviceTotalMem_v2);
    CUresult r = REAL(cuDeviceTotalMem_v2)(bytes, device);
    int dev = GEM_PASS() ? -1 : gem_dev_of_ordinal(device);
    if (r != CUDA_SUCCESS || dev < 0 || bytes == NULL)
        return r;
    uint64_t used = 0, limit = 0;
    gem_mem_limit(dev, &used, &limit);
    *bytes = limit;
    return r;
}
