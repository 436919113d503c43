/* Memory pools' reserves: what a pool keeps of the memory freed into it stays counted.
 *
 * Why: cuMemFreeAsync (and cuMemFree of pool memory) gives the block back to its pool, not to
 * the device.  The pool keeps it until a synchronisation finds it over its release threshold
 * (default 0, raised by PyTorch's cudaMallocAsync backend and JAX's cuda_async allocator to keep
 * everything), or until cuMemPoolTrimTo.  Counted as freed at once, the same 400 MiB could be
 * held by the pool and allocated again through cuMemAlloc: 800 MiB on the card under a 512 MiB
 * limit.
 *
 * So per pool this process allocates from, `lent` is what its live allocations hold and `kept`
 * what it still counts of its frees.  A free moves its bytes from lent to kept; an allocation
 * from the pool draws on kept first (the pool serves it from its reserve) and reserves at the
 * pod manager only the rest.  `kept` goes back (gem_lease_give) once the driver says the pool
 * reserves less than lent + kept: at each allocation from it, after a synchronisation, a trim,
 * its destruction, a cuMemGetInfo, and before an allocation is refused (gem_pools_settle).
 * The driver's own rounding of its reserve is not counted (as on the other paths).  The memory
 * books (memory.c) ask `gem_pools_kept` for a new pod manager's claim. */
#include "internal.h"

#include <string.h>

#define MAX_POOLS 64

struct pool_book {
    CUmemoryPool pool; /* NULL: a free slot */
    int dev;
    int destroyed; /* its reserve went with it; what it lends goes back as it is freed */
    uint64_t lent, kept;
};

static struct pool_book books[MAX_POOLS];
static _Atomic uint64_t kept_total; /* any kept at all: a synchronisation settles only then */
static pthread_mutex_t books_m = PTHREAD_MUTEX_INITIALIZER;

void gem_pools_reset_after_fork(void)
{
    pthread_mutex_init(&books_m, NULL);
    memset(books, 0, sizeof(books));
    atomic_store(&kept_total, 0);
}

/* books_m held.  The pool's book, made if `make` (NULL: none, or no room: not tracked, its
 * frees then go back at once as before). */
static struct pool_book *book_of(CUmemoryPool pool, int dev, int make)
{
    struct pool_book *free_slot = NULL;
    for (int i = 0; i < MAX_POOLS; i++) {
        if (books[i].pool == pool && !books[i].destroyed)
            return &books[i];
        if (books[i].pool == NULL && free_slot == NULL)
            free_slot = &books[i];
    }
    if (!make || free_slot == NULL)
        return NULL;
    *free_slot = (struct pool_book){.pool = pool, .dev = dev};
    return free_slot;
}

/* books_m held.  A book that holds nothing any more frees its slot. */
static void drop_if_empty(struct pool_book *b)
{
    if (b->lent == 0 && b->kept == 0)
        memset(b, 0, sizeof(*b));
}

static void set_kept(struct pool_book *b, uint64_t kept)
{
    atomic_fetch_sub(&kept_total, b->kept - kept);
    b->kept = kept;
}

CUmemoryPool gem_pool_current(void)
{
    __typeof__(&cuCtxGetDevice) get_dev = REAL_AUX(cuCtxGetDevice);
    __typeof__(&cuDeviceGetMemPool) get_pool = REAL_AUX(cuDeviceGetMemPool);
    CUdevice ordinal;
    CUmemoryPool pool = NULL;
    if (get_dev == NULL || get_pool == NULL || get_dev(&ordinal) != CUDA_SUCCESS ||
        get_pool(&pool, ordinal) != CUDA_SUCCESS)
        return NULL;
    return pool;
}

/* books_m held.  What of `b`'s kept bytes its pool no longer reserves (0: all still there).
 * A pool the driver cannot say of (destroyed, its context gone) reserves nothing. */
static uint64_t released(struct pool_book *b)
{
    __typeof__(&cuMemPoolGetAttribute) get = REAL_AUX(cuMemPoolGetAttribute);
    cuuint64_t reserved = 0;
    if (b->destroyed || get == NULL ||
        get(b->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS)
        reserved = 0;
    uint64_t spare = reserved > b->lent ? reserved - b->lent : 0;
    return b->kept > spare ? b->kept - spare : 0;
}

/* books_m held.  Settle `b`, adding what goes back to back[dev]. */
static void settle_locked(struct pool_book *b, uint64_t *back)
{
    uint64_t gone = released(b);
    if (gone == 0)
        return;
    set_kept(b, b->kept - gone);
    back[b->dev] += gone;
    drop_if_empty(b);
}

static void give_all(const uint64_t *back)
{
    for (int d = 0; d < GEM_MAX_DEVICES; d++)
        if (back[d] > 0) {
            GEM_LOG(GEM_LOG_DEBUG, "memory pools released %llu B", (unsigned long long)back[d]);
            gem_lease_give(d, back[d]);
        }
}

int gem_pools_settle(void)
{
    if (atomic_load(&kept_total) == 0)
        return 0;
    uint64_t back[GEM_MAX_DEVICES] = {0};
    pthread_mutex_lock(&books_m);
    for (int i = 0; i < MAX_POOLS; i++)
        if (books[i].pool != NULL && books[i].kept > 0)
            settle_locked(&books[i], back);
    pthread_mutex_unlock(&books_m);
    give_all(back);
    for (int d = 0; d < GEM_MAX_DEVICES; d++)
        if (back[d] > 0)
            return 1;
    return 0;
}

uint64_t gem_pool_draw(CUmemoryPool pool, int dev, uint64_t bytes)
{
    uint64_t back[GEM_MAX_DEVICES] = {0};
    uint64_t drawn = 0;
    pthread_mutex_lock(&books_m);
    struct pool_book *b = book_of(pool, dev, 0);
    if (b != NULL && b->kept > 0) {
        settle_locked(b, back);
        if (b->pool == pool) { /* (not dropped by settling) */
            drawn = b->kept < bytes ? b->kept : bytes;
            set_kept(b, b->kept - drawn);
        }
    }
    pthread_mutex_unlock(&books_m);
    give_all(back);
    return drawn;
}

void gem_pool_undraw(CUmemoryPool pool, int dev, uint64_t drawn)
{
    if (drawn == 0)
        return;
    pthread_mutex_lock(&books_m);
    struct pool_book *b = book_of(pool, dev, 1);
    if (b != NULL) {
        atomic_fetch_add(&kept_total, drawn);
        b->kept += drawn;
    }
    pthread_mutex_unlock(&books_m);
    if (b == NULL)
        gem_lease_give(dev, drawn);
}

int gem_pool_lent(CUmemoryPool pool, int dev, uint64_t bytes)
{
    pthread_mutex_lock(&books_m);
    struct pool_book *b = book_of(pool, dev, 1);
    if (b != NULL)
        b->lent += bytes;
    pthread_mutex_unlock(&books_m);
    return b != NULL;
}

void gem_pool_returned(CUmemoryPool pool, int dev, uint64_t bytes, int counted)
{
    int keep = 0;
    pthread_mutex_lock(&books_m);
    struct pool_book *b = book_of(pool, dev, 0);
    for (int i = 0; b == NULL && i < MAX_POOLS; i++)
        if (books[i].pool == pool) /* destroyed since it lent this */
            b = &books[i];
    if (b != NULL) {
        b->lent -= bytes < b->lent ? bytes : b->lent;
        keep = counted && !b->destroyed;
        if (keep) {
            atomic_fetch_add(&kept_total, bytes);
            b->kept += bytes;
        }
        drop_if_empty(b);
    }
    pthread_mutex_unlock(&books_m);
    if (counted && !keep)
        gem_lease_give(dev, bytes);
}

void gem_pool_destroyed(CUmemoryPool pool)
{
    uint64_t back[GEM_MAX_DEVICES] = {0};
    pthread_mutex_lock(&books_m);
    for (int i = 0; i < MAX_POOLS; i++)
        if (books[i].pool == pool && !books[i].destroyed) {
            books[i].destroyed = 1;
            settle_locked(&books[i], back); /* all it kept: a destroyed pool reserves nothing */
        }
    pthread_mutex_unlock(&books_m);
    give_all(back);
}

uint64_t gem_pools_kept(int dev)
{
    uint64_t total = 0;
    pthread_mutex_lock(&books_m);
    for (int i = 0; i < MAX_POOLS; i++)
        if (books[i].pool != NULL && books[i].dev == dev)
            total += books[i].kept;
    pthread_mutex_unlock(&books_m);
    return total;
}

GEM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    GEM_ENTER(cuMemPoolTrimTo);
    CUresult r = REAL(cuMemPoolTrimTo)(pool, minBytesToKeep);
    if (r == CUDA_SUCCESS && !GEM_PASS())
        gem_pools_settle();
    return r;
}

GEM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    GEM_ENTER(cuMemPoolDestroy);
    CUresult r = REAL(cuMemPoolDestroy)(pool);
    if (r == CUDA_SUCCESS && !GEM_PASS())
        gem_pool_destroyed(pool);
    return r;
}
