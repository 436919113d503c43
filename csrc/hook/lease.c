/* Memory leases: bytes reserved at the pod manager in chunks and spent locally, so that most
 * allocations and frees make no round trip.  A 2 MiB cuMemAlloc takes about 40 us on the H100
 * and a round trip to the pod manager as long again (bench S7: +124 % without leases).
 *
 * The pod manager counts a process's unspent lease as used, so the sum over the client's
 * processes still never exceeds its limit; a process holds at most two chunks unspent.  A lease
 * is asked as such (GEM_MEM_LEASE): granted only if it fits now.  Near the limit a process gives
 * its own lease back and asks for the exact amount (GEM_MEM_ALLOC); if that does not fit while
 * other processes of the client hold leases, the pod manager recalls them (an unsolicited
 * RECALL, answered here from ipc.c's watcher thread, whatever the application's threads are
 * doing) and answers once the bytes are back.  So no lease, ours or a neighbour's, makes an
 * allocation fail that would fit.  GEMINI_MEM_LEASE_MB sets the chunk (default 32; 0: none). */
#include "internal.h"
#include "gemini/wire.h"

#include <stdlib.h>

#define DEFAULT_LEASE_MB 32

static uint64_t spare[GEM_MAX_DEVICES];
static uint64_t drops[GEM_MAX_DEVICES]; /* gem_lease_drop's calls: a new pod manager each */
static pthread_mutex_t lease_m = PTHREAD_MUTEX_INITIALIZER;
static uint64_t chunk_bytes;
static pthread_once_t chunk_once = PTHREAD_ONCE_INIT;

static void read_chunk(void)
{
    /* up to 1 TiB: a lease is spare memory held against the limit, never more than a GPU has */
    long long mb = gem_env_number("GEMINI_MEM_LEASE_MB", DEFAULT_LEASE_MB, 0, 1 << 20);
    chunk_bytes = (uint64_t)mb << 20;
}

static uint64_t chunk(void)
{
    pthread_once(&chunk_once, read_chunk);
    return chunk_bytes;
}

static uint64_t take_spare(int dev, uint64_t want)
{
    pthread_mutex_lock(&lease_m);
    uint64_t got = spare[dev] < want ? spare[dev] : want;
    spare[dev] -= got;
    pthread_mutex_unlock(&lease_m);
    return got;
}

/* A MEM_UPDATE of `kind`, retried until answered: its verdict. */
static int ask(int dev, uint64_t bytes, int kind)
{
    int verdict = 0;
    gem_ipc_mem_update(dev, bytes, kind, &verdict);
    return verdict;
}

/* Bytes back to the pod manager, on the connection open now only, and never again: one whose
 * connection closed gave this process's bytes back then, and a new one counts only what is
 * still allocated (memory.c claims it on connecting).  Retried until answered, a free hung
 * while the pod manager was gone, and reached the new one after the claim (counted off
 * twice: 256 MiB counted with 512 allocated). */
static void tell_freed(int dev, uint64_t bytes)
{
    int verdict = 0;
    if (gem_ipc_mem_update_open(dev, bytes, GEM_MEM_FREE, &verdict) != 0)
        GEM_LOG(GEM_LOG_DEBUG, "%llu B given back: no pod manager took them (gone, or not "
                "yet told)", (unsigned long long)bytes);
}

/* Under the lock of the drop that a new pod manager's claim makes (memory.c): read with a take,
 * no claim falls between the bytes becoming ours and the count said with them. */
uint64_t gem_lease_drops(int dev)
{
    pthread_mutex_lock(&lease_m);
    uint64_t v = drops[dev];
    pthread_mutex_unlock(&lease_m);
    return v;
}

int gem_lease_take(int dev, uint64_t bytes, uint64_t *drops_at)
{
    uint64_t ignored;
    drops_at = drops_at != NULL ? drops_at : &ignored;
    pthread_mutex_lock(&lease_m);
    int local = spare[dev] >= bytes;
    if (local)
        spare[dev] -= bytes;
    *drops_at = drops[dev];
    pthread_mutex_unlock(&lease_m);
    if (local)
        return 1;
    uint64_t extra = chunk();
    if (extra > 0 && ask(dev, bytes + extra, GEM_MEM_LEASE)) {
        *drops_at = gem_lease_drops(dev); /* (granted after its connection's claim) */
        gem_lease_give(dev, extra);
        return 1;
    }
    /* Near the limit: give back what we hold unspent, then ask for exactly this much. */
    uint64_t held = take_spare(dev, UINT64_MAX);
    if (held > 0)
        tell_freed(dev, held);
    int granted = ask(dev, bytes, GEM_MEM_ALLOC);
    *drops_at = gem_lease_drops(dev);
    return granted;
}

void gem_lease_give(int dev, uint64_t bytes)
{
    uint64_t c = chunk();
    pthread_mutex_lock(&lease_m);
    spare[dev] += bytes;
    uint64_t excess = spare[dev] > 2 * c ? spare[dev] - c : 0;
    spare[dev] -= excess;
    pthread_mutex_unlock(&lease_m);
    if (excess > 0)
        tell_freed(dev, excess);
}

uint64_t gem_lease_spare(int dev)
{
    pthread_mutex_lock(&lease_m);
    uint64_t v = spare[dev];
    pthread_mutex_unlock(&lease_m);
    return v;
}

void gem_lease_drop(int dev)
{
    pthread_mutex_lock(&lease_m);
    spare[dev] = 0; /* a new pod manager never granted it */
    drops[dev]++;
    pthread_mutex_unlock(&lease_m);
}

static uint64_t take_all(int dev)
{
    return take_spare(dev, UINT64_MAX);
}

/* A neighbour in the client needs bytes that may sit in our lease: give back all we hold
 * unspent, in one RECALL that is also our answer (0 B when we hold none).  Only on the
 * connection that asked, and the bytes taken under its lock: after a reconnect our lease is
 * dropped and a new pod manager never granted it.  An allocation that needs more later asks
 * again, exactly or for a new lease. */
void gem_lease_on_recall(int dev, uint64_t conn_gen, const uint8_t *msg)
{
    uint64_t lacks = gem_wire_rsp_recall_bytes(msg), taken = 0;
    if (gem_ipc_recall_once(dev, conn_gen, take_all, &taken) == 0)
        GEM_LOG(GEM_LOG_DEBUG, "lease recalled (a neighbour lacks %llu B): %llu B given back",
                (unsigned long long)lacks, (unsigned long long)taken);
}

void gem_lease_reset_after_fork(void)
{
    pthread_mutex_init(&lease_m, NULL);
    for (int d = 0; d < GEM_MAX_DEVICES; d++)
        spare[d] = 0; /* the parent's lease is the parent's */
}
