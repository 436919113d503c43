/* Memory pools' reserves: what a pool keeps of the memory freed into it stays counted.
 *
 * Why: cuMemFreeAsync (and cuMemFree of pool memory) gives the block back to its pool, not to
 * the device.  The pool keeps it until a synchronisation finds it over its release threshold
 * (default 0, raised by PyTorch's cudaMallocAsync backend and JAX's cuda_async allocator to keep
 * everything), or until cuMemPoolTrimTo.  Counted as freed at once, the same 400 MiB could be
 * held by the pool and allocated again through cuMemAlloc: 800 MiB on the card under a 512 MiB
 * limit.
 *
 * So per pool and device this process allocates from, a book: `lent` is what its live
 * allocations hold, `kept` what it still counts of their frees, `drawing` what allocations in
 * flight took from `kept`.  A free moves its bytes from lent to kept; an allocation from the
 * pool draws on kept first (the pool serves it from its reserve) and reserves at the pod
 * manager only the rest.  If the pool grew all the same (its reserve fragmented, or not yet
 * reusable in stream order), what it drew is reserved after the driver call.  `kept` goes back
 * (gem_lease_give) once the driver says the pool reserves less than lent + kept + drawing:
 * after a synchronisation, a trim, a cuMemGetInfo, a destroyed context, and before an
 * allocation is refused (gem_pools_settle).  A destroyed pool keeps its reserve until its last
 * allocation is freed, as the driver's does.  The driver's own rounding of its reserve is not
 * counted (as on the other paths).  An allocation's entry (memory.c) holds its book's ticket:
 * slot and generation, so that a pool handle reused after a destroy is another book. */
#include "internal.h"

#include <string.h>

#define MAX_POOLS 64

struct pool_book {
    CUmemoryPool pool; /* NULL: a free slot */
    int dev;
    int destroyed; /* by cuMemPoolDestroy: its reserve goes once nothing is lent */
    uint32_t gen;  /* tickets of an earlier book in this slot are stale */
    uint64_t lent, kept, drawing;
};

static struct pool_book books[MAX_POOLS];
static uint32_t next_gen = 1;
static _Atomic uint64_t kept_total; /* anything kept at all: a settle reads the driver only then */
static pthread_mutex_t books_m = PTHREAD_MUTEX_INITIALIZER;

void gem_pools_reset_after_fork(void)
{
    pthread_mutex_init(&books_m, NULL);
    memset(books, 0, sizeof(books));
    atomic_store(&kept_total, 0);
}

static uint64_t ticket_of(int slot)
{
    return (uint64_t)books[slot].gen << 8 | (uint64_t)slot;
}

/* books_m held.  The live book of (pool, dev), made if `make` (NULL: none, or no room: then
 * the pool is not tracked and its frees give their bytes back at once, as before). */
static struct pool_book *book_of(CUmemoryPool pool, int dev, int make)
{
    struct pool_book *free_slot = NULL;
    for (int i = 0; i < MAX_POOLS; i++) {
        if (books[i].pool == pool && books[i].dev == dev && !books[i].destroyed)
            return &books[i];
        if (books[i].pool == NULL && free_slot == NULL)
            free_slot = &books[i];
    }
    if (!make)
        return NULL;
    if (free_slot == NULL) {
        static _Atomic int said;
        if (!atomic_exchange(&said, 1))
            GEM_LOG(GEM_LOG_WARN, "more than %d memory pools: what the others keep after a free "
                    "is not counted", MAX_POOLS);
        return NULL;
    }
    *free_slot = (struct pool_book){.pool = pool, .dev = dev, .gen = next_gen};
    next_gen = next_gen + 1 ? next_gen + 1 : 1; /* (a ticket of 0 is none) */
    return free_slot;
}

/* books_m held.  The book a ticket names (NULL: stale or none). */
static struct pool_book *book_of_ticket(uint64_t ticket)
{
    int slot = (int)(ticket & 0xff);
    if (ticket == 0 || slot >= MAX_POOLS || books[slot].pool == NULL ||
        books[slot].gen != (uint32_t)(ticket >> 8))
        return NULL;
    return &books[slot];
}

static void add_kept(struct pool_book *b, uint64_t bytes)
{
    atomic_fetch_add(&kept_total, bytes);
    b->kept += bytes;
}

static void sub_kept(struct pool_book *b, uint64_t bytes)
{
    atomic_fetch_sub(&kept_total, bytes);
    b->kept -= bytes;
}

/* books_m held.  A book that holds nothing any more frees its slot. */
static void drop_if_empty(struct pool_book *b)
{
    if (b->lent == 0 && b->kept == 0 && b->drawing == 0)
        memset(b, 0, sizeof(*b));
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

/* books_m held.  What the driver says `b`'s pool reserves (0 where it cannot say). */
static uint64_t reserved_of(const struct pool_book *b)
{
    __typeof__(&cuMemPoolGetAttribute) get = REAL_AUX(cuMemPoolGetAttribute);
    cuuint64_t reserved = 0;
    if (get == NULL || get(b->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS)
        return 0;
    return reserved;
}

/* books_m held.  What of `b`'s kept bytes its pool no longer reserves goes to back[dev].  A
 * destroyed pool's handle is not the driver's any more: its book waits for its frees. */
static void settle_locked(struct pool_book *b, uint64_t *back)
{
    if (b->destroyed || b->kept == 0)
        return;
    uint64_t held = b->lent + b->drawing, reserved = reserved_of(b);
    uint64_t spare = reserved > held ? reserved - held : 0;
    if (b->kept <= spare)
        return;
    uint64_t gone = b->kept - spare;
    sub_kept(b, gone);
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
        if (books[i].pool != NULL)
            settle_locked(&books[i], back);
    pthread_mutex_unlock(&books_m);
    give_all(back);
    for (int d = 0; d < GEM_MAX_DEVICES; d++)
        if (back[d] > 0)
            return 1;
    return 0;
}

void gem_pool_draw(CUmemoryPool pool, int dev, uint64_t bytes, struct gem_pool_draw *d)
{
    *d = (struct gem_pool_draw){0};
    pthread_mutex_lock(&books_m);
    struct pool_book *b = book_of(pool, dev, 1);
    if (b != NULL) {
        d->ticket = ticket_of((int)(b - books));
        d->drawn = b->kept < bytes ? b->kept : bytes;
        sub_kept(b, d->drawn);
        b->drawing += d->drawn;
        if (d->drawn > 0)
            d->reserved_before = reserved_of(b);
    }
    pthread_mutex_unlock(&books_m);
}

/* books_m held.  A destroyed pool that lends nothing and has nothing in flight: its reserve
 * is gone, and what its book kept goes to the caller. */
static uint64_t last_of_destroyed(struct pool_book *b)
{
    uint64_t back = 0;
    if (b->destroyed && b->lent == 0 && b->drawing == 0) {
        back = b->kept;
        sub_kept(b, b->kept);
    }
    drop_if_empty(b);
    return back;
}

void gem_pool_undraw(const struct gem_pool_draw *d, int dev)
{
    uint64_t back = 0;
    pthread_mutex_lock(&books_m);
    struct pool_book *b = book_of_ticket(d->ticket);
    if (b != NULL) {
        b->drawing -= d->drawn;
        add_kept(b, d->drawn);
        back = last_of_destroyed(b); /* (destroyed while this allocation was in flight) */
    }
    pthread_mutex_unlock(&books_m);
    if (back > 0)
        gem_lease_give(dev, back);
}

/* books_m held.  After an allocation of `bytes` that drew `d->drawn`: how far the pool's
 * reserve rose across the call past what was reserved for it (bytes - drawn), up to what it
 * drew (the pool grew where it was thought to reuse).  The rise, not the reserve: the
 * driver's rounding of its reserve is not counted, as on the other paths. */
static uint64_t grown_past(const struct pool_book *b, const struct gem_pool_draw *d,
                           uint64_t bytes)
{
    if (d->drawn == 0)
        return 0;
    uint64_t after = reserved_of(b), asked = bytes - d->drawn;
    uint64_t rise = after > d->reserved_before ? after - d->reserved_before : 0;
    uint64_t over = rise > asked ? rise - asked : 0;
    return over < d->drawn ? over : d->drawn;
}

uint64_t gem_pool_lent(const struct gem_pool_draw *d, int dev, uint64_t bytes)
{
    uint64_t grown = 0, ticket = d->ticket;
    pthread_mutex_lock(&books_m);
    struct pool_book *b = book_of_ticket(ticket);
    if (b != NULL) {
        b->drawing -= d->drawn;
        b->lent += bytes;
        grown = grown_past(b, d, bytes);
    } else {
        ticket = 0; /* no book (more pools than books): its free gives its bytes back at once */
    }
    pthread_mutex_unlock(&books_m);
    if (grown == 0)
        return ticket;
    if (gem_lease_take(dev, grown, NULL)) {
        pthread_mutex_lock(&books_m);
        if ((b = book_of_ticket(ticket)) != NULL)
            add_kept(b, grown); /* counted now, and given back once the pool lets it go */
        pthread_mutex_unlock(&books_m);
        if (b == NULL)
            gem_lease_give(dev, grown);
    } else {
        GEM_LOG(GEM_LOG_WARN, "memory pool grew %llu B past what was counted, over the memory "
                "limit", (unsigned long long)grown);
    }
    return ticket;
}

uint64_t gem_pool_returned(uint64_t ticket, uint64_t bytes, int counted)
{
    uint64_t back = counted ? bytes : 0;
    pthread_mutex_lock(&books_m);
    struct pool_book *b = book_of_ticket(ticket);
    if (b != NULL) {
        b->lent -= bytes < b->lent ? bytes : b->lent;
        if (counted) {
            add_kept(b, bytes);
            back = 0;
        }
        back += last_of_destroyed(b); /* (its last allocation) */
    }
    pthread_mutex_unlock(&books_m);
    return back;
}

/* books_m held.  Mark `pool`'s live books destroyed (the slots marked, as bits); those that
 * lend nothing give what they kept to back[dev]. */
static uint64_t mark_destroyed(CUmemoryPool pool, uint64_t *back)
{
    uint64_t marked = 0;
    for (int i = 0; i < MAX_POOLS; i++) {
        struct pool_book *b = &books[i];
        if (b->pool != pool || b->destroyed)
            continue;
        b->destroyed = 1;
        marked |= 1ull << i;
        int dev = b->dev; /* (read before the book may be dropped) */
        back[dev] += last_of_destroyed(b);
    }
    return marked;
}

/* books_m held.  The destroy failed: the pool is still the driver's, with all it kept. */
static void unmark_destroyed(CUmemoryPool pool, uint64_t marked, uint64_t *back)
{
    for (int i = 0; i < MAX_POOLS; i++)
        if ((marked >> i & 1) && books[i].pool == pool)
            books[i].destroyed = 0;
    for (int d = 0; d < GEM_MAX_DEVICES; d++) {
        struct pool_book *b = back[d] > 0 ? book_of(pool, d, 1) : NULL;
        if (b != NULL) {
            add_kept(b, back[d]);
            back[d] = 0;
        }
    }
}

uint64_t gem_pools_kept(int dev)
{
    uint64_t total = 0;
    pthread_mutex_lock(&books_m);
    for (int i = 0; i < MAX_POOLS; i++)
        if (books[i].pool != NULL && books[i].dev == dev)
            total += books[i].kept + books[i].drawing;
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

/* Marked before the call: a settle meanwhile would read a handle the driver no longer knows
 * as a pool that reserves nothing. */
GEM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    GEM_ENTER(cuMemPoolDestroy);
    if (GEM_PASS())
        return REAL(cuMemPoolDestroy)(pool);
    uint64_t back[GEM_MAX_DEVICES] = {0};
    pthread_mutex_lock(&books_m);
    uint64_t marked = mark_destroyed(pool, back);
    pthread_mutex_unlock(&books_m);
    CUresult r = REAL(cuMemPoolDestroy)(pool);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&books_m);
        unmark_destroyed(pool, marked, back);
        pthread_mutex_unlock(&books_m);
    }
    give_all(back);
    return r;
}
