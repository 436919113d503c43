/* Memory pools of the simulated GPU, as the driver's behave where the hook's accounting can
 * tell: cuMemAllocAsync allocates from its device's current pool, cuMemAllocFromPoolAsync from
 * the one named.  A pool reserves device memory (charged to the process, memory.c) and keeps
 * what is freed into it: the reserve goes back to the device only at the next synchronisation
 * (stream, event or context) and down to the pool's release threshold (default 0), at
 * cuMemPoolTrimTo, or as it is destroyed (a pool destroyed while it lends keeps all of its
 * reserve until its last allocation is freed, as the driver's documentation says).  The
 * reserve serves any allocation that fits in what it has spare, and grows by the shortfall;
 * with GEMINI_FAKE_POOL_FRAGMENTED=1 it serves none (its spare in pieces too small for
 * anything asked), and every allocation grows it by its whole size. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "fake_internal.h"

#define POOL_MAGIC 0x504f4f4cu

struct CUmemPoolHandle_st {
    uint32_t magic;
    int dev;
    int destroyed; /* by cuMemPoolDestroy: gone once its last allocation is freed */
    uint64_t reserved, used, threshold, reserved_high, used_high;
    struct CUmemPoolHandle_st *next; /* every pool ever made (they are few, and never freed) */
};

static pthread_mutex_t pools_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUmemPoolHandle_st *all_pools;
static struct CUmemPoolHandle_st *default_pool[FAKE_MAX_DEVICES];
static struct CUmemPoolHandle_st *current_pool[FAKE_MAX_DEVICES];

static struct CUmemPoolHandle_st *pool_new(int dev)
{
    struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->magic = POOL_MAGIC;
    p->dev = dev;
    p->next = all_pools;
    all_pools = p;
    return p;
}

static int pool_ok(CUmemoryPool p)
{
    return p != NULL && p->magic == POOL_MAGIC && !p->destroyed;
}

static int fragmented(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("GEMINI_FAKE_POOL_FRAGMENTED");
        v = e != NULL && e[0] == '1';
    }
    return v;
}

static int ordinal_ok(int dev)
{
    return dev >= 0 && dev < fake_device_count() && dev < FAKE_MAX_DEVICES;
}

/* pools_mu held.  The device's default pool, made at its first use. */
static struct CUmemPoolHandle_st *default_of(int dev)
{
    if (default_pool[dev] == NULL)
        default_pool[dev] = pool_new(dev);
    return default_pool[dev];
}

/* pools_mu held.  Lower the reserve to `keep` (never under what is lent out). */
static void trim(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    uint64_t floor = p->used > keep ? p->used : keep;
    if (p->reserved <= floor)
        return;
    fake_mem_uncharge(p->dev, p->reserved - floor);
    p->reserved = floor;
}

static CUresult pool_alloc_locked(CUdeviceptr *dptr, uint64_t bytes, struct CUmemPoolHandle_st *p)
{
    if (dptr == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t spare = fragmented() ? 0 : p->reserved - p->used;
    uint64_t grow = bytes > spare ? bytes - spare : 0;
    if (grow > 0) {
        CUresult rc = fake_mem_charge(p->dev, grow);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    uint64_t addr = fake_addr_new(bytes);
    if (addr == 0 || fake_alloc_put_owned(addr, bytes, p->dev, FAKE_ALLOC_POOL, p) != 0) {
        if (grow > 0)
            fake_mem_uncharge(p->dev, grow);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->reserved += grow;
    p->used += bytes;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    if (p->used > p->used_high)
        p->used_high = p->used;
    *dptr = (CUdeviceptr)addr;
    return CUDA_SUCCESS;
}

CUresult fake_pool_alloc_current(CUdeviceptr *dptr, uint64_t bytes, int dev)
{
    if (!ordinal_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&pools_mu);
    struct CUmemPoolHandle_st *p = current_pool[dev] != NULL ? current_pool[dev] : default_of(dev);
    CUresult rc = p == NULL ? CUDA_ERROR_OUT_OF_MEMORY : pool_alloc_locked(dptr, bytes, p);
    pthread_mutex_unlock(&pools_mu);
    return rc;
}

CUresult fake_pool_alloc(CUdeviceptr *dptr, uint64_t bytes, CUmemoryPool pool)
{
    pthread_mutex_lock(&pools_mu);
    CUresult rc = pool_ok(pool) ? pool_alloc_locked(dptr, bytes, pool) : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&pools_mu);
    return rc;
}

int fake_pool_free(CUdeviceptr dptr)
{
    uint64_t bytes;
    void *owner;
    if (fake_alloc_take_owned(dptr, FAKE_KIND_BIT(FAKE_ALLOC_POOL), &bytes, &owner) != 0)
        return -1;
    struct CUmemPoolHandle_st *p = owner;
    pthread_mutex_lock(&pools_mu);
    p->used -= bytes;
    if (p->destroyed && p->used == 0)
        trim(p, 0);
    pthread_mutex_unlock(&pools_mu);
    return 0;
}

void fake_pools_sync(void)
{
    pthread_mutex_lock(&pools_mu);
    for (struct CUmemPoolHandle_st *p = all_pools; p != NULL; p = p->next)
        trim(p, p->threshold);
    pthread_mutex_unlock(&pools_mu);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    FAKE_ENTER(cuMemPoolCreate);
    FAKE_NEED_INIT();
    if (pool == NULL || poolProps == NULL ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    int dev = poolProps->location.id;
    if (!ordinal_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&pools_mu);
    struct CUmemPoolHandle_st *p = pool_new(dev);
    pthread_mutex_unlock(&pools_mu);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool = p;
    return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    FAKE_ENTER(cuMemPoolDestroy);
    FAKE_NEED_INIT();
    pthread_mutex_lock(&pools_mu);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (pool_ok(pool) && pool != default_pool[pool->dev]) {
        pool->destroyed = 1;
        if (pool->used == 0)
            trim(pool, 0);
        if (current_pool[pool->dev] == pool)
            current_pool[pool->dev] = NULL;
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&pools_mu);
    return rc;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    FAKE_ENTER(cuMemPoolTrimTo);
    FAKE_NEED_INIT();
    pthread_mutex_lock(&pools_mu);
    int ok = pool_ok(pool);
    if (ok)
        trim(pool, minBytesToKeep);
    pthread_mutex_unlock(&pools_mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* pools_mu held.  One attribute of a live pool read into `value`. */
static CUresult get_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(uint64_t *)value = pool->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(uint64_t *)value = pool->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(uint64_t *)value = pool->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(uint64_t *)value = pool->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(uint64_t *)value = pool->used_high; break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)value = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* pools_mu held.  One attribute of a live pool set from `value` (a high mark: reset). */
static CUresult set_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: pool->threshold = *(uint64_t *)value; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: pool->reserved_high = pool->reserved; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: pool->used_high = pool->used; break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* An attribute's call: checked, and `fn` run on the pool under the lock. */
static CUresult with_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value,
                               CUresult (*fn)(CUmemoryPool, CUmemPool_attribute, void *))
{
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pools_mu);
    CUresult rc = pool_ok(pool) ? fn(pool, attr, value) : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&pools_mu);
    return rc;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FAKE_ENTER(cuMemPoolGetAttribute);
    FAKE_NEED_INIT();
    return with_attribute(pool, attr, value, get_attribute);
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FAKE_ENTER(cuMemPoolSetAttribute);
    FAKE_NEED_INIT();
    return with_attribute(pool, attr, value, set_attribute);
}

/* The device's default pool, or (`current`) the one cuMemAllocAsync allocates from. */
static CUresult device_pool(CUmemoryPool *out, CUdevice dev, int current)
{
    if (out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ordinal_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&pools_mu);
    *out = current && current_pool[dev] != NULL ? current_pool[dev] : default_of(dev);
    pthread_mutex_unlock(&pools_mu);
    return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    FAKE_ENTER(cuDeviceGetDefaultMemPool);
    FAKE_NEED_INIT();
    return device_pool(pool_out, dev, 0);
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    FAKE_ENTER(cuDeviceGetMemPool);
    FAKE_NEED_INIT();
    return device_pool(pool, dev, 1);
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    FAKE_ENTER(cuDeviceSetMemPool);
    FAKE_NEED_INIT();
    if (!ordinal_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&pools_mu);
    CUresult rc = pool_ok(pool) && pool->dev == dev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        current_pool[dev] = pool;
    pthread_mutex_unlock(&pools_mu);
    return rc;
}
