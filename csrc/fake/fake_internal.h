/* Private to the fake driver (csrc/fake).  Nothing declared here is exported: the version script
 * libcuda.map exports only cu* and fake_* names, and these helpers are also marked hidden.
 *
 * The simulated GPU lives in a POSIX shared-memory segment shared by every process of the
 * machine (name: env GEMINI_FAKE_GPU, default /gemini-fake-gpu-<uid>), guarded by one
 * process-shared robust mutex.  Everything else (streams, events, contexts, the table of this
 * process's allocations) is process-local. */
#ifndef GEMINI_FAKE_INTERNAL_H
#define GEMINI_FAKE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gemini/cuda_subset.h"

#include "fake_extra.h"
#include "fake_symbols.h"

#define FAKE_HIDDEN __attribute__((visibility("hidden")))

#define FAKE_MAX_DEVICES 8
#define FAKE_MAX_PROCS 256
#define FAKE_MAX_CLIENTS 64
#define FAKE_MAX_FAILS 32
#define FAKE_CLIENT_NAME_LEN 64
#define FAKE_SEGMENT_NAME_LEN 128

#define FAKE_SHM_MAGIC 0x67656d66616b6531ULL /* "gemfake1" */
#define FAKE_DEFAULT_MEM (16ULL << 30)
#define FAKE_DEFAULT_KERNEL_NS 1000ULL
#define FAKE_DRIVER_VERSION 13000
#define FAKE_QUEUE_DEPTH 1024               /* kernels not yet finished, per stream */
#define FAKE_QUEUE_AHEAD_NS 2000000000ULL   /* a stream's tail may run 2 s ahead of now */
#define FAKE_GRANULARITY (2ULL << 20)       /* VMM granularity; also the address stride */
#define FAKE_ADDR_BASE 0x7f0000000000ULL    /* first simulated device address */

struct fake_dev_state {
    uint64_t busy_until; /* CLOCK_MONOTONIC ns at which the last enqueued kernel ends */
    uint64_t busy_since; /* ... and at which the GPU's current run of kernels began */
    uint64_t busy_ns;    /* total simulated kernel time enqueued */
    uint64_t kernels;
    uint64_t mem_total;
    uint64_t mem_used;
};

/* Unified-memory accounting per process (fake_pid_um_count). */
enum fake_um_counter {
    FAKE_UM_PREFETCH_DEVICE = 0, /* cuMemPrefetchAsync* to a device */
    FAKE_UM_PREFETCH_HOST = 1,   /* ... to the host */
    FAKE_UM_UNORDERED = 2,       /* launches not ordered after the process's latest device prefetch */
    FAKE_UM_COUNTERS = 3
};

struct fake_proc_slot {
    int32_t pid;      /* 0: never used */
    int32_t alive;    /* 0 once the process was seen dead (its memory then given back) */
    uint64_t starttime; /* /proc/<pid>/stat field 22, tells a reused pid apart */
    uint64_t seq;       /* registration order: the newest slot of a pid wins */
    int32_t client;     /* index in clients[], -1 without POD_NAME */
    int32_t pad;
    uint64_t gpu_ns;
    uint64_t kernels;
    uint64_t mem[FAKE_MAX_DEVICES];
    uint64_t calls[FAKE_N_SYMBOLS];
    uint64_t um[FAKE_UM_COUNTERS]; /* enum fake_um_counter */
};

struct fake_client_slot {
    char name[FAKE_CLIENT_NAME_LEN];
    uint64_t gpu_ns;
    uint64_t kernels;
};

struct fake_fail {
    int32_t id; /* enum fake_symbol_id, -1: free */
    int32_t code;
};

struct fake_shm {
    uint64_t magic; /* written last by the creator */
    uint64_t layout_size;
    pthread_mutex_t mu;
    uint64_t next_addr;
    uint64_t seq;
    uint64_t default_kernel_ns;
    uint32_t nclients;
    uint32_t fails_pending; /* read without the lock on every call */
    struct fake_fail fails[FAKE_MAX_FAILS];
    struct fake_dev_state dev[FAKE_MAX_DEVICES];
    struct fake_client_slot clients[FAKE_MAX_CLIENTS];
    struct fake_proc_slot procs[FAKE_MAX_PROCS];
};

/* ---- shm.c: the segment, its lock, this process's slot ------------------------------------ */
FAKE_HIDDEN struct fake_shm *fake_shm_get(void);     /* attaches on first use; NULL on failure */
FAKE_HIDDEN int fake_shm_attach(const char *name);   /* (re)attach; NULL = env/default; 0 or -errno */
FAKE_HIDDEN const char *fake_shm_name(void);
FAKE_HIDDEN int fake_shm_unlink(void);
FAKE_HIDDEN struct fake_shm *fake_lock(void);        /* NULL if no segment; handles EOWNERDEAD */
FAKE_HIDDEN void fake_unlock(struct fake_shm *s);
FAKE_HIDDEN struct fake_proc_slot *fake_self_locked(struct fake_shm *s); /* registers on first use */
FAKE_HIDDEN int fake_reap_locked(struct fake_shm *s); /* gives back memory of dead processes */
FAKE_HIDDEN void fake_shm_init_locked(struct fake_shm *s); /* fresh state from the environment */
FAKE_HIDDEN CUresult fake_enter(enum fake_symbol_id id); /* count the call, injected failure */
FAKE_HIDDEN uint64_t fake_self_calls(enum fake_symbol_id id);
FAKE_HIDDEN void fake_self_um_count(enum fake_um_counter c);
/* launch.c: a prefetch to a device was enqueued on h (later launches must be ordered after it) */
FAKE_HIDDEN void fake_stream_note_prefetch(CUstream h, int per_thread);
FAKE_HIDDEN int fake_symbol_id(const char *name);     /* -1 if not exported */
FAKE_HIDDEN uint64_t fake_env_u64(const char *name, uint64_t dflt); /* unset, unparsable: dflt */

/* ---- timeline.c: the simulated GPU's kernel queue ------------------------------------------ */
/* fake_now_ns() (exported, fake_extra.h) is the timeline's clock. */
FAKE_HIDDEN void fake_sleep_until(uint64_t t_ns);
FAKE_HIDDEN uint64_t fake_sync_late_ns(void); /* GEMINI_FAKE_SYNC_LATE_MS, in ns */
/* Pure: a kernel of `dur` ns enqueued at `now` behind `busy_until` (GPU) and `tail` (stream). */
FAKE_HIDDEN uint64_t fake_tl_step(uint64_t now, uint64_t busy_until, uint64_t tail, uint64_t dur);
/* Enqueue n kernels on device dev behind *tail; ends[i] gets each end (may be NULL); updates
 * *tail; charges this process and its client. */
FAKE_HIDDEN CUresult fake_tl_enqueue(int dev, uint64_t *tail, const uint64_t *durs, size_t n,
                                     uint64_t *ends);
FAKE_HIDDEN uint64_t fake_kernel_ns_default(void);

/* ---- memory.c: device memory of the simulated GPU ------------------------------------------- */
FAKE_HIDDEN CUresult fake_mem_charge(int dev, uint64_t bytes);
FAKE_HIDDEN void fake_mem_uncharge(int dev, uint64_t bytes);
FAKE_HIDDEN uint64_t fake_addr_new(uint64_t bytes);
FAKE_HIDDEN CUresult fake_mem_info(int dev, uint64_t *free_b, uint64_t *total_b);
enum fake_alloc_kind {
    FAKE_ALLOC_PLAIN = 1,
    FAKE_ALLOC_PITCH,
    FAKE_ALLOC_MANAGED,
    FAKE_ALLOC_VMM_HANDLE,
    FAKE_ALLOC_VMM_RESERVE,
    FAKE_ALLOC_POOL, /* lent by a memory pool (pools.c): its owner is the pool */
};
/* Process-local table: key (device pointer or VMM handle) -> size, device, kind. */
FAKE_HIDDEN int fake_alloc_put(uint64_t key, uint64_t bytes, int dev, int kind);
FAKE_HIDDEN int fake_alloc_take(uint64_t key, int kind_mask, uint64_t *bytes, int *dev, int *kind);
FAKE_HIDDEN int fake_alloc_find(uint64_t key, int kind_mask, uint64_t *bytes, int *dev);
/* The same with an owner kept beside the allocation (a pool's, FAKE_ALLOC_POOL). */
FAKE_HIDDEN int fake_alloc_put_owned(uint64_t key, uint64_t bytes, int dev, int kind, void *owner);
FAKE_HIDDEN int fake_alloc_take_owned(uint64_t key, int kind_mask, uint64_t *bytes, void **owner);

/* ---- pools.c: memory pools (cuMemAllocAsync and cuMemAllocFromPoolAsync allocate from them) -- */
FAKE_HIDDEN CUresult fake_pool_alloc_current(CUdeviceptr *dptr, uint64_t bytes, int dev);
FAKE_HIDDEN CUresult fake_pool_alloc(CUdeviceptr *dptr, uint64_t bytes, CUmemoryPool pool);
FAKE_HIDDEN int fake_pool_free(CUdeviceptr dptr); /* 0: it was a pool's; -1: not one */
FAKE_HIDDEN void fake_pools_sync(void); /* a synchronisation: pools over their threshold trim */
#define FAKE_KIND_BIT(k) (1 << (k))

/* ---- driver.c: process-local driver state shared by the entry-point files --------------------- */
FAKE_HIDDEN int fake_initialized(void);
FAKE_HIDDEN int fake_device_count(void);
/* The simulated GPU behind a device ordinal of this process (CUDA_VISIBLE_DEVICES: indices or
 * the fake's UUIDs, GPU-fa4e0000-0000-0000-0000-0000000000NN with NN the GPU in hex). */
FAKE_HIDDEN int fake_physical(int ordinal);
FAKE_HIDDEN void fake_uuid_text(int physical, char *out, size_t cap);
FAKE_HIDDEN CUresult fake_current_device(int *dev); /* the current context's device */
/* The current context (NULL if none) and its life: what was made in it (an event, a stream)
 * dies with that life, when the context is destroyed or (a primary) reset or released for the
 * last time. */
FAKE_HIDDEN CUcontext fake_current_ctx_life(uint64_t *life);
FAKE_HIDDEN int fake_ctx_alive(CUcontext ctx, uint64_t life);
/* The process's latest kernel end on dev: over all streams (context sync), and over the streams
 * the legacy default stream waits for (blocking: not created with CU_STREAM_NON_BLOCKING). */
FAKE_HIDDEN void fake_proc_tail_note(int dev, uint64_t end, int blocking);
FAKE_HIDDEN uint64_t fake_proc_tail_blocking(int dev);
FAKE_HIDDEN void fake_function_load(CUfunction f); /* its first launch: lazy loading */
/* A kernel's validity and duration (gem_sleep_kernel: its first parameter, in ns). */
FAKE_HIDDEN CUresult fake_function_ns(CUfunction f, void **kernelParams, void **extra,
                                      uint64_t *ns);
FAKE_HIDDEN uint64_t fake_proc_tail(int dev);
FAKE_HIDDEN void fake_driver_atfork_child(void);
/* launch.c: a stream handle (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a created one) -> its
 * device; per_thread: the caller is a _ptsz/_ptds entry point (0 means the per-thread stream). */
FAKE_HIDDEN CUresult fake_stream_device(CUstream h, int per_thread, int *dev);
FAKE_HIDDEN void fake_streams_atfork_child(void);
FAKE_HIDDEN int fake_capture_forbids(void); /* a potentially unsafe call now breaks captures */
FAKE_HIDDEN void fake_memory_atfork_child(void);

#define FAKE_ENTER(sym)                                    \
    do {                                                   \
        CUresult fake_enter_rc = fake_enter(FAKE_ID_##sym); \
        if (fake_enter_rc != CUDA_SUCCESS)                 \
            return fake_enter_rc;                          \
    } while (0)

/* Entry points that need cuInit and a current context (the device lands in `dev`). */
#define FAKE_NEED_INIT()                      \
    do {                                      \
        if (!fake_initialized())              \
            return CUDA_ERROR_NOT_INITIALIZED; \
    } while (0)

#endif
