/* Device memory of the simulated GPU: a byte budget per device in the shared segment, charged
 * to the allocating process (given back when it frees, or when another process finds it dead),
 * unique aligned device addresses, and this process's table of live allocations. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "fake_internal.h"

CUresult fake_mem_charge(int dev, uint64_t bytes)
{
    dev = fake_physical(dev);
    if (dev < 0 || dev >= FAKE_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct fake_dev_state *d = &s->dev[dev];
    if (d->mem_used + bytes > d->mem_total || d->mem_used + bytes < bytes) {
        fake_reap_locked(s);
        if (d->mem_used + bytes > d->mem_total || d->mem_used + bytes < bytes) {
            fake_unlock(s);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    d->mem_used += bytes;
    struct fake_proc_slot *me = fake_self_locked(s);
    if (me != NULL)
        me->mem[dev] += bytes;
    fake_unlock(s);
    return CUDA_SUCCESS;
}

void fake_mem_uncharge(int dev, uint64_t bytes)
{
    dev = fake_physical(dev);
    if (dev < 0 || dev >= FAKE_MAX_DEVICES)
        return;
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return;
    struct fake_dev_state *d = &s->dev[dev];
    d->mem_used = d->mem_used >= bytes ? d->mem_used - bytes : 0;
    struct fake_proc_slot *me = fake_self_locked(s);
    if (me != NULL)
        me->mem[dev] = me->mem[dev] >= bytes ? me->mem[dev] - bytes : 0;
    fake_unlock(s);
}

uint64_t fake_addr_new(uint64_t bytes)
{
    struct fake_shm *s = fake_shm_get();
    uint64_t span = (bytes + FAKE_GRANULARITY - 1) / FAKE_GRANULARITY * FAKE_GRANULARITY;
    span += FAKE_GRANULARITY; /* a gap: a pointer past one allocation never lands in the next */
    if (s == NULL)
        return 0;
    return __atomic_fetch_add(&s->next_addr, span, __ATOMIC_RELAXED);
}

CUresult fake_mem_info(int dev, uint64_t *free_b, uint64_t *total_b)
{
    dev = fake_physical(dev);
    if (dev < 0 || dev >= FAKE_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    fake_reap_locked(s);
    struct fake_dev_state *d = &s->dev[dev];
    if (free_b != NULL)
        *free_b = d->mem_total > d->mem_used ? d->mem_total - d->mem_used : 0;
    if (total_b != NULL)
        *total_b = d->mem_total;
    fake_unlock(s);
    return CUDA_SUCCESS;
}

/* ---- this process's allocations ------------------------------------------------------------ */
#define NBUCKETS 4096

struct alloc_node {
    struct alloc_node *next;
    uint64_t key;
    uint64_t bytes;
    int dev;
    int kind;
    void *owner;
};

static pthread_mutex_t g_tab_mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc_node *g_tab[NBUCKETS];

static size_t bucket(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)(key % NBUCKETS);
}

int fake_alloc_put(uint64_t key, uint64_t bytes, int dev, int kind)
{
    return fake_alloc_put_owned(key, bytes, dev, kind, NULL);
}

int fake_alloc_put_owned(uint64_t key, uint64_t bytes, int dev, int kind, void *owner)
{
    struct alloc_node *n = malloc(sizeof *n);
    if (n == NULL)
        return -1;
    n->key = key;
    n->bytes = bytes;
    n->dev = dev;
    n->kind = kind;
    n->owner = owner;
    pthread_mutex_lock(&g_tab_mu);
    size_t b = bucket(key);
    n->next = g_tab[b];
    g_tab[b] = n;
    pthread_mutex_unlock(&g_tab_mu);
    return 0;
}

/* The node of `key` (one of `kind_mask`'s kinds) out of the table; NULL: none. */
static struct alloc_node *take_node(uint64_t key, int kind_mask)
{
    struct alloc_node *found = NULL;
    pthread_mutex_lock(&g_tab_mu);
    for (struct alloc_node **pp = &g_tab[bucket(key)]; *pp != NULL; pp = &(*pp)->next) {
        struct alloc_node *n = *pp;
        if (n->key == key && (FAKE_KIND_BIT(n->kind) & kind_mask)) {
            *pp = n->next;
            found = n;
            break;
        }
    }
    pthread_mutex_unlock(&g_tab_mu);
    return found;
}

int fake_alloc_take(uint64_t key, int kind_mask, uint64_t *bytes, int *dev, int *kind)
{
    struct alloc_node *n = take_node(key, kind_mask);
    if (n == NULL)
        return -1;
    if (bytes != NULL)
        *bytes = n->bytes;
    if (dev != NULL)
        *dev = n->dev;
    if (kind != NULL)
        *kind = n->kind;
    free(n);
    return 0;
}

int fake_alloc_take_owned(uint64_t key, int kind_mask, uint64_t *bytes, void **owner)
{
    struct alloc_node *n = take_node(key, kind_mask);
    *owner = n != NULL ? n->owner : NULL;
    if (n == NULL)
        return -1;
    *bytes = n->bytes;
    free(n);
    return 0;
}

int fake_alloc_find(uint64_t key, int kind_mask, uint64_t *bytes, int *dev)
{
    int rc = -1;
    pthread_mutex_lock(&g_tab_mu);
    for (struct alloc_node *n = g_tab[bucket(key)]; n != NULL; n = n->next) {
        if (n->key == key && (FAKE_KIND_BIT(n->kind) & kind_mask)) {
            if (bytes != NULL)
                *bytes = n->bytes;
            if (dev != NULL)
                *dev = n->dev;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&g_tab_mu);
    return rc;
}

void fake_memory_atfork_child(void)
{
    /* The parent's allocations are charged to the parent: forget them here (nodes leak). */
    pthread_mutex_init(&g_tab_mu, NULL);
    for (size_t i = 0; i < NBUCKETS; i++)
        g_tab[i] = NULL;
}
